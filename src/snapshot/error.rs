//! Why a snapshot could not be analysed. The engine returns these; the command line
//! (src/cli/snapshot.rs) decides the exit code. Each message is one line that names the
//! file and, for pickles, the byte offset.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum SnapshotError {
    /// The file cannot be opened (missing, no permission).
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Reading failed after the file was opened (a disk or network error).
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is a directory")]
    IsDirectory { path: String },
    #[error(
        "{path}: empty file, not a snapshot (a run stopped while writing one leaves this); give a snapshot torch wrote whole"
    )]
    Empty { path: String },
    /// A pickle that is truncated, malformed, refused (an opcode that imports or calls)
    /// or not a snapshot; `offset` is the byte of the opcode.
    #[error("{path}byte {offset}: {msg}")]
    Pickle {
        /// The file name and `: `, or nothing for bytes read from memory.
        path: String,
        offset: u64,
        msg: String,
        /// The system's error when reading failed (not the bytes' fault).
        io: Option<std::io::ErrorKind>,
    },
    #[error("{path}not a readable JSON snapshot: {msg}")]
    Json { path: String, msg: String },
    #[error("{path}: device {device} is not in this snapshot ({available})")]
    UnknownDevice {
        path: String,
        device: i64,
        available: String,
    },
    #[error("{path} is a directory: --diff compares two snapshot files")]
    DiffOfDirectory { path: String },
    #[error(
        "{dir}: no rank-local snapshots found (expected names such as snapshot-rank00003.pickle, memory_snapshot_rank3_step0.pickle or rank3_memory_snapshot.pickle)"
    )]
    NoRanks { dir: String },
    /// `--rank N` that the folder has no file of.
    #[error("{dir}: --rank {rank}: no snapshot of that rank here (the ranks here: {there})")]
    RankNotInFolder {
        dir: String,
        rank: u32,
        there: String,
    },
    /// Rank snapshots of different steps in one folder: not one moment of one run.
    #[error(
        "{dir}: {first} is of step {first_step} and {second} of step {second_step}: the ranks of one folder are compared as one moment of one run; give each step's snapshots a folder of their own"
    )]
    DifferentSteps {
        dir: String,
        first: String,
        first_step: u64,
        second: String,
        second_step: u64,
    },
    #[error("cannot list {dir}: {source}")]
    ListDir {
        dir: String,
        #[source]
        source: std::io::Error,
    },
}

/// The machine failing to read a file it could open is an I/O failure (exit 3); a file or
/// folder it would not open or list has the class every command gives that I/O error (not
/// there or not allowed: the user's); everything else is the input the user gave (exit 2).
impl crate::exit::Classify for SnapshotError {
    fn class(&self) -> crate::exit::Class {
        use crate::exit::{Class, io_class, kind_class};
        match self {
            SnapshotError::Io { .. } => Class::Io,
            SnapshotError::Open { source, .. } | SnapshotError::ListDir { source, .. } => {
                io_class(source)
            }
            SnapshotError::Pickle { io: Some(kind), .. } => kind_class(*kind),
            SnapshotError::IsDirectory { .. }
            | SnapshotError::Empty { .. }
            | SnapshotError::Pickle { io: None, .. }
            | SnapshotError::Json { .. }
            | SnapshotError::UnknownDevice { .. }
            | SnapshotError::DiffOfDirectory { .. }
            | SnapshotError::NoRanks { .. }
            | SnapshotError::DifferentSteps { .. }
            | SnapshotError::RankNotInFolder { .. } => Class::User,
        }
    }
}
