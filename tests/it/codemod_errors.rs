//! Every user error: one clear line naming what was wrong, exit code 2, and a tree that
//! is exactly as it was.

use crate::common;

use std::path::Path;

use common::*;

/// Run `args` in `root` and assert: exit 2, nothing changed, stderr mentions each `needle`.
fn refused(root: &Path, args: &[&str], needles: &[&str]) -> String {
    let before = snapshot_tree(root);
    let out = instrument(args, root);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "expected exit 2 for {args:?}, got {:?}: {err}",
        out.status.code()
    );
    assert_eq!(snapshot_tree(root), before, "{args:?} changed the tree");
    for n in needles {
        assert!(err.contains(n), "stderr of {args:?} lacks {n:?}:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn bad_rank_lists() {
    let dir = scratch_copy(&fixture());
    refused(
        dir.path(),
        &["add", "qwen3-moe", "--ranks", "3,x"],
        &["--ranks 3,x: `x` is not a non-negative integer"],
    );
    refused(
        dir.path(),
        &["add", "qwen3-moe", "--ranks", "-1"],
        &["--ranks -1: `-1` is not a non-negative integer"],
    );
    refused(
        dir.path(),
        &["add", "qwen3-moe", "--ranks", ""],
        &["--ranks is empty"],
    );
    refused(
        dir.path(),
        &["add", "qwen3-moe", "--detail-layers", "1,two"],
        &["--detail-layers"],
    );
}

#[test]
fn detail_layers_beyond_the_model_are_refused() {
    let dir = scratch_copy(&fixture());
    refused(
        dir.path(),
        &["add", "qwen3-moe", "--detail-layers", "3,8"],
        &["--detail-layers 8: the model has 8 layers"],
    );
}

#[test]
fn unknown_model_lists_the_models() {
    let dir = scratch_copy(&fixture());
    refused(
        dir.path(),
        &["add", "llama-3"],
        &["unknown model `llama-3`", "qwen3-moe"],
    );
}

#[test]
fn a_folder_without_pithtrain() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("train.py"), "print(1)\n").unwrap();
    refused(
        dir.path(),
        &["add", "qwen3-moe"],
        &["no pithtrain/__init__.py here or above", "--root"],
    );
    refused(
        dir.path(),
        &["add", "qwen3-moe", "--root", "/no/such/folder"],
        &["--root /no/such/folder: no such folder"],
    );
}

#[test]
fn a_target_that_does_not_parse() {
    let dir = scratch_copy(&fixture());
    let path = dir.path().join("pithtrain/modules/training.py");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "def setup_training(cfg: object) -> None:",
        "def setup_training(cfg: object -> None:",
    );
    std::fs::write(&path, text).unwrap();
    let err = refused(
        dir.path(),
        &["add", "qwen3-moe"],
        &["pithtrain/modules/training.py:", "does not parse"],
    );
    assert!(err.contains("group 3"), "{err}");
}

