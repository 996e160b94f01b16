//! The instrumented fixture as Python sees it: ruff passes it as it passes the original,
//! and, run on the fake torch with one process per rank (tests/exec/run_fixture.py), it
//! prints the recipe's lines on every pipeline layout, takes its snapshots without ever
//! failing the run, and computes exactly what the clean fixture computes.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::{Value, json};

/// What one run of the fixture driver gave.
struct Run {
    /// Every rank's prints, in rank order, without the RESULT line.
    prints: String,
    result: Value,
    code: i32,
}

impl Run {
    /// The lines rank `rank` printed.
    fn lines(&self, rank: u32) -> Vec<&str> {
        let tag = format!("[rank={rank}");
        self.prints
            .lines()
            .filter(|l| l.starts_with(&tag) && l[tag.len()..].starts_with([']', ' ']))
            .collect()
    }

    fn rank(&self, rank: u32) -> &Value {
        &self.result["ranks"][rank.to_string()]
    }

    /// Prints with the snapshot folder and the host name replaced by placeholders.
    fn redacted(&self, snapshot_dir: &Path) -> String {
        let host = self.result["host"].as_str().expect("host in RESULT");
        self.prints
            .replace(snapshot_dir.to_str().unwrap(), "<SNAPSHOT_DIR>")
            .replace(&format!("saved to {host}:"), "saved to <HOST>:")
    }
}

/// Run the fixture driver on `checkout` with driver flags `extra`.
fn run_fixture(python: &Path, checkout: &Path, extra: &[&str]) -> Run {
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
    Run {
        prints: prints.to_string(),
        result: serde_json::from_str(result.trim()).expect("RESULT is JSON"),
        code: out.status.code().unwrap_or(-1),
    }
}

/// A scratch copy of the fixture with `model`'s memory prints added (`extra` are `add`
/// flags), and the folder its snapshots go to.
fn instrumented_model(model: &str, extra: &[&str]) -> (tempfile::TempDir, tempfile::TempDir) {
    let dir = scratch_copy(&fixture());
    let snaps = tempfile::tempdir().unwrap();
    let mut args = vec!["add", model];
    args.extend_from_slice(extra);
    if !extra.contains(&"--snapshot-dir") {
        args.extend(["--snapshot-dir", snaps.path().to_str().unwrap()]);
    }
    let out = instrument(&args, dir.path());
    assert_eq!(out.status.code(), Some(0), "add failed: {}", stderr(&out));
    (dir, snaps)
}

fn instrumented(extra: &[&str]) -> (tempfile::TempDir, tempfile::TempDir) {
    instrumented_model("qwen3-moe", extra)
}

/// What rank 3 prints while the fixture sets up (groups 2 and 3), on the fake torch.
const SETUP_PRINTS_RANK_3: [&str; 7] = [
    "[rank=3] init_process_group | cuda_ctx=0.50 after_nccl_world=1.50 nccl_world_cost=1.00",
    "[rank=3] init_device_mesh | non-pt=1.75 mesh_cost=0.25",
    "[rank=3] setup_model | before model creation: alloc=0.00 cached=0.00 non-pt=1.75",
    "[rank=3] setup_model | after module[0] creation: alloc=0.01 cached=1.99 non-pt=1.75",
    "[rank=3] setup_model | after module[1] creation: alloc=0.02 cached=1.98 non-pt=1.75",
    "[rank=3] setup_model | after init_weights: alloc=0.02 cached=1.98 non-pt=1.75",
    "[rank=3] setup_model | after apply_fsdp: alloc=0.02 cached=1.98 non-pt=1.75",
];

fn count(lines: &[&str], needle: &str) -> usize {
    lines.iter().filter(|l| l.contains(needle)).count()
}

