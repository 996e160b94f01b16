//! What `instrument log` reads: the files named, and the logs inside the folders named
//! (a `torchrun --log-dir` folder holds `<run>/attempt_<N>/<local rank>/stdout.log` and
//! `stderr.log`; a cluster's folder holds one console log per node).

use std::path::{Path, PathBuf};

use serde::Serialize;

/// One file to read.
#[derive(Debug, Clone, Serialize)]
pub struct InputFile {
    /// As the user will recognise it (the path given, or inside the folder given).
    pub name: String,
    #[serde(skip)]
    pub path: PathBuf,
    /// From a torchrun log folder: the restart attempt and the local rank of the worker
    /// whose output this is, and which stream (`stdout` or `stderr`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
}

/// Why the logs named cannot be read. A path that is not there, or a folder without logs, is
/// the user's to fix; a read the system refused keeps the class of its I/O error.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: {}", io_reason(source))]
    Path {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{folder}: {source}")]
    List {
        folder: String,
        #[source]
        source: walkdir::Error,
    },
    #[error(
        "{folder}: no log files in this folder (looked for *.log, *.txt, *.out, *.err, stdout*, stderr*, also gzipped)"
    )]
    NoLogs { folder: String },
    #[error("{name}: cannot open: {source}")]
    Open {
        name: String,
        #[source]
        source: std::io::Error,
    },
}

impl crate::exit::Classify for InputError {
    fn class(&self) -> crate::exit::Class {
        use crate::exit::{Class, io_class};
        match self {
            InputError::Path { source, .. } | InputError::Open { source, .. } => io_class(source),
            // A loop of links is the folder's; a listing the system refused, its I/O class.
            InputError::List { source, .. } => source.io_error().map_or(Class::User, io_class),
            InputError::NoLogs { .. } => Class::User,
        }
    }
}

/// The files to read for `paths` (a path `-` is standard input), and what was skipped in
/// folders. A path that does not exist is an error naming it.
pub fn expand(paths: &[PathBuf]) -> Result<(Vec<InputFile>, Vec<String>), InputError> {
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            files.push(InputFile {
                name: "<stdin>".into(),
                path: p.clone(),
                attempt: None,
                local_rank: None,
                stream: None,
            });
            continue;
        }
        let meta = std::fs::metadata(p).map_err(|source| InputError::Path {
            path: p.display().to_string(),
            source,
        })?;
        if meta.is_dir() {
            let before = files.len();
            let mut found: Vec<PathBuf> = Vec::new();
            for entry in walkdir::WalkDir::new(p)
                .follow_links(true)
                .sort_by_file_name()
                .into_iter()
            {
                let entry = entry.map_err(|source| InputError::List {
                    folder: p.display().to_string(),
                    source,
                })?;
                if !entry.file_type().is_file() {
                    continue;
                }
                let name = entry.file_name().to_string_lossy();
                if name.starts_with('.') {
                    continue;
                }
                if looks_like_a_log(&name) {
                    found.push(entry.path().to_path_buf());
                } else {
                    skipped.push(entry.path().display().to_string());
                }
            }
            sort_attempts(&mut found);
            for f in found {
                files.push(describe(&f));
            }
            if files.len() == before {
                return Err(InputError::NoLogs {
                    folder: p.display().to_string(),
                });
            }
        } else {
            files.push(describe(p));
        }
    }
    Ok((files, skipped))
}

/// Why a path could not be read, in the words of the message.
fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

fn looks_like_a_log(name: &str) -> bool {
    let base = name.strip_suffix(".gz").unwrap_or(name);
    [".log", ".txt", ".out", ".err"]
        .iter()
        .any(|ext| base.ends_with(ext))
        || base.starts_with("stdout")
        || base.starts_with("stderr")
}

/// Read attempts in order (`attempt_2` before `attempt_10`), so that the last run a rank
/// printed is read last.
fn sort_attempts(files: &mut [PathBuf]) {
    files.sort_by_key(|f| {
        let attempt = f.components().find_map(|c| {
            c.as_os_str()
                .to_str()
                .and_then(|s| s.strip_prefix("attempt_"))
                .and_then(|n| n.parse::<u32>().ok())
        });
        (attempt, f.clone())
    });
}

/// Name a file and, when it sits where torchrun puts a worker's output
/// (`attempt_<N>/<local rank>/stdout.log`), say whose output it is.
fn describe(path: &Path) -> InputFile {
    let name = path.display().to_string();
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let stream = ["stdout", "stderr"]
        .iter()
        .find(|s| file.starts_with(*s))
        .map(|s| s.to_string());
    let parent = path.parent();
    let local_rank = parent
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .and_then(|n| n.parse::<u32>().ok());
    let attempt = parent
        .and_then(|d| d.parent())
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("attempt_"))
        .and_then(|n| n.parse::<u32>().ok());
    let torchrun = stream.is_some() && local_rank.is_some() && attempt.is_some();
    InputFile {
        name,
        path: path.to_path_buf(),
        attempt: attempt.filter(|_| torchrun),
        local_rank: local_rank.filter(|_| torchrun),
        stream: stream.filter(|_| torchrun),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torchrun_log_dirs_are_walked_in_attempt_order() {
        let dir = tempfile::tempdir().unwrap();
        for a in ["attempt_10", "attempt_2"] {
            for r in ["0", "3"] {
                let d = dir.path().join("none_x1y2").join(a).join(r);
                std::fs::create_dir_all(&d).unwrap();
                std::fs::write(d.join("stdout.log"), "").unwrap();
                std::fs::write(d.join("stderr.log.gz"), "").unwrap();
                std::fs::write(d.join("error.json"), "{}").unwrap();
            }
        }
        let (files, skipped) = expand(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(files.len(), 8);
        assert_eq!(skipped.len(), 4, "error.json files");
        assert_eq!(files[0].attempt, Some(2));
        assert_eq!(files[7].attempt, Some(10));
        assert_eq!(files[0].local_rank, Some(0));
        assert_eq!(files[0].stream.as_deref(), Some("stderr"));
        let nope = dir.path().join("nope");
        let err = expand(std::slice::from_ref(&nope)).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}: no such file or directory", nope.display())
        );
        use crate::exit::{Class, Classify};
        assert!(
            matches!(&err, InputError::Path { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
        );
        assert_eq!(err.class(), Class::User);
    }
}
