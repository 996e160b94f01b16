//! Opening an Nsight Systems SQLite export and loading what the report reads.
//!
//! Tables (names and columns as `nsys export --type sqlite` writes them):
//! - `CUPTI_ACTIVITY_KIND_KERNEL` (required): `start`, `end`, `deviceId`, `streamId`,
//!   `correlationId`, `globalPid`, `demangledName` (falls back to `shortName`), ids into `StringIds`;
//! - `CUPTI_ACTIVITY_KIND_MEMCPY`, `CUPTI_ACTIVITY_KIND_MEMSET` (optional): the same keys, no name;
//! - `CUPTI_ACTIVITY_KIND_RUNTIME` (optional): `start`, `end`, `globalTid`, `correlationId` — the
//!   CUDA API call that launched each GPU operation; correlation ids restart in every process, so
//!   the join key is `(globalPid, correlationId)`;
//! - `NVTX_EVENTS` (optional): `start`, `end`, `eventType`, `globalTid`, `endGlobalTid`, `textId`,
//!   `text`, `domainId`;
//! - `StringIds` (required), `PROCESSES`, `ThreadNames`, `TARGET_INFO_GPU`, `META_DATA_EXPORT`.
//!
//! The big tables are read on two threads (kernels on one, runtime calls on the other), each with
//! its own read-only connection.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags, types::ValueRef};

use crate::exit::user_error;
use crate::nsys::hash::IntMap;

/// NVTX `eventType` values (from the nsys export's `ENUM_NSYS_EVENT_TYPE`).
pub const NVTX_PUSHPOP_RANGE: i64 = 59;
pub const NVTX_STARTEND_RANGE: i64 = 60;
pub const NVTXT_PUSHPOP_RANGE: i64 = 70;
pub const NVTXT_STARTEND_RANGE: i64 = 71;
pub const NVTX_DOMAIN_CREATE: i64 = 75;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    Kernel,
    Memcpy,
    Memset,
}

/// One GPU operation: a kernel, a memcpy or a memset.
#[derive(Debug, Clone, Copy)]
pub struct GpuOp {
    pub start: i64,
    pub end: i64,
    pub global_pid: i64,
    pub correlation_id: i64,
    pub device: i64,
    pub stream: i64,
    /// `StringIds` id of the (demangled) kernel name; -1 for memory operations.
    pub name: i64,
    pub kind: OpKind,
}

/// One CUDA runtime API call (`CUPTI_ACTIVITY_KIND_RUNTIME`).
#[derive(Debug, Clone, Copy)]
pub struct RuntimeCall {
    pub start: i64,
    pub end: i64,
    pub global_tid: i64,
    pub correlation_id: i64,
}

/// One NVTX range or domain-creation event.
#[derive(Debug, Clone)]
pub struct NvtxEvent {
    pub start: i64,
    pub end: Option<i64>,
    pub event_type: i64,
    pub global_tid: i64,
    pub end_global_tid: Option<i64>,
    /// Index into `Export::nvtx_texts`: the name via `textId` or, failing that, `text`.
    pub text: u32,
    pub domain_id: i64,
}

#[derive(Debug, Clone)]
pub struct ProcessInfo {
    pub global_pid: i64,
    pub pid: i64,
    pub name: Option<String>,
}

/// Everything the report needs from one export.
#[derive(Debug, Default)]
pub struct Export {
    pub path: PathBuf,
    pub ops: Vec<GpuOp>,
    pub runtime: Vec<RuntimeCall>,
    pub nvtx: Vec<NvtxEvent>,
    pub nvtx_texts: Vec<String>,
    /// Resolved `StringIds` values for every id the loaded rows refer to.
    pub strings: IntMap<i64, String>,
    pub processes: Vec<ProcessInfo>,
    /// `globalTid` -> thread name.
    pub thread_names: IntMap<i64, String>,
    /// GPU id -> name, from `TARGET_INFO_GPU`.
    pub gpus: Vec<(i64, String)>,
    pub has_runtime: bool,
    pub has_nvtx: bool,
    pub schema_version: Option<String>,
}

impl Export {
    pub fn string(&self, id: i64) -> Option<&str> {
        self.strings.get(&id).map(|s| s.as_str())
    }
}

fn open(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| user_error(format!("{}: cannot open as SQLite: {e}", path.display())))?;
    // Read-only tuning: a bigger page cache and memory-mapped reads.
    let _ = conn.execute_batch("PRAGMA cache_size=-65536; PRAGMA mmap_size=1073741824;");
    Ok(conn)
}

