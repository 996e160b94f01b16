//! Skills for pithtrain's coding agents: the `skills/<name>/` folders of this repository,
//! embedded in the binary, written into a checkout's `.agents/skills/` and taken out again.
//!
//! What was written is recorded in one manifest, `.agents/skills/.instrument-skills.json`:
//! every file (relative to `.agents/skills/`) with a hash of the bytes written. `install`
//! refuses a skill folder of the same name the manifest does not name (someone else's skill)
//! and a file of ours edited since (unless forced); `remove` deletes exactly the files the
//! manifest names, and the folders that leaves empty. Both check everything before they
//! change anything: a refusal writes or deletes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use include_dir::{Dir, include_dir};
use serde::{Deserialize, Serialize};

use crate::exit::{Class, Classify};

static BUNDLED: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/skills");

/// Where skills live in a checkout, relative to its root.
pub const SKILLS_DIR: &str = ".agents/skills";
/// The manifest of what `install` wrote, in `SKILLS_DIR`.
pub const MANIFEST: &str = ".instrument-skills.json";
const SCHEMA: &str = "instrument.skills/1";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{0}: a skill of this name is there and instrument did not write it (not in {SKILLS_DIR}/{MANIFEST}); nothing was written: rename or move that skill, then install again"
    )]
    Foreign(String),
    #[error(
        "{0}: edited since instrument wrote it; nothing was {1}: keep your copy elsewhere and pass --force, or leave it"
    )]
    Edited(String, &'static str),
    #[error("{path}: not a manifest instrument can read ({msg}); nothing was changed")]
    Manifest { path: String, msg: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A skill or manifest in the way is the user's to fix; a read or write the system refused has
/// the class every command gives that I/O error (not allowed: the user's; a full disk: 3).
impl Classify for Error {
    fn class(&self) -> Class {
        match self {
            Error::Io { source, .. } => crate::exit::io_class(source),
            _ => Class::User,
        }
    }
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// One bundled skill: its name (the folder) and its files (relative to `SKILLS_DIR`).
pub struct Skill {
    pub name: String,
    pub files: Vec<(String, &'static [u8])>,
}

/// The skills this binary carries, by name.
pub fn bundled() -> Vec<Skill> {
    let mut skills: Vec<Skill> = BUNDLED
        .dirs()
        .map(|d| {
            let mut files = Vec::new();
            collect(d, &mut files);
            files.sort();
            Skill {
                name: d.path().to_string_lossy().into_owned(),
                files,
            }
        })
        .collect();
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    skills
}

fn collect(dir: &'static Dir<'static>, out: &mut Vec<(String, &'static [u8])>) {
    for f in dir.files() {
        out.push((f.path().to_string_lossy().replace('\\', "/"), f.contents()));
    }
    for d in dir.dirs() {
        collect(d, out);
    }
}

/// The text of a bundled file (`NAME/SKILL.md`), for the tests and `skills show`.
pub fn bundled_file(rel: &str) -> Option<&'static [u8]> {
    BUNDLED.get_file(rel).map(|f| f.contents())
}

/// FNV-1a, 64 bits: enough to tell our bytes from edited ones.
fn hash(bytes: &[u8]) -> String {
    format!("fnv1a64:{:016x}", crate::fnv::fnv1a64(bytes))
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    schema: String,
    /// The version of instrument that wrote the files.
    version: String,
    /// File (relative to `SKILLS_DIR`, `/` separators) -> hash of the bytes written.
    files: BTreeMap<String, String>,
}

fn read_manifest(skills: &Path) -> Result<Option<Manifest>, Error> {
    let path = skills.join(MANIFEST);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path, e)),
    };
    let bad = |msg: String| Error::Manifest {
        path: path.display().to_string(),
        msg,
    };
    let m: Manifest = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if m.schema != SCHEMA {
        return Err(bad(format!("schema {:?}, expected {SCHEMA:?}", m.schema)));
    }
    if let Some(f) = m.files.keys().find(|f| !safe_relative(f)) {
        return Err(bad(format!("{f:?} is not a path inside {SKILLS_DIR}")));
    }
    Ok(Some(m))
}

/// A manifest entry stays inside `SKILLS_DIR`: relative, no `..`, no empty part.
fn safe_relative(rel: &str) -> bool {
    !rel.is_empty()
        && !rel.starts_with('/')
        && rel
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != "..")
}

