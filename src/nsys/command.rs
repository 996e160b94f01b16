//! `instrument nsys command`: the `nsys profile` command the profiling guide recommends around
//! a launcher (`torchrun ...`), checked against the installed nsys where there is one.
//!
//! The command: `nsys profile -o NAME --export sqlite --trace cuda,nvtx,osrt --force-overwrite
//! true [--capture-range=cudaProfilerApi --capture-range-end=stop-shutdown]
//! --cuda-graph-trace=node --cuda-memory-usage true --pytorch=autograd-shapes-nvtx
//! --python-functions-trace=JSON --cudabacktrace=all --python-backtrace=cuda LAUNCH...`.
//!
//! A pithtrain launcher starts and stops the capture itself (`cudaProfilerStart`/`Stop` at the
//! steps `training.nsys_start`/`nsys_stop`), so for one the capture range follows the CUDA
//! profiler API (with `--capture-range=none`, nsys ignores those calls and records init and
//! warm-up too), as pithtrain's own capture script does. `--cuda-graph-trace=node` lists the
//! kernels inside CUDA graphs (the default, `graph`, records one interval per replay).
//! `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` changes how the profiled run allocates
//! memory, so it is set only on request (`--expandable-segments`) and said when it is.
//!
//! Checks when nsys is found: its version (old releases do not know recent GPUs), whether
//! `nsys profile --help` lists each option and value used (the valid `--pytorch` values changed
//! between releases), and whether CPU sampling works (`nsys status --environment`), without
//! which the two backtrace options are inert. `--pytorch=functions-trace` is never added: it
//! would replace the custom functions-trace JSON with nsys's own `pytorch.json`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the capture starts and stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureRange {
    /// `cudaProfilerApi` for a pithtrain launcher, the whole run otherwise.
    Auto,
    /// Between `cudaProfilerStart` and `cudaProfilerStop`.
    ProfilerApi,
    /// The whole run (nsys's default).
    Whole,
}

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Request {
    pub out: String,
    pub trace_json: Option<PathBuf>,
    pub sqlite: bool,
    pub backtraces: bool,
    pub capture_range: CaptureRange,
    /// Set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` for the profiled run.
    pub expandable_segments: bool,
    /// An explicit nsys binary; otherwise `nsys` is looked up on PATH.
    pub nsys: Option<PathBuf>,
    pub launch: Vec<String>,
}

/// What the launcher is, as far as its arguments and the files they name tell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Launcher {
    /// It runs pithtrain (a `pithtrain` module, or a script or shell script that mentions it).
    pub pithtrain: bool,
    /// The Python scripts among the arguments that exist, and whether each sets
    /// `nsys_start`/`nsys_stop`.
    pub scripts: Vec<(PathBuf, bool)>,
}

/// Look at the launch arguments: module names, and the scripts they name (read, never run).
pub fn inspect_launcher(launch: &[String]) -> Launcher {
    let mut l = Launcher::default();
    for a in launch {
        let value = a.split_once('=').map_or(a.as_str(), |(_, v)| v);
        if value.contains("pithtrain") || value.contains("pith-train") {
            l.pithtrain = true;
        }
        let path = Path::new(value);
        let is_script = value.ends_with(".py") || value.ends_with(".sh");
        if !is_script || !path.is_file() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        if text.contains("pithtrain") || (value.ends_with(".sh") && text.contains("pretrain_lm")) {
            l.pithtrain = true;
        }
        if value.ends_with(".py") {
            let sets = text.contains("nsys_start") && text.contains("nsys_stop");
            l.scripts.push((path.to_path_buf(), sets));
        }
    }
    l
}

/// The nsys the command was checked against.
#[derive(Debug, Clone)]
pub struct Installed {
    pub path: PathBuf,
    pub version_line: String,
    pub version: Option<(u32, u32, u32)>,
}

/// The command, ready to print or run, and what was found on the way.
#[derive(Debug, Clone)]
pub struct Plan {
    pub env: Vec<(String, String)>,
    pub program: String,
    pub args: Vec<String>,
    pub installed: Option<Installed>,
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
}

/// The oldest release the profiling guide recommends (older ones do not recognise recent GPUs
/// such as Blackwell, sm_120).
pub const RECOMMENDED_MIN: (u32, u32) = (2024, 5);

