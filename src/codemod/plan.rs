//! Planning one file: take out this rule set's old regions, resolve every rule's anchor,
//! render the regions, check that they may go where they go, apply them as one set of
//! non-overlapping edits, and check the result (it parses, every name it reads exists).
//! Nothing is written here; the caller decides once every file is planned.

use std::ops::Range;

use tree_sitter::Node;

use super::anchor::{self, AnchorFailure, Problem};
pub use super::edit::PlanContext;
use super::edit::{Edit, line_start, next_line_start};
use super::failure::{Failure, FailureKind};
use super::imports;
use super::markers;
use super::signature;
use super::template::{self, Original};
use crate::python::{self, Source, binds, names};
use crate::rules::{Position, Rule};

/// The plan for one file.
#[derive(Debug, Clone)]
pub struct FilePlan {
    pub file: String,
    /// The text on disk.
    pub before: String,
    /// The text to write (equal to `before` when nothing changes).
    pub after: String,
    /// Rules applied, in order.
    pub applied: Vec<String>,
    pub failures: Vec<Failure>,
}

/// The file's indentation unit: what the first indented block adds to its header's
/// indentation (a tab, or some spaces), as the parse tree has it (text in a docstring
/// or a bracket is no indentation).
fn indent_unit(src: &Source) -> String {
    let text = &src.text;
    let mut stack = vec![src.root()];
    while let Some(node) = stack.pop() {
        if node.kind() == "block"
            && let Some(parent) = node.parent()
            && let Some(first) = python::statements_of(node).first()
            && first.start_position().row > parent.start_position().row
        {
            let indent_of = |n: Node| &text[line_start(text, n.start_byte())..n.start_byte()];
            let (outer, inner) = (indent_of(parent), indent_of(*first));
            if let Some(unit) = inner.strip_prefix(outer)
                && !unit.is_empty()
                && unit.trim().is_empty()
            {
                return unit.to_string();
            }
        }
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        // Depth first, in source order: the first block of the file decides.
        stack.extend(children.into_iter().rev());
    }
    "    ".to_string()
}

