//! `instrument add | remove | status | check`: argument definitions and the glue that
//! turns them into engine calls, prints the outcome and picks the exit code.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::Args;

use crate::codemod::session::{self, AddOutcome, AddRequest};
use crate::codemod::{checkout, diff, layers, write};
use crate::exit::{self, user_error};
use crate::rules::{self, RuleSet, TargetKind};

/// The rule set used when `--rules` is not given.
pub const DEFAULT_RULES: &str = "memory-prints";

/// What `add` says when `--detail-layers` is not given.
const RUN_TIME_LAYERS: &str =
    "chosen at run time: each profiled rank takes the first 2 MoE layers it holds and prints which";

#[derive(Args, Debug)]
pub struct AddArgs {
    /// The model, as named in pithtrain/models/ (`qwen3-moe`, `deepseek-v2`, ...); with
    /// `--rules nvtx`, the functions to wrap (`*.forward`, `DualPipeV.step`, `layer_forward`).
    #[arg(required = true, num_args = 1..)]
    pub targets: Vec<String>,
    /// Global ranks that print, comma-separated (e.g. `3,14`).
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    pub ranks: String,
    /// Layer indices profiled in detail, comma-separated; by default each profiled rank
    /// takes the first two MoE layers it holds (chosen at run time).
    #[arg(long, allow_hyphen_values = true)]
    pub detail_layers: Option<String>,
    /// The training step that prints per-step detail and takes the snapshot; by default the
    /// first step the process runs (0, or the step a resumed run starts from).
    #[arg(long)]
    pub step: Option<u64>,
    /// Where the memory snapshots are written.
    #[arg(long, default_value = "/tmp")]
    pub snapshot_dir: String,
    /// The stacks memory history records: `python` (fast to dump) or `all` (adds C++
    /// frames, which torch symbolizes when the snapshot is taken: minutes on large models).
    #[arg(long, default_value = "python", value_parser = ["python", "all"])]
    pub stacks: String,
    /// A Hugging Face config.json to evaluate the MoE-vs-dense condition with.
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
    /// Print the diff instead of writing.
    #[arg(long)]
    pub dry_run: bool,
    /// Apply the groups whose anchors all resolve and list the rest, instead of all or nothing.
    #[arg(long)]
    pub partial: bool,
}

#[derive(Args, Debug)]
pub struct CommonArgs {
    /// The checkout (default: the current folder or the first parent holding pithtrain/).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// A built-in rule set name or a folder with ruleset.toml.
    #[arg(long, default_value = DEFAULT_RULES)]
    pub rules: String,
}

#[derive(Args, Debug)]
pub struct RemoveArgs {
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Only take out this rule set's regions (default: every instrument region).
    #[arg(long)]
    pub rules: Option<String>,
    /// Print the diff instead of writing.
    #[arg(long)]
    pub dry_run: bool,
    /// Take out regions even if they were edited by hand (their originals are restored).
    #[arg(long)]
    pub force: bool,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    #[arg(long)]
    pub root: Option<PathBuf>,
}

pub fn load_rules(spec: &str) -> anyhow::Result<RuleSet> {
    rules::load_rule_set(spec).map_err(user_error)
}

/// The checkout root: `--root` (or the current folder), walked up to the rule set's marker.
pub fn root_for(root: &Option<PathBuf>, set: &RuleSet) -> anyhow::Result<PathBuf> {
    let start = root.clone().unwrap_or_else(|| PathBuf::from("."));
    if !start.exists() {
        return Err(user_error(format!(
            "--root {}: no such folder",
            start.display()
        )));
    }
    match &set.manifest.root_marker {
        Some(marker) => checkout::find_root(&start, marker).map_err(user_error),
        None => start
            .canonicalize()
            .map_err(|e| user_error(format!("{}: {e}", start.display()))),
    }
}

