//! `instrument nsys report` per rank, against pithtrain's own analyze-nsys-profile scripts
//! (889a408): their printed tables for the pithtrain-shaped exports tools/gen_nsys_sqlite.py
//! `--scenario dualpipe` writes are in fixtures/nsys/dualpipe/ (see its README); every figure
//! they print — setup, window, streams with purposes, per-stage exposed time and overlaps — must
//! be ours for the same window. Communication time per stage, which the scripts keep but do not
//! print, and chunk lengths are checked against what the generator planted.

use crate::nsys_common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use nsys_common::*;
use serde_json::{Value, json};

/// The four exports (two runs of two nodes), generated once per test binary.
struct Runs {
    _dir: tempfile::TempDir,
    base: PathBuf,
    regressed: PathBuf,
}

fn runs() -> &'static Runs {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    RUNS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let (base, regressed) = (dir.path().join("base"), dir.path().join("regressed"));
        for (d, variant) in [(&base, "base"), (&regressed, "regressed")] {
            std::fs::create_dir(d).unwrap();
            for node in ["0", "1"] {
                write_export(
                    &d.join(format!("pithtrain_node{node}.sqlite")),
                    &[
                        "--scenario",
                        "dualpipe",
                        "--ranks",
                        "4",
                        "--node",
                        node,
                        "--variant",
                        variant,
                    ],
                );
            }
        }
        Runs {
            _dir: dir,
            base,
            regressed,
        }
    })
}

/// A table pithtrain's scripts printed (`common.print_table`): a header, a rule, rows; the last
/// column may hold spaces.
fn script_table(name: &str) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(repo().join("fixtures/nsys/dualpipe").join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut lines = text.lines();
    let head: Vec<String> = lines
        .next()
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    lines
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut cells: Vec<String> = Vec::new();
            let mut rest = l.trim();
            for k in 0..head.len() {
                if k + 1 == head.len() {
                    cells.push(rest.trim().to_string());
                } else {
                    let (c, r) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                    cells.push(c.to_string());
                    rest = r.trim_start();
                }
            }
            head.iter().cloned().zip(cells).collect()
        })
        .collect()
}

fn num(s: &str) -> i64 {
    s.parse()
        .unwrap_or_else(|_| panic!("not an integer: {s:?}"))
}

/// `58.4%` as the fraction 0.584.
fn share(s: &str) -> f64 {
    s.trim_end_matches('%').parse::<f64>().unwrap() / 100.0
}

/// Ours against a share the script printed rounded to two decimals of per cent.
fn same_share(ours: &Value, theirs: &str, what: &str) {
    let (o, t) = (f(ours), share(theirs));
    assert!(
        (o - t).abs() <= 0.000051,
        "{what}: ours {o}, the script's {theirs}"
    );
}

fn doc(paths: &[&Path], extra: &[&str]) -> Value {
    report_doc_with(paths, extra)
}

fn export<'a>(doc: &'a Value, file: &str) -> &'a Value {
    doc["exports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["file"].as_str().unwrap().ends_with(file))
        .unwrap_or_else(|| panic!("{file} not in the report"))
}

fn by_pid<'a>(e: &'a Value, pid: &str) -> &'a Value {
    process(e, pid)
}

/// The streams and stages of one process against classify_streams / compute_overlap.
fn check_figures(
    p: &Value,
    streams: &[&HashMap<String, String>],
    stages: &[&HashMap<String, String>],
    what: &str,
) {
    let ours = p["streams"].as_array().unwrap();
    assert_eq!(ours.len(), streams.len(), "{what}: streams {ours:?}");
    for (o, t) in ours.iter().zip(streams) {
        for k in ["stream", "n_comm", "n_comp", "comm_ns", "comp_ns"] {
            assert_eq!(i(&o[k]), num(&t[k]), "{what}: stream {}: {k}", t["stream"]);
        }
        assert_eq!(
            o["purpose"],
            t["purpose"].as_str(),
            "{what}: stream {}",
            t["stream"]
        );
    }
    let ours = p["stages"].as_array().unwrap();
    assert_eq!(ours.len(), stages.len(), "{what}: stages {ours:?}");
    for (o, t) in ours.iter().zip(stages) {
        assert_eq!(o["stage"], t["stage"].as_str(), "{what}");
        assert_eq!(
            i(&o["exposed_ns"]),
            num(&t["exposed_ns"]),
            "{what}: {}",
            t["stage"]
        );
        for k in ["overlap", "overlap_min", "overlap_max"] {
            same_share(&o[k], &t[k], &format!("{what}: {} {k}", t["stage"]));
        }
    }
}

