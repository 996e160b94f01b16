//! Helpers shared by the integration tests: a scratch copy of the fixture checkout,
//! running the binary, reading every file of a tree, and a command's whole output as a
//! snapshot pins it (`Transcript`, with the temporary folders `Redact` names).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixture() -> PathBuf {
    repo_root().join("fixtures/pithtrain")
}

/// Copy `src` into a new temporary folder; the folder lives as long as the guard.
pub fn scratch_copy(src: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_tree(src, dir.path());
    dir
}

pub fn copy_tree(src: &Path, dst: &Path) {
    for entry in walkdir::WalkDir::new(src) {
        let entry = entry.expect("walk");
        let rel = entry.path().strip_prefix(src).expect("prefix");
        if rel
            .components()
            .any(|c| c.as_os_str() == "__pycache__" || c.as_os_str() == ".ruff_cache")
        {
            continue;
        }
        let target = dst.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Every regular file under `root` (caches excluded), path -> bytes.
pub fn snapshot_tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            !e.path()
                .components()
                .any(|c| c.as_os_str() == "__pycache__" || c.as_os_str() == ".ruff_cache")
        })
        .map(|e| {
            let rel = e
                .path()
                .strip_prefix(root)
                .expect("prefix")
                .to_string_lossy()
                .to_string();
            (rel, std::fs::read(e.path()).expect("read"))
        })
        .collect()
}

pub fn instrument(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_instrument"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run instrument")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Run `add` and insist it worked.
pub fn add_ok(root: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["add", "qwen3-moe"];
    args.extend_from_slice(extra);
    let out = instrument(&args, root);
    assert_eq!(out.status.code(), Some(0), "add failed: {}", stderr(&out));
    out
}

/// A tool other tests need (ruff, python3): `None` with a notice when it is missing and
/// the environment does not require it; a panic when `require_var` is set.
pub fn tool(name: &str, require_var: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var(require_var).is_ok_and(|v| v == "1") {
            panic!("{name} is required ({require_var}=1) but not on PATH");
        }
        eprintln!(
            "notice: {name} not on PATH; skipping (set {require_var}=1 to make this a failure)"
        );
    }
    found
}

