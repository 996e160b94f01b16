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
//! - `model`: the report as data (the JSON schema); `text`, `html`: renderers;
//! - `fstring`, `readback`: `test-rules` proof that each declaration reads its template.

use std::path::PathBuf;

use crate::rules::RuleSet;

pub mod across;
pub mod analyze;
pub mod decl;
pub mod findings;
pub mod fstring;
pub mod html;
pub mod inputs;
pub mod matcher;
pub mod model;
pub mod readback;
pub mod scan;
pub mod text;

use model::{InputReport, Report, Totals};

/// What to read and keep.
#[derive(Debug, Default)]
pub struct Options {
    /// Only these ranks (empty: every rank).
    pub ranks: Vec<i64>,
}

/// Read `paths` (files, folders, `-` for standard input) with the declarations of `set`.
/// Errors are one line, naming the file or rule.
pub fn read(set: &RuleSet, paths: &[PathBuf], opts: &Options) -> Result<Report, String> {
    let catalog = decl::compile(set)?;
    if catalog.entries.is_empty() {
        return Err(format!(
            "rule set {} ({}) declares no prints ([[rule.prints]] in its rules), so there is nothing to read",
            set.manifest.name, set.origin
        ));
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
            let mut file = std::fs::File::open(&f.path)
                .map_err(|e| format!("{}: cannot open: {e}", f.name))?;
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
    let findings = findings::findings(&ranks);
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
    })
}

/// The one line to say when nothing was read, naming what each file was.
pub fn nothing_read(report: &Report) -> String {
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
    format!(
        "no memory prints read ({}); a run prints them on the ranks given to `instrument add --ranks` once it reaches the profiled step",
        why.join("; ")
    )
}
