//! Planning one file: take out this rule set's old regions, plan every rule (where it
//! lands, then the regions that put its code there: a `Fix`, see `fix`), run the checks
//! over the fixes (`check::PASSES`, stage by stage), and apply them (`edit::apply`). The
//! fixes leave planning with the text they make; nothing is written here: the caller
//! decides once every file is planned.

use std::ops::Range;

use tree_sitter::Node;

use super::anchor;
use super::check::{self, Pass, Stage};
use super::context::FileContext;
pub use super::context::PlanContext;
use super::edit::{self, ApplyError, Region, line_start};
use super::failure::{Failure, FailureKind};
pub(crate) use super::fix::describe_anchor_failure;
use super::fix::{self, Fix};
use super::markers;
use super::planned::Planned;
use crate::kept::Kept;
use crate::python::{self, KindOf, Source};
use crate::rules::CompiledRule;

/// The plan for one file.
#[derive(Debug, Clone)]
pub struct FilePlan {
    pub file: String,
    /// The text on disk.
    pub before: String,
    /// The text to write (equal to `before` when nothing changes): `fixes` applied to
    /// `before` without this rule set's regions (`markers::strip`).
    pub after: String,
    /// Rules applied, in order.
    pub applied: Vec<String>,
    pub failures: Vec<Failure>,
    /// The rules' fixes (imports included), in the rules' order; none when a failure
    /// stopped the file.
    pub(crate) fixes: Vec<Fix>,
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

impl FilePlan {
    /// The plan stopped by `failure`: nothing changes.
    fn stopped(mut self, failure: Failure) -> FilePlan {
        self.failures.push(failure);
        self
    }
}

/// Plan `rules` (with their indices in the rule set) on `file` whose current text is
/// `on_disk`.
pub fn plan_file(
    file: &str,
    on_disk: &str,
    rules: &[(usize, &CompiledRule)],
    ctx: &PlanContext,
) -> FilePlan {
    plan_with(check::PASSES, file, on_disk, rules, ctx)
}

/// `plan_file`, with the checks `passes`.
fn plan_with(
    passes: &[&dyn Pass],
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
        fixes: Vec::new(),
    };
    let stripped = match strip(file, on_disk, ctx) {
        Ok(text) => text,
        Err(failure) => return plan.stopped(*failure),
    };
    if rules.is_empty() {
        plan.after = stripped;
        return plan;
    }
    // The tree and the blocks are many small allocations: left to the system when the
    // process ends next (see `kept::Kept`).
    let (src, foreign) = match parse(file, stripped) {
        Ok((src, foreign)) => (Kept::new(src), foreign),
        Err(failure) => return plan.stopped(*failure),
    };
    let unit = indent_unit(&src);
    let cx = FileContext {
        file,
        plan: ctx,
        src: &src,
        foreign: &foreign,
        unit: &unit,
        eol: edit::eol_of(on_disk),
        planned: None,
    };
    let indices: Vec<usize> = rules.iter().map(|&(i, _)| i).collect();
    match plan_fixes(passes, &cx, &indices) {
        Ok((fixes, after)) => {
            plan.applied = rules.iter().map(|(_, r)| r.id.clone()).collect();
            plan.after = after;
            plan.fixes = fixes;
        }
        Err(failures) => plan.failures = failures,
    }
    plan
}

/// `on_disk` without this rule set's regions; refused if one was edited by hand.
fn strip(file: &str, on_disk: &str, ctx: &PlanContext) -> Result<String, Box<Failure>> {
    let (text, removed) = markers::strip(on_disk, |r| r.rule_set == ctx.set_name())
        .map_err(|e| Failure::new(FailureKind::Markers, file, Some(e.line), e.message))
        .map_err(Box::new)?;
    if let Some(r) = removed.iter().find(|r| !r.intact) {
        // Name the region's own rule (and its group), not the rules planned here.
        let group = ctx.rule_by_id(&r.rule).map(|o| o.group.as_str());
        // The line names the rule already (`rule 5D.return: its region ...`).
        let message = "its region was edited by hand since it was added; review it, then undo the edit or run `instrument remove --force` to take it out (the original comes back from the marker)".to_string();
        let failure = Failure::new(FailureKind::Markers, file, Some(r.marker_line + 1), message);
        return Err(Box::new(failure.for_rule_id(&r.rule, group)));
    }
    Ok(text)
}

