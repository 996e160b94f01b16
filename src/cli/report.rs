//! `instrument report`: argument definitions and glue to `crate::report`.

use std::path::PathBuf;

use clap::Args;

use crate::exit::{Error, OK};
use crate::rules::{DEFAULT_SET, load_rule_set_lazy};

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The run's folders (or files): the node logs, the ranks' step and out-of-memory
    /// snapshots (memory_snapshot_rank{R}_step{S}.pickle, memory_snapshot_rank{R}.pickle).
    #[arg(required = true, value_name = "RUN_DIR")]
    pub paths: Vec<PathBuf>,
    /// Print the report as JSON (schema `instrument.report/1`).
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML page to FILE: per rank a schedule strip (the peak
    /// inside each event, live at its end, the print, the estimate), every rank on one scale.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Run the checkout's memory estimator (as `log --estimate` does) and set its state at
    /// each event beside the measured one, bucket by bucket.
    #[arg(long)]
    pub estimate: bool,
    /// With --estimate: the checkout whose estimator runs (default: found from the run's model
    /// path, else the current folder).
    #[arg(long, value_name = "CHECKOUT", requires = "estimate")]
    pub root: Option<PathBuf>,
    /// The rule set whose print declarations read the logs.
    #[arg(long, default_value = DEFAULT_SET, value_name = "NAME-or-DIR")]
    pub rules: String,
}

pub fn run(args: ReportArgs) -> Result<u8, Error> {
    if let Some(h) = &args.html {
        super::output::check_folder(h, "the HTML page")?;
    }
    let set = load_rule_set_lazy(&args.rules)?;
    let r = crate::report::report(&set, &args.paths, args.estimate, args.root.as_deref())?;
    super::output::emit(
        &r,
        args.json,
        crate::report::text::render,
        args.html.as_deref(),
        crate::report::html::render,
    )?;
    Ok(OK)
}
