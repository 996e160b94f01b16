//! `instrument nsys report` against generated exports whose truth the generator planted
//! (tools/gen_nsys_sqlite.py writes `x.sqlite` and `x.expected.json`, in the tables of a real
//! nsys release's schema), and against the figures `nsys stats` computes with its public report
//! definitions (tools/nsys_stats_reference.py, an independent SQL implementation).

use crate::nsys_common;

use std::process::Command;

use nsys_common::*;
use serde_json::Value;

fn comm_rows(rows: &Value, truth: &Value, what: &str) {
    let rows = rows.as_array().unwrap();
    assert_eq!(
        rows.len(),
        truth.as_object().unwrap().len(),
        "{what}: {rows:?} vs {truth}"
    );
    for o in rows {
        let to = &truth[o["op"].as_str().unwrap()];
        assert_eq!(i(&o["time_ns"]), i(&to[0]), "{what} {}", o["op"]);
        assert_eq!(i(&o["count"]), i(&to[1]), "{what} {}", o["op"]);
    }
}

/// Every planted figure, process by process.
fn check_against_truth(rep: &Value, truth: &Value) {
    let tprocs = truth["processes"].as_object().unwrap();
    assert_eq!(rep["processes"].as_array().unwrap().len(), tprocs.len());
    let mut total_kernels = 0;
    for (pid, t) in tprocs {
        let p = process(rep, pid);
        for k in [
            "gpu_ns",
            "kernel_ns",
            "kernel_count",
            "graph_ns",
            "graph_count",
            "memcpy_ns",
            "memcpy_count",
            "memset_ns",
            "memset_count",
            "unattributed_ns",
        ] {
            assert_eq!(i(&p[k]), i(&t[k]), "process {pid}: {k}");
        }
        assert_eq!(p["devices"], t["devices"], "process {pid}: GPUs");
        total_kernels += i(&t["kernel_count"]);
        let cats = p["categories"].as_array().unwrap();
        assert_eq!(cats.len(), t["categories"].as_object().unwrap().len());
        for c in cats {
            let name = c["category"].as_str().unwrap();
            let tc = &t["categories"][name];
            assert_eq!(i(&c["time_ns"]), i(&tc[0]), "process {pid}: {name} time");
            assert_eq!(i(&c["count"]), i(&tc[1]), "process {pid}: {name} count");
            assert!(close(
                f(&c["share"]),
                i(&tc[0]) as f64 / i(&t["gpu_ns"]) as f64
            ));
        }
        let comm_t = i(&t["categories"]["communication"][0]);
        assert_eq!(i(&p["communication"]["time_ns"]), comm_t);
        assert!(close(
            f(&p["communication"]["share_of_gpu_time"]),
            comm_t as f64 / i(&t["gpu_ns"]) as f64
        ));
        comm_rows(
            &p["communication"]["by_op"],
            &t["comm_ops"],
            &format!("process {pid} by_op"),
        );
        comm_rows(
            &p["communication"]["from_sendrecv"],
            &t["from_sendrecv"],
            &format!("process {pid} from_sendrecv"),
        );
        for k in ["communication_ns", "compute_ns", "hidden_ns", "exposed_ns"] {
            assert_eq!(
                i(&p["overlap"][k]),
                i(&t["overlap"][k]),
                "process {pid}: overlap {k}"
            );
        }
        // NVTX projection: the same set of (grouped) range names, each figure as planted.
        let rows = p["nvtx"].as_array().unwrap();
        let tn = t["nvtx"].as_object().unwrap();
        let keys: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{}|{}",
                    r["nsys_name"].as_str().unwrap(),
                    r["style"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            rows.len(),
            tn.len(),
            "process {pid}: NVTX range names {keys:?}"
        );
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
    assert_eq!(i(&rep["totals"]["graph_count"]), i(&truth["graph_count"]));
    assert_eq!(
        rep["capture"]["cuda_graph_trace"],
        truth["cuda_graph_trace"]
    );

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
fn mixed_workload_three_ranks_two_sharing_a_gpu() {
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
    // The per-step counter range folded into one row, the all-to-all named by its ranges.
    let p = &rep["processes"][0];
    let it = p["nvtx"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "iteration N")
        .unwrap();
    assert!(i(&it["folded_names"]) > 16);
    assert!(
        p["communication"]["from_sendrecv"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["op"] == "AllToAll")
    );
}

#[test]
fn mixed_workload_nsys_2022_schema_two_ranks() {
    // EXPORT_META_DATA, the 2022.2 column set; 13 steps: the counter stays per name.
    let (db, truth, _d) = generate(&[
        "--kernels",
        "1500",
        "--ranks",
        "2",
        "--seed",
        "7",
        "--nsys-version",
        "2022.2",
    ]);
    let rep = report_json(&db);
    check_against_truth(&rep, &truth);
    assert_eq!(rep["export"]["metadata_table"], "EXPORT_META_DATA");
    assert_eq!(rep["export"]["schema_version"], "2.9.1");
    assert!(
        rep["processes"][0]["nvtx"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "iteration 3")
    );
}

#[test]
fn edge_scenario_shared_gpu_and_restarting_correlation_ids() {
    let (db, truth, _d) = generate(&["--scenario", "edge", "--nsys-version", "2024.5"]);
    let rep = report_json(&db);
    check_against_truth(&rep, &truth);
    // The planted design (see build_edge): process 2002's all-gather overlaps only another
    // process's GEMM on the same GPU and stream ids, so none of it is hidden.
    let t = &truth["processes"]["2002"]["overlap"];
    assert_eq!(i(&t["hidden_ns"]), 0);
    assert!(i(&t["communication_ns"]) > 0);
}

#[test]
fn autograd_names_grouped_ranks_mapped_to_gpus() {
    let (db, truth, _d) = generate(&[
        "--scenario",
        "autograd",
        "--kernels",
        "2500",
        "--ranks",
        "2",
        "--seed",
        "4",
        "--nsys-version",
        "2025.5",
    ]);
    let rep = report_json(&db);
    check_against_truth(&rep, &truth);
    // Every rank ran on CUDA ordinal 0; TARGET_INFO_CUDA_DEVICE says which GPU that was.
    assert_eq!(rep["processes"][1]["devices"], serde_json::json!([1]));
    assert!(i(&rep["grouping"]["stripped_suffixes"]) > 1000);
    let names: Vec<&str> = rep["processes"][0]["nvtx"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"aten::mm")
            && names.contains(&"autograd::engine::evaluate_function: MmBackward0")
    );
    assert!(!names.iter().any(|n| n.contains("op_id")));
    check_against_reference(&db, &["--all"], &[]);
    check_against_reference(&db, &["--all", "--by-shape"], &["--by-shape"]);
}

#[test]
fn shuffled_nvtx_table_is_read_in_thread_order() {
    let (db, truth, _d) = generate(&[
        "--kernels",
        "1200",
        "--ranks",
        "2",
        "--seed",
        "9",
        "--shuffle-nvtx",
    ]);
    let rep = report_json(&db);
    check_against_truth(&rep, &truth);
    assert!(
        rep["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["kind"] == "nvtx_reordered")
    );
}

#[test]
fn cuda_graphs_traced_whole_count_as_gpu_work() {
    let (db, truth, _d) = generate(&["--scenario", "graphs", "--kernels", "120", "--ranks", "2"]);
    let rep = report_json(&db);
    check_against_truth(&rep, &truth);
    // The example: graphs 2.5x the kernel time, half of the kernels communication.
    let share = f(&rep["totals"]["communication_share"]);
    assert!((share - 5.0 / 35.0).abs() < 1e-9, "{share}");
    assert_eq!(rep["capture"]["cuda_graph_trace"], "graph");
    assert!(
        rep["capture"]["cuda_graphs"]
            .as_str()
            .unwrap()
            .contains("--cuda-graph-trace=node")
    );
    // The replays are projected onto the range that launched them.
    let row = rep["processes"][0]["nvtx"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "cuda_graph_replay")
        .unwrap();
    assert!(i(&row["inclusive_ns"]) > 0);
    check_against_reference(&db, &["--all"], &[]);
}

#[test]
fn cuda_graphs_traced_by_node_are_not_counted_twice() {
    let (db, truth, _d) = generate(&[
        "--scenario",
        "graphs-node",
        "--kernels",
        "60",
        "--ranks",
        "1",
    ]);
    let rep = report_json(&db);
    check_against_truth(&rep, &truth);
    assert_eq!(rep["capture"]["cuda_graph_trace"], "node");
    let note = rep["notes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "graph_rows_with_nodes")
        .unwrap();
    assert_eq!(i(&note["count"]), 1);
}

#[test]
fn graph_rows_without_a_kernel_table_get_a_report() {
    let (db, truth, _d) = generate(&["--scenario", "graphs-only", "--ranks", "2"]);
    let rep = report_json(&db);
    check_against_truth(&rep, &truth);
    assert_eq!(i(&rep["totals"]["kernel_count"]), 0);
    assert!(i(&rep["totals"]["graph_count"]) > 0);
}

#[test]
fn matches_nsys_stats_report_definitions() {
    let (db, _truth, _d) = generate(&["--kernels", "2000", "--ranks", "3", "--seed", "3"]);
    check_against_reference(&db, &["--all"], &[]);
}

#[test]
fn tables_are_bounded_and_the_rest_is_summed() {
    let (db, _truth, _d) = generate(&[
        "--scenario",
        "autograd",
        "--kernels",
        "2500",
        "--ranks",
        "2",
        "--seed",
        "5",
    ]);
    let all = report_json(&db);
    let top = report_json_with(&db, &["--top", "5"]);
    for (pa, pt) in all["processes"]
        .as_array()
        .unwrap()
        .iter()
        .zip(top["processes"].as_array().unwrap())
    {
        let rows = pt["nvtx"].as_array().unwrap();
        let every = pa["nvtx"].as_array().unwrap();
        assert_eq!(rows.len(), 5);
        assert!(every.len() > 5);
        let rest = &pt["nvtx_rest"];
        assert_eq!(i(&rest["rows"]) as usize + 5, every.len());
        for (k, rk) in [
            ("instances", "instances"),
            ("cpu_ns", "cpu_ns"),
            ("exclusive_ns", "exclusive_ns"),
        ] {
            let sum_all: i64 = every.iter().map(|r| i(&r[k])).sum();
            let sum_top: i64 = rows.iter().map(|r| i(&r[k])).sum();
            assert_eq!(sum_top + i(&rest[rk]), sum_all, "{k}");
        }
        assert_eq!(&rows[..], &every[..5]);
        let kr = &pt["kernels_rest"];
        let ksum: i64 = pa["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| i(&r["total_ns"]))
            .sum();
        let ktop: i64 = pt["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| i(&r["total_ns"]))
            .sum();
        assert_eq!(ktop + i(&kr["total_ns"]), ksum);
    }
    assert_eq!(top["kernel_summary"].as_array().unwrap().len(), 5);
    assert!(top["nvtx_gpu_proj_sum_rest"]["rows"].as_i64().unwrap() > 0);
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

/// Names that are all different (a framework numbering every call twice over) are folded while
/// reading once a family reaches 4,096 names, so memory stays bounded; the whole family ends in
/// one row. A few numbered names stay apart.
#[test]
fn unbounded_name_families_are_folded_while_reading() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("names.sqlite");
    let gtid: i64 = (1 << 48) | (77 << 24) | 77;
    let c = rusqlite::Connection::open(&p).unwrap();
    c.execute_batch(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
         INSERT INTO StringIds VALUES (1, 'nvjet_tst_64x8_64x16_4x1_v_bz_TNN'), (2, 'cudaLaunchKernel_v7000');
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL);
         CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL);
         CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);",
    )
    .unwrap();
    let gpid = gtid & !0xFF_FFFF;
    c.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (500, 900, 0, 7, 1, ?1, 1)",
        [gpid],
    )
    .unwrap();
    c.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (100, 200, ?1, 1, 2)",
        [gtid],
    )
    .unwrap();
    let tx = c.unchecked_transaction().unwrap();
    for i in 0..5000i64 {
        tx.execute(
            "INSERT INTO NVTX_EVENTS VALUES (?1, ?2, 59, ?3, ?4, NULL, NULL, 0)",
            rusqlite::params![
                1000 + 10 * i,
                1005 + 10 * i,
                format!("call{i}.part{}", i % 7),
                gtid
            ],
        )
        .unwrap();
    }
    for i in 0..3i64 {
        tx.execute(
            "INSERT INTO NVTX_EVENTS VALUES (?1, ?2, 59, ?3, ?4, NULL, NULL, 0)",
            rusqlite::params![
                100_000 + 10 * i,
                100_005 + 10 * i,
                format!("iteration {i}"),
                gtid
            ],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    drop(c);
    let rep = report_json(&p);
    let rows = rep["processes"][0]["nvtx"].as_array().unwrap();
    let fam = rows
        .iter()
        .find(|r| r["name"] == "callN.partN")
        .expect("the family's row");
    assert_eq!(i(&fam["folded_names"]), 5000);
    assert_eq!(i(&fam["instances"]), 5000);
    assert_eq!(
        rows.len(),
        1 + 3,
        "{:?}",
        rows.iter().map(|r| &r["name"]).collect::<Vec<_>>()
    );
    assert!(rows.iter().any(|r| r["name"] == "iteration 2"));
}
