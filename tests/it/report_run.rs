//! `instrument report RUN_DIR`: one run's node logs and the ranks' snapshots, joined per rank.
//! On the instrumented fixture run on the fake torch (tools/log_fixture.py): each rank's printed
//! peak and its snapshot; a rank with logs and no snapshot listed as a finding; a snapshot of
//! another step or rank refused in one line; a folder holding nothing a run writes refused,
//! naming what was looked for.

use crate::log_common;

use std::path::Path;

use log_common::*;
use serde_json::Value;

/// A run folder: the node log and the ranks' snapshots, as a user gathers them.
pub(crate) fn gather(s: &Scenario) -> tempfile::TempDir {
    let run = tempfile::tempdir().unwrap();
    std::fs::copy(s.path("srun.log"), run.path().join("srun.log")).unwrap();
    for e in std::fs::read_dir(s.snaps.path()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, run.path().join(p.file_name().unwrap())).unwrap();
    }
    run
}

/// `instrument ARGS`: its exit code, its standard output as JSON (null when it is none) and
/// its standard error.
pub(crate) fn json_of(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = instrument(args);
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `instrument ARGS`, which must succeed: its standard output as JSON.
pub(crate) fn json_ok(args: &[&str]) -> Value {
    let (code, json, stderr) = json_of(args);
    assert_eq!(code, Some(0), "{stderr}");
    json
}

fn report(dir: &Path) -> (Option<i32>, Value, String) {
    json_of(&["report", "--json", dir.to_str().unwrap()])
}

#[test]
fn a_run_folder_is_joined_per_rank_and_what_is_missing_is_listed() {
    let Some(py) = python() else { return };
    let s = scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]);
    let run = gather(&s);
    let (code, r, err) = report(run.path());
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(r["schema"], "instrument.report/1");
    let ranks: Vec<i64> = r["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["rank"].as_i64().unwrap())
        .collect();
    assert_eq!(ranks, vec![3, 14]);
    for x in r["ranks"].as_array().unwrap() {
        // The printed peak is the log reader's, to the byte.
        let log = log_json(&[&s.path("srun.log")]);
        let rank = x["rank"].as_i64().unwrap();
        assert_eq!(
            x["printed_peak_bytes"],
            log_common::rank(&log, rank)["step"]["peak"]["allocated_bytes"]
        );
        let file = x["step_snapshot"].as_str().unwrap();
        assert!(
            file.ends_with(&format!("memory_snapshot_rank{rank}_step0.pickle")),
            "{file}"
        );
        assert_eq!(
            x["mesh"].as_str().unwrap(),
            mesh_short(&s.truth["ranks"][rank.to_string()]["mesh"])
        );
    }

    // The schedule marks: each rank's events are the estimator's names for its pipeline
    // rank (pithtrain's own simulator, pinned), and the prints, read from the fake torch's
    // allocator counters, agree with the snapshot's trace at every event they read.
    let pinned = std::fs::read_to_string(repo_root().join("tests/schedule_marks.pinned")).unwrap();
    let block = |head: &str| -> Vec<String> {
        pinned
            .lines()
            .skip_while(|l| *l != head)
            .skip(1)
            .take_while(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    for (x, head) in r["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .zip(["[pp=2 rank=0 chunks=4]", "[pp=2 rank=1 chunks=4]"])
    {
        let events = x["events"].as_array().unwrap();
        let names: Vec<String> = events
            .iter()
            .map(|e| e["event"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, block(head), "rank {}", x["rank"]);
        let printed: Vec<&Value> = events
            .iter()
            .filter(|e| e.get("printed_bytes").is_some())
            .collect();
        assert!(printed.len() >= 5, "{printed:?}");
        for e in printed {
            let (p, s) = (b(&e["printed_bytes"]), b(&e["snapshot_end_bytes"]));
            assert!(
                (p - s).abs() <= 0.015 * GIB,
                "{}: printed {p}, snapshot {s}",
                e["event"]
            );
        }
    }
    let kinds: Vec<&str> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert!(
        !kinds.contains(&"prints-and-snapshot-disagree"),
        "{kinds:?}"
    );
    // The peak inside an overlapped chunk is above every print: said, with both figures.
    for f in r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "peak-between-prints")
    {
        let rank = f["where"]["rank"].as_i64().unwrap();
        let row = r["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["rank"] == rank)
            .unwrap();
        assert_eq!(
            f["figure"]["value"].as_f64(),
            row["snapshot_peak_bytes"].as_f64()
        );
        assert_eq!(
            f["figure"]["compared_with"]["value"].as_f64(),
            row["printed_peak_bytes"].as_f64()
        );
    }

    // The text of the report and of the log reader fits 100 columns.
    for args in [
        vec!["report", run.path().to_str().unwrap()],
        vec!["log", run.path().to_str().unwrap()],
    ] {
        let out = instrument(&args);
        let text = String::from_utf8_lossy(&out.stdout);
        let wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > 100).collect();
        assert!(wide.is_empty(), "{args:?}: {wide:?}");
    }

    // Rank 14's snapshot left on its host: the rank is still reported, and listed.
    std::fs::remove_file(run.path().join("memory_snapshot_rank14_step0.pickle")).unwrap();
    let (code, r, _) = report(run.path());
    assert_eq!(code, Some(0));
    let missing: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "no-step-snapshot")
        .collect();
    assert_eq!(missing.len(), 1, "{}", r["findings"]);
    assert_eq!(missing[0]["where"]["rank"], 14);
    assert!(r["ranks"][1].get("step_snapshot").is_none());

    // A snapshot of another step than the prints profiled: refused in one line.
    std::fs::rename(
        run.path().join("memory_snapshot_rank3_step0.pickle"),
        run.path().join("memory_snapshot_rank3_step7.pickle"),
    )
    .unwrap();
    let (code, _, err) = report(run.path());
    assert_eq!(code, Some(2));
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("a snapshot of step 7, but rank 3's prints profiled step 0"),
        "{err}"
    );

    // A snapshot of a rank whose prints are in none of the logs: another run's.
    std::fs::rename(
        run.path().join("memory_snapshot_rank3_step7.pickle"),
        run.path().join("memory_snapshot_rank5_step0.pickle"),
    )
    .unwrap();
    let (code, _, err) = report(run.path());
    assert_eq!(code, Some(2));
    assert!(
        err.contains("a snapshot of rank 5, whose prints are in none of the logs"),
        "{err}"
    );
}

#[test]
fn a_folder_with_nothing_a_run_writes_is_refused_naming_what_was_looked_for() {
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("notes.md"), "nothing here").unwrap();
    let (code, _, err) = report(empty.path());
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("memory_snapshot_rank{R}_step{S}.pickle"),
        "{err}"
    );
    let (code, _, err) = report(&empty.path().join("not-there"));
    assert_eq!(code, Some(2));
    assert!(err.contains("not-there: no such file or folder"), "{err}");
}

