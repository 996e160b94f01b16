//! What the command says about itself on stderr, each thing once: which set it traces, where
//! nsys runs and what each writes, what each extra adds and costs, the capture window, the
//! folder the exports go to.

use std::path::Path;

use super::installed::{Installed, Opt};
use super::launch::{Layout, Placement};
use super::launchers;
use super::output::{self, Target};
use super::profiles::{Extra, Profiles, Trainer};
use super::render::shell_quote;
use super::scripts;

/// What the notes are about.
pub struct Facts<'a> {
    pub layout: &'a Layout,
    pub trainer: Option<&'a Trainer>,
    pub profiles: &'a Profiles,
    pub extras: &'a [&'a Extra],
    /// The options as the command has them (after the checks against the installed nsys).
    pub opts: &'a [Opt],
    pub pattern: &'a str,
    pub target: &'a Target,
    pub sqlite: bool,
    pub trace_json: Option<&'a Path>,
    pub expandable_segments: bool,
    pub installed: Option<&'a Installed>,
}

/// Add the warnings and notes the command needs, in the order they are read.
pub fn explain(f: &Facts, warnings: &mut Vec<String>, notes: &mut Vec<String>) {
    let trainer = f.trainer;
    let has = |flag: &str| f.opts.iter().any(|o| o.flag == flag);
    // What the command records and where, each said once.
    if let Some(t) = trainer {
        notes.push(trainer_note(t, f.profiles));
    }
    if let Some(n) = placement_note(f.layout, f.pattern, f.sqlite) {
        notes.push(n);
    }
    for e in f.extras {
        // As the command has them (a release may have changed a value, or dropped the option).
        let added: Vec<String> = e
            .options
            .iter()
            .filter_map(|o| {
                let flag = Opt::parse(o).flag;
                f.opts.iter().find(|x| x.flag == flag).map(Opt::render)
            })
            .chain(
                e.trace
                    .iter()
                    .filter(|v| {
                        f.opts
                            .iter()
                            .any(|o| o.flag == "--trace" && o.values.contains(v))
                    })
                    .map(|v| format!("--trace {v}")),
            )
            .collect();
        if !added.is_empty() {
            notes.push(format!("{} ({}): {}", e.request, added.join(" "), e.why));
        }
    }
    if has("--capture-range") {
        capture_notes(trainer, f.layout, warnings, notes);
        if f.opts
            .iter()
            .any(|o| o.flag == "--capture-range-end" && o.values == ["stop-shutdown"])
        {
            let at = trainer
                .and_then(|t| t.capture_stop.as_deref())
                .unwrap_or("cudaProfilerStop");
            notes.push(format!(
                "--capture-range-end=stop-shutdown: when the capture stops ({at}), nsys ends the session and stops the run with its --kill signal (sigterm by default): steps after it do not run"
            ));
        }
    } else if let Some(t) = trainer.filter(|t| t.capture_start.is_some()) {
        warnings.push(format!(
            "--capture-range none: nsys ignores {}'s cudaProfilerStart/Stop ({} / {}) and records the whole run, initialisation and warm-up included; the export can reach gigabytes",
            t.name,
            t.capture_start.as_deref().unwrap_or(""),
            t.capture_stop.as_deref().unwrap_or("")
        ));
    }
    match f.trace_json {
        Some(p) => notes.push(format!(
            "--pytorch=functions-trace is left out on purpose: it would replace {} with nsys's pytorch.json, which names only torch.* functions",
            p.display()
        )),
        None if trainer.is_none_or(|t| t.own_nvtx.is_none()) => notes.push(
            "no --trace-json: kernels will not be attributed to your model's modules; build one with `instrument nsys trace-json`".into(),
        ),
        None => {}
    }
    if f.expandable_segments {
        notes.push("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is set for the profiled run (--expandable-segments): it changes how PyTorch's caching allocator reserves memory, so memory figures differ from an ordinary run".into());
    }
    folder_notes(f.target, f.layout.placement, warnings, notes);
    if !f.layout.outer.is_empty()
        && let Some(i) = f.installed
    {
        notes.push(format!(
            "every node runs {}: it was checked on this node only, and must be at the same path on the others",
            i.path.display()
        ));
    }
    for p in &f.layout.unread {
        notes.push(format!(
            "{}: not readable here, so what it runs is unchecked",
            p.display()
        ));
    }
}

/// The one line that says which set is traced and what is on request.
fn trainer_note(t: &Trainer, p: &Profiles) -> String {
    let off: Vec<&str> = p
        .extra
        .iter()
        .filter(|(name, _)| !t.extras.contains(name))
        .map(|(_, e)| e.request.as_str())
        .collect();
    let own = t
        .own_nvtx
        .as_ref()
        .map(|s| format!("; {s}"))
        .unwrap_or_default();
    format!(
        "tracing what {} traces ({}){own}; on request: {}",
        t.source,
        t.options.join(" "),
        off.join(", ")
    )
}

