//! `instrument log` on logs of real runs of the instrumented fixture (all four models,
//! pp=1 and pp=2, ranks 3 and 14 on two nodes), laid out the way torchrun (--tee, a
//! global-rank header, --log-dir), srun --label and a timestamping collector lay them out,
//! with noise. Every figure is checked against what the fake torch returned while the
//! run printed (tools/log_fixture.py records it), not against the tool's own output.

mod log_common;

use log_common::*;
use serde_json::Value;

/// The ways one run's output is read: (name, files).
fn variants() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        (
            "torchrun consoles",
            vec!["node0.console.log", "node1.console.log.gz"],
        ),
        ("srun --label", vec!["srun.log"]),
        ("torchrun --log-dir", vec!["logdir"]),
        ("timestamped", vec!["collected.log"]),
    ]
}

fn stated_cost(rank: &Value, label: &str) -> f64 {
    let c = rank["setup_breakdown"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["source"] == "stated" && c["label"] == label)
        .unwrap_or_else(|| panic!("no stated cost {label:?}"));
    b(&c["bytes"])
}

/// Check one rank of a report against the truth of that rank. `cut` is the index of a
/// print the launcher cut in this layout (it is not in the report).
fn check_rank(report: &Value, r: i64, t: &Value, cut: Option<usize>, what: &str) {
    let what = format!("{what}, rank {r}");
    let prints: Vec<&Value> = t["prints"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != cut)
        .map(|(_, p)| p)
        .collect();
    let text = |p: &Value| p["text"].as_str().unwrap().to_string();
    let alloc = |p: &Value| b(&p["allocated"]);
    let cached = |p: &Value| b(&p["reserved"]) - b(&p["allocated"]);
    let non_pt = |p: &Value| b(&p["total"]) - b(&p["free"]) - b(&p["reserved"]);
    let tr = rank(report, r);

    // The schedule: every point, with allocated, cached and non-PyTorch memory.
    let timeline: Vec<&Value> = prints
        .iter()
        .copied()
        .filter(|p| text(p).starts_with(&format!("[rank={r} pp=")) && text(p).contains("alloc="))
        .collect();
    let points = tr["step"]["points"].as_array().unwrap();
    assert_eq!(points.len(), timeline.len(), "{what}: schedule points");
    for (p, tp) in points.iter().zip(&timeline) {
        let at = format!("{what}: {}", p["label"]);
        near_gib(b(&p["allocated_bytes"]), alloc(tp), &at);
        near_gib(b(&p["cached_bytes"]), cached(tp), &at);
        near_gib(b(&p["non_pytorch_bytes"]), non_pt(tp), &at);
    }
    assert_eq!(tr["pp_rank"], t["pp_rank"], "{what}: pipeline rank");

    // The peak of the step: the highest allocation any print of the step read.
    let first = prints.iter().position(|p| timeline.contains(p)).unwrap();
    let last = prints.iter().rposition(|p| timeline.contains(p)).unwrap();
    let in_step: Vec<&Value> = prints[first..=last]
        .iter()
        .copied()
        .filter(|p| text(p).contains("alloc="))
        .collect();
    let truth_peak = in_step.iter().map(|p| alloc(p)).fold(0.0, f64::max);
    near_gib(
        b(&tr["step"]["peak"]["allocated_bytes"]),
        truth_peak,
        &format!("{what}: peak"),
    );
    let schedule_peak = timeline.iter().map(|p| alloc(p)).fold(0.0, f64::max);
    near_gib(
        b(&tr["step"]["schedule_peak"]["allocated_bytes"]),
        schedule_peak,
        &format!("{what}: schedule peak"),
    );
    let np: Vec<f64> = timeline.iter().map(|p| non_pt(p)).collect();
    near_gib(
        b(&tr["step"]["non_pytorch"]["max_bytes"]),
        np.iter().copied().fold(0.0, f64::max),
        &format!("{what}: non-PyTorch"),
    );

    // Setup: what the CUDA context, the NCCL world and the device mesh cost.
    let s = &t["setup"];
    near_gib(
        stated_cost(tr, "CUDA context"),
        b(&s["non_pt_before_init"]),
        &format!("{what}: CUDA context"),
    );
    near_gib(
        stated_cost(tr, "NCCL world"),
        b(&s["non_pt_after_init"]) - b(&s["non_pt_before_init"]),
        &format!("{what}: NCCL world"),
    );
    near_gib(
        stated_cost(tr, "device mesh"),
        b(&s["non_pt_after_mesh"]) - b(&s["non_pt_before_mesh"]),
        &format!("{what}: device mesh"),
    );
    if let Some(o) = s.get("optimizer_state_bytes") {
        near_gib(
            stated_cost(tr, "optimizer state"),
            b(o),
            &format!("{what}: optimizer state"),
        );
    }

    // Saved tensors per layer and stage, activations and weights apart.
    let saved_truth = t["saved"].as_array().unwrap();
    let layers = tr["layers"].as_array().unwrap();
    let mut saved_read = 0;
    for l in layers {
        for st in l["stages"].as_array().unwrap() {
            saved_read += st.get("saved").is_some() as usize;
        }
    }
    assert_eq!(saved_read, saved_truth.len(), "{what}: saved-tensor lists");
    for g in saved_truth {
        let l = layers.iter().find(|l| l["layer"] == g["layer"]).unwrap();
        let st = l["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["stage"] == g["stage"])
            .unwrap();
        let saved = &st["saved"];
        let at = format!("{what}: layer {} {} saved", g["layer"], g["stage"]);
        near_mib(
            b(&saved["activations_bytes"]),
            b(&g["activation_bytes"]),
            &at,
        );
        near_mib(b(&saved["weights_bytes"]), b(&g["weight_bytes"]), &at);
        near_mib(
            b(&saved["list_activation_bytes"]),
            b(&g["activation_bytes"]),
            &at,
        );
        assert_eq!(saved["tensors"], g["count"], "{at}: tensors");
    }

    // The expert steps, in order, with the allocation each read.
    let experts_truth: Vec<&Value> = prints
        .iter()
        .copied()
        .filter(|p| text(p).contains("experts:"))
        .collect();
    let experts: Vec<&Value> = layers
        .iter()
        .flat_map(|l| l["stages"].as_array().unwrap())
        .flat_map(|s| s["probes"].as_array().unwrap())
        .filter(|p| p["part"] == "experts")
        .collect();
    assert_eq!(experts.len(), experts_truth.len(), "{what}: expert steps");
    for (e, te) in experts.iter().zip(&experts_truth) {
        near_gib(
            b(&e["allocated_bytes"]),
            alloc(te),
            &format!("{what}: expert step {}", e["label"]),
        );
    }

    // The detail layers the rank chose at run time: those whose stages the fake torch's
    // saved-tensor hooks saw, and the layers the report details.
    let mut hooked: Vec<i64> = saved_truth
        .iter()
        .map(|g| g["layer"].as_i64().unwrap())
        .collect();
    hooked.dedup();
    let chosen: Vec<i64> = tr["detail_layers"]["layers"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no detail-layers line read"))
        .iter()
        .map(|l| l.as_i64().unwrap())
        .collect();
    assert_eq!(chosen, hooked, "{what}: detail layers");
    let detailed: Vec<i64> = layers
        .iter()
        .map(|l| l["layer"].as_i64().unwrap())
        .collect();
    assert_eq!(detailed, hooked, "{what}: layers reported");

    // The snapshot files, on the host they were written on, and the command that opens each.
    let host = t["host"].as_str().unwrap();
    let files: Vec<String> = tr["files_written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap().to_string();
            assert_eq!(f["command"], format!("instrument snapshot {path}"));
            assert_eq!(f["host"], host, "{what}: snapshot host");
            path
        })
        .collect();
    let truth_files: Vec<String> = t["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert_eq!(files, truth_files, "{what}: snapshot files");
}

fn check_scenario(s: &Scenario, what: &str) {
    for (name, files) in variants() {
        let paths: Vec<String> = files.iter().map(|f| s.path(f)).collect();
        let args: Vec<&str> = paths.iter().map(String::as_str).collect();
        let report = log_json(&args);
        let what = format!("{what}, {name}");
        let ranks = s.truth["ranks"].as_object().unwrap();
        for (r, t) in ranks {
            let r: i64 = r.parse().unwrap();
            let mut t = t.clone();
            t["host"] = s.truth["host"].clone();
            let t = &t;
            let cut = files.iter().find_map(|f| {
                s.truth["files"][*f]["cut"][r.to_string()]
                    .as_u64()
                    .map(|c| c as usize)
            });
            check_rank(&report, r, t, cut, &what);
        }
        // The line each worker printed that looks like a print but is none, and the print
        // torchrun's tailer cut on node 0: counted, not read.
        assert_eq!(
            report["totals"]["unreadable"],
            ranks.len() as u64,
            "{what}: unreadable"
        );
        let cuts = if name == "torchrun consoles" { 1 } else { 0 };
        assert_eq!(report["totals"]["cut"], cuts, "{what}: cut prints");
    }
}

#[test]
fn every_model_on_both_pipeline_layouts_reads_what_the_fake_torch_returned() {
    let Some(py) = python() else { return };
    let runs: Vec<(&str, &str, u32)> = MODELS
        .iter()
        .flat_map(|&(m, e)| [(m, e, 1), (m, e, 2)])
        .collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .chunks(4)
            .map(|chunk| {
                let py = &py;
                scope.spawn(move || {
                    for &(model, example, pp) in chunk {
                        let s = scenario(py, model, example, pp, &[]);
                        check_scenario(&s, &format!("{model} pp={pp}"));
                        // Each rank details layers it holds: on pp=2 the two stages
                        // detail different layers.
                        let report = log_json(&[&s.path("srun.log")]);
                        let layers = |r| rank(&report, r)["detail_layers"]["layers"].clone();
                        assert!(!layers(3).as_array().unwrap().is_empty());
                        assert_eq!(pp == 2, layers(3) != layers(14), "{model} pp={pp}");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
}

#[test]
fn the_rank_that_holds_more_stands_out_where_it_holds_it() {
    let Some(py) = python() else { return };
    let s = scenario(&py, "qwen3-moe", "qwen3-tiny", 1, &["--hold-mib", "14:300"]);
    check_scenario(&s, "qwen3-moe pp=1, rank 14 holding 300 MiB");
    let report = log_json(&[
        &s.path("node0.console.log"),
        &s.path("node1.console.log.gz"),
    ]);
    let standout = &report["across"]["standout"];
    assert_eq!(standout["rank"], 14, "{standout}");
    assert_eq!(standout["figure"], "peak allocated");
    let held = b(&s.truth["ranks"]["14"]["held_bytes"]);
    let phases = standout["phases"].as_array().unwrap();
    assert!(!phases.is_empty());
    for p in phases {
        // A difference of two figures each rounded to 0.01 GiB.
        let d = b(&p["diff_bytes"]);
        assert!(
            (d - held).abs() <= 0.01 * GIB + 1.0,
            "difference at {}: {d} vs held {held}",
            p["phase"]
        );
    }
    // Without it the two ranks are alike: none stands out.
    let plain = scenario(&py, "qwen3-moe", "qwen3-tiny", 1, &[]);
    let report = log_json(&[&plain.path("srun.log")]);
    assert!(
        report["across"].get("standout").is_none(),
        "{}",
        report["across"]
    );
    // --rank keeps one rank.
    let report = log_json(&["--rank", "14", &plain.path("srun.log")]);
    assert_eq!(report["ranks"].as_array().unwrap().len(), 1);
    assert!(report.get("across").is_none());
}

#[test]
fn a_resumed_run_reports_the_checkpoint_load_and_its_step() {
    let Some(py) = python() else { return };
    let s = scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &["--resume-from", "5"]);
    check_scenario(&s, "qwen3-moe pp=2 resumed at step 5");
    let report = log_json(&[&s.path("srun.log")]);
    let r3 = rank(&report, 3);
    assert!(
        r3["setup"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["label"] == "load_ckpt")
    );
    let path = r3["files_written"][0]["path"].as_str().unwrap();
    assert!(path.ends_with("_step5.pickle"), "{path}");
}

#[test]
fn a_rank_out_of_memory_reports_what_the_allocator_said_and_its_snapshot() {
    let Some(py) = python() else { return };
    let s = scenario(&py, "qwen3-moe", "qwen3-tiny", 1, &["--oom-in", "backward"]);
    let report = log_json(&[
        &s.path("node0.console.log"),
        &s.path("node1.console.log.gz"),
    ]);
    let t3 = &s.truth["ranks"]["3"];
    let oom = t3["oom"].as_array().unwrap();
    assert_eq!(oom.len(), 1, "the fake torch's OOM observer calls: {oom:?}");
    let r3 = rank(&report, 3);
    let read = r3["out_of_memory"].as_array().unwrap();
    assert_eq!(read.len(), 1, "{read:?}");
    near_gib(
        b(&read[0]["requested_bytes"]),
        b(&oom[0]["requested"]),
        "requested",
    );
    near_gib(b(&read[0]["free_bytes"]), b(&oom[0]["free"]), "free");
    near_gib(b(&read[0]["total_bytes"]), b(&oom[0]["allowed"]), "allowed");
    // The snapshot written at the error is the file on disk, and said to be.
    let on_disk: Vec<&str> = t3["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let files = r3["files_written"].as_array().unwrap();
    assert_eq!(files.len(), on_disk.len(), "{files:?} vs {on_disk:?}");
    assert_eq!(files[0]["path"], on_disk[0]);
    assert_eq!(files[0]["at_out_of_memory"], true);
    // Rank 14 ran the step to its end: no OOM, the step's snapshot.
    let r14 = rank(&report, 14);
    assert!(r14["out_of_memory"].as_array().unwrap().is_empty());
    assert_eq!(r14["files_written"][0]["at_out_of_memory"], false);
    assert_eq!(
        report["findings"].as_array().unwrap().len(),
        1,
        "{}",
        report["findings"]
    );
    assert_eq!(report["findings"][0]["rank"], 3);
    assert_eq!(report["findings"][0]["kind"], "out-of-memory");
}

#[test]
fn a_snapshot_that_cannot_be_written_is_said_per_rank_and_no_command_is_offered() {
    let Some(py) = python() else { return };
    let s = scenario_in(
        &py,
        "qwen3-moe",
        "qwen3-tiny",
        1,
        &[],
        Some("blocked/snaps"),
    );
    let dir = s.snaps.path().join("blocked/snaps");
    for r in [3, 14] {
        assert!(
            s.truth["ranks"][r.to_string()]["snapshots"]
                .as_array()
                .unwrap()
                .is_empty()
        );
    }
    let report = log_json(&[&s.path("srun.log")]);
    for r in [3, 14] {
        let tr = rank(&report, r);
        assert!(tr["files_written"].as_array().unwrap().is_empty());
        let failed = tr["files_not_written"].as_array().unwrap();
        assert_eq!(failed.len(), 1, "rank {r}: {failed:?}");
        let path = failed[0]["path"].as_str().unwrap();
        assert!(path.starts_with(&dir.display().to_string()), "{path}");
        assert!(!failed[0]["reason"].as_str().unwrap().is_empty());
    }
    let kinds: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["file-not-written", "file-not-written"]);
    let text = instrument(&["log", &s.path("srun.log")]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(!text.contains("instrument snapshot"), "{text}");
    assert!(text.contains("not saved"), "{text}");
}
