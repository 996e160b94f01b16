//! `instrument log`: read what an instrumented run printed. Console logs (any number, one
//! per node, gzipped or not) and torchrun `--log-dir` folders are streamed; each line that
//! holds a print is read against the print declarations of the rule set (`[[rule.prints]]`
//! in the rules, so the reader knows no project of its own); the prints become a report
//! per rank and across ranks, rendered as text, JSON or an HTML page.
//!
//! - `decl`: the declarations, compiled; `matcher`: one line against all of them;
//! - `inputs`: which files; `scan`: streaming them for prints;
//! - `analyze`: prints to per-rank reports; `across`: ranks side by side; `findings`:
//!   what went wrong, every rank's;
//! - `model`: the report as data (the JSON schema); `text`, `html`: renderers, `fmt` the
//!   figures and lines they write;
//! - `shape`: which ranks are of one run, and whether two runs have the same shape;
//! - `estimate`: the checkout's own memory estimate beside the measured figures;
//! - `diff`: one run against another (before and after a change);
//! - `fstring`, `readback`: `test-rules` proof that each declaration reads its template;
//! - `error`: what stops a report, for the command line to turn into an exit code.

use std::path::{Path, PathBuf};

use crate::rules::RuleSet;

pub mod across;
pub mod analyze;
pub mod decl;
pub mod diff;
pub mod error;
pub mod estimate;
pub mod findings;
pub mod fmt;
pub mod fstring;
pub mod html;
pub mod inputs;
pub mod matcher;
pub mod model;
pub mod readback;
pub mod scan;
pub mod shape;
pub mod text;

pub use error::LogError;
use model::{InputReport, Report, Totals};

/// What to read and keep.
#[derive(Debug, Default)]
pub struct Options {
    /// Only these ranks (empty: every rank).
    pub ranks: Vec<i64>,
}

/// Read `paths` (files, folders, `-` for standard input) with the declarations of `set`
/// into a report of one run. Refused, in one line naming the file or rule: a rule set
/// without print declarations, a path that is not there, files without prints, ranks asked
/// for that printed nothing, prints of two different runs.
pub fn read(set: &RuleSet, paths: &[PathBuf], opts: &Options) -> Result<Report, LogError> {
    read_side(set, paths, opts, "")
}

/// `read`, with `side` (`before: `) leading the messages about which run the logs are.
pub fn read_side(
    set: &RuleSet,
    paths: &[PathBuf],
    opts: &Options,
    side: &str,
) -> Result<Report, LogError> {
    let report = read_all(set, paths, opts).map_err(|e| e.on_side(side))?;
    if report.totals.prints == 0 {
        return Err(LogError::NothingRead {
            files: what_each_file_was(&report),
        }
        .on_side(side));
    }
    if report.ranks.is_empty() {
        let asked: Vec<String> = opts.ranks.iter().map(i64::to_string).collect();
        return Err(LogError::RanksPrintedNothing {
            ranks: asked.join(", "),
            files: report.totals.files,
            prints: report.totals.prints,
        }
        .on_side(side));
    }
    shape::check_one_run(&report).map_err(|e| LogError::from(e).on_side(side))?;
    Ok(report)
}

/// Add the checkout's memory estimate to `report` (see `estimate`).
pub fn add_estimate(report: &mut Report, root: Option<&Path>, tolerance_percent: f64) {
    report.estimate = Some(estimate::estimate(report, root, tolerance_percent));
}

/// Everything the files hold, whatever it is (no check that anything was read).
pub fn read_all(set: &RuleSet, paths: &[PathBuf], opts: &Options) -> Result<Report, LogError> {
    let catalog = decl::compile(set)?;
    if catalog.entries.is_empty() {
        return Err(LogError::NoDeclarations {
            set: set.manifest.name.clone(),
            origin: set.origin.clone(),
        });
    }
    let (files, skipped_files) = inputs::expand(paths)?;
    let scanner = scan::Scanner::new(&catalog);
    let mut collector = analyze::Collector::new(&catalog, &opts.ranks);
    let mut inputs = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let stats = if f.path.as_os_str() == "-" {
            let stdin = std::io::stdin();
            let mut lock = stdin.lock();
            scanner.scan(i as u32, &mut lock, &mut |r| collector.add(r))
        } else {
            let mut file =
                std::fs::File::open(&f.path).map_err(|source| inputs::InputError::Open {
                    name: f.name.clone(),
                    source,
                })?;
            scanner.scan(i as u32, &mut file, &mut |r| collector.add(r))
        };
        inputs.push(InputReport {
            file: f.clone(),
            stats,
        });
    }
    let names: Vec<String> = files.iter().map(|f| f.name.clone()).collect();
    let ranks = collector.finish(&names);
    let mut totals = Totals {
        files: inputs.len(),
        ..Totals::default()
    };
    for i in &inputs {
        totals.bytes += i.stats.bytes;
        totals.lines += i.stats.lines;
        totals.prints += i.stats.prints;
        totals.cut += i.stats.cut;
        totals.unreadable += i.stats.unreadable;
    }
    let missing_ranks = opts
        .ranks
        .iter()
        .copied()
        .filter(|r| !ranks.iter().any(|x| x.rank == *r))
        .collect();
    let across = across::across(&ranks);
    let findings = findings::findings(&ranks, across.as_ref());
    Ok(Report {
        schema: model::SCHEMA,
        rules: catalog.origin.clone(),
        inputs,
        skipped_files,
        totals,
        ranks,
        findings,
        across,
        missing_ranks,
        estimate: None,
    })
}

/// What each file was, when nothing was read: `name: what`, `; `-separated.
pub fn what_each_file_was(report: &Report) -> String {
    let mut why: Vec<String> = Vec::new();
    for i in &report.inputs {
        let s = &i.stats;
        let what = if let Some(e) = &s.error {
            e.clone()
        } else if s.bytes == 0 {
            "empty".into()
        } else if s.binary {
            format!("{} bytes that look binary, not a text log", s.bytes)
        } else if let Some(u) = &s.first_unreadable {
            format!(
                "{} line(s) begin like a print but match none of the declared ones (line {}: {:?}); were they printed by other rules? (--rules DIR)",
                s.unreadable, u.line, u.text
            )
        } else if let Some(c) = &s.first_cut {
            format!("{} print(s), all cut off (line {})", s.cut, c.line)
        } else {
            format!("{} lines, no prints", s.lines)
        };
        why.push(format!("{}: {what}", i.file.name));
    }
    why.join("; ")
}