/// For commands that work on any tree: `--root`, else the checkout above the current
/// folder if there is one, else the current folder.
fn scan_root(root: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(r) = root {
        if !r.is_dir() {
            return Err(user_error(format!(
                "--root {}: no such folder",
                r.display()
            )));
        }
        return Ok(r.clone());
    }
    let marker = rules::load_rule_set(DEFAULT_RULES)
        .ok()
        .and_then(|s| s.manifest.root_marker)
        .unwrap_or_default();
    Ok(checkout::find_root(Path::new("."), &marker).unwrap_or_else(|_| PathBuf::from(".")))
}

/// Parse `3,14` into sorted, distinct non-negative integers.
pub fn parse_int_list(flag: &str, text: &str) -> anyhow::Result<Vec<u64>> {
    let mut out = Vec::new();
    if text.trim().is_empty() {
        return Err(user_error(format!(
            "--{flag} is empty; give comma-separated non-negative integers, e.g. --{flag} 3,14"
        )));
    }
    for part in text.split(',') {
        let p = part.trim();
        let n: u64 = p.parse().map_err(|_| {
            user_error(format!(
                "--{flag} {text}: `{p}` is not a non-negative integer (expected e.g. --{flag} 3,14)"
            ))
        })?;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The template parameters `add`'s flags set, as Python literals. `layers` None: chosen
/// at run time (`None` in the code).
pub fn template_params(
    ranks: &[u64],
    layers: Option<&[u64]>,
    step: Option<u64>,
    snapshot_dir: &str,
    stacks: &str,
) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("RANKS".to_string(), python_set(ranks)),
        (
            "DETAIL_LAYERS".to_string(),
            layers.map_or("None".to_string(), python_tuple),
        ),
        (
            "STEP".to_string(),
            step.map_or("None".to_string(), |s| s.to_string()),
        ),
        ("SNAPSHOT_DIR".to_string(), python_str(snapshot_dir)),
        ("STACKS".to_string(), python_str(stacks)),
    ])
}

