//! `remove`'s front door: find the scope as `add` finds its checkout, finish an
//! interrupted run, plan every file byte for byte, and write all of it or nothing.

use std::path::PathBuf;

use serde::Serialize;

use super::add::FileChange;
use super::failure::Failure;
use super::lock::{self, Mode};
use super::transaction::{self, Change, Recovered};
use super::{session, status};

#[derive(Debug, Clone, Default)]
pub struct RemoveOptions {
    pub root: Option<PathBuf>,
    /// Files or folders to take regions out of (default: the whole checkout).
    pub paths: Vec<PathBuf>,
    /// Only this rule set's regions.
    pub rules: Option<String>,
    pub force: bool,
    pub dry_run: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RemoveReport {
    pub schema: &'static str,
    pub root: String,
    /// What finishing an interrupted run did, if there was one.
    pub recovered: Option<String>,
    /// Temporary files of killed runs deleted.
    pub cleaned: usize,
    pub failures: Vec<Failure>,
    pub changes: Vec<FileChange>,
    pub dry_run: bool,
    pub refused: bool,
}

/// Say what recovering an interrupted run did, for the user.
pub fn describe(r: &Recovered) -> String {
    match r {
        Recovered::Completed { command, files } => {
            format!("finished the interrupted `{command}` ({files} file(s))")
        }
        Recovered::RolledBack { command, files } => format!(
            "undid the interrupted `{command}` (its new texts were gone; {files} file(s) hold their originals)"
        ),
    }
}

/// Everything a writing command does before it plans, with the lock held: finish an
/// interrupted run and delete leftovers of killed ones.
pub fn prepare(scope: &super::checkout::Scope) -> Result<(Option<String>, usize), String> {
    let recovered = transaction::recover(&scope.root)?.map(|r| describe(&r));
    let walk = scope.walk();
    Ok((recovered, transaction::clean_stale(&walk.temps)))
}

pub fn run(opts: &RemoveOptions) -> Result<RemoveReport, String> {
    let only = match &opts.rules {
        Some(spec) => Some(super::add::load_rules(spec)?),
        None => None,
    };
    let scope = super::checkout::scope(
        opts.root.as_deref(),
        &opts.paths,
        &status::checkout_markers(only.as_ref()),
    )?;
    let mode = if opts.dry_run {
        Mode::Shared
    } else {
        Mode::Exclusive
    };
    let _lock = lock::lock(&scope.root, mode)?;
    let (recovered, cleaned) = if opts.dry_run {
        (None, 0)
    } else {
        prepare(&scope)?
    };
    super::fault::point("locked");
    let files = scope.walk().python;
    let (plans, failures) = session::plan_remove(
        &scope.root,
        &files,
        only.as_ref().map(|s| s.manifest.name.as_str()),
        opts.force,
    );
    let mut report = RemoveReport {
        schema: "instrument.remove/1",
        root: scope.root.display().to_string(),
        recovered,
        cleaned,
        refused: !failures.is_empty(),
        failures,
        changes: Vec::new(),
        dry_run: opts.dry_run,
    };
    if report.refused {
        return Ok(report);
    }
    report.changes = plans
        .iter()
        .map(|p| {
            let (before, after) = (
                String::from_utf8_lossy(&p.before).to_string(),
                String::from_utf8_lossy(&p.after).to_string(),
            );
            FileChange::new(p.file.clone(), before, after)
        })
        .collect();
    super::fault::point("planned");
    if !opts.dry_run && !plans.is_empty() {
        let changes: Vec<Change> = plans
            .into_iter()
            .map(|p| Change {
                file: p.file,
                before: p.before,
                after: p.after,
            })
            .collect();
        transaction::commit(&scope.root, "instrument remove", &changes)?;
    }
    Ok(report)
}
