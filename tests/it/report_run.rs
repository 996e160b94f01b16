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
fn gather(s: &Scenario) -> tempfile::TempDir {
    let run = tempfile::tempdir().unwrap();
    std::fs::copy(s.path("srun.log"), run.path().join("srun.log")).unwrap();
    for e in std::fs::read_dir(s.snaps.path()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, run.path().join(p.file_name().unwrap())).unwrap();
    }
    run
}

fn report(dir: &Path) -> (Option<i32>, Value, String) {
    let out = instrument(&["report", "--json", dir.to_str().unwrap()]);
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
