//! Helpers shared by the `instrument nsys report` tests: generating exports, running the report,
//! and comparing it with tools/nsys_stats_reference.py (an independent SQL implementation of
//! nsys's report definitions).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_instrument")
}

pub fn python() -> String {
    std::env::var("INSTRUMENT_PYTHON").unwrap_or_else(|_| "python3".into())
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Write an export to `out` with tools/gen_nsys_sqlite.py `args` (its truth lands beside
/// it, `x.expected.json` for `x.sqlite`).
pub fn write_export(out: &Path, args: &[&str]) {
    let o = Command::new(python())
        .arg(repo().join("tools/gen_nsys_sqlite.py"))
        .arg("--out")
        .arg(out)
        .args(args)
        .output()
        .expect("python3 runs the generator");
    assert!(
        o.status.success(),
        "generator failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Generate an export; returns (sqlite path, expected truth, tempdir guard).
pub fn generate(args: &[&str]) -> (PathBuf, Value, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.sqlite");
    write_export(&out, args);
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("x.expected.json")).unwrap())
            .unwrap();
    (out, expected, dir)
}

/// The whole `--json` document (schema `instrument.nsys.report/3`) for one or more exports.
pub fn report_doc_with(paths: &[&Path], extra: &[&str]) -> Value {
    let out = Command::new(bin())
        .args(["nsys", "report", "--json"])
        .args(extra)
        .args(paths)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(doc["schema"], "instrument.nsys.report/3");
    doc
}

/// The report of one export (the document's only entry of `exports`).
pub fn report_json_with(path: &Path, extra: &[&str]) -> Value {
    let mut doc = report_doc_with(&[path], extra);
    let exports = doc["exports"].as_array_mut().expect("exports");
    assert_eq!(exports.len(), 1);
    exports.remove(0)
}

pub fn report_json(path: &Path) -> Value {
    report_json_with(path, &["--all"])
}

pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

pub fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

pub fn process<'a>(rep: &'a Value, pid: &str) -> &'a Value {
    rep["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"].as_i64().map(|v| v.to_string()).as_deref() == Some(pid))
        .unwrap_or_else(|| panic!("process {pid} missing from the report"))
}

/// Our export-wide tables against tools/nsys_stats_reference.py, row by row.
pub fn check_against_reference(db: &Path, ours_args: &[&str], reference_args: &[&str]) {
    let out = Command::new(python())
        .arg(repo().join("tools/nsys_stats_reference.py"))
        .arg(db)
        .args(reference_args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rep = report_json_with(db, ours_args);

    let kern = reference["cuda_gpu_kern_sum"].as_array().unwrap();
    let ours = rep["kernel_summary"].as_array().unwrap();
    assert_eq!(kern.len(), ours.len());
    // Same rows in the same order (total desc, instances, name).
    for (r, o) in kern.iter().zip(ours) {
        assert_eq!(r["Name"], o["name"]);
        assert_eq!(i(&r["Total Time"]), i(&o["total_ns"]));
        assert_eq!(i(&r["Instances"]), i(&o["count"]));
        assert_eq!(i(&r["Min"]), i(&o["min_ns"]));
        assert_eq!(i(&r["Max"]), i(&o["max_ns"]));
        for (a, b) in [
            ("Avg", "avg_ns"),
            ("Med", "med_ns"),
            ("StdDev", "stddev_ns"),
        ] {
            assert!(close(f(&r[a]), f(&o[b])), "{}: {a}", r["Name"]);
        }
    }
    let proj = reference["nvtx_gpu_proj_sum"].as_array().unwrap();
    let ours = rep["nvtx_gpu_proj_sum"].as_array().unwrap();
    assert_eq!(proj.len(), ours.len());
    for r in proj {
        let o = ours
            .iter()
            .find(|o| {
                o["nsys_name"] == r["Range"]
                    && o["style"] == r["Style"]
                    && o.get("shapes").unwrap_or(&Value::Null)
                        == r.get("Shapes").unwrap_or(&Value::Null)
            })
            .unwrap_or_else(|| panic!("range {} missing", r["Range"]));
        for (a, b) in [
            ("Total Proj Time", "total_ns"),
            ("Total Range Time", "range_ns"),
            ("Range Instances", "instances"),
            ("Total GPU Ops", "gpu_ops"),
            ("Proj Min", "min_ns"),
            ("Proj Max", "max_ns"),
        ] {
            assert_eq!(i(&r[a]), i(&o[b]), "{}: {a}", r["Range"]);
        }
        for (a, b) in [
            ("Proj Med", "med_ns"),
            ("Proj Avg", "avg_ns"),
            ("Proj StdDev", "stddev_ns"),
        ] {
            assert!(close(f(&r[a]), f(&o[b])), "{}: {a}", r["Range"]);
        }
    }
}
