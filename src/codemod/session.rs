//! Whole-tree operations: plan `add` over every target file (and the files holding old
//! regions), plan `remove`, and scan a tree for regions (`status`, `check`). Each returns
//! plans and failures; the command line decides what to print and whether to write.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::checkout;
use super::diff::FileChange;
use super::failure::{Failure, FailureKind};
use super::markers::{self, MarkerError, Region};
use super::plan::{self, FilePlan, PlanContext};
use crate::python::style::Style;
use crate::rules::{CompiledRule, CompiledSet};

/// The rules that target one file, with their indices in the rule set.
type FileRules<'r> = Vec<(usize, &'r CompiledRule)>;

/// What `add` was asked to do.
pub struct AddRequest<'a> {
    pub root: &'a Path,
    /// The rules, instantiated for the model (or functions) `add` was given.
    pub rule_set: &'a CompiledSet,
    /// The parameters' values (as the rules' templates hold them), for the markers.
    pub params: &'a BTreeMap<String, String>,
    /// Apply the groups that fit and skip the rest, instead of all or nothing.
    pub partial: bool,
    /// The checkout's formatting settings, which inserted code follows.
    pub style: Style,
    /// Rules that cannot be planned (a role not placed), by index in `rule_set`.
    pub blocked: BTreeMap<usize, super::roles::Blocked>,
}

/// How one group fared.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GroupOutcome {
    pub group: String,
    pub rules: Vec<String>,
    pub files: BTreeSet<String>,
    pub failures: Vec<Failure>,
    /// Skipped under `--partial` because another group it needs could not apply.
    pub skipped_for_dependency: bool,
    /// The groups it requires (`[groups]` of the rule set) that do not apply.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
    /// Why it requires them, as the rule set says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs_why: Option<String>,
}

impl GroupOutcome {
    pub fn applies(&self) -> bool {
        self.failures.is_empty() && !self.skipped_for_dependency
    }
}

#[derive(Debug, Clone)]
pub struct AddOutcome {
    /// Every file planned: targets and files whose old regions are taken out.
    pub plans: Vec<FilePlan>,
    /// The change of every file whose text changes, with its diff, in the order of
    /// `plans`: made on the core that planned the file, as the last piece of its work.
    pub changes: Vec<FileChange>,
    pub groups: Vec<GroupOutcome>,
    /// Failures not tied to a rule (a file that does not parse, broken markers).
    pub file_failures: Vec<Failure>,
}

impl AddOutcome {
    pub fn ok(&self) -> bool {
        self.file_failures.is_empty() && self.groups.iter().all(|g| g.applies())
    }
}

/// Why a target could not be read as text.
#[derive(Clone)]
enum ReadError {
    /// The checkout has no such file.
    Missing,
    /// The system's reason.
    Io(String),
    /// 1-based line and column of the first byte that is not UTF-8, and the byte.
    NotUtf8(usize, usize, u8),
}

fn read(root: &Path, rel: &str) -> Result<String, ReadError> {
    let bytes = std::fs::read(root.join(rel)).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::Missing,
        _ => ReadError::Io(e.to_string()),
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..valid].iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = bytes[..valid]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        ReadError::NotUtf8(line, valid - line_start + 1, bytes[valid])
    })
}

