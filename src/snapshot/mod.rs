//! PyTorch memory-snapshot reader and analysis (`instrument snapshot`).
//!
//! - `read`     — reading files: the pickle machine with full memo semantics, JSON;
//! - `model`    — segments, blocks, trace events, interned frames and stacks;
//! - `frames`   — the table of frames that never name a site (unwinder, allocator, ...);
//! - `sites`    — which frame names an allocation, and its category;
//! - `analysis` — device choice, totals per device/stream, sites of live memory;
//! - `trace`    — `device_traces`: counts, pending frees, OOMs, steps, retention, bursts;
//! - `oom`      — the allocator's state at an OOM, and why it failed;
//! - `patterns` — the named patterns with evidence and fix;
//! - `diff`     — two snapshots: which sites grew;
//! - `ranks`    — a directory of per-rank snapshots;
//! - `report`   — the report value (the `--json` schema) and its renderers;
//! - `run`      — the entry points the command line calls.

pub mod analysis;
pub mod diff;
pub mod frames;
pub mod model;
pub mod oom;
pub mod patterns;
pub mod ranks;
pub mod read;
pub mod report;
pub mod run;
pub mod sites;
pub mod trace;

pub use analysis::Options;
pub use report::Report;
pub use run::{analyse, analyse_file};
