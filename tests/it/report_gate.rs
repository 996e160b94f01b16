//! `instrument report BEFORE --diff AFTER --gate PCT` over components: the run of the
//! instrumented fixture, and a copy of it with one allocation of a known size planted into
//! rank 14's step snapshot (tools/snapshot_plant.py: made by an optimizer frame, live at the
//! end of one schedule event and at no other event's end). The gate fails on exactly the
//! figures the plant changes, with the planted bytes; every other figure is unchanged; with
//! `--estimate` on both sides the estimator's figures are gated too, and unchanged.

use crate::log_common;
use crate::report_run::gather;

use std::path::Path;

use log_common::*;
use serde_json::Value;

const PLANTED: u64 = 256 << 20;

use crate::report_run::json_of;

fn plant(py: &Path, snapshot: &Path, event: &str, bytes: u64) {
    let out = std::process::Command::new(py)
        .arg(repo_root().join("tools/snapshot_plant.py"))
        .arg(snapshot)
        .arg(event)
        .arg(bytes.to_string())
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// (rank, event, figure, before, after) of a gate row.
fn row(r: &Value) -> (i64, String, String, u64, u64) {
    (
        r["where"]["rank"].as_i64().unwrap(),
        r["where"]["point"].as_str().unwrap().to_string(),
        r["figure"].as_str().unwrap().to_string(),
        r["before"].as_f64().unwrap() as u64,
        r["after"].as_f64().unwrap() as u64,
    )
}

/// The rows the gate failed, in its order.
fn failed(d: &Value) -> Vec<(i64, String, String, u64, u64)> {
    d["gate"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["exceeded"] == true)
        .map(row)
        .collect()
}

#[test]
fn the_gate_fails_on_the_one_component_planted_at_one_event() {
    let Some(py) = python() else { return };
    let s = scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]);
    let (before, after) = (gather(&s), gather(&s));
    let (code, r, err) = json_of(&["report", "--json", before.path().to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let rank14 = r["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["rank"] == 14)
        .unwrap();
    // An event in the middle of the schedule, not the last.
    let events = rank14["events"].as_array().unwrap();
    let e = &events[events.len() / 2];
    let event = e["event"].as_str().unwrap().to_string();
    let (peak, end) = (
        e["snapshot_peak_bytes"].as_u64().unwrap(),
        e["snapshot_end_bytes"].as_u64().unwrap(),
    );
    // The measured components at the event's end sum to its live memory.
    let parts: u64 = e["snapshot_end_by_category"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(parts, end);
    assert!(
        e["snapshot_end_by_category"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["name"] != "optimizer state"),
        "the fixture's step holds no optimizer state at {event}"
    );
    plant(
        &py,
        &after.path().join("memory_snapshot_rank14_step0.pickle"),
        &event,
        PLANTED,
    );

    let diff = |extra: &[&str]| {
        let mut a = vec!["report", "--json"];
        a.extend_from_slice(extra);
        a.extend([
            before.path().to_str().unwrap(),
            "--diff",
            after.path().to_str().unwrap(),
            "--gate",
            "5",
        ]);
        json_of(&a)
    };
    // What the plant changes, and by how much: the optimizer-state component appears with the
    // planted bytes, the live memory at the event's end grows by them, and the peak inside the
    // event is the end's with them (the allocation is the event's last), largest growth first.
    let mut want = vec![
        (
            14,
            event.clone(),
            "live at its end: optimizer state".to_string(),
            0,
            PLANTED,
        ),
        (
            14,
            event.clone(),
            "live at its end".to_string(),
            end,
            end + PLANTED,
        ),
        (
            14,
            event.clone(),
            "peak inside".to_string(),
            peak,
            peak.max(end + PLANTED),
        ),
    ];
    want[1..].sort_by(|a, b| {
        let g = |x: &(i64, String, String, u64, u64)| (x.4 - x.3) as f64 / x.3 as f64;
        g(b).partial_cmp(&g(a)).unwrap()
    });
    let (code, d, err) = diff(&[]);
    assert_eq!(code, Some(1), "{err}{d}");
    let rows = d["gate"]["rows"].as_array().unwrap();
    assert_eq!(failed(&d), want);
    assert_eq!(rows[0]["change"], "new");
    // Nothing else moved: every other figure of both ranks is the same before and after.
    let moved: Vec<_> = rows[want.len()..]
        .iter()
        .map(row)
        .filter(|r| r.3 != r.4)
        .collect();
    assert!(moved.is_empty(), "{moved:?}");
    // Every measured component of every event is a figure (a zero one in both runs is none).
    let components: usize = r["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|x| x["events"].as_array().unwrap())
        .map(|e| {
            e["snapshot_end_by_category"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["bytes"].as_u64() > Some(0))
                .count()
        })
        .sum();
    let gated = rows
        .iter()
        .filter(|r| {
            r["figure"]
                .as_str()
                .unwrap()
                .starts_with("live at its end: ")
        })
        .count();
    assert_eq!(gated, components + 1, "and the planted one");

    // The text: the failing rows first, every line within 100 columns, the verdict last.
    let out = instrument(&[
        "report",
        before.path().to_str().unwrap(),
        "--diff",
        after.path().to_str().unwrap(),
        "--gate",
        "5",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap();
    assert!(
        last.starts_with("gate 5%: FAILED, 3 of ") && last.contains("optimizer state new"),
        "{text}"
    );
    let wide: Vec<&str> = text
        .lines()
        .filter(|l| *l != last && l.chars().count() > 100)
        .collect();
    assert!(wide.is_empty(), "{wide:?}");

    // With --estimate on both sides: the estimator's state after each event and its
    // components are figures too; the same checkout estimates both runs alike, so the gate
    // fails on the planted figures alone.
    let root = s.checkout.path().to_str().unwrap().to_string();
    let (code, d, err) = diff(&["--estimate", "--root", &root]);
    assert_eq!(code, Some(1), "{err}");
    assert!(d.get("not_estimated").is_none(), "{d}");
    let rows = d["gate"]["rows"].as_array().unwrap();
    assert_eq!(failed(&d), want);
    let estimated: Vec<_> = rows
        .iter()
        .map(row)
        .filter(|r| r.2.starts_with("estimated"))
        .collect();
    let buckets: Vec<&str> = estimated
        .iter()
        .filter_map(|r| r.2.strip_prefix("estimated: "))
        .collect();
    assert!(buckets.contains(&"static"), "{buckets:?}");
    assert!(buckets.contains(&"activations"), "{buckets:?}");
    assert!(
        estimated.iter().all(|r| r.3 == r.4),
        "the estimate is the checkout's, the same for both runs"
    );
    // The estimator's total at each event of the run before, as `report --estimate` gives it.
    let (_, est, _) = json_of(&[
        "report",
        "--json",
        "--estimate",
        "--root",
        &root,
        before.path().to_str().unwrap(),
    ]);
    for x in est["ranks"].as_array().unwrap() {
        for e in x["events"].as_array().unwrap() {
            let total = estimated
                .iter()
                .find(|r| {
                    r.0 == x["rank"].as_i64().unwrap() && r.1 == e["event"] && r.2 == "estimated"
                })
                .unwrap_or_else(|| panic!("{}", e["event"]));
            assert_eq!(total.3 as i64, e["estimated_bytes"].as_i64().unwrap());
        }
    }
}
