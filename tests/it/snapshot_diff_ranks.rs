//! `--diff` between two snapshots of a run, and a directory of per-rank snapshots.

use crate::snapshot_common;

use serde_json::Value;
use snapshot_common::*;

fn diff_report() -> Value {
    let a = fixture("leak_diff/snapshot_step_005.pickle");
    let b = fixture("leak_diff/snapshot_step_050.pickle");
    report(&[a.to_str().unwrap(), "--diff", b.to_str().unwrap()])
}

#[test]
fn diff_puts_growing_sites_first_then_one_time_then_shrinking() {
    let planted = planted("leak_diff");
    let r = diff_report();
    assert_eq!(r["mode"], "diff");
    let d = &r["diff"];
    let sites = d["sites"].as_array().unwrap();
    assert_eq!(sites.len(), 3, "{sites:?}");
    let (before, after) = (&planted["before"], &planted["after"]);

    let leak = &sites[0];
    assert!(site_matches(leak, &planted["leak_site"]), "{leak}");
    assert_eq!(leak["verdict"], "growing");
    assert_eq!(leak["blocks_before"], before["leak"]["blocks"]);
    assert_eq!(leak["blocks_after"], after["leak"]["blocks"]);
    assert_eq!(leak["bytes_before"], before["leak"]["bytes"]);
    assert_eq!(leak["bytes_after"], after["leak"]["bytes"]);

    let buf = &sites[1];
    assert!(site_matches(buf, &planted["buffer_site"]), "{buf}");
    assert_eq!(buf["verdict"], "one_time");
    assert_eq!(buf["blocks_before"], buf["blocks_after"]);
    assert_eq!(buf["bytes_after"], after["buffer"]["bytes"]);

    let cache = &sites[2];
    assert!(site_matches(cache, &planted["cache_site"]), "{cache}");
    assert_eq!(cache["verdict"], "shrinking");
    assert_eq!(cache["blocks_after"], after["cache"]["blocks"]);

    // The parameters did not change.
    assert_eq!(d["unchanged_sites"], 1);
    assert!(
        !sites
            .iter()
            .any(|s| site_matches(s, &planted["param_site"]))
    );
    assert_eq!(
        d["totals_before"]["allocated_bytes"],
        before["totals"]["allocated_bytes"]
    );
    assert_eq!(
        d["totals_after"]["allocated_bytes"],
        after["totals"]["allocated_bytes"]
    );
    // The rest of the report describes the later snapshot.
    assert_eq!(
        r["totals"]["allocated_bytes"],
        after["totals"]["allocated_bytes"]
    );

    // The growing site is named as a leak by the matching pattern.
    let p = pattern(&r, planted["pattern"].as_str().unwrap()).expect("pattern");
    assert!(site_matches(&p["sites"][0], &planted["leak_site"]));
    assert!(
        p["evidence"][0]
            .as_str()
            .unwrap()
            .contains("from 5 to 50 blocks"),
        "{}",
        p["evidence"]
    );
}