/// Plan `add`. With `partial`, groups that fail (or read names a failed group defines)
/// are dropped until the rest plans cleanly.
pub fn plan_add(req: &AddRequest) -> AddOutcome {
    let set = req.rule_set;
    // Every rule of the set is for the target: `instantiate` chose them.
    let all: Vec<(usize, &CompiledRule)> = set.rules.iter().enumerate().collect();
    let target_of = |r: &CompiledRule| r.file.clone();
    let mut group_order: Vec<String> = Vec::new();
    for (_, r) in &all {
        if !group_order.contains(&r.group) {
            group_order.push(r.group.clone());
        }
    }
    // Files holding old regions of this set are re-planned too (a model switched, say).
    let source_dir = req.root.join(&set.manifest.source_dir);
    let mut with_regions: BTreeSet<String> = BTreeSet::new();
    for rel in checkout::python_files(req.root, &source_dir) {
        if let Ok(bytes) = std::fs::read(req.root.join(&rel))
            && markers::mentions_markers(&bytes)
            && String::from_utf8_lossy(&bytes)
                .contains(&format!(" instrument {} ", set.manifest.name))
        {
            with_regions.insert(rel);
        }
    }

    // As ruff's isort does: the rule set's first-party packages, and the checkout's own
    // top-level packages and modules (in the root or in `src/`).
    let mut first_party = set.manifest.first_party.clone();
    first_party.extend(checkout::local_modules(req.root));
    let mut dropped: BTreeSet<String> = BTreeSet::new();
    let mut first_failures: BTreeMap<String, Vec<Failure>> = BTreeMap::new();
    loop {
        // A group whose required groups are not applied is not applied either.
        if req.partial {
            let unmet = unmet_requirements(set, &group_order, &dropped);
            dropped.extend(unmet.into_keys());
        }
        let active: Vec<(usize, &CompiledRule)> = all
            .iter()
            .copied()
            .filter(|(_, r)| !dropped.contains(&r.group))
            .collect();
        let mut by_file: BTreeMap<String, FileRules> = BTreeMap::new();
        for (i, r) in &active {
            by_file.entry(target_of(r)).or_default().push((*i, *r));
        }
        for f in &with_regions {
            by_file.entry(f.clone()).or_default();
        }
        let ctx = PlanContext {
            first_party: &first_party,
            rule_set: set,
            params: req.params,
            style: &req.style,
            blocked: &req.blocked,
        };
        let mut plans = Vec::new();
        let mut changes = Vec::new();
        let mut failures: Vec<Failure> = Vec::new();
        // Files are independent: plan them on all cores (tree-sitter parsers are per
        // thread), the largest first.
        let files: Vec<(&String, &FileRules, Result<String, ReadError>)> = by_file
            .iter()
            .map(|(file, rules)| (file, rules, read(req.root, file)))
            .collect();
        let planned = crate::par::map(
            &files,
            |(_, _, text)| text.as_ref().map_or(0, String::len),
            |(file, rules, text)| match text {
                Ok(text) => {
                    let p = plan::plan_file(file, text, rules, &ctx);
                    // The diff on the same core, while the texts are fresh in its cache (a
                    // file that fails keeps its text: no change).
                    let change = (p.before != p.after).then(|| {
                        FileChange::new(p.file.clone(), p.before.clone(), p.after.clone())
                    });
                    Ok((p, change))
                }
                Err(e) => Err(e.clone()),
            },
        );
        let outcomes = files
            .iter()
            .zip(planned)
            .map(|((file, rules, _), outcome)| (*file, *rules, outcome));
        for (file, rules, outcome) in outcomes {
            match outcome {
                Ok((mut p, change)) => {
                    changes.extend(change);
                    // A failure that is not tied to a rule blocks every rule of the file.
                    for f in std::mem::take(&mut p.failures) {
                        if f.rule.is_some() {
                            failures.push(f);
                        } else {
                            for (_, r) in rules {
                                failures.push(f.clone().for_rule(r));
                            }
                            if rules.is_empty() {
                                failures.push(f);
                            }
                        }
                    }
                    plans.push(p);
                }
                Err(e) => {
                    let (kind, line, message) = match e {
                        ReadError::NotUtf8(line, column, byte) => (
                            FailureKind::Encoding,
                            Some(line),
                            format!(
                                "column {column}: byte 0x{byte:02x} is not UTF-8; Python reads source files as UTF-8, so save this file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`), then run add again"
                            ),
                        ),
                        ReadError::Missing => (
                            FailureKind::File,
                            None,
                            "the target file does not exist in this checkout (a different revision?)".to_string(),
                        ),
                        ReadError::Io(e) => (
                            FailureKind::File,
                            None,
                            format!("cannot read the target file: {e}"),
                        ),
                    };
                    let failure = Failure::new(kind, file.as_str(), line, message);
                    if kind == FailureKind::Encoding || rules.is_empty() {
                        // Not the rules' fault: one failure for the file.
                        failures.push(failure);
                    } else {
                        for (_, r) in rules {
                            failures.push(failure.clone().for_rule(r));
                        }
                    }
                }
            }
        }
        let failed_groups: BTreeSet<String> =
            failures.iter().filter_map(|f| f.group.clone()).collect();
        for f in &failures {
            if let Some(g) = &f.group
                && !dropped.contains(g)
            {
                first_failures.entry(g.clone()).or_default().push(f.clone());
            }
        }
        let file_failures: Vec<Failure> = failures
            .iter()
            .filter(|f| f.group.is_none())
            .cloned()
            .collect();
        let progress = failed_groups.iter().any(|g| !dropped.contains(g));
        if req.partial && progress && file_failures.is_empty() {
            dropped.extend(failed_groups);
            continue;
        }
        let failed: BTreeSet<String> = first_failures.keys().cloned().collect();
        let unmet = unmet_requirements(set, &group_order, &failed);
        // Dedupe failures per group (a file-level failure repeats for each of its rules).
        let groups = group_order
            .iter()
            .map(|g| {
                let rules: Vec<&CompiledRule> = all
                    .iter()
                    .filter(|(_, r)| &r.group == g)
                    .map(|(_, r)| *r)
                    .collect();
                let mut fs: Vec<Failure> = Vec::new();
                for f in first_failures.get(g).into_iter().flatten() {
                    if !fs
                        .iter()
                        .any(|x| x.file == f.file && x.line == f.line && x.message == f.message)
                    {
                        fs.push(f.clone());
                    }
                }
                // A group whose only failures are names another failed group would
                // define is blocked by that group, not broken itself.
                let dependency = !fs.is_empty()
                    && fs.iter().all(|f| {
                        f.kind == FailureKind::Name
                            && f.name.as_deref().is_some_and(|name| {
                                all.iter().any(|(_, r)| {
                                    &r.group != g
                                        && first_failures.contains_key(&r.group)
                                        && template_defines(&r.template.written, name)
                                })
                            })
                    });
                let needs = unmet.get(g).cloned().unwrap_or_default();
                GroupOutcome {
                    group: g.clone(),
                    rules: rules.iter().map(|r| r.id.clone()).collect(),
                    files: rules.iter().map(|r| target_of(r)).collect(),
                    failures: fs,
                    skipped_for_dependency: dependency || !needs.is_empty(),
                    needs_why: (!needs.is_empty())
                        .then(|| set.manifest.groups.get(g).and_then(|s| s.why.clone()))
                        .flatten(),
                    needs,
                }
            })
            .collect();
        return AddOutcome {
            plans,
            changes,
            groups,
            file_failures,
        };
    }
}

