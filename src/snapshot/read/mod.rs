//! Reading a snapshot file: format sniffing (pickle or JSON), the pickle machine with
//! full memo semantics, and one-line errors that name the file and, for pickles, the
//! byte offset.
//!
//! - `input`   — the bounded input buffer;
//! - `vm`      — the pickle machine (never executes anything);
//! - `fast`    — the fast path for trace entries (the scanner);
//! - `shape`   — learned entry shapes, the fastest path;
//! - `split`   — a helper thread for the second half of large files;
//! - `value`, `memo` — packed values and the memo;
//! - `builder` — folds containers into the typed model as they complete;
//! - `json`    — the same dict as JSON, streamed through serde.

pub mod builder;
pub mod fast;
pub mod input;
pub mod json;
pub mod memo;
pub mod shape;
pub mod split;
pub mod value;
pub mod vm;

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::error::SnapshotError;
use super::model::Snapshot;
use json::{JsonError, read_json};
pub use vm::read_pickle_with;

/// Why a pickle could not be read: a message and the byte offset of the opcode.
#[derive(Debug)]
pub struct PickleError {
    pub offset: u64,
    pub msg: String,
    /// The system's error, when a read or an open failed (its class decides the exit code);
    /// none when the bytes are not a snapshot.
    pub io: Option<std::io::ErrorKind>,
    /// The file shares records; reading it again keeping every memoized object works.
    pub retain: bool,
}

/// Files from this size are read with a helper thread.
pub const SPLIT_FROM: u64 = 64 << 20;
/// Where in the file the helper starts looking for trace entries.
pub const SPLIT_AT: f64 = 0.43;

/// Read a large snapshot file with a helper thread that reads the second half of
/// its trace (from about `at` of the file) at the same time. Returns the snapshot and
/// how many trace entries came from the helper.
pub fn read_pickle_split(
    path: &Path,
    total: u64,
    max_events: usize,
    at: f64,
) -> Result<(Snapshot, u64), PickleError> {
    let file = File::open(path).map_err(|e| PickleError {
        offset: 0,
        msg: format!("cannot open: {e}"),
        io: Some(e.kind()),
        retain: false,
    })?;
    std::thread::scope(|s| {
        let mut sp = split::spawn(s, path, total, max_events, at);
        let r = vm::read_with(file, total, max_events, true, false, Some(&mut sp));
        let taken = sp.finish();
        r.map(|mut snap| {
            snap.read_ahead_events = taken;
            (snap, taken)
        })
    })
}

/// Read a pickle: lean (records folded and dropped) first; again keeping every
/// memoized object if the file shares records.
fn read_pickle_file(path: &Path, total: u64, max_events: usize) -> Result<Snapshot, PickleError> {
    let open = || {
        File::open(path).map_err(|e| PickleError {
            offset: 0,
            msg: format!("cannot open: {e}"),
            io: Some(e.kind()),
            retain: false,
        })
    };
    let lean = if total >= SPLIT_FROM
        && std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
    {
        // A large pickle is mostly its trace: a helper thread reads the second half.
        read_pickle_split(path, total, max_events, SPLIT_AT).map(|(s, _)| s)
    } else {
        read_pickle_with(
            BufReader::with_capacity(1 << 16, open()?),
            total,
            max_events,
            true,
            false,
        )
    };
    match lean {
        Err(e) if e.retain => {
            // A test build's diagnostic only (the test-hooks feature), never a user's.
            if cfg!(feature = "test-hooks") && std::env::var_os("INSTRUMENT_DEBUG_RETAIN").is_some()
            {
                eprintln!("retain: byte {}: {}", e.offset, e.msg);
            }
            read_pickle_with(
                BufReader::with_capacity(1 << 16, open()?),
                total,
                max_events,
                false,
                true,
            )
        }
        r => r,
    }
}

/// Read a `.pickle`/`.pkl` (any protocol 0-5) or a `.json` snapshot. The format is
/// taken from the content: JSON starts with `{` or `[`, anything else is a pickle.
pub fn load(path: &Path, max_events: usize) -> Result<Snapshot, SnapshotError> {
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|source| SnapshotError::Open {
        path: shown.clone(),
        source,
    })?;
    let io = |source| SnapshotError::Io {
        path: shown.clone(),
        source,
    };
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(SnapshotError::IsDirectory { path: shown });
    }
    let total = meta.len();
    if total == 0 {
        return Err(SnapshotError::Empty { path: shown });
    }
    let mut r = BufReader::with_capacity(1 << 16, file);
    let head = r.fill_buf().map_err(io)?;
    let first = head.iter().copied().find(|b| !b.is_ascii_whitespace());
    if matches!(first, Some(b'{') | Some(b'[')) {
        return read_json(r, total, max_events).map_err(|e| match e {
            JsonError::Io(source) => SnapshotError::Io {
                path: shown.clone(),
                source,
            },
            JsonError::Invalid(msg) => SnapshotError::Json {
                path: format!("{shown}: "),
                msg,
            },
        });
    }
    drop(r);
    read_pickle_file(path, total, max_events).map_err(|e| SnapshotError::Pickle {
        path: format!("{shown}: "),
        offset: e.offset,
        msg: e.msg,
        io: e.io,
    })
}

/// Read a snapshot from bytes (tests and the fuzz target).
pub fn load_bytes(bytes: &[u8], max_events: usize) -> Result<Snapshot, SnapshotError> {
    let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
    if matches!(first, Some(b'{') | Some(b'[')) {
        return read_json(bytes, bytes.len() as u64, max_events).map_err(|e| SnapshotError::Json {
            path: String::new(),
            msg: match e {
                JsonError::Io(e) => e.to_string(),
                JsonError::Invalid(msg) => msg,
            },
        });
    }
    let total = bytes.len() as u64;
    match read_pickle_with(bytes, total, max_events, true, false) {
        Err(e) if e.retain => read_pickle_with(bytes, total, max_events, false, true),
        r => r,
    }
    .map_err(|e| SnapshotError::Pickle {
        path: String::new(),
        offset: e.offset,
        msg: e.msg,
        io: e.io,
    })
}
