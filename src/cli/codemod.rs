//! `instrument add | remove | status | check`: the flags, one engine call each, and how
//! the outcome is shown. Nothing here decides anything the engine could.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::Colour;
use crate::codemod::add::{self, AddOptions, AddReport, Verdict};
use crate::codemod::diff;
use crate::codemod::remove::{self, RemoveOptions};
use crate::codemod::status::{self, TreeStatus};
use crate::exit::{self, Error};
use crate::rules::{DEFAULT_SET, Manifest, ParamDefault, ParamKind};

#[derive(Args, Debug)]
pub struct AddArgs {
    /// The model, as named in pithtrain/models/ (`qwen3-moe`, `deepseek-v2`, ...); with
    /// `--rules nvtx`, the functions to wrap (`*.forward`, `DualPipeV.step`, `layer_forward`);
    /// none for a rule set that works on the checkout as a whole.
    #[arg(num_args = 0..)]
    pub targets: Vec<String>,
    /// Set a rule-set parameter that has no flag of its own (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = parse_param)]
    pub params: Vec<(String, String)>,
    /// A Hugging Face config.json to evaluate the MoE-vs-dense condition with.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The checkout (default: the current folder or the first parent holding pithtrain/).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// A built-in rule set name or a folder with ruleset.toml.
    #[arg(long, default_value = DEFAULT_SET, value_name = "NAME-or-DIR")]
    pub rules: String,
    /// Print the diff instead of writing.
    #[arg(long)]
    pub dry_run: bool,
    /// Apply the groups whose anchors all resolve and list the rest, instead of all or nothing.
    #[arg(long)]
    pub partial: bool,
    /// Write files that are read-only too (they keep their mode).
    #[arg(long)]
    pub force: bool,
    /// Print the report as JSON (schema `instrument.add/1`) instead of text.
    #[arg(long)]
    pub json: bool,
    /// The rule set's parameter flags given (`ranks` -> `3,14`): built from its
    /// `[params]` (see `param_args`), read from the matches by `cli::run`.
    #[arg(skip)]
    pub flags: BTreeMap<String, String>,
}

/// The flags of `add` that a rule set's parameters declare (`[params.RANKS] flag = "ranks"`
/// is `--ranks`), with the rule set's help; defaults are the rule set's, applied by the
/// engine (a flag not given is not set here).
pub fn param_args(manifest: &Manifest) -> Vec<clap::Arg> {
    manifest
        .params
        .iter()
        .filter_map(|(name, spec)| {
            let flag = spec.flag.as_ref()?;
            let value_name = match spec.kind {
                ParamKind::IntSet | ParamKind::IntTuple => "LIST".to_string(),
                ParamKind::Int => "N".to_string(),
                ParamKind::Path => "PATH".to_string(),
                ParamKind::String => "TEXT".to_string(),
                ParamKind::Choice => spec.choices.join("|"),
            };
            let default = match &spec.default {
                Some(ParamDefault::Text(t)) => format!(" (default: {t})"),
                Some(ParamDefault::Computed { .. }) => {
                    " (default: worked out from the checkout)".to_string()
                }
                _ => String::new(),
            };
            let mut help = spec.help.clone();
            if let Some(first) = help.get(..1) {
                help = format!("{}{}", first.to_uppercase(), &help[1..]);
            }
            Some(
                clap::Arg::new(flag.clone())
                    .long(flag.clone())
                    .value_name(value_name)
                    .allow_hyphen_values(true)
                    .action(clap::ArgAction::Set)
                    .help(format!("{help}{default} [{name}]"))
                    .help_heading(format!("Parameters of rule set {}", manifest.name)),
            )
        })
        .collect()
}

