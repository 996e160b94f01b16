//! `instrument nsys report` on rows that real nsys releases wrote (fixtures/nsys/real/, cut from
//! exports public repositories committed; see its README for sources and licences): every
//! export-wide figure against tools/nsys_stats_reference.py, and facts read off the rows.

use crate::nsys_common;

use std::path::PathBuf;

use nsys_common::*;
use serde_json::Value;

/// Load one SQL fixture into a fresh SQLite file.
fn load(name: &str) -> (PathBuf, tempfile::TempDir) {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join(format!("{name}.sqlite"));
    let sql = std::fs::read_to_string(
        repo()
            .join("fixtures/nsys/real")
            .join(format!("{name}.sql")),
    )
    .unwrap();
    // The CREATE TABLE text names tables the cut left out (REFERENCES CUDA_CALLCHAINS ...).
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch("PRAGMA foreign_keys = OFF;").unwrap();
    c.execute_batch(&sql).unwrap();
    (db, d)
}

fn rows<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v[key].as_array().unwrap()
}

/// nsys 2026.2, two ranks of a FastVideo run with `--pytorch=autograd-nvtx`: the ranges carry
/// PyTorch's op_id/seq suffixes, and the sequence-parallel all-to-all runs as NCCL SendRecv
/// inside `c10d::alltoall_base_` / `nccl:all_to_all`.
#[test]
fn nsys_2026_autograd_ranges_and_an_all_to_all_run_as_sendrecv() {
    let (db, _d) = load("nsys-2026.2-fastvideo-alltoall");
    check_against_reference(&db, &["--all"], &[]);
    let rep = report_json(&db);
    assert_eq!(rep["export"]["nsys_version"], "2026.2.1.210");
    assert_eq!(rep["capture"]["cuda_graph_trace"], "graph");
    assert!(i(&rep["grouping"]["stripped_suffixes"]) > 300);
    for p in rows(&rep, "processes") {
        let names: Vec<&str> = rows(p, "nvtx")
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(
            !names
                .iter()
                .any(|n| n.contains("op_id") || n.contains("seq =")),
            "{names:?}"
        );
        for n in [
            "aten::copy_",
            "c10d::alltoall_base_",
            "nccl:all_to_all",
            "ncclGroupEnd",
        ] {
            assert!(names.contains(&n), "{n} in {names:?}");
        }
        // Every SendRecv kernel of the window ran inside the all-to-all's ranges.
        let comm = &p["communication"];
        assert_eq!(rows(comm, "by_op").len(), 1);
        assert_eq!(comm["by_op"][0]["op"], "AllToAll");
        assert_eq!(comm["from_sendrecv"][0]["count"], comm["by_op"][0]["count"]);
        let a2a = rows(p, "nvtx")
            .iter()
            .find(|r| r["name"] == "c10d::alltoall_base_")
            .unwrap();
        assert_eq!(a2a["collective"], "AllToAll");
    }
    // Two ranks, one GPU each.
    let devices: Vec<&Value> = rows(&rep, "processes")
        .iter()
        .map(|p| &p["devices"])
        .collect();
    assert_eq!(devices, [&serde_json::json!([0]), &serde_json::json!([1])]);
}

/// nsys 2025.5, `--cuda-graph-trace=graph`: two graph launches are rows of
/// CUPTI_ACTIVITY_KIND_GRAPH_TRACE (1728 and 1376 ns), joined to their cudaGraphLaunch calls.
#[test]
fn nsys_2025_cuda_graphs_traced_whole() {
    let (db, _d) = load("nsys-2025.5-cuda-graphs");
    check_against_reference(&db, &["--all"], &[]);
    let rep = report_json(&db);
    assert_eq!(rep["capture"]["cuda_graph_trace"], "graph");
    assert_eq!(
        rep["capture"]["traced"],
        serde_json::json!(["osrt", "nvtx", "cuda"])
    );
    let t = &rep["totals"];
    assert_eq!((i(&t["graph_count"]), i(&t["graph_ns"])), (2, 1728 + 1376));
    assert_eq!(i(&t["kernel_count"]), 3);
    assert_eq!(i(&t["gpu_ns"]), i(&t["kernel_ns"]) + 3104);
    let graph = rows(t, "categories")
        .iter()
        .find(|c| c["category"] == "cuda_graph")
        .unwrap();
    assert_eq!(i(&graph["count"]), 2);
    assert_eq!(rep["gpus"][0]["name"], "NVIDIA GeForce RTX 3060");
    assert_eq!(rep["processes"][0]["devices"], serde_json::json!([0]));
}