/// The stripped text parsed, and the other rule sets' regions in it (as byte ranges);
/// refused when it does not end with a line end, the grammar does not accept it, or those
/// regions' markers are broken.
fn parse(file: &str, stripped: String) -> Result<(Source, Vec<Range<usize>>), Box<Failure>> {
    let fail = |kind, line, message: String| Box::new(Failure::new(kind, file, line, message));
    if !stripped.is_empty() && !stripped.ends_with('\n') {
        return Err(fail(
            FailureKind::Placement,
            None,
            "the file does not end with a newline; add one (ruff's W292 asks for it too)".into(),
        ));
    }
    let src = Source::parse_reusing(stripped);
    if let Some(err) = src.first_error() {
        return Err(fail(
            FailureKind::Syntax,
            Some(err.line),
            format!(
                "the file does not parse (tree-sitter error at column {}); fix it or check that this is Python, nothing was changed",
                err.column
            ),
        ));
    }
    let regions = markers::find_regions(&src.text)
        .map_err(|e| fail(FailureKind::Markers, Some(e.line), e.message))?;
    let foreign = regions
        .iter()
        .map(|r| line_byte_range(&src.text, r.open_line, r.close_line))
        .collect();
    Ok((src, foreign))
}

/// The fixes of `rules` (indices in the rule set, in order) in `cx`'s file, as `passes`
/// let them through, and the text they make; or the failures that stopped the file.
fn plan_fixes(
    passes: &[&dyn Pass],
    cx: &FileContext,
    rules: &[usize],
) -> Result<(Vec<Fix>, String), Vec<Failure>> {
    let fixes = each_rule(passes, cx, rules)?;
    together(passes, cx, fixes)
}

/// Each rule's fix, and the imports they need, in the rules' order; or the failure of each
/// rule that does not fit (the first step or per-fix check it fails, see `check::Stage`),
/// in the rules' order.
fn each_rule(
    passes: &[&dyn Pass],
    cx: &FileContext,
    rules: &[usize],
) -> Result<Vec<Fix>, Vec<Failure>> {
    let mut failed: Vec<Failure> = Vec::new();
    // Where each rule lands.
    let mut cache = anchor::PoolCache::excluding(cx.foreign.to_vec());
    let (mut placed, mut resolved) = (Vec::new(), Vec::new());
    for &index in rules {
        match fix::target(cx, index, &mut cache) {
            Ok((f, r)) => {
                placed.push(f);
                resolved.push(r);
            }
            Err(failure) => failed.push(*failure),
        }
    }
    let refused = check::run(passes, Stage::Place, cx, &placed);
    // Its regions, where it may land.
    let mut fixes = Vec::with_capacity(placed.len());
    for (mut f, r) in placed.into_iter().zip(&resolved) {
        if names(&refused, cx, f.rule) {
            continue;
        }
        match fix::build(cx, &f, r, &cache) {
            Ok(regions) => {
                f.regions = regions;
                fixes.push(f);
            }
            Err(failure) => failed.push(*failure),
        }
    }
    failed.extend(refused);
    let refused = check::run(passes, Stage::Edits, cx, &fixes);
    fixes.retain(|f| !names(&refused, cx, f.rule));
    failed.extend(refused);
    let order = |f: &Failure| {
        let rule = |&i: &usize| f.rule.as_deref() == Some(cx.plan.rule(i).id.as_str());
        rules.iter().position(rule).unwrap_or(usize::MAX)
    };
    failed.sort_by_key(order);
    // The imports the rules that fit need.
    let fit: Vec<usize> = rules
        .iter()
        .copied()
        .filter(|&i| !names(&failed, cx, i))
        .collect();
    let (imports, import_failures) = fix::imports(cx, &fit);
    failed.extend(import_failures);
    stop_at(failed)?;
    // In the rules' order: the order of edits at one place.
    fixes.extend(imports);
    fixes.sort_by_key(|f| f.rule);
    Ok(fixes)
}

