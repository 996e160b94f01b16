//! Issue #26 as a user hit it: findings first, one gate that never passes on nothing, runs
//! never merged silently. The exports: tools/gen_nsys_sqlite.py `--scenario mfu` (the figures of
//! GindaChen/nsys-ai's mfu_2gpu_before/after.sqlite: two processes on GPU 0 and 1, NCCL kernels,
//! no pithtrain ranges) and `--scenario dualpipe` (two nodes of a pithtrain run, base and
//! regressed: rank 5's stage4_f hides nothing in the regressed run).

use crate::nsys_common;

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use nsys_common::*;
use serde_json::Value;

struct Exports {
    _dir: tempfile::TempDir,
    mfu_before: PathBuf,
    mfu_after: PathBuf,
    base: PathBuf,
    regressed: PathBuf,
}

fn exports() -> &'static Exports {
    static E: OnceLock<Exports> = OnceLock::new();
    E.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let (mfu_before, mfu_after) = (
            p.join("mfu_2gpu_before.sqlite"),
            p.join("mfu_2gpu_after.sqlite"),
        );
        for (out, variant) in [(&mfu_before, "base"), (&mfu_after, "regressed")] {
            write_export(
                out,
                &["--scenario", "mfu", "--variant", variant, "--no-expected"],
            );
        }
        let (base, regressed) = (p.join("base"), p.join("regressed"));
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
                        "--no-expected",
                    ],
                );
            }
        }
        Exports {
            _dir: dir,
            mfu_before,
            mfu_after,
            base,
            regressed,
        }
    })
}

