//! Helpers shared by the integration tests: a scratch copy of the fixture checkout,
//! running the binary, reading every file of a tree.

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