/// `report --estimate`: the estimator's state after each marked event is the one `log
/// --estimate` reads for the print at that event (one driver, joined by the event's exact
/// name), and the memory from before the schedule (before the history began, and after it
/// before the first event) is the estimator's static memory: the fake torch's parameters
/// against the estimator's own sum, to the byte.
#[test]
fn the_estimate_stands_beside_each_event_bucket_by_bucket() {
    let Some(py) = python() else { return };
    let s = scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]);
    let run = gather(&s);
    let root = s.checkout.path().to_str().unwrap().to_string();
    let r: Value = crate::report_run::json_ok(&[
        "report",
        "--json",
        "--estimate",
        "--root",
        &root,
        run.path().to_str().unwrap(),
    ]);
    assert!(
        r["estimate"].get("unavailable").is_none(),
        "{}",
        r["estimate"]
    );
    let log = log_json(&["--estimate", "--root", &root, &s.path("srun.log")]);
    let mut joined = 0;
    for x in r["ranks"].as_array().unwrap() {
        let rank = x["rank"].as_i64().unwrap();
        let est = log["estimate"]["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["rank"] == rank)
            .unwrap();
        let events = x["events"].as_array().unwrap();
        for t in est["timeline"].as_array().unwrap() {
            let Some(e) = events.iter().find(|e| e["event"] == t["event"]) else {
                continue;
            };
            assert_eq!(e["estimated_bytes"], t["estimated_bytes"], "{}", t["event"]);
            joined += 1;
        }
        for e in events {
            assert!(e["estimated_bytes"].is_i64(), "{e}");
            let statics: Vec<&Value> = e["components"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["buckets"] == serde_json::json!(["static"]))
                .collect();
            assert_eq!(statics.len(), 1, "{e}");
            assert_eq!(
                statics[0]["measured_bytes"], statics[0]["estimated_bytes"],
                "{e}"
            );
        }
    }
    assert!(joined >= 8, "{joined}");
    // The first event where the measurement leaves the estimate is said, per rank at most once.
    let leaves: Vec<i64> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "leaves-estimate")
        .map(|f| f["where"]["rank"].as_i64().unwrap())
        .collect();
    let mut unique = leaves.clone();
    unique.dedup();
    assert_eq!(leaves.len(), unique.len(), "{leaves:?}");
}

