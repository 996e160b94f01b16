//! PyTorch memory-snapshot reader and analysis (`instrument snapshot`).
//!
//! - `pickle`   — a pickle reader that never executes anything (refuses GLOBAL, REDUCE, ...);
//! - `json`     — the same for JSON snapshots, streamed through serde;
//! - `builder`  — folds both into the typed model as containers complete (no generic tree);
//! - `model`    — segments, blocks, trace events, interned frames and stacks;
//! - `load`     — opening a file, format sniffing, one-line errors;
//! - `attrib`   — which frame owns an allocation, and its category;
//! - `analysis` — device choice, totals per device/stream, sites of live memory;
//! - `trace`    — `device_traces`: counts, pending frees, OOMs, steps, retention, bursts;
//! - `patterns` — the spec's named patterns with evidence and fix;
//! - `diff`     — two snapshots: which sites grew;
//! - `ranks`    — a directory of per-rank snapshots;
//! - `report`   — the report value (the `--json` schema, docs/snapshot.md);
//! - `text`, `html` — renderers.

pub mod analysis;
pub mod attrib;
pub mod builder;
pub mod diff;
pub mod html;
pub mod json;
pub mod load;
pub mod model;
pub mod patterns;
pub mod pickle;
pub mod ranks;
pub mod report;
pub mod text;
pub mod trace;

use std::path::Path;

pub use analysis::Options;
pub use report::Report;

/// Load and analyse one file; returns its report (patterns included) and peak live bytes.
pub fn analyse_file(
    path: &Path,
    opts: &Options,
    visuals: bool,
    top: usize,
) -> Result<(Report, u64), String> {
    let snap = load::load(path, opts.max_trace_events)?;
    let mut a =
        analysis::Analysis::new(&snap, opts).map_err(|e| format!("{}: {e}", path.display()))?;
    let patterns = patterns::detect(&mut a, None);
    let peak = a.peak_bytes();
    let mut rep = report::build(&mut a, &path.display().to_string(), top, visuals);
    rep.patterns = patterns;
    Ok((rep, peak))
}

/// Analyse `path` (a file or a directory of ranks), optionally diffed against `other`.
pub fn analyse(
    path: &Path,
    other: Option<&Path>,
    opts: &Options,
    visuals: bool,
) -> Result<Report, String> {
    if path.is_dir() {
        if other.is_some() {
            return Err(format!(
                "{} is a directory: --diff compares two snapshot files",
                path.display()
            ));
        }
        return ranks::report(path, opts, visuals);
    }
    let Some(other) = other else {
        return analyse_file(path, opts, visuals, opts.top).map(|(r, _)| r);
    };
    if other.is_dir() {
        return Err(format!(
            "{} is a directory: --diff compares two snapshot files",
            other.display()
        ));
    }
    // PATH is the earlier snapshot, OTHER the later one; the report describes OTHER.
    let before = load::load(path, opts.max_trace_events)?;
    let after = load::load(other, opts.max_trace_events)?;
    let ab =
        analysis::Analysis::new(&before, opts).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut aa =
        analysis::Analysis::new(&after, opts).map_err(|e| format!("{}: {e}", other.display()))?;
    let d = diff::diff(
        &ab,
        &aa,
        report::source_of(&path.display().to_string(), &before),
        report::source_of(&other.display().to_string(), &after),
    );
    drop(ab);
    let patterns = patterns::detect(&mut aa, Some(&d));
    let mut rep = report::build(&mut aa, &other.display().to_string(), opts.top, visuals);
    rep.mode = "diff".into();
    rep.patterns = patterns;
    rep.diff = Some(d);
    Ok(rep)
}
