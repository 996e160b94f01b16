//! `add`'s front door: from the options a user gave to the plan and its reasons. Finds
//! the checkout, checks the model (or selects the functions, for a rule set whose targets
//! are functions), fills in the template parameters the rule set declares, plans every
//! file, and writes all of it or nothing. The command line only renders the report.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::diff::FileChange;
use super::error::{Error, Usage};
use super::failure::{Failure, FailureKind};
use super::lock::{self, Mode};
use super::params::{self, Given, Param};
use super::session::{self, AddRequest, GroupOutcome};
use super::transaction::{self, Change};
use super::{checkout, computed};
use crate::python::scan::Tree;
use crate::python::select::{self, Problem, Severity};
use crate::python::style::Style;
use crate::rules::{self, FunctionTarget, On, RuleSet, Target, TargetKind};

/// What the user asked for, as parsed from the command line (nothing checked yet).
#[derive(Debug, Clone, Default)]
pub struct AddOptions {
    /// A built-in rule set name or a folder.
    pub rules: String,
    pub root: Option<PathBuf>,
    /// The model, or the function selectors of a function-target rule set.
    pub targets: Vec<String>,
    /// Parameter flags given, by flag name without dashes (`ranks` -> `3,14`).
    pub flags: BTreeMap<String, String>,
    /// `--param NAME=VALUE`, in order.
    pub params: Vec<(String, String)>,
    /// A model config to evaluate the MoE-vs-dense condition with.
    pub config: Option<PathBuf>,
    pub partial: bool,
    pub dry_run: bool,
    /// Write read-only files too (they keep their mode).
    pub force: bool,
}

/// How `add` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Written (or, with `--dry-run`, would be).
    Applied,
    /// Nothing to change.
    UpToDate,
    /// Refused: nothing was written; `groups`, `failures` and `problems` say why.
    Refused,
}

/// Everything `add` found and did, for the command line to render (or print as JSON).
#[derive(Debug, Clone, Serialize)]
pub struct AddReport {
    pub schema: &'static str,
    /// `instrument add qwen3-moe`, for messages.
    pub command: String,
    pub root: String,
    pub rule_set: String,
    pub model: Option<String>,
    pub functions: Vec<String>,
    pub params: Vec<Param>,
    /// Why computed parameters are what they are.
    pub notes: Vec<String>,
    /// Function selection warnings and errors (function-target rule sets).
    pub selection: Vec<String>,
    pub groups: Vec<GroupOutcome>,
    /// Failures not tied to a group (a file that is not UTF-8, broken markers).
    pub failures: Vec<Failure>,
    /// Problems found after planning (a detail-layer choice that failed): reported after
    /// the groups, so drift is never hidden behind them.
    pub problems: Vec<String>,
    pub changes: Vec<FileChange>,
    pub dry_run: bool,
    pub partial: bool,
    pub verdict: Verdict,
    /// What to do next when refused.
    pub advice: Option<String>,
    /// What the user must know that does not stop the run (a checkout that cannot be
    /// locked).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The flags of the parameters behind `problems` (`--detail-layers`), for the advice.
    #[serde(skip)]
    pub problem_flags: Vec<String>,
}

impl AddReport {
    pub fn applied_groups(&self) -> usize {
        self.groups.iter().filter(|g| g.applies()).count()
    }
}

