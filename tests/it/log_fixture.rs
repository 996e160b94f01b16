//! `instrument log` on logs of real runs of the instrumented fixture (all four models,
//! pp=1 and pp=2, ranks 3 and 14 on two nodes), laid out the way torchrun (--tee, a
//! global-rank header, --log-dir), srun --label and a timestamping collector lay them out,
//! with noise. Every figure is checked against what the fake torch returned while the
//! run printed (tools/log_fixture.py records it), not against the tool's own output.

use crate::log_common;

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

/// The highest allocation the fake torch returned to any print of the rank's profiled step
/// (from its first schedule point to its last, layer probes included).
fn truth_peak(t: &Value, r: i64) -> f64 {
    let prints = t["prints"].as_array().unwrap();
    let text = |p: &Value| p["text"].as_str().unwrap().to_string();
    let timeline =
        |p: &Value| text(p).starts_with(&format!("[rank={r} pp=")) && text(p).contains("alloc=");
    let first = prints.iter().position(timeline).unwrap();
    let last = prints.iter().rposition(timeline).unwrap();
    prints[first..=last]
        .iter()
        .filter(|p| text(p).contains("alloc="))
        .map(|p| b(&p["allocated"]))
        .fold(0.0, f64::max)
}

/// What the NCCL world cost the rank, as the fake torch's memory told it.
fn truth_nccl(t: &Value) -> f64 {
    b(&t["setup"]["non_pt_after_init"]) - b(&t["setup"]["non_pt_before_init"])
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

    // Each detail layer over its stages: the tensors the fake torch's hooks were handed in
    // all of the layer's stages (each stage printed to 0.1 MiB).
    for l in layers {
        let groups: Vec<&Value> = saved_truth
            .iter()
            .filter(|g| g["layer"] == l["layer"])
            .collect();
        let all = &l["saved_all"];
        let at = format!("{what}: layer {} over its stages", l["layer"]);
        assert_eq!(all["stages"], groups.len(), "{at}: stages");
        let sum = |k: &str| groups.iter().map(|g| b(&g[k])).sum::<f64>();
        let slack = 0.05 * MIB * groups.len() as f64 + 1.0;
        assert!(
            (b(&all["activations_bytes"]) - sum("activation_bytes")).abs() <= slack,
            "{at}: activations {} vs {}",
            all["activations_bytes"],
            sum("activation_bytes")
        );
        assert!(
            (b(&all["weights_bytes"]) - sum("weight_bytes")).abs() <= slack,
            "{at}: weights {} vs {}",
            all["weights_bytes"],
            sum("weight_bytes")
        );
    }

    // The run's shape: the coordinates the fake torch's device mesh gave the rank, and what
    // the run was configured with.
    let mesh_truth = t["mesh"].as_object().unwrap();
    let mesh = tr["mesh"]
        .as_object()
        .unwrap_or_else(|| panic!("{what}: no mesh"));
    assert_eq!(mesh.len(), mesh_truth.len(), "{what}: mesh axes");
    for (axis, coord) in mesh_truth {
        assert_eq!(&mesh[axis], coord, "{what}: mesh {axis}");
    }
    let fields = &tr["run"]["fields"];
    for key in ["mbs", "seq", "gbs", "world"] {
        assert_eq!(fields[key], t["run"][key].to_string(), "{what}: {key}");
    }
    assert_eq!(fields["model"], t["run"]["model"], "{what}: model");
    assert_eq!(fields["rank"], r.to_string(), "{what}: rank");

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
    // Three ranks on the one stage: standing out needs three peers or more.
    let s = scenario_full(
        &py,
        "qwen3-moe",
        "qwen3-tiny",
        1,
        "3,5,14",
        &[],
        &["--hold-mib", "14:300"],
        None,
    );
    check_scenario(&s, "qwen3-moe pp=1, rank 14 holding 300 MiB");
    let report = log_json(&[
        &s.path("node0.console.log"),
        &s.path("node1.console.log.gz"),
    ]);
    let standout = &report["across"]["standout"];
    assert_eq!(standout["rank"], 14, "{standout}");
    assert_eq!(standout["figure"], "peak allocated");
    assert_eq!(standout["compared_with"], serde_json::json!([3, 5]));
    // The same, as the report's one finding, its figure against the peers' median.
    let f = &report["findings"].as_array().unwrap();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        (&f[0]["kind"], &f[0]["where"]["rank"]),
        (&Value::from("stands-out"), &Value::from(14))
    );
    assert_eq!(f[0]["figure"]["value"].as_f64(), standout["bytes"].as_f64());
    assert_eq!(
        f[0]["figure"]["compared_with"]["value"].as_f64(),
        standout["median_bytes"].as_f64()
    );
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
    // The backward chunk begins by asking for 1.5 GiB with 600 MiB left free: figures the
    // prints' 0.01 GiB show.
    let s = scenario(
        &py,
        "qwen3-moe",
        "qwen3-tiny",
        1,
        &[
            "--oom-in",
            "backward",
            "--oom-request-mib",
            "1536",
            "--oom-free-mib",
            "600",
        ],
    );
    let report = log_json(&[
        &s.path("node0.console.log"),
        &s.path("node1.console.log.gz"),
    ]);
    let t3 = &s.truth["ranks"]["3"];
    let oom = t3["oom"].as_array().unwrap();
    assert_eq!(oom.len(), 1, "the fake torch's OOM observer calls: {oom:?}");
    for key in ["requested", "free", "allowed"] {
        assert!(b(&oom[0][key]) > 0.5 * GIB, "{key}: {oom:?}");
    }
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
    // One finding, an error, first: the allocation that failed, what was free of what, and
    // the snapshot written at the error as the next step.
    let f = &report["findings"][0];
    assert_eq!(f["where"]["rank"], 3);
    assert_eq!(
        (&f["kind"], &f["severity"]),
        (&Value::from("out-of-memory"), &Value::from("error"))
    );
    assert_eq!(f["figure"]["unit"], "bytes");
    near_gib(
        b(&f["figure"]["value"]),
        b(&oom[0]["requested"]),
        "requested",
    );
    let said = format!(
        "{:.2} GiB free of {:.2} GiB",
        b(&oom[0]["free"]) / GIB,
        b(&oom[0]["allowed"]) / GIB
    );
    assert!(
        f["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e == &Value::from(said.clone())),
        "{f} vs {said}"
    );
    assert!(f["next"].as_str().unwrap().ends_with(on_disk[0]), "{f}");
    // In text the findings open the report, right after the files read.
    let text = instrument(&["log", &s.path("srun.log")]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let heading = text
        .lines()
        .position(|l| l.starts_with("Findings: 1 (1 error(s)"))
        .unwrap();
    assert!(
        text.lines().take(heading).all(|l| !l.starts_with("==")),
        "findings come before any rank's detail: {text}"
    );
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

/// The ranks of a report's across section grouped by stage: (pp_rank, ranks).
fn stages_read(report: &Value) -> Vec<(Value, Vec<i64>)> {
    report["across"]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let ranks = g["ranks"].as_array().unwrap();
            (
                g["pp_rank"].clone(),
                ranks.iter().map(|r| r.as_i64().unwrap()).collect(),
            )
        })
        .collect()
}