/// The rule set `spec` (its manifest) refused when a parameter's flag is one of `add`'s
/// own, as clap defines `add` (its flags, `--help`, the global ones): the flag could not
/// be told apart. The rule layer sits below the command line and cannot ask clap, so the
/// command line checks here, for `add` and for the commands that review a set.
pub fn check_param_flags(manifest: &Manifest, spec: &str) -> Result<(), crate::rules::Error> {
    let cli = super::command(None);
    let Some(add) = cli.find_subcommand("add") else {
        return Ok(());
    };
    let mut own: Vec<&str> = add.get_arguments().filter_map(|a| a.get_long()).collect();
    own.push("help");
    own.extend(cli.get_arguments().filter_map(|a| a.get_long()));
    for (name, p) in &manifest.params {
        if let Some(flag) = &p.flag
            && own.contains(&flag.as_str())
        {
            return Err(crate::rules::Error::invalid(format!(
                "{}/ruleset.toml: [params.{name}] flag = {flag:?} is one of add's own flags (--{})",
                crate::rules::load::origin_of(spec),
                own.join(", --")
            )));
        }
    }
    Ok(())
}

/// The values given for the flags of `param_args`, by flag.
pub fn given_flags(manifest: &Manifest, matches: &clap::ArgMatches) -> BTreeMap<String, String> {
    manifest
        .params
        .values()
        .filter_map(|spec| spec.flag.as_ref())
        .filter_map(|flag| {
            matches
                .try_get_one::<String>(flag)
                .ok()
                .flatten()
                .map(|v| (flag.clone(), v.clone()))
        })
        .collect()
}

/// A `--param` that is not `NAME=VALUE` (clap says it, exit 2).
#[derive(Debug, thiserror::Error)]
#[error("`{0}`: expected NAME=VALUE")]
pub struct NotAParam(String);

fn parse_param(text: &str) -> Result<(String, String), NotAParam> {
    text.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| NotAParam(text.to_string()))
}

#[derive(Args, Debug)]
pub struct RemoveArgs {
    /// Files or folders to take regions out of (default: the whole checkout).
    pub paths: Vec<PathBuf>,
    /// The checkout (default: the first folder at or above the current one that is one).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Only take out this rule set's regions (default: every instrument region).
    #[arg(long, value_name = "NAME-or-DIR")]
    pub rules: Option<String>,
    /// Print the diff instead of writing.
    #[arg(long)]
    pub dry_run: bool,
    /// Take out regions even if they were edited by hand (their originals are restored),
    /// and write files that are read-only (they keep their mode).
    #[arg(long)]
    pub force: bool,
    /// Print the report as JSON (schema `instrument.remove/1`) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Files or folders to look at (default: the whole checkout).
    pub paths: Vec<PathBuf>,
    /// The checkout (default: the first folder at or above the current one that is one).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Print the status as JSON (schema `instrument.status/1`).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Files or folders to check, as pre-commit passes them (default: the whole checkout).
    pub paths: Vec<PathBuf>,
    /// The checkout (default: the first folder at or above the current one that is one).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Print the findings as JSON (schema `instrument.status/1`).
    #[arg(long)]
    pub json: bool,
}

fn print_json<T: serde::Serialize>(value: &T) -> Result<(), Error> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Print diffs, coloured when asked.
fn print_diffs(changes: &[diff::FileChange], colour: Colour) {
    let mut out = std::io::stdout().lock();
    for c in changes {
        if colour.stdout() {
            let _ = out.write_all(diff::colorize(&c.diff).as_bytes());
        } else {
            let _ = out.write_all(c.diff.as_bytes());
        }
    }
}

pub fn add(args: AddArgs, colour: Colour) -> Result<u8, Error> {
    let opts = AddOptions {
        rules: args.rules,
        root: args.root,
        targets: args.targets,
        flags: args.flags,
        params: args.params,
        config: args.config,
        partial: args.partial,
        dry_run: args.dry_run,
        force: args.force,
    };
    let report = add::run(&opts)?;
    let code = if report.verdict == Verdict::Refused {
        exit::USER_ERROR
    } else {
        exit::OK
    };
    if args.json {
        print_json(&report)?;
        return Ok(code);
    }
    if report.dry_run {
        print_diffs(&report.changes, colour);
    }
    render_add(&report);
    // The process ends here: freeing every planned text and tree is wasted work.
    std::mem::forget(report);
    Ok(code)
}

