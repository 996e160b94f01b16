//! The instrumented fixture as Python sees it: ruff passes it as it passes the original,
//! and, run on the fake torch, it prints the recipe's lines in the recipe's order and
//! computes exactly what the clean fixture computes.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

/// Run the fixture driver; returns (stdout without the RESULT line, RESULT as JSON, exit code).
fn run_fixture(python: &Path, checkout: &Path, extra: &[&str]) -> (String, serde_json::Value, i32) {
    let driver = repo_root().join("tests/exec/run_fixture.py");
    let out = Command::new(python)
        .arg(&driver)
        .arg(checkout)
        .args(extra)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (prints, result) = text.rsplit_once("RESULT ").unwrap_or_else(|| {
        panic!(
            "no RESULT line: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        prints.to_string(),
        serde_json::from_str(result.trim()).expect("RESULT is JSON"),
        out.status.code().unwrap_or(-1),
    )
}

#[test]
fn instrumented_fixture_passes_ruff_like_the_original() {
    let Some(ruff) = tool("ruff", "INSTRUMENT_REQUIRE_RUFF") else {
        return;
    };
    let dir = scratch_copy(&fixture());
    assert_ruff_clean(&ruff, dir.path(), None);
    add_ok(dir.path(), &["--ranks", "3,14"]);
    assert_ruff_clean(&ruff, dir.path(), None);
}

#[test]
fn instrumented_fixture_prints_in_order_and_computes_the_same() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let clean = scratch_copy(&fixture());
    let (clean_prints, clean_result, code) = run_fixture(&python, clean.path(), &[]);
    assert_eq!(code, 0);
    assert_eq!(clean_prints, "", "the clean fixture prints nothing");

    let (dir, snaps) = instrumented(&["--ranks", "3,14"]);
    let (prints, result, code) = run_fixture(&python, dir.path(), &[]);
    assert_eq!(code, 0, "{prints}");
    assert_eq!(
        result["losses"], clean_result["losses"],
        "instrumentation changed what training computes"
    );
    assert_eq!(result["step"], clean_result["step"]);
    // Group 2 moved set_device above init_process_group; the clean tree sets it after.
    assert_eq!(
        clean_result["set_device_before_init"],
        serde_json::json!([false])
    );
    assert_eq!(result["set_device_before_init"], serde_json::json!([true]));
    // Our history is started and stopped once, around the profiled step.
    assert_eq!(
        result["history"],
        serde_json::json!(["start:1048576", "stop"])
    );
    let snapshot = snaps.path().join("memory_snapshot_rank3_step0.pickle");
    assert!(snapshot.is_file(), "no snapshot at {}", snapshot.display());
    let prints = prints.replace(snaps.path().to_str().unwrap(), "<SNAPSHOT_DIR>");
    insta::assert_snapshot!("fixture_run_ranks_3_14", prints);
}

#[test]
fn other_ranks_print_nothing() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, snaps) = instrumented(&["--ranks", "0,14"]);
    let (prints, result, code) = run_fixture(&python, dir.path(), &[]);
    assert_eq!(code, 0);
    assert_eq!(prints, "", "rank 3 is not in --ranks 0,14");
    assert_eq!(result["history"], serde_json::json!([]));
    assert_eq!(std::fs::read_dir(snaps.path()).unwrap().count(), 0);
}

/// A scratch copy of the fixture with the memory prints added (`extra` are `add` flags),
/// and the folder its snapshots go to.
fn instrumented(extra: &[&str]) -> (tempfile::TempDir, tempfile::TempDir) {
    let dir = scratch_copy(&fixture());
    let snaps = tempfile::tempdir().unwrap();
    let mut args = extra.to_vec();
    args.extend(["--snapshot-dir", snaps.path().to_str().unwrap()]);
    add_ok(dir.path(), &args);
    (dir, snaps)
}

