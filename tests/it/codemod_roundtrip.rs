//! `add` / `remove` on a scratch copy of the miniature pithtrain: exact round trips,
//! idempotence, updates in place, dry runs that write nothing and diffs git accepts.

use crate::common;

use common::*;
use instrument::codemod::diff::unified;

#[test]
fn add_then_remove_restores_every_byte() {
    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    add_ok(dir.path(), &["--ranks", "3,14"]);
    let added = snapshot_tree(dir.path());
    let changed: Vec<&String> = added.keys().filter(|k| added[*k] != before[*k]).collect();
    assert_eq!(
        changed,
        vec![
            "pithtrain/dualpipe/dualpipev.py",
            "pithtrain/dualpipe/execution.py",
            "pithtrain/models/qwen3_moe.py",
            "pithtrain/modules/distributed.py",
            "pithtrain/modules/training.py",
            "pithtrain/tasks/pretrain_lm.py",
        ]
    );
    let out = instrument(&["remove"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(snapshot_tree(dir.path()), before);
}

#[test]
fn add_twice_changes_nothing_and_add_remove_add_equals_one_add() {
    let dir = scratch_copy(&fixture());
    add_ok(dir.path(), &["--ranks", "3,14"]);
    let once = snapshot_tree(dir.path());
    let again = add_ok(dir.path(), &["--ranks", "3,14"]);
    assert_eq!(
        stderr(&again),
        "detail layers chosen at run time: each profiled rank takes the first 2 MoE layers it holds and prints which; a rank holding every layer takes (0, 1): every decoder layer builds the MoE block unconditionally (pithtrain/models/qwen3_moe.py:63), so the first 2 layers (the model has 8, per examples/pretrain_lm/qwen3-tiny/config.json)\n\
         instrument add qwen3-moe: 8 of 8 groups; changed 0 file(s) (+0 -0 lines), already up to date, ranks {3, 14}\n"
    );
    assert_eq!(snapshot_tree(dir.path()), once);
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    add_ok(dir.path(), &["--ranks", "3,14"]);
    assert_eq!(snapshot_tree(dir.path()), once);
}

#[test]
fn add_with_other_ranks_updates_in_place() {
    let fresh = scratch_copy(&fixture());
    add_ok(fresh.path(), &["--ranks", "0,7", "--detail-layers", "1"]);
    let dir = scratch_copy(&fixture());
    add_ok(dir.path(), &["--ranks", "3,14"]);
    add_ok(dir.path(), &["--ranks", "7,0", "--detail-layers", "1"]);
    assert_eq!(snapshot_tree(dir.path()), snapshot_tree(fresh.path()));
    // The values the layer prints read, as the flags gave them (the ranks sorted).
    let text = std::fs::read_to_string(dir.path().join("pithtrain/dualpipe/execution.py")).unwrap();
    let values: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("_layer_mem_ranks =") || l.starts_with("_layer_mem_detail_given =")
        })
        .collect();
    assert_eq!(
        values,
        [
            "_layer_mem_ranks = {0, 7}",
            "_layer_mem_detail_given = (1,)"
        ]
    );
}

#[test]
fn remove_keeps_edits_made_elsewhere_in_the_file() {
    let dir = scratch_copy(&fixture());
    let path = dir.path().join("pithtrain/modules/training.py");
    let original = std::fs::read_to_string(&path).unwrap();
    add_ok(dir.path(), &[]);
    let instrumented = std::fs::read_to_string(&path).unwrap();
    let edited = instrumented.replace("lr=0.01", "lr=0.02");
    assert_ne!(edited, instrumented);
    std::fs::write(&path, &edited).unwrap();
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        original.replace("lr=0.01", "lr=0.02")
    );
}

#[test]
fn dry_run_writes_nothing_and_its_diff_applies_with_git() {
    let Some(git) = tool("git", "INSTRUMENT_REQUIRE_GIT") else {
        return;
    };
    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    let out = instrument(
        &["add", "qwen3-moe", "--ranks", "3,14", "--dry-run"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        snapshot_tree(dir.path()),
        before,
        "a dry run must not write"
    );
    let diff = stdout(&out);
    assert!(
        diff.is_ascii() && !diff.bytes().any(|b| b == 0x1b),
        "no colour when stdout is not a terminal"
    );
    let patch = dir.path().join("add.patch");
    std::fs::write(&patch, &diff).unwrap();
    let applied = std::process::Command::new(git)
        .args(["apply", "--verbose", "add.patch"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        applied.status.success(),
        "git apply: {}",
        String::from_utf8_lossy(&applied.stderr)
    );
    std::fs::remove_file(&patch).unwrap();
    let via_git = snapshot_tree(dir.path());
    let real = scratch_copy(&fixture());
    add_ok(real.path(), &["--ranks", "3,14"]);
    assert_eq!(
        via_git,
        snapshot_tree(real.path()),
        "the dry-run diff is exactly what add writes"
    );
}

#[test]
fn remove_dry_run_shows_the_reverse_and_writes_nothing() {
    let dir = scratch_copy(&fixture());
    add_ok(dir.path(), &[]);
    let added = snapshot_tree(dir.path());
    let out = instrument(&["remove", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(snapshot_tree(dir.path()), added);
    // The diff from each instrumented file back to its original, file after file.
    let clean = snapshot_tree(&fixture());
    let text = |tree: &std::collections::BTreeMap<String, Vec<u8>>, f: &str| {
        String::from_utf8(tree[f].clone()).unwrap()
    };
    let expected: String = added
        .keys()
        .filter(|f| added[*f] != clean[*f])
        .map(|f| unified(f, &text(&added, f), &text(&clean, f)))
        .collect();
    assert_eq!(
        (stdout(&out), stderr(&out)),
        (
            expected,
            "instrument remove: would restore 6 file(s)\n".to_string()
        )
    );
}

#[test]
fn crlf_line_endings_and_file_mode_survive() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_copy(&fixture());
    let path = dir.path().join("pithtrain/modules/training.py");
    let crlf = std::fs::read_to_string(&path)
        .unwrap()
        .replace('\n', "\r\n");
    std::fs::write(&path, &crlf).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    add_ok(dir.path(), &[]);
    let added = std::fs::read(&path).unwrap();
    let lf_only = added
        .windows(2)
        .filter(|w| w[1] == b'\n' && w[0] != b'\r')
        .count();
    assert_eq!(
        lf_only, 0,
        "every inserted line ends with CRLF like the file"
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o640
    );
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), crlf);
}

#[test]
fn root_is_found_from_a_subfolder() {
    let dir = scratch_copy(&fixture());
    let sub = dir.path().join("pithtrain/models");
    let out = instrument(&["add", "qwen3-moe"], &sub);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The whole checkout, as an add at its root writes it.
    let at_root = scratch_copy(&fixture());
    add_ok(at_root.path(), &[]);
    assert_eq!(snapshot_tree(dir.path()), snapshot_tree(at_root.path()));
}