/// Column names of a table, or `None` when the table does not exist.
fn columns(conn: &Connection, table: &str) -> Result<Option<Vec<String>>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let cols: Vec<String> = stmt
        .query_map([table], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(if cols.is_empty() { None } else { Some(cols) })
}

fn int(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        ValueRef::Real(f) => Some(f as i64),
        _ => None,
    }
}

/// The select expression for `col` when the table has it, `NULL` otherwise.
fn col_or_null(cols: &[String], col: &str) -> String {
    if cols.iter().any(|c| c == col) {
        format!("\"{col}\"")
    } else {
        "NULL".to_string()
    }
}

fn require(path: &Path, table: &str, cols: &[String], needed: &[&str]) -> Result<()> {
    for col in needed {
        if !cols.iter().any(|c| c == col) {
            return Err(user_error(format!(
                "{}: table {table} has no column `{col}`; this does not look like an nsys SQLite export this tool can read",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Check that `path` is an nsys SQLite export with kernel data; returns the open connection.
pub fn open_export(path: &Path) -> Result<Connection> {
    if !path.exists() {
        return Err(user_error(format!(
            "{}: no such file (expected an Nsight Systems SQLite export, e.g. report.sqlite)",
            path.display()
        )));
    }
    if path.is_dir() {
        return Err(user_error(format!(
            "{}: is a directory (expected an Nsight Systems SQLite export file)",
            path.display()
        )));
    }
    let conn = open(path)?;
    let tables: Vec<String> = match conn
        .prepare("SELECT name FROM sqlite_master WHERE type IN ('table','view')")
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        }) {
        Ok(t) => t,
        Err(_) => {
            let hint = if path
                .extension()
                .is_some_and(|e| e == "nsys-rep" || e == "qdrep")
            {
                " (this is an nsys report; convert it first: nsys export --type sqlite FILE)"
            } else {
                ""
            };
            return Err(user_error(format!(
                "{}: not a SQLite database; expected an Nsight Systems SQLite export{hint}",
                path.display()
            )));
        }
    };
    if !tables.iter().any(|t| t == "StringIds") {
        return Err(user_error(format!(
            "{}: not an Nsight Systems SQLite export (no StringIds table)",
            path.display()
        )));
    }
    if !tables.iter().any(|t| t == "CUPTI_ACTIVITY_KIND_KERNEL") {
        return Err(user_error(format!(
            "{}: no CUPTI_ACTIVITY_KIND_KERNEL table, so the profile holds no CUDA kernel data (profile with --trace cuda)",
            path.display()
        )));
    }
    Ok(conn)
}

fn load_ops(
    path: &Path,
    conn: &Connection,
    table: &str,
    kind: OpKind,
    out: &mut Vec<GpuOp>,
) -> Result<bool> {
    let Some(cols) = columns(conn, table)? else {
        return Ok(false);
    };
    require(
        path,
        table,
        &cols,
        &[
            "start",
            "end",
            "deviceId",
            "streamId",
            "correlationId",
            "globalPid",
        ],
    )?;
    let name = if kind == OpKind::Kernel {
        if cols.iter().any(|c| c == "demangledName") {
            "demangledName"
        } else if cols.iter().any(|c| c == "shortName") {
            "shortName"
        } else {
            return Err(user_error(format!(
                "{}: table {table} has neither `demangledName` nor `shortName`",
                path.display()
            )));
        }
    } else {
        "-1"
    };
    let sql = format!(
        "SELECT start, end, globalPid, correlationId, deviceId, streamId, {name} FROM {table}"
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.raw_query();
    while let Some(row) = rows.next()? {
        let (Some(start), Some(end)) = (int(row.get_ref(0)?), int(row.get_ref(1)?)) else {
            continue;
        };
        out.push(GpuOp {
            start,
            end,
            global_pid: int(row.get_ref(2)?).unwrap_or(0),
            correlation_id: int(row.get_ref(3)?).unwrap_or(-1),
            device: int(row.get_ref(4)?).unwrap_or(-1),
            stream: int(row.get_ref(5)?).unwrap_or(-1),
            name: int(row.get_ref(6)?).unwrap_or(-1),
            kind,
        });
    }
    Ok(true)
}

fn load_runtime(path: &Path, conn: &Connection, out: &mut Vec<RuntimeCall>) -> Result<bool> {
    let table = "CUPTI_ACTIVITY_KIND_RUNTIME";
    let Some(cols) = columns(conn, table)? else {
        return Ok(false);
    };
    require(
        path,
        table,
        &cols,
        &["start", "end", "globalTid", "correlationId"],
    )?;
    let mut stmt = conn
        .prepare("SELECT start, end, globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME")?;
    let mut rows = stmt.raw_query();
    while let Some(row) = rows.next()? {
        let (Some(start), Some(end), Some(gtid), Some(corr)) = (
            int(row.get_ref(0)?),
            int(row.get_ref(1)?),
            int(row.get_ref(2)?),
            int(row.get_ref(3)?),
        ) else {
            continue;
        };
        out.push(RuntimeCall {
            start,
            end,
            global_tid: gtid,
            correlation_id: corr,
        });
    }
    Ok(true)
}

struct NvtxRaw {
    events: Vec<NvtxEvent>,
    /// For each event, the textId it referred to (resolved after `StringIds` are read).
    text_ids: Vec<Option<i64>>,
    texts: Vec<String>,
}

fn load_nvtx(path: &Path, conn: &Connection) -> Result<Option<NvtxRaw>> {
    let table = "NVTX_EVENTS";
    let Some(cols) = columns(conn, table)? else {
        return Ok(None);
    };
    require(path, table, &cols, &["start", "end", "eventType"])?;
    let sql = format!(
        "SELECT start, end, eventType, {}, {}, {}, {}, {} FROM NVTX_EVENTS WHERE eventType IN ({}, {}, {}, {}, {})",
        col_or_null(&cols, "globalTid"),
        col_or_null(&cols, "endGlobalTid"),
        col_or_null(&cols, "textId"),
        col_or_null(&cols, "text"),
        col_or_null(&cols, "domainId"),
        NVTX_PUSHPOP_RANGE,
        NVTX_STARTEND_RANGE,
        NVTXT_PUSHPOP_RANGE,
        NVTXT_STARTEND_RANGE,
        NVTX_DOMAIN_CREATE,
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.raw_query();
    let mut raw = NvtxRaw {
        events: Vec::new(),
        text_ids: Vec::new(),
        texts: vec![String::new()],
    };
    let mut by_text: HashMap<String, u32> = HashMap::new();
    while let Some(row) = rows.next()? {
        let Some(start) = int(row.get_ref(0)?) else {
            continue;
        };
        let text_id = int(row.get_ref(5)?);
        let text = match row.get_ref(6)? {
            ValueRef::Text(t) => {
                let s = String::from_utf8_lossy(t);
                match by_text.get(s.as_ref()) {
                    Some(&i) => i,
                    None => {
                        let i = raw.texts.len() as u32;
                        raw.texts.push(s.to_string());
                        by_text.insert(s.into_owned(), i);
                        i
                    }
                }
            }
            _ => 0,
        };
        raw.events.push(NvtxEvent {
            start,
            end: int(row.get_ref(1)?),
            event_type: int(row.get_ref(2)?).unwrap_or(0),
            global_tid: int(row.get_ref(3)?).unwrap_or(0),
            end_global_tid: int(row.get_ref(4)?),
            text,
            domain_id: int(row.get_ref(7)?).unwrap_or(0),
        });
        raw.text_ids.push(text_id);
    }
    Ok(Some(raw))
}

/// Resolve the given `StringIds` ids (one indexed lookup each; the table can be large).
fn resolve_strings(
    conn: &Connection,
    ids: impl IntoIterator<Item = i64>,
    out: &mut IntMap<i64, String>,
) -> Result<()> {
    let mut stmt = conn.prepare("SELECT value FROM StringIds WHERE id = ?1")?;
    for id in ids {
        if out.contains_key(&id) {
            continue;
        }
        let mut rows = stmt.query([id])?;
        if let Some(row) = rows.next()?
            && let ValueRef::Text(t) = row.get_ref(0)?
        {
            out.insert(id, String::from_utf8_lossy(t).into_owned());
        }
    }
    Ok(())
}

/// Load an export. Errors a user can cause come back as `exit::UserError`s.
pub fn load(path: &Path) -> Result<Export> {
    let conn = open_export(path)?;
    let mut export = Export {
        path: path.to_path_buf(),
        ..Default::default()
    };

    // Kernels on a second thread, runtime calls on a third, the rest here.
    let (kernels, runtime) = std::thread::scope(|s| {
        let k = s.spawn(|| -> Result<Vec<GpuOp>> {
            let c = open(path)?;
            let mut ops = Vec::new();
            load_ops(
                path,
                &c,
                "CUPTI_ACTIVITY_KIND_KERNEL",
                OpKind::Kernel,
                &mut ops,
            )?;
            Ok(ops)
        });
        let r = s.spawn(|| -> Result<(bool, Vec<RuntimeCall>)> {
            let c = open(path)?;
            let mut calls = Vec::new();
            let has = load_runtime(path, &c, &mut calls)?;
            Ok((has, calls))
        });
        (k.join(), r.join())
    });
    let mut ops = kernels.map_err(|_| anyhow::anyhow!("kernel loader panicked"))??;
    let (has_runtime, runtime) =
        runtime.map_err(|_| anyhow::anyhow!("runtime loader panicked"))??;
    load_ops(
        path,
        &conn,
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        OpKind::Memcpy,
        &mut ops,
    )?;
    load_ops(
        path,
        &conn,
        "CUPTI_ACTIVITY_KIND_MEMSET",
        OpKind::Memset,
        &mut ops,
    )?;
    export.ops = ops;
    export.runtime = runtime;
    export.has_runtime = has_runtime;

    let nvtx = load_nvtx(path, &conn)?;

    // Names: kernel name ids, NVTX text ids, thread name ids.
    let mut ids: Vec<i64> = Vec::new();
    {
        let mut seen: IntMap<i64, ()> = IntMap::default();
        for op in &export.ops {
            if op.name >= 0 && seen.insert(op.name, ()).is_none() {
                ids.push(op.name);
            }
        }
        if let Some(raw) = &nvtx {
            for id in raw.text_ids.iter().flatten() {
                if seen.insert(*id, ()).is_none() {
                    ids.push(*id);
                }
            }
        }
    }
    let mut thread_rows: Vec<(i64, i64)> = Vec::new();
    if let Some(cols) = columns(&conn, "ThreadNames")?
        && cols.iter().any(|c| c == "nameId")
        && cols.iter().any(|c| c == "globalTid")
    {
        let mut stmt = conn.prepare("SELECT nameId, globalTid FROM ThreadNames")?;
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next()? {
            if let (Some(n), Some(t)) = (int(row.get_ref(0)?), int(row.get_ref(1)?)) {
                thread_rows.push((n, t));
                ids.push(n);
            }
        }
    }
    resolve_strings(&conn, ids, &mut export.strings).context("reading StringIds")?;
    for (name_id, gtid) in thread_rows {
        if let Some(name) = export.strings.get(&name_id) {
            export.thread_names.insert(gtid, name.clone());
        }
    }

    if let Some(mut raw) = nvtx {
        // A registered string (textId) wins over inline text, as in nsys's own reports.
        let mut by_id: IntMap<i64, u32> = IntMap::default();
        for (ev, tid) in raw.events.iter_mut().zip(raw.text_ids.iter()) {
            if let Some(id) = tid
                && let Some(s) = export.strings.get(id)
            {
                let idx = *by_id.entry(*id).or_insert_with(|| {
                    raw.texts.push(s.clone());
                    (raw.texts.len() - 1) as u32
                });
                ev.text = idx;
            }
        }
        export.nvtx = raw.events;
        export.nvtx_texts = raw.texts;
        export.has_nvtx = true;
    }

    if let Some(cols) = columns(&conn, "PROCESSES")?
        && ["globalPid", "pid", "name"]
            .iter()
            .all(|c| cols.iter().any(|x| x == c))
    {
        let mut stmt = conn.prepare("SELECT globalPid, pid, name FROM PROCESSES")?;
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next()? {
            let Some(gpid) = int(row.get_ref(0)?) else {
                continue;
            };
            let name = match row.get_ref(2)? {
                ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
                _ => None,
            };
            export.processes.push(ProcessInfo {
                global_pid: gpid,
                pid: int(row.get_ref(1)?).unwrap_or_else(|| crate::nsys::ids::pid(gpid)),
                name,
            });
        }
    }
    if let Some(cols) = columns(&conn, "TARGET_INFO_GPU")?
        && cols.iter().any(|c| c == "id")
        && cols.iter().any(|c| c == "name")
    {
        let mut stmt = conn.prepare("SELECT id, name FROM TARGET_INFO_GPU ORDER BY id")?;
        let rows = stmt.query_map([], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?))
        })?;
        for row in rows {
            let (id, name) = row?;
            if let Some(name) = name {
                export.gpus.push((id, name));
            }
        }
    }
    if columns(&conn, "META_DATA_EXPORT")?.is_some() {
        export.schema_version = conn
            .query_row(
                "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'",
                [],
                |r| r.get::<_, String>(0),
            )
            .ok();
    }
    Ok(export)
}
