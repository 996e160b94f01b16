//! `instrument nsys ...`: argument definitions and glue to `crate::nsys`.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::exit::{self, Error, user_error};
use crate::gate::Gate;
use crate::nsys::ranks::WindowPick;
use crate::nsys::{analyze, command, exports, report};

#[derive(Subcommand, Debug)]
pub enum NsysCommand {
    /// Summarise an nsys SQLite export: kernel time by category per process, communication
    /// overlap, and NVTX ranges projected onto the GPU work they launched.
    Report(ReportArgs),
    /// Print (or run) the `nsys profile` command for a launch (inside srun / mpirun, one report per node).
    Command(CommandArgs),
    /// Write the `--python-functions-trace` JSON naming your modules, from a static scan of
    /// the sources (nothing is imported), or check an existing one against them.
    TraceJson(TraceJsonArgs),
}

#[derive(Args, Debug)]
pub struct TraceJsonArgs {
    /// Files or folders to scan (default: the current folder).
    pub paths: Vec<PathBuf>,
    /// The folder module paths are computed from (default: walk up while folders hold __init__.py).
    #[arg(long, value_name = "DIR")]
    pub package_root: Option<PathBuf>,
    /// Also trace what matches: `*.forward`, `DualPipeV.step`, `layer_forward`, `Class.method`.
    #[arg(long = "match", value_name = "GLOB")]
    pub matches: Vec<String>,
    /// Do not add every `forward` of an nn.Module subclass by default.
    #[arg(long)]
    pub no_forwards: bool,
    /// The domain of the new entries (default: each module's top-level package).
    #[arg(long, value_name = "NAME")]
    pub domain: Option<String>,
    /// A functions-trace JSON to merge in first (default: the pytorch.json shipped beside nsys).
    #[arg(long, value_name = "FILE")]
    pub base: Option<PathBuf>,
    /// Do not merge any base file.
    #[arg(long, conflicts_with = "base")]
    pub no_base: bool,
    /// Write the JSON here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Check an existing functions-trace JSON against the scanned tree instead of writing one.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["out", "matches"])]
    pub check: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Exports (`.sqlite`, written by `nsys export --type sqlite`) or folders of them (every
    /// `.sqlite` in it: pithtrain writes one per node). All must be of one run: exports of
    /// different runs are refused (exit 2), never merged.
    #[arg(required = true, value_name = "FILE|DIR")]
    pub files: Vec<PathBuf>,
    /// Print the report as JSON (schema `instrument.nsys.report/3`, see docs/nsys.md).
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML page to FILE: every rank on one timeline per export, the
    /// stages of each rank (with --diff: the comparison).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Rows per table (kernels and NVTX ranges per process, the export-wide summaries); the
    /// rest is summed in one row.
    #[arg(long, default_value_t = super::TOP, value_name = "N")]
    pub top: usize,
    /// List every row of every table.
    #[arg(long, conflicts_with = "top")]
    pub all: bool,
    /// Only this global rank's processes (repeatable, as in `log` and `snapshot`); the
    /// export-wide summaries stay whole.
    #[arg(long = "rank", value_name = "N")]
    pub ranks: Vec<u64>,
    /// Group NVTX ranges by name and input shapes (PyTorch's `sizes = ...`), not by name alone.
    #[arg(long)]
    pub by_shape: bool,
    /// Kernel-classes rules (TOML, the format of the built-in table) tried before the built-in ones.
    #[arg(long, value_name = "FILE")]
    pub kernel_classes: Option<PathBuf>,
    /// The trainer's conventions (TOML, the format of the built-in table, which is pithtrain's):
    /// setup range, window ranges, stage pattern, stream purposes.
    #[arg(long, value_name = "FILE")]
    pub conventions: Option<PathBuf>,
    /// The window of the per-rank figures: `median` (each rank's median window range, as
    /// pithtrain's scripts pick it), `all` (the whole capture) or `START_NS:END_NS`.
    #[arg(
        long,
        default_value = "median",
        value_name = "median|all|START_NS:END_NS"
    )]
    pub window: WindowPick,
    /// A second run to compare with (files or folders, as the first): per rank and stage, the
    /// change of exposed communication and of chunk time (per process, by GPU, without ranks).
    #[arg(long, value_name = "FILE|DIR", num_args = 1..)]
    pub diff: Vec<PathBuf>,
    /// With --diff: exit 1 when a figure grew by more than PCT per cent (a stage's exposed
    /// communication and a rank's chunk time; without DualPipeV ranges each process's exposed
    /// communication, communication and compute), 0 when none did, 2 when nothing is comparable.
    /// The verdict is the last line.
    #[arg(long, value_name = "PCT", requires = "diff")]
    pub gate: Option<Gate>,
}

