//! `instrument log BEFORE --diff AFTER`: two real runs of the instrumented fixture on the
//! fake torch, the second with a planted change (one layer saves 256 MiB more in its first
//! stage, in every forward: tools/log_fixture.py --extra-saved). The comparison must name
//! exactly that layer and stage, the peak's change the fake torch's figures give, and the
//! first schedule point where the fake torch's allocations part; nothing else. Bad input
//! (two runs as one side, different shapes, a rank on one side only, another place in the
//! mesh) is said in one line.

use crate::log_common;

use std::collections::BTreeSet;
use std::path::Path;

use log_common::*;
use serde_json::Value;

const PLANTED_LAYER: i64 = 3;
const PLANTED_MIB: f64 = 256.0;

/// The rank's schedule prints as the fake torch saw them: (text after the rank's prefix,
/// allocated bytes).
fn truth_timeline(t: &Value, r: i64) -> Vec<(String, f64)> {
    let head = format!("[rank={r} pp=");
    t["prints"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| {
            let text = p["text"].as_str().unwrap();
            (text.starts_with(&head) && text.contains("alloc=")).then(|| {
                let rest = text.split_once("] ").unwrap().1.to_string();
                (rest, b(&p["allocated"]))
            })
        })
        .collect()
}

/// The highest allocation the fake torch returned to any print of the profiled step.
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

