//! Writing planned files so that nothing is ever left half-written.
//!
//! 1. Every new text goes to a temporary file beside the file it replaces (the real file:
//!    a symlink is followed and stays a symlink), with the same mode and owner.
//! 2. Each file is read again: if it changed since it was planned (an editor saved it),
//!    the temporary files are deleted and nothing is written.
//! 3. A journal (`.instrument-journal.json` in the checkout root) lists every file with
//!    its temporary file and a hard link to the original, then the temporary files are
//!    renamed over the targets, then the journal and the links are deleted.
//!
//! A run killed in step 3 leaves the journal: `status` and `check` report it, and the
//! next `add` or `remove` finishes it (or, when its temporary files are gone, puts the
//! originals back) before doing anything else. A run killed before step 3 leaves only
//! temporary files, which the next run deletes.
//!
//! Only the journal is synced to disk before the renames: recovery checks every file's
//! digest, so a temporary file a power loss emptied is found and the originals (hard
//! links to the old, already durable contents) are put back instead.

use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{Changed, Error, Usage};
use super::fault;

/// The journal's file name, in the checkout root.
pub const JOURNAL: &str = ".instrument-journal.json";
const TEMP_TAG: &str = ".instrument-";

/// One file to replace: its path under the root, the bytes it was planned from, the
/// bytes to write.
pub struct Change {
    pub file: String,
    pub before: Vec<u8>,
    pub after: Vec<u8>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    /// The command that wrote it, e.g. `instrument remove`.
    pub command: String,
    pub pid: u32,
    pub files: Vec<Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// As shown to the user (relative to the root).
    pub file: String,
    /// The real file written (symlinks resolved).
    pub target: PathBuf,
    pub temp: PathBuf,
    /// A hard link to (or copy of) the original.
    pub orig: PathBuf,
    pub before: String,
    pub after: String,
}

/// FNV-1a, 64 bits, with the length: enough to tell the two versions of a file apart.
fn digest(bytes: &[u8]) -> String {
    format!("{:016x}-{}", crate::fnv::fnv1a64(bytes), bytes.len())
}

/// Whether a file name is one of ours: `.NAME.instrument-PID.tmp` or `.orig`.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.')
        && name.contains(TEMP_TAG)
        && (name.ends_with(".tmp") || name.ends_with(".orig"))
}

fn side_file(target: &Path, ext: &str) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}{TEMP_TAG}{}.{ext}", std::process::id()))
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Write `bytes` to a new file `tmp` with `like`'s mode and owner.
fn write_like(tmp: &Path, bytes: &[u8], like: &fs::Metadata) -> std::io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)?;
    f.write_all(bytes)?;
    fs::set_permissions(tmp, like.permissions())?;
    // Keep the owner (a run as root must not leave root-owned files); a user who may not
    // give the file away keeps the group and owner the new file already has.
    let _ = std::os::unix::fs::chown(tmp, Some(like.uid()), Some(like.gid()));
    Ok(())
}

fn journal_path(root: &Path) -> PathBuf {
    root.join(JOURNAL)
}

/// The journal of an interrupted run, if there is one.
pub fn pending(root: &Path) -> Option<Result<Journal, Error>> {
    let path = journal_path(root);
    let text = fs::read_to_string(&path).ok()?;
    Some(serde_json::from_str(&text).map_err(|source| {
        Error::Changed(Changed::Journal {
            path: path.display().to_string(),
            source,
        })
    }))
}

/// Replace every file of `changes` under `root`, all or nothing. `command` is recorded
/// in the journal for the messages of an interrupted run.
/// The files of `files` (relative to `root`) that are read-only (no write bit), with
/// their modes: `add` and `remove` write them only with `--force`.
pub fn read_only(root: &Path, files: &[&str]) -> Vec<(String, u32)> {
    use std::os::unix::fs::PermissionsExt;
    files
        .iter()
        .filter_map(|f| {
            let meta = fs::metadata(root.join(f)).ok()?;
            meta.permissions()
                .readonly()
                .then(|| (f.to_string(), meta.permissions().mode() & 0o7777))
        })
        .collect()
}

