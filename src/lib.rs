//! `instrument`: reversible memory-print instrumentation for pithtrain, and readers for
//! what an instrumented run produces.
//!
//! Layout (a newcomer's map):
//! - `rules`    — the TOML rule format and how rule sets are loaded (embedded or `--rules DIR`);
//! - `codemod`  — the engine: anchor matching, planning edits, markers, removal;
//! - `python`   — Python through tree-sitter: parsing, name binding, package scans;
//! - `snapshot` — the PyTorch memory-snapshot reader and analysis (`instrument snapshot`);
//! - `nsys`     — Nsight Systems helpers (`instrument nsys ...`);
//! - `log`      — reading what the prints printed (`instrument log`);
//! - `mesh`     — a run's shape as a trainer labels it (`rank=3; pp=0/2 ...`), for every reader;
//! - `findings` — the findings model every reader opens with, its text and HTML;
//! - `page`     — the one kit of the HTML pages: escaping, style, skeleton, tables, charts;
//! - `gate`     — `--gate PCT` of the before/after comparisons, a view of their figures;
//! - `par`      — independent work spread over the machine's cores;
//! - `fnv`      — the one content hash (markers, journals, manifests);
//! - `kept`     — large values left to the system when the process ends;
//! - `alloc`    — the allocators: tree-sitter's on mimalloc, Rust's on mimalloc for the
//!   commands that plan code (the binary installs both);
//! - `skills`   — skills for pithtrain's agents, written into `.agents/skills/` and taken out;
//! - `report`   — one run's logs and snapshots joined per rank and schedule event (above
//!   `log` and `snapshot`);
//! - `cli`      — the command line, thin glue over the above.

pub mod alloc;
pub mod cli;
pub mod codemod;
pub mod exit;
pub mod findings;
pub mod fnv;
pub mod gate;
pub mod kept;
pub mod log;
pub mod mesh;
pub mod nsys;
pub mod page;
pub mod par;
pub mod python;
pub mod report;
pub mod rules;
pub mod skills;
pub mod snapshot;
