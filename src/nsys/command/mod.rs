//! `instrument nsys command`: the `nsys profile` command for a launch, placed where it records
//! every rank, checked against the installed nsys where there is one.
//!
//! - `launch`    — where nsys goes: first, or inside srun / mpirun, once per node or per task;
//!   what cannot be placed safely is refused with what to write instead;
//! - `launchers` — the launcher tables (`launchers.toml`) and reading srun's and mpirun's options;
//! - `scripts`   — the scripts a launch names, read (never run);
//! - `profiles`  — what nsys records (`profiles.toml`): the guide's default, a trainer's own
//!   capture, the extras on request;
//! - `output`    — the `--output` pattern: one file per node, the folder the report reads;
//! - `installed` — the checks against the installed nsys;
//! - `notes`     — what the command says about itself, each thing once;
//! - `render`    — the command's words, and the command as a shell reads it;
//! - `error`     — why no command could be built.
//!
//! A trainer that starts and stops the capture itself (pithtrain calls `cudaProfilerStart` /
//! `Stop` at `training.nsys_start` / `nsys_stop`) gets its own capture's set, as its table says;
//! `--pytorch=functions-trace` is never added: it would replace the custom functions-trace JSON
//! with nsys's own `pytorch.json`.

pub mod error;
pub mod installed;
pub mod launch;
pub mod launchers;
pub mod notes;
pub mod output;
pub mod profiles;
pub mod render;
pub mod scripts;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use error::CommandError;
pub use installed::{Installed, RECOMMENDED_MIN, help_block, lists_value, parse_version, which};
pub use launch::Placement;
pub use output::Target;
pub use render::{Words, shell_quote};

use installed::Opt;
use launchers::Launchers;
use profiles::{Extra, Profiles, Set, Trainer};

/// Where the capture starts and stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureRange {
    /// As the set says: a trainer's own window where it has one, the whole run otherwise.
    Auto,
    /// Between `cudaProfilerStart` and `cudaProfilerStop`.
    ProfilerApi,
    /// The whole run (nsys's default).
    Whole,
}

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Request {
    /// The `--output` pattern; by default the set's name in the profiles' folder, per node.
    pub out: Option<String>,
    pub trace_json: Option<PathBuf>,
    pub sqlite: bool,
    /// Extras (`profiles.toml` `[extra.NAME]`) asked on (true) or off (false); the others as the
    /// set says.
    pub extras: BTreeMap<String, bool>,
    pub capture_range: CaptureRange,
    /// Set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` for the profiled run.
    pub expandable_segments: bool,
    /// An explicit nsys binary; otherwise `nsys` is looked up on PATH.
    pub nsys: Option<PathBuf>,
    pub launch: Vec<String>,
}

/// The command, ready to print or run, and what was found on the way.
#[derive(Debug, Clone)]
pub struct Plan {
    pub command: Words,
    pub placement: Placement,
    pub installed: Option<Installed>,
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
    pub target: Target,
    /// The next step (`instrument nsys report ...`), when there will be SQLite exports.
    pub next: Option<String>,
}

/// Build the command and run the checks.
pub fn plan(req: &Request) -> Result<Plan, CommandError> {
    let launchers = Launchers::builtin()?;
    let profiles = Profiles::builtin()?;
    let layout = launch::analyse(&req.launch, &launchers)?;
    let trainer = profiles.recognise(&req.launch, &layout.python, &layout.shell);
    let set = trainer.map_or_else(|| profiles.default.clone(), Trainer::set);

    let pattern = match &req.out {
        Some(p) => {
            output::check_pattern(p, layout.placement, &launchers)?;
            p.clone()
        }
        None => {
            output::default_pattern(&profiles.folder, &set.output, layout.placement, &launchers)
        }
    };
    let target = output::target(&pattern);
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let extras = extras(req, &set, &profiles);
    let mut opts = options(req, &set, &extras, &pattern);
    if let Some(p) = &req.trace_json {
        check_trace_json(p, &mut warnings);
    }

    let nsys_path = req.nsys.clone().or_else(|| which("nsys"));
    let checked = installed::check(nsys_path.as_deref(), &mut opts, &mut warnings);
    let has = |flag: &str| opts.iter().any(|o| o.flag == flag);
    if (has("--cudabacktrace") || has("--python-backtrace"))
        && !checked.sampling_checked
        && let Some(reason) = installed::sampling_failure_from_proc()
    {
        warnings.push(format!(
            "--cudabacktrace and --python-backtrace are likely inert on this machine: {reason}. Pass --no-backtraces to leave them out"
        ));
    }

    let mut env = layout.env.clone();
    if req.expandable_segments {
        env.push((
            "PYTORCH_CUDA_ALLOC_CONF".to_string(),
            "expandable_segments:True".to_string(),
        ));
    }
    notes::explain(
        &notes::Facts {
            layout: &layout,
            trainer,
            profiles: &profiles,
            extras: &extras,
            opts: &opts,
            pattern: &pattern,
            target: &target,
            sqlite: req.sqlite,
            trace_json: req.trace_json.as_deref(),
            expandable_segments: req.expandable_segments,
            installed: checked.installed.as_ref(),
        },
        &mut warnings,
        &mut notes,
    );
    let program = checked
        .installed
        .as_ref()
        .map(|i| i.path.display().to_string())
        .unwrap_or_else(|| "nsys".into());
    let mut args = vec!["profile".to_string()];
    args.extend(opts.iter().map(Opt::render));
    let next = req
        .sqlite
        .then(|| format!("instrument nsys report {}", shell_quote(&target.report_arg)));
    Ok(Plan {
        command: Words {
            env,
            outer: layout.outer.clone(),
            program,
            args,
            inner: layout.inner.clone(),
        },
        placement: layout.placement,
        installed: checked.installed,
        warnings,
        notes,
        target,
        next,
    })
}