/// Plan `add` and, unless it is a dry run or refused, write it.
pub fn run(opts: &AddOptions) -> Result<AddReport, Error> {
    // The rules are instantiated (and their patterns compiled) once the model and the
    // parameters are known, for that model only.
    let set = rules::load(&opts.rules)?;
    let root = checkout::root_for(opts.root.as_deref(), &set.manifest)?;
    // A config given must be there and be JSON, whatever reads it later.
    if let Some(config) = &opts.config {
        super::layers::read_config(config).map_err(super::computed::Error::from)?;
    }
    if set.manifest.targets == TargetKind::Functions && opts.targets.is_empty() {
        return Err(Error::from(Usage::NoFunctions {
            set: set.manifest.name.clone(),
            example: set.manifest.example_targets.clone(),
        }));
    }
    let style = Style::of_checkout(&root);
    let mode = if opts.dry_run {
        Mode::Shared
    } else {
        Mode::Exclusive
    };
    let lock = lock::lock(&root, mode)?;
    let mut report = AddReport {
        schema: "instrument.add/1",
        command: String::new(),
        root: root.display().to_string(),
        rule_set: set.manifest.name.clone(),
        model: None,
        functions: Vec::new(),
        params: Vec::new(),
        notes: Vec::new(),
        selection: Vec::new(),
        groups: Vec::new(),
        failures: Vec::new(),
        problems: Vec::new(),
        changes: Vec::new(),
        dry_run: opts.dry_run,
        partial: opts.partial,
        verdict: Verdict::Refused,
        advice: None,
        problem_flags: Vec::new(),
        warnings: Vec::new(),
    };
    report.warnings.extend(lock.warning.clone());
    let scope = checkout::Scope {
        root: root.clone(),
        targets: vec![root.clone()],
        checkout: true,
    };
    if opts.dry_run {
        if let Some(j) = transaction::pending(&root).and_then(Result::ok) {
            report.notes.push(format!(
                "an interrupted `{}` left {}: the next add or remove finishes it first",
                j.command,
                transaction::JOURNAL
            ));
        }
    } else {
        let (recovered, _) = transaction::prepare(&root, &scope.walk().temps)?;
        report.notes.extend(recovered);
    }
    super::fault::point("locked");
    let given = Given {
        flags: &opts.flags,
        params: &opts.params,
    };
    // What the rules are applied to: a model (one file under the model folder), functions
    // (a rule set written per target), or the checkout as a whole.
    let model = match (set.manifest.targets, &set.manifest.models) {
        (TargetKind::Functions, _) => {
            report.command = format!("instrument add --rules {}", set.manifest.name);
            None
        }
        (TargetKind::Model, Some(_)) => {
            let m = check_model(&set, &root, &opts.targets)?;
            report.command = format!("instrument add {}", checkout::display_model(&m));
            Some(m)
        }
        (TargetKind::Model, None) => {
            if !opts.targets.is_empty() {
                return Err(Error::from(Usage::WholeCheckout {
                    set: set.manifest.name.clone(),
                    given: opts.targets.clone(),
                }));
            }
            report.command = format!("instrument add --rules {}", set.manifest.name);
            None
        }
    };
    let ctx = computed::Context {
        root: &root,
        manifest: &set.manifest,
        model: model.as_deref(),
        config: opts.config.as_deref(),
    };
    let filled = params::fill(
        &set.manifest,
        &given,
        &style,
        |name, flag| computed::compute(&ctx, name, flag),
        |name, flag, value| computed::check_given(&ctx, name, flag, value),
    )?;
    let literals = filled.literals();
    report.params = filled.params;
    report.notes.extend(filled.notes);
    let problems = filled.problems;
    let params = &literals;
    let (rule_set, blocked) = match &model {
        None if set.manifest.targets == TargetKind::Functions => {
            let Some(targets) = select_targets(&set, &root, &opts.targets, &mut report)? else {
                report.advice = Some("fix the selection above; nothing was changed".into());
                return Ok(report);
            };
            report.functions = targets.iter().map(FunctionTarget::name).collect();
            let on = On::Functions(&targets);
            (
                rules::instantiate(&set, &Target { on, params })?,
                BTreeMap::new(),
            )
        }
        None => {
            let on = On::Checkout;
            (
                rules::instantiate(&set, &Target { on, params })?,
                BTreeMap::new(),
            )
        }
        Some(m) => {
            report.model = Some(checkout::display_model(m));
            super::roles::model_rules(&root, &set, m, params)?
        }
    };
    let rule_set = &rule_set;
    let req = AddRequest {
        root: &root,
        rule_set,
        params,
        partial: opts.partial,
        style,
        blocked,
    };
    let mut outcome = session::plan_add(&req);
    let changes = std::mem::take(&mut outcome.changes);
    let outcome = crate::kept::Kept::new(outcome);
    // A parameter that could not be worked out matters only to the groups that apply:
    // under --partial, one only skipped groups use is no reason to refuse.
    for (name, problem) in problems {
        let needed = outcome.groups.iter().filter(|g| g.applies()).any(|g| {
            rule_set
                .rules
                .iter()
                .any(|r| g.rules.contains(&r.id) && r.template.uses_param(&name))
        });
        if needed || !opts.partial {
            report.problems.push(problem);
            if let Some(spec) = rule_set.manifest.params.get(&name) {
                report.problem_flags.push(params::shown(&name, spec));
            }
        } else {
            report.notes.push(format!(
                "{problem} (not needed: the groups that use it are skipped)"
            ));
        }
    }
    report.groups = outcome.groups.clone();
    report.failures = outcome.file_failures.clone();
    let refused = !outcome.file_failures.is_empty()
        || (!opts.partial && !outcome.ok())
        || !report.problems.is_empty();
    if refused {
        report.advice = Some(advice(&report));
        return Ok(report);
    }
    // Each file's diff was made on the core that planned it.
    report.changes = changes;
    if report.changes.is_empty() {
        report.verdict = Verdict::UpToDate;
        return Ok(report);
    }
    let written: Vec<&str> = report.changes.iter().map(|c| c.file.as_str()).collect();
    transaction::refuse_read_only(&root, &written, opts.force)?;
    super::fault::point("planned");
    if !opts.dry_run {
        let changes: Vec<Change> = report
            .changes
            .iter()
            .map(|c| Change {
                file: c.file.clone(),
                before: c.before.clone().into_bytes(),
                after: c.after.clone().into_bytes(),
            })
            .collect();
        transaction::commit(&root, &report.command, &changes)?;
    }
    report.verdict = Verdict::Applied;
    Ok(report)
}

