//! Issue #26, the snapshot reader's part: findings first, one gate, like with like, readers that
//! agree with the recipe, and text that fits 100 columns. Each test is a case a user hit.

use crate::snapshot_common;

use std::path::{Path, PathBuf};

use serde_json::Value;
use snapshot_common::*;

fn kinds(r: &Value) -> Vec<(String, String)> {
    r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["severity"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn text_of(args: &[&str]) -> (String, Option<i32>) {
    let out = run(args);
    (
        String::from_utf8_lossy(&out.stdout).to_string(),
        out.status.code(),
    )
}

/// "The text puts the OOM after three sections about the state after the unwind."
#[test]
fn an_oom_is_the_first_finding_and_the_first_section() {
    let p = fixture("oom/snapshot.pickle");
    let r = report(&[p.to_str().unwrap()]);
    let f = &r["findings"][0];
    assert_eq!(f["kind"], "out-of-memory");
    assert_eq!(f["severity"], "error");
    let oom = &r["oom"][0];
    assert_eq!(f["figure"]["value"], oom["size_bytes"].as_f64().unwrap());
    assert_eq!(
        f["figure"]["compared_with"]["value"],
        oom["device_free_bytes"].as_f64().unwrap()
    );
    assert!(f["where"]["point"].as_str().unwrap().contains("forward"));
    assert!(f["next"].is_string());
    let (text, code) = text_of(&[p.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} in {text}"));
    assert!(at("Findings:") < at("OOM #1"));
    assert!(at("OOM #1") < at("\nTotals"));
    assert!(at("OOM #1") < at("\nWhere live memory goes"));
    let block: String = text
        .lines()
        .skip_while(|l| !l.starts_with("Findings:"))
        .take_while(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    insta::assert_snapshot!("oom_findings", block);
}

/// "For a snapshot written by our own recipe ... `snapshot` advises starting history 'before
/// the model is built' with `max_entries=100000`."
#[test]
fn a_history_begun_at_the_profiled_step_is_named_not_advised_against() {
    // recipe_step: the recipe's own order (model on the GPU, history from the first step);
    // late_history: a warm-up step before it too (gradients and optimizer state unrecorded).
    for (scenario, file) in [
        ("recipe_step", "recipe_step/snapshot.pickle"),
        ("late_history", "late_history/snapshot_p4.pickle"),
    ] {
        let planted = planted(scenario);
        let p = fixture(file);
        let r = report(&[p.to_str().unwrap()]);
        let k = kinds(&r);
        assert!(
            k.contains(&(
                "history-started-during-run".to_string(),
                "notice".to_string()
            )),
            "{scenario}: {k:?}"
        );
        assert!(
            !k.iter().any(|(_, s)| s != "notice"),
            "{scenario}: nothing to fix: {k:?}"
        );
        let f = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["kind"] == "history-started-during-run")
            .unwrap();
        assert_eq!(
            f["figure"]["value"],
            planted["before_history_bytes"].as_f64().unwrap(),
            "{scenario}"
        );
        assert_eq!(r["no_stack"]["history_started_during_run"], true);
        if let Some(blocks) = planted.get("before_history_blocks") {
            assert_eq!(&r["no_stack"]["blocks"], blocks, "the parameters alone");
        }
        assert_eq!(
            r["no_stack"]["before_history_bytes"],
            planted["before_history_bytes"]
        );
        let (text, _) = text_of(&[p.to_str().unwrap()]);
        let json = serde_json::to_string(&r).unwrap();
        for out in [&text, &json] {
            assert!(!out.contains("100000)"), "{out}");
            assert!(!out.contains("before the model is built"), "{out}");
            // Any advice names the recipe's own call.
            for (i, _) in out.match_indices("max_entries=") {
                assert!(out[i..].starts_with("max_entries=1048576"), "{out}");
            }
        }
    }
}

/// "It keeps only 1,000,000 trace events by default, fewer than the recipe records."
#[test]
fn the_trace_is_read_whole_by_default() {
    let p = fixture("long_trace/snapshot_python.pickle");
    let p = p.to_str().unwrap();
    let r = report(&[p]);
    let t = &r["trace"];
    assert_eq!(t["max_trace_events"], Value::Null);
    assert_eq!(t["dropped"], 0);
    assert_eq!(t["kept_events"], t["total_events"]);
    assert!(!kinds(&r).iter().any(|(k, _)| k == "trace-capped"));
    // A cap asked for is a notice, with what was kept against what the file holds.
    let capped = report(&[p, "--max-trace-events", "40"]);
    assert_eq!(capped["trace"]["max_trace_events"], 40);
    let f = capped["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "trace-capped")
        .expect("trace-capped");
    assert_eq!(f["severity"], "notice");
    assert_eq!(f["figure"]["value"], 40.0);
    assert_eq!(
        f["figure"]["compared_with"]["value"],
        t["total_events"].as_f64().unwrap()
    );
}

/// "`snapshot` on a folder of rank snapshots says 'rank 3 stands out' ... for ranks on different
/// pipeline stages."
#[test]
fn ranks_of_unknown_stages_are_compared_with_none() {
    let r = report_of("multi_rank");
    let k = kinds(&r);
    assert!(!k.iter().any(|(k, _)| k == "stands-out"), "{k:?}");
    assert!(
        k.contains(&("ranks-not-compared".to_string(), "notice".to_string())),
        "{k:?}"
    );
    for row in r["ranks"].as_array().unwrap() {
        assert_eq!(row["stands_out"], false);
        assert_eq!(row["peers"], Value::Null);
    }
    let (text, _) = text_of(&[fixture("multi_rank").to_str().unwrap()]);
    assert!(!text.contains("stands out"), "{text}");
    assert!(text.contains("instrument log"), "{text}");
}

fn gated(before: &Path, after: &Path) -> (Value, String, Option<i32>) {
    let (b, a) = (before.to_str().unwrap(), after.to_str().unwrap());
    let out = run(&[b, "--diff", a, "--gate", "5", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let (text, code) = text_of(&[b, "--diff", a, "--gate", "5"]);
    assert_eq!(
        out.status.code(),
        code,
        "--json and text agree on the exit code"
    );
    (v, text, code)
}

/// One gate: `snapshot --diff --gate PCT` passes, fails or is refused like every reader's.
#[test]
fn the_diff_gate_passes_fails_and_refuses() {
    let d = fixture("leak_diff");
    let (early, late) = (
        d.join("snapshot_step_005.pickle"),
        d.join("snapshot_step_050.pickle"),
    );
    // The leak grows every figure it touches: failed, exit 1, the verdict the last line.
    let (v, text, code) = gated(&early, &late);
    assert_eq!(code, Some(1));
    let g = &v["gate"];
    assert_eq!(g["verdict"], "failed");
    assert_eq!(g["percent"], 5.0);
    let rows = g["rows"].as_array().unwrap();
    let figures: Vec<&str> = rows.iter().map(|r| r["figure"].as_str().unwrap()).collect();
    for want in ["peak allocated", "peak reserved", "allocated, parameters"] {
        assert!(figures.contains(&want), "{figures:?}");
    }
    let growth: Vec<f64> = rows.iter().filter_map(|r| r["growth"].as_f64()).collect();
    assert!(growth.windows(2).all(|w| w[0] >= w[1]), "largest first");
    let peak = rows
        .iter()
        .find(|r| r["figure"] == "peak allocated")
        .unwrap();
    assert_eq!(peak["exceeded"], true);
    assert_eq!(peak["where"]["point"], "device 0");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("gate 5%: FAILED, ")
    );
    // The same snapshot twice: passed, exit 0.
    let (v, text, code) = gated(&early, &early);
    assert_eq!(
        (v["gate"]["verdict"].as_str(), code),
        (Some("passed"), Some(0))
    );
    assert!(text.lines().last().unwrap().starts_with("gate 5%: passed"));
    // Two ranks' files are not one figure measured twice: refused, exit 2.
    let m = fixture("multi_rank");
    let (v, text, code) = gated(
        &m.join("snapshot-rank00000.pickle"),
        &m.join("snapshot-rank00003.pickle"),
    );
    assert_eq!(code, Some(2));
    assert_eq!(v["gate"]["verdict"], "refused");
    assert!(v["gate"]["why"].as_str().unwrap().contains("rank 0"));
    assert!(text.lines().last().unwrap().starts_with("gate 5%: REFUSED"));
    // Without --gate a diff reports and exits 0, with no gate in its JSON.
    let r = report(&[early.to_str().unwrap(), "--diff", late.to_str().unwrap()]);
    assert!(r.get("gate").is_none());
    assert!(
        kinds(&r)
            .iter()
            .any(|(k, s)| k == "growing-site" && s == "warning")
    );
}

fn snapshots_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            snapshots_under(&p, out);
        } else if p.extension().is_some_and(|x| x == "pickle" || x == "json")
            && p.file_name()
                .is_some_and(|n| n != "planted.json" && n != "reading.json")
        {
            out.push(p);
        }
    }
}

fn assert_fits(what: &str, text: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= 100,
            "{what}: a line of {} columns: {line}",
            line.chars().count()
        );
    }
}

/// "Stack chains make lines of 200-300 columns."
#[test]
fn every_text_line_fits_100_columns() {
    let mut files = Vec::new();
    snapshots_under(&fixtures(), &mut files);
    let generated = generate(&["--random", "4", "--seed", "26"]);
    if let Some(g) = &generated {
        snapshots_under(g.path(), &mut files);
    }
    let mut read = 0;
    for f in &files {
        let (text, code) = text_of(&[f.to_str().unwrap(), "--cpp-frames"]);
        if code != Some(0) {
            continue; // the refused fixtures
        }
        read += 1;
        assert_fits(&f.display().to_string(), &text);
    }
    assert!(read >= 30, "{read} files read");
    let (text, _) = text_of(&[fixture("multi_rank").to_str().unwrap()]);
    assert_fits("multi_rank", &text);
    let d = fixture("leak_diff");
    let (text, _) = text_of(&[
        d.join("snapshot_step_005.pickle").to_str().unwrap(),
        "--diff",
        d.join("snapshot_step_050.pickle").to_str().unwrap(),
    ]);
    assert_fits("diff", &text);
}
