//! The tree being instrumented: finding its root, listing its Python files, and mapping
//! a model name onto a model file. What identifies a checkout comes from the rule set.

use std::path::{Path, PathBuf};

use walkdir::WalkDir;

use crate::rules::Manifest;

/// Walk up from `start` to the first folder holding `marker` (e.g. `pithtrain/__init__.py`).
pub fn find_root(start: &Path, marker: &str) -> Result<PathBuf, String> {
    let start = start
        .canonicalize()
        .map_err(|e| format!("{}: {e}", start.display()))?;
    let mut dir: Option<&Path> = Some(&start);
    while let Some(d) = dir {
        if d.join(marker).is_file() {
            return Ok(d.to_path_buf());
        }
        dir = d.parent();
    }
    Err(format!(
        "{} is not inside a checkout this rule set applies to (no {marker} here or above); run from the checkout or pass --root DIR",
        start.display()
    ))
}

/// Folders never worth scanning: version control, environments, caches, build output.
fn skipped_dir(name: &str) -> bool {
    name.starts_with('.') && name != "." && name != ".."
        || matches!(
            name,
            "__pycache__"
                | "node_modules"
                | "venv"
                | "env"
                | "target"
                | "build"
                | "dist"
                | "site-packages"
        )
}

/// Python files under `dir`, relative to `root`, sorted, with `/` separators.
pub fn python_files(root: &Path, dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = WalkDir::new(dir)
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0
                || !(e.file_type().is_dir() && skipped_dir(&e.file_name().to_string_lossy()))
        })
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "py"))
        .filter_map(|e| {
            e.path()
                .strip_prefix(root)
                .ok()
                .map(|p| p.to_string_lossy().replace('\\', "/"))
        })
        .collect();
    out.sort();
    out
}

/// The models a checkout has: file stems under the rule set's model folder.
pub fn available_models(root: &Path, manifest: &Manifest) -> Vec<String> {
    let Some(spec) = &manifest.models else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(root.join(&spec.dir)) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let p = e.path();
            (p.extension().is_some_and(|x| x == "py")).then(|| {
                p.file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .to_string()
            })
        })
        .filter(|stem| !spec.exclude.contains(stem))
        .collect();
    out.sort();
    out
}

/// How a model is written on the command line: `qwen3_moe` -> `qwen3-moe`.
pub fn display_model(stem: &str) -> String {
    stem.replace('_', "-")
}

/// Map what the user typed (`qwen3-moe`, `qwen3.5-moe`, `qwen3_moe`) onto a model file stem.
pub fn resolve_model(root: &Path, manifest: &Manifest, typed: &str) -> Result<String, String> {
    let models = available_models(root, manifest);
    let spec = manifest
        .models
        .as_ref()
        .ok_or("this rule set does not work per model; omit the model name")?;
    let lowered = typed.trim().to_lowercase();
    let mut candidates = vec![
        lowered.replace('-', "_"),
        lowered.replace(['-', '.'], "_"),
        lowered.replace('-', "_").replace('.', ""),
    ];
    if let Some(alias) = spec.aliases.get(&lowered) {
        candidates.insert(0, alias.clone());
    }
    if let Some(found) = candidates.iter().find(|c| models.contains(c)) {
        return Ok(found.clone());
    }
    let listed: Vec<String> = models.iter().map(|m| display_model(m)).collect();
    Err(format!(
        "unknown model `{typed}`: no {}/{}.py (models in this checkout: {})",
        spec.dir,
        candidates[0],
        if listed.is_empty() {
            "none".to_string()
        } else {
            listed.join(", ")
        }
    ))
}

/// Top-level packages and modules of a checkout, as ruff finds first-party code: folders
/// with `__init__.py` and `.py` files in the root and in `src/`.
pub fn local_modules(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for dir in [root.to_path_buf(), root.join("src")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if p.is_dir() && p.join("__init__.py").is_file() {
                out.push(name);
            } else if let Some(stem) = name.strip_suffix(".py") {
                out.push(stem.to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}
