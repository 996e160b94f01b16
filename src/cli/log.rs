//! `instrument log`: argument definitions and glue to `crate::log`.

use std::path::PathBuf;

use clap::Args;

use crate::exit::{OK, user_error};
use crate::log::{Options, html, nothing_read, read, text};
use crate::rules::{DEFAULT_SET, load_rule_set_lazy};

#[derive(Args, Debug)]
pub struct LogArgs {
    /// Console logs (one per node; gzip is fine), torchrun --log-dir folders, or `-` for
    /// standard input.
    #[arg(required = true, value_name = "FILE|DIR")]
    pub paths: Vec<PathBuf>,
    /// Only this rank (repeatable).
    #[arg(long = "rank", value_name = "N")]
    pub ranks: Vec<i64>,
    /// Print the report as JSON (schema: docs/log.md).
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML page with plots to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// The rule set whose print declarations read the lines: a built-in name or a folder.
    #[arg(long, default_value = DEFAULT_SET, value_name = "NAME-or-DIR")]
    pub rules: String,
}

pub fn run(args: LogArgs) -> anyhow::Result<u8> {
    if let Some(h) = &args.html {
        super::output::check_folder(h, "the HTML page")?;
    }
    // Only the print declarations are read: no rule's code patterns need compiling.
    let set = load_rule_set_lazy(&args.rules).map_err(user_error)?;
    let opts = Options {
        ranks: args.ranks.clone(),
    };
    let report = read(&set, &args.paths, &opts).map_err(user_error)?;
    if report.totals.prints == 0 {
        return Err(user_error(nothing_read(&report)));
    }
    if report.ranks.is_empty() {
        let asked: Vec<String> = args.ranks.iter().map(i64::to_string).collect();
        return Err(user_error(format!(
            "rank {} printed nothing in {} file(s) ({} prints from other ranks)",
            asked.join(", "),
            report.totals.files,
            report.totals.prints
        )));
    }
    super::output::emit(
        &report,
        args.json,
        text::render,
        args.html.as_deref(),
        html::render,
    )?;
    Ok(OK)
}