/// Where nsys runs and what each writes, when it is not once around the whole launch.
fn placement_note(l: &Layout, pattern: &str, sqlite: bool) -> Option<String> {
    let files = format!(
        "{pattern}.nsys-rep{}",
        if sqlite { " and .sqlite" } else { "" }
    );
    let program = l.inner.first().map(String::as_str).unwrap_or("");
    let launcher = l.outer.first().map(|w| launchers::base(w)).unwrap_or("");
    let nodes = l
        .srun_nodes
        .as_ref()
        .map(|n| format!(" -N {n}"))
        .unwrap_or_default();
    let quoting = expansion_note(pattern);
    Some(match l.placement {
        Placement::One => return None,
        Placement::EachHost { nnodes } => format!(
            "torchrun --nnodes {nnodes} starts only this node's ranks: run this command on each of the {nnodes} nodes; each writes {files}; {quoting}"
        ),
        Placement::SrunPerNode => format!(
            "nsys runs inside {launcher}{nodes}, once per node, and records the ranks {program} starts there (around {launcher} it would record only {launcher} itself, on this node); each node writes {files}{}; {quoting}",
            if l.tasks_assumed {
                format!(
                    " (one task per node assumed, {launcher}'s default: the allocation or -n / --ntasks-per-node could ask for more)"
                )
            } else {
                String::new()
            }
        ),
        Placement::SrunPerTask => format!(
            "nsys runs inside {launcher}{nodes}, once per task ({}); each task writes {files}; {quoting}",
            if !l.node_launcher {
                format!("{program} starts one rank, not a node's ranks")
            } else {
                format!("{launcher} starts more than one task per node")
            }
        ),
        Placement::MpiPerRank => format!(
            "nsys runs inside {launcher}, once per rank; each writes {files}; {quoting} (with Open MPI, --out '...rank%q{{OMPI_COMM_WORLD_RANK}}' names them by rank instead)"
        ),
    })
}

/// What the pattern's nsys expansions are, and the quoting they need (none from a shell).
fn expansion_note(pattern: &str) -> String {
    let mut tokens: Vec<&str> = Vec::new();
    let mut rest = pattern;
    while let Some(i) = rest.find('%') {
        let after = &rest[i + 1..];
        let len = match after.chars().next() {
            Some('q') if after[1..].starts_with('{') => after.find('}').map_or(0, |j| j + 1),
            Some('h' | 'p') => 1,
            _ => 0,
        };
        if len > 0 && !tokens.contains(&&rest[i..i + 1 + len]) {
            tokens.push(&rest[i..i + 1 + len]);
        }
        rest = &after[len.max(1).min(after.len())..];
    }
    let quoted = shell_quote(&format!("--output={pattern}")).starts_with('\'');
    format!(
        "{} {} nsys's own expansion, done by nsys on each node from that node's environment, so no shell (no `bash -c`) is needed{}",
        tokens.join(" and "),
        if tokens.len() == 1 { "is" } else { "are" },
        match (quoted, tokens.len()) {
            (false, _) => "",
            (true, 1) => "; the single quotes pass it to nsys as written",
            (true, _) => "; the single quotes pass them to nsys as written",
        }
    )
}

/// The reminder a profiler-API capture needs: the program must call cudaProfilerStart/Stop
/// (a trainer does so at the steps its config names).
fn capture_notes(
    trainer: Option<&Trainer>,
    layout: &Layout,
    warnings: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    let window =
        trainer.and_then(|t| Some((t, t.capture_start.as_deref()?, t.capture_stop.as_deref()?)));
    let Some((t, start, stop)) = window else {
        notes.push("--capture-range=cudaProfilerApi: nsys records only between the program's cudaProfilerStart and cudaProfilerStop calls (torch.cuda.cudart().cudaProfilerStart()); without them nothing is recorded".into());
        return;
    };
    let example = t.capture_example.as_deref().unwrap_or("");
    let (set, unset): (Vec<_>, Vec<_>) = layout.python.iter().partition(|s| t.sets_window(s));
    let names = |v: &[&scripts::Script]| {
        v.iter()
            .map(|s| s.path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !unset.is_empty() && set.is_empty() {
        warnings.push(format!(
            "--capture-range=cudaProfilerApi: nsys records only between cudaProfilerStart and cudaProfilerStop, which {} calls at {start} and {stop}; {} does not set both, so nothing may be recorded: set e.g. {example}",
            t.name,
            names(&unset)
        ));
    } else if !set.is_empty() {
        notes.push(format!(
            "--capture-range=cudaProfilerApi: nsys records the steps from {start} to {stop}, which {} sets",
            names(&set)
        ));
    } else {
        notes.push(format!(
            "--capture-range=cudaProfilerApi: nsys records only between cudaProfilerStart and cudaProfilerStop, which {} calls at {start} and {stop}: set both in the config the launcher runs (e.g. {example}), or nothing is recorded",
            t.name
        ));
    }
}

/// What the folder the exports go to already holds, or that it is missing.
fn folder_notes(
    target: &Target,
    placement: Placement,
    warnings: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    let folder = target.folder.display();
    if !output::folder_exists(target) {
        notes.push(format!(
            "{folder} does not exist yet: create it before the launch (mkdir -p {}){}; --run creates it",
            shell_quote(&folder.to_string()),
            if placement.is_one() {
                ""
            } else {
                ", on the file system every node writes to"
            }
        ));
        return;
    }
    if !target.many {
        return;
    }
    let stale = output::stale_exports(target);
    if !stale.is_empty() {
        let shown: Vec<&str> = stale.iter().take(3).map(String::as_str).collect();
        warnings.push(format!(
            "{folder}/ already holds {} export(s) named {}* ({}{}): the report over the folder would mix them with this run's (--force-overwrite replaces only the names this run writes); remove them or give --out another folder",
            stale.len(),
            target.prefix,
            shown.join(", "),
            if stale.len() > shown.len() { ", ..." } else { "" }
        ));
    }
}