/// The groups of `groups` that cannot apply because a group they require (`[groups]` of
/// the rule set) is in `off`, has no rules here, or cannot apply itself for that reason:
/// by group, the required groups missing. Groups in `off` are not listed.
fn unmet_requirements(
    set: &CompiledSet,
    groups: &[String],
    off: &BTreeSet<String>,
) -> BTreeMap<String, Vec<String>> {
    let mut unmet: BTreeMap<String, Vec<String>> = BTreeMap::new();
    loop {
        let mut changed = false;
        for g in groups {
            if off.contains(g) || unmet.contains_key(g) {
                continue;
            }
            let missing: Vec<String> = set
                .manifest
                .requires(g)
                .iter()
                .filter(|r| off.contains(*r) || unmet.contains_key(*r) || !groups.contains(r))
                .cloned()
                .collect();
            if !missing.is_empty() {
                unmet.insert(g.clone(), missing);
                changed = true;
            }
        }
        if !changed {
            return unmet;
        }
    }
}

/// Whether a template binds `name` at its top level or in a definition it makes.
fn template_defines(template: &str, name: &str) -> bool {
    template.lines().map(str::trim_start).any(|l| {
        l.starts_with(&format!("def {name}("))
            || l.starts_with(&format!("class {name}"))
            || l.starts_with(&format!("{name} ="))
            || l.starts_with(&format!("{name}:"))
            || l.contains(&format!(" as {name}"))
            || l.starts_with(&format!("import {name}"))
    })
}

/// The plan for one file `remove` restores.
#[derive(Debug, Clone)]
pub struct RemovePlan {
    pub file: String,
    pub before: Vec<u8>,
    pub after: Vec<u8>,
}

/// Plan `remove`: every region (of `only_set`, when given) in `files` under `root` taken
/// out, byte for byte whatever else the files hold.
pub fn plan_remove(
    root: &Path,
    files: &[String],
    only_set: Option<&str>,
    force: bool,
) -> (Vec<RemovePlan>, Vec<Failure>) {
    let mut plans = Vec::new();
    let mut failures = Vec::new();
    let failure =
        |file: &str, line, message: String| Failure::new(FailureKind::Markers, file, line, message);
    for rel in files {
        let bytes = match std::fs::read(root.join(rel)) {
            Ok(b) => b,
            Err(e) => {
                failures.push(Failure::new(
                    FailureKind::File,
                    rel.as_str(),
                    None,
                    format!("cannot read it: {e}"),
                ));
                continue;
            }
        };
        if !markers::mentions_markers(&bytes) {
            continue;
        }
        let selected = |r: &Region| only_set.is_none_or(|s| r.rule_set == s);
        match markers::strip_bytes(&bytes, selected) {
            Ok(stripped) => {
                let edited: Vec<&Region> = stripped.removed.iter().filter(|r| !r.intact).collect();
                if !edited.is_empty() && !force {
                    for r in edited {
                        failures.push(failure(
                            rel,
                            Some(r.marker_line + 1),
                            "this region was edited by hand since it was added; review it, then use --force to take it out anyway (the original is restored from its `# |` lines)".into(),
                        ).for_rule_id(&r.rule, None));
                    }
                    continue;
                }
                if stripped.text != bytes {
                    plans.push(RemovePlan {
                        file: rel.clone(),
                        before: bytes,
                        after: stripped.text,
                    });
                }
            }
            Err(e) => failures.push(failure(
                rel,
                Some(e.line),
                format!(
                    "{}; fix the markers by hand (or restore the file from version control)",
                    e.message
                ),
            )),
        }
    }
    (plans, failures)
}

/// Regions found in one file.
#[derive(Debug, Clone)]
pub struct FileRegions {
    pub file: String,
    pub regions: Vec<Region>,
    pub error: Option<MarkerError>,
}

/// Every file of `files` (under `root`) that holds markers, with its regions.
pub fn scan(root: &Path, files: &[String]) -> Vec<FileRegions> {
    let mut out = Vec::new();
    for rel in files {
        let Ok(bytes) = std::fs::read(root.join(rel)) else {
            continue;
        };
        if !markers::mentions_markers(&bytes) {
            continue;
        }
        match markers::find_regions_bytes(&bytes) {
            Ok(regions) if regions.is_empty() => {}
            Ok(regions) => out.push(FileRegions {
                file: rel.clone(),
                regions,
                error: None,
            }),
            Err(e) => out.push(FileRegions {
                file: rel.clone(),
                regions: Vec::new(),
                error: Some(e),
            }),
        }
    }
    out
}
