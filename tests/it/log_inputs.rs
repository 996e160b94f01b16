//! `instrument log` on inputs that are not what it hopes for: empty files, logs without
//! prints, binary garbage, corrupt gzip, prints cut in the middle, missing paths, a user's
//! own rule set, standard input. One clear line and exit 2, or a report; never a panic.

use crate::log_common;

use std::io::Write;
use std::process::{Command, Stdio};

use log_common::*;

const STEP: &str = "[rank=3 pp=0] Step4 i=0: 0.11 GiB | alloc=0.11 cached=1.89 non-pt=1.75\n";
const SETUP: &str =
    "[rank=3] init_process_group | cuda_ctx=0.50 after_nccl_world=1.50 nccl_world_cost=1.00\n";

fn run(args: &[&str]) -> (i32, String, String) {
    let mut a = vec!["log"];
    a.extend_from_slice(args);
    let o = instrument(&a);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

fn one_error_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line, got {stderr:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    lines[0]
}

#[test]
fn nothing_to_read_is_one_line_naming_each_file() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.log");
    std::fs::write(&empty, "").unwrap();
    let noise = dir.path().join("noise.log");
    std::fs::write(
        &noise,
        "node0:1:1 [0] NCCL INFO Bootstrap\nstep 1 | loss 2.0\n",
    )
    .unwrap();
    let garbage = dir.path().join("garbage.log");
    let bytes: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&garbage, &bytes).unwrap();
    let other = dir.path().join("other.log");
    std::fs::write(&other, "[rank=3] a print of some other rule set: 1.00\n").unwrap();
    let (code, out, err) = run(&[
        empty.to_str().unwrap(),
        noise.to_str().unwrap(),
        garbage.to_str().unwrap(),
        other.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{out}{err}");
    let line = one_error_line(&err);
    assert!(line.starts_with("error: no memory prints read"), "{line}");
    assert!(line.contains("empty.log: empty"), "{line}");
    assert!(line.contains("noise.log: 2 lines, no prints"), "{line}");
    assert!(
        line.contains("garbage.log: 200000 bytes that look binary"),
        "{line}"
    );
    assert!(
        line.contains("other.log: 1 line(s) begin like a print but match none"),
        "{line}"
    );
}

#[test]
fn missing_paths_folders_without_logs_and_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = run(&[dir.path().join("nope.log").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        one_error_line(&err).ends_with("nope.log: no such file or directory"),
        "{err}"
    );
    std::fs::write(dir.path().join("notes.md"), "x").unwrap();
    let (code, _, err) = run(&[dir.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        one_error_line(&err).contains("no log files in this folder"),
        "{err}"
    );
    // A rank that printed nothing.
    let log = dir.path().join("a.log");
    std::fs::write(&log, STEP).unwrap();
    let (code, _, err) = run(&["--rank", "5", log.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        one_error_line(&err).contains("rank 5 printed nothing"),
        "{err}"
    );
    // A rule set that declares no prints.
    let (code, _, err) = run(&["--rules", "nvtx", log.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(one_error_line(&err).contains("declares no prints"), "{err}");
}

#[test]
fn cut_prints_are_skipped_and_counted_and_the_rest_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.log");
    // A print cut by a killed process (the file ends mid-line), one interrupted by another
    // worker's line (torchrun's tailer), and whole ones.
    let text = format!(
        "{SETUP}[default3]:[rank=3 pp=0] Step4 i=0: 0.1[default5]:NCCL INFO x\n{STEP}[rank=3 pp=0] After Step4 (1 F0B1F1B0): 0.1"
    );
    std::fs::write(&log, text).unwrap();
    let r = log_json(&[log.to_str().unwrap()]);
    assert_eq!(r["totals"]["prints"], 2);
    assert_eq!(r["totals"]["cut"], 2);
    assert_eq!(r["inputs"][0]["no_final_newline"], true);
    assert_eq!(r["inputs"][0]["first_cut"]["line"], 2);
    let (code, out, _) = run(&[log.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        out.contains("2 print(s) cut off, skipped (first: line 2)"),
        "{out}"
    );
}

#[test]
fn gzip_corrupt_gzip_and_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for i in 0..20_000 {
        writeln!(
            gz,
            "noise line {i} with some padding to make the stream longer"
        )
        .unwrap();
    }
    gz.write_all(SETUP.as_bytes()).unwrap();
    gz.write_all(STEP.as_bytes()).unwrap();
    let data = gz.finish().unwrap();
    // The extension does not matter: gzip is told by its magic bytes.
    let whole = dir.path().join("node0.txt");
    std::fs::write(&whole, &data).unwrap();
    let r = log_json(&[whole.to_str().unwrap()]);
    assert_eq!(r["inputs"][0]["gzip"], true);
    assert_eq!(r["totals"]["prints"], 2);
    // Damaged half way: what came before is read, the damage is said, the run goes on.
    let broken = dir.path().join("broken.log.gz");
    std::fs::write(&broken, &data[..data.len() * 3 / 4]).unwrap();
    let plain = dir.path().join("plain.log");
    std::fs::write(&plain, STEP).unwrap();
    let r = log_json(&[broken.to_str().unwrap(), plain.to_str().unwrap()]);
    assert!(
        r["inputs"][0]["error"]
            .as_str()
            .unwrap()
            .contains("gzip data is corrupt or ends early")
    );
    assert_eq!(r["totals"]["prints"], 1);
    // Standard input.
    let mut child = Command::new(env!("CARGO_BIN_EXE_instrument"))
        .args(["log", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{SETUP}{STEP}").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["inputs"][0]["name"], "<stdin>");
    assert_eq!(r["totals"]["prints"], 2);
}

#[test]
fn a_users_own_rule_set_is_read_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules).unwrap();
    std::fs::write(
        rules.join("ruleset.toml"),
        "name = \"mine\"\ndescription = \"d\"\nsource_dir = \"pkg\"\n",
    )
    .unwrap();
    std::fs::write(
        rules.join("prints.toml"),
        r#"
[[rule]]
id = "m.step"
group = "m"
file = "pkg/train.py"
summary = "print memory after each step"
anchor = "optimizer.step()"
position = "after"
template = '''
print(f"MEM r{rank} step {step}: {torch.cuda.memory_allocated() / 2**20:.1f} MiB")
'''

# test-rules wants every group to carry an example (issue #19).
[[rule.examples]]
before = '''
import torch

rank, optimizer = 0, None
for step in range(3):
    optimizer.step()
'''

[[rule.prints]]
kind = "timeline"
label = "step {step}"
line = "MEM r{rank} step {step}: {allocated} MiB"
fields = { step = "int" }
"#,
    )
    .unwrap();
    // The declaration is missing the unit of `allocated`: test-rules and log both say so.
    let o = instrument(&["test-rules", "--rules", rules.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("prints.toml: rule m.step print 1: {allocated} needs a type")
    );
    let text = std::fs::read_to_string(rules.join("prints.toml"))
        .unwrap()
        .replace(
            "fields = { step = \"int\" }",
            "fields = { step = \"int\", allocated = \"MiB\" }",
        );
    std::fs::write(rules.join("prints.toml"), text).unwrap();
    let o = instrument(&["test-rules", "--rules", rules.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("prints: 1 of 1 lines"), "{out}");
    let log = dir.path().join("run.log");
    std::fs::write(
        &log,
        "x\nMEM r7 step 1: 812.5 MiB\n12: MEM r7 step 2: 1024.0 MiB\n",
    )
    .unwrap();
    let r = log_json(&["--rules", rules.to_str().unwrap(), log.to_str().unwrap()]);
    let r7 = rank(&r, 7);
    assert_eq!(r7["step"]["points"].as_array().unwrap().len(), 2);
    assert_eq!(r7["step"]["peak"]["allocated_bytes"], 1024 * 1048576);
    assert_eq!(r7["step"]["peak"]["label"], "step 2");
}

#[test]
fn comparison_and_estimate_arguments_are_checked_before_anything_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a.log");
    std::fs::write(&log, format!("{SETUP}{STEP}")).unwrap();
    let log = log.to_str().unwrap();
    for (args, want) in [
        (
            vec![log, "--diff", log, "--gate", "five"],
            "--gate takes a per cent",
        ),
        (
            vec![log, "--diff", log, "--estimate"],
            "cannot be used with",
        ),
        (vec![log, "--gate", "5"], "--diff"),
        (vec![log, "--root", "/tmp"], "--estimate"),
        (
            vec![log, "--estimate", "--estimate-tolerance=-1"],
            "--estimate-tolerance",
        ),
        (vec![log, "--diff", "/no/such/after.log"], "after: "),
        (vec!["/no/such/before.log", "--diff", log], "before: "),
    ] {
        let (code, out, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(err.contains(want), "{args:?}: {want:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // A run compared with itself: a report, no change.
    let (code, out, err) = run(&[log, "--diff", log, "--gate", "0"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rank 3 (pp 0): no change"), "{out}");
    assert!(out.contains("gate 0%: passed"), "{out}");
}