/// The clean fixture on the same layout must compute what the instrumented one does, on
/// every rank.
fn assert_same_losses(python: &Path, run: &Run, layout: &[&str]) {
    let clean = scratch_copy(&fixture());
    let base = run_fixture(python, clean.path(), layout);
    assert_eq!(base.code, 0, "the clean fixture runs: {}", base.prints);
    assert_eq!(base.prints, "", "the clean fixture prints nothing");
    let ranks = base.result["ranks"].as_object().unwrap();
    for (rank, clean_rank) in ranks {
        assert_eq!(
            run.result["ranks"][rank]["losses"], clean_rank["losses"],
            "rank {rank}: instrumentation changed what training computes ({layout:?})"
        );
    }
    assert!(
        ranks
            .values()
            .any(|r| !r["losses"].as_array().unwrap().is_empty()),
        "some rank computes losses"
    );
}

/// Summary of a snapshot pickle, read by Python's own pickle: the trace's actions, the
/// frame names of its allocations and of the live blocks, and its last entry.
fn read_snapshot(python: &Path, path: &Path) -> Value {
    let script = r#"
import json, pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
trace = s["device_traces"][0]
names = lambda frames: [f["name"] for f in frames]
print(json.dumps({
    "actions": sorted({e["action"] for e in trace}),
    "alloc_frames": sorted({n for e in trace if e["action"] == "alloc" for n in names(e["frames"])}),
    "live_frames": sorted({n for seg in s["segments"] for b in seg["blocks"] for n in names(b["frames"])}),
    "last": {"action": trace[-1]["action"], "frames": names(trace[-1]["frames"])} if trace else None,
}))
"#;
    let out = Command::new(python)
        .args(["-c", script])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn has(v: &Value, name: &str) -> bool {
    v.as_array().unwrap().iter().any(|x| x == name)
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
    // Every parameter set otherwise: explicit layers, a step, C++ stacks, an odd folder.
    add_ok(
        dir.path(),
        &[
            "--ranks",
            "0,7,63",
            "--detail-layers",
            "5",
            "--step",
            "3",
            "--stacks",
            "all",
            "--snapshot-dir",
            "/tmp/it's a \"quoted\" dir\\x",
        ],
    );
    assert_ruff_clean(&ruff, dir.path(), None);
    // The model written from pithtrain's add-new-model outline, which no rule names.
    let dir = scratch_copy(&fixture());
    add_ok_model(dir.path(), "olmoe", &["--ranks", "3,14"]);
    assert_ruff_clean(&ruff, dir.path(), None);
}

fn add_ok_model(root: &Path, model: &str, extra: &[&str]) {
    let mut args = vec!["add", model];
    args.extend_from_slice(extra);
    let out = instrument(&args, root);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn instrumented_fixture_prints_in_order_and_computes_the_same() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    // pp=2: rank 3 is pipeline rank 0 and rank 14 pipeline rank 1 of the (pp, dp, cp, ep)
    // = (2, 4, 1, 2) mesh; each runs with its pipeline peer (11 and 6).
    let layout = ["--launch", "3,14"];
    let (dir, snaps) = instrumented(&["--ranks", "3,14"]);
    let run = run_fixture(&python, dir.path(), &layout);
    assert_eq!(run.code, 0, "{}", run.prints);
    assert_same_losses(&python, &run, &layout);
    // Group 2 moved set_device above init_process_group; the clean tree sets it after.
    assert_eq!(run.rank(3)["set_device_before_init"], json!([true]));
    for rank in [3, 14] {
        // Our history is started and stopped once, around the profiled step, with
        // Python stacks only.
        assert_eq!(
            run.rank(rank)["history"],
            json!(["start:1048576:python", "stop"]),
            "rank {rank}"
        );
        let snapshot = snaps
            .path()
            .join(format!("memory_snapshot_rank{rank}_step0.pickle"));
        assert!(snapshot.is_file(), "no snapshot at {}", snapshot.display());
    }
    assert!(run.lines(6).is_empty() && run.lines(11).is_empty());
    insta::assert_snapshot!("fixture_run_ranks_3_14", run.redacted(snaps.path()));
}

/// The detail a rank prints: one line naming its detail layers, then for each of them the
/// stage, saved-tensor and expert prints exactly once, and nothing for any other layer.
fn assert_detail(run: &Run, rank: u32, pp: u32, choice: &str, layers: &[u32], num_layers: u32) {
    let lines = run.lines(rank);
    let tag = format!("[rank={rank} pp={pp}] detail layers");
    let chosen: Vec<&&str> = lines.iter().filter(|l| l.starts_with(&tag)).collect();
    assert_eq!(
        chosen,
        [&format!("{tag}{choice}").as_str()],
        "rank {rank}:\n{}",
        lines.join("\n")
    );
    for layer in 0..num_layers {
        let expected = usize::from(layers.contains(&layer));
        for needle in [
            format!("layer{layer} stage1: before forward_stage1_compute"),
            format!("layer{layer} stage1 saved tensors:"),
            format!("layer{layer} stage3 saved tensors:"),
            format!("layer{layer} after stage5 (forward_stage5)"),
        ] {
            assert_eq!(
                count(&lines, &needle),
                expected,
                "rank {rank}, `{needle}`:\n{}",
                lines.join("\n")
            );
        }
    }
}

#[test]
fn detail_prints_on_every_pipeline_layout() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    // pp=1, as qwen3-30b-a3b, qwen3.5-35b-a3b and gpt-oss-20b ship (8 GPUs, ep=8): one rank
    // holds both halves, 0-3 and 4-7, and there is no Step 1 iteration.
    let layout = ["--pp", "1", "--ep", "8", "--world", "8", "--launch", "3"];
    let (dir, _snaps) = instrumented(&["--ranks", "3"]);
    let run = run_fixture(&python, dir.path(), &layout);
    assert_eq!(run.code, 0, "{}", run.prints);
    assert_detail(
        &run,
        3,
        0,
        " 0, 1: the first 2 MoE layers of the layers this rank holds (0-7)",
        &[0, 1],
        8,
    );
    let lines = run.lines(3);
    assert_eq!(count(&lines, "experts: after down_proj"), 2);
    assert_eq!(count(&lines, "after prolog (embed_tokens)"), 1);
    assert_eq!(count(&lines, "after lm_head"), 1);
    assert_eq!(count(&lines, "Step1 F0"), 0);
    assert_same_losses(&python, &run, &layout);

    // pp=2, profiled ranks on both stages: each prints the detail of what it holds.
    let layout = ["--launch", "3,14"];
    let (dir, _snaps) = instrumented(&["--ranks", "3,14"]);
    let run = run_fixture(&python, dir.path(), &layout);
    assert_eq!(run.code, 0, "{}", run.prints);
    let first_two = "the first 2 MoE layers of the layers this rank holds";
    assert_detail(
        &run,
        3,
        0,
        &format!(" 0, 1: {first_two} (0-1, 6-7)"),
        &[0, 1],
        8,
    );
    assert_detail(
        &run,
        14,
        1,
        &format!(" 2, 3: {first_two} (2-5)"),
        &[2, 3],
        8,
    );
    // The embedding and the head are on pipeline rank 0 (stages 0 and 3).
    assert_eq!(count(&run.lines(3), "after lm_head"), 1);
    assert_eq!(count(&run.lines(14), "after lm_head"), 0);

    // pp=4, the gpt-oss-120b layout: 36 layers over 8 stages as pithtrain's
    // layer_partition splits them, [4, 5, 5, 5, 5, 4, 4, 4]; pipeline rank r holds stages
    // r and 7 - r. Ranks 5, 21, 37 and 53 are one pipeline group of the (4, 2, 1, 8) mesh.
    let layout = [
        "--pp",
        "4",
        "--ep",
        "8",
        "--world",
        "64",
        "--launch",
        "5,21,37,53",
        "--config",
    ];
    let config = repo_root().join("tests/exec/gpt-oss-120b-layout");
    let layout: Vec<&str> = layout
        .into_iter()
        .chain([config.to_str().unwrap()])
        .collect();
    let (dir, _snaps) = instrumented_model("gpt-oss", &["--ranks", "5,21,37,53"]);
    let run = run_fixture(&python, dir.path(), &layout);
    assert_eq!(run.code, 0, "{}", run.prints);
    for (rank, pp, held, layers) in [
        (5, 0, "0-3, 32-35", [0, 1]),
        (21, 1, "4-8, 28-31", [4, 5]),
        (37, 2, "9-13, 24-27", [9, 10]),
        (53, 3, "14-23", [14, 15]),
    ] {
        let choice = format!(" {}, {}: {first_two} ({held})", layers[0], layers[1]);
        assert_detail(&run, rank, pp, &choice, &layers, 36);
        // Six expert prints per layer in gpt-oss (gate_up, its bias, swiglu, down, its bias).
        assert_eq!(count(&run.lines(rank), "experts:"), 2 * 6, "rank {rank}");
    }
    assert_same_losses(&python, &run, &layout);
}