/// Refuse to write read-only files unless forced: one line naming them, nothing written.
pub fn refuse_read_only(root: &Path, files: &[&str], force: bool) -> Result<(), Error> {
    let locked = read_only(root, files);
    if force || locked.is_empty() {
        return Ok(());
    }
    Err(Error::from(Usage::ReadOnly { files: locked }))
}

pub fn commit(root: &Path, command: &str, changes: &[Change]) -> Result<(), Error> {
    let mut entries: Vec<Entry> = Vec::new();
    let cleanup = |entries: &[Entry]| {
        for e in entries {
            let _ = fs::remove_file(&e.temp);
            let _ = fs::remove_file(&e.orig);
        }
    };
    for c in changes {
        let shown = root.join(&c.file);
        let staged = (|| -> Result<Entry, Error> {
            let target = fs::canonicalize(&shown).map_err(|e| Error::io(&c.file, e))?;
            let meta = fs::metadata(&target).map_err(|e| Error::io(&c.file, e))?;
            let temp = side_file(&target, "tmp");
            write_like(&temp, &c.after, &meta).map_err(|e| {
                let _ = fs::remove_file(&temp);
                Error::Io {
                    message: format!("{}: cannot write ({e}); nothing was changed", c.file),
                    source: e,
                }
            })?;
            Ok(Entry {
                file: c.file.clone(),
                orig: side_file(&target, "orig"),
                target,
                temp,
                before: digest(&c.before),
                after: digest(&c.after),
            })
        })();
        match staged {
            Ok(e) => entries.push(e),
            Err(msg) => {
                cleanup(&entries);
                return Err(msg);
            }
        }
    }
    fault::point("staged");
    // Nothing is written over a file that changed since it was read.
    for (c, e) in changes.iter().zip(&entries) {
        let now = fs::read(&e.target).unwrap_or_default();
        if now != c.before {
            cleanup(&entries);
            return Err(Error::Changed(Changed::File {
                file: c.file.clone(),
            }));
        }
    }
    for e in &entries {
        if fs::hard_link(&e.target, &e.orig).is_err()
            && let Err(err) = fs::copy(&e.target, &e.orig)
        {
            cleanup(&entries);
            return Err(Error::Io {
                message: format!(
                    "{}: cannot keep a copy of the original next to it ({err}); nothing was changed",
                    e.file
                ),
                source: err,
            });
        }
    }
    let journal = Journal {
        command: command.to_string(),
        pid: std::process::id(),
        files: entries.clone(),
    };
    let jpath = journal_path(root);
    let jtmp = root.join(format!(".instrument-journal-{}.tmp", std::process::id()));
    let written = serde_json::to_vec_pretty(&journal)
        .map_err(std::io::Error::other)
        .and_then(|bytes| {
            let mut f = fs::File::create(&jtmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            fs::rename(&jtmp, &jpath)
        });
    if let Err(e) = written {
        let _ = fs::remove_file(&jtmp);
        cleanup(&entries);
        return Err(Error::Io {
            message: format!(
                "{}: cannot write the journal ({e}); nothing was changed",
                jpath.display()
            ),
            source: e,
        });
    }
    sync_dir(root);
    fault::point("journal");
    for e in &entries {
        fs::rename(&e.temp, &e.target).map_err(|err| Error::Io {
            message: format!(
                "{}: cannot replace it ({err}); run the same command again to finish (the journal {} says what is left)",
                e.file, JOURNAL
            ),
            source: err,
        })?;
        fault::point("rename");
    }
    finish(root, &entries);
    Ok(())
}

/// After every rename: drop the originals and the journal.
fn finish(root: &Path, entries: &[Entry]) {
    for e in entries {
        let _ = fs::remove_file(&e.orig);
        let _ = fs::remove_file(&e.temp);
    }
    let _ = fs::remove_file(journal_path(root));
}

/// What recovering an interrupted run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovered {
    /// Every file now holds what the interrupted run meant to write.
    Completed { command: String, files: usize },
    /// Its temporary files were gone: the files it had replaced hold their originals again.
    RolledBack { command: String, files: usize },
}