fn is_future_import(node: Node) -> bool {
    node.kind() == "future_import_statement"
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
        if prev.kind() == "comment" && adjacent && own_line && !marker {
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
        if node.kind() == "string" && node.start_byte() < at {
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

/// Plan `rules` on `file` whose current text is `on_disk`.
pub fn plan_file(
    file: &str,
    on_disk: &str,
    rules: &[(usize, &Rule)],
    ctx: &PlanContext,
) -> FilePlan {
    let mut plan = FilePlan {
        file: file.to_string(),
        before: on_disk.to_string(),
        after: on_disk.to_string(),
        applied: Vec::new(),
        failures: Vec::new(),
    };
    let fail = |kind, line: Option<usize>, rule: Option<&Rule>, message: String| Failure {
        kind,
        file: file.to_string(),
        line,
        rule: rule.map(|r| r.id.clone()),
        group: rule.map(|r| r.group.clone()),
        message,
        candidates: Vec::new(),
        name: None,
    };
    let set_name = ctx.rule_set.manifest.name.as_str();

    // 1. Take out this rule set's regions; refuse if any was edited by hand.
    let stripped = match markers::strip(on_disk, |r| r.rule_set == set_name) {
        Ok((text, removed)) => {
            if let Some(r) = removed.iter().find(|r| !r.intact) {
                // Name the region's own rule (and its group), not the rules planned here.
                let owner = ctx.rule_set.rules.iter().find(|x| x.id == r.rule);
                plan.failures.push(Failure {
                    rule: Some(r.rule.clone()),
                    group: owner.map(|o| o.group.clone()),
                    ..fail(
                        FailureKind::Markers,
                        Some(r.marker_line + 1),
                        None,
                        format!(
                            "the region of rule {} was edited by hand since it was added; review it, then undo the edit or run `instrument remove --force` to take it out (the original comes back from the marker)",
                            r.rule
                        ),
                    )
                });
                return plan;
            }
            text
        }
        Err(e) => {
            plan.failures
                .push(fail(FailureKind::Markers, Some(e.line), None, e.message));
            return plan;
        }
    };
    if rules.is_empty() {
        plan.after = stripped;
        return plan;
    }
    if !stripped.is_empty() && !stripped.ends_with('\n') {
        plan.failures.push(fail(
            FailureKind::Placement,
            None,
            None,
            "the file does not end with a newline; add one (ruff's W292 asks for it too)".into(),
        ));
        return plan;
    }

    // 2. Parse; refuse a file the grammar does not accept.
    let src = Source::parse_reusing(stripped.clone());
    if let Some(err) = src.first_error() {
        plan.failures.push(fail(
            FailureKind::Syntax,
            Some(err.line),
            None,
            format!(
                "the file does not parse (tree-sitter error at column {}); fix it or check that this is Python, nothing was changed",
                err.column
            ),
        ));
        return plan;
    }
    let foreign: Vec<Range<usize>> = match markers::find_regions(&stripped) {
        Ok(regions) => regions
            .iter()
            .map(|r| line_byte_range(&stripped, r.open_line, r.close_line))
            .collect(),
        Err(e) => {
            plan.failures
                .push(fail(FailureKind::Markers, Some(e.line), None, e.message));
            return plan;
        }
    };
    let unit = indent_unit(&src);
    // As ruff's `line-ending = "auto"`: the ending of the file's first line.
    let eol = match on_disk.find('\n') {
        Some(i) if i > 0 && on_disk.as_bytes()[i - 1] == b'\r' => "\r\n",
        _ => "\n",
    };

    // 3. Resolve and render each rule.
    let mut edits: Vec<Edit> = Vec::new();
    let mut cache = anchor::PoolCache::excluding(foreign.clone());
    let compilers: Vec<String> = ctx
        .rule_set
        .manifest
        .forbid_inside
        .iter()
        .map(|f| f.decorator.clone())
        .collect();
    let compiled = CompiledHere::of(&src, &compilers);
    for &(index, rule) in rules {
        if let Some(b) = ctx.blocked.get(&index) {
            plan.failures.push(fail(
                FailureKind::Role,
                b.line,
                Some(rule),
                b.message.clone(),
            ));
            continue;
        }
        match plan_rule(&src, rule, index, ctx, &unit, &mut cache, &compiled) {
            Ok(mut e) => {
                // An insertion may sit right before or after another set's region, never
                // inside it; a replacement may not touch it at all.
                let inside = |e: &Edit, f: &Range<usize>| {
                    if e.start == e.end {
                        f.start < e.start && e.start < f.end
                    } else {
                        e.start < f.end && f.start < e.end
                    }
                };
                if let Some(hit) = e.iter().find(|e| foreign.iter().any(|f| inside(e, f))) {
                    plan.failures.push(fail(
                        FailureKind::Placement,
                        Some(src.line_of(hit.start)),
                        Some(rule),
                        "the edit would land inside a region of another rule set; remove that first".into(),
                    ));
                    continue;
                }
                edits.append(&mut e);
            }
            Err(mut f) => {
                f.file = file.to_string();
                plan.failures.push(*f);
            }
        }
    }
    // Imports the templates need, each added once, as one-line regions (see markers).
    let mut import_edits: Vec<(usize, String, markers::Blank, usize)> = Vec::new();
    for &(index, rule) in rules {
        if plan
            .failures
            .iter()
            .any(|f| f.rule.as_deref() == Some(rule.id.as_str()))
        {
            continue;
        }
        for import in &rule.imports {
            match imports::plan_import(&src, import, ctx.first_party) {
                Ok(None) => {}
                Ok(Some((at, line, blank))) => {
                    if !import_edits.iter().any(|(_, l, _, _)| *l == line) {
                        import_edits.push((at, line, blank, index));
                    }
                }
                Err(msg) => plan
                    .failures
                    .push(fail(FailureKind::Template, None, Some(rule), msg)),
            }
        }
    }
    for (at, line, blank, index) in import_edits {
        let rule = &ctx.rule_set.rules[index];
        let lines = markers::render_inline(&line, set_name, &rule.id, blank);
        // An import binds names; it reads none worth checking.
        edits.push(Edit {
            start: at,
            end: at,
            checked: Vec::new(),
            lines,
            rule_index: index,
            stash_eols: Vec::new(),
        });
    }
    if !plan.failures.is_empty() {
        return plan;
    }

    // 4. Order and check for overlaps, then apply.
    edits.sort_by_key(|e| (e.start, e.end != e.start, e.rule_index));
    for pair in edits.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.end > b.start || (a.start == b.start && a.end != a.start && b.end != b.start) {
            let (ra, rb) = (
                &ctx.rule_set.rules[a.rule_index],
                &ctx.rule_set.rules[b.rule_index],
            );
            plan.failures.push(fail(
                FailureKind::Overlap,
                Some(src.line_of(b.start)),
                Some(rb),
                format!("edits the same lines as rule {}", ra.id),
            ));
        }
    }
    if !plan.failures.is_empty() {
        return plan;
    }
    let mut out = String::with_capacity(stripped.len() + edits.len() * 256);
    let mut cursor = 0;
    let mut checked_ranges: Vec<(Range<usize>, usize)> = Vec::new();
    for e in &edits {
        out.push_str(&stripped[cursor..e.start]);
        for (i, line) in e.lines.iter().enumerate() {
            let start = out.len();
            out.push_str(line);
            if e.checked.contains(&i) {
                checked_ranges.push((start..out.len(), e.rule_index));
            }
            out.push_str(
                i.checked_sub(1)
                    .and_then(|k| e.stash_eols.get(k))
                    .unwrap_or(&eol),
            );
        }
        cursor = e.end;
    }
    out.push_str(&stripped[cursor..]);

    // 5. The result must parse, and every name inserted code reads must exist there.
    // Only the edited parts are parsed again.
    let spans: Vec<(usize, usize, usize)> = edits
        .iter()
        .map(|e| {
            let eols = (0..e.lines.len())
                .map(|i| {
                    i.checked_sub(1)
                        .and_then(|k| e.stash_eols.get(k))
                        .unwrap_or(&eol)
                        .len()
                })
                .sum::<usize>();
            (
                e.start,
                e.end,
                e.lines.iter().map(|l| l.len()).sum::<usize>() + eols,
            )
        })
        .collect();
    let result = src.reparse(out, &spans);
    if let Some(err) = result.first_error() {
        let rule = edits
            .iter()
            .map(|e| &ctx.rule_set.rules[e.rule_index])
            .map(|r| r.id.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        plan.failures.push(fail(
            FailureKind::Syntax,
            Some(err.line),
            None,
            format!("the planned edits would not parse at column {} (rules {rule}); nothing was written", err.column),
        ));
        return plan;
    }
    let mut reported = std::collections::HashSet::new();
    // Checked lines that follow one another (only a line end between them) are read as
    // one range: the same identifiers in the same order, one walk instead of one a line.
    let mut ranges: Vec<(Range<usize>, usize)> = Vec::new();
    for (r, rule) in &checked_ranges {
        match ranges.last_mut() {
            Some((last, last_rule))
                if *last_rule == *rule
                    && matches!(&result.text[last.end..r.start], "\n" | "\r\n") =>
            {
                last.end = r.end
            }
            _ => ranges.push((r.clone(), *rule)),
        }
    }
    let read_ranges: Vec<Range<usize>> = ranges.iter().map(|(r, _)| r.clone()).collect();
    for (i, read) in names::unbound_reads_in(&result, &read_ranges) {
        {
            let rule = &ctx.rule_set.rules[ranges[i].1];
            if !reported.insert((rule.id.clone(), read.name.clone())) {
                continue;
            }
            let why = if read.bound_later {
                "which is only assigned after this point"
            } else {
                "which is not defined there (not a parameter, local, import, builtin or a name the rules define)"
            };
            plan.failures.push(Failure {
                name: Some(read.name.clone()),
                ..fail(
                    FailureKind::Name,
                    Some(result.line_of(read.at)),
                    Some(rule),
                    format!(
                        "the inserted code reads `{}`, {why}; the rule does not fit this revision",
                        read.name
                    ),
                )
            });
        }
    }
    // 6. Inserted code binds only names of its own (python::binds).
    let replaced: Vec<(usize, Range<usize>)> = edits
        .iter()
        .filter(|e| e.end > e.start)
        .map(|e| (e.rule_index, e.start..e.end))
        .collect();
    for clash in binds::check(&src, &result, &checked_ranges, &replaced) {
        let rule = &ctx.rule_set.rules[clash.rule];
        let line = Some(result.line_of(clash.at));
        plan.failures.push(Failure {
            name: Some(clash.name.clone()),
            ..fail(FailureKind::Name, line, Some(rule), clash.message())
        });
    }
    if !plan.failures.is_empty() {
        return plan;
    }
    plan.applied = rules.iter().map(|(_, r)| r.id.clone()).collect();
    plan.after = result.text;
    plan
}

fn line_byte_range(text: &str, first_line: usize, last_line: usize) -> Range<usize> {
    let mut start = 0;
    let mut line = 0;
    let mut end = text.len();
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' {
            line += 1;
            if line == first_line {
                start = i + 1;
            }
            if line == last_line + 1 {
                end = i + 1;
                break;
            }
        }
    }
    start..end
}

/// Resolve one rule and build its edit(s).
/// What in a file is compiled (see `python::compiled`).
struct CompiledHere {
    direct: Vec<python::compiled::Compiled>,
    /// (class or "", function) run inside a compiled function of the file.
    inside: std::collections::BTreeSet<(String, String)>,
}

impl CompiledHere {
    fn of(src: &Source, compilers: &[String]) -> CompiledHere {
        // Most files never mention a compiler: skip the scan for them.
        let mentioned = compilers
            .iter()
            .any(|c| src.text.contains(c.rsplit('.').next().unwrap_or(c)));
        if !mentioned {
            return CompiledHere {
                direct: Vec::new(),
                inside: Default::default(),
            };
        }
        let direct = python::compiled::facts(src).compiled(compilers);
        let mut inside = python::compiled::run_inside(src, &direct);
        // A function compiled by assignment is compiled with what is inserted into it.
        inside.extend(
            direct
                .iter()
                .filter(|c| c.wrapped)
                .map(|c| (c.class.clone().unwrap_or_default(), c.function.clone())),
        );
        CompiledHere { direct, inside }
    }
}

fn plan_rule<'t>(
    src: &'t Source,
    rule: &Rule,
    index: usize,
    ctx: &PlanContext,
    unit: &str,
    cache: &mut anchor::PoolCache<'t>,
    compiled: &CompiledHere,
) -> Result<Vec<Edit>, Box<Failure>> {
    let fail = |kind, line: Option<usize>, message: String| {
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
    };
    let resolved =
        anchor::resolve(src, rule, &ctx.rule_set.patterns[index], cache).map_err(|f| {
            let (message, candidates) = describe_anchor_failure(&f);
            let mut failure = fail(FailureKind::Anchor, f.searched_from, message);
            failure.candidates = candidates;
            failure
        })?;
    let text = &src.text;
    let set_name = ctx.rule_set.manifest.name.as_str();

    // Never inside compiled code: a function compiled in any spelling, or one that runs
    // inside a compiled function of this file.
    let target = resolved.anchor.unwrap_or(resolved.scope);
    let mut functions = python::enclosing_functions(target);
    if target.kind() == "function_definition" && !rule.position.needs_anchor() {
        functions.insert(0, target);
    }
    for func in functions {
        let name = python::definition_name(src, func).unwrap_or("?");
        let class = python::enclosing_class(func).and_then(|c| python::definition_name(src, c));
        let key = (class.map(str::to_string), name.to_string());
        let refuse = |why: String, reason: &str| {
            fail(
                FailureKind::Placement,
                Some(src.line_of(target.start_byte())),
                format!("refusing to insert into `{name}`, which is {why}: {reason}"),
            )
        };
        if let Some(c) = compiled
            .direct
            .iter()
            .find(|c| (c.class.clone(), c.function.clone()) == key)
        {
            let reason = ctx
                .rule_set
                .manifest
                .forbid_inside
                .iter()
                .find(|f| f.decorator == c.by)
                .map_or("code there is traced into a graph", |f| f.reason.as_str());
            return Err(refuse(c.how.clone(), reason));
        }
        if compiled
            .inside
            .contains(&(key.0.clone().unwrap_or_default(), key.1.clone()))
        {
            return Err(refuse(
                "called from compiled code in this file".to_string(),
                "code there is traced into the compiled graph, where a print or synchronize breaks it",
            ));
        }
    }

    let render = |original: Option<&Original>, base: &str| {
        template::render(
            &rule.template,
            ctx.params,
            &resolved.bindings,
            original,
            base,
            unit,
            ctx.style.line_length,
        )
        .map_err(|m| fail(FailureKind::Template, None, m))
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
        (lines, checked)
    };

    match rule.position {
        Position::Before | Position::After | Position::Replace | Position::Wrap => {
            let stmt = resolved
                .anchor
                .expect("positions with an anchor resolve one");
            check_own_lines(src, stmt).map_err(|m| {
                fail(
                    FailureKind::Placement,
                    Some(src.line_of(stmt.start_byte())),
                    m,
                )
            })?;
            let line = src.line_of(stmt.start_byte());
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
                    let (lines, checked) = region(base, &[], &r);
                    Ok(vec![Edit {
                        start: at,
                        end: at,
                        lines,
                        checked,
                        rule_index: index,
                        stash_eols: Vec::new(),
                    }])
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
                    let (region_lines, checked) = region(base, &lines, &r);
                    Ok(vec![Edit {
                        start: ls,
                        end,
                        lines: region_lines,
                        checked,
                        rule_index: index,
                        stash_eols,
                    }])
                }
            }
        }
        Position::BodyStart | Position::BodyEnd => {
            let scope = resolved.scope;
            let block = if scope.kind() == "module" {
                Some(scope)
            } else {
                scope.child_by_field_name("body")
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
            if scope.kind() != "module" && first.start_position().row == scope.start_position().row
            {
                return Err(fail(
                    FailureKind::Placement,
                    Some(src.line_of(scope.start_byte())),
                    "the body is on the same line as its header; put it on its own lines first"
                        .into(),
                ));
            }
            let indent_of =
                |n: Node| text[line_start(text, n.start_byte())..n.start_byte()].to_string();
            let base = if scope.kind() == "module" {
                String::new()
            } else {
                indent_of(first)
            };
            let at = if rule.position == Position::BodyEnd {
                let last = *stmts.last().expect("non-empty");
                check_own_lines(src, last).map_err(|m| {
                    fail(
                        FailureKind::Placement,
                        Some(src.line_of(last.start_byte())),
                        m,
                    )
                })?;
                next_line_start(text, last.end_byte())
            } else {
                let mut after: Option<Node> = python::docstring(block);
                if scope.kind() == "module" {
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
            let (lines, checked) = region(&base, &[], &r);
            Ok(vec![Edit {
                start: at,
                end: at,
                lines,
                checked,
                rule_index: index,
                stash_eols: Vec::new(),
            }])
        }
        Position::AddParameter => {
            signature::plan_add_parameter(src, rule, index, &resolved, ctx, unit).map_err(|m| {
                fail(
                    FailureKind::Placement,
                    Some(src.line_of(resolved.scope.start_byte())),
                    m,
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indent_unit_follows_the_file() {
        let unit = |t: &str| indent_unit(&Source::parse(t.to_string()));
        assert_eq!(unit("def f():\n  return 1\n"), "  ");
        assert_eq!(unit("def f():\n\treturn 1\n"), "\t");
        assert_eq!(unit("x = 1\n"), "    ");
        // A docstring's own indentation is text, not the file's unit.
        assert_eq!(
            unit("\"\"\"Doc:\n  - a list\n\"\"\"\n\n\nclass A:\n    x = 1\n"),
            "    "
        );
    }
}