#[test]
fn detail_layers_given_print_on_the_ranks_that_hold_them() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, _snaps) = instrumented(&["--ranks", "3,14", "--detail-layers", "0,1"]);
    let run = run_fixture(&python, dir.path(), &["--launch", "3,14"]);
    assert_eq!(run.code, 0, "{}", run.prints);
    assert_detail(
        &run,
        3,
        0,
        " 0, 1: the layers of --detail-layers 0,1 this rank holds (0-1, 6-7)",
        &[0, 1],
        8,
    );
    assert_detail(
        &run,
        14,
        1,
        ": none, this rank holds none of --detail-layers 0,1 (it holds 2-5)",
        &[],
        8,
    );
}

#[test]
fn other_ranks_print_nothing() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, snaps) = instrumented(&["--ranks", "0,14"]);
    let run = run_fixture(&python, dir.path(), &[]);
    assert_eq!(run.code, 0);
    assert_eq!(run.prints, "", "ranks 3 and 11 are not in --ranks 0,14");
    assert_eq!(run.result["history"], json!([]));
    assert_eq!(std::fs::read_dir(snaps.path()).unwrap().count(), 0);
}

#[test]
fn a_resumed_run_profiles_the_step_it_starts_from() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, snaps) = instrumented(&["--ranks", "3"]);
    let run = run_fixture(&python, dir.path(), &["--resume-from", "5"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.result["step"], 7);
    let lines = run.lines(3);
    assert_eq!(count(&lines, "[rank=3] load_ckpt | optimizer state: "), 1);
    assert_eq!(
        count(&lines, "Before pipeline"),
        1,
        "prints on the first step only:\n{}",
        run.prints
    );
    assert!(
        snaps
            .path()
            .join("memory_snapshot_rank3_step5.pickle")
            .is_file()
    );
}

