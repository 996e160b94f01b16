//! Every user error: one clear line naming what was wrong, exit code 2, and a tree that
//! is exactly as it was. What each command printed is pinned whole (insta snapshots).

use crate::common;

use std::path::Path;

use common::*;

/// Run `args` in `root`, record it, and assert: exit 2 and nothing changed.
fn refused(t: &mut Transcript, root: &Path, args: &[&str]) -> String {
    let before = snapshot_tree(root);
    let out = t.run(args, root);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "expected exit 2 for {args:?}, got {:?}: {err}",
        out.status.code()
    );
    assert_eq!(snapshot_tree(root), before, "{args:?} changed the tree");
    err
}

/// The values and names a user can get wrong, each refused in one line that keeps what
/// was given and says what to give instead.
const ONE_LINE_ERRORS: &[&[&str]] = &[
    // Rank and layer lists that are not lists of non-negative integers.
    &["add", "qwen3-moe", "--ranks", "3,x"],
    &["add", "qwen3-moe", "--ranks", "-1"],
    &["add", "qwen3-moe", "--ranks", ""],
    &["add", "qwen3-moe", "--detail-layers", "1,two"],
    // 23 digits are a non-negative integer, only too large.
    &["add", "qwen3-moe", "--ranks", "12345678901234567890123"],
    &["add", "qwen3-moe", "--step", "12345678901234567890123"],
    // A layer beyond the model.
    &["add", "qwen3-moe", "--detail-layers", "3,8"],
    // deepseek-v2's layer 0 is dense (`first_k_dense_replace = 1`): detail prints there
    // would print nothing of the experts.
    &["add", "deepseek-v2", "--detail-layers", "0,1"],
    // A config that is not there, with and without --dry-run.
    &["add", "qwen3-moe", "--config", "no-such.json"],
    &["add", "qwen3-moe", "--config", "no-such.json", "--dry-run"],
    // A parameter the set does not have: the value given stays in the message.
    &["add", "qwen3-moe", "--param", "FOO=1"],
    // Models that are not there, and interface.py, which is there but is not a model.
    &["add", "llama-3"],
    &["add", "interface"],
    // The NVTX set needs the functions to wrap.
    &["add", "--rules", "nvtx"],
];

