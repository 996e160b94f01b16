//! Writing an `--html` page, the same in every reader (`log`, `log --diff`, `snapshot`, `nsys
//! report`, `report`): a folder where the page should be is the user's to fix (exit 2); the
//! system refusing the write (here a file-size limit, as a full disk would) is exit 3. Either
//! way one line names the page, nothing is printed to stdout and no page is left behind.

use crate::log_common;
use crate::nsys_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Every reader's command on real inputs, without `--html`.
fn readers(
    s: &log_common::Scenario,
    run: &Path,
    export: &Path,
) -> Vec<(&'static str, Vec<String>)> {
    let fixture = log_common::repo_root().join("fixtures/snapshots/oom/snapshot.pickle");
    let path = |p: &Path| p.display().to_string();
    vec![
        ("log", vec!["log".into(), s.path("srun.log")]),
        (
            "log --diff",
            vec![
                "log".into(),
                s.path("srun.log"),
                "--diff".into(),
                s.path("srun.log"),
            ],
        ),
        ("snapshot", vec!["snapshot".into(), path(&fixture)]),
        (
            "nsys report",
            vec!["nsys".into(), "report".into(), path(export)],
        ),
        ("report", vec!["report".into(), path(run)]),
    ]
}

/// `args --html page`, under a file-size limit of one block when `limited` (the write of the
/// page fails with EFBIG; SIGXFSZ is ignored so that the write returns the error).
fn write_page(args: &[String], page: &Path, limited: bool) -> Output {
    let bin = env!("CARGO_BIN_EXE_instrument");
    let mut cmd = if limited {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"")
            .arg(bin);
        c
    } else {
        Command::new(bin)
    };
    cmd.args(args).arg("--html").arg(page).output().unwrap()
}

fn leftovers(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

#[test]
fn a_page_that_cannot_be_written_exits_alike_in_every_reader() {
    let Some(py) = log_common::python() else {
        return;
    };
    let s = log_common::scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]);
    let run = tempfile::tempdir().unwrap();
    std::fs::copy(s.path("srun.log"), run.path().join("srun.log")).unwrap();
    for e in std::fs::read_dir(s.snaps.path()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, run.path().join(p.file_name().unwrap())).unwrap();
    }
    let exports = tempfile::tempdir().unwrap();
    let export = exports.path().join("x.sqlite");
    nsys_common::write_export(&export, &["--kernels", "1200", "--ranks", "2"]);
    for (name, args) in readers(&s, run.path(), &export) {
        // Each reader writes its page when nothing is in the way.
        let out = tempfile::tempdir().unwrap();
        let page = out.path().join("page.html");
        let ok = write_page(&args, &page, false);
        assert!(
            ok.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&ok.stderr)
        );
        assert!(
            std::fs::read_to_string(&page)
                .unwrap()
                .ends_with("</html>\n"),
            "{name}"
        );

        // A folder where the page should be: the user's (2); the folder is left as it was.
        let out = tempfile::tempdir().unwrap();
        let taken = out.path().join("page.html");
        std::fs::create_dir(&taken).unwrap();
        refused(name, write_page(&args, &taken, false), &taken, 2);
        assert_eq!(leftovers(out.path()), vec![taken.clone()], "{name}");
        // The system refusing the write: 3; no half page left.
        let out = tempfile::tempdir().unwrap();
        let page = out.path().join("page.html");
        refused(name, write_page(&args, &page, true), &page, 3);
        assert!(leftovers(out.path()).is_empty(), "{name}");
    }
}

/// `o` exited with `code`, printed nothing, and said in one line that `page` was not written.
fn refused(name: &str, o: Output, page: &Path, code: i32) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{name}: {err}");
    assert!(o.stdout.is_empty(), "{name}: nothing printed");
    assert_eq!(err.lines().count(), 1, "{name}: {err}");
    let lead = format!("error: {}: cannot write the HTML page: ", page.display());
    assert!(err.starts_with(&lead), "{name}: {err}");
}