#[test]
fn a_resumed_run_with_an_earlier_step_says_nothing_will_be_profiled() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, snaps) = instrumented(&["--ranks", "3", "--step", "1"]);
    let run = run_fixture(&python, dir.path(), &["--resume-from", "5"]);
    assert_eq!(run.code, 0, "{}", run.prints);
    assert_eq!(run.result["step"], 7);
    // Everything rank 3 printed: the setup and the checkpoint load, then that nothing
    // will be profiled, and why; no pipeline print.
    let mut expected = SETUP_PRINTS_RANK_3.to_vec();
    expected.extend([
        "[rank=3] load_ckpt | optimizer state: 0.00 GiB (0 param entries) | alloc=0.02 cached=1.98 non-pt=1.75",
        "[rank=3] memory prints: nothing will be profiled: --step 1 comes before step 5, where this run starts; the first step that can be profiled is 5",
    ]);
    assert_eq!(run.lines(3), expected, "{}", run.prints);
    assert_eq!(run.result["history"], json!([]));
    assert_eq!(std::fs::read_dir(snaps.path()).unwrap().count(), 0);
}

#[test]
fn step_flag_picks_the_profiled_step() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, snaps) = instrumented(&["--ranks", "3", "--step", "1"]);
    let run = run_fixture(&python, dir.path(), &["--max-steps", "3"]);
    assert_eq!(run.code, 0);
    let lines = run.lines(3);
    assert_eq!(count(&lines, "Before pipeline"), 1, "{}", run.prints);
    assert_eq!(count(&lines, "Memory snapshot saved"), 1);
    assert!(
        snaps
            .path()
            .join("memory_snapshot_rank3_step1.pickle")
            .is_file()
    );
    // A step the run never reaches: said once (after the setup prints), nothing recorded.
    let run = run_fixture(&python, dir.path(), &["--max-steps", "1"]);
    assert_eq!(run.code, 0);
    let mut expected = SETUP_PRINTS_RANK_3.to_vec();
    expected.push(
        "[rank=3] memory prints: nothing will be profiled: --step 1 is not before max_steps 1; the last step that can be profiled is 0",
    );
    assert_eq!(run.lines(3), expected, "{}", run.prints);
    assert_eq!(run.result["history"], json!([]));
}