#[test]
fn user_errors_are_one_line_and_change_nothing() {
    let dir = scratch_copy(&fixture());
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    for args in ONE_LINE_ERRORS {
        let err = refused(&mut t, dir.path(), args);
        assert_eq!(err.lines().count(), 1, "{args:?}:\n{err}");
    }
    insta::assert_snapshot!("one_line_errors", t.text());
    // The layers the dense-layer message suggests are taken.
    let out = instrument(
        &["add", "deepseek-v2", "--detail-layers", "1,2", "--dry-run"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_folder_without_pithtrain() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("train.py"), "print(1)\n").unwrap();
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<DIR>"));
    refused(&mut t, dir.path(), &["add", "qwen3-moe"]);
    refused(
        &mut t,
        dir.path(),
        &["add", "qwen3-moe", "--root", "/no/such/folder"],
    );
    insta::assert_snapshot!("no_checkout", t.text());
}

/// Break `file` of a scratch fixture with `edit`, run `args`, and pin the refusal.
fn refused_after_edit(file: &str, edit: (&str, &str), args: &[&str]) -> String {
    let dir = scratch_copy(&fixture());
    let path = dir.path().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replace(edit.0, edit.1);
    assert_ne!(edited, text, "{file} lacks {:?}", edit.0);
    std::fs::write(&path, edited).unwrap();
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    refused(&mut t, dir.path(), args);
    t.text().to_string()
}

/// The drift report names the file and line, the group that cannot apply, and which
/// groups would.
#[test]
fn a_target_that_does_not_parse() {
    let text = refused_after_edit(
        "pithtrain/modules/training.py",
        (
            "def setup_training(cfg: object) -> None:",
            "def setup_training(cfg: object -> None:",
        ),
        &["add", "qwen3-moe"],
    );
    insta::assert_snapshot!("target_does_not_parse", text);
}

/// The anchor's rule, the scope it was looked for in, the closest candidates, and
/// `--partial`.
#[test]
fn a_missing_anchor_names_file_rule_and_closest_candidates() {
    let text = refused_after_edit(
        "pithtrain/dualpipe/dualpipev.py",
        (
            "assert WeightGradStore.funcs_queue.empty()",
            "assert WeightGradStore.funcs_queue.qsize() == 0",
        ),
        &["add", "qwen3-moe"],
    );
    insta::assert_snapshot!("missing_anchor", text);
}

#[test]
fn a_hand_edited_region_is_not_removed_without_force() {
    let dir = scratch_copy(&fixture());
    let clean = snapshot_tree(dir.path());
    add_ok(dir.path(), &[]);
    let path = dir.path().join("pithtrain/models/qwen3_moe.py");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("experts: after silu_mul", "experts: after SILU");
    std::fs::write(&path, text).unwrap();
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("after add, `experts: after silu_mul` edited in the region of rule 5D.return");
    // Both name the region's own rule, and give no advice about anchors that are fine.
    refused(&mut t, dir.path(), &["remove"]);
    refused(&mut t, dir.path(), &["add", "qwen3-moe"]);
    let out = t.run(&["remove", "--force"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(snapshot_tree(dir.path()), clean);
    insta::assert_snapshot!("hand_edited_region", t.text());
}

#[test]
fn broken_markers_are_reported_not_guessed() {
    let dir = scratch_copy(&fixture());
    add_ok(dir.path(), &[]);
    let path = dir.path().join("pithtrain/modules/training.py");
    let text = std::fs::read_to_string(&path).unwrap();
    let closing = "# <<< instrument memory-prints 3.after-apply-fsdp";
    let cut: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with(closing))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(cut.lines().count(), text.lines().count() - 1);
    std::fs::write(&path, cut).unwrap();
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("after add, the closing marker of 3.after-apply-fsdp deleted");
    refused(&mut t, dir.path(), &["remove"]);
    insta::assert_snapshot!("broken_markers", t.text());
}

/// `ruleset.toml` text without its `[groups.*]` tables.
fn without_groups(manifest: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in manifest.lines() {
        if line.starts_with('[') {
            skipping = line.starts_with("[groups.");
        }
        if !skipping {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// A rule set of one rule, for errors that only a rule author can cause.
fn custom_rules(rule: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let manifest =
        std::fs::read_to_string(repo_root().join("rules/memory-prints/ruleset.toml")).unwrap();
    // Without the shipped groups, without what they require of each other.
    std::fs::write(dir.path().join("ruleset.toml"), without_groups(&manifest)).unwrap();
    std::fs::write(dir.path().join("rules.toml"), rule).unwrap();
    dir
}

/// Rules an author can get wrong, each with what it shows: the refusal names the rule,
/// the file and line, and why.
const AUTHOR_ERRORS: &[(&str, &str)] = &[
    (
        "inserting into a compiled function: the decorator, and that it breaks the graph",
        r#"
[[rule]]
id = "X.compiled"
group = "X"
file = "pithtrain/models/{MODEL}.py"
summary = "a print in the compiled stage"
scope = ["class Qwen3MoeDecoderLayer", "def forward_stage5"]
position = "body-start"
template = "print('x')"
"#,
    ),
    (
        "code reading a name not defined where it lands",
        r#"
[[rule]]
id = "X.ctx"
group = "X"
file = "pithtrain/modules/distributed.py"
summary = "the recipe's ctx.local_rank, which this revision does not have"
scope = ["def setup_default_process_group"]
anchor = "torch.distributed.init_process_group($$$)"
position = "after"
template = "print(ctx.local_rank)"
"#,
    ),
    (
        "an ambiguous anchor: its matches and their lines",
        r#"
[[rule]]
id = "X.ambiguous"
group = "X"
file = "pithtrain/dualpipe/dualpipev.py"
summary = "every _weight_chunk() in step"
scope = ["class DualPipeV", "def step"]
anchor = "self._weight_chunk()"
position = "after"
template = "pass"
"#,
    ),
    (
        "a rule file that does not load: its name and the missing field",
        "[[rule]]\nid = \"X.bad\"\n",
    ),
];

#[test]
fn rules_an_author_gets_wrong_are_refused_with_rule_file_and_why() {
    let dir = scratch_copy(&fixture());
    let mut report = String::new();
    for (what, rule) in AUTHOR_ERRORS {
        let rules = custom_rules(rule);
        let mut t = Transcript::new(
            Redact::default()
                .folder(dir.path(), "<CHECKOUT>")
                .folder(rules.path(), "<RULES>"),
        );
        t.note(what);
        let r = rules.path().to_str().unwrap();
        refused(&mut t, dir.path(), &["add", "qwen3-moe", "--rules", r]);
        report.push_str(t.text());
        report.push('\n');
    }
    // A set that is neither built in nor a folder.
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    refused(
        &mut t,
        dir.path(),
        &["add", "qwen3-moe", "--rules", "no-such-set"],
    );
    report.push_str(t.text());
    insta::assert_snapshot!("author_errors", report);
}

/// The group of `doc` (an `add --json` report) named `g`.
fn group<'d>(doc: &'d serde_json::Value, g: &str) -> &'d serde_json::Value {
    doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["group"] == g)
        .unwrap_or_else(|| panic!("no group {g} in {doc}"))
}

/// The groups that hold regions in `root`, as `status --json` reports them.
fn instrumented_groups(root: &Path) -> std::collections::BTreeSet<String> {
    let out = instrument(&["status", "--json"], root);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["regions"].as_array().unwrap().iter())
        .map(|r| r["group"].as_str().unwrap().to_string())
        .collect()
}

/// On revision 2225560 the group that switches the pipeline prints off after the profiled
/// step (7) did not resolve, and `--partial` applied the pipeline prints (4) without it:
/// ranks 3 and 14 printed and synchronized ~15 times on every step. Group 4 requires 7
/// (ruleset.toml), and 5 requires 4: neither is applied without what it needs.
#[test]
fn partial_never_applies_the_pipeline_prints_without_the_group_that_turns_them_off() {
    let dir = scratch_copy(&fixture());
    let path = dir.path().join("pithtrain/tasks/pretrain_lm.py");
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replace("    model.train()\n", "    model.train(True)\n");
    assert_ne!(edited, text);
    std::fs::write(&path, edited).unwrap();
    let before = snapshot_tree(dir.path());
    // All or nothing: refused, group 4 listed as needing group 7.
    let out = instrument(
        &["add", "qwen3-moe", "--ranks", "3,14", "--json"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(snapshot_tree(dir.path()), before);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["verdict"], "refused");
    assert!(!group(&doc, "7")["failures"].as_array().unwrap().is_empty());
    assert_eq!(group(&doc, "4")["needs"], serde_json::json!(["7"]));
    // --partial: the groups that stand alone, without 4 (needs 7) and 5 (needs 4).
    let out = instrument(
        &["add", "qwen3-moe", "--ranks", "3,14", "--partial", "--json"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["verdict"], "applied");
    for (g, needs) in [("4", "7"), ("5", "4")] {
        let g = group(&doc, g);
        assert_eq!(g["needs"], serde_json::json!([needs]), "{g}");
        assert_eq!(g["skipped_for_dependency"], true, "{g}");
        assert!(g["failures"].as_array().unwrap().is_empty(), "{g}");
    }
    assert_eq!(
        instrumented_groups(dir.path()),
        ["1", "2", "3", "6"].map(String::from).into_iter().collect()
    );
    // The text report says why.
    let out = instrument(&["remove"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(snapshot_tree(dir.path()), before);
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("`model.train()` edited to `model.train(True)`, so group 7 does not apply");
    t.run(&["add", "qwen3-moe", "--partial"], dir.path());
    insta::assert_snapshot!("partial_without_group_7", t.text());
}

/// A read-only file is written only with `--force` (add and remove alike), every file or
/// none, and keeps its mode.
#[test]
fn a_read_only_file_is_written_only_with_force() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_copy(&fixture());
    let file = dir.path().join("pithtrain/modules/training.py");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
    let pristine = snapshot_tree(dir.path());
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("pithtrain/modules/training.py made read-only (0444)");
    let err = refused(&mut t, dir.path(), &["add", "qwen3-moe"]);
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = t.run(&["add", "qwen3-moe", "--force"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(mode(&file), 0o444);
    let added = snapshot_tree(dir.path());
    assert_ne!(added, pristine);
    let err = refused(&mut t, dir.path(), &["remove"]);
    assert_eq!(err.lines().count(), 1, "{err}");
    let out = t.run(&["remove", "--force"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(mode(&file), 0o444);
    assert_eq!(snapshot_tree(dir.path()), pristine);
    insta::assert_snapshot!("read_only_file", t.text());
}