/// The run's Nsight Systems exports: each rank's communication per stage is `nsys report`'s
/// for that rank, to the nanosecond; exports that put the rank elsewhere in the mesh are another
/// run's, said and not joined.
#[test]
fn each_ranks_communication_per_stage_stands_beside_its_memory() {
    let Some(py) = python() else { return };
    let s = scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]);
    let run = gather(&s);
    let mesh = |r: &str| s.truth["ranks"][r]["mesh"].clone();
    // The fixture's mesh, pithtrain's order: pp, dp, cp, ep sizes.
    let sizes: Vec<u64> = ["pp", "dp", "cp", "ep"]
        .iter()
        .map(|a| mesh("3")[a][1].as_u64().unwrap_or(1))
        .collect();
    let per_node = sizes.iter().product::<u64>() / 2;
    let mesh_arg = format!(
        "pp={} dp={} cp={} ep={}",
        sizes[0], sizes[1], sizes[2], sizes[3]
    );
    for node in ["0", "1"] {
        crate::nsys_common::write_export(
            &run.path().join(format!("node{node}.sqlite")),
            &[
                "--scenario",
                "dualpipe",
                "--ranks",
                &per_node.to_string(),
                "--node",
                node,
                "--mesh",
                &mesh_arg,
            ],
        );
    }
    let (code, r, err) = report(run.path());
    assert_eq!(code, Some(0), "{err}");
    let nsys = instrument(&["nsys", "report", "--json", run.path().to_str().unwrap()]);
    let doc: Value = serde_json::from_slice(&nsys.stdout).unwrap();
    for x in r["ranks"].as_array().unwrap() {
        let rank = x["rank"].as_u64().unwrap();
        let p = doc["exports"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|e| e["processes"].as_array().unwrap())
            .find(|p| p["rank"].as_u64() == Some(rank))
            .unwrap();
        let want: Vec<(String, i64)> = p["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["stage"].as_str().unwrap().into(),
                    s["exposed_ns"].as_i64().unwrap(),
                )
            })
            .collect();
        let got: Vec<(String, i64)> = x["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["stage"].as_str().unwrap().into(),
                    s["exposed_ns"].as_i64().unwrap(),
                )
            })
            .collect();
        assert!(!got.is_empty());
        assert_eq!(got, want, "rank {rank}");
    }
    // Exports of a run with another mesh: the ranks are elsewhere, so nothing is joined.
    let other = gather(&s);
    for node in ["0", "1"] {
        crate::nsys_common::write_export(
            &other.path().join(format!("node{node}.sqlite")),
            &[
                "--scenario",
                "dualpipe",
                "--ranks",
                &per_node.to_string(),
                "--node",
                node,
                "--mesh",
                &format!(
                    "pp={} dp={} cp={} ep={}",
                    sizes[0], sizes[3], sizes[2], sizes[1]
                ),
            ],
        );
    }
    let (code, r, _) = report(other.path());
    assert_eq!(code, Some(0));
    assert!(
        r["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x.get("stages").is_none()),
        "{}",
        r["ranks"]
    );
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "nsys-other-run"),
        "{}",
        r["findings"]
    );
}