#[derive(Args, Debug)]
pub struct CommandArgs {
    /// The report name, an nsys --output pattern (%q{NAME}, %h, %p are nsys's own; default:
    /// profiling/results/nsys/ and the set's name, one per node for a multi-node launch).
    #[arg(long, short = 'o', value_name = "PATTERN")]
    pub out: Option<String>,
    /// A functions-trace JSON naming your modules (passed as --python-functions-trace).
    #[arg(long, value_name = "FILE")]
    pub trace_json: Option<PathBuf>,
    /// Export a SQLite file next to the report (the default).
    #[arg(long, overrides_with = "no_sqlite")]
    pub sqlite: bool,
    /// Do not export a SQLite file.
    #[arg(long, overrides_with = "sqlite")]
    pub no_sqlite: bool,
    /// Add --pytorch=autograd-shapes-nvtx: a range per autograd op with shapes (many ranges, CPU overhead).
    #[arg(long, overrides_with = "no_pytorch_nvtx")]
    pub pytorch_nvtx: bool,
    /// Leave out --pytorch=autograd-shapes-nvtx.
    #[arg(long, overrides_with = "pytorch_nvtx")]
    pub no_pytorch_nvtx: bool,
    /// Add --cudabacktrace=all --python-backtrace=cuda: who launched each kernel (needs CPU sampling).
    #[arg(long, overrides_with = "no_backtraces")]
    pub backtraces: bool,
    /// Leave out --cudabacktrace / --python-backtrace (inert without CPU sampling).
    #[arg(long, overrides_with = "backtraces")]
    pub no_backtraces: bool,
    /// Add --cuda-memory-usage=true: GPU memory over time per kernel (significant overhead).
    #[arg(long, overrides_with = "no_cuda_memory_usage")]
    pub cuda_memory_usage: bool,
    /// Leave out --cuda-memory-usage.
    #[arg(long, overrides_with = "cuda_memory_usage")]
    pub no_cuda_memory_usage: bool,
    /// Add osrt to --trace: OS runtime calls, where the CPU side waits (a larger export).
    #[arg(long, overrides_with = "no_osrt")]
    pub osrt: bool,
    /// Leave osrt out of --trace.
    #[arg(long, overrides_with = "osrt")]
    pub no_osrt: bool,
    /// Where nsys records: `cudaProfilerApi` (between cudaProfilerStart and Stop, which
    /// pithtrain calls at training.nsys_start / nsys_stop), `none` (the whole run), or `auto`
    /// (as the trace set says: cudaProfilerApi for a pithtrain launcher).
    #[arg(long, value_name = "RANGE", default_value = "auto", value_parser = ["auto", "cudaProfilerApi", "none"])]
    pub capture_range: String,
    /// Run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (changes how the run allocates
    /// memory; off unless asked for).
    #[arg(long)]
    pub expandable_segments: bool,
    /// The nsys binary to use and check (default: `nsys` on PATH).
    #[arg(long, value_name = "PATH")]
    pub nsys: Option<PathBuf>,
    /// Run the command after printing it.
    #[arg(long)]
    pub run: bool,
    /// The launch, e.g. `torchrun --standalone --nproc_per_node=4 -m pkg.run` or
    /// `srun -N 2 -W 0 torchrun --nnodes 2 ...`: nsys goes inside srun / mpirun.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, num_args = 1..)]
    pub launch: Vec<String>,
}

impl CommandArgs {
    /// The extras asked on or off, by their name in profiles.toml.
    fn extras(&self) -> std::collections::BTreeMap<String, bool> {
        [
            ("pytorch-nvtx", self.pytorch_nvtx, self.no_pytorch_nvtx),
            ("backtraces", self.backtraces, self.no_backtraces),
            (
                "cuda-memory-usage",
                self.cuda_memory_usage,
                self.no_cuda_memory_usage,
            ),
            ("osrt", self.osrt, self.no_osrt),
        ]
        .into_iter()
        .filter(|(_, on, off)| *on || *off)
        .map(|(name, on, _)| (name.to_string(), on))
        .collect()
    }
}

