//! `remove`'s front door: find the scope as `add` finds its checkout, finish an
//! interrupted run, plan every file byte for byte, and write all of it or nothing.

use std::path::PathBuf;

use serde::Serialize;

use super::diff::FileChange;
use super::failure::Failure;
use super::lock::{self, Mode};
use super::transaction::{self, Change};
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
    /// What the user must know that does not stop the run (a checkout that cannot be
    /// locked).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

pub fn run(opts: &RemoveOptions) -> Result<RemoveReport, super::Error> {
    let only = match &opts.rules {
        Some(spec) => Some(crate::rules::load(spec)?),
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
    let lock = lock::lock(&scope.root, mode)?;
    let (recovered, cleaned) = if opts.dry_run {
        (None, 0)
    } else {
        transaction::prepare(&scope.root, &scope.walk().temps)?
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
        warnings: lock.warning.clone().into_iter().collect(),
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
    let written: Vec<&str> = plans.iter().map(|p| p.file.as_str()).collect();
    transaction::refuse_read_only(&scope.root, &written, opts.force)?;
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