/// `--html`: one page, the findings first, then per rank a strip with one column per marked
/// event (every rank on one scale), the printed and estimated values where there are.
#[test]
fn the_page_holds_a_schedule_strip_per_rank() {
    let Some(py) = python() else { return };
    let s = scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]);
    let run = gather(&s);
    let page = run.path().join("report.html");
    let r: Value = crate::report_run::json_ok(&[
        "report",
        "--json",
        "--html",
        page.to_str().unwrap(),
        run.path().to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    let findings_at = html.find("<section id=\"findings\">").unwrap();
    let first_rank = html.find("<section class=\"rank\"").unwrap();
    assert!(findings_at < first_rank);
    for x in r["ranks"].as_array().unwrap() {
        let at = html
            .find(&format!(
                "<section class=\"rank\" data-rank=\"{}\">",
                x["rank"]
            ))
            .unwrap();
        let section = &html[at..at + html[at..].find("</section>").unwrap()];
        let events = x["events"].as_array().unwrap();
        assert_eq!(section.matches("<g class=\"event\"").count(), events.len());
        let printed = events
            .iter()
            .filter(|e| e.get("printed_bytes").is_some())
            .count();
        assert_eq!(
            section.matches("<circle class=\"printed\"").count(),
            printed
        );
        for e in events {
            let name = e["event"].as_str().unwrap().replace('\'', "&#39;");
            assert!(
                section.contains(&format!("data-event=\"{name}\"")),
                "{name}"
            );
        }
    }
    // A folder for the page that is not there is refused before anything is read.
    let out = instrument(&[
        "report",
        "--html",
        "/nonexistent-folder/r.html",
        run.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// `report BEFORE --diff AFTER --gate PCT`: the run after a planted change (layer 3, held by
/// rank 14, saves 256 MiB more in every forward: tools/log_fixture.py --extra-saved) grows the
/// peaks of rank 14's events and nothing of rank 3's; the gate fails on rank 14's, the largest
/// growth first and the verdict last; the same run against itself passes; a rank on one side
/// only refuses the gate.
#[test]
fn the_diff_gates_per_event_peaks() {
    let Some(py) = python() else { return };
    let (before, after) = std::thread::scope(|sc| {
        let a = sc.spawn(|| scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]));
        let b = scenario(
            &py,
            "qwen3-moe",
            "qwen3-tiny",
            2,
            &["--extra-saved", "3:256"],
        );
        (a.join().unwrap(), b)
    });
    let (b, a) = (gather(&before), gather(&after));
    let args = |gate: &str| {
        vec![
            "report".to_string(),
            "--json".into(),
            b.path().display().to_string(),
            "--diff".into(),
            a.path().display().to_string(),
            "--gate".into(),
            gate.into(),
        ]
    };
    let run = |v: Vec<String>| {
        let refs: Vec<&str> = v.iter().map(String::as_str).collect();
        let out = instrument(&refs);
        (
            out.status.code(),
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null),
        )
    };
    let (code, d) = run(args("5"));
    assert_eq!(code, Some(1), "{d}");
    assert_eq!(d["schema"], "instrument.report.diff/1");
    assert_eq!(d["gate"]["verdict"], "failed");
    let rows = d["gate"]["rows"].as_array().unwrap();
    let failed: Vec<&Value> = rows.iter().filter(|r| r["exceeded"] == true).collect();
    assert!(!failed.is_empty());
    assert!(
        failed.iter().all(|r| r["where"]["rank"] == 14),
        "{failed:?}"
    );
    assert!(
        rows.iter()
            .filter(|r| r["where"]["rank"] == 3)
            .all(|r| r["exceeded"] == false),
        "rank 3 holds other layers"
    );
    let growth: Vec<f64> = rows.iter().filter_map(|r| r["growth"].as_f64()).collect();
    assert!(growth.windows(2).all(|w| w[0] >= w[1]));
    // In text the verdict is the last line.
    let mut text_args = args("5");
    text_args.remove(1);
    let refs: Vec<&str> = text_args.iter().map(String::as_str).collect();
    let text = String::from_utf8_lossy(&instrument(&refs).stdout).into_owned();
    assert!(
        text.lines().last().unwrap().starts_with("gate 5%: FAILED"),
        "{text}"
    );
    // The same run against itself: every figure the same, the gate passes.
    let out = instrument(&[
        "report",
        "--json",
        b.path().to_str().unwrap(),
        "--diff",
        b.path().to_str().unwrap(),
        "--gate",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(0));
    // Rank 14's snapshot missing after: its events are on one side only; the gate is refused.
    std::fs::remove_file(a.path().join("memory_snapshot_rank14_step0.pickle")).unwrap();
    let (code, d) = run(args("5"));
    assert_eq!(code, Some(2), "{d}");
    assert_eq!(d["gate"]["verdict"], "refused");
}