/// The text `fixes` make, once they pass the checks of the fixes together, stage by
/// stage; or the failures of the first stage that fails.
fn together(
    passes: &[&dyn Pass],
    cx: &FileContext,
    fixes: Vec<Fix>,
) -> Result<(Vec<Fix>, String), Vec<Failure>> {
    stop_at(check::run(passes, Stage::Together, cx, &fixes))?;
    let text = {
        let regions: Vec<(usize, &Region)> = fixes
            .iter()
            .flat_map(|f| f.regions.iter().map(move |r| (f.rule, r)))
            .collect();
        // The overlap pass refuses what `apply` would; should it be left out, `apply` still
        // refuses.
        let planned = Planned::new(&cx.src.text, &regions).map_err(|e| {
            let line = match &e {
                ApplyError::Overlap { second, .. } => Some(cx.src.line_of(second.start)),
                ApplyError::OutOfRange { .. } => None,
            };
            vec![cx.fail(FailureKind::Overlap, line, e.to_string())]
        })?;
        let with_text = FileContext {
            planned: Some(&planned),
            ..*cx
        };
        for stage in [Stage::Parse, Stage::Names] {
            stop_at(check::run(passes, stage, &with_text, &fixes))?;
        }
        planned.text
    };
    Ok((fixes, text))
}

/// Whether one of `failures` is of rule `index`.
fn names(failures: &[Failure], cx: &FileContext, index: usize) -> bool {
    let id = cx.plan.rule(index).id.as_str();
    failures.iter().any(|f| f.rule.as_deref() == Some(id))
}

/// Stop when there are failures.
fn stop_at(failures: Vec<Failure>) -> Result<(), Vec<Failure>> {
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures)
    }
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
    use crate::codemod::edit::Edit;
    use crate::codemod::fix::Place;
    use crate::rules::CompiledSet;
    use serde_json::json;
    use std::collections::BTreeMap;

    /// A rule set of its own: `rules` (TOML `[[rule]]` tables) in a set named `t`, which
    /// forbids code inside `torch.compile`.
    fn rule_set(rules: &str) -> CompiledSet {
        let dir = tempfile::tempdir().unwrap();
        let manifest = "name = \"t\"\ndescription = \"t\"\nsource_dir = \".\"\n\n[compiled]\nreason = \"it is compiled\"\n";
        std::fs::write(dir.path().join("ruleset.toml"), manifest).unwrap();
        std::fs::write(dir.path().join("rules.toml"), rules).unwrap();
        let raw = crate::rules::load(dir.path().to_str().unwrap()).unwrap();
        crate::rules::instantiate::review(&raw).unwrap()
    }

    /// Plan every rule of `set` on `text` (as `m.py`) with the checks `passes`.
    fn plan(set: &CompiledSet, text: &str, passes: &[&dyn Pass]) -> FilePlan {
        let (params, blocked) = (BTreeMap::new(), BTreeMap::new());
        let ctx = PlanContext {
            rule_set: set,
            params: &params,
            first_party: &[],
            style: &crate::python::style::Style::default(),
            blocked: &blocked,
        };
        let rules: Vec<(usize, &CompiledRule)> = set.rules.iter().enumerate().collect();
        plan_with(passes, "m.py", text, &rules, &ctx)
    }

    const HOST: &str = "import os\r\n\r\n\r\ndef step(x):\r\n    y = x * 2\r\n    return y\r\n";

    const RULES: &str = r#"
[[rule]]
id = "1.after"
group = "1"
file = "m.py"
summary = "s"
scope = ["def step"]
anchor = "y = x * 2"
position = "after"
imports = ["import sys"]
template = "sys.stdout.write(str(y))"

