//! The command checked against the installed nsys: its version (old releases do not know recent
//! GPUs), whether `nsys profile --help` lists each option and value used (the valid `--pytorch`
//! values changed between releases), and whether CPU sampling works (`nsys status
//! --environment`), without which the two backtrace options are inert.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The nsys the command was checked against.
#[derive(Debug, Clone)]
pub struct Installed {
    pub path: PathBuf,
    pub version_line: String,
    pub version: Option<(u32, u32, u32)>,
}

/// The oldest release the profiling guide recommends (older ones do not recognise recent GPUs
/// such as Blackwell, sm_120).
pub const RECOMMENDED_MIN: (u32, u32) = (2024, 5);

/// The options whose values nsys enumerates in its help; the others (paths, numbers,
/// booleans) are only checked to be listed.
const ENUMERATED: [&str; 7] = [
    "--trace",
    "--export",
    "--capture-range",
    "--capture-range-end",
    "--cuda-graph-trace",
    "--cudabacktrace",
    "--python-backtrace",
];

/// One nsys option as the command writes it: `--flag=v1,v2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opt {
    pub flag: String,
    pub values: Vec<String>,
}

impl Opt {
    /// `--flag=a,b` into its flag and values (a value may itself hold `=`).
    pub fn parse(text: &str) -> Opt {
        match text.split_once('=') {
            Some((flag, v)) => Opt {
                flag: flag.to_string(),
                values: v.split(',').map(String::from).collect(),
            },
            None => Opt {
                flag: text.to_string(),
                values: Vec::new(),
            },
        }
    }

    /// One value that must stay whole (a path may hold commas).
    pub fn whole(flag: &str, value: &str) -> Opt {
        Opt {
            flag: flag.to_string(),
            values: vec![value.to_string()],
        }
    }

    pub fn render(&self) -> String {
        if self.values.is_empty() {
            self.flag.clone()
        } else {
            format!("{}={}", self.flag, self.values.join(","))
        }
    }
}

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

pub fn is_executable(p: &Path) -> bool {
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

/// CPU sampling as `nsys status --environment` reports it: `Some(Some(reasons))` when it fails,
/// `Some(None)` when it works, `None` when the answer is not understood.
fn sampling_failure(status: &str) -> Option<Option<Vec<String>>> {
    let env_lines: Vec<&str> = status
        .lines()
        .filter(|l| l.contains("CPU Profiling Environment ("))
        .collect();
    let process_tree = env_lines
        .iter()
        .find(|l| l.contains("process-tree"))
        .or(env_lines.first())?;
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
pub fn sampling_failure_from_proc() -> Option<String> {
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

/// What checking against an installed nsys found.
pub struct Checked {
    pub installed: Option<Installed>,
    /// Whether CPU sampling was asked about (so the /proc fallback is not needed).
    pub sampling_checked: bool,
}

/// Check `opts` against the nsys at `path` (or say why it could not be), adjusting them to what
/// that release accepts.
pub fn check(path: Option<&Path>, opts: &mut Vec<Opt>, warnings: &mut Vec<String>) -> Checked {
    let mut sampling_checked = false;
    let Some(path) = path else {
        warnings.push(
            "nsys is not on PATH: its options could not be checked against an installed nsys (look for it with `find \"$CONDA_PREFIX\" -name nsys`, or install nsight-systems)".into(),
        );
        return Checked {
            installed: None,
            sampling_checked,
        };
    };
    if !is_executable(path) {
        warnings.push(format!(
            "{}: not an executable file; the options could not be checked against an installed nsys",
            path.display()
        ));
        return Checked {
            installed: None,
            sampling_checked,
        };
    }
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
        check_options(opts, &help, warnings);
    }
    let backtraces = opts
        .iter()
        .any(|o| o.flag == "--cudabacktrace" || o.flag == "--python-backtrace");
    if backtraces && let Some(status) = run_capture(path, &["status", "--environment"]) {
        match sampling_failure(&status) {
            Some(Some(reasons)) => {
                sampling_checked = true;
                warnings.push(format!(
                    "--cudabacktrace and --python-backtrace will be inert: CPU sampling is not available here (nsys status --environment: {}); they need perf_event_paranoid <= 2 or more privileges. Pass --no-backtraces to leave them out",
                    if reasons.is_empty() {
                        "CPU Profiling Environment: Fail".to_string()
                    } else {
                        reasons.join("; ")
                    }
                ));
            }
            Some(None) => sampling_checked = true,
            None => {}
        }
    }
    Checked {
        installed: Some(Installed {
            path: path.to_path_buf(),
            version_line,
            version,
        }),
        sampling_checked,
    }
}

/// What is lost when this release lacks an option.
fn consequence(flag: &str) -> &'static str {
    match flag {
        "--pytorch" => "autograd ranges (with shapes) will not be recorded",
        "--python-functions-trace" => {
            "module names from the functions-trace JSON will not be recorded"
        }
        "--cuda-memory-usage" => "CUDA memory usage will not be recorded",
        "--cuda-graph-trace" => {
            "kernels inside CUDA graphs will show as one interval per graph launch"
        }
        "--capture-range" => "nsys will record the whole run instead of the profiler-API window",
        "--capture-range-end" => "the release's default end of the capture range applies",
        "--export" => "export the report afterwards with `nsys export --type sqlite`",
        "--stats" | "--delay" => "nsys's default applies (no statistics, no delay)",
        "--python-backtrace" => "CUDA calls will have no Python backtrace",
        "--cudabacktrace" => "CUDA calls will have no CPU backtrace",
        _ => "nsys's default applies",
    }
}

/// Drop or adjust the options and values `nsys profile --help` does not list.
fn check_options(opts: &mut Vec<Opt>, help: &str, warnings: &mut Vec<String>) {
    opts.retain_mut(|o| {
        let Some(block) = help_block(help, &o.flag) else {
            warnings.push(format!(
                "this nsys does not list {}: left out; {}",
                o.flag,
                consequence(&o.flag)
            ));
            return false;
        };
        if o.flag == "--pytorch" {
            return check_pytorch(o, block, warnings);
        }
        if !ENUMERATED.contains(&o.flag.as_str()) {
            return true; // a path, a number or a boolean
        }
        let missing: Vec<String> = o
            .values
            .iter()
            .filter(|v| !lists_value(block, v))
            .cloned()
            .collect();
        if missing.is_empty() {
            return true;
        }
        o.values.retain(|v| !missing.contains(v));
        warnings.push(format!(
            "this nsys's {} does not accept {}: {}",
            o.flag,
            missing.join(", "),
            if o.values.is_empty() {
                "option left out".to_string()
            } else {
                format!("using {}", o.values.join(","))
            }
        ));
        !o.values.is_empty()
    });
}

/// `--pytorch`: `autograd-shapes-nvtx` where listed, else `autograd-nvtx`.
fn check_pytorch(o: &mut Opt, block: &str, warnings: &mut Vec<String>) -> bool {
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
    false
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
    fn options_round_trip() {
        let o = Opt::parse("--trace=cuda,nvtx");
        assert_eq!(o.values, ["cuda", "nvtx"]);
        assert_eq!(o.render(), "--trace=cuda,nvtx");
        assert_eq!(
            Opt::whole("--python-functions-trace", "a,b.json").render(),
            "--python-functions-trace=a,b.json"
        );
    }
}