/// nsys 2022.2: the metadata table is EXPORT_META_DATA; MPI's NVTX ranges use registered
/// strings (textId) in the `MPI` domain.
#[test]
fn nsys_2022_export_metadata_and_a_named_domain() {
    let (db, _d) = load("nsys-2022.2-saxpy-mpi");
    check_against_reference(&db, &["--all"], &[]);
    let rep = report_json(&db);
    assert_eq!(rep["export"]["metadata_table"], "EXPORT_META_DATA");
    assert_eq!(rep["export"]["nsys_version"], "2022.2.1.31");
    assert_eq!(rep["export"]["schema_version"], "2.9.1");
    let names: Vec<&str> = rows(&rep["processes"][0], "nvtx")
        .iter()
        .map(|r| r["nsys_name"].as_str().unwrap())
        .collect();
    for n in ["MPI:MPI_Init", "MPI:MPI_Send", ":saxpy"] {
        assert!(names.contains(&n), "{n} in {names:?}");
    }
    assert_eq!(i(&rep["totals"]["kernel_count"]), 5);
}

/// Exports of programs that are not pithtrain: the report is the same as before, each process
/// has no rank and no mesh, its window is the whole capture, and one line says why.
#[test]
fn real_exports_without_a_setup_range_say_the_mesh_is_unknown_in_one_line() {
    for name in [
        "nsys-2026.2-fastvideo-alltoall",
        "nsys-2025.5-cuda-graphs",
        "nsys-2022.2-saxpy-mpi",
    ] {
        let (db, _d) = load(name);
        let rep = report_json(&db);
        let procs = rows(&rep, "processes");
        for p in procs {
            assert!(p["rank"].is_null() && p["mesh"].is_null(), "{name}");
            assert_eq!(p["window"]["pick"], "all", "{name}");
            assert!(p["mesh_unknown"].as_str().is_some(), "{name}");
            // The whole capture's figures are there, with no stage (no stage ranges).
            assert!(rows(&p["whole_capture"], "stages").is_empty(), "{name}");
        }
        let mesh: Vec<&Value> = rows(&rep, "notes")
            .iter()
            .filter(|n| n["kind"] == "mesh_unknown")
            .collect();
        assert_eq!(mesh.len(), 1, "{name}");
        assert_eq!(i(&mesh[0]["count"]), procs.len() as i64);
        let out = std::process::Command::new(bin())
            .args(["nsys", "report"])
            .arg(&db)
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("mesh unknown"))
            .collect();
        assert_eq!(lines.len(), 1, "{name}: {lines:?}");
        assert!(lines[0].contains(&format!("for {n} of {n} process(es)", n = procs.len())));
        assert!(
            !text.contains("== across ranks"),
            "{name}: nothing to put side by side"
        );
    }
}

/// Every line of the text report of each real export fits 100 columns (a kernel's name and a
/// table row wrapped, never past the edge), `--all` included.
#[test]
fn every_text_line_fits_100_columns() {
    for name in [
        "nsys-2022.2-saxpy-mpi",
        "nsys-2025.5-cuda-graphs",
        "nsys-2026.2-fastvideo-alltoall",
    ] {
        let (db, _d) = load(name);
        for extra in [&[][..], &["--all"][..]] {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_instrument"))
                .args(["nsys", "report"])
                .arg(&db)
                .args(extra)
                .output()
                .unwrap();
            assert!(out.status.success(), "{name}");
            let text = String::from_utf8_lossy(&out.stdout);
            let wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > 100).collect();
            assert!(wide.is_empty(), "{name} {extra:?}: {wide:?}");
        }
    }
}
