//! The committed fixtures are exactly what tools/gen_snapshots.py writes (so the
//! facts in each planted.json are the generator's, not edited by hand).

use crate::snapshot_common;

use std::path::Path;
use std::process::Command;

fn files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(root).sort_by_file_name() {
        let e = e.unwrap();
        // real/ holds cuts of real snapshots (tools/snapshot_real_fixture.py), not
        // the generator's.
        if e.file_type().is_file() && !e.path().strip_prefix(root).unwrap().starts_with("real") {
            out.push(
                e.path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .to_string(),
            );
        }
    }
    out
}

#[test]
fn fixtures_match_the_generator() {
    let python = Command::new("python3").arg("--version").output();
    if python.map(|o| !o.status.success()).unwrap_or(true) {
        eprintln!("NOTICE: python3 not found; not regenerating the snapshot fixtures");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/gen_snapshots.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed = snapshot_common::fixtures();
    assert_eq!(files(dir.path()), files(&committed));
    for f in files(&committed) {
        let a = std::fs::read(committed.join(&f)).unwrap();
        let b = std::fs::read(dir.path().join(&f)).unwrap();
        assert!(
            a == b,
            "{f} differs from what tools/gen_snapshots.py writes: regenerate the fixtures"
        );
    }
}
