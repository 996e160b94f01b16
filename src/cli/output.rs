//! Writing a report file (`--html`, `--out`): all of it or nothing. The text goes to a
//! temporary file beside the target and is renamed over it, so a full disk or a kill
//! mid-write leaves the old file (or none), never half a page.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::exit::{Error, io_error, user_error};

/// Write `contents` to `path` atomically; on failure the temporary file is removed and
/// the error names the file and `what` it was to hold.
pub fn write_atomically(path: &Path, what: &str, contents: &[u8]) -> Result<(), Error> {
    let tmp = temporary_beside(path);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    // A full disk is the system's failure (exit 3), a folder that is a file the user's (2):
    // the same classes in every command (`exit::io_class`).
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_error(&e, format!("{}: cannot write {what}: {e}", path.display()))
    })
}

/// Print a report (JSON or text) and write its page when asked: the tail every reader's
/// command shares (`log`, `snapshot`; `nsys report` streams its JSON). The page is written
/// first, so a failed write prints no report.
pub fn emit<R: serde::Serialize>(
    report: &R,
    json: bool,
    text: impl FnOnce(&R) -> String,
    html: Option<&Path>,
    page: impl FnOnce(&R) -> String,
) -> Result<(), Error> {
    if let Some(path) = html {
        write_atomically(path, "the HTML page", page(report).as_bytes())?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", text(report));
        if let Some(path) = html {
            println!("\nHTML report written to {}", path.display());
        }
    }
    Ok(())
}

/// Refuse, before any work is done, an output path whose folder does not exist (a long
/// analysis should not end in "cannot write").
pub fn check_folder(path: &Path, what: &str) -> Result<(), Error> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if folder.is_dir() {
        Ok(())
    } else {
        Err(user_error(format!(
            "{}: cannot write {what}: the folder {} does not exist",
            path.display(),
            folder.display()
        )))
    }
}

/// `.NAME.PID.part` in the target's folder (same file system, so the rename is atomic).
fn temporary_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    path.with_file_name(format!(".{name}.{}.part", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_the_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("page.html");
        std::fs::write(&p, "old").unwrap();
        write_atomically(&p, "the page", b"new contents").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new contents");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("page.html")]);
    }

    #[test]
    fn a_failed_write_names_the_file_and_keeps_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a folder: the rename fails after the temporary was written.
        let p = dir.path().join("taken");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("inside"), "kept").unwrap();
        let err = write_atomically(&p, "the page", b"x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("taken: cannot write the page"), "{err}");
        assert_eq!(std::fs::read(p.join("inside")).unwrap(), b"kept");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "the temporary is gone");
        // A folder that does not exist: one line, nothing written.
        let missing = dir.path().join("no/such/page.html");
        let early = check_folder(&missing, "the page").unwrap_err().to_string();
        assert!(
            early.contains("the folder") && early.contains("no/such"),
            "{early}"
        );
        check_folder(&dir.path().join("page.html"), "the page").unwrap();
        check_folder(Path::new("page.html"), "the page").unwrap();
        let err = write_atomically(&missing, "the page", b"x")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no/such/page.html: cannot write the page"),
            "{err}"
        );
    }
}
