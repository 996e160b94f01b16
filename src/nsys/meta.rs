//! The small tables of an export: which nsys wrote it, what the capture traced and how it traced
//! CUDA graphs, the processes, thread names, GPUs and the CUDA-ordinal-to-GPU mapping.
//!
//! Schema differences handled here:
//! - the export metadata table is `META_DATA_EXPORT` since nsys 2023.3 and `EXPORT_META_DATA`
//!   before (2022.2 writes `EXPORT_META_DATA` with `EXPORT_SCHEMA_VERSION` 2.9.1);
//! - `META_DATA_CAPTURE` names the graph trace mode `CUDA_GRAPH_TRACE_OPTIONS:MODE` (2026.2) or
//!   `PROCESS_0:CUDA_GRAPH_TRACE_OPTIONS:MODE` (2025.5), value `Graph` or `Node`;
//! - a kernel's `deviceId` is the CUDA ordinal the process saw (every rank is ordinal 0 under
//!   `CUDA_VISIBLE_DEVICES` binding); `TARGET_INFO_CUDA_DEVICE(gpuId, cudaId, pid)` maps it to the
//!   GPU (`TARGET_INFO_GPU.id`). Without that table the ordinal is taken as the GPU id.

use std::collections::HashMap;

use crate::nsys::error::Result;

use crate::nsys::hash::IntMap;
use crate::nsys::sqlite::{Db, int, text};

#[derive(Debug, Clone)]
pub struct ProcessInfo {
    pub global_pid: i64,
    pub pid: i64,
    pub name: Option<String>,
}

/// What `META_DATA_CAPTURE` says about the capture.
#[derive(Debug, Clone, Default)]
pub struct Capture {
    /// The `--trace` kinds recorded, in nsys's option names (`cuda`, `nvtx`, `osrt`, ...).
    pub traced: Vec<String>,
    /// `Graph` or `Node` (`--cuda-graph-trace`), when recorded.
    pub cuda_graph_trace: Option<String>,
    pub start_trigger: Option<String>,
}

#[derive(Debug, Default)]
pub struct Meta {
    pub export_schema_version: Option<String>,
    pub product_version: Option<String>,
    /// The metadata table it came from (`META_DATA_EXPORT` or `EXPORT_META_DATA`).
    pub metadata_table: Option<&'static str>,
    pub capture: Option<Capture>,
    pub processes: Vec<ProcessInfo>,
    /// `globalTid` -> thread name.
    pub thread_names: IntMap<i64, String>,
    /// GPU id -> name, from `TARGET_INFO_GPU`.
    pub gpus: Vec<(i64, String)>,
    /// (pid, CUDA ordinal) -> GPU id, from `TARGET_INFO_CUDA_DEVICE`.
    pub cuda_devices: HashMap<(i64, i64), i64>,
    /// When the nsys session started (`TARGET_INFO_SESSION_START_TIME.utcEpochNs`): the nodes
    /// of one run start together, two runs do not.
    pub session_start_utc_ns: Option<i64>,
}

impl Meta {
    /// The GPU a process's CUDA ordinal refers to.
    pub fn gpu_of(&self, pid: i64, cuda_ordinal: i64) -> i64 {
        self.cuda_devices
            .get(&(pid, cuda_ordinal))
            .copied()
            .unwrap_or(cuda_ordinal)
    }
}

/// nsys's `--trace` name for a `CAPTURE_EVENT_TYPE` value.
fn trace_name(event_type: &str) -> String {
    match event_type {
        "Cuda" => "cuda".into(),
        "NvtxEvents" | "Nvtx" => "nvtx".into(),
        "OSRuntime" => "osrt".into(),
        "Cublas" => "cublas".into(),
        "Cudnn" => "cudnn".into(),
        "Mpi" => "mpi".into(),
        other => other.to_ascii_lowercase(),
    }
}

fn read_pairs(db: &Db, table: &str) -> Result<Vec<(String, String)>> {
    let Some(cols) = db.columns(table)? else {
        return Ok(Vec::new());
    };
    if !cols.iter().any(|c| c == "name") || !cols.iter().any(|c| c == "value") {
        return Ok(Vec::new());
    }
    let mut stmt = db
        .conn
        .prepare(&format!("SELECT name, value FROM {table}"))?;
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        if let (Some(n), Some(v)) = (text(r.get_ref(0)?), text(r.get_ref(1)?)) {
            out.push((n, v));
        }
    }
    Ok(out)
}