#[test]
fn a_missing_anchor_names_file_rule_and_closest_candidates() {
    let dir = scratch_copy(&fixture());
    let path = dir.path().join("pithtrain/dualpipe/dualpipev.py");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "assert WeightGradStore.funcs_queue.empty()",
        "assert WeightGradStore.funcs_queue.qsize() == 0",
    );
    std::fs::write(&path, text).unwrap();
    let err = refused(
        dir.path(),
        &["add", "qwen3-moe"],
        &[
            "pithtrain/dualpipe/dualpipev.py:",
            "rule 4G.after-step8: anchor `assert WeightGradStore.funcs_queue.empty()` not found",
            "in `def step` (line",
            "closest: line",
            "assert WeightGradStore.funcs_queue.qsize() == 0",
            "--partial",
        ],
    );
    assert!(err.contains("group 4   cannot apply"), "{err}");
    assert!(err.contains("group 1   would apply"), "{err}");
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
    refused(
        dir.path(),
        &["remove"],
        &[
            "pithtrain/models/qwen3_moe.py:",
            "rule 5D.return",
            "edited by hand",
            "--force",
        ],
    );
    let err = refused(
        dir.path(),
        &["add", "qwen3-moe"],
        &[
            "pithtrain/models/qwen3_moe.py:",
            "rule 5D.return was edited by hand",
            "instrument remove --force",
        ],
    );
    // The region's own rule, and no advice about anchors that are fine.
    assert!(!err.contains("rule 5A."), "{err}");
    assert!(!err.contains("explain"), "{err}");
    let out = instrument(&["remove", "--force"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(snapshot_tree(dir.path()), clean);
}

#[test]
fn broken_markers_are_reported_not_guessed() {
    let dir = scratch_copy(&fixture());
    add_ok(dir.path(), &[]);
    let path = dir.path().join("pithtrain/modules/training.py");
    let text = std::fs::read_to_string(&path).unwrap();
    let cut: String = text
        .lines()
        .filter(|l| !l.contains("# <<< instrument memory-prints 3.after-apply-fsdp"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, cut).unwrap();
    refused(
        dir.path(),
        &["remove"],
        &["pithtrain/modules/training.py:", "never closed"],
    );
}

/// A rule set of one rule, for errors that only a rule author can cause.
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

fn custom_rules(rule: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let manifest =
        std::fs::read_to_string(repo_root().join("rules/memory-prints/ruleset.toml")).unwrap();
    // Without the shipped groups, without what they require of each other.
    std::fs::write(dir.path().join("ruleset.toml"), without_groups(&manifest)).unwrap();
    std::fs::write(dir.path().join("rules.toml"), rule).unwrap();
    dir
}

#[test]
fn inserting_into_a_compiled_function_is_refused() {
    let dir = scratch_copy(&fixture());
    let rules = custom_rules(
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
    );
    let r = rules.path().to_str().unwrap();
    refused(
        dir.path(),
        &["add", "qwen3-moe", "--rules", r],
        &[
            "rule X.compiled",
            "forward_stage5",
            "@torch.compile(fullgraph=True)",
            "breaks the graph",
        ],
    );
}

#[test]
fn code_reading_an_undefined_name_is_refused() {
    let dir = scratch_copy(&fixture());
    let rules = custom_rules(
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
    );
    let r = rules.path().to_str().unwrap();
    refused(
        dir.path(),
        &["add", "qwen3-moe", "--rules", r],
        &[
            "pithtrain/modules/distributed.py:",
            "rule X.ctx",
            "reads `ctx`",
            "not defined there",
        ],
    );
}

#[test]
fn an_ambiguous_anchor_lists_its_matches() {
    let dir = scratch_copy(&fixture());
    let rules = custom_rules(
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
    );
    let r = rules.path().to_str().unwrap();
    refused(
        dir.path(),
        &["add", "qwen3-moe", "--rules", r],
        &["rule X.ambiguous", "matches 3 statements", "lines"],
    );
}

#[test]
fn a_broken_rule_file_is_reported_with_its_name() {
    let dir = scratch_copy(&fixture());
    let rules = custom_rules("[[rule]]\nid = \"X.bad\"\n");
    let r = rules.path().to_str().unwrap();
    refused(
        dir.path(),
        &["add", "qwen3-moe", "--rules", r],
        &["rules.toml", "missing field"],
    );
    refused(
        dir.path(),
        &["add", "qwen3-moe", "--rules", "no-such-set"],
        &["no such rule set or folder", "memory-prints"],
    );
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
    assert!(text.contains("    model.train()\n"));
    std::fs::write(
        &path,
        text.replace("    model.train()\n", "    model.train(True)\n"),
    )
    .unwrap();
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
    let out = instrument(&["add", "qwen3-moe", "--partial", "--dry-run"], dir.path());
    assert!(
        stderr(&out)
            .contains("skipped group 4 (--partial): it requires group 7, which does not apply"),
        "{}",
        stderr(&out)
    );
}

/// `refused`, and the message is one line.
fn refused_one_line(root: &Path, args: &[&str], needles: &[&str]) {
    let err = refused(root, args, needles);
    assert_eq!(err.trim().lines().count(), 1, "{args:?}:\n{err}");
}

#[test]
fn a_config_file_that_is_not_there_is_refused() {
    let dir = scratch_copy(&fixture());
    refused_one_line(
        dir.path(),
        &["add", "qwen3-moe", "--config", "no-such.json"],
        &["--config no-such.json: no such file"],
    );
    refused_one_line(
        dir.path(),
        &["add", "qwen3-moe", "--config", "no-such.json", "--dry-run"],
        &["--config no-such.json: no such file"],
    );
}

/// deepseek-v2's layer 0 is dense (`first_k_dense_replace = 1`): detail prints there
/// would print nothing of the experts.
#[test]
fn a_dense_layer_in_detail_layers_is_refused() {
    let dir = scratch_copy(&fixture());
    refused_one_line(
        dir.path(),
        &["add", "deepseek-v2", "--detail-layers", "0,1"],
        &[
            "--detail-layers 0: layer 0 is dense",
            "its MoE layers are 1..=7",
            "--detail-layers 1,2",
        ],
    );
    let out = instrument(
        &["add", "deepseek-v2", "--detail-layers", "1,2", "--dry-run"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn nvtx_without_functions_says_what_to_pass() {
    let dir = scratch_copy(&fixture());
    refused_one_line(
        dir.path(),
        &["add", "--rules", "nvtx"],
        &["instrument add --rules nvtx '*.forward' DualPipeV.step"],
    );
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
    refused_one_line(
        dir.path(),
        &["add", "qwen3-moe"],
        &[
            "pithtrain/modules/training.py (mode 0444) is read-only",
            "--force",
        ],
    );
    add_ok(dir.path(), &["--force"]);
    assert_eq!(mode(&file), 0o444);
    let added = snapshot_tree(dir.path());
    assert_ne!(added, pristine);
    refused_one_line(
        dir.path(),
        &["remove"],
        &[
            "pithtrain/modules/training.py (mode 0444) is read-only",
            "--force",
        ],
    );
    let out = instrument(&["remove", "--force"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(mode(&file), 0o444);
    assert_eq!(snapshot_tree(dir.path()), pristine);
}

/// The messages a new user met that said the wrong thing.
#[test]
fn messages_keep_what_was_given_and_say_what_is_wrong() {
    let dir = scratch_copy(&fixture());
    // The value given stays in the message.
    refused_one_line(
        dir.path(),
        &["add", "qwen3-moe", "--param", "FOO=1"],
        &["--param FOO=1: rule set memory-prints has no parameter FOO"],
    );
    // 20 digits are a non-negative integer, only too large.
    let big = "12345678901234567890123";
    refused_one_line(
        dir.path(),
        &["add", "qwen3-moe", "--ranks", big],
        &[&format!(
            "`{big}` is too large (the largest is 18446744073709551615)"
        )],
    );
    refused_one_line(
        dir.path(),
        &["add", "qwen3-moe", "--step", big],
        &[&format!(
            "--step {big}: too large (the largest is 18446744073709551615)"
        )],
    );
    // interface.py is there; it is not a model.
    refused_one_line(
        dir.path(),
        &["add", "interface"],
        &[
            "`interface` is not a model: pithtrain/models/interface.py exists",
            "models in this checkout: deepseek-v2, gpt-oss, olmoe, qwen35-moe, qwen3-moe",
        ],
    );
}