/// Find `name` in the directories of `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        let cand = dir.join(name);
        if is_executable(&cand) {
            return Some(cand);
        }
    }
    None
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Parse `NVIDIA Nsight Systems version 2024.5.1.113-245134619542v0` into (2024, 5, 1).
pub fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    for word in text.split_whitespace() {
        let mut parts = word.split(['.', '-']);
        let (Some(a), Some(b)) = (parts.next(), parts.next()) else {
            continue;
        };
        let (Ok(y), Ok(m)) = (a.parse::<u32>(), b.parse::<u32>()) else {
            continue;
        };
        if (2018..3000).contains(&y) {
            let p = parts
                .next()
                .and_then(|c| c.parse::<u32>().ok())
                .unwrap_or(0);
            return Some((y, m, p));
        }
    }
    None
}

/// The help text block that documents `option` (from its heading line to the next option's).
pub fn help_block<'a>(help: &'a str, option: &str) -> Option<&'a str> {
    let mut start: Option<usize> = None;
    let mut offset = 0;
    for line in help.split_inclusive('\n') {
        let t = line.trim_start();
        let is_heading = t.starts_with('-')
            && t.split_whitespace()
                .next()
                .is_some_and(|w| w.starts_with('-') && w.len() > 1);
        if is_heading {
            if let Some(s) = start {
                return Some(&help[s..offset]);
            }
            if heading_names(t).any(|n| n == option) {
                start = Some(offset);
            }
        }
        offset += line.len();
    }
    start.map(|s| &help[s..])
}

/// Option names on a heading line such as `-t, --trace=` or `--pytorch=<value>`.
fn heading_names(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[' || c == '<')
        .filter(|w| w.starts_with('-') && w.len() > 1)
        .take(3)
}

/// Whether `value` appears in `block` as a whole token (so `functions-trace` does not match
/// inside `functions-trace-shapes`).
pub fn lists_value(block: &str, value: &str) -> bool {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut from = 0;
    while let Some(i) = block[from..].find(value) {
        let s = from + i;
        let e = s + value.len();
        let before = block[..s].chars().next_back();
        let after = block[e..].chars().next();
        if !before.is_some_and(is_word) && !after.is_some_and(is_word) {
            return true;
        }
        from = e;
    }
    false
}

fn run_capture(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    Some(s)
}

/// CPU sampling as `nsys status --environment` reports it: `Some(reasons)` when it fails.
fn sampling_failure(status: &str) -> Option<Option<Vec<String>>> {
    let env_lines: Vec<&str> = status
        .lines()
        .filter(|l| l.contains("CPU Profiling Environment ("))
        .collect();
    if env_lines.is_empty() {
        return None; // not understood
    }
    let process_tree = env_lines
        .iter()
        .find(|l| l.contains("process-tree"))
        .or(env_lines.first())
        .expect("non-empty");
    if !process_tree.to_ascii_lowercase().contains("fail") {
        return Some(None);
    }
    let reasons: Vec<String> = status
        .lines()
        .map(str::trim)
        .filter(|l| {
            let low = l.to_ascii_lowercase();
            (low.contains("fail") && !low.contains("cpu profiling environment"))
                || low.starts_with("linux kernel paranoid level")
                || low.starts_with("root privilege")
        })
        .map(String::from)
        .collect();
    Some(Some(reasons))
}

/// CPU sampling judged from the kernel's perf settings, when nsys cannot be asked.
fn sampling_failure_from_proc() -> Option<String> {
    let level: i64 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false);
    (level > 2 && !root)
        .then(|| format!("kernel.perf_event_paranoid is {level} (CPU sampling needs <= 2 or root)"))
}

struct Opt {
    flag: &'static str,
    /// How it is written: `--flag value` (false) or `--flag=value` (true).
    joined: bool,
    values: Vec<String>,
}

