//! Writing planned files all or nothing: every new text goes to a temporary file beside
//! its target first (same folder, same permissions); only when all are written are they
//! renamed over the targets. A failure before the renames leaves the tree untouched.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Write `(relative path, new text)` pairs under `root`.
pub fn write_all(root: &Path, files: &[(String, String)]) -> Result<(), String> {
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let cleanup = |staged: &[(PathBuf, PathBuf)]| {
        for (tmp, _) in staged {
            let _ = fs::remove_file(tmp);
        }
    };
    for (rel, text) in files {
        let target = root.join(rel);
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let tmp = target.with_file_name(format!(".{name}.instrument-{}.tmp", std::process::id()));
        let result = (|| -> std::io::Result<()> {
            let perms = fs::metadata(&target)?.permissions();
            let mut f = fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            fs::set_permissions(&tmp, perms)?;
            Ok(())
        })();
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            cleanup(&staged);
            return Err(format!("{rel}: cannot write ({e}); nothing was changed"));
        }
        staged.push((tmp, target));
    }
    for (i, (tmp, target)) in staged.iter().enumerate() {
        if let Err(e) = fs::rename(tmp, target) {
            cleanup(&staged[i..]);
            return Err(format!(
                "{}: cannot replace ({e}); {i} of {} files were already written, run `instrument remove` to restore them",
                target.display(),
                staged.len()
            ));
        }
    }
    Ok(())
}