fn run_json(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = instrument(args);
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn rank_diff(d: &Value, r: i64) -> &Value {
    d["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["rank"] == r)
        .unwrap_or_else(|| panic!("rank {r} not compared: {d}"))
}

#[test]
fn the_diff_names_the_planted_layer_the_peak_and_where_the_timelines_part() {
    let Some(py) = python() else { return };
    let (before, after) = std::thread::scope(|s| {
        let a = s.spawn(|| scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]));
        let planted = format!("{PLANTED_LAYER}:{PLANTED_MIB}");
        let b = scenario(
            &py,
            "qwen3-moe",
            "qwen3-tiny",
            2,
            &["--extra-saved", &planted],
        );
        (a.join().unwrap(), b)
    });
    // The planted layer is held by rank 14 (pipeline rank 1): layers 2-5 of 8 on pp=2.
    let (tb, ta) = (&before.truth["ranks"], &after.truth["ranks"]);
    assert!(b(&ta["14"]["planted_bytes"]) > 0.0);
    assert_eq!(b(&ta["3"]["planted_bytes"]), 0.0);

    let args = [
        "log",
        "--json",
        &before.path("srun.log"),
        "--diff",
        &after.path("node0.console.log"),
        &after.path("node1.console.log.gz"),
    ];
    let (code, d, err) = run_json(&args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(d["schema"], "instrument.log.diff/1");
    assert!(d["not_compared"].as_array().unwrap().is_empty(), "{d}");

    // Rank 14: exactly the planted layer's first stage, the layer over its stages, and the
    // peak; the peak's change as the fake torch's allocations give it.
    let r14 = rank_diff(&d, 14);
    assert_eq!(r14["changed"], true);
    assert_eq!(r14["mesh"], tb["14"]["mesh"]);
    let figures: BTreeSet<&str> = r14["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["figure"].as_str().unwrap())
        .collect();
    let want: BTreeSet<&str> = [
        "peak allocated",
        "layer 3 stage1 saved activations",
        "layer 3 saved activations, all stages",
    ]
    .into();
    assert_eq!(figures, want, "{r14}");
    for c in r14["changes"].as_array().unwrap() {
        if c["kind"] == "saved-activations" {
            assert_eq!(c["layer"], PLANTED_LAYER);
            near_mib(
                b(&c["change_bytes"]),
                PLANTED_MIB * MIB,
                "the planted layer",
            );
        }
    }
    let peak_change = truth_peak(&ta["14"], 14) - truth_peak(&tb["14"], 14);
    assert!(peak_change > PLANTED_MIB * MIB, "{peak_change}");
    let read = b(&r14["peak"]["change_bytes"]);
    assert!(
        (read - peak_change).abs() <= 0.01 * GIB + 1.0,
        "peak change {read} vs {peak_change}"
    );
    // The largest change first: the peak (two chunks hold the planted tensor there).
    assert_eq!(r14["changes"][0]["figure"], "peak allocated");

    // Where the fake torch's allocations first differ by more than the rounding.
    let (xb, xa) = (truth_timeline(&tb["14"], 14), truth_timeline(&ta["14"], 14));
    assert_eq!(xb.len(), xa.len());
    let first = xb
        .iter()
        .zip(&xa)
        .position(|(x, y)| (y.1 - x.1).abs() > 0.015 * GIB)
        .unwrap();
    let parted = &r14["parted_at"];
    let point = parted["point"].as_str().unwrap();
    assert!(xb[first].0.starts_with(point), "{point} vs {}", xb[first].0);
    assert!(
        xb[first - 1]
            .0
            .starts_with(parted["agreed_until"].as_str().unwrap())
    );
    near_gib(b(&parted["before_bytes"]), xb[first].1, "parted before");
    near_gib(b(&parted["after_bytes"]), xa[first].1, "parted after");
    // The first forward through layer 3: rank 14 runs no Step 1, so not the first point.
    assert_eq!(point, "Step2 i=0 forward_chunk(0)");

    // Rank 3 holds other layers: no change, said so.
    let r3 = rank_diff(&d, 3);
    assert_eq!(r3["changed"], false, "{r3}");
    assert!(r3["changes"].as_array().unwrap().is_empty());
    let text = instrument(&[
        "log",
        &before.path("srun.log"),
        "--diff",
        &after.path("srun.log"),
    ]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let unchanged = format!("rank 3 ({}): no change", mesh_short(&tb["3"]["mesh"]));
    assert!(flat.contains(&unchanged), "{unchanged}: {text}");
    assert!(
        flat.contains("the timelines part at \"Step2 i=0 forward_chunk(0)\""),
        "{text}"
    );

    // --gate: the peak and the layer's saved activations grew by more than 5%, each named.
    let gated = |pct: &str| {
        run_json(&[
            "log",
            "--json",
            &before.path("srun.log"),
            "--diff",
            &after.path("srun.log"),
            "--gate",
            pct,
        ])
    };
    let (code, d, _) = gated("5");
    assert_eq!(code, Some(1));
    assert_eq!(d["gate"]["verdict"], "failed");
    let rows = d["gate"]["rows"].as_array().unwrap();
    let failed: Vec<(i64, &str)> = rows
        .iter()
        .filter(|f| f["exceeded"] == true)
        .map(|f| {
            (
                f["where"]["rank"].as_i64().unwrap(),
                f["figure"].as_str().unwrap(),
            )
        })
        .collect();
    // The largest growth first: the layer's saved activations (20 -> 276 MiB, +1280%), then
    // the peak.
    assert_eq!(
        failed,
        vec![
            (14, "layer 3 saved activations, all stages"),
            (14, "peak allocated"),
        ]
    );
    assert_eq!(d["gate"]["failed"], 2);
    let growth: Vec<f64> = rows.iter().filter_map(|r| r["growth"].as_f64()).collect();
    assert!(growth.windows(2).all(|w| w[0] >= w[1]), "{growth:?}");
    let (code, d, _) = gated("2000");
    assert_eq!(
        (code, &d["gate"]["verdict"]),
        (Some(0), &Value::from("passed"))
    );
    let (code, d, _) = gated("500");
    assert_eq!(code, Some(1));
    assert_eq!(d["gate"]["failed"], 1, "{d}");
    // In text the verdict is the last line, for a CI log's tail.
    let text = instrument(&[
        "log",
        &before.path("srun.log"),
        "--diff",
        &after.path("srun.log"),
        "--gate",
        "5",
    ]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("gate 5%: FAILED, 2 of ") && last.contains("layer 3 saved activations"),
        "{last}"
    );
    // The same run against itself: no change anywhere, the gate passes.
    let (code, d, _) = run_json(&[
        "log",
        "--json",
        &before.path("srun.log"),
        "--diff",
        &before.path("logdir"),
        "--gate",
        "0",
    ]);
    assert_eq!(code, Some(0));
    assert!(
        d["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["changed"] == false)
    );

    // The page overlays the two runs per rank on one scale.
    let page = before.out.path().join("diff.html");
    let out = instrument(&[
        "log",
        &before.path("srun.log"),
        "--diff",
        &after.path("srun.log"),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("<svg class=\"diff\"").count(), 2);
    let scales: BTreeSet<&str> = html
        .match_indices("data-scale-gib=\"")
        .map(|(i, m)| {
            let rest = &html[i + m.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect();
    assert_eq!(scales.len(), 1, "one scale for every rank");
    assert_eq!(html.matches("<polyline class=\"before\"").count(), 2);
    assert_eq!(html.matches("<polyline class=\"after\"").count(), 2);
    assert_eq!(html.matches("<line class=\"parted\"").count(), 1);
}

#[test]
fn the_diff_refuses_a_wrong_comparison_in_one_line() {
    let Some(py) = python() else { return };
    let (pp2, pp4) = std::thread::scope(|s| {
        let a = s.spawn(|| scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]));
        (
            a.join().unwrap(),
            scenario(&py, "qwen3-moe", "qwen3-tiny", 4, &[]),
        )
    });
    let one_line = |out: &std::process::Output, want: &str| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{want}: {err}");
        assert!(out.stdout.is_empty());
    };
    // Two runs given as the run before.
    let out = instrument(&[
        "log",
        &pp2.path("srun.log"),
        &pp4.path("node1.console.log.gz"),
        "--diff",
        &pp2.path("srun.log"),
    ]);
    one_line(&out, "before: logs of different runs read as one");
    one_line(&out, "pp size 2 on rank 3, pp size 4 on rank 14");
    // The run after has another shape.
    let out = instrument(&[
        "log",
        &pp2.path("srun.log"),
        "--diff",
        &pp4.path("srun.log"),
    ]);
    one_line(
        &out,
        "have different shapes: pp size 2 before, pp size 4 after",
    );
    // A rank whose shape names another rank.
    let edited = pp2.out.path().join("edited.log");
    let log = std::fs::read_to_string(pp2.path("collected.log")).unwrap();
    std::fs::write(&edited, log.replace("run | rank=14;", "run | rank=13;")).unwrap();
    let out = instrument(&["log", edited.to_str().unwrap()]);
    one_line(&out, "rank 14 printed the run shape of rank 13");

    // A rank on one side only: one line, the others compared.
    let (code, d, err) = run_json(&[
        "log",
        "--json",
        &pp2.path("srun.log"),
        "--diff",
        &pp2.path("node0.console.log"),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        d["not_compared"],
        serde_json::json!([{"rank": 14, "side": "before", "why": "printed nothing after"}])
    );
    assert_eq!(d["ranks"].as_array().unwrap().len(), 1);
    let text = instrument(&[
        "log",
        &pp2.path("srun.log"),
        "--diff",
        &pp2.path("node0.console.log"),
    ]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("rank 14: not compared, printed nothing after"),
        "{text}"
    );
    // With a gate, a rank on one side only refuses it: the gate vouches for the whole run
    // or for nothing (exit 2, the reason in the JSON and as the text's last line).
    let gate_args = [
        "log",
        &pp2.path("srun.log"),
        "--diff",
        &pp2.path("node0.console.log"),
        "--gate",
        "5",
    ];
    let mut with_json = gate_args.to_vec();
    with_json.push("--json");
    let (code, d, _) = run_json(&with_json);
    assert_eq!(code, Some(2));
    assert_eq!(d["gate"]["verdict"], "refused");
    assert_eq!(d["gate"]["why"], "rank 14 printed nothing after");
    let text = instrument(&gate_args);
    assert_eq!(text.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&text.stdout).lines().last(),
        Some("gate 5%: REFUSED, nothing comparable: rank 14 printed nothing after")
    );
    // The same rank at another place in the mesh: not compared.
    let moved = pp2.out.path().join("moved.log");
    let dp = &pp2.truth["ranks"]["14"]["mesh"]["dp"];
    let (own, other) = (
        format!("dp={}/{}", dp[0], dp[1]),
        format!("dp={}/{}", (dp[0].as_u64().unwrap() + 1) % 4, dp[1]),
    );
    std::fs::write(&moved, log.replace(&own, &other)).unwrap();
    let (code, d, _) = run_json(&[
        "log",
        "--json",
        &pp2.path("srun.log"),
        "--diff",
        moved.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0));
    let nc = &d["not_compared"][0];
    assert_eq!(
        (&nc["rank"], &nc["side"]),
        (&Value::from(14), &Value::from("both"))
    );
    assert!(nc["why"].as_str().unwrap().contains(&own), "{nc}");
    // --gate without --diff, and standard input twice, are refused before anything is read.
    let out = instrument(&["log", &pp2.path("srun.log"), "--gate", "5"]);
    assert_eq!(out.status.code(), Some(2));
    let out = instrument(&["log", "-", "--diff", "-"]);
    one_line(&out, "`-` (standard input) can be given once");
}

/// What the fixture's estimator says for `pp_ranks`, asked through its Python API here (as
/// pithtrain's own tests ask theirs), not through instrument's driver.
fn estimator_says(py: &Path, checkout: &Path, model: &Path, pp_ranks: &[i64]) -> Value {
    let code = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
from tools.memory_estimator.__main__ import estimate_non_pytorch_bytes
from tools.memory_estimator.activation_profile import ActivationEstimator, compute_token_counts
from tools.memory_estimator.model_profile import ModelConfig, ModelMemoryProfile, ParallelismConfig
from tools.memory_estimator.schedule_simulator import ScheduleSimulator
cfg = ModelConfig.from_json(sys.argv[2])
par = ParallelismConfig(pp_size=2, ep_size=2, dp_size=4, cp_size=1, micro_batch_size=1,
                        global_batch_size=32, sequence_length=4)
out = {}
for r in json.loads(sys.argv[3]):
    prof = ModelMemoryProfile(cfg, par, pp_rank=r)
    tc = compute_token_counts(cfg, par)
    act = ActivationEstimator(cfg, par, prof, tc)
    res = ScheduleSimulator(cfg, par, prof, act, tc, r, 0.10, estimate_non_pytorch_bytes(par)).simulate()
    peak = res.timeline[res.peak_event_idx].snapshot
    out[str(r)] = {
        "static": res.static_bytes,
        "peak_model": peak.static_bytes + peak.dynamic_bytes,
        "non_pytorch": peak.non_pytorch_bytes,
        "total": peak.total_bytes,
        "peak_event": res.timeline[res.peak_event_idx].name,
        "events": {e.name: e.snapshot.static_bytes + e.snapshot.dynamic_bytes for e in res.timeline},
        "last": res.timeline[-1].name,
    }
print(json.dumps(out))
"#;
    let out = std::process::Command::new(py)
        .args(["-B", "-c", code])
        .arg(checkout)
        .arg(model)
        .arg(serde_json::to_string(pp_ranks).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn figure<'a>(rank: &'a Value, name: &str) -> &'a Value {
    rank["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["figure"] == name)
        .unwrap()
}

fn estimate_rank(report: &Value, r: i64) -> &Value {
    report["estimate"]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["rank"] == r)
        .unwrap_or_else(|| panic!("no estimate for rank {r}: {}", report["estimate"]))
}

#[test]
fn the_estimate_stands_beside_the_measured_figures_and_says_where_they_part() {
    let Some(py) = python() else { return };
    let (plain, planted) = std::thread::scope(|s| {
        let a = s.spawn(|| scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]));
        let planted = format!("{PLANTED_LAYER}:{PLANTED_MIB}");
        let b = scenario(
            &py,
            "qwen3-moe",
            "qwen3-tiny",
            2,
            &["--extra-saved", &planted],
        );
        (a.join().unwrap(), b)
    });
    let checkout = repo_root().join("fixtures/pithtrain");
    let model = checkout.join("examples/pretrain_lm/qwen3-tiny/config.json");
    let says = estimator_says(&py, &checkout, &model, &[0, 1]);
    let root = checkout.to_str().unwrap();
    // rank 14's schedule (pipeline rank 1 of 2, 4 micro-batches) and the estimator's events
    // whose state each of its prints reads, as pithtrain's schedule runs them.
    let pp1 = [
        ("Before pipeline", "static_baseline"),
        ("After Step1", "static_baseline"),
        ("Step2 i=0 forward_chunk(0)", "S2.i0 fwd(p0) c0"),
        ("Step2 i=0 forward_chunk(1)", "S2.i0 fwd(p1) c0"),
        ("Step2 i=1 forward_chunk(0)", "S2.i1 fwd(p0) c1"),
        ("Step2 i=1 forward_chunk(1)", "S2.i1 fwd(p1) c1"),
        ("After Step2", "S2.i1 fwd(p1) c1"),
        ("After Step3", "S2.i1 fwd(p1) c1"),
        ("Step4 i=0", "S4.i0 fwd_bwd(p1,p0) fc2/bc0"),
        ("Step4 i=1", "S4.i1 fwd_bwd(p1,p0) fc3/bc1"),
        ("After Step4", "S4.i1 fwd_bwd(p1,p0) fc3/bc1"),
        ("After Step8 (end of pipeline)", "S8.i1 weight_chunk"),
    ];
    assert_eq!(says["1"]["last"], "S8.i1 weight_chunk");
    for (s, leaves) in [
        (&plain, None),
        (&planted, Some("Step2 i=0 forward_chunk(0)")),
    ] {
        let report = log_json(&[
            &s.path("srun.log"),
            "--estimate",
            "--root",
            root,
            "--estimate-tolerance",
            "20",
        ]);
        let e = &report["estimate"];
        assert!(e.get("unavailable").is_none(), "{e}");
        assert_eq!(e["found_by"], "root");
        assert_eq!(e["inputs"]["pp_size"], 2);
        assert_eq!(e["inputs"]["dp_size"], 4);
        assert_eq!(e["inputs"]["global_batch_size"], 32);
        assert_eq!(e["inputs"]["world"], 16);
        for r in [3i64, 14] {
            let t = &s.truth["ranks"][r.to_string()];
            let pp = t["pp_rank"].as_i64().unwrap();
            let want = &says[pp.to_string()];
            let x = estimate_rank(&report, r);
            assert_eq!(x["pp_rank"], pp);
            // The estimate's figures, as its own API gives them.
            assert_eq!(figure(x, "static")["estimated_bytes"], want["static"]);
            assert_eq!(figure(x, "peak")["estimated_bytes"], want["peak_model"]);
            assert_eq!(
                figure(x, "non_pytorch")["estimated_bytes"],
                want["non_pytorch"]
            );
            assert_eq!(figure(x, "device_total")["estimated_bytes"], want["total"]);
            assert_eq!(x["estimated_peak_event"], want["peak_event"]);
            // The measured ones, as the fake torch returned them.
            let timeline = truth_timeline(t, r);
            let before_pipeline = timeline[0].1;
            let m = |f: &str| b(&figure(x, f)["measured_bytes"]);
            near_gib(m("static"), before_pipeline, "Before pipeline");
            near_gib(m("peak"), truth_peak(t, r), "peak");
            let d = b(&figure(x, "peak")["diff_bytes"]);
            assert_eq!(d, m("peak") - b(&want["peak_model"]));
            // Every print of the schedule has the state of its event.
            let tl = x["timeline"].as_array().unwrap();
            assert_eq!(tl.len(), timeline.len(), "every print has an estimate");
            assert_eq!(x["points_without_estimate"], 0);
            for (p, (text, alloc)) in tl.iter().zip(&timeline) {
                assert!(text.starts_with(p["point"].as_str().unwrap()));
                near_gib(b(&p["measured_bytes"]), *alloc, "measured");
                assert_eq!(
                    p["estimated_bytes"],
                    want["events"][p["event"].as_str().unwrap()]
                );
            }
            if r == 14 {
                let pairs: Vec<(&str, &str)> = tl
                    .iter()
                    .map(|p| (p["point"].as_str().unwrap(), p["event"].as_str().unwrap()))
                    .collect();
                assert_eq!(pairs, pp1);
                // Where the fake torch's allocations leave the estimator's by more than 20%
                // of its peak (and more than the rounding).
                let tol = (0.20 * b(&want["peak_model"])).max(1.5 * 10737418.0);
                let expected = timeline
                    .iter()
                    .zip(pp1)
                    .find(|((_, a), (_, ev))| {
                        (a - b(&want["events"][*ev])).abs() > tol + 0.005 * GIB
                    })
                    .map(|(_, (label, _))| label);
                assert_eq!(expected, leaves, "the truth");
                assert_eq!(x["leaves_at"]["point"].as_str(), leaves, "{x}");
            }
        }
    }
}

#[test]
fn the_estimate_is_found_from_the_run_or_its_absence_said_in_one_line() {
    let Some(py) = python() else { return };
    let (relative, absolute) = std::thread::scope(|s| {
        let a = s.spawn(|| scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]));
        let b = scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &["--absolute-model"]);
        (a.join().unwrap(), b)
    });
    let run_in = |cwd: &Path, path: Option<&str>, args: &[&str]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_instrument"));
        c.args(args).current_dir(cwd);
        if let Some(p) = path {
            c.env("PATH", p);
        }
        let out = c.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.code(), text)
    };
    let json = |cwd: &Path, path: Option<&str>, log: &str, extra: &[&str]| {
        let mut args = vec!["log", "--json", log, "--estimate"];
        args.extend_from_slice(extra);
        let (code, text) = run_in(cwd, path, &args);
        assert_eq!(code, Some(0), "{text}");
        serde_json::from_str::<Value>(&text).unwrap()
    };
    let elsewhere = relative.out.path();
    // An absolute model path: the checkout it points into, from anywhere.
    let abs = absolute.path("srun.log");
    let r = json(elsewhere, None, &abs, &[]);
    assert_eq!(r["estimate"]["found_by"], "model-path", "{}", r["estimate"]);
    let co = std::fs::canonicalize(absolute.checkout.path()).unwrap();
    assert_eq!(r["estimate"]["checkout"], co.to_str().unwrap());
    assert_eq!(r["estimate"]["ranks"].as_array().unwrap().len(), 2);
    // A model relative to the checkout (as pithtrain's scripts configure it): the current
    // folder, or one above it.
    let rel = relative.path("srun.log");
    let inside = relative.checkout.path().join("pithtrain");
    let r = json(&inside, None, &rel, &[]);
    assert_eq!(r["estimate"]["found_by"], "current-folder");
    assert!(r["estimate"].get("unavailable").is_none());
    // Nowhere to be found, a checkout without the estimator, no Python, no run shape: one
    // line each, and the report as without --estimate.
    let plain = json(elsewhere, None, &rel, &[]);
    let why = |r: &Value| {
        r["estimate"]["unavailable"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert!(
        why(&plain).starts_with("no memory estimator found"),
        "{}",
        why(&plain)
    );
    assert_eq!(plain["ranks"].as_array().unwrap().len(), 2);
    assert!(
        plain["estimate"]
            .get("ranks")
            .unwrap()
            .as_array()
            .unwrap()
            .is_empty()
    );
    let bare = tempfile::tempdir().unwrap();
    let r = json(
        elsewhere,
        None,
        &rel,
        &["--root", bare.path().to_str().unwrap()],
    );
    assert!(why(&r).contains("has no memory estimator"), "{}", why(&r));
    // Since when checkouts have it is the estimator table's (`since`).
    assert!(
        why(&r).ends_with("is not there): it came with pithtrain PR #18"),
        "{}",
        why(&r)
    );
    let no_python = tempfile::tempdir().unwrap();
    let r = json(&inside, Some(no_python.path().to_str().unwrap()), &rel, &[]);
    assert!(why(&r).starts_with("no Python"), "{}", why(&r));
    let shapeless = relative.out.path().join("shapeless.log");
    let log = std::fs::read_to_string(&rel).unwrap();
    let kept: String = log
        .lines()
        .filter(|l| !l.contains("] run | "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&shapeless, kept).unwrap();
    let r = json(&inside, None, shapeless.to_str().unwrap(), &[]);
    assert!(
        why(&r).starts_with("no rank printed the run's shape"),
        "{}",
        why(&r)
    );
    let (code, text) = run_in(
        &inside,
        None,
        &["log", shapeless.to_str().unwrap(), "--estimate"],
    );
    assert_eq!(code, Some(0));
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("Estimate: none"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    // --root that is not a folder is a wrong argument.
    let (code, _) = run_in(
        elsewhere,
        None,
        &["log", &rel, "--estimate", "--root", "/no/such/checkout"],
    );
    assert_eq!(code, Some(2));
}