#[test]
fn pithtrains_own_memory_profiler_keeps_its_history() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, snaps) = instrumented(&["--ranks", "3"]);
    let run = run_fixture(
        &python,
        dir.path(),
        &["--profile-start", "0", "--profile-stop", "2"],
    );
    assert_eq!(run.code, 0);
    // Only pithtrain's own start (at step 0) and stop (after step 1): ours neither starts
    // a second history over it nor stops it early.
    assert_eq!(run.result["history"], json!(["start:65536:python", "stop"]));
    assert!(
        snaps
            .path()
            .join("memory_snapshot_rank3_step0.pickle")
            .is_file()
    );
}

#[test]
fn the_step_snapshot_holds_the_optimizer_step_with_the_stacks_asked_for() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    for (stacks, cpp) in [(None, false), (Some("all"), true)] {
        let mut flags = vec!["--ranks", "3"];
        if let Some(s) = stacks {
            flags.extend(["--stacks", s]);
        }
        let (dir, snaps) = instrumented(&flags);
        let run = run_fixture(&python, dir.path(), &[]);
        assert_eq!(run.code, 0, "{}", run.prints);
        let asked = stacks.unwrap_or("python");
        assert_eq!(
            run.result["history"],
            json!([format!("start:1048576:{asked}"), "stop"])
        );
        let snap = read_snapshot(
            &python,
            &snaps.path().join("memory_snapshot_rank3_step0.pickle"),
        );
        // Forward, backward and the first optimizer step, whose lazily created state is
        // still live when the snapshot is taken.
        for frame in ["layer_forward", "model_backward", "_init_state"] {
            assert!(has(&snap["alloc_frames"], frame), "{frame}: {snap}");
        }
        assert!(has(&snap["live_frames"], "_init_state"), "{snap}");
        let cpp_frame = "c10::cuda::CUDACachingAllocator::Native::malloc";
        assert_eq!(
            has(&snap["alloc_frames"], cpp_frame),
            cpp,
            "{asked}: {snap}"
        );
    }
}

#[test]
fn an_oom_anywhere_in_the_profiled_step_dumps_a_snapshot() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, snaps) = instrumented(&["--ranks", "3"]);
    for (phase, frame) in [
        ("forward", "_forward_compute_chunk"),
        ("backward", "model_backward"),
        ("optimizer", "_init_state"),
    ] {
        for f in std::fs::read_dir(snaps.path()).unwrap() {
            std::fs::remove_file(f.unwrap().path()).unwrap();
        }
        let run = run_fixture(&python, dir.path(), &["--oom-in", phase]);
        assert_eq!(run.code, 1, "{phase}: {}", run.prints);
        let error = run.result["error"].as_str().unwrap();
        assert!(error.starts_with("OutOfMemoryError"), "{phase}: {error}");
        let lines = run.lines(3);
        assert_eq!(
            count(&lines, "[rank=3] out of memory: "),
            1,
            "{phase}: {}",
            run.prints
        );
        let host = run.result["host"].as_str().unwrap();
        let oom = snaps.path().join("memory_snapshot_rank3.pickle");
        let saved = format!("[rank=3] Memory snapshot saved to {host}:{}", oom.display());
        assert_eq!(count(&lines, &saved), 1, "{phase}: {}", run.prints);
        assert!(
            !snaps
                .path()
                .join("memory_snapshot_rank3_step0.pickle")
                .exists()
        );
        // Taken at the failing allocation: the trace ends with the OOM, raised where
        // the phase allocates.
        let snap = read_snapshot(&python, &oom);
        assert_eq!(snap["last"]["action"], "oom", "{phase}: {snap}");
        assert!(has(&snap["last"]["frames"], frame), "{phase}: {snap}");
        assert_eq!(run.result["history"], json!(["start:1048576:python"]));
    }
}

