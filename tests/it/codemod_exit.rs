//! The documented exit codes, each from a real cause: 0 done, 1 found something, 2 a user
//! error, 3 an I/O failure the user did not cause.

use crate::common;

use common::*;

#[test]
fn each_kind_of_outcome_has_its_exit_code() {
    let dir = scratch_copy(&fixture());
    // 0: done.
    let out = instrument(&["add", "qwen3-moe", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = instrument(&["add", "qwen3-moe"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // 1: `check` found instrumentation.
    let out = instrument(&["check"], dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // 2: a user error: a value that is not one, a model that is not there, a rule set
    // that is not valid; each says so in one line (error: ...).
    let rules = tempfile::tempdir().unwrap();
    let mut t = Transcript::new(
        Redact::default()
            .folder(dir.path(), "<CHECKOUT>")
            .folder(rules.path(), "<RULES>"),
    );
    let out = t.run(&["add", "qwen3-moe", "--ranks", "x"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = t.run(&["add", "mixtral-9x"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    copy_tree(&repo_root().join("rules/memory-prints"), rules.path());
    std::fs::write(rules.path().join("9-bad.toml"), "[[rule]]\nid = \"9.x\"\n").unwrap();
    let set = rules.path().to_str().unwrap().to_string();
    t.note("a copy of memory-prints with 9-bad.toml, a rule without its fields");
    let out = t.run(&["add", "qwen3-moe", "--rules", &set], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // 2: a rule file that is a folder is the user's to fix, as a log path that is one
    // (`exit::io_class`: the same I/O error has the same class in every command).
    std::fs::remove_file(rules.path().join("9-bad.toml")).unwrap();
    std::fs::create_dir(rules.path().join("9-folder.toml")).unwrap();
    t.note("9-bad.toml taken out; a folder named 9-folder.toml in its place");
    let out = t.run(&["add", "qwen3-moe", "--rules", &set], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    insta::assert_snapshot!("user_errors", t.text());
}
