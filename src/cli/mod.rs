//! The command line: argument definitions (clap derive) and dispatch. Kept thin:
//! every subcommand hands over to a library module.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::exit;

pub mod codemod;
pub mod log;
pub mod nsys;
pub mod rules;
pub mod snapshot;

#[derive(Parser, Debug)]
#[command(
    name = "instrument",
    version,
    about = "Reversible memory-print instrumentation for pithtrain, and readers for what it produces"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
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
}

/// Parse the arguments, run the command, print errors as one line, return the exit code.
pub fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
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
    let result = match cli.command {
        Command::Add(args) => codemod::add(args),
        Command::Remove(args) => codemod::remove(args),
        Command::Status(args) => codemod::status(args),
        Command::Check(args) => codemod::check(args),
        Command::Rules(args) => rules::list(args),
        Command::Explain(args) => rules::explain(args),
        Command::TestRules(args) => rules::test_rules(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Nsys(cmd) => nsys::run(cmd),
        Command::Log(args) => log::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            let code = if err.downcast_ref::<exit::UserError>().is_some() {
                exit::USER_ERROR
            } else {
                exit::INTERNAL
            };
            eprintln!("error: {err:#}");
            ExitCode::from(code)
        }
    }
}
