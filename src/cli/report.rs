//! `instrument report`: argument definitions and glue to `crate::report`.

use std::path::PathBuf;

use clap::Args;

use crate::exit::{Error, OK};
use crate::rules::{DEFAULT_SET, load_with_prints};

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
    #[arg(long, value_name = "FILE", conflicts_with = "diff")]
    pub html: Option<PathBuf>,
    /// Run the checkout's memory estimator (as `log --estimate` does) and set its state at
    /// each event beside the measured one, bucket by bucket.
    #[arg(long)]
    pub estimate: bool,
    /// With --estimate: the checkout whose estimator runs (default: found from the run's model
    /// path, else the current folder).
    #[arg(long, value_name = "CHECKOUT", requires = "estimate")]
    pub root: Option<PathBuf>,
    /// Compare with the run these folders hold (after a change; given after the run before):
    /// per rank and schedule event, the peak inside it, the live memory at its end and that
    /// memory by component; with --estimate also the estimator's state and its components.
    #[arg(long, num_args = 1.., value_name = "AFTER")]
    pub diff: Vec<PathBuf>,
    /// With --diff: exit 1 when a figure grew by more than PCT per cent; exit 2 when the runs
    /// do not pair (a rank or an event on one side only).
    #[arg(long, value_name = "PCT", requires = "diff")]
    pub gate: Option<crate::gate::Gate>,
    /// The rule set whose print declarations read the logs.
    #[arg(long, default_value = DEFAULT_SET, value_name = "NAME-or-DIR")]
    pub rules: String,
}

pub fn run(args: ReportArgs) -> Result<u8, Error> {
    if let Some(h) = &args.html {
        super::output::check_folder(h, "the HTML page")?;
    }
    let set = load_with_prints(&args.rules)?;
    if !args.diff.is_empty() {
        // Each run's estimate is its own checkout's (found from its model path) unless
        // --root names one for both.
        let root = args.root.as_deref();
        let before = crate::report::report(&set, &args.paths, args.estimate, root)?;
        let after = crate::report::report(&set, &args.diff, args.estimate, root)?;
        let d = crate::report::diff::compare(&before, &after, args.gate);
        super::output::emit(&d, args.json, crate::report::diff::render, None, |_| {
            String::new()
        })?;
        return Ok(if args.gate.is_some() {
            d.gate.code()
        } else {
            OK
        });
    }
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
