//! Schedule marks (memory-prints group 8): run on the fake torch, the instrumented fixture
//! opens one record_function range per chunk call of `DualPipeV.step` on each profiled rank
//! at the profiled step, named exactly as pithtrain's memory estimator names that event on
//! that pipeline rank, and the step snapshot carries them in `external_annotations` as
//! torch writes them. The names are planted truth: tests/schedule_marks.pinned, from
//! pithtrain's own ScheduleSimulator at 889a408.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::Value;

/// The pinned names: `(pp, pp rank, micro-batches)` -> the events in order.
fn pinned() -> BTreeMap<(u32, u32, u32), Vec<String>> {
    let text = std::fs::read_to_string(repo_root().join("tests/schedule_marks.pinned")).unwrap();
    let mut out: BTreeMap<(u32, u32, u32), Vec<String>> = BTreeMap::new();
    let mut key = None;
    for line in text.lines() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(head) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let field = |name: &str| -> u32 {
                head.split(' ')
                    .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                    .unwrap_or_else(|| panic!("{name} in [{head}]"))
                    .parse()
                    .unwrap()
            };
            let k = (field("pp"), field("rank"), field("chunks"));
            out.insert(k, Vec::new());
            key = Some(k);
        } else {
            out.get_mut(&key.expect("a [pp= rank= chunks=] header first"))
                .unwrap()
                .push(line.to_string());
        }
    }
    out
}

/// The RESULT of one fixture run (tests/exec/run_fixture.py), and its exit code.
fn run_fixture(python: &Path, checkout: &Path, extra: &[&str]) -> (Value, i32, String) {
    let out = Command::new(python)
        .arg(repo_root().join("tests/exec/run_fixture.py"))
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
    let result = serde_json::from_str(result.trim()).expect("RESULT is JSON");
    (result, out.status.code().unwrap_or(-1), prints.to_string())
}

