//! `instrument nsys report` against generated exports whose truth the generator planted
//! (tools/gen_nsys_sqlite.py writes `x.sqlite` and `x.expected.json`), and against the figures
//! `nsys stats` computes with its public report definitions (tools/nsys_stats_reference.py).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_instrument")
}

fn python() -> String {
    std::env::var("INSTRUMENT_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Generate an export; returns (sqlite path, expected truth, tempdir guard).
fn generate(args: &[&str]) -> (PathBuf, Value, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.sqlite");
    let status = Command::new(python())
        .arg(repo().join("tools/gen_nsys_sqlite.py"))
        .arg("--out")
        .arg(&out)
        .args(args)
        .status()
        .expect("python3 runs the generator");
    assert!(status.success(), "generator failed");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("x.expected.json")).unwrap())
            .unwrap();
    (out, expected, dir)
}

fn report_json(path: &Path) -> Value {
    let out = Command::new(bin())
        .args(["nsys", "report", "--json", "--top", "1000"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn process<'a>(rep: &'a Value, pid: &str) -> &'a Value {
    rep["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"].as_i64().map(|v| v.to_string()).as_deref() == Some(pid))
        .unwrap_or_else(|| panic!("process {pid} missing from the report"))
}

/// Every planted figure, process by process.
fn check_against_truth(rep: &Value, truth: &Value) {
    assert_eq!(rep["schema"], "instrument.nsys.report/1");
    let tprocs = truth["processes"].as_object().unwrap();
    assert_eq!(rep["processes"].as_array().unwrap().len(), tprocs.len());
    let mut total_kernels = 0;
    for (pid, t) in tprocs {
        let p = process(rep, pid);
        for k in [
            "kernel_ns",
            "kernel_count",
            "memcpy_ns",
            "memcpy_count",
            "memset_ns",
            "memset_count",
            "unattributed_ns",
        ] {
            assert_eq!(i(&p[k]), i(&t[k]), "process {pid}: {k}");
        }
        total_kernels += i(&t["kernel_count"]);
        for c in p["categories"].as_array().unwrap() {
            let name = c["category"].as_str().unwrap();
            let tc = &t["categories"][name];
            assert_eq!(i(&c["time_ns"]), i(&tc[0]), "process {pid}: {name} time");
            assert_eq!(i(&c["count"]), i(&tc[1]), "process {pid}: {name} count");
            assert!(close(
                f(&c["share"]),
                i(&tc[0]) as f64 / i(&t["kernel_ns"]) as f64
            ));
        }
        let comm_t = i(&t["categories"]["communication"][0]);
        assert_eq!(i(&p["communication"]["time_ns"]), comm_t);
        assert!(close(
            f(&p["communication"]["share_of_kernel_time"]),
            comm_t as f64 / i(&t["kernel_ns"]) as f64
        ));
        let ops = p["communication"]["by_op"].as_array().unwrap();
        assert_eq!(
            ops.len(),
            t["comm_ops"].as_object().unwrap().len(),
            "process {pid}: comm ops"
        );
        for o in ops {
            let to = &t["comm_ops"][o["op"].as_str().unwrap()];
            assert_eq!(i(&o["time_ns"]), i(&to[0]), "process {pid}: {}", o["op"]);
            assert_eq!(i(&o["count"]), i(&to[1]));
        }
        for k in ["communication_ns", "compute_ns", "hidden_ns", "exposed_ns"] {
            assert_eq!(
                i(&p["overlap"][k]),
                i(&t["overlap"][k]),
                "process {pid}: overlap {k}"
            );
        }
        // NVTX projection: the same set of range names, each figure as planted.
        let rows = p["nvtx"].as_array().unwrap();
        let tn = t["nvtx"].as_object().unwrap();
        assert_eq!(rows.len(), tn.len(), "process {pid}: NVTX range names");
        for r in rows {
            let key = format!(
                "{}|{}",
                r["nsys_name"].as_str().unwrap(),
                r["style"].as_str().unwrap()
            );
            let tr = tn
                .get(&key)
                .unwrap_or_else(|| panic!("process {pid}: unexpected range {key}"));
            for (ours, theirs) in [
                (&r["instances"], &tr["instances"]),
                (&r["cpu_ns"], &tr["cpu_ns"]),
                (&r["inclusive_ns"], &tr["inclusive_ns"]),
                (&r["exclusive_ns"], &tr["exclusive_ns"]),
                (&r["proj"]["instances"], &tr["proj_instances"]),
                (&r["proj"]["total_ns"], &tr["proj_total_ns"]),
                (&r["proj"]["range_ns"], &tr["proj_range_ns"]),
                (&r["proj"]["gpu_ops"], &tr["gpu_ops"]),
            ] {
                assert_eq!(i(ours), i(theirs), "process {pid}: range {key}: {r}");
            }
            let by_cat: i64 = r["inclusive_by_category"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| i(&c["time_ns"]))
                .sum();
            assert_eq!(by_cat, i(&r["inclusive_ns"]));
        }
    }
    assert_eq!(i(&rep["totals"]["kernel_count"]), total_kernels);
    assert_eq!(i(&truth["kernel_count"]), total_kernels);

    // Whole-export kernel summary.
    let ks = rep["kernel_summary"].as_array().unwrap();
    let tks = truth["kernel_summary"].as_object().unwrap();
    assert_eq!(ks.len(), tks.len());
    for k in ks {
        let t = &tks[k["name"].as_str().unwrap()];
        for (a, b) in [
            ("total_ns", "total"),
            ("count", "count"),
            ("min_ns", "min"),
            ("max_ns", "max"),
        ] {
            assert_eq!(i(&k[a]), i(&t[b]), "{}: {a}", k["name"]);
        }
        for (a, b) in [
            ("avg_ns", "avg"),
            ("med_ns", "med"),
            ("stddev_ns", "stddev"),
        ] {
            assert!(
                close(f(&k[a]), f(&t[b])),
                "{}: {a} {} vs {}",
                k["name"],
                k[a],
                t[b]
            );
        }
    }
    // Whole-export NVTX projection summary.
    let ps = rep["nvtx_gpu_proj_sum"].as_array().unwrap();
    let tps = truth["nvtx_gpu_proj_sum"].as_object().unwrap();
    assert_eq!(ps.len(), tps.len());
    for p in ps {
        let key = format!(
            "{}|{}",
            p["nsys_name"].as_str().unwrap(),
            p["style"].as_str().unwrap()
        );
        let t = &tps[&key];
        for (a, b) in [
            ("total_ns", "total"),
            ("instances", "count"),
            ("min_ns", "min"),
            ("max_ns", "max"),
            ("range_ns", "range_ns"),
            ("gpu_ops", "gpu_ops"),
        ] {
            assert_eq!(i(&p[a]), i(&t[b]), "{key}: {a}");
        }
        for (a, b) in [
            ("avg_ns", "avg"),
            ("med_ns", "med"),
            ("stddev_ns", "stddev"),
        ] {
            assert!(close(f(&p[a]), f(&t[b])), "{key}: {a}");
        }
    }
    // Notes: what the export contained.
    for (kind, count) in truth["notes"].as_object().unwrap() {
        let got = rep["notes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["kind"] == kind.as_str())
            .map(|n| i(&n["count"]))
            .unwrap_or(0);
        assert_eq!(got, i(count), "note {kind}");
    }
}

#[test]
fn mixed_workload_three_ranks_two_sharing_a_device() {
    let (db, truth, _d) = generate(&["--kernels", "3000", "--ranks", "3", "--seed", "1"]);
    let rep = report_json(&db);
    check_against_truth(&rep, &truth);
    // The edge cases the generator planted are present (so the checks above had teeth).
    for kind in [
        "cross_thread_ranges",
        "unclosed_ranges",
        "negative_timestamps",
        "unmatched_gpu_ops",
    ] {
        assert!(i(&truth["notes"][kind]) > 0, "fixture lacks {kind}");
    }
}

#[test]
fn mixed_workload_other_seed_two_ranks() {
    let (db, truth, _d) = generate(&["--kernels", "1500", "--ranks", "2", "--seed", "7"]);
    check_against_truth(&report_json(&db), &truth);
}

#[test]
fn edge_scenario_shared_device_and_restarting_correlation_ids() {
    let (db, truth, _d) = generate(&["--scenario", "edge"]);
    let rep = report_json(&db);
    check_against_truth(&rep, &truth);
    // The planted design (see build_edge): process 2002's all-gather overlaps only another
    // process's GEMM on the same device and stream ids, so none of it is hidden.
    let t = &truth["processes"]["2002"]["overlap"];
    assert_eq!(i(&t["hidden_ns"]), 0);
    assert!(i(&t["communication_ns"]) > 0);
}

#[test]
fn matches_nsys_stats_report_definitions() {
    let (db, _truth, _d) = generate(&["--kernels", "2000", "--ranks", "3", "--seed", "3"]);
    let out = Command::new(python())
        .arg(repo().join("tools/nsys_stats_reference.py"))
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rep = report_json(&db);

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
        assert!((f(&r["Time"]) - (f(&o["share"]) * 100.0)).abs() < 0.051);
    }

    let proj = reference["nvtx_gpu_proj_sum"].as_array().unwrap();
    let ours = rep["nvtx_gpu_proj_sum"].as_array().unwrap();
    assert_eq!(proj.len(), ours.len());
    for r in proj {
        let o = ours
            .iter()
            .find(|o| o["nsys_name"] == r["Range"] && o["style"] == r["Style"])
            .unwrap_or_else(|| panic!("range {} missing", r["Range"]));
        assert_eq!(
            i(&r["Total Proj Time"]),
            i(&o["total_ns"]),
            "{}",
            r["Range"]
        );
        assert_eq!(
            i(&r["Total Range Time"]),
            i(&o["range_ns"]),
            "{}",
            r["Range"]
        );
        assert_eq!(
            i(&r["Range Instances"]),
            i(&o["instances"]),
            "{}",
            r["Range"]
        );
        assert_eq!(i(&r["Total GPU Ops"]), i(&o["gpu_ops"]), "{}", r["Range"]);
        assert_eq!(i(&r["Proj Min"]), i(&o["min_ns"]));
        assert_eq!(i(&r["Proj Max"]), i(&o["max_ns"]));
        assert!(close(f(&r["Proj Med"]), f(&o["med_ns"])));
    }
}

#[test]
fn text_report_names_processes_categories_and_ranges() {
    let (db, truth, _d) = generate(&["--scenario", "edge"]);
    let out = Command::new(bin())
        .args(["nsys", "report"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for pid in truth["processes"].as_object().unwrap().keys() {
        assert!(text.contains(&format!("== process {pid} ")), "{text}");
    }
    let hidden = i(&truth["processes"]["2001"]["overlap"]["hidden_ns"]) as f64 / 1e6;
    assert!(text.contains(&format!(
        "{hidden:.3} ms of communication hidden under compute"
    )));
    assert!(text.contains(":diffusion") && text.contains(":trunk"));
}