[[rule]]
id = "1.top"
group = "1"
file = "m.py"
summary = "s"
scope = ["def step"]
position = "body-start"
template = "_t = os.getpid()"
"#;

    /// A check of one's own: a failure at `stage` for rule `1.top`, saying what it saw.
    struct Planted(Stage);

    impl Pass for Planted {
        fn stage(&self) -> Stage {
            self.0
        }
        fn check(&self, cx: &FileContext, fixes: &[Fix]) -> Vec<Failure> {
            let top = fixes.iter().find(|f| cx.plan.rule(f.rule).id == "1.top");
            let Some(top) = top else { return Vec::new() };
            let saw = match cx.planned {
                Some(p) => format!("{} regions, {} bytes", p.placed.len(), p.text.len()),
                None => format!("{} regions", top.regions.len()),
            };
            vec![cx.fail_rule(top.rule, FailureKind::Template, Some(top.place.line), saw)]
        }
    }

    #[test]
    fn the_fixes_leave_planning_and_apply_to_what_was_planned() {
        let set = rule_set(RULES);
        let p = plan(&set, HOST, check::PASSES);
        assert!(p.failures.is_empty(), "{:?}", p.failures);
        assert_eq!(p.applied, vec!["1.after", "1.top"]);
        // Each fix: its rule, its place, its edits as plain data (CRLF, as the file is).
        let edits = |f: &Fix| -> Vec<(Range<usize>, Vec<String>)> {
            f.regions
                .iter()
                .map(|r| {
                    let e = Edit::of(r);
                    let lines = e.content.split_inclusive("\r\n").map(str::to_string);
                    (e.range, lines.map(|l| markers_masked(&l)).collect())
                })
                .collect()
        };
        let open = |rule: &str| {
            format!("    # >>> instrument t {rule} (take out: instrument remove) h=########\r\n")
        };
        let close = |rule: &str| format!("    # <<< instrument t {rule}\r\n");
        let got: Vec<_> = p
            .fixes
            .iter()
            .map(|f| (f.rule, f.place.clone(), edits(f)))
            .collect();
        let (after_y, top) = (
            HOST.find("    return").unwrap(),
            HOST.find("    y =").unwrap(),
        );
        let want = vec![
            (
                0,
                Place { line: 5, functions: vec![(None, "step".into())] },
                vec![(after_y..after_y, vec![open("1.after"), "    sys.stdout.write(str(y))\r\n".into(), close("1.after")])],
            ),
            (
                0,
                Place { line: 2, functions: Vec::new() },
                vec![(11..11, vec!["import sys  # instrument t 1.after (take out: instrument remove) h=########\r\n".into()])],
            ),
            (
                1,
                Place { line: 4, functions: vec![(None, "step".into())] },
                vec![(top..top, vec![open("1.top"), "    _t = os.getpid()\r\n".into(), close("1.top")])],
            ),
        ];
        assert_eq!(got, want);
        // What leaves planning is what the one apply function makes of the fixes (of the
        // text as it is: it holds no regions).
        let regions: Vec<&Region> = p.fixes.iter().flat_map(|f| &f.regions).collect();
        assert_eq!(edit::apply(HOST, &regions).unwrap().text, p.after);
    }

    /// The marker hash masked (it is the markers' business, tested there).
    fn markers_masked(line: &str) -> String {
        match line.find(" h=") {
            Some(i) => format!("{} h=########{}", &line[..i], &line[i + 11..]),
            None => line.to_string(),
        }
    }

    #[test]
    fn a_pass_added_to_the_list_runs_and_its_failure_surfaces() {
        let set = rule_set(RULES);
        let failures = |stage| {
            let planted = Planted(stage);
            let passes: Vec<&dyn Pass> = check::PASSES
                .iter()
                .copied()
                .chain([&planted as &dyn Pass])
                .collect();
            let p = plan(&set, HOST, &passes);
            // Nothing is applied when a check fails.
            assert_eq!(
                (p.after.as_str(), p.applied.len(), p.fixes.len()),
                (HOST, 0, 0)
            );
            serde_json::to_value(&p.failures).unwrap()
        };
        let failure = |message: &str| {
            json!([{
                "kind": "template",
                "file": "m.py",
                "line": 4,
                "rule": "1.top",
                "group": "1",
                "message": message,
                "candidates": [],
                "name": null,
            }])
        };
        // Before the regions are built, alone; then with the regions; then together with
        // the others (the import included), on the planned text, on its names.
        assert_eq!(failures(Stage::Place), failure("0 regions"));
        assert_eq!(failures(Stage::Edits), failure("1 regions"));
        assert_eq!(failures(Stage::Together), failure("1 regions"));
        let whole = plan(&set, HOST, check::PASSES).after;
        let planned = format!("3 regions, {} bytes", whole.len());
        assert_eq!(failures(Stage::Parse), failure(&planned));
        assert_eq!(failures(Stage::Names), failure(&planned));
    }

    #[test]
    fn two_rules_on_the_same_lines_are_refused_by_the_check_and_by_apply() {
        let rule = |id: &str, value| {
            format!(
                "[[rule]]\nid = \"{id}\"\ngroup = \"{}\"\nfile = \"m.py\"\nsummary = \"s\"\nscope = [\"def step\"]\nanchor = \"y = x * 2\"\nposition = \"replace\"\ntemplate = \"y = x * {value}\"\n",
                &id[..1]
            )
        };
        let set = rule_set(&format!("{}\n{}", rule("1.a", 3), rule("2.b", 4)));
        let failures = |passes: &[&dyn Pass]| {
            let p = plan(&set, HOST, passes);
            assert_eq!((p.after.as_str(), p.fixes.len()), (HOST, 0));
            serde_json::to_value(&p.failures).unwrap()
        };
        let (kind, line) = ("overlap", 5);
        assert_eq!(
            failures(check::PASSES),
            json!([{"kind": kind, "file": "m.py", "line": line, "rule": "2.b", "group": "2",
                "message": "edits the same lines as rule 1.a", "candidates": [], "name": null}])
        );
        let without: Vec<&dyn Pass> = check::PASSES
            .iter()
            .copied()
            .filter(|p| p.stage() != Stage::Together)
            .collect();
        assert_eq!(
            failures(&without),
            json!([{"kind": kind, "file": "m.py", "line": line, "rule": null, "group": null,
                "message": "the edit of bytes 29..44 overlaps the edit of bytes 29..44",
                "candidates": [], "name": null}])
        );
    }

    #[test]
    fn each_rule_fails_at_its_first_step_and_in_the_rules_order() {
        // Rule 1's place takes no code (its body is on the header's line); rule 2's would
        // not either, but it is in compiled code, which it is refused for, before its
        // regions are built. Rule 3 fits, and nothing is applied.
        let rule = |id: &str, function: &str| {
            format!(
                "[[rule]]\nid = \"{id}\"\ngroup = \"{}\"\nfile = \"m.py\"\nsummary = \"s\"\nscope = [\"def {function}\"]\nposition = \"body-start\"\ntemplate = \"print(x)\"\n",
                &id[..1]
            )
        };
        let rules = [
            rule("1.bad", "step"),
            rule("2.hot", "hot"),
            rule("3.ok", "cold"),
        ];
        let set = rule_set(&rules.join("\n"));
        let host = "import torch\n\n\n@torch.compile\ndef hot(x): return x\n\n\ndef step(x): return x\n\n\ndef cold(x):\n    return x\n";
        let p = plan(&set, host, check::PASSES);
        let failure = |kind, rule: &str, line: usize, message: &str| {
            json!({
                "kind": kind,
                "file": "m.py",
                "line": line,
                "rule": rule,
                "group": &rule[..1],
                "message": message,
                "candidates": [],
                "name": null,
            })
        };
        assert_eq!(
            serde_json::to_value(&p.failures).unwrap(),
            json!([
                failure(
                    "placement",
                    "1.bad",
                    8,
                    "the body is on the same line as its header; put it on its own lines first"
                ),
                failure(
                    "placement",
                    "2.hot",
                    5,
                    "refusing to insert into `hot`, which is decorated with `@torch.compile` (torch.compile): it is compiled"
                ),
            ])
        );
        assert_eq!((p.after.as_str(), p.fixes.len()), (host, 0));
    }

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