pub fn run(cmd: NsysCommand) -> Result<u8, Error> {
    match cmd {
        NsysCommand::Report(args) => run_report(args),
        NsysCommand::Command(args) => run_command(args),
        NsysCommand::TraceJson(args) => run_trace_json(args),
    }
}

fn run_trace_json(args: TraceJsonArgs) -> Result<u8, Error> {
    if let Some(out) = &args.out {
        super::output::check_folder(out, "the functions-trace JSON")?;
    }
    use crate::nsys::tracejson::{self, Severity};
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    for p in &paths {
        if !p.exists() {
            return Err(user_error(format!(
                "{}: no such file or folder",
                p.display()
            )));
        }
    }
    if let Some(root) = &args.package_root
        && !root.is_dir()
    {
        return Err(user_error(format!(
            "--package-root {}: no such folder",
            root.display()
        )));
    }
    let root = args
        .package_root
        .as_ref()
        .map(|r| r.canonicalize().unwrap_or_else(|_| r.clone()));
    let canonical: Vec<PathBuf> = paths
        .iter()
        .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
        .collect();
    let tree = crate::python::scan::Tree::scan(&canonical, root.as_deref())?;
    let mut err = std::io::stderr().lock();
    for m in tree.modules.iter().filter(|m| m.syntax_error.is_some()) {
        let _ = writeln!(
            err,
            "warning: {}:{}: tree-sitter reports a syntax error; definitions after it may be missed",
            m.file,
            m.syntax_error.unwrap_or(0)
        );
    }
    if let Some(json) = &args.check {
        let groups = tracejson::read_groups(json)?;
        let problems = tracejson::check(&tree, &json.display().to_string(), &groups);
        for p in &problems {
            let _ = writeln!(err, "{p}");
        }
        let errors = problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .count();
        let _ = writeln!(
            err,
            "{}: {} groups, {} functions; {errors} error(s), {} warning(s)",
            json.display(),
            groups.len(),
            groups.iter().map(|g| g.functions.len()).sum::<usize>(),
            problems.len() - errors
        );
        return Ok(if errors > 0 { exit::FOUND } else { exit::OK });
    }
    // nsys wraps the traced functions in Python: inside a fullgraph compile that breaks
    // the graph, so what runs there is left out (said, unless it was a default pick).
    let compilers = crate::rules::compilers::callables();
    let crate::python::select::Selected {
        targets,
        problems,
        compiled_left_out: left_out,
    } = crate::python::select::select_functions(
        &tree,
        !args.no_forwards,
        &args.matches,
        &compilers,
    );
    for p in &problems {
        let _ = writeln!(err, "{p}");
    }
    if problems.iter().any(|p| p.severity == Severity::Error) {
        let _ = writeln!(
            err,
            "instrument nsys trace-json: nothing was written; fix the selection above"
        );
        return Ok(exit::USER_ERROR);
    }
    let ours = tracejson::groups(&targets, args.domain.as_deref());
    let base_path = if args.no_base {
        None
    } else {
        args.base.clone().or_else(tracejson::shipped_base)
    };
    let base = match &base_path {
        Some(p) => tracejson::read_groups(p)?,
        None => Vec::new(),
    };
    let merged = tracejson::merge(base, ours);
    let text = format!("{}\n", serde_json::to_string_pretty(&merged)?);
    match &args.out {
        Some(out) => {
            super::output::write_atomically(out, "the functions-trace JSON", text.as_bytes())?
        }
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    let _ = writeln!(
        err,
        "{} functions in {} modules{}{}",
        targets.len(),
        merged.len(),
        base_path
            .map(|p| format!(", merged after {}", p.display()))
            .unwrap_or_default(),
        if left_out > 0 {
            format!("; {left_out} forward(s) that run inside torch.compile left out")
        } else {
            String::new()
        }
    );
    Ok(exit::OK)
}

fn run_report(args: ReportArgs) -> Result<u8, Error> {
    use crate::nsys::classify::Classifier;
    use crate::nsys::conventions::Conventions;
    use crate::nsys::names::Grouping;
    if let Some(h) = &args.html {
        super::output::check_folder(h, "the HTML page")?;
    }
    let classifier = match &args.kernel_classes {
        Some(p) => Classifier::with_file(p)?,
        None => Classifier::builtin(),
    };
    let conventions = match &args.conventions {
        Some(p) => Conventions::from_file(p)?,
        None => Conventions::builtin(),
    };
    let window = match args.window {
        WindowPick::Median => "median".to_string(),
        WindowPick::All => "all".to_string(),
        WindowPick::Range(a, b) => format!("{a}:{b}"),
    };
    let opts = analyze::Options {
        top: (!args.all).then_some(args.top),
        grouping: if args.by_shape {
            Grouping::NameAndShape
        } else {
            Grouping::Name
        },
        timeline_buckets: args.html.as_ref().map(|_| 1000),
        classifier,
        conventions,
        window: args.window,
        ranks: args.ranks.clone(),
        ..Default::default()
    };
    // Both runs are checked to exist before either is read.
    exports::files(&args.files)?;
    if !args.diff.is_empty() {
        exports::files(&args.diff)?;
        return run_diff(&args, &opts, &window);
    }
    let doc = exports::report(&args.files, &opts, &window)?;
    if let Some(path) = &args.html {
        super::output::write_atomically(
            path,
            "the HTML page",
            report::html::render(&doc).as_bytes(),
        )?;
    }
    let mut stdout = std::io::stdout().lock();
    if args.json {
        report::json::write(&doc, &mut stdout)?;
    } else {
        stdout.write_all(report::text::render(&doc).as_bytes())?;
        if let Some(path) = &args.html {
            writeln!(stdout, "\nHTML page written to {}", path.display())?;
        }
    }
    Ok(exit::OK)
}

fn run_diff(args: &ReportArgs, opts: &analyze::Options, window: &str) -> Result<u8, Error> {
    let before = exports::report(&args.files, opts, window)?;
    let after = exports::report(&args.diff, opts, window)?;
    let d = exports::compare(&before, &after, args.gate);
    if let Some(path) = &args.html {
        super::output::write_atomically(
            path,
            "the HTML page",
            report::html::render_diff(&d).as_bytes(),
        )?;
    }
    let mut stdout = std::io::stdout().lock();
    if args.json {
        report::json::write(&d, &mut stdout)?;
    } else {
        stdout.write_all(report::text::render_diff(&d).as_bytes())?;
        if let Some(path) = &args.html {
            writeln!(stdout, "\nHTML page written to {}", path.display())?;
        }
    }
    Ok(d.gate.as_ref().map_or(exit::OK, |g| g.code()))
}

fn run_command(args: CommandArgs) -> Result<u8, Error> {
    let req = command::Request {
        out: args.out.clone(),
        trace_json: args.trace_json.clone(),
        sqlite: !args.no_sqlite,
        extras: args.extras(),
        capture_range: match args.capture_range.as_str() {
            "cudaProfilerApi" => command::CaptureRange::ProfilerApi,
            "none" => command::CaptureRange::Whole,
            _ => command::CaptureRange::Auto,
        },
        expandable_segments: args.expandable_segments,
        nsys: args.nsys.clone(),
        launch: args.launch.clone(),
    };
    let plan = command::plan(&req)?;
    // Nothing to run: refused before the command and its next step are printed as if it ran.
    if args.run && plan.installed.is_none() {
        return Err(user_error(
            "--run: no usable nsys (not on PATH, or --nsys is not executable); put nsys on PATH or pass --nsys PATH, or leave out --run to print the command",
        ));
    }
    {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(plan.command.render().as_bytes())?;
        stdout.flush()?;
    }
    if let Some(i) = &plan.installed {
        eprintln!(
            "checked against {} ({})",
            i.path.display(),
            if i.version_line.is_empty() {
                "version unknown"
            } else {
                &i.version_line
            }
        )
    }
    for w in &plan.warnings {
        eprintln!("warning: {w}");
    }
    for n in &plan.notes {
        eprintln!("note: {n}");
    }
    if let Some(next) = &plan.next {
        eprintln!("then: {next}");
    }
    if !args.run {
        return Ok(exit::OK);
    }
    let folder = &plan.target.folder;
    std::fs::create_dir_all(folder)
        .map_err(|e| exit::io_error(&e, format!("creating {}: {e}", folder.display())))?;
    let argv = plan.command.argv();
    let status = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .envs(plan.command.env.iter().map(|(k, v)| (k, v)))
        .status()
        .map_err(|e| exit::io_error(&e, format!("starting {}: {e}", argv[0])))?;
    Ok(status
        .code()
        .map(|c| c.clamp(0, 255) as u8)
        .unwrap_or(exit::INTERNAL))
}
