//! Planning one file: take out this rule set's old regions, plan every rule (its target,
//! then its edits: a `Fix`, see `fix`), run the checks over the fixes (`check`: compiled
//! code, other regions, overlaps, then on the planned text: syntax, names, bindings), and
//! apply them as one set of non-overlapping edits. Nothing is written here; the caller
//! decides once every file is planned.

use crate::python::KindOf;
use std::ops::Range;

use tree_sitter::Node;

use super::anchor;
use super::check::{self, Block, Placed, compiled::CompiledHere};
pub use super::edit::PlanContext;
use super::edit::{Edit, Shape, line_start};
use super::failure::{Failure, FailureKind};
pub(crate) use super::fix::describe_anchor_failure;
use super::fix::{self, Fix};
use super::imports;
use super::markers;
use crate::kept::Kept;
use crate::python::{self, Source};
use crate::rules::CompiledRule;

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
        if node.kind_of() == "block"
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

/// Plan `rules` on `file` whose current text is `on_disk`.
pub fn plan_file(
    file: &str,
    on_disk: &str,
    rules: &[(usize, &CompiledRule)],
    ctx: &PlanContext,
) -> FilePlan {
    let mut plan = FilePlan {
        file: file.to_string(),
        before: on_disk.to_string(),
        after: on_disk.to_string(),
        applied: Vec::new(),
        failures: Vec::new(),
    };
    let fail = |kind, line: Option<usize>, rule: Option<&CompiledRule>, message: String| Failure {
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
    // The tree and the blocks are many small allocations: left to the system when the
    // process ends next (see `kept::Kept`).
    let src = Kept::new(Source::parse_reusing(stripped.clone()));
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

    // 3. Plan each rule: where it lands, then, where it may land (not in compiled code),
    // its edits. Failures keep the rules' order.
    let mut cache = anchor::PoolCache::excluding(foreign.clone());
    let forbid = &ctx.rule_set.manifest.forbid_inside;
    let compiled = CompiledHere::of(&src, forbid);
    let mut fixes: Vec<Fix> = Vec::new();
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
        let planned = fix::target(&src, rule, index, &mut cache).and_then(|t| {
            if let Some(why) = compiled.refusal(&t.functions, forbid) {
                return Err(Box::new(fail(
                    FailureKind::Placement,
                    Some(t.line),
                    Some(rule),
                    why,
                )));
            }
            fix::edits(&src, rule, &t, ctx, &unit, &cache)
        });
        match planned {
            Ok(f) => {
                if let Some(hit) = check::overlap::inside_foreign(&f.edits, &foreign) {
                    plan.failures.push(fail(
                        FailureKind::Placement,
                        Some(src.line_of(hit.start)),
                        Some(rule),
                        "the edit would land inside a region of another rule set; remove that first".into(),
                    ));
                    continue;
                }
                fixes.push(f);
            }
            Err(mut f) => {
                f.file = file.to_string();
                plan.failures.push(*f);
            }
        }
    }
    // Imports the templates need, each added once, as one-line regions (see markers).
    let mut import_lines: Vec<String> = Vec::new();
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
                    if import_lines.contains(&line) {
                        continue;
                    }
                    let lines = markers::render_inline(&line, set_name, &rule.id, blank);
                    import_lines.push(line);
                    fixes.push(Fix {
                        rule: index,
                        scope_at: at,
                        edits: vec![Edit {
                            start: at,
                            end: at,
                            // An import binds names; it reads none worth checking.
                            checked: Vec::new(),
                            lines,
                            rule_index: index,
                            stash_eols: Vec::new(),
                            base: String::new(),
                            shape: Shape::Import,
                            original: Vec::new(),
                        }],
                    });
                }
                Err(e) => {
                    plan.failures
                        .push(fail(FailureKind::Template, None, Some(rule), e.to_string()))
                }
            }
        }
    }
    if !plan.failures.is_empty() {
        return plan;
    }

    // 4. Order and check for overlaps.
    let mut edits: Vec<(Edit, usize)> = fixes
        .into_iter()
        .flat_map(|f| {
            let (scope_at, rule) = (f.scope_at, f.rule);
            f.edits.into_iter().map(move |e| {
                debug_assert_eq!(e.rule_index, rule, "a fix's edits are its rule's");
                (e, scope_at)
            })
        })
        .collect();
    edits.sort_by_key(|(e, _)| (e.start, e.end != e.start, e.rule_index));
    let (edits, scopes): (Vec<Edit>, Vec<usize>) = edits.into_iter().unzip();
    for (a, b) in check::overlap::overlapping(&edits) {
        let (ra, rb) = (
            &ctx.rule_set.rules[edits[a].rule_index],
            &ctx.rule_set.rules[edits[b].rule_index],
        );
        plan.failures.push(fail(
            FailureKind::Overlap,
            Some(src.line_of(edits[b].start)),
            Some(rb),
            format!("edits the same lines as rule {}", ra.id),
        ));
    }
    if !plan.failures.is_empty() {
        return plan;
    }

    // 5. Apply, noting where each region starts in the planned text.
    let (out, spans, first_lines) = apply(&stripped, &edits, eol);
    let mut seq = 0;
    let placed: Kept<Vec<Placed>> = Kept::new(
        edits
            .iter()
            .enumerate()
            .map(|(i, e)| {
                seq = if i > 0 && edits[i - 1].start == e.start {
                    seq + 1
                } else {
                    1
                };
                Placed {
                    edit: e,
                    scope_at: scopes[i],
                    seq,
                    first_line: first_lines[i],
                    block: Block::of(e),
                }
            })
            .collect(),
    );

    // 6. The planned text parses: each region on its own, the whole file only where a
    // region's own parse cannot decide.
    let verdict = check::syntax::blocks(&placed);
    let whole = match verdict {
        check::syntax::Verdict::Parses => {
            // Debug builds (the tests) check the decision against the whole file.
            if cfg!(debug_assertions) {
                let err = check::syntax::whole_file(&src, out.clone(), &spans);
                assert!(
                    err.is_none(),
                    "{file}: the regions parse on their own, the file does not: {err:?}"
                );
            }
            None
        }
        check::syntax::Verdict::Undecided => check::syntax::whole_file(&src, out.clone(), &spans),
    };
    if let Some(err) = whole {
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

    // 7. Every name inserted code reads exists where it lands.
    let replaced: Vec<Range<usize>> = edits
        .iter()
        .filter(|e| e.end > e.start && e.shape == Shape::Statements)
        .map(|e| e.start..e.end)
        .collect();
    for m in check::names::check(&src, &placed, replaced) {
        let rule = &ctx.rule_set.rules[m.rule];
        let why = if m.later {
            "which is only assigned after this point"
        } else {
            "which is not defined there (not a parameter, local, import, builtin or a name the rules define)"
        };
        plan.failures.push(Failure {
            name: Some(m.name.clone()),
            ..fail(
                FailureKind::Name,
                Some(m.line),
                Some(rule),
                format!(
                    "the inserted code reads `{}`, {why}; the rule does not fit this revision",
                    m.name
                ),
            )
        });
    }
    // 8. Inserted code binds only names of its own.
    let gone: Vec<Range<usize>> = edits
        .iter()
        .filter(|e| e.drops_host_code())
        .map(|e| e.start..e.end)
        .collect();
    for clash in check::binds::check(&src, &placed, &gone) {
        let rule = &ctx.rule_set.rules[clash.rule];
        plan.failures.push(Failure {
            name: Some(clash.name.clone()),
            ..fail(
                FailureKind::Name,
                Some(clash.line),
                Some(rule),
                clash.message(),
            )
        });
    }
    if !plan.failures.is_empty() {
        return plan;
    }
    plan.applied = rules.iter().map(|(_, r)| r.id.clone()).collect();
    plan.after = out;
    plan
}