fn python_set(values: &[u64]) -> String {
    format!(
        "{{{}}}",
        values
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn python_tuple(values: &[u64]) -> String {
    match values {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            values
                .iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A Python string literal as `ruff format` writes it: double quotes, unless the text
/// holds more double quotes than single ones; control characters escaped.
fn python_str(s: &str) -> String {
    let (double, single) = (s.matches('"').count(), s.matches('\'').count());
    let quote = if double > single { '\'' } else { '"' };
    let mut out = String::from(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

fn print_failures_report(outcome: &AddOutcome, what: &str) {
    let failing = outcome.groups.iter().filter(|g| !g.applies()).count();
    let mut err = std::io::stderr().lock();
    for f in &outcome.file_failures {
        let _ = writeln!(err, "error: {f}");
    }
    for g in &outcome.groups {
        let state = if g.applies() {
            "would apply"
        } else if g.skipped_for_dependency {
            "cannot apply (needs a group that cannot)"
        } else {
            "cannot apply"
        };
        let files: Vec<&str> = g.files.iter().map(|s| s.as_str()).collect();
        let _ = writeln!(
            err,
            "group {:<3} {:<12} {} rule(s) in {}",
            g.group,
            state,
            g.rules.len(),
            files.join(", ")
        );
        for f in &g.failures {
            let _ = writeln!(err, "error: {f}");
        }
    }
    let _ = writeln!(
        err,
        "{what}: {failing} of {} groups cannot apply; nothing was changed. Fix the anchors (`instrument explain` shows where each resolves), pass --partial to apply the groups that fit, or --rules DIR with rules for this revision",
        outcome.groups.len()
    );
}

/// Print diffs or write the planned files.
fn emit(root: &Path, plans: &[(String, String, String)], dry_run: bool) -> anyhow::Result<()> {
    if dry_run {
        let mut out = std::io::stdout().lock();
        let colour = std::io::stdout().is_terminal();
        for (file, before, after) in plans {
            let d = diff::unified(file, before, after);
            let _ = out.write_all(if colour { diff::colorize(&d) } else { d }.as_bytes());
        }
        return Ok(());
    }
    let files: Vec<(String, String)> = plans
        .iter()
        .map(|(f, _, a)| (f.clone(), a.clone()))
        .collect();
    write::write_all(root, &files).map_err(|e| anyhow::anyhow!(e))
}

pub fn add(args: AddArgs) -> anyhow::Result<u8> {
    let set = load_rules(&args.common.rules)?;
    let root = root_for(&args.common.root, &set)?;
    if set.manifest.targets == TargetKind::Functions {
        return add_functions(&args, &set, &root);
    }
    let [typed] = args.targets.as_slice() else {
        return Err(user_error(format!(
            "rule set {} takes one model, got {} arguments ({})",
            set.manifest.name,
            args.targets.len(),
            args.targets.join(" ")
        )));
    };
    let model = checkout::resolve_model(&root, &set.manifest, typed).map_err(user_error)?;
    let supported: Vec<String> = {
        let mut m: Vec<String> = set
            .rules
            .iter()
            .flat_map(|r| r.models.iter().cloned())
            .collect();
        m.sort();
        m.dedup();
        m
    };
    if !supported.is_empty() && !supported.contains(&model) {
        let names: Vec<String> = supported
            .iter()
            .map(|m| checkout::display_model(m))
            .collect();
        return Err(user_error(format!(
            "rule set {} has no rules for model {} yet (it has rules for: {})",
            set.manifest.name,
            checkout::display_model(&model),
            names.join(", ")
        )));
    }
    let ranks = parse_int_list("ranks", &args.ranks)?;
    let (layers, why) = match &args.detail_layers {
        Some(text) => {
            let l = parse_int_list("detail-layers", text)?;
            let choice =
                layers::check_explicit(&root, &set.manifest, &model, args.config.as_deref(), &l)
                    .map_err(user_error)?;
            (Some(l), choice)
        }
        // Which layers a rank holds depends on the pipeline layout: each profiled rank
        // chooses at run time (the rules' 1B helpers).
        None => (None, Some(RUN_TIME_LAYERS.to_string())),
    };
    let params = template_params(
        &ranks,
        layers.as_deref(),
        args.step,
        &args.snapshot_dir,
        &args.stacks,
    );
    for name in set.manifest.params.keys() {
        if !params.contains_key(name) {
            return Err(user_error(format!(
                "rule set {} uses parameter {name}, which `instrument add` does not set",
                set.manifest.name
            )));
        }
    }
    let req = AddRequest {
        root: &root,
        rule_set: &set,
        model: Some(&model),
        params: &params,
        partial: args.partial,
    };
    let what = format!("instrument add {}", checkout::display_model(&model));
    let Some(applied) = plan_and_write(&req, &what, args.dry_run)? else {
        return Ok(exit::USER_ERROR);
    };
    let mut err = std::io::stderr().lock();
    match (why, &layers) {
        (Some(reason), Some(l)) => {
            let _ = writeln!(err, "detail layers {}: {reason}", python_tuple(l));
        }
        (Some(reason), None) => {
            let _ = writeln!(err, "detail layers: {reason}");
        }
        (None, _) => {}
    }
    let _ = writeln!(err, "{what}: {applied}, ranks {}", python_set(&ranks));
    Ok(exit::OK)
}

/// Plan `add`, then print the diff or write. `None` when it was refused (the report is
/// printed); otherwise a summary of what was applied and changed.
fn plan_and_write(req: &AddRequest, what: &str, dry_run: bool) -> anyhow::Result<Option<String>> {
    let outcome = session::plan_add(req);
    if !outcome.file_failures.is_empty() || (!req.partial && !outcome.ok()) {
        print_failures_report(&outcome, what);
        return Ok(None);
    }
    let changed: Vec<(String, String, String)> = outcome
        .plans
        .iter()
        .filter(|p| p.before != p.after)
        .map(|p| (p.file.clone(), p.before.clone(), p.after.clone()))
        .collect();
    emit(req.root, &changed, dry_run)?;
    let mut err = std::io::stderr().lock();
    for g in outcome.groups.iter().filter(|g| !g.applies()) {
        let _ = writeln!(err, "skipped group {} (--partial):", g.group);
        for f in &g.failures {
            let _ = writeln!(err, "  {f}");
        }
    }
    let (mut plus, mut minus) = (0, 0);
    for (_, b, a) in &changed {
        let (p, m) = diff::counts(b, a);
        plus += p;
        minus += m;
    }
    let applied = outcome.groups.iter().filter(|g| g.applies()).count();
    let verb = if dry_run { "would change" } else { "changed" };
    let tail = if changed.is_empty() {
        ", already up to date"
    } else {
        ""
    };
    Ok(Some(format!(
        "{applied} of {} groups; {verb} {} file(s) (+{plus} -{minus} lines){tail}",
        outcome.groups.len(),
        changed.len()
    )))
}

/// `add` for a rule set whose targets are functions: select them with the same scan and
/// refusals as the functions-trace JSON, expand the rule templates, plan as usual.
fn add_functions(args: &AddArgs, set: &RuleSet, root: &Path) -> anyhow::Result<u8> {
    use crate::codemod::expand::{self, FunctionTarget};
    use crate::python::scan::Tree;
    use crate::python::select::{self, CompiledPolicy, Selection, Severity};
    let tree = Tree::scan(&[root.join(&set.manifest.source_dir)], None).map_err(user_error)?;
    let forbidden: Vec<String> = set
        .manifest
        .forbid_inside
        .iter()
        .map(|f| f.decorator.clone())
        .collect();
    let inside = select::run_inside_compiled(&tree, &forbidden);
    let selection = Selection {
        forwards: false,
        matches: &args.targets,
        compiled: Some((&inside, CompiledPolicy::Refuse)),
    };
    let (picked, problems) = select::select(&tree, &selection);
    let mut err = std::io::stderr().lock();
    for p in &problems {
        let _ = writeln!(err, "{p}");
    }
    if problems.iter().any(|p| p.severity == Severity::Error) {
        let _ = writeln!(
            err,
            "instrument add --rules {}: nothing was changed",
            set.manifest.name
        );
        return Ok(exit::USER_ERROR);
    }
    let targets: Vec<FunctionTarget> = picked
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
        .collect();
    let expanded = expand::for_functions(set, &targets).map_err(user_error)?;
    let params = BTreeMap::new();
    let req = AddRequest {
        root,
        rule_set: &expanded,
        model: None,
        params: &params,
        partial: args.partial,
    };
    let what = format!("instrument add --rules {}", set.manifest.name);
    drop(err);
    let Some(applied) = plan_and_write(&req, &what, args.dry_run)? else {
        return Ok(exit::USER_ERROR);
    };
    eprintln!("{what}: {} function(s); {applied}", targets.len());
    Ok(exit::OK)
}

pub fn remove(args: RemoveArgs) -> anyhow::Result<u8> {
    let root = scan_root(&args.root)?;
    let only = match &args.rules {
        Some(spec) => Some(load_rules(spec)?.manifest.name),
        None => None,
    };
    let (plans, failures) = session::plan_remove(&root, only.as_deref(), args.force);
    if !failures.is_empty() {
        let mut err = std::io::stderr().lock();
        for f in &failures {
            let _ = writeln!(err, "error: {f}");
        }
        let _ = writeln!(err, "instrument remove: nothing was changed");
        return Ok(exit::USER_ERROR);
    }
    let changed: Vec<(String, String, String)> = plans
        .iter()
        .map(|p| (p.file.clone(), p.before.clone(), p.after.clone()))
        .collect();
    emit(&root, &changed, args.dry_run)?;
    let verb = if args.dry_run {
        "would restore"
    } else {
        "restored"
    };
    eprintln!("instrument remove: {verb} {} file(s)", changed.len());
    Ok(exit::OK)
}

pub fn status(args: StatusArgs) -> anyhow::Result<u8> {
    let root = scan_root(&args.root)?;
    let found = session::scan(&root);
    let sets: BTreeMap<String, RuleSet> = rules::load::embedded_names()
        .into_iter()
        .filter_map(|n| {
            rules::load_rule_set(&n)
                .ok()
                .map(|s| (s.manifest.name.clone(), s))
        })
        .collect();
    let group_of = |set: &str, rule: &str| -> String {
        sets.get(set)
            .and_then(|s| {
                s.rules
                    .iter()
                    .find(|r| r.id == rule)
                    .map(|r| r.group.clone())
            })
            .unwrap_or_else(|| rule.split('.').next().unwrap_or(rule).to_string())
    };
    if args.json {
        let files: Vec<serde_json::Value> = found
            .iter()
            .map(|f| {
                let regions: Vec<serde_json::Value> = f
                    .regions
                    .iter()
                    .map(|r| {
                        serde_json::json!({
                            "rule_set": r.rule_set,
                            "rule": r.rule,
                            "group": group_of(&r.rule_set, &r.rule),
                            "line": r.marker_line + 1,
                            "params": r.params.iter().cloned().collect::<BTreeMap<String, String>>(),
                            "edited": !r.intact,
                        })
                    })
                    .collect();
                serde_json::json!({
                    "file": f.file,
                    "regions": regions,
                    "error": f.error.as_ref().map(|e| e.to_string()),
                })
            })
            .collect();
        let doc = serde_json::json!({ "root": root.display().to_string(), "instrumented": !found.is_empty(), "files": files });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(exit::OK);
    }
    if found.is_empty() {
        println!("no instrumentation in {}", root.display());
        return Ok(exit::OK);
    }
    for f in &found {
        if let Some(e) = &f.error {
            println!("{}: broken markers, {e}", f.file);
            continue;
        }
        let mut groups: Vec<String> = Vec::new();
        let mut params: BTreeMap<String, String> = BTreeMap::new();
        let mut sets: Vec<String> = Vec::new();
        for r in &f.regions {
            let g = group_of(&r.rule_set, &r.rule);
            if !groups.contains(&g) {
                groups.push(g);
            }
            if !sets.contains(&r.rule_set) {
                sets.push(r.rule_set.clone());
            }
            params.extend(r.params.iter().cloned());
        }
        let edited = f.regions.iter().filter(|r| !r.intact).count();
        let p: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{}={v}", k.to_lowercase()))
            .collect();
        let edited = if edited > 0 {
            format!(", {edited} edited by hand")
        } else {
            String::new()
        };
        let params = if p.is_empty() {
            String::new()
        } else {
            format!("; {}", p.join(", "))
        };
        println!(
            "{}: {} groups {} ({} regions{edited}){params}",
            f.file,
            sets.join("+"),
            groups.join(", "),
            f.regions.len(),
        );
    }
    Ok(exit::OK)
}

pub fn check(args: CheckArgs) -> anyhow::Result<u8> {
    let root = scan_root(&args.root)?;
    let found = session::scan(&root);
    let mut out = std::io::stdout().lock();
    let mut count = 0;
    for f in &found {
        if let Some(e) = &f.error {
            let _ = writeln!(
                out,
                "{}:{}: broken instrument markers: {}",
                f.file, e.line, e.message
            );
            count += 1;
        }
        for r in &f.regions {
            let _ = writeln!(
                out,
                "{}:{}: instrument {} {}",
                f.file,
                r.marker_line + 1,
                r.rule_set,
                r.rule
            );
            count += 1;
        }
    }
    if count == 0 {
        return Ok(exit::OK);
    }
    drop(out);
    eprintln!(
        "instrument check: {count} instrumented region(s) in {} file(s); run `instrument remove` before committing",
        found.len()
    );
    Ok(exit::FOUND)
}
