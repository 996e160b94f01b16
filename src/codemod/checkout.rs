//! The tree being instrumented: finding its root, listing its Python files, and mapping
//! a model name onto a model file. What identifies a checkout comes from the rule set.

use std::path::{Path, PathBuf};

use walkdir::WalkDir;

use super::error::{Checkout, Error, Usage};
use crate::rules::Manifest;

/// The checkout a rule set works on: `root` (or the current folder), walked up to the rule
/// set's marker; without a marker, `root` (or the current folder) itself.
pub fn root_for(root: Option<&Path>, manifest: &Manifest) -> Result<PathBuf, Error> {
    let start = root.unwrap_or(Path::new("."));
    if !start.is_dir() {
        return Err(Error::Checkout(Checkout::NoSuchRoot {
            root: start.display().to_string(),
        }));
    }
    match &manifest.root_marker {
        Some(marker) => find_root(start, marker),
        None => start
            .canonicalize()
            .map_err(|e| Error::io(start.display(), e)),
    }
}

/// Walk up from `start` to the first folder holding `marker` (e.g. `pithtrain/__init__.py`).
pub fn find_root(start: &Path, marker: &str) -> Result<PathBuf, Error> {
    let start = start
        .canonicalize()
        .map_err(|e| Error::io(start.display(), e))?;
    let mut dir: Option<&Path> = Some(&start);
    while let Some(d) = dir {
        if d.join(marker).is_file() {
            return Ok(d.to_path_buf());
        }
        dir = d.parent();
    }
    Err(Error::Checkout(Checkout::NotInside {
        start: start.display().to_string(),
        marker: marker.to_string(),
    }))
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

/// What a walk of a tree finds.
#[derive(Debug, Default)]
pub struct Walk {
    /// Python files, relative to the root, sorted, with `/` separators. A file reached
    /// through a symlinked folder is listed by the path through the link, once.
    pub python: Vec<String>,
    /// Temporary files an interrupted run left (absolute paths).
    pub temps: Vec<PathBuf>,
}

/// Walk `dir` (under `root`), following symlinked folders as Python does when it imports
/// through them, so `add`, `status`, `check` and `remove` all see the same files.
pub fn walk(root: &Path, dir: &Path) -> Walk {
    let mut out = Walk::default();
    let mut seen = std::collections::HashSet::new();
    for e in WalkDir::new(dir)
        .follow_links(true)
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0
                || !(e.file_type().is_dir() && skipped_dir(&e.file_name().to_string_lossy()))
        })
        .filter_map(Result::ok)
    {
        if !e.file_type().is_file() {
            continue;
        }
        let name = e.file_name().to_string_lossy();
        if super::transaction::is_temp_name(&name) {
            out.temps.push(e.path().to_path_buf());
            continue;
        }
        if e.path().extension().is_none_or(|x| x != "py") {
            continue;
        }
        // The same file through two paths (a link and its target both in the tree): the
        // inode from the directory entry, free, with the name against reuse across file
        // systems.
        if !seen.insert((walkdir::DirEntryExt::ino(&e), e.file_name().to_owned())) {
            continue;
        }
        if let Some(rel) = relative(root, e.path()) {
            out.python.push(rel);
        }
    }
    out.python.sort();
    out.temps.sort();
    out
}

/// `path` relative to `root`, with `/` separators; a path outside it as it is.
pub fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).unwrap_or(path);
    Some(rel.to_string_lossy().replace('\\', "/"))
}

/// Python files under `dir`, relative to `root` (see `walk`).
pub fn python_files(root: &Path, dir: &Path) -> Vec<String> {
    walk(root, dir).python
}

/// Where `remove`, `status` and `check` look: the checkout (found as `add` finds it) and
/// what to scan in it.
#[derive(Debug, Clone)]
pub struct Scope {
    pub root: PathBuf,
    /// Folders and files to scan (absolute); the root when no paths were given.
    pub targets: Vec<PathBuf>,
    /// Whether `root` is a checkout (found by its marker or named by --root).
    pub checkout: bool,
}

