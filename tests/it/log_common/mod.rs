//! Helpers for the `instrument log` tests: logs made by running the instrumented fixture
//! on the fake torch (tools/log_fixture.py), with the truth the fake torch returned.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const GIB: f64 = 1073741824.0;
pub const MIB: f64 = 1048576.0;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The models of the fixture: (`add` name, example folder).
pub const MODELS: [(&str, &str); 4] = [
    ("qwen3-moe", "qwen3-tiny"),
    ("qwen3.5-moe", "qwen3.5-tiny"),
    ("deepseek-v2", "deepseek-v2-tiny"),
    ("gpt-oss", "gpt-oss-tiny"),
];

/// One generated run: its folder (logs and truth.json) and the truth.
pub struct Scenario {
    /// The instrumented checkout the run ran from.
    pub checkout: tempfile::TempDir,
    pub out: tempfile::TempDir,
    pub snaps: tempfile::TempDir,
    pub truth: serde_json::Value,
}

impl Scenario {
    pub fn path(&self, name: &str) -> String {
        self.out.path().join(name).display().to_string()
    }
}

pub fn python() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("python3"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var("INSTRUMENT_REQUIRE_PYTHON").is_ok_and(|v| v == "1") {
            panic!("python3 is required (INSTRUMENT_REQUIRE_PYTHON=1) but not on PATH");
        }
        eprintln!(
            "notice: python3 not on PATH; skipping (set INSTRUMENT_REQUIRE_PYTHON=1 to make this a failure)"
        );
    }
    found
}

pub fn instrument(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_instrument"))
        .args(args)
        .output()
        .expect("run instrument")
}

/// `instrument log --json ARGS`, insisting it worked.
pub fn log_json(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["log", "--json"];
    a.extend_from_slice(args);
    let out = instrument(&a);
    assert_eq!(
        out.status.code(),
        Some(0),
        "instrument log {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the report is JSON")
}

fn copy_tree(src: &Path, dst: &Path) {
    for entry in walkdir::WalkDir::new(src) {
        let entry = entry.unwrap();
        let rel = entry.path().strip_prefix(src).unwrap();
        if rel.components().any(|c| c.as_os_str() == "__pycache__") {
            continue;
        }
        let target = dst.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Instrument a copy of the fixture for `model` (ranks 3 and 14) and run it on the fake
/// torch with `pp` pipeline stages; `generator_args` are extra tools/log_fixture.py arguments.
pub fn scenario(
    python: &Path,
    model: &str,
    example: &str,
    pp: u32,
    generator_args: &[&str],
) -> Scenario {
    scenario_in(python, model, example, pp, generator_args, None)
}

/// As `scenario`, with the snapshot folder `add` is given under the snapshot tempdir
/// (`Some("file/below")`: a folder that cannot be made, under a file of that name).
pub fn scenario_in(
    python: &Path,
    model: &str,
    example: &str,
    pp: u32,
    generator_args: &[&str],
    snapshot_subdir: Option<&str>,
) -> Scenario {
    scenario_full(
        python,
        model,
        example,
        pp,
        "3,14",
        &[],
        generator_args,
        snapshot_subdir,
    )
}

/// As `scenario_in`, profiling `ranks` (`3,5,14`) with `add_args` given to `instrument add`.
#[allow(clippy::too_many_arguments)]
pub fn scenario_full(
    python: &Path,
    model: &str,
    example: &str,
    pp: u32,
    ranks: &str,
    add_args: &[&str],
    generator_args: &[&str],
    snapshot_subdir: Option<&str>,
) -> Scenario {
    let checkout = tempfile::tempdir().unwrap();
    copy_tree(&repo_root().join("fixtures/pithtrain"), checkout.path());
    let snaps = tempfile::tempdir().unwrap();
    let root = checkout.path().display().to_string();
    let mut snap_dir = snaps.path().display().to_string();
    if let Some(sub) = snapshot_subdir {
        let (file, _) = sub.split_once('/').unwrap_or((sub, ""));
        std::fs::write(snaps.path().join(file), b"a file, not a folder").unwrap();
        snap_dir = snaps.path().join(sub).display().to_string();
    }
    let mut add_cmd = vec![
        "add",
        model,
        "--root",
        &root,
        "--ranks",
        ranks,
        "--snapshot-dir",
        &snap_dir,
    ];
    add_cmd.extend_from_slice(add_args);
    let add = instrument(&add_cmd);
    assert!(
        add.status.success(),
        "add: {}",
        String::from_utf8_lossy(&add.stderr)
    );
    let out = tempfile::tempdir().unwrap();
    let status = Command::new(python)
        .arg(repo_root().join("tools/log_fixture.py"))
        .args(["scenario", "--checkout", &root, "--example", example])
        .args(["--pp", &pp.to_string(), "--snapshot-dir", &snap_dir])
        .args(["--ranks", ranks])
        .arg("--out")
        .arg(out.path())
        .args(generator_args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python runs");
    assert!(
        status.status.success(),
        "log_fixture.py: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let truth =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("truth.json")).unwrap())
            .unwrap();
    Scenario {
        checkout,
        out,
        snaps,
        truth,
    }
}

/// The rank's entry of a report.
pub fn rank(report: &serde_json::Value, r: i64) -> &serde_json::Value {
    report["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["rank"] == r)
        .unwrap_or_else(|| panic!("rank {r} not in the report"))
}

/// Bytes as a JSON number.
pub fn b(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

/// `got` (bytes, read from a print rounded to 0.01 GiB) is `truth` (bytes).
pub fn near_gib(got: f64, truth: f64, what: &str) {
    assert!(
        (got - truth).abs() <= 0.005 * GIB + 1.0,
        "{what}: read {:.4} GiB, the fake torch returned {:.4} GiB",
        got / GIB,
        truth / GIB
    );
}

/// Same for MiB figures printed with one decimal.
pub fn near_mib(got: f64, truth: f64, what: &str) {
    assert!(
        (got - truth).abs() <= 0.05 * MIB + 1.0,
        "{what}: read {:.3} MiB, the fake torch returned {:.3} MiB",
        got / MIB,
        truth / MIB
    );
}

/// Mesh coordinates as the report says them: the axes wider than one rank, in pithtrain's
/// order (`pp 0, dp 2, ep 1`), from the coordinates the fake torch's mesh gave.
pub fn mesh_short(mesh: &serde_json::Value) -> String {
    ["pp", "dp", "cp", "ep"]
        .iter()
        .filter(|a| mesh[**a][1].as_u64().unwrap() > 1)
        .map(|a| format!("{a} {}", mesh[*a][0]))
        .collect::<Vec<_>>()
        .join(", ")
}