/// The extras in the command: the set's own first, in its order, then the others asked for.
fn extras<'a>(req: &Request, set: &Set, profiles: &'a Profiles) -> Vec<&'a Extra> {
    let wanted = |name: &String| {
        req.extras
            .get(name)
            .copied()
            .unwrap_or_else(|| set.extras.contains(name))
    };
    set.extras
        .iter()
        .chain(profiles.extra.keys().filter(|k| !set.extras.contains(k)))
        .filter(|name| wanted(name))
        .filter_map(|name| profiles.extra.get(name))
        .collect()
}

/// The options, in order: output, export, the set's own (with the extras' trace values), the
/// capture window as asked, the extras, the functions-trace JSON.
fn options(req: &Request, set: &Set, extras: &[&Extra], pattern: &str) -> Vec<Opt> {
    let mut opts = vec![Opt::whole("--output", pattern)];
    if req.sqlite {
        opts.push(Opt::parse("--export=sqlite"));
    }
    let mut set_opts: Vec<Opt> = set.options.iter().map(|o| Opt::parse(o)).collect();
    if let Some(trace) = set_opts.iter_mut().find(|o| o.flag == "--trace") {
        for v in extras.iter().flat_map(|e| &e.trace) {
            if !trace.values.contains(v) {
                trace.values.push(v.clone());
            }
        }
    }
    let is_capture = |o: &Opt| o.flag == "--capture-range" || o.flag == "--capture-range-end";
    let set_window = set_opts
        .iter()
        .any(|o| o.flag == "--capture-range" && o.values != ["none"]);
    let profiler_api = match req.capture_range {
        CaptureRange::ProfilerApi => true,
        CaptureRange::Whole => false,
        CaptureRange::Auto => set_window,
    };
    if !profiler_api || !set_window {
        set_opts.retain(|o| !is_capture(o));
    }
    if profiler_api && !set_window {
        set_opts.push(Opt::parse("--capture-range=cudaProfilerApi"));
        set_opts.push(Opt::parse("--capture-range-end=stop-shutdown"));
    }
    opts.extend(set_opts);
    for e in extras {
        opts.extend(e.options.iter().map(|o| Opt::parse(o)));
    }
    if let Some(p) = &req.trace_json {
        opts.push(Opt::whole(
            "--python-functions-trace",
            &p.display().to_string(),
        ));
    }
    opts
}

fn check_trace_json(path: &Path, warnings: &mut Vec<String>) {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            warnings.push(format!(
                "--trace-json {}: cannot read it ({e}); nsys will fail to start",
                path.display()
            ));
            return;
        }
    };
    let ok = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .is_some_and(|a| {
            !a.is_empty()
                && a.iter().all(|e| {
                    e.get("module").is_some_and(|m| m.is_string())
                        && e.get("functions").is_some_and(|f| f.is_array())
                })
        });
    if !ok {
        warnings.push(format!(
            "--trace-json {}: not a functions-trace JSON (a non-empty array of {{\"domain\", \"module\", \"functions\": [...]}}); nsys will reject or ignore it",
            path.display()
        ));
    }
}