/// The snapshot pickle's `external_annotations`, read by Python's own pickle, and the keys
/// of each entry in the order they were written.
fn annotations(python: &Path, path: &Path) -> Vec<Value> {
    let script = r#"
import json, pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
print(json.dumps([dict(a, keys=list(a)) for a in s["external_annotations"]]))
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
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// A scratch fixture with the memory prints added for `ranks`, and its snapshot folder.
fn instrumented(ranks: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    let dir = scratch_copy(&fixture());
    let snaps = tempfile::tempdir().unwrap();
    let snap_dir = snaps.path().to_str().unwrap();
    let out = instrument(
        &[
            "add",
            "qwen3-moe",
            "--ranks",
            ranks,
            "--snapshot-dir",
            snap_dir,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "add failed: {}", stderr(&out));
    (dir, snaps)
}

/// Every entry as torch writes it (name, stage, device, time_us, in that order), and each
/// range closed before the next opens (chunk calls do not nest): the START names in order.
fn balanced_starts(entries: &[Value], what: &str) -> Vec<String> {
    let mut starts = Vec::new();
    let mut open: Option<String> = None;
    let mut last_time = 0;
    for e in entries {
        assert_eq!(
            e["keys"],
            serde_json::json!(["name", "stage", "device", "time_us"]),
            "{what}: {e}"
        );
        assert_eq!(e["device"], 0, "{what}: {e}");
        let t = e["time_us"].as_i64().unwrap();
        assert!(t > last_time, "{what}: time goes forward: {e}");
        last_time = t;
        let name = e["name"].as_str().unwrap().to_string();
        match e["stage"].as_str().unwrap() {
            "START" => {
                assert_eq!(open, None, "{what}: {name} opens inside another range");
                open = Some(name.clone());
                starts.push(name);
            }
            "END" => assert_eq!(open.take(), Some(name), "{what}: END of the open range"),
            other => panic!("{what}: stage {other}"),
        }
    }
    assert_eq!(open, None, "{what}: every range is closed");
    starts
}

/// On each layout: every chunk call of Steps 1 to 8 on each profiled rank, at the profiled
/// step, is one START/END pair named as the estimator names it; no range on another rank,
/// and none at another step (the run has two steps; ranges are counted over both).
#[test]
fn marks_name_every_chunk_call_as_the_estimator_does() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let pinned = pinned();
    // (profiled ranks, launch, pp, micro-batches); WORLD_SIZE 16, ep 2.
    let layouts: [(&str, &str, u32, u32); 4] = [
        ("3,14", "3,14", 2, 4),
        ("3,14", "3,14", 2, 6),
        ("3,7,11,15", "3", 4, 8),
        ("3,7,11,15", "3", 4, 10),
    ];
    for (ranks, launch, pp, chunks) in layouts {
        let (dir, snaps) = instrumented(ranks);
        let layout = [
            "--launch".to_string(),
            launch.to_string(),
            "--pp".to_string(),
            pp.to_string(),
            "--num-chunks".to_string(),
            chunks.to_string(),
        ];
        let layout: Vec<&str> = layout.iter().map(String::as_str).collect();
        let (result, code, prints) = run_fixture(&python, dir.path(), &layout);
        assert_eq!(code, 0, "{layout:?}: {prints}");
        let profiled: Vec<u32> = ranks.split(',').map(|r| r.parse().unwrap()).collect();
        let per_stage = 16 / pp;
        for (rank, r) in result["ranks"].as_object().unwrap() {
            let rank: u32 = rank.parse().unwrap();
            let opened: Vec<&str> = r["record_function"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            if !profiled.contains(&rank) {
                assert!(opened.is_empty(), "rank {rank} is not profiled: {opened:?}");
                continue;
            }
            let what = format!("pp={pp} chunks={chunks} rank {rank}");
            let want = &pinned[&(pp, rank / per_stage, chunks)];
            assert_eq!(opened, *want, "{what}: ranges opened over both steps");
            let snap = snaps
                .path()
                .join(format!("memory_snapshot_rank{rank}_step0.pickle"));
            let starts = balanced_starts(&annotations(&python, &snap), &what);
            assert_eq!(&starts, want, "{what}: the snapshot's marks");
        }
    }
}

/// An out-of-memory error inside a chunk: the OOM snapshot, written before anything
/// unwinds, holds that chunk's range opened and never closed; the error propagates as it
/// would without the mark.
#[test]
fn an_oom_inside_a_chunk_leaves_its_mark_open() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let (dir, snaps) = instrumented("3");
    // Rank 3 is pipeline rank 0 of 2: its first forward is Step 1's, its first backward
    // Step 3's; the optimizer runs after the last range closed.
    for (phase, open) in [
        ("forward", Some("S1.i0 fwd(p0) c0")),
        ("backward", Some("S3.i0 bwd(p1,zb=True) c0")),
        ("optimizer", None),
    ] {
        for f in std::fs::read_dir(snaps.path()).unwrap() {
            std::fs::remove_file(f.unwrap().path()).unwrap();
        }
        let (result, code, prints) = run_fixture(&python, dir.path(), &["--oom-in", phase]);
        assert_eq!(code, 1, "{phase}: {prints}");
        assert!(
            result["error"]
                .as_str()
                .unwrap()
                .starts_with("OutOfMemoryError"),
            "{phase}: {result}"
        );
        let entries = annotations(&python, &snaps.path().join("memory_snapshot_rank3.pickle"));
        match open {
            Some(name) => {
                let (last, before) = entries.split_last().expect("marks in the OOM snapshot");
                assert_eq!(
                    (last["name"].as_str(), last["stage"].as_str()),
                    (Some(name), Some("START"))
                );
                balanced_starts(before, phase);
            }
            None => {
                let starts = balanced_starts(&entries, phase);
                assert_eq!(starts, pinned()[&(2, 0, 4)], "{phase}");
            }
        }
    }
}

/// The generator's marked snapshots (fixtures/snapshots/schedule_marks, written by
/// tools/gen_snapshots.py): the marks are the pinned names in torch's schema, and the truth
/// planted per event is what the trace says between its START and END (the oracle a
/// reader of `external_annotations` is held to); the OOM snapshot ends inside its mark.
#[test]
fn generated_marked_snapshots_carry_per_event_truth() {
    let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") else {
        return;
    };
    let dir = repo_root().join("fixtures/snapshots/schedule_marks");
    // Per mark, from the pickle alone: the trace entries whose time_us lies between its
    // START and END, the bytes they allocate and free, and live bytes as the trace counts
    // them (every allocation in the trace, none before history started).
    let script = r#"
import json, pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
trace, out, live, open_ = s["device_traces"][0], [], 0, None
ann = s["external_annotations"]
i = 0
def upto(t):
    global i, live, peak, alloc, freed, n
    while i < len(trace) and trace[i]["time_us"] < t:
        e = trace[i]
        if e["action"] == "alloc":
            live += e["size"]
            if open_: alloc += e["size"]; peak = max(peak, live)
        elif e["action"] == "free_requested":
            live -= e["size"]
            if open_: freed += e["size"]
        if open_: n += 1
        i += 1
for a in ann:
    upto(a["time_us"])
    if a["stage"] == "START":
        open_, start, peak, alloc, freed, n = a["name"], live, live, 0, 0, 0
    else:
        out.append({"name": open_, "trace_entries": n, "allocated_bytes": alloc, "freed_bytes": freed,
                    "live_at_start": start, "live_at_end": live, "peak_inside": peak})
        open_ = None
print(json.dumps({"marks": out, "open": open_, "keys": sorted({tuple(a) for a in ann})}))
"#;
    let read = |file: &str| -> Value {
        let out = Command::new(&python)
            .args(["-c", script])
            .arg(dir.join(file))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let planted: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("planted.json")).unwrap()).unwrap();
    let names: Vec<String> = planted["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, pinned()[&(2, 0, 4)]);
    let got = read("snapshot.pickle");
    assert_eq!(
        got["keys"],
        serde_json::json!([["name", "stage", "device", "time_us"]])
    );
    assert_eq!(got["open"], Value::Null);
    // Live bytes in the trace leave out what was live before history started (nothing
    // here: history starts before the parameters).
    assert_eq!(got["marks"], planted["marks"]);
    // Some event allocates, some frees, and the peak is inside a mark, not at its edges.
    let marks = planted["marks"].as_array().unwrap();
    assert!(
        marks
            .iter()
            .any(|m| m["peak_inside"].as_i64() > m["live_at_end"].as_i64())
    );

    let oom = read("snapshot_oom.pickle");
    assert_eq!(oom["open"], planted["oom"]["open"]);
    let closed: Vec<&Value> = oom["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["name"])
        .collect();
    let want: Vec<&Value> = planted["oom"]["closed"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(closed, want);
}