fn rows_of<'a>(t: &'a [HashMap<String, String>], pid: &str) -> Vec<&'a HashMap<String, String>> {
    t.iter().filter(|r| r["pid"] == pid).collect()
}

fn truth(dir: &Path, node: &str) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("pithtrain_node{node}.expected.json"))).unwrap(),
    )
    .unwrap()
}

/// The median length of a rank's overlapped chunk ranges, from what the generator planted.
fn planted_chunk_time(run: &Path, rank: i64) -> f64 {
    let node = if rank < 4 { "0" } else { "1" };
    let t = truth(run, node);
    let mut lengths: Vec<f64> = t["dualpipe"][rank.to_string()]["chunk_lengths"]
        .as_array()
        .unwrap()
        .iter()
        .map(f)
        .collect();
    lengths.sort_by(f64::total_cmp);
    let n = lengths.len();
    if n % 2 == 1 {
        lengths[n / 2]
    } else {
        (lengths[n / 2 - 1] + lengths[n / 2]) / 2.0
    }
}

#[test]
fn setup_window_streams_and_stages_equal_pithtrains_scripts() {
    let r = runs();
    let d = doc(&[&r.base], &["--top", "3"]);
    assert_eq!(d["exports"].as_array().unwrap().len(), 2);
    for node in ["0", "1"] {
        let e = export(&d, &format!("pithtrain_node{node}.sqlite"));
        let planted = truth(&r.base, node);
        let setup = script_table(&format!("base.node{node}.show_setup.txt"));
        let window = script_table(&format!("base.node{node}.find_window.txt"));
        let streams = script_table(&format!("base.node{node}.classify_streams.txt"));
        let stages = script_table(&format!("base.node{node}.compute_overlap.txt"));
        assert_eq!(setup.len(), 4);
        assert_eq!(e["processes"].as_array().unwrap().len(), 4);
        for s in &setup {
            let pid = s["pid"].as_str();
            let p = by_pid(e, pid);
            assert_eq!(p["setup"], s["setup"].as_str());
            // rank=N; pp=R/S dp=R/S cp=R/S ep=R/S; mbs=M seq=Q, read by hand.
            let fields: HashMap<&str, &str> = s["setup"]
                .split_whitespace()
                .filter_map(|t| t.trim_end_matches(';').split_once('='))
                .collect();
            assert_eq!(i(&p["rank"]), num(fields["rank"]));
            for axis in ["pp", "dp", "cp", "ep"] {
                let (a, b) = fields[axis].split_once('/').unwrap();
                assert_eq!(p["mesh"][axis], json!([num(a), num(b)]), "pid {pid} {axis}");
            }
            assert_eq!(i(&p["mbs"]), num(fields["mbs"]));
            assert_eq!(i(&p["seq"]), num(fields["seq"]));
            let w = window.iter().find(|w| w["pid"] == *pid).unwrap();
            assert_eq!(p["window"]["pick"], "median");
            assert_eq!(p["window"]["name"], w["name"].as_str());
            assert_eq!(i(&p["window"]["start_ns"]), num(&w["start"]));
            assert_eq!(i(&p["window"]["end_ns"]), num(&w["end"]));
            check_figures(
                p,
                &rows_of(&streams, pid),
                &rows_of(&stages, pid),
                &format!("node {node} pid {pid}"),
            );
            // What the scripts keep but do not print: communication time per stage, planted.
            let t = &planted["dualpipe"][fields["rank"]];
            assert_eq!(i(&t["pid"]), num(pid));
            for st in p["stages"].as_array().unwrap() {
                let ts = &t["stages"][st["stage"].as_str().unwrap()];
                assert_eq!(
                    i(&st["comm_ns"]),
                    i(&ts["comm_ns"]),
                    "pid {pid} {}",
                    st["stage"]
                );
                assert_eq!(i(&st["exposed_ns"]), i(&ts["exposed_ns"]));
            }
            // Chunk time: the median length of the rank's overlapped chunks, as planted.
            let rank = num(fields["rank"]);
            assert_eq!(
                f(&p["chunks"]["median_ns"]),
                planted_chunk_time(&r.base, rank)
            );
            assert_eq!(
                i(&p["chunks"]["count"]),
                t["chunk_lengths"].as_array().unwrap().len() as i64
            );
        }
        // The setup range is never listed as work.
        for p in e["processes"].as_array().unwrap() {
            assert!(
                !p["nvtx"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["name"].as_str().unwrap().starts_with("rank=")),
                "setup range listed"
            );
        }
    }
}