pub fn read(db: &Db) -> Result<Meta> {
    let mut meta = Meta::default();
    for table in ["META_DATA_EXPORT", "EXPORT_META_DATA"] {
        let pairs = read_pairs(db, table)?;
        if pairs.is_empty() {
            continue;
        }
        meta.metadata_table = Some(if table == "META_DATA_EXPORT" {
            "META_DATA_EXPORT"
        } else {
            "EXPORT_META_DATA"
        });
        for (n, v) in pairs {
            match n.as_str() {
                "EXPORT_SCHEMA_VERSION" => meta.export_schema_version = Some(v),
                "EXPORT_PRODUCT_VERSION" => meta.product_version = Some(v),
                _ => {}
            }
        }
        break;
    }
    if db.has("META_DATA_CAPTURE") {
        let mut cap = Capture::default();
        for (n, v) in read_pairs(db, "META_DATA_CAPTURE")? {
            if n == "CAPTURE_EVENT_TYPE" {
                let t = trace_name(&v);
                if !cap.traced.contains(&t) {
                    cap.traced.push(t);
                }
            } else if n.ends_with("CUDA_GRAPH_TRACE_OPTIONS:MODE") {
                cap.cuda_graph_trace.get_or_insert(v);
            } else if n == "START_TRIGGER" {
                cap.start_trigger = Some(v);
            }
        }
        meta.capture = Some(cap);
    }

    if let Some(cols) = db.columns("PROCESSES")?
        && ["globalPid", "pid", "name"]
            .iter()
            .all(|c| cols.iter().any(|x| x == c))
    {
        let mut stmt = db
            .conn
            .prepare("SELECT globalPid, pid, name FROM PROCESSES")?;
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next()? {
            let Some(gpid) = int(row.get_ref(0)?) else {
                continue;
            };
            meta.processes.push(ProcessInfo {
                global_pid: gpid,
                pid: int(row.get_ref(1)?).unwrap_or_else(|| crate::nsys::ids::pid(gpid)),
                name: text(row.get_ref(2)?),
            });
        }
    }
    if let Some(cols) = db.columns("ThreadNames")?
        && cols.iter().any(|c| c == "nameId")
        && cols.iter().any(|c| c == "globalTid")
    {
        let mut stmt = db.conn.prepare(
            "SELECT t.globalTid, s.value FROM ThreadNames AS t JOIN StringIds AS s ON s.id = t.nameId",
        )?;
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next()? {
            if let (Some(t), Some(n)) = (int(row.get_ref(0)?), text(row.get_ref(1)?)) {
                meta.thread_names.insert(t, n);
            }
        }
    }
    if let Some(cols) = db.columns("TARGET_INFO_GPU")?
        && cols.iter().any(|c| c == "id")
        && cols.iter().any(|c| c == "name")
    {
        let mut stmt = db
            .conn
            .prepare("SELECT id, name FROM TARGET_INFO_GPU ORDER BY id")?;
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next()? {
            if let (Some(id), Some(name)) = (int(row.get_ref(0)?), text(row.get_ref(1)?))
                && !meta.gpus.iter().any(|(g, _)| *g == id)
            {
                meta.gpus.push((id, name));
            }
        }
    }
    if let Some(cols) = db.columns("TARGET_INFO_CUDA_DEVICE")?
        && ["gpuId", "cudaId", "pid"]
            .iter()
            .all(|c| cols.iter().any(|x| x == c))
    {
        let mut stmt = db
            .conn
            .prepare("SELECT pid, cudaId, gpuId FROM TARGET_INFO_CUDA_DEVICE")?;
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next()? {
            if let (Some(pid), Some(cuda), Some(gpu)) = (
                int(row.get_ref(0)?),
                int(row.get_ref(1)?),
                int(row.get_ref(2)?),
            ) {
                meta.cuda_devices.insert((pid, cuda), gpu);
            }
        }
    }
    if let Some(cols) = db.columns("TARGET_INFO_SESSION_START_TIME")?
        && cols.iter().any(|c| c == "utcEpochNs")
    {
        meta.session_start_utc_ns = db
            .conn
            .query_row(
                "SELECT min(utcEpochNs) FROM TARGET_INFO_SESSION_START_TIME",
                [],
                |r| r.get::<_, Option<i64>>(0),
            )
            .unwrap_or(None);
    }
    Ok(meta)
}
