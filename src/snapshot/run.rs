//! The entry points the command line calls: one file, a diff of two, a directory.

use std::path::Path;

use super::analysis::{Analysis, Options, UnknownDevice};
use super::error::SnapshotError;
use super::report::{self, Report};
use super::{diff, patterns, ranks, read};

/// Load and analyse one file; returns its report (patterns included) and peak live bytes.
pub fn analyse_file(
    path: &Path,
    opts: &Options,
    visuals: bool,
    top: usize,
) -> Result<(Report, u64), SnapshotError> {
    let snap = read::load(path, opts.max_trace_events)?;
    let mut a = Analysis::new(&snap, opts).map_err(|e| in_file(path, e))?;
    let patterns = patterns::detect(&mut a, None);
    let peak = a.peak_bytes();
    let mut rep = report::build(&mut a, &path.display().to_string(), top, visuals);
    rep.patterns = patterns;
    rep.findings = report::findings::of(&rep);
    Ok((rep, peak))
}

fn in_file(path: &Path, e: UnknownDevice) -> SnapshotError {
    SnapshotError::UnknownDevice {
        path: path.display().to_string(),
        device: e.device,
        available: e.available,
    }
}

fn not_a_file(p: &Path) -> SnapshotError {
    SnapshotError::DiffOfDirectory {
        path: p.display().to_string(),
    }
}

/// Analyse `path` (a file or a directory of ranks), optionally diffed against `other`.
pub fn analyse(
    path: &Path,
    other: Option<&Path>,
    opts: &Options,
    visuals: bool,
) -> Result<Report, SnapshotError> {
    if path.is_dir() {
        if other.is_some() {
            return Err(not_a_file(path));
        }
        let (files, mut taken) = ranks::scan(path)?;
        if !opts.ranks.is_empty() {
            if let Some(missing) = opts
                .ranks
                .iter()
                .find(|r| !taken.iter().any(|(t, _)| t == *r))
            {
                let there: Vec<String> = taken.iter().map(|(r, _)| r.to_string()).collect();
                return Err(SnapshotError::RankNotInFolder {
                    dir: path.display().to_string(),
                    rank: *missing,
                    there: there.join(", "),
                });
            }
            taken.retain(|(r, _)| opts.ranks.contains(r));
        }
        let opts = Options {
            assume_distributed: true,
            ..opts.clone()
        };
        let results = ranks::analyse_all(&taken, |p| analyse_file(p, &opts, visuals, usize::MAX))?;
        let mut rep = ranks::report(path, files, &taken, results, &opts);
        rep.findings = report::findings::of(&rep);
        return Ok(rep);
    }
    let Some(other) = other else {
        return analyse_file(path, opts, visuals, opts.top).map(|(r, _)| r);
    };
    if other.is_dir() {
        return Err(not_a_file(other));
    }
    // PATH is the earlier snapshot, OTHER the later one; the report describes OTHER.
    let before = read::load(path, opts.max_trace_events)?;
    let after = read::load(other, opts.max_trace_events)?;
    let ab = Analysis::new(&before, opts).map_err(|e| in_file(path, e))?;
    let mut aa = Analysis::new(&after, opts).map_err(|e| in_file(other, e))?;
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
    rep.findings = report::findings::of(&rep);
    Ok(rep)
}