#[test]
fn whole_capture_and_a_window_given_equal_the_scripts_with_start_and_end() {
    let r = runs();
    let d = doc(&[&r.base], &["--window", "5000000:9000000", "--top", "1"]);
    for node in ["0", "1"] {
        let e = export(&d, &format!("pithtrain_node{node}.sqlite"));
        let whole_streams = script_table(&format!("base.node{node}.whole.classify_streams.txt"));
        let whole_stages = script_table(&format!("base.node{node}.whole.compute_overlap.txt"));
        let streams = script_table(&format!("base.node{node}.range.classify_streams.txt"));
        let stages = script_table(&format!("base.node{node}.range.compute_overlap.txt"));
        for p in e["processes"].as_array().unwrap() {
            let pid = p["pid"].to_string();
            assert_eq!(p["window"]["pick"], "range");
            assert_eq!(p["window"]["name"], "5000000:9000000");
            check_figures(
                p,
                &rows_of(&streams, &pid),
                &rows_of(&stages, &pid),
                &format!("node {node} pid {pid}, window 5000000:9000000"),
            );
            check_figures(
                &p["whole_capture"],
                &rows_of(&whole_streams, &pid),
                &rows_of(&whole_stages, &pid),
                &format!("node {node} pid {pid}, whole capture"),
            );
        }
    }
    // What the whole capture holds that the median chunk does not, as the scripts say: rank 1's
    // all-to-all launched behind 300 ranges (past the 256 the innermost search looks back) and
    // rank 3's without a runtime call make their streams `mixed`; the loss all-reduce under no
    // stage range is `unknown`; pipeline send/recv is `pp_p2p`.
    let e = export(&d, "pithtrain_node0.sqlite");
    let purpose = |pid: &str, stream: i64| -> String {
        by_pid(e, pid)["whole_capture"]["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| i(&s["stream"]) == stream)
            .unwrap()["purpose"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(purpose("4259", 20), "mixed");
    assert_eq!(purpose("4293", 20), "mixed");
    assert_eq!(purpose("4242", 20), "ep_a2a");
    assert_eq!(purpose("4242", 28), "pp_p2p");
    assert_eq!(purpose("4242", 32), "unknown");
    // --window all: the window is the whole capture.
    let all = doc(
        &[&r.base.join("pithtrain_node0.sqlite")],
        &["--window", "all"],
    );
    let p = by_pid(&all["exports"][0], "4242");
    assert_eq!(p["window"]["pick"], "all");
    assert_eq!(p["stages"], p["whole_capture"]["stages"]);
}

/// Per stage, the rank with the most exposed communication, computed from the scripts' tables
/// of both nodes; pipeline balance from the planted chunk lengths.
#[test]
fn across_ranks_names_the_most_exposed_rank_per_stage_and_pipeline_balance() {
    let r = runs();
    let d = doc(&[&r.base], &["--top", "1"]);
    let a = &d["across"];
    let ranks = a["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 8);
    let order: Vec<i64> = ranks.iter().map(|x| i(&x["rank"])).collect();
    assert_eq!(order, [0, 1, 2, 3, 4, 5, 6, 7], "by mesh coordinates");
    // (rank, stage, exposed) from the scripts: pids are per node, ranks from show_setup.
    let mut rows: Vec<(i64, String, i64)> = Vec::new();
    for node in ["0", "1"] {
        let setup = script_table(&format!("base.node{node}.show_setup.txt"));
        for s in script_table(&format!("base.node{node}.compute_overlap.txt")) {
            let label = &setup.iter().find(|x| x["pid"] == s["pid"]).unwrap()["setup"];
            let rank = num(label.trim_start_matches("rank=").split(';').next().unwrap());
            rows.push((rank, s["stage"].clone(), num(&s["exposed_ns"])));
        }
    }
    let stages = a["stages"].as_array().unwrap();
    let mut names: Vec<&String> = rows.iter().map(|r| &r.1).collect();
    names.sort();
    names.dedup();
    assert_eq!(stages.len(), names.len());
    for w in stages {
        let st = w["stage"].as_str().unwrap();
        let mine: Vec<&(i64, String, i64)> = rows.iter().filter(|r| r.1 == st).collect();
        let top = mine.iter().map(|r| r.2).max().unwrap();
        let first = mine
            .iter()
            .filter(|r| r.2 == top)
            .map(|r| r.0)
            .min()
            .unwrap();
        assert_eq!((i(&w["rank"]), i(&w["exposed_ns"])), (first, top), "{st}");
        let others: Vec<i64> = mine.iter().filter(|r| r.0 != first).map(|r| r.2).collect();
        assert_eq!(i(&w["others"]), others.len() as i64);
        if !others.is_empty() {
            assert_eq!(
                i(&w["others_min_exposed_ns"]),
                *others.iter().min().unwrap()
            );
            assert_eq!(
                i(&w["others_max_exposed_ns"]),
                *others.iter().max().unwrap()
            );
        }
    }
    // The bad stage: rank 5's combine forward, never hidden.
    let bad = stages.iter().find(|w| w["stage"] == "stage4_f").unwrap();
    assert_eq!((i(&bad["rank"]), i(&bad["exposed_ns"])), (5, 88000));
    assert_eq!(
        bad["mesh"],
        json!({"pp": [1, 2], "dp": [0, 1], "cp": [0, 2], "ep": [1, 2]})
    );
    assert_eq!(f(&bad["overlap"]), 0.0);
    let b = &a["balance"];
    assert_eq!(b["axis"], "pp");
    assert_eq!(b["groups"].as_array().unwrap().len(), 2);
    assert!(b["slower"].as_array().unwrap().is_empty(), "{b}");
    // The second run: the pp=1 ranks compute 20 % longer.
    let d2 = doc(&[&r.regressed], &["--top", "1"]);
    let slower = d2["across"]["balance"]["slower"].as_array().unwrap();
    assert_eq!(slower.len(), 1, "{slower:?}");
    assert_eq!(
        (slower[0]["kind"].as_str(), i(&slower[0]["coordinate"])),
        (Some("coordinate"), 1)
    );
    // In text: one line per stage, and the slower pipeline stage.
    // (The line is wider than 100 columns, so it is wrapped: compared with its spaces
    // collapsed.)
    let text = run(&[r.base.as_os_str()], &[]).1;
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("stage4_f: rank 5 (pp 1, cp 0, ep 1) exposes 0.088 ms of 0.088 ms (hidden 0.00%); the other 7 0.055..0.066 ms"),
        "{text}"
    );
    let text = run(&[r.regressed.as_os_str()], &[]).1;
    assert!(
        text.contains("    pp 1 is slower than its pp peers: chunk "),
        "{text}"
    );
}

fn run(paths: &[&std::ffi::OsStr], extra: &[&str]) -> (i32, String, String) {
    let o = Command::new(bin())
        .args(["nsys", "report"])
        .args(paths)
        .args(extra)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn diff_with_a_gate_names_what_grew() {
    let r = runs();
    let (b, a) = (r.base.as_os_str(), r.regressed.as_os_str());
    // What grew by more than 5 %, from the scripts' tables of both runs and the planted chunks.
    let mut expected: Vec<(i64, String, i64, i64)> = Vec::new();
    for node in ["0", "1"] {
        let setup = script_table(&format!("base.node{node}.show_setup.txt"));
        let before = script_table(&format!("base.node{node}.compute_overlap.txt"));
        let after = script_table(&format!("regressed.node{node}.compute_overlap.txt"));
        for x in &after {
            let was = before
                .iter()
                .find(|y| y["pid"] == x["pid"] && y["stage"] == x["stage"])
                .map_or(0, |y| num(&y["exposed_ns"]));
            let now = num(&x["exposed_ns"]);
            if now as f64 > was as f64 * 1.05 {
                let label = &setup.iter().find(|s| s["pid"] == x["pid"]).unwrap()["setup"];
                let rank = num(label.trim_start_matches("rank=").split(';').next().unwrap());
                expected.push((rank, x["stage"].clone(), was, now));
            }
        }
    }
    expected.sort();
    assert_eq!(
        expected,
        [
            (2, "stage2_b".into(), 47500, 61750),
            (5, "stage4_f".into(), 88000, 132000)
        ]
    );
    let o = Command::new(bin())
        .args(["nsys", "report", "--json"])
        .arg(b)
        .arg("--diff")
        .arg(a)
        .args(["--gate", "5"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["schema"], "instrument.nsys.diff/1");
    let gate = &d["gate"];
    assert_eq!(f(&gate["percent"]), 5.0);
    assert_eq!(gate["verdict"], "failed");
    assert_eq!(d["compared_by"], "chunk-ranges");
    let grew: Vec<&Value> = gate["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["exceeded"] == true)
        .collect();
    let mut exposed: Vec<(i64, String, i64, i64)> = grew
        .iter()
        .filter(|g| g["figure"] == "exposed communication")
        .map(|g| {
            (
                i(&g["where"]["rank"]),
                g["where"]["point"].as_str().unwrap().to_string(),
                f(&g["before"]) as i64,
                f(&g["after"]) as i64,
            )
        })
        .collect();
    exposed.sort();
    assert_eq!(exposed, expected);
    let mut chunks: Vec<i64> = grew
        .iter()
        .filter(|g| g["figure"] == "chunk time")
        .map(|g| i(&g["where"]["rank"]))
        .collect();
    chunks.sort();
    assert_eq!(chunks, [4, 5, 6, 7], "the pp=1 ranks compute 20 % longer");
    for g in grew.iter().filter(|g| g["figure"] == "chunk time") {
        let rank = i(&g["where"]["rank"]);
        assert_eq!(f(&g["before"]), planted_chunk_time(&r.base, rank), "{g}");
        assert_eq!(
            f(&g["after"]),
            planted_chunk_time(&r.regressed, rank),
            "{g}"
        );
    }
    // Largest growth first: stage4_f's +50 % heads the rows.
    let growth: Vec<f64> = gate["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| f(&r["growth"]))
        .collect();
    assert!(growth.windows(2).all(|w| w[0] >= w[1]), "{growth:?}");
    assert_eq!(gate["rows"][0]["where"]["point"], "stage4_f");
    let r5 = d["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["rank"] == 5)
        .unwrap();
    let s = r5["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "stage4_f")
        .unwrap();
    assert_eq!(s["exposed_ns"]["change"], "+50.0%");
    assert_eq!(f(&s["exposed_ns"]["delta"]), 44000.0);
    // In text, in ms, the verdict as the last line.
    let (code, text, _) = run(&[b], &["--diff", a.to_str().unwrap(), "--gate", "5"]);
    assert_eq!(code, 1);
    assert_eq!(
        text.lines().last().unwrap(),
        "gate 5%: FAILED, 6 of 55 figures grew by more than 5%; the largest: rank 5 (pp 1, cp 0, ep 1), \
         stage4_f exposed communication +50.0% (0.088 ms -> 0.132 ms)"
    );
    // Exactly +50 % is allowed by --gate 50; the rest grew less.
    let (code, text, err) = run(&[b], &["--diff", a.to_str().unwrap(), "--gate", "50"]);
    assert_eq!(code, 0, "{text}{err}");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("gate 50%: passed, none of 55 figures"),
        "{text}"
    );
    // A run against itself: nothing changed.
    let (code, text, _) = run(&[b], &["--diff", b.to_str().unwrap(), "--gate", "0"]);
    assert_eq!(code, 0, "{text}");
    // The diff as a page.
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("diff.html");
    let (code, _, err) = run(
        &[b],
        &[
            "--diff",
            a.to_str().unwrap(),
            "--gate",
            "5",
            "--html",
            html.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{err}");
    let page = std::fs::read_to_string(&html).unwrap();
    // The gate as every page draws it (`gate::Outcome::render_html`): failed, the row that grew
    // marked, its figures right-aligned.
    assert!(
        page.starts_with("<!DOCTYPE html>")
            && page.contains("<section class=\"gate failed\"><h2>Gate</h2>")
    );
    assert!(page.contains("<tr class=\"exceeded\"><td>&#10007;</td><td>rank 5 (pp 1, cp 0, ep 1), stage4_f</td><td>exposed communication</td><td class=\"n\">0.088 ms</td><td class=\"n\">0.132 ms</td><td class=\"n\">+50.0%</td></tr>"));
}

#[test]
fn exports_of_different_runs_are_refused_naming_both() {
    let r = runs();
    let n0 = r.base.join("pithtrain_node0.sqlite");
    let n1 = r.regressed.join("pithtrain_node1.sqlite");
    let (code, out, err) = run(&[n0.as_os_str(), n1.as_os_str()], &[]);
    assert_eq!(code, 2, "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("different runs")
            && err.contains(n0.to_str().unwrap())
            && err.contains(n1.to_str().unwrap()),
        "{err}"
    );
    assert!(out.is_empty());
    // The same export twice, by another path.
    let again = r.base.join(".").join("pithtrain_node0.sqlite");
    let (code, _, err) = run(&[r.base.as_os_str(), again.as_os_str()], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("the same export, given twice"), "{err}");
    // A copy of a node: its ranks twice.
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("copy.sqlite");
    std::fs::copy(&n0, &copy).unwrap();
    let (code, _, err) = run(&[n0.as_os_str(), copy.as_os_str()], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("rank 0 is in both"), "{err}");
}

/// Copy `src` and rewrite its NVTX names with `replace`, in the text column and StringIds.
fn renamed(src: &Path, dir: &Path, pairs: &[(&str, &str)]) -> PathBuf {
    let dst = dir.join(src.file_name().unwrap());
    std::fs::copy(src, &dst).unwrap();
    let c = rusqlite::Connection::open(&dst).unwrap();
    for (from, to) in pairs {
        c.execute(
            "UPDATE NVTX_EVENTS SET text = replace(text, ?1, ?2) WHERE text IS NOT NULL",
            [from, to],
        )
        .unwrap();
        c.execute(
            "UPDATE StringIds SET value = replace(value, ?1, ?2)",
            [from, to],
        )
        .unwrap();
    }
    dst
}

/// The Rust knows no pithtrain names: the same export with every name changed, read with a
/// conventions table saying so, gives the same figures.
#[test]
fn conventions_are_data() {
    let r = runs();
    let d = tempfile::tempdir().unwrap();
    let pairs = [
        ("rank=", "gpu="),
        ("pp=", "pipe="),
        ("ep=", "expert="),
        ("mbs=", "micro="),
        ("forward chunk", "F part"),
        ("backward chunk", "B part"),
        ("stage", "phase"),
        ("pipeline send/recv", "p2p exchange"),
    ];
    let src = r.base.join("pithtrain_node1.sqlite");
    let db = renamed(&src, d.path(), &pairs);
    let mut toml = std::fs::read_to_string(repo().join("src/nsys/conventions.toml")).unwrap();
    for (from, to) in [
        ("'^rank=\\d+; pp=", "'^gpu=\\d+; pipe="),
        ("ep=\\d+/\\d+; mbs=", "expert=\\d+/\\d+; micro="),
        ("rank = \"rank\"", "rank = \"gpu\""),
        (
            "fields = [\"mbs\", \"seq\"]",
            "fields = [\"micro\", \"seq\"]",
        ),
        (
            "like = \"forward chunk%backward chunk%\"",
            "like = \"F part%B part%\"",
        ),
        ("'stage([1-5])_([fbw])'", "'phase([1-5])_([fbw])'"),
        ("name = \"stage{1}_{2}\"", "name = \"phase{1}_{2}\""),
        (
            "\"stage2_f\", \"stage2_b\", \"stage4_f\", \"stage4_b\"",
            "\"phase2_f\", \"phase2_b\", \"phase4_f\", \"phase4_b\"",
        ),
        ("\"stage1_f\", \"stage1_b\"", "\"phase1_f\", \"phase1_b\""),
        ("\"pipeline send/recv\"", "\"p2p exchange\""),
        ("axis = \"pp\"", "axis = \"pipe\""),
    ] {
        assert!(toml.contains(from), "{from}");
        toml = toml.replace(from, to);
    }
    let conv = d.path().join("other-trainer.toml");
    std::fs::write(&conv, toml).unwrap();
    let theirs = report_json_with(&db, &["--conventions", conv.to_str().unwrap()]);
    let ours = report_json_with(&src, &[]);
    for (a, b) in theirs["processes"]
        .as_array()
        .unwrap()
        .iter()
        .zip(ours["processes"].as_array().unwrap())
    {
        assert_eq!(a["rank"], b["rank"]);
        assert_eq!(a["micro"], b["mbs"]);
        assert_eq!(a["mesh"]["pipe"], b["mesh"]["pp"]);
        assert_eq!(a["window"]["start_ns"], b["window"]["start_ns"]);
        assert_eq!(a["streams"], b["streams"]);
        let strip = |v: &Value| -> Vec<(String, i64, i64)> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    (
                        s["stage"].as_str().unwrap().replace("phase", "stage"),
                        i(&s["comm_ns"]),
                        i(&s["exposed_ns"]),
                    )
                })
                .collect()
        };
        assert_eq!(strip(&a["stages"]), strip(&b["stages"]));
        assert!(!b["stages"].as_array().unwrap().is_empty());
    }
    // With the built-in (pithtrain's) table the renamed export has no mesh and no window.
    let plain = report_json_with(&db, &[]);
    assert!(plain["processes"][0]["mesh"].is_null());
    assert_eq!(plain["processes"][0]["window"]["pick"], "all");
}

/// An export without the setup range, one without chunk ranges: reported, said in one line.
#[test]
fn without_setup_or_chunk_ranges_the_report_says_so() {
    let r = runs();
    let d = tempfile::tempdir().unwrap();
    let src = r.base.join("pithtrain_node0.sqlite");
    let no_setup = renamed(&src, d.path(), &[("rank=", "hello=")]);
    let rep = report_json_with(&no_setup, &[]);
    for p in rep["processes"].as_array().unwrap() {
        assert!(p["rank"].is_null() && p["mesh"].is_null() && p["mbs"].is_null());
        assert!(
            p["mesh_unknown"]
                .as_str()
                .unwrap()
                .contains("no NVTX range matches the setup pattern")
        );
    }
    let note = rep["notes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "mesh_unknown")
        .unwrap();
    assert_eq!(i(&note["count"]), 4);
    let (code, text, _) = run(&[no_setup.as_os_str()], &[]);
    assert_eq!(code, 0);
    assert_eq!(
        text.matches("mesh unknown for 4 of 4 process(es)").count(),
        1,
        "{text}"
    );
    assert!(text.contains("== process 4242 (python3) on GPU 0 =="));

    let d2 = tempfile::tempdir().unwrap();
    let no_chunks = renamed(&src, d2.path(), &[("backward chunk", "and then")]);
    let rep = report_json_with(&no_chunks, &[]);
    let whole = script_table("base.node0.whole.compute_overlap.txt");
    for p in rep["processes"].as_array().unwrap() {
        assert_eq!(p["window"]["pick"], "all");
        assert!(
            p["window"]["note"]
                .as_str()
                .unwrap()
                .contains("the window is the whole capture")
        );
        assert!(!p["mesh"].is_null());
        let pid = p["pid"].to_string();
        let rows = rows_of(&whole, &pid);
        assert_eq!(p["stages"].as_array().unwrap().len(), rows.len());
        for (o, t) in p["stages"].as_array().unwrap().iter().zip(rows) {
            assert_eq!(i(&o["exposed_ns"]), num(&t["exposed_ns"]));
        }
    }
}

#[test]
fn bad_arguments_are_one_line_and_exit_2() {
    let r = runs();
    let n0 = r.base.join("pithtrain_node0.sqlite");
    let d = tempfile::tempdir().unwrap();
    let bad_toml = d.path().join("bad.toml");
    std::fs::write(&bad_toml, "[setup]\npattern = '('\n").unwrap();
    let not_export = d.path().join("other.sqlite");
    rusqlite::Connection::open(&not_export)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER);")
        .unwrap();
    std::fs::copy(&n0, d.path().join("a.sqlite")).unwrap();
    for (args, needle) in [
        (
            vec!["--window", "soon"],
            "--window takes median, all or START_NS:END_NS",
        ),
        (vec!["--window", "10:5"], "START_NS <= END_NS"),
        (
            vec!["--conventions", "/no/such.toml"],
            "--conventions /no/such.toml",
        ),
        (
            vec!["--conventions", bad_toml.to_str().unwrap()],
            "bad.toml: not a conventions table",
        ),
        (vec!["--gate", "5"], "--diff"),
        (
            vec!["--diff", n0.to_str().unwrap(), "--gate", "lots"],
            "--gate takes a per cent",
        ),
    ] {
        let (code, out, err) = run(&[n0.as_os_str()], &args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.is_empty(), "{args:?}: nothing printed");
    }
    // A folder with a file that is not an export: one line naming it, nothing reported.
    let (code, out, err) = run(&[d.path().as_os_str()], &[]);
    assert_eq!(code, 2);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("other.sqlite: not an Nsight Systems SQLite export"),
        "{err}"
    );
    assert!(out.is_empty());
    // --diff with a missing run is refused before anything is read.
    let (code, _, err) = run(&[n0.as_os_str()], &["--diff", "/no/such/run"]);
    assert_eq!(code, 2);
    assert!(err.contains("/no/such/run: no such file"), "{err}");
}

/// NVTX_EVENTS out of start order (tools/gen_nsys_sqlite.py --shuffle-nvtx): the projection
/// reads it again by thread, the per-rank scan sorted by start, and the figures are the
/// scripts' still.
#[test]
fn an_nvtx_table_out_of_order_gives_the_same_figures() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("pithtrain_node0.sqlite");
    write_export(
        &db,
        &[
            "--scenario",
            "dualpipe",
            "--ranks",
            "4",
            "--node",
            "0",
            "--shuffle-nvtx",
        ],
    );
    let e = report_json_with(&db, &["--top", "1"]);
    let kinds: Vec<&str> = e["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"nvtx_reordered") && kinds.contains(&"nvtx_read_sorted"),
        "{kinds:?}"
    );
    let streams = script_table("base.node0.classify_streams.txt");
    let stages = script_table("base.node0.compute_overlap.txt");
    for p in e["processes"].as_array().unwrap() {
        let pid = p["pid"].to_string();
        check_figures(
            p,
            &rows_of(&streams, &pid),
            &rows_of(&stages, &pid),
            &format!("pid {pid}"),
        );
    }
}

/// `--rank N` keeps only those ranks' processes, as `log --rank` and `snapshot --rank` do; a rank
/// no export holds is refused in one line naming the ranks there are.
#[test]
fn rank_keeps_only_those_ranks_processes() {
    let r = runs();
    let all = doc(&[&r.base], &[]);
    let ranks_of = |d: &Value| -> Vec<u64> {
        let mut v: Vec<u64> = d["exports"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|e| e["processes"].as_array().unwrap())
            .filter_map(|p| p["rank"].as_u64())
            .collect();
        v.sort_unstable();
        v
    };
    let every = ranks_of(&all);
    assert!(every.len() >= 4, "{every:?}");
    let picked = doc(
        &[&r.base],
        &["--rank", "5", "--rank", &every[0].to_string()],
    );
    let mut want = vec![every[0], 5];
    want.sort_unstable();
    want.dedup();
    assert_eq!(ranks_of(&picked), want);
    let o = Command::new(bin())
        .args(["nsys", "report"])
        .arg(&r.base)
        .args(["--rank", "999"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("--rank 999: no export holds that rank (the ranks there: "),
        "{err}"
    );
}
