//! Nsight Systems helpers (`instrument nsys ...`).
//!
//! - `error`    — what can go wrong, as values (the CLI picks the exit codes);
//! - `sqlite`   — open an nsys SQLite export, the checks that make a wrong file one clear line;
//! - `meta`     — the small tables: versions, capture settings, processes, GPUs, device mapping;
//! - `ids`      — the `globalTid` / `globalPid` bit layout nsys serialises;
//! - `classify` — kernel classes as data (`kernel_classes.toml`, `--kernel-classes FILE`);
//! - `ops`      — the GPU work (kernels, memcpy, memset, CUDA graphs) joined to its launches;
//! - `names`    — NVTX range names grouped (PyTorch's per-op suffixes, counter families);
//! - `nvtx`     — NVTX ranges projected onto the GPU work, streamed;
//! - `stats`    — the summary statistics `nsys stats` prints (median, sample stddev);
//! - `overlap`  — interval unions and how much communication hides under compute;
//! - `tables`   — the kernel and range tables, cut to `--top` rows with the rest summed;
//! - `notes`    — what the report says about the export itself;
//! - `conventions` — a trainer's NVTX names as data (`conventions.toml`, `--conventions FILE`);
//! - `ranks`    — per rank after those conventions: mesh, window, stream purposes, exposed
//!   communication per stage; the ranks side by side; two runs compared;
//! - `analyze`  — puts the above together into one `report::Report` per export;
//! - `exports`  — many exports of one run, read in parallel within a memory budget;
//! - `report`   — the text, JSON and HTML renderings of those reports;
//! - `command`  — the recommended `nsys profile` command and its checks against an installed nsys;
//! - `tracejson`— the `--python-functions-trace` JSON built from a static scan.

pub mod analyze;
pub mod classify;
pub mod command;
pub mod conventions;
pub mod error;
pub mod exports;
pub mod findings;
pub mod hash;
pub mod ids;
pub mod meta;
pub mod names;
pub mod notes;
pub mod nvtx;
pub mod ops;
pub mod overlap;
pub mod ranks;
pub mod report;
pub mod sqlite;
pub mod stats;
pub mod tables;
pub mod tracejson;