#[test]
fn diff_text_output() {
    let a = fixture("leak_diff/snapshot_step_005.pickle");
    let b = fixture("leak_diff/snapshot_step_050.pickle");
    let out = run(&[a.to_str().unwrap(), "--diff", b.to_str().unwrap()]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let g = text
        .find("GROWING (leaking or retaining)")
        .expect("growing line");
    let o = text.find("one-time growth").expect("one-time line");
    let s = text.find("shrinking").expect("shrinking line");
    assert!(g < o && o < s, "{text}");
}

#[test]
fn directory_of_ranks() {
    let planted = planted("multi_rank");
    let dir = fixture("multi_rank");
    let r = report(&[dir.to_str().unwrap()]);
    assert_eq!(r["mode"], "ranks");
    // Which file was taken as which rank, and which were skipped.
    let files = r["rank_files"].as_array().unwrap();
    for (name, want) in planted["ranks"].as_object().unwrap() {
        let f = files
            .iter()
            .find(|f| f["file"] == name.as_str())
            .expect(name);
        assert_eq!(f["rank"], want["rank"]);
        assert_eq!(f["taken"], true);
    }
    for skipped in planted["skipped"].as_array().unwrap() {
        let f = files
            .iter()
            .find(|f| &f["file"] == skipped)
            .expect("listed");
        assert_eq!(f["taken"], false);
        assert!(f["note"].as_str().unwrap().contains("no rank"));
    }
    // One row per rank, each with its own totals.
    let rows = r["ranks"].as_array().unwrap();
    assert_eq!(rows.len(), planted["ranks"].as_object().unwrap().len());
    for (name, want) in planted["ranks"].as_object().unwrap() {
        let row = rows.iter().find(|x| x["rank"] == want["rank"]).unwrap();
        assert_eq!(row["file"], name.as_str());
        assert_eq!(row["device"], want["device"]);
        assert_eq!(row["allocated_bytes"], want["totals"]["allocated_bytes"]);
        assert_eq!(row["reserved_bytes"], want["totals"]["reserved_bytes"]);
        assert_eq!(row["ooms"], 0);
        assert!(row["peak_bytes"].as_u64() >= row["allocated_bytes"].as_u64());
        // Snapshots alone do not say which stage each rank has: no rank is compared with
        // another, though rank 3 holds more (issue #26: "rank 3 stands out" across stages).
        assert_eq!(row["stands_out"], false, "rank {}", want["rank"]);
        assert_eq!(row["peers"], Value::Null);
    }
    // Totals add up all ranks.
    let sum: u64 = planted["ranks"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v["totals"]["allocated_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(r["totals"]["allocated_bytes"].as_u64().unwrap(), sum);
    let text = String::from_utf8_lossy(&run(&[dir.to_str().unwrap()]).stdout).to_string();
    assert!(!text.contains("stands out"), "{text}");
    assert!(text.contains("taken as rank 1"), "{text}");
}

#[test]
fn rank_names() {
    use instrument::snapshot::ranks::rank_from_name;
    assert_eq!(rank_from_name("snapshot-rank00003.pickle"), Some(3));
    assert_eq!(
        rank_from_name("memory_snapshot_rank3_step0.pickle"),
        Some(3)
    );
    assert_eq!(rank_from_name("rank3_memory_snapshot.pickle"), Some(3));
    assert_eq!(rank_from_name("RANK_12.pkl"), Some(12));
    assert_eq!(rank_from_name("ranked_rank7.json"), Some(7));
    assert_eq!(rank_from_name("summary.pickle"), None);
}

#[test]
fn directory_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
    let err = user_error(&[dir.path().to_str().unwrap()]);
    assert!(err.contains("no rank-local snapshots"), "{err}");
    // A broken rank file is named in the error.
    std::fs::copy(
        fixture("refused/truncated.pickle"),
        dir.path().join("snapshot-rank00001.pickle"),
    )
    .unwrap();
    let err = user_error(&[dir.path().to_str().unwrap()]);
    assert!(
        err.contains("snapshot-rank00001.pickle") && err.contains("truncated"),
        "{err}"
    );
}

/// Rank snapshots of different steps in one folder are refused in one line naming both files:
/// a folder of ranks is compared as one moment of one run, never a mix.
#[test]
fn ranks_of_different_steps_are_refused_never_merged() {
    use instrument::snapshot::ranks::step_from_name;
    assert_eq!(
        step_from_name("memory_snapshot_rank3_step40.pickle"),
        Some(40)
    );
    assert_eq!(step_from_name("memory_snapshot_rank3.pickle"), None);
    let dir = tempfile::tempdir().unwrap();
    let one = fixture("pipeline_step/snapshot.pickle");
    std::fs::copy(&one, dir.path().join("memory_snapshot_rank3_step0.pickle")).unwrap();
    std::fs::copy(&one, dir.path().join("memory_snapshot_rank14_step0.pickle")).unwrap();
    let ok = run(&["--json", dir.path().to_str().unwrap()]);
    assert_eq!(ok.status.code(), Some(0));
    std::fs::rename(
        dir.path().join("memory_snapshot_rank14_step0.pickle"),
        dir.path().join("memory_snapshot_rank14_step5.pickle"),
    )
    .unwrap();
    let err = user_error(&[dir.path().to_str().unwrap()]);
    assert!(
        err.contains("memory_snapshot_rank14_step5.pickle is of step 5")
            || err.contains("memory_snapshot_rank3_step0.pickle is of step 0"),
        "{err}"
    );
    assert!(
        err.contains("give each step's snapshots a folder of their own"),
        "{err}"
    );
}

/// `--rank N` in a folder of ranks keeps those ranks' files only; a rank without a file is
/// refused naming the ranks there; `--rank` on one file is refused.
#[test]
fn rank_picks_files_in_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let one = fixture("pipeline_step/snapshot.pickle");
    for r in [3, 5, 14] {
        std::fs::copy(
            &one,
            dir.path()
                .join(format!("memory_snapshot_rank{r}_step0.pickle")),
        )
        .unwrap();
    }
    let d = dir.path().to_str().unwrap();
    let r = report(&[d, "--rank", "14", "--rank", "3"]);
    let ranks: Vec<u64> = r["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, vec![3, 14]);
    let err = user_error(&[d, "--rank", "7"]);
    assert!(
        err.contains("--rank 7: no snapshot of that rank here (the ranks here: 3, 5, 14)"),
        "{err}"
    );
    let err = user_error(&[one.to_str().unwrap(), "--rank", "3"]);
    assert!(err.contains("--rank picks ranks in a folder"), "{err}");
}