/// The same grouping from the pipeline rank each worker's device mesh gave it.
fn stages_truth(s: &Scenario) -> Vec<(Value, Vec<i64>)> {
    let mut by: std::collections::BTreeMap<i64, Vec<i64>> = Default::default();
    for (r, t) in s.truth["ranks"].as_object().unwrap() {
        by.entry(t["pp_rank"].as_i64().unwrap())
            .or_default()
            .push(r.parse().unwrap());
    }
    by.into_iter()
        .map(|(pp, mut ranks)| {
            ranks.sort();
            (Value::from(pp), ranks)
        })
        .collect()
}

#[test]
fn ranks_stand_out_only_against_ranks_on_their_own_pipeline_stage() {
    let Some(py) = python() else { return };
    // pp=2 of 16 ranks: 3 and 5 share stage 0 (other dp/ep coordinates), 14 is on stage 1.
    let plain = scenario_full(&py, "qwen3-moe", "qwen3-tiny", 2, "3,5,14", &[], &[], None);
    check_scenario(&plain, "qwen3-moe pp=2, ranks 3, 5, 14");
    let t = &plain.truth["ranks"];
    assert_eq!(
        t["3"]["pp_rank"], t["5"]["pp_rank"],
        "3 and 5 share a stage"
    );
    assert_ne!(
        t["3"]["pp_rank"], t["14"]["pp_rank"],
        "14 is on another stage"
    );
    // The stages hold different layers: their peaks differ by more than the prints'
    // rounding, which a comparison across stages would have called standing out.
    let (p3, p14) = (truth_peak(&t["3"], 3), truth_peak(&t["14"], 14));
    assert!((p3 - p14).abs() > 0.015 * GIB, "{p3} vs {p14}");
    let report = log_json(&[&plain.path("srun.log")]);
    let across = &report["across"];
    assert_eq!(stages_read(&report), stages_truth(&plain));
    assert!(across.get("standout").is_none(), "{across}");
    let said = across["not_compared"].as_str().unwrap();
    assert!(
        said.starts_with("rank 14 is alone on its pipeline stage (14 on pp=1)"),
        "{said}"
    );
    // Highest peak is said per stage: only the stage with two ranks has one.
    for h in across["highest"].as_array().unwrap() {
        if h["figure"] == "peak allocated" {
            assert_eq!(h["pp_rank"], t["3"]["pp_rank"], "{h}");
        }
    }

    // Rank 5 holds 300 MiB through the step: it stands out against ranks 3 and 6, its stage
    // peers.
    let s = scenario_full(
        &py,
        "qwen3-moe",
        "qwen3-tiny",
        2,
        "3,5,6,14",
        &[],
        &["--hold-mib", "5:300"],
        None,
    );
    let t = &s.truth["ranks"];
    let report = log_json(&[
        &s.path("node0.console.log"),
        &s.path("node1.console.log.gz"),
    ]);
    let standout = &report["across"]["standout"];
    assert_eq!(standout["rank"], 5, "{standout}");
    assert_eq!(standout["figure"], "peak allocated");
    assert_eq!(standout["among"], "same-stage");
    assert_eq!(standout["pp_rank"], t["5"]["pp_rank"]);
    assert_eq!(standout["compared_with"], serde_json::json!([3, 6]));
    near_gib(
        b(&standout["bytes"]),
        truth_peak(&t["5"], 5),
        "rank 5's peak",
    );
    near_gib(
        b(&standout["median_bytes"]),
        truth_peak(&t["3"], 3),
        "rank 3's peak",
    );
    let held = b(&t["5"]["held_bytes"]);
    let phases = standout["phases"].as_array().unwrap();
    assert!(!phases.is_empty());
    for p in phases {
        let d = b(&p["diff_bytes"]);
        assert!(
            (d - held).abs() <= 0.01 * GIB + 1.0,
            "difference at {}: {d} vs held {held}",
            p["phase"]
        );
    }
    let text = instrument(&["log", &s.path("srun.log")]);
    let text = String::from_utf8_lossy(&text.stdout);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    // The rank that stands out is named by its coordinates on the mesh.
    let standout_at = format!(
        "rank 5 ({}) stands out on pipeline stage 0: peak allocated",
        mesh_short(&t["5"]["mesh"])
    );
    assert!(flat.contains(&standout_at), "{standout_at}: {text}");
    assert_eq!(standout["mesh"], t["5"]["mesh"]);
}