fn count(prints: &str, needle: &str) -> usize {
    prints.lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn a_resumed_run_profiles_the_step_it_starts_from() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, snaps) = instrumented(&["--ranks", "3"]);
    let (prints, result, code) = run_fixture(&python, dir.path(), &["--resume-from", "5"]);
    assert_eq!(code, 0);
    assert_eq!(result["step"], 7);
    assert!(
        prints.contains("[rank=3] load_ckpt | optimizer state: "),
        "{prints}"
    );
    assert_eq!(
        count(&prints, "Before pipeline"),
        1,
        "prints on the first step only:\n{prints}"
    );
    assert!(
        snaps
            .path()
            .join("memory_snapshot_rank3_step5.pickle")
            .is_file()
    );
}

#[test]
fn step_flag_picks_the_profiled_step() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, snaps) = instrumented(&["--ranks", "3", "--step", "1"]);
    let (prints, _, code) = run_fixture(&python, dir.path(), &["--max-steps", "3"]);
    assert_eq!(code, 0);
    assert_eq!(count(&prints, "Before pipeline"), 1, "{prints}");
    assert_eq!(count(&prints, "Memory snapshot saved"), 1);
    assert!(
        snaps
            .path()
            .join("memory_snapshot_rank3_step1.pickle")
            .is_file()
    );
}

#[test]
fn pithtrains_own_memory_profiler_keeps_its_history() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, snaps) = instrumented(&["--ranks", "3"]);
    let (_, result, code) = run_fixture(
        &python,
        dir.path(),
        &["--profile-start", "0", "--profile-stop", "2"],
    );
    assert_eq!(code, 0);
    // Only pithtrain's own start (at step 0) and stop (after step 1): ours neither starts
    // a second history over it nor stops it early.
    assert_eq!(
        result["history"],
        serde_json::json!(["start:65536", "stop"])
    );
    assert!(
        snaps
            .path()
            .join("memory_snapshot_rank3_step0.pickle")
            .is_file()
    );
}

#[test]
fn an_oom_dumps_the_snapshot_and_reraises() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, snaps) = instrumented(&["--ranks", "3"]);
    let (prints, result, code) = run_fixture(&python, dir.path(), &["--oom-limit", "0.1"]);
    assert_eq!(code, 1, "{prints}");
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .starts_with("OutOfMemoryError"),
        "{result}"
    );
    assert!(
        snaps.path().join("memory_snapshot_rank3.pickle").is_file(),
        "{prints}"
    );
    assert_eq!(
        result["history"],
        serde_json::json!(["start:1048576", "stop"])
    );
}

#[test]
fn every_model_computes_the_same_and_prints_its_experts() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let models = [
        ("qwen3-moe", "qwen3-tiny", "experts: after down_proj"),
        ("qwen3.5-moe", "qwen3.5-tiny", "experts: after down_proj"),
        (
            "deepseek-v2",
            "deepseek-v2-tiny",
            "experts: after down_proj",
        ),
        ("gpt-oss", "gpt-oss-tiny", "experts:"),
    ];
    for (model, config, expert_line) in models {
        let clean = scratch_copy(&fixture());
        let (_, clean_result, code) = run_fixture(&python, clean.path(), &["--model", config]);
        assert_eq!(code, 0, "{model}: the clean fixture runs");
        let dir = scratch_copy(&fixture());
        let snaps = tempfile::tempdir().unwrap();
        let out = instrument(
            &[
                "add",
                model,
                "--ranks",
                "3",
                "--snapshot-dir",
                snaps.path().to_str().unwrap(),
            ],
            dir.path(),
        );
        assert_eq!(out.status.code(), Some(0), "{model}: {}", stderr(&out));
        let (prints, result, code) = run_fixture(&python, dir.path(), &["--model", config]);
        assert_eq!(code, 0, "{model}:\n{prints}");
        assert_eq!(
            result["losses"], clean_result["losses"],
            "{model}: instrumentation changed the losses"
        );
        assert!(
            prints.contains(expert_line),
            "{model}: no expert detail prints:\n{prints}"
        );
        assert!(
            prints.contains("saved tensors:"),
            "{model}: no saved-tensor profile:\n{prints}"
        );
        assert!(
            prints.contains("after lm_head"),
            "{model}: no epilog print:\n{prints}"
        );
        assert!(
            snaps
                .path()
                .join("memory_snapshot_rank3_step0.pickle")
                .is_file(),
            "{model}: no snapshot"
        );
    }
}
