//! Planning one rule: where it lands (its target: the scope and anchor resolved, the
//! functions around it), then the edits that put its code there (the template rendered
//! for that place, in its marked region). A rule's plan is data, a `Fix`; whether it may
//! go there (compiled code, overlaps, syntax, names) is decided by the passes in
//! `check`.

use crate::python::KindOf;
use tree_sitter::Node;

use super::anchor::{self, AnchorFailure, Problem};
use super::edit::{Edit, PlanContext, Shape, line_start, next_line_start};
use super::failure::{Failure, FailureKind};
use super::markers;
use super::signature;
use super::template::{self, Original};
use crate::python::{self, Source};
use crate::rules::{CompiledRule, Position};

/// Where a rule lands.
pub(super) struct Target<'t> {
    /// The rule's index in the rule set.
    pub(super) rule: usize,
    /// 1-based line of the anchor (or of the scope, for body positions).
    pub(super) line: usize,
    /// The functions around the target, innermost first (the target itself for body
    /// positions in a `def`), as (class, function).
    pub(super) functions: Vec<(Option<String>, String)>,
    pub(super) resolved: anchor::Resolved<'t>,
}

/// A rule's plan: its edits of the file, as data.
pub(super) struct Fix {
    /// The rule's index in the rule set.
    pub(super) rule: usize,
    /// A byte of the original text in the scope the code lands in (the anchor
    /// statement's start, a statement of the body), for the name checks.
    pub(super) scope_at: usize,
    pub(super) edits: Vec<Edit>,
}

fn is_future_import(node: Node) -> bool {
    node.kind_of() == "future_import_statement"
}

/// The statement's own line must hold nothing before it but indentation, and nothing
/// after it but a comment.
fn check_own_lines(src: &Source, stmt: Node) -> Result<(), String> {
    let text = &src.text;
    let ls = line_start(text, stmt.start_byte());
    if !text[ls..stmt.start_byte()].trim().is_empty() {
        return Err("the anchor shares its first line with other code".into());
    }
    let end = stmt.end_byte();
    let nl = text[end..].find('\n').map_or(text.len(), |i| end + i);
    let rest = text[end..nl].trim();
    if !rest.is_empty() && !rest.starts_with('#') {
        return Err(format!(
            "the anchor shares its last line with other code (`{rest}`)"
        ));
    }
    if nl == text.len() {
        return Err(
            "the anchor is on the last line and the file does not end with a newline".into(),
        );
    }
    Ok(())
}

/// Comments directly above `stmt` (no blank line between) belong to it: `before` goes
/// above them.
fn first_attached_comment(src: &Source, stmt: Node) -> usize {
    let mut first = stmt;
    while let Some(prev) = first.prev_sibling() {
        let adjacent = prev.end_position().row + 1 == first.start_position().row;
        let own_line = src.text[line_start(&src.text, prev.start_byte())..prev.start_byte()]
            .trim()
            .is_empty();
        // A marker of another region is not a comment about this statement.
        let marker = markers::is_marker_line(src.text_of(prev));
        if prev.kind_of() == "comment" && adjacent && own_line && !marker {
            first = prev;
        } else {
            break;
        }
    }
    line_start(&src.text, first.start_byte())
}

/// Whether a byte offset lies inside a string literal that started before it.
fn inside_string(src: &Source, at: usize) -> bool {
    let Some(mut node) = src.root().descendant_for_byte_range(at, at) else {
        return false;
    };
    loop {
        if node.kind_of() == "string" && node.start_byte() < at {
            return true;
        }
        match node.parent() {
            Some(p) => node = p,
            None => return false,
        }
    }
}

pub(crate) fn describe_anchor_failure(f: &AnchorFailure) -> (String, Vec<(usize, String)>) {
    let place = match (&f.scope_header, f.searched_from) {
        (Some(h), Some(line)) => format!(" in `{h}` (line {line})"),
        _ => String::new(),
    };
    match &f.problem {
        Problem::NotFound(c) => (
            format!("{} `{}` not found{place}", f.role, f.pattern),
            c.clone(),
        ),
        Problem::Ambiguous(lines) => {
            let l: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            (
                format!(
                    "{} `{}` matches {} statements{place} (lines {}); the rule must name one (narrow the scope, or set occurrence/following)",
                    f.role,
                    f.pattern,
                    lines.len(),
                    l.join(", ")
                ),
                Vec::new(),
            )
        }
    }
}

