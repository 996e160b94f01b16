//! Opening a snapshot file: format sniffing (pickle or JSON) and one-line errors that
//! name the file and, for pickles, the byte offset.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::json::read_json;
use super::model::Snapshot;
use super::pickle::{read_pickle, read_pickle_split};

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
    } else if total >= SPLIT_FROM
        && std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
    {
        // A large pickle is mostly its trace: a helper thread reads the second half
        // of it while this one reads the first (see `pickle::read_pickle_split`).
        drop(r);
        read_pickle_split(path, total, max_events, SPLIT_AT)
            .map(|(snap, _)| snap)
            .map_err(pickle_err)
    } else {
        read_pickle(r, total, max_events).map_err(pickle_err)
    }
}

/// Files from this size are read with a helper thread.
pub const SPLIT_FROM: u64 = 64 << 20;
/// Where in the file the helper starts looking for trace entries.
pub const SPLIT_AT: f64 = 0.52;

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