#[test]
fn ranks_each_on_their_own_stage_are_compared_only_on_costs_alike_on_every_stage() {
    let Some(py) = python() else { return };
    let plain = scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]);
    let t = &plain.truth["ranks"];
    let (p3, p14) = (truth_peak(&t["3"], 3), truth_peak(&t["14"], 14));
    assert!((p3 - p14).abs() > 0.015 * GIB, "{p3} vs {p14}");
    let report = log_json(&[&plain.path("srun.log")]);
    assert_eq!(stages_read(&report), stages_truth(&plain));
    let across = &report["across"];
    assert!(across.get("standout").is_none(), "{across}");
    assert!(
        across["highest"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h.get("pp_rank").is_none()),
        "no stage has two ranks: {across}"
    );
    let text = instrument(&["log", &plain.path("srun.log")]);
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("ranks 3 and 14 are on different pipeline stages (3 on pp=0, 14 on pp=1)"),
        "{text}"
    );
    assert!(
        flat.contains("no rank is called out: standing out needs three ranks or more"),
        "{text}"
    );
    // The side-by-side table is still there.
    let table = text.split("== Across ranks").nth(1).unwrap();
    assert!(
        table.contains("\n  3 ") && table.contains("\n  14 "),
        "{table}"
    );

    // The NCCL world costs rank 14 half a GiB more: a setup cost alike on every stage, so
    // it is compared across stages (three ranks: 3 and 6 on pp 0, 14 on pp 1), and the
    // phases named are the setup phases it shows in.
    let s = scenario_full(
        &py,
        "qwen3-moe",
        "qwen3-tiny",
        2,
        "3,6,14",
        &[],
        &["--nccl-world-gib", "14:1.5"],
        None,
    );
    let t = &s.truth["ranks"];
    let report = log_json(&[&s.path("srun.log")]);
    let standout = &report["across"]["standout"];
    assert_eq!(standout["rank"], 14, "{standout}");
    assert_eq!(standout["figure"], "NCCL world");
    assert_eq!(standout["among"], "all-ranks");
    assert_eq!(standout["compared_with"], serde_json::json!([3, 6]));
    near_gib(
        b(&standout["bytes"]),
        truth_nccl(&t["14"]),
        "rank 14's NCCL world",
    );
    near_gib(
        b(&standout["median_bytes"]),
        truth_nccl(&t["3"]),
        "rank 3's NCCL world",
    );
    let extra = truth_nccl(&t["14"]) - truth_nccl(&t["3"]);
    assert!(extra > 0.4 * GIB, "{extra}");
    let phases = standout["phases"].as_array().unwrap();
    assert!(!phases.is_empty());
    for p in phases {
        assert!(p["phase"].as_str().unwrap().starts_with("setup: "), "{p}");
        let d = b(&p["diff_bytes"]);
        assert!((d - extra).abs() <= 0.01 * GIB + 1.0, "{p} vs {extra}");
    }
}

