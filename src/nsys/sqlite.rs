//! Opening an Nsight Systems SQLite export: the checks that make a wrong file one clear line, and
//! small helpers for reading rows. The big tables are streamed by `ops` (GPU work, runtime calls)
//! and `nvtx` (ranges); the small ones by `meta`.
//!
//! Table names as `nsys export --type sqlite` writes them (2022.2 to 2026.2 seen): GPU work in
//! `CUPTI_ACTIVITY_KIND_KERNEL`, `_MEMCPY`, `_MEMSET` and `_GRAPH_TRACE` (one row per CUDA graph
//! launch when graphs are traced whole, the default `--cuda-graph-trace=graph`); the CUDA API
//! calls in `CUPTI_ACTIVITY_KIND_RUNTIME`; NVTX in `NVTX_EVENTS`; names in `StringIds`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, types::ValueRef};

use crate::nsys::error::{Error, Result};

pub const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
pub const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
pub const MEMSET: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
pub const GRAPH_TRACE: &str = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE";
pub const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
pub const NVTX_EVENTS: &str = "NVTX_EVENTS";

/// An open export and the tables it has.
pub struct Db {
    pub path: PathBuf,
    pub conn: Connection,
    tables: HashSet<String>,
}

/// How much of an export SQLite maps into memory (read-only): faster reads, and what peak RSS
/// counts on top of the report's own memory. Several exports read at once share it.
pub const MMAP_BYTES: i64 = 256 << 20;

/// A read-only connection tuned for one sequential pass.
pub fn open(path: &Path, mmap_bytes: i64) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| Error::input(path, format!("cannot open as SQLite: {e}")))?;
    // A modest page cache: the big tables are read once, front to back.
    let _ = conn.execute_batch(&format!(
        "PRAGMA cache_size=-16384; PRAGMA mmap_size={};",
        mmap_bytes.max(0)
    ));
    Ok(conn)
}

pub fn int(v: ValueRef<'_>) -> Option<i64> {
    match v {
        ValueRef::Integer(i) => Some(i),
        ValueRef::Real(f) => Some(f as i64),
        _ => None,
    }
}

pub fn text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
        _ => None,
    }
}

impl Db {
    pub fn has(&self, table: &str) -> bool {
        self.tables.contains(table)
    }

    /// Column names of a table, or `None` when the table does not exist.
    pub fn columns(&self, table: &str) -> Result<Option<Vec<String>>> {
        if !self.has(table) {
            return Ok(None);
        }
        let mut stmt = self
            .conn
            .prepare("SELECT name FROM pragma_table_info(?1)")?;
        let cols: Vec<String> = stmt
            .query_map([table], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(if cols.is_empty() { None } else { Some(cols) })
    }

    /// Fail with one line naming the file when `table` lacks one of `needed`.
    pub fn require(&self, table: &str, cols: &[String], needed: &[&str]) -> Result<()> {
        for col in needed {
            if !cols.iter().any(|c| c == col) {
                return Err(Error::input(
                    &self.path,
                    format!(
                        "table {table} has no column `{col}`; this does not look like an nsys SQLite export this tool can read"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A `StringIds` value.
    pub fn string(&self, id: i64) -> Result<Option<String>> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT value FROM StringIds WHERE id = ?1")?;
        let mut rows = stmt.query([id])?;
        Ok(match rows.next()? {
            Some(row) => text(row.get_ref(0)?),
            None => None,
        })
    }
}

/// The select expression for `col` when the table has it, `NULL` otherwise.
pub fn col_or_null(cols: &[String], col: &str) -> String {
    if cols.iter().any(|c| c == col) {
        format!("\"{col}\"")
    } else {
        "NULL".to_string()
    }
}

/// Check that `path` is an nsys SQLite export; returns it open. Whether it holds GPU work is
/// decided by the caller, which can say what the capture traced (`meta::Capture`).
pub fn open_export(path: &Path, mmap_bytes: i64) -> Result<Db> {
    if !path.exists() {
        return Err(Error::input(
            path,
            "no such file (expected an Nsight Systems SQLite export, e.g. report.sqlite)",
        ));
    }
    if path.is_dir() {
        return Err(Error::input(
            path,
            "is a directory (expected an Nsight Systems SQLite export file)",
        ));
    }
    let conn = open(path, mmap_bytes)?;
    let tables: HashSet<String> = match conn
        .prepare("SELECT name FROM sqlite_master WHERE type IN ('table','view')")
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<HashSet<_>>>()
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
            return Err(Error::input(
                path,
                format!("not a SQLite database; expected an Nsight Systems SQLite export{hint}"),
            ));
        }
    };
    if !tables.contains("StringIds") {
        return Err(Error::input(
            path,
            "not an Nsight Systems SQLite export (no StringIds table)",
        ));
    }
    Ok(Db {
        path: path.to_path_buf(),
        conn,
        tables,
    })
}