/// (exit code, stdout, stderr) of `instrument nsys report ARGS`.
fn run(args: &[&OsStr]) -> (i32, String, String) {
    let o = Command::new(bin())
        .args(["nsys", "report"])
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

fn diff_json(before: &OsStr, after: &OsStr, gate: &str) -> (i32, Value) {
    let (code, out, err) = run(&[
        os("--json"),
        before,
        os("--diff"),
        after,
        os("--gate"),
        os(gate),
    ]);
    let d: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_eq!(d["schema"], "instrument.nsys.diff/1");
    (code, d)
}

/// Without DualPipeV chunk ranges the gate compared `0.000 -> 0.000` and passed; now it
/// compares each process's own figures and fails on GPU 1's exposed communication (+188.6 %).
#[test]
fn a_gate_without_chunk_ranges_compares_each_process_and_fails_on_the_growth() {
    let e = exports();
    let (b, a) = (e.mfu_before.as_os_str(), e.mfu_after.as_os_str());
    let (code, d) = diff_json(b, a, "5");
    assert_eq!(code, 1);
    assert_eq!(d["compared_by"], "processes");
    let g = &d["gate"];
    assert_eq!(
        (
            g["verdict"].as_str(),
            g["compared"].as_i64(),
            g["failed"].as_i64()
        ),
        (Some("failed"), Some(6), Some(2))
    );
    let rows: Vec<(String, String, i64, i64, String)> = g["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["where"]["point"].as_str().unwrap().to_string(),
                r["figure"].as_str().unwrap().to_string(),
                f(&r["before"]) as i64,
                f(&r["after"]) as i64,
                r["change"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let row = |p: &str, fig: &str, b: i64, a: i64, c: &str| {
        (p.to_string(), fig.to_string(), b, a, c.to_string())
    };
    assert_eq!(
        rows,
        [
            row(
                "process on GPU 1",
                "exposed communication",
                8_229_100,
                23_753_085,
                "+188.6%"
            ),
            row(
                "process on GPU 1",
                "communication",
                8_229_100,
                23_753_085,
                "+188.6%"
            ),
            row(
                "process on GPU 0",
                "compute",
                253_690_832,
                227_484_352,
                "-10.3%"
            ),
            row(
                "process on GPU 1",
                "compute",
                256_095_624,
                227_608_953,
                "-11.1%"
            ),
            row(
                "process on GPU 0",
                "exposed communication",
                17_172_652,
                9_989_016,
                "-41.8%"
            ),
            row(
                "process on GPU 0",
                "communication",
                17_172_652,
                9_989_016,
                "-41.8%"
            ),
        ],
        "largest growth first"
    );
    assert_eq!(g["rows"][0]["unit"], "ns");
    // In text: the rows in ms, the verdict as the last line.
    let (code, text, _) = run(&[b, os("--diff"), a, os("--gate"), os("5")]);
    assert_eq!(code, 1);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[lines.len() - 8..],
        [
            "Gate 5%: 6 figures, the largest growth first",
            "  x process on GPU 1 exposed communication      8.229 ms ->    23.753 ms   +188.6%",
            "  x process on GPU 1 communication              8.229 ms ->    23.753 ms   +188.6%",
            "    process on GPU 0 compute                  253.691 ms ->   227.484 ms    -10.3%",
            "    process on GPU 1 compute                  256.096 ms ->   227.609 ms    -11.1%",
            "    process on GPU 0 exposed communication     17.173 ms ->     9.989 ms    -41.8%",
            "    process on GPU 0 communication             17.173 ms ->     9.989 ms    -41.8%",
            "gate 5%: FAILED, 2 of 6 figures grew by more than 5%; the largest: process on GPU 1 \
             exposed communication +188.6% (8.229 ms -> 23.753 ms)",
        ]
    );
    // A gate wide enough passes; the same run against itself passes.
    assert_eq!(diff_json(b, a, "200").0, 0);
    assert_eq!(diff_json(b, b, "0").1["gate"]["verdict"], "passed");
}

/// A rank on one side only, runs of different kinds: nothing comparable, refused (exit 2), the
/// verdict last, saying why.
#[test]
fn a_gate_with_nothing_comparable_is_refused_saying_why() {
    let e = exports();
    let node0 = e.regressed.join("pithtrain_node0.sqlite");
    let (code, d) = diff_json(e.base.as_os_str(), node0.as_os_str(), "5");
    assert_eq!(code, 2);
    assert_eq!(d["gate"]["verdict"], "refused");
    assert_eq!(
        d["gate"]["why"],
        "only in the before run: rank 4 (pp 1, cp 0, ep 0), rank 5 (pp 1, cp 0, ep 1), \
         rank 6 (pp 1, cp 1, ep 0) and 1 more"
    );
    let (code, text, _) = run(&[
        e.base.as_os_str(),
        os("--diff"),
        node0.as_os_str(),
        os("--gate"),
        os("5"),
    ]);
    assert_eq!(code, 2);
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("gate 5%: REFUSED, nothing comparable: only in the before run: rank 4"),
        "{text}"
    );
    // A pithtrain run against an export without its ranges.
    let (code, d) = diff_json(e.base.as_os_str(), e.mfu_after.as_os_str(), "5");
    assert_eq!(code, 2);
    assert_eq!(d["compared_by"], "mixed");
    let why = d["gate"]["why"].as_str().unwrap();
    assert!(
        why.starts_with(
            "the before run has DualPipeV chunk ranges, the after run has none: runs of \
             different kinds; only in the before run: rank 0"
        ),
        "{why}"
    );
    // No gate, no verdict: the comparison alone exits 0.
    let (code, text, _) = run(&[e.base.as_os_str(), os("--diff"), node0.as_os_str()]);
    assert_eq!(code, 0);
    assert!(!text.contains("gate"), "{text}");
}

/// The findings open the report: text (the first line after the header block), HTML (before
/// the ranks side by side and the exports), JSON (`findings`, ranked). Rank 5's stage4_f, which
/// hides nothing in the regressed run against its peers' 28 %, is the headline.
#[test]
fn findings_come_first_and_headline_the_rank_that_stands_out() {
    let e = exports();
    let r = e.regressed.as_os_str();
    let doc = report_doc_with(&[e.regressed.as_path()], &[]);
    let findings = doc["findings"].as_array().unwrap();
    let first = &findings[0];
    assert_eq!(
        (
            first["severity"].as_str(),
            first["kind"].as_str(),
            first["where"]["rank"].as_i64(),
            first["where"]["point"].as_str()
        ),
        (
            Some("warning"),
            Some("hidden-share-stands-out"),
            Some(5),
            Some("stage4_f")
        )
    );
    assert_eq!(first["where"]["mesh"], "pp 1, cp 0, ep 1");
    assert_eq!(
        (
            f(&first["figure"]["value"]),
            first["figure"]["unit"].as_str()
        ),
        (0.0, Some("percent"))
    );
    assert!(f(&first["figure"]["compared_with"]["value"]) > 20.0);
    let kinds: Vec<&str> = findings
        .iter()
        .map(|x| x["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"most-exposed-stage") && kinds.contains(&"slower-than-peers"),
        "{kinds:?}"
    );
    assert!(!kinds.contains(&"no-chunk-ranges"), "{kinds:?}");
    // Text: the header block, a blank line, the findings heading; the cross-rank summary before
    // the first export's detail.
    let (code, text, _) = run(&[r]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = text.lines().collect();
    let blank = lines.iter().position(|l| l.is_empty()).unwrap();
    assert!(
        lines[blank + 1].starts_with("Findings: "),
        "{}",
        lines[blank + 1]
    );
    assert!(
        lines[blank + 2].starts_with(" 1. warning: rank 5 (pp 1, cp 0, ep 1), stage4_f: "),
        "{}",
        lines[blank + 2]
    );
    let across = text.find("== across ranks").unwrap();
    assert!(text.find("Findings: ").unwrap() < across);
    assert!(across < text.find("\n== rank 0").unwrap());
    // HTML: the findings section, then the ranks side by side, then the exports.
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("r.html");
    let (code, _, err) = run(&[r, os("--html"), page.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    let at = |s: &str| html.find(s).unwrap_or_else(|| panic!("{s} missing"));
    assert!(at("<section id=\"findings\">") < at("id=\"across\""));
    assert!(at("id=\"across\"") < at("<h2 class=\"export\">"));
    // Without chunk ranges: the process exposing the most, and that no stage is measured.
    let doc = report_doc_with(&[e.mfu_after.as_path()], &[]);
    let kinds: Vec<(&str, Option<&str>)> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["kind"].as_str().unwrap(), x["where"]["point"].as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("most-exposed-process", Some("pid 149")),
            ("no-chunk-ranges", None)
        ]
    );
    assert_eq!(f(&doc["findings"][0]["figure"]["value"]), 23_753_085.0);
}

/// Exports of different runs are refused, one line naming the files and what differs, never
/// merged into one report.
#[test]
fn exports_of_different_runs_are_refused_never_merged() {
    let e = exports();
    // A pithtrain 2-node folder plus an unrelated export.
    let (code, out, err) = run(&[e.base.as_os_str(), e.mfu_before.as_os_str()]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert_eq!(err.lines().count(), 1, "{err}");
    let node0 = e.base.join("pithtrain_node0.sqlite");
    assert!(
        err.contains(&format!(
            "{} and {} are exports of different runs: ",
            node0.display(),
            e.mfu_before.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("has the trainer's setup ranges (ranks)"),
        "{err}"
    );
    // Two runs without ranges, captured 79.9 minutes apart.
    let (code, _, err) = run(&[e.mfu_before.as_os_str(), e.mfu_after.as_os_str()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("their captures started 79.9 minutes apart"),
        "{err}"
    );
}