/// A rule's failure, before its file is known (the planner fills it in).
fn fail(
    rule: &CompiledRule,
    kind: FailureKind,
    line: Option<usize>,
    message: String,
) -> Box<Failure> {
    Box::new(Failure {
        kind,
        file: String::new(),
        line,
        rule: Some(rule.id.clone()),
        group: Some(rule.group.clone()),
        message,
        candidates: Vec::new(),
        name: None,
    })
}

/// Where a rule lands: its scope and anchor resolved (the first half of planning it).
pub(super) fn target<'t>(
    src: &'t Source,
    rule: &CompiledRule,
    index: usize,
    cache: &mut anchor::PoolCache<'t>,
) -> Result<Target<'t>, Box<Failure>> {
    let resolved = anchor::resolve(src, rule, cache).map_err(|f| {
        let (message, candidates) = describe_anchor_failure(&f);
        let mut failure = fail(rule, FailureKind::Anchor, f.searched_from, message);
        failure.candidates = candidates;
        failure
    })?;
    let node = resolved.anchor.unwrap_or(resolved.scope);
    let mut functions = python::enclosing_functions(node);
    if node.kind_of() == "function_definition" && !rule.position.needs_anchor() {
        functions.insert(0, node);
    }
    let functions = functions
        .into_iter()
        .map(|func| {
            let name = python::definition_name(src, func)
                .unwrap_or("?")
                .to_string();
            let class = python::enclosing_class(func)
                .and_then(|c| python::definition_name(src, c))
                .map(str::to_string);
            (class, name)
        })
        .collect();
    Ok(Target {
        rule: index,
        line: (node.start_position().row + 1),
        functions,
        resolved,
    })
}

