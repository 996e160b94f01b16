//! Nsight Systems helpers (`instrument nsys ...`).
//!
//! - `sqlite`   — open an nsys SQLite export and load the tables the report reads;
//! - `ids`      — the `globalTid` / `globalPid` bit layout nsys serialises;
//! - `classify` — kernel categories (communication, GEMM, attention, ...) from demangled names;
//! - `stats`    — the summary statistics `nsys stats` prints (median, sample stddev);
//! - `overlap`  — interval unions and how much communication hides under compute;
//! - `nvtx`     — NVTX ranges projected onto the GPU work launched inside them;
//! - `analyze`  — puts the above together into one `report::Report` per export;
//! - `report`   — the text, JSON and HTML renderings of that report;
//! - `command`  — the recommended `nsys profile` command and its checks against an installed nsys.

pub mod analyze;
pub mod classify;
pub mod command;
pub mod hash;
pub mod ids;
pub mod nvtx;
pub mod overlap;
pub mod report;
pub mod sqlite;
pub mod stats;
pub mod tracejson;
