//! PyTorch memory-snapshot reader and analysis (`instrument snapshot`).
//!
//! - `read`     — reading files: the pickle machine with full memo semantics, JSON;
//! - `model`    — segments, blocks, trace events, interned frames and stacks;
//! - `paths`    — file names read with either separator, globs, libraries, the stdlib;
//! - `frames`   — the tables of frames: never a site (unwinder, allocator, ...), torch's,
//!   the standard library's;
//! - `categories` — the table of what kind of memory a stack allocates;
//! - `sites`    — which frame names an allocation (user, library, torch, native), and
//!   its category;
//! - `analysis` — device choice, totals per device/stream, sites of live memory;
//! - `trace`    — `device_traces`: counts, pending frees, OOMs, retention, bursts;
//! - `steps`    — training steps: the run's own markers first, else a guess;
//! - `marks`    — a run's schedule marks (conventions table), placed on the trace;
//! - `schedule` — a marked pipeline schedule: memory per schedule event;
//! - `expandable` — expandable segments as torch keeps them (mapped pages);
//! - `oom`      — the allocator's state at an OOM, and why it failed;
//! - `patterns` — the named patterns with evidence and fix;
//! - `diff`     — two snapshots: which sites grew;
//! - `ranks`    — a directory of per-rank snapshots;
//! - `report`   — the report value (the `--json` schema) and its renderers;
//! - `run`      — the entry points the command line calls;
//! - `error`    — why a snapshot could not be analysed (the command line picks the exit code).

pub mod analysis;
pub mod categories;
pub mod diff;
pub mod error;
pub mod expandable;
pub mod frames;
pub mod marks;
pub mod model;
pub mod oom;
pub mod paths;
pub mod patterns;
pub mod ranks;
pub mod read;
pub mod report;
pub mod run;
pub mod schedule;
pub mod sites;
pub mod steps;
pub mod trace;

pub use analysis::Options;
pub use error::SnapshotError;
pub use report::Report;
pub use run::{analyse, analyse_file};
