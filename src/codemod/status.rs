//! What a tree holds, as data: every instrumented file with its regions (rule set, rule,
//! group, parameters, edited by hand or not), an interrupted run's journal, and temporary
//! files a killed run left. `status` renders it, `check` turns it into a verdict.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::checkout::{self, Scope};
use super::{session, transaction};
use crate::rules::{self, RuleSet};

#[derive(Debug, Clone, Serialize)]
pub struct RegionStatus {
    pub rule_set: String,
    pub rule: String,
    pub group: String,
    /// 1-based line of the marker.
    pub line: usize,
    pub params: BTreeMap<String, String>,
    pub edited: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileStatus {
    pub file: String,
    pub regions: Vec<RegionStatus>,
    /// Broken markers: `line N: what`.
    pub error: Option<String>,
    pub error_line: Option<usize>,
}

/// An interrupted `add` or `remove`, from its journal.
#[derive(Debug, Clone, Serialize)]
pub struct Interrupted {
    pub command: String,
    pub files: Vec<String>,
    /// Set when the journal itself cannot be read.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TreeStatus {
    pub schema: &'static str,
    pub root: String,
    pub instrumented: bool,
    /// The models instrumented (`qwen3-moe`): model files holding regions of a rule set
    /// that works per model.
    pub models: Vec<String>,
    pub files: Vec<FileStatus>,
    pub interrupted: Option<Interrupted>,
    /// Temporary files a killed run left (relative to the root where they are under it).
    pub stale_temps: Vec<String>,
}

impl TreeStatus {
    /// Whether `check` fails: regions, broken markers, an interrupted run or leftovers.
    pub fn dirty(&self) -> bool {
        !self.files.is_empty() || self.interrupted.is_some() || !self.stale_temps.is_empty()
    }
}

/// The rule sets built in, by name, to tell each region's group (read once a process).
fn embedded_sets() -> &'static BTreeMap<String, RuleSet> {
    static SETS: std::sync::OnceLock<BTreeMap<String, RuleSet>> = std::sync::OnceLock::new();
    SETS.get_or_init(|| {
        rules::load::embedded_names()
            .into_iter()
            .filter_map(|n| rules::load(&n).ok())
            .map(|s| (s.manifest.name.clone(), s))
            .collect()
    })
}

/// The root markers of the built-in rule sets (how a checkout is recognised).
pub fn checkout_markers(extra: Option<&RuleSet>) -> Vec<String> {
    let mut out: Vec<String> = embedded_sets()
        .values()
        .chain(extra)
        .filter_map(|s| s.manifest.root_marker.clone())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Find the scope the way `add` finds its checkout (see `checkout::scope`).
pub fn scope(root: Option<&Path>, paths: &[PathBuf]) -> Result<Scope, super::Error> {
    checkout::scope(root, paths, &checkout_markers(None))
}

/// Scan `scope` for instrumentation.
pub fn scan(scope: &Scope) -> TreeStatus {
    let walk = scope.walk();
    let found = session::scan(&scope.root, &walk.python);
    let sets = embedded_sets();
    // A region's group is its rule's; a rule the built-in set does not know (another
    // version's) is taken to be in the group its id starts with.
    let group_of = |set: &str, rule: &str| -> String {
        sets.get(set)
            .and_then(|s| rules::instantiate::rule_of_marker(s, rule))
            .map(|r| r.group.clone())
            .unwrap_or_else(|| rule.split('.').next().unwrap_or(rule).to_string())
    };
    // A model file holding regions of a rule set that works per model names the model.
    let model_of = |set: &str, file: &str| -> Option<String> {
        let spec = sets.get(set)?.manifest.models.as_ref()?;
        let stem = file
            .strip_prefix(&format!("{}/", spec.dir))?
            .strip_suffix(".py")?;
        (!stem.contains('/') && !spec.exclude.iter().any(|e| e == stem))
            .then(|| checkout::display_model(stem))
    };
    let mut models: Vec<String> = found
        .iter()
        .flat_map(|f| {
            f.regions
                .iter()
                .filter_map(|r| model_of(&r.rule_set, &f.file))
        })
        .collect();
    models.sort();
    models.dedup();
    let files: Vec<FileStatus> = found
        .iter()
        .map(|f| FileStatus {
            file: f.file.clone(),
            regions: f
                .regions
                .iter()
                .map(|r| RegionStatus {
                    rule_set: r.rule_set.clone(),
                    rule: r.rule.clone(),
                    group: group_of(&r.rule_set, &r.rule),
                    line: r.marker_line + 1,
                    params: r.params.iter().cloned().collect(),
                    edited: !r.intact,
                })
                .collect(),
            error: f.error.as_ref().map(|e| e.message.clone()),
            error_line: f.error.as_ref().map(|e| e.line),
        })
        .collect();
    let interrupted = transaction::pending(&scope.root).map(|j| match j {
        Ok(j) => Interrupted {
            command: j.command,
            files: j.files.into_iter().map(|e| e.file).collect(),
            error: None,
        },
        Err(e) => Interrupted {
            command: String::new(),
            files: Vec::new(),
            error: Some(e.to_string()),
        },
    });
    let journal_temps: Vec<PathBuf> = transaction::pending(&scope.root)
        .and_then(Result::ok)
        .map(|j| j.files.into_iter().flat_map(|e| [e.temp, e.orig]).collect())
        .unwrap_or_default();
    let stale_temps = walk
        .temps
        .iter()
        .filter(|t| !journal_temps.contains(t))
        .filter_map(|t| checkout::relative(&scope.root, t))
        .collect();
    TreeStatus {
        schema: "instrument.status/1",
        root: scope.root.display().to_string(),
        instrumented: files.iter().any(|f: &FileStatus| !f.regions.is_empty()),
        models,
        files,
        interrupted,
        stale_temps,
    }
}
