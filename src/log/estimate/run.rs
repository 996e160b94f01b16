//! Finding the checkout's estimator and running it: the driver (driver.py beside this file,
//! built in) is handed to the checkout's Python with a JSON request on standard input and
//! answers with one line of JSON. Nothing is written into the checkout (`-B`: no bytecode).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::EstimateError;
use super::model::{FoundBy, Parallel};

const DRIVER: &str = include_str!("driver.py");

/// The checkout holding the estimator: `root` when given, else the first folder above the
/// model path that has it, else the current folder or one above it.
pub fn find_checkout(
    root: Option<&Path>,
    model: &str,
    marker: &str,
    since: Option<&str>,
) -> Result<(PathBuf, FoundBy), EstimateError> {
    if let Some(r) = root {
        return if r.join(marker).is_file() {
            Ok((absolute(r), FoundBy::Root))
        } else {
            Err(EstimateError::NoEstimator {
                checkout: r.display().to_string(),
                marker: marker.to_string(),
                since: since.map(str::to_string),
            })
        };
    }
    let model = Path::new(model);
    if model.is_absolute()
        && let Some(found) = model.ancestors().skip(1).find(|d| d.join(marker).is_file())
    {
        return Ok((absolute(found), FoundBy::ModelPath));
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    if let Some(found) = cwd.ancestors().find(|d| d.join(marker).is_file()) {
        return Ok((absolute(found), FoundBy::CurrentFolder));
    }
    Err(EstimateError::NotFound {
        model: model.display().to_string(),
        cwd: cwd.display().to_string(),
        marker: marker.to_string(),
    })
}

/// The folder as an absolute path (the driver runs in it and imports from it).
fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The model's config file: the path as configured (relative to the checkout, where
/// pithtrain's scripts run), or the config file in it when it is a folder.
pub fn model_config(
    checkout: &Path,
    model: &str,
    in_folder: &str,
) -> Result<PathBuf, EstimateError> {
    let p = Path::new(model);
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        checkout.join(p)
    };
    let file = if p.is_dir() { p.join(in_folder) } else { p };
    if file.is_file() {
        Ok(file)
    } else {
        Err(EstimateError::NoModelConfig {
            model: model.to_string(),
            checkout: checkout.display().to_string(),
            in_folder: in_folder.to_string(),
        })
    }
}

/// `python3` (or `python`) on PATH.
pub fn python() -> Result<PathBuf, EstimateError> {
    let paths = std::env::var_os("PATH").ok_or(EstimateError::NoPython)?;
    for name in ["python3", "python"] {
        if let Some(p) = std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
        {
            return Ok(p);
        }
    }
    Err(EstimateError::NoPython)
}

#[derive(Debug, Serialize)]
pub struct Request<'a> {
    pub root: &'a str,
    pub package: &'a str,
    pub model: &'a str,
    pub fragmentation: f64,
    pub parallel: Parallel,
    pub pp_ranks: Vec<i64>,
}

#[derive(Debug, Deserialize)]
struct Answer {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    ranks: Vec<Simulated>,
}

/// What the estimator simulated for one pipeline rank.
#[derive(Debug, Deserialize)]
pub struct Simulated {
    pub pp_rank: i64,
    pub static_bytes: i64,
    pub non_pytorch_bytes: i64,
    pub peak_index: usize,
    pub peak_event: String,
    pub peak_model_bytes: i64,
    pub peak_total_bytes: i64,
    /// Each event's name and model tensors (static + dynamic) there.
    pub events: Vec<(String, i64)>,
    /// Each event's buckets (`static`, `activations`, `gradients`, ...), as far as the
    /// checkout's estimator has them; empty from a driver that does not say.
    #[serde(default)]
    pub components: Vec<std::collections::BTreeMap<String, i64>>,
}

/// Run the driver with `python` on `req`.
pub fn simulate(python: &Path, req: &Request) -> Result<Vec<Simulated>, EstimateError> {
    let mut child = Command::new(python)
        .args(["-I", "-B", "-c", DRIVER])
        .current_dir(req.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| EstimateError::Driver(format!("{}: cannot run: {e}", python.display())))?;
    let body = serde_json::to_vec(req).map_err(|e| EstimateError::Driver(e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A driver that died before reading is reported by its output below.
        let _ = stdin.write_all(&body);
    }
    let out = child
        .wait_with_output()
        .map_err(|e| EstimateError::Driver(format!("{}: {e}", python.display())))?;
    let answer: Answer = match serde_json::from_slice(&out.stdout) {
        Ok(a) => a,
        Err(_) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output");
            return Err(EstimateError::Driver(format!(
                "{} gave no result ({}): {}",
                python.display(),
                out.status,
                last.trim()
            )));
        }
    };
    if let Some(e) = answer.error {
        return Err(EstimateError::Driver(e));
    }
    Ok(answer.ranks)
}