#[test]
fn a_missing_snapshot_folder_is_created() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    let folder = scratch.path().join("not/there/yet");
    let (dir, _snaps) = instrumented(&["--ranks", "3", "--snapshot-dir", folder.to_str().unwrap()]);
    let run = run_fixture(&python, dir.path(), &[]);
    assert_eq!(run.code, 0, "{}", run.prints);
    assert!(folder.join("memory_snapshot_rank3_step0.pickle").is_file());
    assert_eq!(
        std::fs::read_dir(&folder).unwrap().count(),
        1,
        "no partial files left"
    );
}

#[test]
fn an_unwritable_snapshot_folder_costs_one_line_and_training_goes_on() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    // A folder under a file cannot be made, whoever runs the test.
    std::fs::write(scratch.path().join("a-file"), "").unwrap();
    let under_file = scratch.path().join("a-file/snaps");
    // A read-only folder, when the test does not run as root (root writes anyway).
    let read_only = scratch.path().join("read-only");
    std::fs::create_dir(&read_only).unwrap();
    let mut cases = vec![(under_file, "Not a directory")];
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o555)).unwrap();
        if std::fs::write(read_only.join("probe"), "").is_err() {
            cases.push((read_only.clone(), "Permission denied"));
        }
    }
    for (folder, reason) in cases {
        let (dir, _snaps) =
            instrumented(&["--ranks", "3", "--snapshot-dir", folder.to_str().unwrap()]);
        let layout = ["--launch", "3"];
        let run = run_fixture(&python, dir.path(), &layout);
        assert_eq!(run.code, 0, "{reason}: {}", run.prints);
        assert_eq!(run.result["step"], 2, "training went on");
        let path = folder.join("memory_snapshot_rank3_step0.pickle");
        let expected = format!(
            "[rank=3] memory snapshot not saved to {}: {reason}",
            path.display()
        );
        assert_eq!(count(&run.lines(3), &expected), 1, "{}", run.prints);
        assert_eq!(count(&run.lines(3), "Memory snapshot saved"), 0);
        assert_same_losses(&python, &run, &layout);
    }
}

#[test]
fn every_model_computes_the_same_and_prints_its_experts() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let models = [
        (
            "qwen3-moe",
            "qwen3-tiny",
            "experts: after down_proj",
            "0, 1",
        ),
        (
            "qwen3.5-moe",
            "qwen3.5-tiny",
            "experts: after down_proj",
            "0, 1",
        ),
        // Layer 0 is dense (first_k_dense_replace = 1): rank 3 holds 0-1 and 6-7, so its
        // first two MoE layers are 1 and 6, one in each chunk.
        (
            "deepseek-v2",
            "deepseek-v2-tiny",
            "experts: after down_proj",
            "1, 6",
        ),
        ("gpt-oss", "gpt-oss-tiny", "experts:", "0, 1"),
        // Written from pithtrain's add-new-model outline; no rule names it.
        ("olmoe", "olmoe-tiny", "experts: after down_proj", "0, 1"),
    ];
    for (model, config, expert_line, layers) in models {
        let (dir, snaps) = instrumented_model(model, &["--ranks", "3"]);
        let layout = ["--model", config];
        let run = run_fixture(&python, dir.path(), &layout);
        assert_eq!(run.code, 0, "{model}:\n{}", run.prints);
        assert_same_losses(&python, &run, &layout);
        let lines = run.lines(3);
        assert_eq!(
            count(&lines, &format!("[rank=3 pp=0] detail layers {layers}: ")),
            1,
            "{model}:\n{}",
            run.prints
        );
        for needle in [expert_line, "saved tensors:", "after lm_head"] {
            assert!(
                count(&lines, needle) > 0,
                "{model}: no `{needle}`:\n{}",
                run.prints
            );
        }
        assert!(
            snaps
                .path()
                .join("memory_snapshot_rank3_step0.pickle")
                .is_file(),
            "{model}: no snapshot"
        );
    }
}