/// `--root`, else the checkout above the current folder (by any of `markers`); with
/// `paths`, those are scanned, else the whole checkout. Below a folder that is no
/// checkout, `--root` or paths are needed: a bare `remove` in a home folder must not
/// reach every checkout below it.
pub fn scope(root: Option<&Path>, paths: &[PathBuf], markers: &[String]) -> Result<Scope, Error> {
    for p in paths {
        if !p.exists() {
            return Err(Error::Checkout(Checkout::NoSuchPath {
                path: p.display().to_string(),
            }));
        }
    }
    let absolute = |p: &Path| p.canonicalize().map_err(|e| Error::io(p.display(), e));
    let targets = |root: &Path| -> Result<Vec<PathBuf>, Error> {
        if paths.is_empty() {
            Ok(vec![root.to_path_buf()])
        } else {
            // Keep the path as given under the root (a symlinked folder stays one).
            let cwd = std::env::current_dir().map_err(|e| Error::io("the current folder", e))?;
            paths
                .iter()
                .map(|p| {
                    let joined = cwd.join(p);
                    Ok(if joined.starts_with(root) {
                        joined
                    } else {
                        absolute(p)?
                    })
                })
                .collect()
        }
    };
    if let Some(r) = root {
        if !r.is_dir() {
            return Err(Error::Checkout(Checkout::NoSuchRoot {
                root: r.display().to_string(),
            }));
        }
        let root = absolute(r)?;
        return Ok(Scope {
            targets: targets(&root)?,
            root,
            checkout: true,
        });
    }
    let start = paths.first().map_or(Path::new("."), |p| p.as_path());
    let start = if start.is_file() {
        start
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    } else {
        start
    };
    for m in markers {
        if let Ok(found) = find_root(start, m) {
            return Ok(Scope {
                targets: targets(&found)?,
                root: found,
                checkout: true,
            });
        }
    }
    let cwd = absolute(Path::new("."))?;
    if paths.is_empty() {
        return Err(Error::Checkout(Checkout::NoneHere {
            cwd: cwd.display().to_string(),
            markers: markers.to_vec(),
        }));
    }
    Ok(Scope {
        targets: targets(&cwd)?,
        root: cwd,
        checkout: false,
    })
}

impl Scope {
    /// Every file in scope: Python files under its folders, and the files named.
    pub fn walk(&self) -> Walk {
        let mut out = Walk::default();
        for t in &self.targets {
            if t.is_file() {
                if let Some(rel) = relative(&self.root, t) {
                    out.python.push(rel);
                }
                continue;
            }
            let w = walk(&self.root, t);
            out.python.extend(w.python);
            out.temps.extend(w.temps);
        }
        out.python.sort();
        out.python.dedup();
        out
    }
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
pub fn resolve_model(root: &Path, manifest: &Manifest, typed: &str) -> Result<String, Error> {
    let models = available_models(root, manifest);
    let spec = manifest
        .models
        .as_ref()
        .ok_or(Error::from(Usage::NotPerModel))?;
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
    let listed = if listed.is_empty() {
        "none".to_string()
    } else {
        listed.join(", ")
    };
    // A file of the model folder that the rule set does not count as a model.
    if let Some(stem) = candidates
        .iter()
        .find(|c| root.join(&spec.dir).join(format!("{c}.py")).is_file())
    {
        return Err(Error::from(Usage::NotAModel {
            typed: typed.to_string(),
            file: format!("{}/{stem}.py", spec.dir),
            set: manifest.name.clone(),
            models: listed,
        }));
    }
    Err(Error::from(Usage::UnknownModel {
        typed: typed.to_string(),
        file: format!("{}/{}.py", spec.dir, candidates[0]),
        models: listed,
    }))
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
