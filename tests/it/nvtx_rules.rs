//! The NVTX rule set: exception-safe ranges around chosen functions, reversible byte for
//! byte, ruff-clean, kept out of compiled code, and next to the memory prints.

use crate::common;

use std::process::Command;

use common::*;

const TARGETS: [&str; 3] = ["*.forward", "DualPipeV.step", "layer_forward"];

fn add_nvtx(root: &std::path::Path, targets: &[&str]) -> std::process::Output {
    let mut args = vec!["add", "--rules", "nvtx"];
    args.extend_from_slice(targets);
    instrument(&args, root)
}

#[test]
fn ranges_round_trip_byte_for_byte() {
    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    // The whole diff: one helper per file, one decorator per function (DualPipeV.step's
    // among them), compiled callees left out with a warning each.
    let mut args = TARGETS.to_vec();
    args.extend(["--dry-run", "--color", "never"]);
    let preview = add_nvtx(dir.path(), &args);
    assert_eq!(preview.status.code(), Some(0), "{}", stderr(&preview));
    insta::assert_snapshot!("nvtx_add_targets.diff", stdout(&preview));
    insta::assert_snapshot!("nvtx_add_targets_summary", stderr(&preview));
    let out = add_nvtx(dir.path(), &TARGETS);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Idempotent: a second add changes nothing and says so.
    let again = add_nvtx(dir.path(), &TARGETS);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    insta::assert_snapshot!("nvtx_add_again", stderr(&again));
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    assert_eq!(snapshot_tree(dir.path()), before);
}

#[test]
fn ranged_fixture_passes_ruff() {
    let Some(ruff) = tool("ruff", "INSTRUMENT_REQUIRE_RUFF") else {
        return;
    };
    let dir = scratch_copy(&fixture());
    assert_eq!(add_nvtx(dir.path(), &TARGETS).status.code(), Some(0));
    add_ok(dir.path(), &["--ranks", "3"]);
    assert_ruff_clean(&ruff, dir.path(), None);
}

#[test]
fn functions_run_by_compiled_code_are_refused() {
    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    // The gate runs inside forward_stage1_compute, which is compiled with fullgraph=True.
    let out = add_nvtx(dir.path(), &["Qwen3MoeGate.forward"]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("nvtx_compiled_refused", stderr(&out));
    assert_eq!(snapshot_tree(dir.path()), before);
    // Through a glob it is left out with a warning, and the rest goes in.
    let out = add_nvtx(
        dir.path(),
        &["Qwen3Moe*.forward", "--dry-run", "--color", "never"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("nvtx_compiled_glob.diff", stdout(&out));
    insta::assert_snapshot!("nvtx_compiled_glob_summary", stderr(&out));
    // A compiled function itself is wrapped from outside, above its @torch.compile.
    let out = add_nvtx(
        dir.path(),
        &[
            "Qwen3MoeDecoderLayer.forward_stage5",
            "--dry-run",
            "--color",
            "never",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("nvtx_compiled_itself.diff", stdout(&out));
}

#[test]
fn nvtx_and_memory_prints_live_side_by_side() {
    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    assert_eq!(add_nvtx(dir.path(), &TARGETS).status.code(), Some(0));
    let with_nvtx = snapshot_tree(dir.path());
    add_ok(dir.path(), &["--ranks", "3"]);
    assert_eq!(
        instrument(&["remove", "--rules", "memory-prints"], dir.path())
            .status
            .code(),
        Some(0)
    );
    assert_eq!(
        snapshot_tree(dir.path()),
        with_nvtx,
        "removing one set leaves the other byte for byte"
    );
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    assert_eq!(snapshot_tree(dir.path()), before);
}

#[test]
fn ranges_open_and_close_around_the_calls_and_change_nothing() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let run = |root: &std::path::Path| {
        let out = Command::new(&python)
            .arg(repo_root().join("tests/exec/run_fixture.py"))
            .arg(root)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let result = text
            .rsplit_once("RESULT ")
            .expect("RESULT")
            .1
            .trim()
            .to_string();
        serde_json::from_str::<serde_json::Value>(&result).unwrap()
    };
    let clean = scratch_copy(&fixture());
    let base = run(clean.path());
    let dir = scratch_copy(&fixture());
    assert_eq!(
        add_nvtx(
            dir.path(),
            &["Qwen3MoeExperts.forward", "DualPipeV.step", "layer_forward"]
        )
        .status
        .code(),
        Some(0)
    );
    let ranged = run(dir.path());
    assert_eq!(ranged["losses"], base["losses"]);
    assert_eq!(ranged["nvtx_balanced"], true);
    // Two training steps; 4 micro-batches x 2 layers per model half, twice (both halves).
    assert_eq!(ranged["nvtx"]["DualPipeV.step"], 2);
    assert_eq!(ranged["nvtx"]["layer_forward"], 32);
    assert_eq!(ranged["nvtx"]["Qwen3MoeExperts.forward"], 32);
    assert!(base["nvtx"].get("layer_forward").is_none());
}

#[test]
fn a_missing_torch_import_is_added_where_isort_wants_it() {
    let Some(ruff) = tool("ruff", "INSTRUMENT_REQUIRE_RUFF") else {
        return;
    };
    let pkg = repo_root().join("fixtures/tracepkg");
    let dir = scratch_copy(&pkg);
    let before = snapshot_tree(dir.path());
    let out = add_nvtx(dir.path(), &["Block.*", "Base.forward", "run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // blocks.py has only `from torch import nn`: `import torch` joins that section;
    // heads.py imports first-party code only: torch opens its own section above it.
    let blocks = std::fs::read_to_string(dir.path().join("mypkg/blocks.py")).unwrap();
    assert!(
        blocks.starts_with(
            "import torch  # instrument nvtx nvtx.helper (take out: instrument remove) h="
        ),
        "{blocks}"
    );
    let heads = std::fs::read_to_string(dir.path().join("mypkg/sub/heads.py")).unwrap();
    assert!(
        heads.starts_with("import torch  # instrument nvtx nvtx.helper [blank-after]"),
        "{heads}"
    );
    assert_ruff_clean(&ruff, dir.path(), Some(&fixture().join("pyproject.toml")));
    // Not a pithtrain checkout: remove needs to be told where.
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(2));
    assert_eq!(
        instrument(&["remove", "--root", "."], dir.path())
            .status
            .code(),
        Some(0)
    );
    assert_eq!(snapshot_tree(dir.path()), before);
}

#[test]
fn memory_prints_go_in_after_nvtx_too() {
    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    assert_eq!(add_nvtx(dir.path(), &TARGETS).status.code(), Some(0));
    // Anchors decorated by another set (`def step` under its NVTX decorator) still resolve,
    // and code placed above such a definition goes above the other set's region.
    let text = std::fs::read_to_string(dir.path().join("pithtrain/modules/training.py")).unwrap();
    assert!(
        !text.contains("@_instrument_nvtx_range"),
        "setup_model is not selected"
    );
    add_ok(dir.path(), &["--ranks", "3"]);
    // Neither set's regions are inside the other's: both read back as regions.
    let status = instrument(&["status", "--json"], dir.path());
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let sets: std::collections::BTreeSet<&str> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| {
            f["regions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["rule_set"].as_str().unwrap())
        })
        .collect();
    assert_eq!(sets, ["memory-prints", "nvtx"].into_iter().collect());
    if let Some(ruff) = tool("ruff", "INSTRUMENT_REQUIRE_RUFF") {
        assert_ruff_clean(&ruff, dir.path(), None);
    }
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    assert_eq!(snapshot_tree(dir.path()), before);
}
