//! Helpers shared by the `instrument snapshot` integration tests: run the binary,
//! read the JSON report, read what the generator planted.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/snapshots")
}

pub fn fixture(rel: &str) -> PathBuf {
    fixtures().join(rel)
}

pub fn planted(scenario: &str) -> Value {
    let p = fixture(scenario).join("planted.json");
    serde_json::from_str(&std::fs::read_to_string(&p).expect("planted.json")).expect("planted json")
}

pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_instrument"))
        .arg("snapshot")
        .args(args)
        .output()
        .expect("run instrument")
}

/// Run with `--json` and parse the report; panics with stderr if it failed.
pub fn report(args: &[&str]) -> Value {
    let mut a: Vec<&str> = args.to_vec();
    a.push("--json");
    let out = run(&a);
    assert!(
        out.status.success(),
        "instrument snapshot {:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("report is JSON")
}

pub fn report_of(rel: &str) -> Value {
    report(&[fixture(rel).to_str().unwrap()])
}

/// The one-line error of a failing run, asserting exit code 2 and no panic.
pub fn user_error(args: &[&str]) -> String {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "expected exit 2, stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert!(!err.contains("RUST_BACKTRACE"), "stack trace: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    assert!(out.stdout.is_empty(), "no report on error");
    err
}

/// Run tools/gen_snapshots.py with `args` into a new temporary folder. None (with a
/// notice) when python3 is missing, unless INSTRUMENT_REQUIRE_PYTHON=1.
pub fn generate(args: &[&str]) -> Option<tempfile::TempDir> {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|p| p.join("python3").is_file()));
    if !found {
        if std::env::var("INSTRUMENT_REQUIRE_PYTHON").as_deref() == Ok("1") {
            panic!("python3 is required (INSTRUMENT_REQUIRE_PYTHON=1) but not on PATH");
        }
        eprintln!(
            "notice: python3 not on PATH; skipping (set INSTRUMENT_REQUIRE_PYTHON=1 to make this a failure)"
        );
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/gen_snapshots.py");
    let out = Command::new("python3")
        .arg(&script)
        .args(args)
        .arg(dir.path())
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "gen_snapshots.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(dir)
}

pub fn site_matches(site: &Value, want: &Value) -> bool {
    site["file"] == want["file"]
        && site["line"] == want["line"]
        && site["function"] == want["function"]
}

pub fn find_site<'a>(sites: &'a Value, want: &Value) -> Option<&'a Value> {
    sites.as_array()?.iter().find(|s| site_matches(s, want))
}

pub fn pattern<'a>(r: &'a Value, name: &str) -> Option<&'a Value> {
    r["patterns"].as_array()?.iter().find(|p| p["name"] == name)
}

/// Events, segments and blocks with stacks spelled out, to compare two readings.
pub fn canonical(s: &instrument::snapshot::model::Snapshot) -> Vec<String> {
    let stack = |id| {
        s.stack(id)
            .iter()
            .map(|&f| {
                format!(
                    "{}:{}:{}",
                    s.frame_file(f),
                    s.frame_line(f),
                    s.frame_name(f)
                )
            })
            .collect::<Vec<_>>()
            .join("|")
    };
    let mut out = Vec::new();
    for t in &s.traces {
        out.push(format!("trace dropped={}", t.dropped));
        for e in &t.events {
            out.push(format!(
                "{:?} {} {} {} {} {}",
                e.action,
                e.addr,
                e.size,
                e.stream,
                e.time_us,
                stack(e.stack)
            ));
        }
    }
    for seg in &s.segments {
        out.push(format!(
            "seg {} {} {} {}",
            seg.device,
            seg.address,
            seg.total_size,
            stack(seg.stack)
        ));
        for b in &seg.blocks {
            out.push(format!(
                "{:?} {} {} {:?} {}",
                b.address,
                b.size,
                b.requested_size,
                b.state,
                stack(b.stack)
            ));
        }
    }
    out
}