/// What a run did, file by file (paths relative to the checkout root).
#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub root: String,
    /// The skills installed (install) or removed (remove).
    pub skills: Vec<String>,
    /// Files written, new or changed (install).
    pub written: Vec<String>,
    /// Files already as this version writes them (install).
    pub unchanged: Vec<String>,
    /// Files deleted (remove; install: files of an older version this one no longer has).
    pub removed: Vec<String>,
    /// Files the manifest named that were already gone (remove).
    pub missing: Vec<String>,
}

impl Report {
    fn new(root: &Path) -> Report {
        Report {
            schema: SCHEMA,
            root: root.display().to_string(),
            ..Report::default()
        }
    }
}

fn shown(rel: &str) -> String {
    format!("{SKILLS_DIR}/{rel}")
}

/// A file the manifest names: `Ok(true)` when it holds what was written, `Ok(false)` when it
/// is gone, `Err` when it was edited (and `force` is off).
fn ours_unedited(
    skills: &Path,
    rel: &str,
    recorded: &str,
    force: bool,
    verb: &'static str,
) -> Result<bool, Error> {
    let path = skills.join(rel);
    match std::fs::read(&path) {
        Ok(bytes) if hash(&bytes) == recorded || force => Ok(true),
        Ok(_) => Err(Error::Edited(shown(rel), verb)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io(&path, e)),
    }
}