/// Finish (or undo) an interrupted run, if its journal is there. Call with the lock held.
pub fn recover(root: &Path) -> Result<Option<Recovered>, Error> {
    let Some(journal) = pending(root) else {
        return Ok(None);
    };
    let journal = journal?;
    let state = |e: &Entry| fs::read(&e.target).map(|b| digest(&b)).unwrap_or_default();
    let temp_ok = |e: &Entry| fs::read(&e.temp).is_ok_and(|b| digest(&b) == e.after);
    let mut changed = Vec::new();
    for e in &journal.files {
        let s = state(e);
        if s != e.before && s != e.after {
            changed.push(e.file.clone());
        }
    }
    if !changed.is_empty() {
        return Err(Error::Changed(Changed::SinceInterrupted {
            command: journal.command,
            journal: JOURNAL,
            changed,
        }));
    }
    let left: Vec<&Entry> = journal
        .files
        .iter()
        .filter(|e| state(e) == e.before && e.before != e.after)
        .collect();
    if left.iter().all(|e| temp_ok(e)) {
        for e in &left {
            fs::rename(&e.temp, &e.target).map_err(|err| Error::Io {
                message: format!("{}: cannot replace it ({err})", e.file),
                source: err,
            })?;
        }
        finish(root, &journal.files);
        return Ok(Some(Recovered::Completed {
            command: journal.command,
            files: journal.files.len(),
        }));
    }
    // The new texts are gone: put back the originals of the files already replaced.
    for e in journal.files.iter().filter(|e| state(e) == e.after) {
        let orig_ok = fs::read(&e.orig).is_ok_and(|b| digest(&b) == e.before);
        if !orig_ok {
            return Err(Error::Changed(Changed::OriginalLost {
                command: journal.command.clone(),
                journal: JOURNAL,
                file: e.file.clone(),
            }));
        }
        fs::rename(&e.orig, &e.target).map_err(|err| Error::Io {
            message: format!("{}: cannot restore it ({err})", e.file),
            source: err,
        })?;
    }
    finish(root, &journal.files);
    Ok(Some(Recovered::RolledBack {
        command: journal.command,
        files: journal.files.len(),
    }))
}

/// Say what recovering an interrupted run did, for the user.
pub fn describe(r: &Recovered) -> String {
    match r {
        Recovered::Completed { command, files } => {
            format!("finished the interrupted `{command}` ({files} file(s))")
        }
        Recovered::RolledBack { command, files } => format!(
            "undid the interrupted `{command}` (its new texts were gone; {files} file(s) hold their originals)"
        ),
    }
}

/// Everything a writing command does before it plans, with the lock held: finish an
/// interrupted run and delete the temporary files (`temps`, found by a walk of the tree)
/// of killed ones. Says what it did.
pub fn prepare(root: &Path, temps: &[PathBuf]) -> Result<(Option<String>, usize), Error> {
    let recovered = recover(root)?.map(|r| describe(&r));
    Ok((recovered, clean_stale(temps)))
}

/// Delete temporary files that no journal needs (left by a run killed before writing).
pub fn clean_stale(temps: &[PathBuf]) -> usize {
    temps.iter().filter(|t| fs::remove_file(t).is_ok()).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognised() {
        assert!(is_temp_name(".qwen3_moe.py.instrument-123.tmp"));
        assert!(is_temp_name(".qwen3_moe.py.instrument-123.orig"));
        assert!(!is_temp_name("qwen3_moe.py"));
        assert!(!is_temp_name(".instrument-journal.json"));
    }

    #[test]
    fn commit_replaces_files_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.py"), "x = 1\n").unwrap();
        commit(
            dir.path(),
            "test",
            &[Change {
                file: "a.py".into(),
                before: b"x = 1\n".to_vec(),
                after: b"x = 2\n".to_vec(),
            }],
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("a.py")).unwrap(),
            "x = 2\n"
        );
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert_eq!(names, vec!["a.py"]);
        // A file that changed since it was read is not written over.
        let err = commit(
            dir.path(),
            "test",
            &[Change {
                file: "a.py".into(),
                before: b"x = 1\n".to_vec(),
                after: b"x = 3\n".to_vec(),
            }],
        )
        .unwrap_err();
        assert!(matches!(err, Error::Changed(Changed::File { .. })), "{err}");
        let err = err.to_string();
        assert!(
            err.contains("changed while instrument was working"),
            "{err}"
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("a.py")).unwrap(),
            "x = 2\n"
        );
    }
}
