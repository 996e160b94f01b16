//! The promises a real checkout tests: symlinks, odd argument values, bytes that are not
//! UTF-8, mixed line endings, a concurrent editor, two runs at once, runs killed half-way,
//! commands run outside a checkout, and `check` as pre-commit calls it. The kill and
//! concurrency cases stop the binary at a named point (see `codemod::fault`), so they
//! repeat exactly.

use crate::common;

use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;

fn run_env(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_instrument"));
    cmd.args(args).current_dir(cwd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run instrument")
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

/// Temporary files and journals anywhere below `root`.
fn leftovers(root: &Path) -> Vec<String> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.contains(".instrument-"))
        .collect()
}

#[test]
fn a_symlinked_source_folder_is_seen_by_every_command() {
    for linked in ["pithtrain", "pithtrain/models"] {
        let work = tempfile::tempdir().unwrap();
        let checkout = work.path().join("checkout");
        copy_tree(&fixture(), &checkout);
        let elsewhere = work.path().join("elsewhere");
        std::fs::rename(checkout.join(linked), &elsewhere).unwrap();
        symlink(&elsewhere, checkout.join(linked)).unwrap();
        let before = snapshot_tree(&elsewhere);
        add_ok(&checkout, &["--ranks", "3,14"]);
        assert!(
            std::fs::symlink_metadata(checkout.join(linked))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let status = instrument(&["status", "--json"], &checkout);
        let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
        assert_eq!(doc["files"].as_array().unwrap().len(), 6, "{linked}: {doc}");
        assert_eq!(instrument(&["check"], &checkout).status.code(), Some(1));
        let out = instrument(&["remove"], &checkout);
        assert_eq!(stderr(&out), "instrument remove: restored 6 file(s)\n");
        assert_eq!(snapshot_tree(&elsewhere), before, "{linked}");
        assert_eq!(instrument(&["check"], &checkout).status.code(), Some(0));
    }
}

#[test]
fn a_symlinked_file_stays_a_symlink_and_keeps_mode_and_owner() {
    use std::os::unix::fs::PermissionsExt;
    let work = tempfile::tempdir().unwrap();
    let checkout = work.path().join("checkout");
    copy_tree(&fixture(), &checkout);
    let shared = work.path().join("training.py");
    let link = checkout.join("pithtrain/modules/training.py");
    std::fs::rename(&link, &shared).unwrap();
    symlink(&shared, &link).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o640)).unwrap();
    let as_root = unsafe { libc::geteuid() } == 0;
    if as_root {
        std::os::unix::fs::chown(&shared, Some(4321), Some(4321)).unwrap();
    }
    let original = read(&shared);
    add_ok(&checkout, &[]);
    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(
        meta.file_type().is_symlink(),
        "the link was replaced by a file"
    );
    // Its target was written, as add writes the file in a checkout without links.
    let plain = scratch_copy(&fixture());
    add_ok(plain.path(), &[]);
    assert_eq!(
        read(&shared),
        read(&plain.path().join("pithtrain/modules/training.py"))
    );
    let target = std::fs::metadata(&shared).unwrap();
    assert_eq!(target.permissions().mode() & 0o777, 0o640);
    if as_root {
        assert_eq!(
            (target.uid(), target.gid()),
            (4321, 4321),
            "a root run keeps the owner"
        );
    }
    assert_eq!(instrument(&["remove"], &checkout).status.code(), Some(0));
    assert_eq!(read(&shared), original);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn argument_values_with_control_characters_are_refused() {
    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    let dirs = ["/tmp/x\r", "/tmp/a\nb", "", "/tmp/\u{7f}"];
    let runs = dirs
        .iter()
        .map(|bad| vec!["add", "qwen3-moe", "--snapshot-dir", bad])
        .chain([
            vec!["add", "qwen3-moe", "--step", "-1"],
            // A flag of the other set.
            vec!["add", "--rules", "nvtx", "*.forward", "--ranks", "3"],
        ]);
    // Each names the flag and the value; a CR is said to be a CRLF line ending.
    for args in runs {
        let out = t.run(&args, dir.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(snapshot_tree(dir.path()), before);
    insta::assert_snapshot!("control_characters", t.text());
}

/// ruff check + format --check with pithtrain's settings, and python -m py_compile.
fn assert_pithtrain_checks_pass(root: &Path) {
    if let Some(ruff) = tool("ruff", "INSTRUMENT_REQUIRE_RUFF") {
        assert_ruff_clean(&ruff, root, None);
    }
    if let Some(python) = tool("python3", "INSTRUMENT_REQUIRE_PYTHON") {
        let files: Vec<PathBuf> = walkdir::WalkDir::new(root.join("pithtrain"))
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "py"))
            .map(|e| e.path().to_path_buf())
            .collect();
        let out = Command::new(python)
            .args(["-m", "py_compile"])
            .args(&files)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONPYCACHEPREFIX", root.join(".pycache-test"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::remove_dir_all(root.join(".pycache-test"));
    }
}