#[test]
fn a_step_out_of_range_is_a_finding_of_every_profiled_rank() {
    let Some(py) = python() else { return };
    // --step 50 on a run of max_steps 2: nothing will be profiled.
    let s = scenario_full(
        &py,
        "qwen3-moe",
        "qwen3-tiny",
        1,
        "3,14",
        &["--step", "50"],
        &[],
        None,
    );
    // (srun's layout: on node 0's console torchrun's tailer cuts the 12th print, which in
    // a run this short is the warning itself.)
    let report = log_json(&[&s.path("srun.log")]);
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 2, "{findings:?}");
    for (f, r) in findings.iter().zip([3, 14]) {
        let t = &s.truth["ranks"][r.to_string()];
        let max_steps = t["max_steps"].as_i64().unwrap();
        assert!(max_steps <= 50);
        assert_eq!(f["where"]["rank"], r);
        assert_eq!(f["kind"], "warning");
        let text = f["what"].as_str().unwrap();
        assert!(
            text.contains(&format!("--step 50 is not before max_steps {max_steps}")),
            "{text}"
        );
        // Nothing was profiled: no schedule, no snapshot on disk.
        assert!(t["snapshots"].as_array().unwrap().is_empty());
        let tr = rank(&report, r);
        assert!(tr.get("step").is_none(), "{tr}");
        assert!(tr["files_written"].as_array().unwrap().is_empty());
    }

    // A resumed run that starts at step 5 with --step 2: before the run's first step.
    let s = scenario_full(
        &py,
        "qwen3-moe",
        "qwen3-tiny",
        1,
        "3,14",
        &["--step", "2"],
        &["--resume-from", "5"],
        None,
    );
    let report = log_json(&[&s.path("srun.log")]);
    let findings = report["findings"].as_array().unwrap();
    let ranks: Vec<&Value> = findings.iter().map(|f| &f["where"]["rank"]).collect();
    assert_eq!(ranks, [3, 14], "{findings:?}");
    for f in findings {
        assert_eq!(f["kind"], "warning");
        let text = f["what"].as_str().unwrap();
        assert!(text.contains("--step 2 comes before step 5"), "{text}");
    }
}

#[test]
fn a_torch_without_the_oom_observer_is_a_finding_and_the_rest_reads_as_usual() {
    let Some(py) = python() else { return };
    let s = scenario(&py, "qwen3-moe", "qwen3-tiny", 1, &["--no-oom-observer"]);
    check_scenario(&s, "qwen3-moe pp=1 on a torch without the OOM observer");
    let report = log_json(&[&s.path("srun.log")]);
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 2, "{findings:?}");
    for (f, r) in findings.iter().zip([3, 14]) {
        assert_eq!(s.truth["ranks"][r.to_string()]["oom_observer"], false);
        assert_eq!(f["where"]["rank"], r);
        assert_eq!(f["kind"], "warning");
        assert!(
            f["what"].as_str().unwrap().contains("no OOM snapshot"),
            "{f}"
        );
    }
    // With the observer there, no such finding.
    let plain = scenario(&py, "qwen3-moe", "qwen3-tiny", 1, &[]);
    assert_eq!(plain.truth["ranks"]["3"]["oom_observer"], true);
    let report = log_json(&[&plain.path("srun.log")]);
    assert!(report["findings"].as_array().unwrap().is_empty());
}