/// `stripped` with `edits` (sorted, not overlapping) applied: the text, each edit as
/// `(start, old_end, new_len)` (for a reparse), and the 1-based line each region starts
/// on in the text.
fn apply(
    stripped: &str,
    edits: &[Edit],
    eol: &str,
) -> (String, Vec<(usize, usize, usize)>, Vec<usize>) {
    let mut out = String::with_capacity(stripped.len() + edits.len() * 256);
    let mut spans = Vec::with_capacity(edits.len());
    let mut first_lines = Vec::with_capacity(edits.len());
    let mut cursor = 0;
    let mut line = 1;
    for e in edits {
        let kept = &stripped[cursor..e.start];
        line += memchr::memchr_iter(b'\n', kept.as_bytes()).count();
        out.push_str(kept);
        first_lines.push(line);
        let start = out.len();
        for (i, l) in e.lines.iter().enumerate() {
            out.push_str(l);
            out.push_str(
                i.checked_sub(1)
                    .and_then(|k| e.stash_eols.get(k))
                    .copied()
                    .unwrap_or(eol),
            );
        }
        // Each of the region's lines ends with a line end; what it replaced is not there.
        line += e.lines.len();
        spans.push((e.start, e.end, out.len() - start));
        cursor = e.end;
    }
    out.push_str(&stripped[cursor..]);
    (out, spans, first_lines)
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
