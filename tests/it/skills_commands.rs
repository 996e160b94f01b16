//! Every command line of every skill (`skills/*/SKILL.md`: each line of a ```bash block that
//! starts with `instrument`) runs here, as the skill gives it, through bash, on the bundled
//! fixture: a copy of the miniature pithtrain as the current folder, holding what a real run
//! leaves where the skills look for it (the console log of an instrumented run of ranks 3 and
//! 14, their step snapshots and an out-of-memory snapshot, two node exports of nsys). A
//! renamed flag or a changed output breaks this test, not an agent.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use serde_json::Value;

/// The `instrument` command lines of a skill, in order.
fn command_lines(skill_md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_bash = false;
    for line in skill_md.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_bash = !in_bash && t == "```bash";
            continue;
        }
        if in_bash && (t == "instrument" || t.starts_with("instrument ")) {
            out.push(t.to_string());
        }
    }
    out
}

fn python(checkout: &Path, args: &[&str]) -> std::process::Output {
    Command::new("python3")
        .arg(repo_root().join("tests/exec/run_fixture.py"))
        .arg(checkout)
        .args(args)
        .output()
        .expect("python3 runs the fixture")
}

/// The checkout copy every skill starts from, with a run's outputs where the skills name them.
fn prepared() -> tempfile::TempDir {
    let work = scratch_copy(&fixture());
    let w = work.path();
    for d in [
        "logging",
        "workspace/memory-snapshots",
        "workspace/capture-nsys-profile",
    ] {
        std::fs::create_dir_all(w.join(d)).unwrap();
    }
    // An instrumented run of ranks 3 and 14 (pp=2); its snapshots land in the work folder.
    let run = scratch_copy(&fixture());
    let snaps = w.join("workspace/memory-snapshots").display().to_string();
    add_ok(run.path(), &["--ranks", "3,14", "--snapshot-dir", &snaps]);
    let o = python(run.path(), &["--launch", "3,14", "--pp", "2"]);
    assert!(o.status.success(), "the fixture run: {}", stderr(&o));
    std::fs::write(w.join("logging/pretrain.log"), &o.stdout).unwrap();
    for name in ["before.log", "after.log"] {
        std::fs::write(w.join("logging").join(name), &o.stdout).unwrap();
    }
    // Rank 3 running out of memory in its first forward: the OOM snapshot.
    let o = python(
        run.path(),
        &["--launch", "3", "--pp", "2", "--oom-in", "forward"],
    );
    std::fs::write(w.join("logging/oom.log"), &o.stdout).unwrap();
    assert!(
        w.join("workspace/memory-snapshots/memory_snapshot_rank3.pickle")
            .is_file(),
        "no OOM snapshot: {}",
        stderr(&o)
    );
    // Two nodes' nsys exports of one pithtrain run, and the same run as the one before.
    let nsys = w.join("workspace/capture-nsys-profile");
    for node in ["0", "1"] {
        let out = nsys.join(format!("pithtrain_node{node}.sqlite"));
        let o = Command::new("python3")
            .arg(repo_root().join("tools/gen_nsys_sqlite.py"))
            .arg("--out")
            .arg(&out)
            .args([
                "--scenario",
                "dualpipe",
                "--ranks",
                "4",
                "--node",
                node,
                "--no-expected",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "generator: {}", stderr(&o));
    }
    let before = w.join("workspace/capture-nsys-profile-before");
    copy_tree(&nsys, &before);
    work
}

/// A folder holding `instrument` (the binary under test) and nothing else, for PATH.
fn bin_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_instrument"),
        d.path().join("instrument"),
    )
    .unwrap();
    d
}

