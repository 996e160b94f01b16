//! `instrument log`: argument definitions and glue to `crate::log`.

use std::path::PathBuf;

use clap::Args;

use crate::exit::{Error, OK, user_error};
use crate::gate::Gate;
use crate::log::{Options, add_estimate, diff, html, read, read_side, text};
use crate::rules::{DEFAULT_SET, load_with_prints};

#[derive(Args, Debug)]
pub struct LogArgs {
    /// Console logs (one per node; gzip is fine), torchrun --log-dir folders, or `-` for
    /// standard input; with --diff, the run before the change.
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
    /// Compare with the run these logs hold (after a change; files or folders, given after
    /// the logs before): per rank the peak, where the timelines part, setup costs, saved
    /// tensors per layer.
    #[arg(long, num_args = 1.., value_name = "AFTER")]
    pub diff: Vec<PathBuf>,
    /// With --diff: exit 1 when a rank's peak or a layer's saved activations grew by more
    /// than PCT per cent.
    #[arg(long, value_name = "PCT", requires = "diff")]
    pub gate: Option<Gate>,
    /// Run the checkout's memory estimator (pithtrain's tools/memory_estimator) for the run's
    /// shape and put its figures beside each rank's.
    #[arg(long, conflicts_with = "diff")]
    pub estimate: bool,
    /// With --estimate: the checkout whose estimator runs (default: the checkout the run's
    /// model path points into, else the current folder).
    #[arg(long, value_name = "CHECKOUT", requires = "estimate")]
    pub root: Option<PathBuf>,
    /// With --estimate: where measured and estimated differ by more than PCT per cent of the
    /// estimated peak, the timeline leaves the estimate.
    #[arg(
        long,
        value_name = "PCT",
        default_value_t = crate::log::estimate::DEFAULT_TOLERANCE_PERCENT
    )]
    pub estimate_tolerance: f64,
}

pub fn run(args: LogArgs) -> Result<u8, Error> {
    if let Some(h) = &args.html {
        super::output::check_folder(h, "the HTML page")?;
    }
    if let Some(r) = &args.root
        && !r.is_dir()
    {
        return Err(user_error(format!(
            "--root {}: not a folder (the pithtrain checkout whose estimator runs)",
            r.display()
        )));
    }
    if !(args.estimate_tolerance.is_finite() && args.estimate_tolerance >= 0.0) {
        return Err(user_error(format!(
            "--estimate-tolerance takes a per cent, 0 or more, not {}",
            args.estimate_tolerance
        )));
    }
    let stdin = |p: &Vec<PathBuf>| p.iter().filter(|x| x.as_os_str() == "-").count();
    if stdin(&args.paths) + stdin(&args.diff) > 1 {
        return Err(user_error(
            "`-` (standard input) can be given once: it is one stream",
        ));
    }
    // Only the print declarations are read: no rule's code patterns need compiling.
    let set = load_with_prints(&args.rules)?;
    let opts = Options {
        ranks: args.ranks.clone(),
    };
    if !args.diff.is_empty() {
        return compare(&args, &set, &opts);
    }
    let mut report = read(&set, &args.paths, &opts)?;
    if args.estimate {
        add_estimate(&mut report, args.root.as_deref(), args.estimate_tolerance);
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

/// `BEFORE --diff AFTER`: both sides are read at once on the worker pool (each is bound by
/// reading and scanning its files), then compared.
fn compare(args: &LogArgs, set: &crate::rules::RuleSet, opts: &Options) -> Result<u8, Error> {
    let sides = [(&args.paths, "before: "), (&args.diff, "after: ")];
    let read = crate::par::map(
        &sides,
        |_| 1,
        |(paths, side)| read_side(set, paths, opts, side),
    );
    let Ok([before, after]) = <[_; 2]>::try_from(read) else {
        unreachable!("par::map returns one result per item")
    };
    let (before, after) = (before?, after?);
    let d = diff::compare(&before, &after, args.gate)?;
    super::output::emit(
        &d,
        args.json,
        diff::text::render,
        args.html.as_deref(),
        diff::html::render,
    )?;
    Ok(d.gate.as_ref().map_or(OK, |g| g.code()))
}