/// Write the bundled skills into `root/.agents/skills/`. `force` overwrites files of ours
/// edited since they were written (never someone else's skill).
pub fn install(root: &Path, force: bool) -> Result<Report, Error> {
    let skills_dir = root.join(SKILLS_DIR);
    let old = read_manifest(&skills_dir)?.unwrap_or_default();
    let bundle = bundled();
    let mut report = Report::new(root);

    // Check everything first.
    for skill in &bundle {
        let dir = skills_dir.join(&skill.name);
        let owned = old
            .files
            .keys()
            .any(|f| f.starts_with(&format!("{}/", skill.name)));
        if dir.symlink_metadata().is_ok() && !owned {
            return Err(Error::Foreign(shown(&skill.name)));
        }
        for (rel, _) in &skill.files {
            let path = skills_dir.join(rel);
            match old.files.get(rel) {
                Some(h) => {
                    ours_unedited(&skills_dir, rel, h, force, "written")?;
                }
                None if path.symlink_metadata().is_ok() => {
                    return Err(Error::Foreign(shown(rel)));
                }
                None => {}
            }
        }
    }
    let bundled_files: BTreeMap<&str, &[u8]> = bundle
        .iter()
        .flat_map(|s| s.files.iter().map(|(r, b)| (r.as_str(), *b)))
        .collect();
    let stale: Vec<(&String, &String)> = old
        .files
        .iter()
        .filter(|(rel, _)| !bundled_files.contains_key(rel.as_str()))
        .collect();
    let mut stale_present = Vec::new();
    for (rel, h) in &stale {
        if ours_unedited(&skills_dir, rel, h, force, "written")? {
            stale_present.push(rel.to_string());
        }
    }

    // Then write. The manifest first names the new files too, so a run stopped midway (a full
    // disk) leaves nothing a second install would take for someone else's; each file goes
    // through a temporary beside it; the final manifest last.
    let skills_manifest = skills_dir.join(MANIFEST);
    let mut pending = Manifest {
        schema: SCHEMA.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        files: old.files.clone(),
    };
    for (rel, bytes) in &bundled_files {
        pending
            .files
            .entry(rel.to_string())
            .or_insert_with(|| hash(bytes));
    }
    std::fs::create_dir_all(&skills_dir).map_err(|e| io(&skills_dir, e))?;
    write_atomically(&skills_manifest, &manifest_bytes(&pending))?;
    let mut manifest = Manifest {
        files: BTreeMap::new(),
        ..pending
    };
    for (rel, bytes) in &bundled_files {
        let path = skills_dir.join(rel);
        manifest.files.insert(rel.to_string(), hash(bytes));
        if std::fs::read(&path).is_ok_and(|b| b == *bytes) {
            report.unchanged.push(shown(rel));
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        write_atomically(&path, bytes)?;
        report.written.push(shown(rel));
    }
    for rel in stale_present {
        let path = skills_dir.join(&rel);
        std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
        prune_empty(&skills_dir, &rel);
        report.removed.push(shown(&rel));
    }
    write_atomically(&skills_manifest, &manifest_bytes(&manifest))?;
    report.skills = bundle.into_iter().map(|s| s.name).collect();
    Ok(report)
}

fn manifest_bytes(m: &Manifest) -> Vec<u8> {
    (serde_json::to_string_pretty(m).expect("a manifest serializes") + "\n").into_bytes()
}

/// Delete the files `install` wrote (as the manifest names them), the folders that leaves
/// empty, and the manifest. `force` deletes files of ours edited since they were written.
pub fn remove(root: &Path, force: bool) -> Result<Report, Error> {
    let skills_dir = root.join(SKILLS_DIR);
    let mut report = Report::new(root);
    let Some(manifest) = read_manifest(&skills_dir)? else {
        return Ok(report);
    };
    let mut present = Vec::new();
    for (rel, h) in &manifest.files {
        if ours_unedited(&skills_dir, rel, h, force, "removed")? {
            present.push(rel.clone());
        } else {
            report.missing.push(shown(rel));
        }
    }
    for rel in &present {
        let path = skills_dir.join(rel);
        std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
        report.removed.push(shown(rel));
    }
    for rel in manifest.files.keys() {
        prune_empty(&skills_dir, rel);
    }
    let path = skills_dir.join(MANIFEST);
    std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
    let mut names: Vec<String> = manifest
        .files
        .keys()
        .filter_map(|f| f.split('/').next().map(str::to_string))
        .collect();
    names.dedup();
    report.skills = names;
    Ok(report)
}

/// Remove the folders of `rel` below `skills_dir` that are now empty (never `skills_dir`).
fn prune_empty(skills_dir: &Path, rel: &str) {
    let mut dir: PathBuf = skills_dir.join(rel);
    while dir.pop() && dir != skills_dir && dir.starts_with(skills_dir) {
        // Fails (and stops) on the first folder that still holds something.
        if std::fs::remove_dir(&dir).is_err() {
            break;
        }
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.instrument-tmp"));
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(path, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_skill_has_pithtrains_front_matter() {
        let skills = bundled();
        assert!(skills.len() >= 4);
        for s in &skills {
            let md = bundled_file(&format!("{}/SKILL.md", s.name)).expect("SKILL.md");
            let text = std::str::from_utf8(md).unwrap();
            let front = text
                .strip_prefix("---\n")
                .and_then(|t| t.split_once("\n---\n"))
                .map(|(f, _)| f)
                .unwrap_or_else(|| panic!("{}: no front matter", s.name));
            assert!(front.contains(&format!("name: {}\n", s.name)), "{}", s.name);
            assert!(front.contains("\ndescription: "), "{}", s.name);
            assert!(front.contains("\nargument-hint: "), "{}", s.name);
        }
    }

    #[test]
    fn manifest_paths_stay_inside() {
        assert!(safe_relative("a/SKILL.md"));
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a"] {
            assert!(!safe_relative(bad), "{bad}");
        }
    }
}