fn render_add(r: &AddReport) {
    let mut err = std::io::stderr().lock();
    for w in &r.warnings {
        let _ = writeln!(err, "{w}");
    }
    for s in &r.selection {
        let _ = writeln!(err, "{s}");
    }
    if r.verdict == Verdict::Refused {
        for f in &r.failures {
            let _ = writeln!(err, "error: {f}");
        }
        for g in &r.groups {
            let state = if g.applies() {
                "would apply".to_string()
            } else if !g.needs.is_empty() && g.failures.is_empty() {
                format!("cannot apply (needs group {})", g.needs.join(", "))
            } else if g.skipped_for_dependency {
                "cannot apply (needs a group that cannot)".to_string()
            } else {
                "cannot apply".to_string()
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
        for p in &r.problems {
            let _ = writeln!(err, "error: {p}");
        }
        let _ = writeln!(
            err,
            "{}: {}",
            r.command,
            r.advice.as_deref().unwrap_or("nothing was changed")
        );
        return;
    }
    for g in r.groups.iter().filter(|g| !g.applies()) {
        if !g.needs.is_empty() && g.failures.is_empty() {
            let why = g
                .needs_why
                .as_deref()
                .map_or(String::new(), |w| format!(": {w}"));
            let _ = writeln!(
                err,
                "skipped group {} (--partial): it requires group {}, which does not apply{why}",
                g.group,
                g.needs.join(", ")
            );
            continue;
        }
        let _ = writeln!(err, "skipped group {} (--partial):", g.group);
        for f in &g.failures {
            let _ = writeln!(err, "  {f}");
        }
    }
    for n in &r.notes {
        let _ = writeln!(err, "{n}");
    }
    let (plus, minus) = r
        .changes
        .iter()
        .fold((0, 0), |(p, m), c| (p + c.added, m + c.removed));
    let verb = if r.dry_run { "would change" } else { "changed" };
    let tail = if r.verdict == Verdict::UpToDate {
        ", already up to date"
    } else {
        ""
    };
    let what = if r.functions.is_empty() {
        String::new()
    } else {
        format!(" {} function(s);", r.functions.len())
    };
    // The values the user set, as the inserted code has them.
    let params: Vec<String> = r
        .params
        .iter()
        .filter(|p| p.origin == crate::codemod::params::Origin::Flag)
        .map(|p| {
            format!(
                ", {} {}",
                p.name.to_lowercase().replace('_', " "),
                p.literal
            )
        })
        .collect();
    let _ = writeln!(
        err,
        "{}:{what} {} of {} groups; {verb} {} file(s) (+{plus} -{minus} lines){tail}{}",
        r.command,
        r.applied_groups(),
        r.groups.len(),
        r.changes.len(),
        params.join("")
    );
}

pub fn remove(args: RemoveArgs, colour: Colour) -> Result<u8, Error> {
    let opts = RemoveOptions {
        root: args.root,
        paths: args.paths,
        rules: args.rules,
        force: args.force,
        dry_run: args.dry_run,
    };
    let report = remove::run(&opts)?;
    let code = if report.refused {
        exit::USER_ERROR
    } else {
        exit::OK
    };
    if args.json {
        print_json(&report)?;
        return Ok(code);
    }
    let mut err = std::io::stderr().lock();
    for w in &report.warnings {
        let _ = writeln!(err, "{w}");
    }
    if let Some(r) = &report.recovered {
        let _ = writeln!(err, "instrument remove: {r}");
    }
    if report.cleaned > 0 {
        let _ = writeln!(
            err,
            "instrument remove: deleted {} temporary file(s) a killed run left",
            report.cleaned
        );
    }
    if report.refused {
        for f in &report.failures {
            let _ = writeln!(err, "error: {f}");
        }
        let _ = writeln!(err, "instrument remove: nothing was changed");
        return Ok(code);
    }
    drop(err);
    if report.dry_run {
        print_diffs(&report.changes, colour);
    }
    let verb = if report.dry_run {
        "would restore"
    } else {
        "restored"
    };
    eprintln!("instrument remove: {verb} {} file(s)", report.changes.len());
    Ok(code)
}

fn scan(root: Option<PathBuf>, paths: &[PathBuf]) -> Result<TreeStatus, Error> {
    let scope = status::scope(root.as_deref(), paths)?;
    let lock = crate::codemod::lock::lock(&scope.root, crate::codemod::lock::Mode::Shared)?;
    if let Some(w) = &lock.warning {
        eprintln!("{w}");
    }
    Ok(status::scan(&scope))
}

/// The lines every reader of a tree's state needs: an interrupted run, leftovers.
fn leftovers(s: &TreeStatus) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(i) = &s.interrupted {
        out.push(match &i.error {
            Some(e) => format!("{e}; delete it once the files are as they should be"),
            None => format!(
                "{}: an interrupted `{}` is half done ({} file(s): {}); run `{}` again to finish it",
                crate::codemod::transaction::JOURNAL,
                i.command,
                i.files.len(),
                i.files.join(", "),
                i.command
            ),
        });
    }
    for t in &s.stale_temps {
        out.push(format!(
            "{t}: a temporary file a killed run left; the next `instrument add` or `remove` deletes it"
        ));
    }
    out
}

pub fn status(args: StatusArgs) -> Result<u8, Error> {
    let s = scan(args.root, &args.paths)?;
    if args.json {
        print_json(&s)?;
        return Ok(exit::OK);
    }
    for l in leftovers(&s) {
        println!("{l}");
    }
    if s.files.is_empty() {
        println!("no instrumentation in {}", s.root);
        return Ok(exit::OK);
    }
    if !s.models.is_empty() {
        println!("model: {}", s.models.join(", "));
    }
    for f in &s.files {
        if let Some(e) = &f.error {
            println!(
                "{}: broken markers, line {}: {e}",
                f.file,
                f.error_line.unwrap_or(0)
            );
            continue;
        }
        let mut groups: Vec<&str> = Vec::new();
        let mut sets: Vec<&str> = Vec::new();
        let mut params: BTreeMap<&str, &str> = BTreeMap::new();
        for r in &f.regions {
            if !groups.contains(&r.group.as_str()) {
                groups.push(&r.group);
            }
            if !sets.contains(&r.rule_set.as_str()) {
                sets.push(&r.rule_set);
            }
            params.extend(r.params.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        }
        groups.sort_by_key(|g| group_key(g));
        let edited = f.regions.iter().filter(|r| r.edited).count();
        let edited = if edited > 0 {
            format!(", {edited} edited by hand")
        } else {
            String::new()
        };
        // `None` in the code: the inserted code decides at run time.
        let p: Vec<String> = params
            .iter()
            .map(|(k, v)| match *v {
                "None" => format!("{} chosen at run time", k.to_lowercase()),
                v => format!("{}={v}", k.to_lowercase()),
            })
            .collect();
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

/// How groups sort: by their leading number, then the rest (`2` before `10`, `5` before
/// `5B`).
fn group_key(group: &str) -> (u64, String) {
    let digits: String = group.chars().take_while(char::is_ascii_digit).collect();
    (
        digits.parse().unwrap_or(u64::MAX),
        group[digits.len()..].to_string(),
    )
}

pub fn check(args: CheckArgs) -> Result<u8, Error> {
    let s = scan(args.root, &args.paths)?;
    let code = if s.dirty() { exit::FOUND } else { exit::OK };
    if args.json {
        print_json(&s)?;
        return Ok(code);
    }
    let mut out = std::io::stdout().lock();
    let mut count = 0;
    for f in &s.files {
        if let Some(e) = &f.error {
            let _ = writeln!(
                out,
                "{}:{}: broken instrument markers: {e}",
                f.file,
                f.error_line.unwrap_or(0)
            );
            count += 1;
        }
        for r in &f.regions {
            let _ = writeln!(
                out,
                "{}:{}: instrument {} {}",
                f.file, r.line, r.rule_set, r.rule
            );
            count += 1;
        }
    }
    for l in leftovers(&s) {
        let _ = writeln!(out, "{l}");
    }
    drop(out);
    if code == exit::OK {
        return Ok(code);
    }
    let mut found = Vec::new();
    if count > 0 {
        found.push(format!(
            "{count} instrumented region(s) in {} file(s)",
            s.files.len()
        ));
    }
    if let Some(i) = &s.interrupted {
        found.push(format!("an interrupted `{}`", i.command));
    }
    if !s.stale_temps.is_empty() {
        found.push(format!(
            "{} leftover temporary file(s)",
            s.stale_temps.len()
        ));
    }
    eprintln!(
        "instrument check: {}; run `instrument remove` before committing",
        found.join(", ")
    );
    Ok(code)
}