/// The model `targets` names, if this rule set has rules for it.
fn check_model(set: &RuleSet, root: &std::path::Path, targets: &[String]) -> Result<String, Error> {
    if targets.is_empty() {
        let models: Vec<String> = checkout::available_models(root, &set.manifest)
            .iter()
            .map(|m| checkout::display_model(m))
            .collect();
        return Err(Error::from(Usage::NoModel {
            set: set.manifest.name.clone(),
            models,
        }));
    }
    let [typed] = targets else {
        return Err(Error::from(Usage::OneModel {
            set: set.manifest.name.clone(),
            given: targets.to_vec(),
        }));
    };
    let model = checkout::resolve_model(root, &set.manifest, typed)?;
    // Rules for model files are written for every model (scoping into role classes) or
    // for some; a set with model-file rules of which none is for this model has no rules
    // for it.
    let per_model: Vec<&crate::rules::Rule> = set
        .rules
        .iter()
        .filter(|r| r.file.contains("{MODEL}"))
        .collect();
    if !per_model.is_empty() && !per_model.iter().any(|r| r.applies_to(Some(model.as_str()))) {
        let mut supported: Vec<&String> = per_model.iter().flat_map(|r| r.models.iter()).collect();
        supported.sort();
        supported.dedup();
        let names: Vec<String> = supported
            .iter()
            .map(|m| checkout::display_model(m))
            .collect();
        return Err(Error::from(Usage::NoRulesFor {
            set: set.manifest.name.clone(),
            model: checkout::display_model(&model),
            supported: names,
        }));
    }
    Ok(model)
}

/// Select the functions a function-target rule set instruments, with the same scan and
/// refusals as the functions-trace JSON. `None` when the selection has errors.
fn select_targets(
    set: &RuleSet,
    root: &std::path::Path,
    selectors: &[String],
    report: &mut AddReport,
) -> Result<Option<Vec<FunctionTarget>>, Error> {
    let tree = Tree::scan(&[root.join(&set.manifest.source_dir)], None)?;
    let compilers = rules::compilers::callables();
    let select::Selected {
        targets: picked,
        problems,
        ..
    } = select::select_functions(&tree, false, selectors, &compilers);
    report.selection = problems.iter().map(Problem::to_string).collect();
    if problems.iter().any(|p| p.severity == Severity::Error) {
        return Ok(None);
    }
    Ok(Some(
        picked
            .iter()
            .map(|t| FunctionTarget {
                file: t
                    .path
                    .strip_prefix(root)
                    .unwrap_or(&t.path)
                    .to_string_lossy()
                    .replace('\\', "/"),
                class: t.class.clone(),
                function: t.function.clone(),
            })
            .collect(),
    ))
}

/// The next step for a refused `add`, from what failed.
fn advice(report: &AddReport) -> String {
    let failures: Vec<&Failure> = report
        .failures
        .iter()
        .chain(report.groups.iter().flat_map(|g| g.failures.iter()))
        .collect();
    let has = |k: FailureKind| failures.iter().any(|f| f.kind == k);
    let mut steps: Vec<String> = Vec::new();
    if has(FailureKind::Markers) {
        steps.push("review the region edited by hand, then undo the edit or run `instrument remove --force` (it restores the original from the marker)".into());
    }
    if has(FailureKind::Encoding) {
        steps.push(
            "save the file as UTF-8 (Python reads source as UTF-8), then run add again".into(),
        );
    }
    // Rules that do not fit this checkout: an anchor, a name, a file, or a place their
    // code must never go (a compiled function).
    let anchors = has(FailureKind::Anchor)
        || has(FailureKind::Name)
        || has(FailureKind::File)
        || has(FailureKind::Placement);
    if has(FailureKind::Role) {
        // The anchors' step says --partial too: say it once.
        let partial = if anchors {
            ""
        } else {
            ", or pass --partial to apply the other groups"
        };
        steps.push(format!("name the class of each role above in the rule set's model table (the `[models.known.<model>.roles]` lines shown; for a built-in set, in a copy of its folder passed with --rules DIR){partial}"));
    }
    if anchors {
        steps.push("`instrument explain` shows where each anchor resolves; pass --partial to apply the groups that fit, or --rules DIR with rules for this revision".into());
    }
    if has(FailureKind::Syntax) {
        steps.push("fix the syntax error (or check that the file is Python)".into());
    }
    if !report.problems.is_empty() {
        steps.push(format!(
            "pass {} (or --config FILE for the model's config)",
            report.problem_flags.join(", ")
        ));
    }
    if steps.is_empty() {
        steps.push("fix what is reported above".into());
    }
    let failing = report.groups.iter().filter(|g| !g.applies()).count();
    let what = if failing > 0 {
        format!("{failing} of {} groups cannot apply; ", report.groups.len())
    } else {
        String::new()
    };
    format!("{what}nothing was changed. Next: {}", steps.join("; "))
}
