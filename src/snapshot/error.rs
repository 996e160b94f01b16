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
    #[error("{path}: empty file, not a snapshot")]
    Empty { path: String },
    /// A pickle that is truncated, malformed, refused (an opcode that imports or calls)
    /// or not a snapshot; `offset` is the byte of the opcode.
    #[error("{path}byte {offset}: {msg}")]
    Pickle {
        /// The file name and `: `, or nothing for bytes read from memory.
        path: String,
        offset: u64,
        msg: String,
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

/// The machine failing to read a file it could open, or a folder it could not list, is an
/// I/O failure (exit 3); everything else is the input the user gave (exit 2).
impl crate::exit::Classify for SnapshotError {
    fn class(&self) -> crate::exit::Class {
        use crate::exit::Class;
        match self {
            SnapshotError::Io { .. } | SnapshotError::ListDir { .. } => Class::Io,
            SnapshotError::Open { .. }
            | SnapshotError::IsDirectory { .. }
            | SnapshotError::Empty { .. }
            | SnapshotError::Pickle { .. }
            | SnapshotError::Json { .. }
            | SnapshotError::UnknownDevice { .. }
            | SnapshotError::DiffOfDirectory { .. }
            | SnapshotError::NoRanks { .. }
            | SnapshotError::DifferentSteps { .. }
            | SnapshotError::RankNotInFolder { .. } => Class::User,
        }
    }
}