/// The edits of a rule at its target (the second half): the template rendered for its
/// place, in its region. With `scope_at`, a byte of the scope the code lands in.
pub(super) fn edits<'t>(
    src: &'t Source,
    rule: &CompiledRule,
    target: &Target<'t>,
    ctx: &PlanContext,
    unit: &str,
    cache: &anchor::PoolCache<'t>,
) -> Result<Fix, Box<Failure>> {
    let index = target.rule;
    let resolved = &target.resolved;
    let fail = |kind, line: Option<usize>, message: String| fail(rule, kind, line, message);
    let text = &src.text;
    let set_name = ctx.rule_set.manifest.name.as_str();
    let fix = |scope_at: usize, edits: Vec<Edit>| Fix {
        rule: index,
        scope_at,
        edits,
    };

    let render = |original: Option<&Original>, base: &str| {
        template::render(
            &rule.template,
            &resolved.bindings,
            original,
            base,
            unit,
            ctx.style.line_length,
        )
        .map_err(|e| fail(FailureKind::Template, None, e.to_string()))
    };
    let params_of = |used: &[String]| -> Vec<(String, String)> {
        used.iter()
            .map(|k| (k.clone(), ctx.params[k].clone()))
            .collect()
    };
    let region = |base: &str, stash: &[&str], r: &template::Rendered| {
        let lines = markers::render(
            base,
            set_name,
            &rule.id,
            &params_of(&r.used_params),
            stash,
            &r.lines,
        );
        let offset = 1 + stash.len();
        let checked = (0..r.lines.len())
            .filter(|i| !r.from_original.contains(i) && !r.lines[*i].trim().is_empty())
            .map(|i| i + offset)
            .collect();
        let original = r.from_original.iter().map(|i| i + offset).collect();
        (lines, checked, original)
    };

    match rule.position {
        Position::Before | Position::After | Position::Replace | Position::Wrap => {
            let stmt = resolved
                .anchor
                .expect("positions with an anchor resolve one");
            check_own_lines(src, stmt).map_err(|m| {
                fail(
                    FailureKind::Placement,
                    Some(stmt.start_position().row + 1),
                    m,
                )
            })?;
            let line = stmt.start_position().row + 1;
            let is_docstring = stmt
                .parent()
                .and_then(python::docstring)
                .is_some_and(|d| d.id() == stmt.id());
            if rule.position == Position::Before && (is_docstring || is_future_import(stmt)) {
                return Err(fail(
                    FailureKind::Placement,
                    Some(line),
                    "refusing to insert above a docstring or a `from __future__` import".into(),
                ));
            }
            let ls = line_start(text, stmt.start_byte());
            let base = &text[ls..stmt.start_byte()];
            let end = next_line_start(text, stmt.end_byte());
            match rule.position {
                Position::Before | Position::After => {
                    let r = render(None, base)?;
                    let at = if rule.position == Position::Before {
                        cache.outside(first_attached_comment(src, stmt))
                    } else {
                        end
                    };
                    let (lines, checked, original) = region(base, &[], &r);
                    Ok(fix(
                        stmt.start_byte(),
                        vec![Edit {
                            start: at,
                            end: at,
                            lines,
                            checked,
                            rule_index: index,
                            stash_eols: Vec::new(),
                            base: base.to_string(),
                            shape: Shape::Statements,
                            original,
                        }],
                    ))
                }
                _ => {
                    let original_text = &text[ls..end];
                    let lines: Vec<&str> = original_text
                        .strip_suffix('\n')
                        .unwrap_or(original_text)
                        .split('\n')
                        .map(|l| l.trim_end_matches('\r'))
                        .collect();
                    let mut in_string = Vec::with_capacity(lines.len());
                    let mut offset = ls;
                    for l in &lines {
                        in_string.push(offset != ls && inside_string(src, offset));
                        offset += l.len()
                            + 1
                            + usize::from(text[offset..].starts_with(&format!("{l}\r\n")));
                    }
                    let stash_eols: Vec<&'static str> = original_text
                        .split_inclusive('\n')
                        .map(|l| if l.ends_with("\r\n") { "\r\n" } else { "\n" })
                        .collect();
                    let original = Original {
                        lines: lines.clone(),
                        in_string,
                    };
                    let r = render(Some(&original), base)?;
                    let (region_lines, checked, original) = region(base, &lines, &r);
                    Ok(fix(
                        stmt.start_byte(),
                        vec![Edit {
                            start: ls,
                            end,
                            lines: region_lines,
                            checked,
                            rule_index: index,
                            stash_eols,
                            base: base.to_string(),
                            shape: Shape::Statements,
                            original,
                        }],
                    ))
                }
            }
        }
        Position::BodyStart | Position::BodyEnd => {
            let scope = resolved.scope;
            let block = if scope.kind_of() == "module" {
                Some(scope)
            } else {
                scope.field("body")
            };
            let Some(block) = block else {
                return Err(fail(
                    FailureKind::Placement,
                    None,
                    "the scope has no body".into(),
                ));
            };
            let stmts = python::statements_of(block);
            let Some(first) = stmts.first().copied() else {
                return Err(fail(
                    FailureKind::Placement,
                    None,
                    "the scope's body is empty".into(),
                ));
            };
            if scope.kind_of() != "module"
                && first.start_position().row == scope.start_position().row
            {
                return Err(fail(
                    FailureKind::Placement,
                    Some(scope.start_position().row + 1),
                    "the body is on the same line as its header; put it on its own lines first"
                        .into(),
                ));
            }
            let indent_of =
                |n: Node| text[line_start(text, n.start_byte())..n.start_byte()].to_string();
            let base = if scope.kind_of() == "module" {
                String::new()
            } else {
                indent_of(first)
            };
            let at = if rule.position == Position::BodyEnd {
                let last = *stmts.last().expect("non-empty");
                check_own_lines(src, last).map_err(|m| {
                    fail(
                        FailureKind::Placement,
                        Some(last.start_position().row + 1),
                        m,
                    )
                })?;
                next_line_start(text, last.end_byte())
            } else {
                let mut after: Option<Node> = python::docstring(block);
                if scope.kind_of() == "module" {
                    for s in &stmts {
                        if is_future_import(*s) || after.is_some_and(|a| a.id() == s.id()) {
                            after = Some(*s);
                        } else {
                            break;
                        }
                    }
                }
                match after {
                    Some(node) => next_line_start(text, node.end_byte()),
                    None => {
                        let mut cursor = block.walk();
                        let first_child = block.children(&mut cursor).next().unwrap_or(first);
                        line_start(text, first_child.start_byte())
                    }
                }
            };
            let r = render(None, &base)?;
            let (lines, checked, original) = region(&base, &[], &r);
            let scope_at = if rule.position == Position::BodyEnd {
                stmts.last().expect("non-empty").start_byte()
            } else {
                first.start_byte()
            };
            Ok(fix(
                scope_at,
                vec![Edit {
                    start: at,
                    end: at,
                    lines,
                    checked,
                    rule_index: index,
                    stash_eols: Vec::new(),
                    base,
                    shape: Shape::Statements,
                    original,
                }],
            ))
        }
        Position::AddParameter => {
            // The parameter is bound in the function's body: the name checks look there.
            let body_at = resolved
                .scope
                .field("body")
                .map_or(resolved.scope.start_byte(), |b| b.start_byte());
            signature::plan_add_parameter(src, rule, index, resolved, ctx, unit)
                .map(|edits| fix(body_at, edits))
                .map_err(|m| {
                    fail(
                        FailureKind::Placement,
                        Some(src.line_of(resolved.scope.start_byte())),
                        m.to_string(),
                    )
                })
        }
    }
}