/// Run `ruff check` and `ruff format --check` in `dir` (with `config`, if given) and
/// insist both pass, as they do on pithtrain itself.
pub fn assert_ruff_clean(ruff: &Path, dir: &Path, config: Option<&Path>) {
    for args in [&["check"][..], &["format", "--check"][..]] {
        let mut cmd = Command::new(ruff);
        cmd.args(args).arg("--no-cache");
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        let out = cmd.arg(".").current_dir(dir).output().expect("ruff runs");
        assert!(
            out.status.success(),
            "ruff {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// What a pinned output must not depend on: the temporary folders a test made, each
/// replaced by a fixed name (`<CHECKOUT>`), as written and as the system resolves it.
#[derive(Default, Clone)]
pub struct Redact {
    texts: Vec<(String, String)>,
    patterns: Vec<(regex::Regex, String)>,
}

impl Redact {
    /// Name `path` `name` wherever it appears.
    pub fn folder(mut self, path: &Path, name: &str) -> Self {
        let mut forms = vec![path.display().to_string()];
        if let Ok(real) = path.canonicalize() {
            forms.push(real.display().to_string());
        }
        for form in forms {
            if !self.texts.iter().any(|(f, _)| *f == form) {
                self.texts.push((form, name.to_string()));
            }
        }
        // The longest first, so a folder inside another is named as itself.
        self.texts.sort_by_key(|(f, _)| std::cmp::Reverse(f.len()));
        self
    }

    /// Replace the text `from` (something that differs between machines) with `to`.
    pub fn text(mut self, from: &str, to: &str) -> Self {
        self.texts.push((from.to_string(), to.to_string()));
        self.texts.sort_by_key(|(f, _)| std::cmp::Reverse(f.len()));
        self
    }

    /// Replace what matches `pattern` (a regex) with `to`, after the texts.
    pub fn pattern(mut self, pattern: &str, to: &str) -> Self {
        let re = regex::Regex::new(pattern).expect("a valid pattern");
        self.patterns.push((re, to.to_string()));
        self
    }

    pub fn apply(&self, text: &str) -> String {
        let text = self
            .texts
            .iter()
            .fold(text.to_string(), |t, (from, to)| t.replace(from, to));
        self.patterns.iter().fold(text, |t, (re, to)| {
            re.replace_all(&t, to.as_str()).into_owned()
        })
    }
}

/// A command line as a reader would type it: plain words bare, any other quoted.
fn shell_words(args: &[&str], redact: &Redact) -> String {
    args.iter()
        .map(|a| {
            let a = redact.apply(a);
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./,=:<>".contains(c));
            if plain { a } else { format!("{a:?}") }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// One command's whole outcome as a snapshot pins it: the command, its exit code (or that
/// a signal ended it), its whole stdout and stderr, redacted.
pub fn outcome(args: &[&str], out: &Output, redact: &Redact) -> String {
    let code = out
        .status
        .code()
        .map_or("killed by a signal".to_string(), |c| format!("exit {c}"));
    let mut text = format!("$ instrument {}\n{code}\n", shell_words(args, redact));
    for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let body = redact.apply(&String::from_utf8_lossy(bytes));
        if body.is_empty() {
            text.push_str(&format!("{name}: (empty)\n"));
        } else {
            text.push_str(&format!("{name}:\n{body}"));
            if !body.ends_with('\n') {
                text.push_str("\n(no newline at the end)\n");
            }
        }
    }
    text
}

/// The commands of one test and everything each printed, in order, for one snapshot: what
/// a reviewer reads to see the behaviour whole.
pub struct Transcript {
    redact: Redact,
    text: String,
}

impl Transcript {
    pub fn new(redact: Redact) -> Self {
        Transcript {
            redact,
            text: String::new(),
        }
    }

    /// Run `instrument args` in `cwd` and record it.
    pub fn run(&mut self, args: &[&str], cwd: &Path) -> Output {
        let out = instrument(args, cwd);
        self.record(args, &out);
        out
    }

    /// Record a command run some other way (with an environment, paused, killed).
    pub fn record(&mut self, args: &[&str], out: &Output) {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(&outcome(args, out, &self.redact));
    }

    /// Run a command whose stdout is a diff (`add --dry-run`) and record it with the diff
    /// summed up per file: the diffs themselves are pinned by codemod_output's snapshots.
    pub fn run_diff(&mut self, args: &[&str], cwd: &Path) -> Output {
        let out = instrument(args, cwd);
        let mut shown = out.clone();
        shown.stdout = diff_summary(&String::from_utf8_lossy(&out.stdout)).into_bytes();
        self.record(args, &shown);
        out
    }

    /// A line saying what the test did between commands (an edit, a kill).
    pub fn note(&mut self, what: &str) {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(&format!("# {what}\n"));
    }

    pub fn text(&self) -> &str {
        &self.text
    }
}

/// A unified diff summed up: each file it changes, with its lines added and taken out.
pub fn diff_summary(diff: &str) -> String {
    if diff.is_empty() {
        return String::new();
    }
    let mut files: Vec<(String, usize, usize)> = Vec::new();
    for line in diff.lines() {
        if let Some(path) = line.strip_prefix("+++ b/") {
            files.push((path.to_string(), 0, 0));
        } else if line.starts_with("--- ") || line.starts_with("diff --git ") {
            continue;
        } else if let Some(f) = files.last_mut() {
            if line.starts_with('+') {
                f.1 += 1;
            } else if line.starts_with('-') {
                f.2 += 1;
            }
        }
    }
    let mut text = format!("(a diff, summed up) {} file(s)\n", files.len());
    for (path, added, removed) in files {
        text.push_str(&format!("  {path} +{added} -{removed}\n"));
    }
    text
}

/// The lines that differ between two texts of as many lines, as (before, after) pairs:
/// `assert_eq!` on it says the two are the same but for exactly these lines.
pub fn line_changes(before: &str, after: &str) -> Vec<(String, String)> {
    let (b, a): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    assert_eq!(b.len(), a.len(), "as many lines:\n{before}\n---\n{after}");
    b.iter()
        .zip(&a)
        .filter(|(x, y)| x != y)
        .map(|(x, y)| (x.to_string(), y.to_string()))
        .collect()
}