impl Opt {
    fn render(&self, args: &mut Vec<String>) {
        let v = self.values.join(",");
        if self.joined {
            args.push(format!("{}={}", self.flag, v));
        } else {
            args.push(self.flag.to_string());
            args.push(v);
        }
    }
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

/// Build the command and run the checks.
pub fn plan(req: &Request) -> Plan {
    let mut warnings = Vec::new();
    let mut notes = Vec::new();

    let launcher = inspect_launcher(&req.launch);
    let mut opts = vec![Opt {
        flag: "--trace",
        joined: false,
        values: vec!["cuda".into(), "nvtx".into(), "osrt".into()],
    }];
    if req.sqlite {
        opts.insert(
            0,
            Opt {
                flag: "--export",
                joined: false,
                values: vec!["sqlite".into()],
            },
        );
    }
    opts.push(Opt {
        flag: "--force-overwrite",
        joined: false,
        values: vec!["true".into()],
    });
    let profiler_api = match req.capture_range {
        CaptureRange::ProfilerApi => true,
        CaptureRange::Whole => false,
        CaptureRange::Auto => launcher.pithtrain,
    };
    if profiler_api {
        opts.push(Opt {
            flag: "--capture-range",
            joined: true,
            values: vec!["cudaProfilerApi".into()],
        });
        opts.push(Opt {
            flag: "--capture-range-end",
            joined: true,
            values: vec!["stop-shutdown".into()],
        });
        capture_notes(&launcher, &mut warnings, &mut notes);
    } else if launcher.pithtrain {
        warnings.push("--capture-range none: nsys ignores pithtrain's cudaProfilerStart/Stop (training.nsys_start / nsys_stop) and records the whole run, initialisation and warm-up included; the export can reach gigabytes".into());
    }
    opts.push(Opt {
        flag: "--cuda-graph-trace",
        joined: true,
        values: vec!["node".into()],
    });
    opts.push(Opt {
        flag: "--cuda-memory-usage",
        joined: false,
        values: vec!["true".into()],
    });
    opts.push(Opt {
        flag: "--pytorch",
        joined: true,
        values: vec!["autograd-shapes-nvtx".into()],
    });
    match &req.trace_json {
        Some(p) => {
            check_trace_json(p, &mut warnings);
            opts.push(Opt {
                flag: "--python-functions-trace",
                joined: true,
                values: vec![p.display().to_string()],
            });
            notes.push(format!(
                "--pytorch=functions-trace is left out on purpose: it would replace {} with nsys's pytorch.json, which names only torch.* functions",
                p.display()
            ));
        }
        None => notes.push(
            "no --trace-json: kernels will not be attributed to your model's modules; build one with `instrument nsys trace-json`".into(),
        ),
    }
    if req.backtraces {
        opts.push(Opt {
            flag: "--cudabacktrace",
            joined: true,
            values: vec!["all".into()],
        });
        opts.push(Opt {
            flag: "--python-backtrace",
            joined: true,
            values: vec!["cuda".into()],
        });
    }

    let nsys_path = match &req.nsys {
        Some(p) => Some(p.clone()),
        None => which("nsys"),
    };
    let mut installed = None;
    let mut sampling_checked = false;
    match nsys_path.as_deref() {
        Some(path) if is_executable(path) => {
            let version_text = run_capture(path, &["--version"]).unwrap_or_default();
            let version_line = version_text
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_string();
            let version = parse_version(&version_text);
            match version {
                Some((y, m, _)) if (y, m) < RECOMMENDED_MIN => warnings.push(format!(
                    "{} is nsys {y}.{m}, older than {}.{}: it may not recognise recent GPUs (e.g. Blackwell, sm_120); prefer a {}.{}+ nsys (conda nsight-systems, or the one bundled with Nsight Compute)",
                    path.display(),
                    RECOMMENDED_MIN.0,
                    RECOMMENDED_MIN.1,
                    RECOMMENDED_MIN.0,
                    RECOMMENDED_MIN.1
                )),
                None => warnings.push(format!(
                    "{}: could not read a version from `nsys --version` (got {:?})",
                    path.display(),
                    version_line
                )),
                _ => {}
            }
            let help = run_capture(path, &["profile", "--help"]).unwrap_or_default();
            if help_block(&help, "--trace").is_none() {
                warnings.push(format!(
                    "{}: `nsys profile --help` did not list its options; the options are unchecked",
                    path.display()
                ));
            } else {
                check_options(&mut opts, &help, &mut warnings);
            }
            if req.backtraces && opts.iter().any(|o| o.flag == "--cudabacktrace" || o.flag == "--python-backtrace")
                && let Some(status) = run_capture(path, &["status", "--environment"]) {
                    match sampling_failure(&status) {
                        Some(Some(reasons)) => {
                            sampling_checked = true;
                            warnings.push(format!(
                                "--cudabacktrace and --python-backtrace will be inert: CPU sampling is not available here (nsys status --environment: {}); they need perf_event_paranoid <= 2 or more privileges. Pass --no-backtraces to leave them out",
                                if reasons.is_empty() { "CPU Profiling Environment: Fail".to_string() } else { reasons.join("; ") }
                            ));
                        }
                        Some(None) => sampling_checked = true,
                        None => {}
                    }
                }
            installed = Some(Installed {
                path: path.to_path_buf(),
                version_line,
                version,
            });
        }
        Some(path) => warnings.push(format!(
            "{}: not an executable file; the options could not be checked against an installed nsys",
            path.display()
        )),
        None => warnings.push(
            "nsys is not on PATH: its options could not be checked against an installed nsys (look for it with `find \"$CONDA_PREFIX\" -name nsys`, or install nsight-systems)".into(),
        ),
    }
    if req.backtraces
        && !sampling_checked
        && let Some(reason) = sampling_failure_from_proc()
    {
        warnings.push(format!(
                "--cudabacktrace and --python-backtrace are likely inert on this machine: {reason}. Pass --no-backtraces to leave them out"
            ));
    }

    let mut args = vec!["profile".to_string(), "-o".to_string(), req.out.clone()];
    for o in &opts {
        o.render(&mut args);
    }
    args.extend(req.launch.iter().cloned());
    let mut env = Vec::new();
    if req.expandable_segments {
        env.push((
            "PYTORCH_CUDA_ALLOC_CONF".to_string(),
            "expandable_segments:True".to_string(),
        ));
        notes.push("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is set for the profiled run (--expandable-segments): it changes how PyTorch's caching allocator reserves memory, so memory figures differ from an ordinary run".into());
    }
    Plan {
        env,
        program: installed
            .as_ref()
            .map(|i| i.path.display().to_string())
            .unwrap_or_else(|| "nsys".into()),
        args,
        installed,
        warnings,
        notes,
    }
}

/// The reminder a profiler-API capture needs: pithtrain only calls cudaProfilerStart/Stop
/// when `training.nsys_start` / `nsys_stop` are set.
fn capture_notes(launcher: &Launcher, warnings: &mut Vec<String>, notes: &mut Vec<String>) {
    if !launcher.pithtrain {
        notes.push("--capture-range=cudaProfilerApi: nsys records only between the program's cudaProfilerStart and cudaProfilerStop calls (torch.cuda.cudart().cudaProfilerStart()); without them nothing is recorded".into());
        return;
    }
    let unset: Vec<String> = launcher
        .scripts
        .iter()
        .filter(|(_, sets)| !sets)
        .map(|(p, _)| p.display().to_string())
        .collect();
    let set: Vec<String> = launcher
        .scripts
        .iter()
        .filter(|(_, sets)| *sets)
        .map(|(p, _)| p.display().to_string())
        .collect();
    if !unset.is_empty() && set.is_empty() {
        warnings.push(format!(
            "--capture-range=cudaProfilerApi: nsys records only between cudaProfilerStart and cudaProfilerStop, which pithtrain calls at training.nsys_start and training.nsys_stop; {} does not set both, so nothing may be recorded: set e.g. `training.nsys_start = 5` and `training.nsys_stop = 6` (profiles step 5)",
            unset.join(", ")
        ));
    } else if !set.is_empty() {
        notes.push(format!(
            "--capture-range=cudaProfilerApi: nsys records the steps from training.nsys_start to training.nsys_stop, which {} sets",
            set.join(", ")
        ));
    } else {
        notes.push("--capture-range=cudaProfilerApi: nsys records only between cudaProfilerStart and cudaProfilerStop, which pithtrain calls at training.nsys_start and training.nsys_stop: set both in the config the launcher runs (e.g. `training.nsys_start = 5`, `training.nsys_stop = 6` profiles step 5), or nothing is recorded".into());
    }
}

/// Drop or adjust the options and values `nsys profile --help` does not list.
fn check_options(opts: &mut Vec<Opt>, help: &str, warnings: &mut Vec<String>) {
    opts.retain_mut(|o| {
        let Some(block) = help_block(help, o.flag) else {
            let consequence = match o.flag {
                "--pytorch" => "autograd ranges (with shapes) will not be recorded",
                "--python-functions-trace" => "module names from the functions-trace JSON will not be recorded",
                "--cuda-memory-usage" => "CUDA memory usage will not be recorded",
                "--cuda-graph-trace" => "kernels inside CUDA graphs will show as one interval per graph launch",
                "--capture-range" => "nsys will record the whole run instead of the profiler-API window",
                "--capture-range-end" => "the release's default end of the capture range applies",
                "--export" => "export the report afterwards with `nsys export --type sqlite`",
                _ => "it is left out",
            };
            warnings.push(format!(
                "this nsys does not list {}: left out; {consequence}",
                o.flag
            ));
            return false;
        };
        if o.flag == "--python-functions-trace" || o.flag == "--force-overwrite" || o.flag == "--cuda-memory-usage" {
            return true; // a path or a boolean
        }
        if o.flag == "--pytorch" {
            if lists_value(block, "autograd-shapes-nvtx") {
                return true;
            }
            if lists_value(block, "autograd-nvtx") {
                warnings.push(
                    "this nsys's --pytorch does not accept autograd-shapes-nvtx: using autograd-nvtx (ranges without tensor shapes)".into(),
                );
                o.values = vec!["autograd-nvtx".into()];
                return true;
            }
            warnings.push(
                "this nsys's --pytorch accepts neither autograd-shapes-nvtx nor autograd-nvtx: left out; autograd ranges will not be recorded".into(),
            );
            return false;
        }
        let missing: Vec<String> = o
            .values
            .iter()
            .filter(|v| !lists_value(block, v))
            .cloned()
            .collect();
        if !missing.is_empty() {
            o.values.retain(|v| !missing.contains(v));
            warnings.push(format!(
                "this nsys's {} does not accept {}: {}",
                o.flag,
                missing.join(", "),
                if o.values.is_empty() { "option left out".to_string() } else { format!("using {}", o.values.join(",")) }
            ));
            return !o.values.is_empty();
        }
        true
    });
}

/// Quote a word for a POSIX shell when it needs it.
pub fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | '/' | '=' | ':' | ',' | '+' | '@' | '%')
        });
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The command as a multi-line shell command.
pub fn render(plan: &Plan, launch_len: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    for (k, v) in &plan.env {
        lines.push(format!("{k}={}", shell_quote(v)));
    }
    let n = plan.args.len();
    let opts_end = n - launch_len;
    // "nsys profile -o NAME"
    let mut head = vec![shell_quote(&plan.program)];
    head.extend(plan.args[..3.min(opts_end)].iter().map(|a| shell_quote(a)));
    lines.push(head.join(" "));
    let mut i = 3;
    while i < opts_end {
        let a = &plan.args[i];
        if !a.contains('=') && i + 1 < opts_end && !plan.args[i + 1].starts_with('-') {
            lines.push(format!(
                "  {} {}",
                shell_quote(a),
                shell_quote(&plan.args[i + 1])
            ));
            i += 2;
        } else {
            lines.push(format!("  {}", shell_quote(a)));
            i += 1;
        }
    }
    let launch: Vec<String> = plan.args[opts_end..]
        .iter()
        .map(|a| shell_quote(a))
        .collect();
    if !launch.is_empty() {
        lines.push(format!("  {}", launch.join(" ")));
    }
    let mut s = lines.join(" \\\n");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(
            parse_version("NVIDIA Nsight Systems version 2024.5.1.113-245134619542v0"),
            Some((2024, 5, 1))
        );
        assert_eq!(
            parse_version("NVIDIA Nsight Systems version 2022.4.2.1-df9881f"),
            Some((2022, 4, 2))
        );
        assert_eq!(parse_version("garbage"), None);
    }

    #[test]
    fn value_tokens() {
        let b = "--pytorch=\n  Possible values are 'functions-trace-shapes', 'autograd-nvtx'.\n";
        assert!(!lists_value(b, "functions-trace"));
        assert!(lists_value(b, "functions-trace-shapes"));
        assert!(lists_value(b, "autograd-nvtx"));
        assert!(!lists_value(b, "autograd-shapes-nvtx"));
    }

    #[test]
    fn blocks() {
        let help = "usage: nsys profile [<args>]\n\n\t-t, --trace=\n\n\t   Possible values are 'cuda', 'nvtx'.\n\n\t--pytorch=\n\n\t   Possible values are 'none'.\n";
        let t = help_block(help, "--trace").unwrap();
        assert!(t.contains("'cuda'") && !t.contains("pytorch"));
        assert!(help_block(help, "-t").is_some());
        assert!(help_block(help, "--pytorch").unwrap().contains("'none'"));
        assert!(help_block(help, "--export").is_none());
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("--nproc_per_node=4"), "--nproc_per_node=4");
    }
}