#[test]
fn quotes_in_values_are_python_literals_and_marker_parameters_read_back() {
    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    let forged = "/tmp/x\"; STEP=5";
    add_ok(dir.path(), &["--snapshot-dir", forged]);
    let text = std::fs::read_to_string(dir.path().join("pithtrain/tasks/pretrain_lm.py")).unwrap();
    let assigned: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("_mem_snapshot_dir ="))
        .collect();
    assert_eq!(assigned, ["_mem_snapshot_dir = '/tmp/x\"; STEP=5'"]);
    let status = instrument(&["status", "--json"], dir.path());
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let params: Vec<&serde_json::Value> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["regions"].as_array().unwrap())
        .map(|r| &r["params"])
        .filter(|p| p.get("SNAPSHOT_DIR").is_some())
        .collect();
    assert!(!params.is_empty());
    for p in params {
        assert_eq!(p["SNAPSHOT_DIR"], "'/tmp/x\"; STEP=5'");
        assert_eq!(p["STEP"], "None", "a value cannot forge another parameter");
    }
    assert_pithtrain_checks_pass(dir.path());
    let out = instrument(&["remove"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(snapshot_tree(dir.path()), before);
    // Backslashes and both quotes, and a path long enough to need ruff's parentheses.
    let odd = format!("/tmp/it's \"{}\"\\x", "deep/".repeat(16));
    add_ok(dir.path(), &["--snapshot-dir", &odd]);
    assert_pithtrain_checks_pass(dir.path());
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    assert_eq!(snapshot_tree(dir.path()), before);
}

#[test]
fn long_rank_sets_are_laid_out_as_ruff_lays_them_out() {
    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    let ranks: Vec<String> = (0..=40).map(|r| r.to_string()).collect();
    let ranks = ranks.join(",");
    let layers: Vec<String> = (0..8).map(|r| r.to_string()).collect();
    add_ok(
        dir.path(),
        &[
            "--ranks",
            &ranks,
            "--detail-layers",
            &layers.join(","),
            "--step",
            "123456789012",
        ],
    );
    // One rank a line, with the magic trailing comma, as ruff writes a set too long for
    // one line.
    let text = std::fs::read_to_string(dir.path().join("pithtrain/dualpipe/dualpipev.py")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.starts_with("        _profiling = "))
        .unwrap();
    let last = first
        + lines[first..]
            .iter()
            .position(|l| *l == "        }")
            .unwrap();
    let expected: Vec<String> = std::iter::once(
        "        _profiling = self.memory_profiling and self.rank in {".to_string(),
    )
    .chain((0..=40).map(|r| format!("            {r},")))
    .chain(["        }".to_string()])
    .collect();
    assert_eq!(lines[first..=last], expected);
    assert_pithtrain_checks_pass(dir.path());
    // Formatting it again changes nothing, so pre-commit's ruff does not touch the regions.
    let again = instrument(
        &[
            "add",
            "qwen3-moe",
            "--ranks",
            &ranks,
            "--detail-layers",
            &layers.join(","),
            "--step",
            "123456789012",
        ],
        dir.path(),
    );
    assert_eq!(again.status.code(), Some(0));
    assert_eq!(
        stderr(&again),
        format!(
            "instrument add qwen3-moe: 8 of 8 groups; changed 0 file(s) (+0 -0 lines), already up to date, detail layers (0, 1, 2, 3, 4, 5, 6, 7), ranks {{{}}}, step 123456789012\n",
            (0..=40)
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    );
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    assert_eq!(snapshot_tree(dir.path()), before);
}

#[test]
fn remove_restores_bytes_that_are_not_utf8_and_add_names_them() {
    let dir = scratch_copy(&fixture());
    let path = dir.path().join("pithtrain/models/qwen3_moe.py");
    let original = read(&path);
    add_ok(dir.path(), &[]);
    // A Latin-1 byte lands in a comment outside the regions after add.
    let mut edited = read(&path);
    let at = edited.windows(7).position(|w| w == b"import ").unwrap();
    edited.splice(at..at, b"# caf\xe9\n".iter().copied());
    std::fs::write(&path, &edited).unwrap();
    let out = instrument(&["remove"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut expected = original.clone();
    let at = expected.windows(7).position(|w| w == b"import ").unwrap();
    expected.splice(at..at, b"# caf\xe9\n".iter().copied());
    assert_eq!(
        read(&path),
        expected,
        "restored byte for byte, the new byte kept"
    );
    // add refuses such a file, naming file, line, the byte and what to do (not Rust's
    // "stream did not contain valid UTF-8").
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    let out = t.run(&["add", "qwen3-moe"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("not_utf8", t.text());
}

#[test]
fn one_crlf_line_in_an_lf_file_comes_back_byte_for_byte() {
    let dir = scratch_copy(&fixture());
    let path = dir.path().join("pithtrain/models/qwen3_moe.py");
    let text = std::fs::read_to_string(&path).unwrap();
    // The statement rule 5D.return replaces, and one line elsewhere, end with CRLF.
    let anchor = "        return self.down_proj(silu_mul(g, u), **kwargs)\n";
    let mixed = text
        .replacen(anchor, &anchor.replace('\n', "\r\n"), 1)
        .replacen("import torch\n", "import torch\r\n", 1);
    assert_eq!(mixed.matches("\r\n").count(), 2);
    std::fs::write(&path, &mixed).unwrap();
    add_ok(dir.path(), &[]);
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    assert_eq!(read(&path), mixed.as_bytes());
}

/// Start `args` stopped at `point`; returns the child and the folder that controls it.
fn start_paused(
    args: &[&str],
    cwd: &Path,
    point: &str,
) -> (std::process::Child, tempfile::TempDir) {
    let ctl = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_instrument"))
        .args(args)
        .current_dir(cwd)
        .env(
            "INSTRUMENT_TEST_PAUSE",
            format!("{point}:{}", ctl.path().display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..3000 {
        if ctl.path().join("paused").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        ctl.path().join("paused").exists(),
        "the run never reached {point}"
    );
    (child, ctl)
}

#[test]
fn an_editor_save_during_add_is_never_overwritten() {
    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    let (child, ctl) = start_paused(&["add", "qwen3-moe"], dir.path(), "planned");
    let path = dir.path().join("pithtrain/modules/training.py");
    let saved = format!(
        "{}# saved by an editor\n",
        std::fs::read_to_string(&path).unwrap()
    );
    std::fs::write(&path, &saved).unwrap();
    std::fs::write(ctl.path().join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("paused after planning; pithtrain/modules/training.py saved by an editor");
    t.record(&["add", "qwen3-moe"], &out);
    insta::assert_snapshot!("editor_save_during_add", t.text());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), saved);
    let mut expected = before.clone();
    expected.insert("pithtrain/modules/training.py".into(), saved.into_bytes());
    assert_eq!(
        snapshot_tree(dir.path()),
        expected,
        "nothing else was written"
    );
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

#[test]
fn two_runs_at_once_take_turns() {
    let dir = scratch_copy(&fixture());
    let (child, ctl) = start_paused(&["add", "qwen3-moe"], dir.path(), "locked");
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("`instrument add qwen3-moe` holds the lock; each run waits 200 ms for it");
    for args in [&["remove"][..], &["add", "qwen3-moe"][..], &["status"][..]] {
        let out = run_env(args, dir.path(), &[("INSTRUMENT_LOCK_TIMEOUT_MS", "200")]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        t.record(args, &out);
    }
    insta::assert_snapshot!("two_runs_at_once", t.text());
    std::fs::write(ctl.path().join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The second run, after the first: it sees the whole first run's result.
    let out = instrument(&["remove"], dir.path());
    assert_eq!(stderr(&out), "instrument remove: restored 6 file(s)\n");
}

#[test]
fn a_checkout_that_cannot_be_locked_is_worked_on_with_a_warning() {
    // As on NFS without a lock daemon: flock fails with ENOLCK, not "would block".
    let dir = scratch_copy(&fixture());
    let enolck = [("INSTRUMENT_TEST_LOCK_ERRNO", "37")];
    // The kind of file system the temporary folder is on differs between machines.
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>").pattern(
        r"its file system \([a-z0-9_.]+\)",
        "its file system (<KIND>)",
    ));
    t.note("flock fails with ENOLCK (37), as on NFS without a lock daemon");
    for args in [&["add", "qwen3-moe"][..], &["status"][..], &["remove"][..]] {
        let out = run_env(args, dir.path(), &enolck);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        t.record(args, &out);
    }
    // A run the lock does not refuse is not warned.
    t.note("flock works");
    let out = t.run(&["status"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("no_lock", t.text());
}

#[test]
fn a_remove_killed_mid_write_is_reported_and_finished_by_running_it_again() {
    let dir = scratch_copy(&fixture());
    let clean = snapshot_tree(dir.path());
    add_ok(dir.path(), &[]);
    let out = run_env(
        &["remove"],
        dir.path(),
        &[("INSTRUMENT_TEST_KILL", "rename:3")],
    );
    assert_eq!(out.status.code(), None, "killed by a signal");
    let half = snapshot_tree(dir.path());
    assert_ne!(half, clean);
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("after add, `instrument remove` killed at its third rename");
    // status and check say the remove is half done, and what to run; remove finishes it.
    t.run(&["status"], dir.path());
    let check = t.run(&["check"], dir.path());
    assert_eq!(check.status.code(), Some(1));
    let out = t.run(&["remove"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("remove_killed_mid_write", t.text());
    assert_eq!(snapshot_tree(dir.path()), clean);
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn an_interrupted_run_whose_new_texts_are_gone_is_rolled_back() {
    let dir = scratch_copy(&fixture());
    let clean = snapshot_tree(dir.path());
    let out = run_env(
        &["add", "qwen3-moe"],
        dir.path(),
        &[("INSTRUMENT_TEST_KILL", "rename:2")],
    );
    assert_eq!(out.status.code(), None);
    for e in walkdir::WalkDir::new(dir.path())
        .into_iter()
        .filter_map(Result::ok)
    {
        if e.file_name().to_string_lossy().ends_with(".tmp") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("`instrument add qwen3-moe` killed at its second rename; its new texts deleted");
    t.run_diff(&["add", "qwen3-moe", "--dry-run"], dir.path());
    let out = t.run(&["remove"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("interrupted_add_rolled_back", t.text());
    assert_eq!(snapshot_tree(dir.path()), clean);
}

#[test]
fn temporary_files_of_a_killed_run_are_reported_and_cleaned() {
    let dir = scratch_copy(&fixture());
    let clean = snapshot_tree(dir.path());
    let out = run_env(
        &["add", "qwen3-moe"],
        dir.path(),
        &[("INSTRUMENT_TEST_KILL", "staged:1")],
    );
    assert_eq!(out.status.code(), None);
    assert!(!leftovers(dir.path()).is_empty());
    let py: std::collections::BTreeMap<String, Vec<u8>> = snapshot_tree(dir.path())
        .into_iter()
        .filter(|(k, _)| !k.contains(".instrument-"))
        .collect();
    assert_eq!(py, clean, "the tree itself is untouched");
    // A temporary file's name holds the process id of the run that wrote it.
    let mut t = Transcript::new(
        Redact::default()
            .folder(dir.path(), "<CHECKOUT>")
            .pattern(r"\.instrument-[0-9]+\.tmp", ".instrument-<PID>.tmp"),
    );
    t.note("`instrument add qwen3-moe` killed after staging its first file");
    let check = t.run(&["check"], dir.path());
    assert_eq!(check.status.code(), Some(1));
    insta::assert_snapshot!("temporary_files_of_a_killed_run", t.text());
    add_ok(dir.path(), &[]);
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

#[test]
fn outside_a_checkout_remove_and_check_need_to_be_told_where() {
    let home = tempfile::tempdir().unwrap();
    let below = home.path().join("projects/pith-train");
    copy_tree(&fixture(), &below);
    add_ok(&below, &[]);
    let instrumented = snapshot_tree(&below);
    let mut t = Transcript::new(Redact::default().folder(home.path(), "<HOME>"));
    t.note("in <HOME>, with a checkout instrumented in <HOME>/projects/pith-train");
    for args in [&["remove"][..], &["check"][..], &["status"][..]] {
        let out = t.run(args, home.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    insta::assert_snapshot!("outside_a_checkout", t.text());
    assert_eq!(
        snapshot_tree(&below),
        instrumented,
        "nothing below was touched"
    );
    // From a subfolder of the checkout they walk up, as add does: the same report as
    // from its root.
    let out = instrument(&["check"], &below.join("pithtrain/models"));
    assert_eq!(out.status.code(), Some(1));
    let at_root = instrument(&["check"], &below);
    assert_eq!(at_root.status.code(), Some(1));
    assert_eq!(stdout(&out), stdout(&at_root));
    assert_eq!(stderr(&out), stderr(&at_root));
}

#[test]
fn check_takes_the_files_pre_commit_passes() {
    let dir = scratch_copy(&fixture());
    add_ok(dir.path(), &[]);
    let out = instrument(
        &[
            "check",
            "pithtrain/models/qwen3_moe.py",
            "pithtrain/models/deepseek_v2.py",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.lines()
            .all(|l| l.starts_with("pithtrain/models/qwen3_moe.py:")),
        "{text}"
    );
    let out = instrument(
        &[
            "check",
            "pithtrain/models/deepseek_v2.py",
            "pithtrain/contexts",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = instrument(&["check", "--json", "pithtrain/dualpipe"], dir.path());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["files"].as_array().unwrap().len(), 2);
    // Both hooks pre-commit offers run `instrument check`, which it passes the files to.
    let hooks = std::fs::read_to_string(repo_root().join(".pre-commit-hooks.yaml")).unwrap();
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in hooks.lines() {
        if let Some(id) = line.strip_prefix("- id: ") {
            entries.push((id.to_string(), String::new()));
        } else if let Some(entry) = line.strip_prefix("  entry: ") {
            entries.last_mut().expect("an entry inside a hook").1 = entry.to_string();
        }
    }
    assert_eq!(
        entries,
        [
            ("instrument-check", "instrument check"),
            ("instrument-check-installed", "instrument check"),
        ]
        .map(|(i, e)| (i.to_string(), e.to_string()))
    );
}

#[test]
fn a_parameter_is_added_to_any_signature_layout() {
    let original = "    def forward(\n        self,\n        x: torch.Tensor,\n        grouped_mm_offs: torch.Tensor,\n        ks: list | None = None,\n        ks_tensor: torch.Tensor | None = None,\n    ) -> torch.Tensor:\n";
    let mut shown = String::new();
    for layout in [
        // One line.
        "    def forward(self, x: torch.Tensor, grouped_mm_offs: torch.Tensor, ks=None) -> torch.Tensor:\n",
        // Hugged on one indented line, as ruff lays out a signature that is too long.
        "    def forward(\n        self, x: torch.Tensor, grouped_mm_offs: torch.Tensor, ks: list | None = None, ks_tensor=None\n    ) -> torch.Tensor:\n",
        // **kwargs, a trailing comment, CRLF on the def line.
        "    def forward(self, x: torch.Tensor, grouped_mm_offs, **kw):  # noqa: E501\r\n",
        // One per line but without the magic trailing comma.
        "    def forward(\n        self,\n        x: torch.Tensor,\n        grouped_mm_offs: torch.Tensor\n    ):\n",
    ] {
        let dir = scratch_copy(&fixture());
        let path = dir.path().join("pithtrain/models/qwen3_moe.py");
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.replacen(original, layout, 1).replace(
            "kwargs = dict(grouped_mm_offs=grouped_mm_offs, ks=ks, ks_tensor=ks_tensor, group_indices=gi)",
            "kwargs = dict(grouped_mm_offs=grouped_mm_offs, group_indices=gi)",
        );
        assert_eq!(experts_signature(&text), layout, "the layout is in place");
        std::fs::write(&path, &text).unwrap();
        // Only the layouts ruff itself keeps are part of the ruff-clean promise.
        let ruff = tool("ruff", "INSTRUMENT_REQUIRE_RUFF");
        let ruff_keeps = ruff.as_ref().is_some_and(|ruff| {
            Command::new(ruff)
                .args([
                    "format",
                    "--check",
                    "--no-cache",
                    "pithtrain/models/qwen3_moe.py",
                ])
                .current_dir(dir.path())
                .output()
                .unwrap()
                .status
                .success()
        });
        add_ok(dir.path(), &[]);
        let added = std::fs::read_to_string(&path).unwrap();
        shown.push_str(&format!(
            "before:\n{}after:\n{}\n",
            layout.replace('\r', "<CR>"),
            experts_signature(&added).replace('\r', "<CR>")
        ));
        if ruff_keeps {
            assert_pithtrain_checks_pass(dir.path());
        }
        assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{layout:?}");
    }
    // Each layout with the parameter added where it goes in that layout.
    insta::assert_snapshot!("signature_layouts", shown);
}

/// The signature of the experts' `forward` in `text`, line ends kept: from the comment
/// lines just above `def forward(` (a region's opening marker and the kept original) to
/// the line that closes its parenthesis.
fn experts_signature(text: &str) -> String {
    let class = text
        .find("class Qwen3MoeExperts(")
        .expect("the experts' class");
    let def = class + text[class..].find("    def forward(").expect("its forward");
    let above = text[..def]
        .split_inclusive('\n')
        .rev()
        .take_while(|l| l.trim_start().starts_with('#'))
        .map(str::len)
        .sum::<usize>();
    let mut depth = 0i32;
    let mut end = def;
    for line in text[def..].split_inclusive('\n') {
        depth += line.matches('(').count() as i32 - line.matches(')').count() as i32;
        end += line.len();
        if depth == 0 {
            break;
        }
    }
    text[def - above..end].to_string()
}