fn skills() -> Vec<(String, String)> {
    let dir = repo_root().join("skills");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("SKILL.md").is_file())
        .map(|p: PathBuf| {
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                std::fs::read_to_string(p.join("SKILL.md")).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_command_line_of_every_skill_runs_on_the_fixture() {
    if tool("python3", "INSTRUMENT_REQUIRE_PYTHON").is_none() {
        return;
    }
    let skills = skills();
    assert!(
        skills.len() >= 4,
        "{:?}",
        skills.iter().map(|s| &s.0).collect::<Vec<_>>()
    );
    let base = prepared();
    let bin = bin_dir();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for (name, md) in &skills {
        let lines = command_lines(md);
        assert!(lines.len() >= 2, "{name}: {lines:?}");
        // Each skill on its own copy, its commands in order (add, then log, then remove).
        let work = tempfile::tempdir().unwrap();
        copy_tree(base.path(), work.path());
        let start = snapshot_tree(work.path());
        for line in &lines {
            let out = Command::new("bash")
                .arg("-c")
                .arg(line)
                .current_dir(work.path())
                .env("PATH", &path)
                .env("NO_COLOR", "1")
                .output()
                .unwrap();
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(0), "{name}: `{line}`: {err}");
            assert!(!err.contains("error:"), "{name}: `{line}`: {err}");
            if line.split_whitespace().any(|w| w == "--json") {
                let v: Value = serde_json::from_slice(&out.stdout)
                    .unwrap_or_else(|e| panic!("{name}: `{line}`: not JSON ({e})"));
                assert!(
                    v.get("schema").is_some() || v.get("schema_version").is_some(),
                    "{name}: `{line}`: no schema"
                );
            } else if line != "instrument check" {
                assert!(
                    !(out.stdout.is_empty() && out.stderr.is_empty()),
                    "{name}: `{line}` printed nothing"
                );
            }
            ran += 1;
        }
        // A skill leaves the checkout's sources as it found them (memory-prints ends with
        // `remove`); what it wrote are reports and capture files only.
        let end = snapshot_tree(work.path());
        for (file, bytes) in &start {
            if file.ends_with(".py") {
                assert_eq!(end.get(file), Some(bytes), "{name} left {file} changed");
            }
        }
    }
    eprintln!("{ran} command lines of {} skills ran", skills.len());
}

/// The memory-prints skill's own loop, checked by what the commands report: add writes all
/// seven groups for the ranks the skill names, the log has both ranks, check is clean at the end.
#[test]
fn the_memory_prints_skill_adds_reads_and_removes() {
    if tool("python3", "INSTRUMENT_REQUIRE_PYTHON").is_none() {
        return;
    }
    let md = std::fs::read_to_string(repo_root().join("skills/instrument-memory-prints/SKILL.md"))
        .unwrap();
    let lines = command_lines(&md);
    let add = lines
        .iter()
        .find(|l| l.starts_with("instrument add ") && !l.contains("--dry-run"))
        .expect("an add line");
    assert!(lines.iter().any(|l| l == "instrument remove"), "{lines:?}");
    assert_eq!(lines.last().map(String::as_str), Some("instrument check"));
    let dir = scratch_copy(&fixture());
    let words: Vec<&str> = add.split_whitespace().skip(1).collect();
    let mut args = words.clone();
    args.push("--json");
    let out = instrument(&args, dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "instrument.add/1", "{v}");
    let status = instrument(&["status", "--json"], dir.path());
    let s: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(
        s.to_string().contains("3, 14") || s.to_string().contains("[3,14]"),
        "{s}"
    );
    let out = instrument(&["check"], dir.path());
    assert_eq!(out.status.code(), Some(1), "check while the prints are in");
    let out = instrument(&["remove"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(snapshot_tree(dir.path()), snapshot_tree(&fixture()));
}

#[test]
fn command_lines_are_read_from_bash_blocks_only() {
    let md = "text instrument x\n```bash\ninstrument a --b\nsrun x\n  instrument c\n```\n```\ninstrument d\n```\n";
    assert_eq!(command_lines(md), ["instrument a --b", "instrument c"]);
}
