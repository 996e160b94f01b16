//! Opening a snapshot file: format sniffing (pickle or JSON) and one-line errors that
//! name the file and, for pickles, the byte offset.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::json::read_json;
use super::model::Snapshot;
use super::pickle::read_pickle;

/// Read a `.pickle`/`.pkl` (any protocol 0-5) or a `.json` snapshot. The format is
/// taken from the content: JSON starts with `{` or `[`, anything else is a pickle.
pub fn load(path: &Path, max_events: usize) -> Result<Snapshot, String> {
    let shown = path.display();
    let file = File::open(path).map_err(|e| format!("cannot open {shown}: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if meta.is_dir() {
        return Err(format!("{shown} is a directory"));
    }
    let total = meta.len();
    if total == 0 {
        return Err(format!("{shown}: empty file, not a snapshot"));
    }
    let mut r = BufReader::with_capacity(1 << 16, file);
    let head = r
        .fill_buf()
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    let first = head.iter().copied().find(|b| !b.is_ascii_whitespace());
    let is_json = matches!(first, Some(b'{') | Some(b'['));
    let pickle_err =
        |e: super::pickle::PickleError| format!("{shown}: byte {}: {}", e.offset, e.msg);
    if is_json {
        read_json(r, total, max_events)
            .map_err(|e| format!("{shown}: not a readable JSON snapshot: {e}"))
    } else {
        read_pickle(r, total, max_events).map_err(pickle_err)
    }
}

/// Read a snapshot from bytes (tests and the fuzz target).
pub fn load_bytes(bytes: &[u8], max_events: usize) -> Result<Snapshot, String> {
    let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
    if matches!(first, Some(b'{') | Some(b'[')) {
        read_json(bytes, bytes.len() as u64, max_events)
    } else {
        read_pickle(bytes, bytes.len() as u64, max_events)
            .map_err(|e| format!("byte {}: {}", e.offset, e.msg))
    }
}
