//! The command line: argument definitions (clap derive) and dispatch. Kept thin:
//! every subcommand hands over to a library module.

use std::process::ExitCode;

use std::io::IsTerminal;

use std::ffi::OsString;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::exit;

pub mod codemod;
pub mod log;
pub mod nsys;
pub mod output;
pub mod report;
pub mod rules;
pub mod skills;
pub mod snapshot;

/// `--top N`'s default in every reader that lists rows (sites, kernels, ranges): one number,
/// so the same flag means the same in `snapshot` and `nsys report`.
pub const TOP: usize = 10;

#[derive(Parser, Debug)]
#[command(
    name = "instrument",
    version,
    about = "Reversible memory-print instrumentation for pithtrain, and readers for what it produces"
)]
pub struct Cli {
    /// When to colour output: auto (a terminal, and NO_COLOR unset), always or never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// The colour decision for this run, made once from `--color` and `NO_COLOR`.
#[derive(Debug, Clone, Copy)]
pub struct Colour(ColorChoice);

impl Colour {
    /// Whether what goes to stdout is coloured.
    pub fn stdout(self) -> bool {
        match self.0 {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                // https://no-color.org: any non-empty NO_COLOR turns colour off.
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::io::stdout().is_terminal()
            }
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to write completions for.
    pub shell: clap_complete::Shell,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Insert the memory prints (or another rule set) into a pithtrain checkout.
    Add(codemod::AddArgs),
    /// Take every inserted region out again, restoring the original bytes.
    Remove(codemod::RemoveArgs),
    /// Say which groups are in which files, with which ranks and layers.
    Status(codemod::StatusArgs),
    /// Exit 1 and list file:line for every instrumented region (for pre-commit and CI).
    Check(codemod::CheckArgs),
    /// List every rule with its id, group, target and anchor.
    Rules(rules::RulesArgs),
    /// Show where each rule's anchor resolves in a checkout, before anything is written.
    Explain(rules::ExplainArgs),
    /// Check every rule's own examples.
    TestRules(rules::TestRulesArgs),
    /// Read a PyTorch memory snapshot (or a directory of per-rank snapshots) and say where the memory went.
    Snapshot(snapshot::SnapshotArgs),
    /// Nsight Systems helpers: functions-trace JSON, the profile command, and the report.
    #[command(subcommand)]
    Nsys(nsys::NsysCommand),
    /// Read what an instrumented run printed: per rank and across ranks, as text, JSON or HTML.
    Log(log::LogArgs),
    /// One run's logs and snapshots joined per rank and per schedule event: the printed
    /// value beside the snapshot's, findings first.
    Report(report::ReportArgs),
    /// Install instrument's skills into a checkout's .agents/skills/ for pithtrain's agents, or remove them.
    #[command(subcommand)]
    Skills(skills::SkillsCommand),
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(CompletionsArgs),
}

/// The rule set `add` will use, when the arguments are an `add` command: its `--rules`
/// value, else the default. Its parameters are flags of `add`, so they are known before
/// the arguments are parsed.
fn add_rules(args: &[OsString]) -> Option<String> {
    let words: Vec<&str> = args.iter().skip(1).filter_map(|a| a.to_str()).collect();
    let mut i = 0;
    // Global options before the subcommand.
    while i < words.len() && words[i].starts_with("--color") {
        i += if words[i] == "--color" { 2 } else { 1 };
    }
    if words.get(i) != Some(&"add") {
        return None;
    }
    let rest = &words[i + 1..];
    for (k, w) in rest.iter().enumerate() {
        if *w == "--" {
            break;
        }
        if *w == "--rules" {
            return rest.get(k + 1).map(|v| v.to_string());
        }
        if let Some(v) = w.strip_prefix("--rules=") {
            return Some(v.to_string());
        }
    }
    Some(crate::rules::DEFAULT_SET.to_string())
}

/// The command line, with the parameter flags of `manifest`'s rule set on `add`.
pub fn command(manifest: Option<&crate::rules::Manifest>) -> clap::Command {
    let cmd = Cli::command();
    match manifest {
        Some(m) => cmd.mut_subcommand("add", |add| add.args(codemod::param_args(m))),
        None => cmd,
    }
}

impl Command {
    /// Whether the command parses Python and plans or checks code changes.
    fn plans_code(&self) -> bool {
        matches!(
            self,
            Command::Add(_)
                | Command::Remove(_)
                | Command::Status(_)
                | Command::Check(_)
                | Command::Rules(_)
                | Command::Explain(_)
                | Command::TestRules(_)
        )
    }
}

/// Parse the arguments, run the command, print errors as one line, return the exit code.
pub fn run() -> ExitCode {
    crate::kept::process_ends_after_command();
    let args: Vec<OsString> = std::env::args_os().collect();
    let rules_spec = add_rules(&args);
    let manifest = rules_spec.as_deref().map(|spec| {
        let m = crate::rules::load::load_manifest(spec)?;
        codemod::check_param_flags(&m, spec).map(|()| m)
    });
    let manifest = match manifest {
        None => None,
        Some(Ok(m)) => Some(m),
        Some(Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(exit::USER_ERROR);
        }
    };
    let parsed = command(manifest.as_ref())
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let cli = match parsed {
        Ok((mut cli, matches)) => {
            if let (Command::Add(add), Some(m), Some(("add", sub))) =
                (&mut cli.command, &manifest, matches.subcommand())
            {
                add.flags = codemod::given_flags(m, sub);
            }
            cli
        }
        Err(e) if e.kind() == clap::error::ErrorKind::UnknownArgument && manifest.is_some() => {
            // A flag the chosen rule set does not declare: say which flags it has.
            let m = manifest.as_ref().expect("checked");
            let arg = e
                .get(clap::error::ContextKind::InvalidArg)
                .map(|v| v.to_string())
                .unwrap_or_default();
            let flags: Vec<String> = m
                .params
                .iter()
                .map(|(n, p)| format!("{n} ({})", crate::codemod::params::shown(n, p)))
                .collect();
            eprintln!(
                "error: {arg}: rule set {} has no parameter it sets and add has no such flag (its parameters: {}; `instrument add --rules {} --help` lists the flags)",
                m.name,
                if flags.is_empty() {
                    "none".to_string()
                } else {
                    flags.join(", ")
                },
                rules_spec.as_deref().unwrap_or(&m.name)
            );
            return ExitCode::from(exit::USER_ERROR);
        }
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USER_ERROR
            } else {
                exit::OK
            };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let colour = Colour(cli.color);
    if cli.command.plans_code() {
        // Their many small allocations run faster on mimalloc; the readers' large ones
        // stay on the system allocator (see `alloc`).
        crate::alloc::mimalloc_from_now();
    }
    let result = match cli.command {
        Command::Add(args) => codemod::add(args, colour),
        Command::Remove(args) => codemod::remove(args, colour),
        Command::Status(args) => codemod::status(args),
        Command::Check(args) => codemod::check(args),
        Command::Rules(args) => rules::list(args),
        Command::Explain(args) => rules::explain(args),
        Command::TestRules(args) => rules::test_rules(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Nsys(cmd) => nsys::run(cmd),
        Command::Log(args) => log::run(args),
        Command::Report(args) => report::run(args),
        Command::Skills(cmd) => skills::run(cmd),
        Command::Completions(args) => {
            // The default rule set's parameters are `add`'s flags in the completions.
            let manifest = crate::rules::load::load_manifest(crate::rules::DEFAULT_SET).ok();
            clap_complete::generate(
                args.shell,
                &mut command(manifest.as_ref()),
                "instrument",
                &mut std::io::stdout(),
            );
            Ok(exit::OK)
        }
    };
    // The one place an error becomes an exit code (see `exit`).
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(err.code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag and argument of the codemod commands says what it is for.
    #[test]
    fn every_flag_has_help() {
        let manifest = crate::rules::load::load_manifest(crate::rules::DEFAULT_SET).unwrap();
        let cli = command(Some(&manifest));
        for sub in cli.get_subcommands() {
            if matches!(sub.get_name(), "snapshot" | "nsys") {
                continue;
            }
            for arg in sub.get_arguments() {
                if matches!(arg.get_id().as_str(), "help" | "version") {
                    continue;
                }
                assert!(
                    arg.get_help().is_some_and(|h| !h.to_string().is_empty()),
                    "`instrument {} {}` has no help text",
                    sub.get_name(),
                    arg.get_id()
                );
            }
        }
        for arg in cli.get_arguments() {
            assert!(arg.get_help().is_some(), "--{} has no help", arg.get_id());
        }
    }

    /// A parameter flag that is one of `add`'s own (as clap defines `add`) is refused; any
    /// other is not.
    #[test]
    fn a_parameter_may_not_take_one_of_adds_own_flags() {
        let manifest = crate::rules::load::load_manifest(crate::rules::DEFAULT_SET).unwrap();
        let param = manifest.params.keys().next().unwrap().clone();
        let with = |flag: &str| {
            let mut m = manifest.clone();
            m.params.get_mut(&param).unwrap().flag = Some(flag.to_string());
            codemod::check_param_flags(&m, "memory-prints").map_err(|e| e.to_string())
        };
        let own = "--param, --config, --root, --rules, --dry-run, --partial, --force, --json, --help, --color";
        for flag in ["rules", "dry-run", "help", "color"] {
            assert_eq!(
                with(flag),
                Err(format!(
                    "embedded:memory-prints/ruleset.toml: [params.{param}] flag = {flag:?} is one of add's own flags ({own})"
                ))
            );
        }
        assert!(with("snapshot-dir").is_ok());
        assert!(with("ranks-x").is_ok());
    }
}
