//! The engine's check that inserted code binds only names of its own: the recipe's own
//! snapshot code, which binds `rank` in `train_step`, is refused with file, line, rule and
//! name, and nothing is written.

use crate::common;

use common::*;

#[test]
fn a_rule_binding_a_host_name_is_refused() {
    let rules = tempfile::tempdir().unwrap();
    copy_tree(&repo_root().join("rules/memory-prints"), rules.path());
    let path = rules.path().join("7-snapshot.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    // The recipe's step snapshot, as it binds names: `rank` is train_step's own (it binds it
    // when pithtrain's profiler stops), `snapshot_path` is not.
    let recipe = "if _mem_profile:\n    rank = torch.distributed.get_rank()\n    snapshot_path = f\"/tmp/memory_snapshot_rank{rank}.pickle\"\n    _mem_step_ends()\n";
    let edited = text.replacen("if _mem_profile:\n    _mem_step_ends()\n", recipe, 1);
    assert_ne!(edited, text);
    std::fs::write(&path, edited).unwrap();

    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    let out = instrument(
        &[
            "add",
            "qwen3-moe",
            "--rules",
            rules.path().to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.contains("binds `rank`"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.starts_with("error: pithtrain/tasks/pretrain_lm.py:")
            && line.contains(": rule 7.after-optimizer: the inserted code binds `rank`, which `train_step` uses too"),
        "{line}"
    );
    assert!(
        !err.contains("snapshot_path"),
        "a name the host does not use is the rule's own: {err}"
    );
    assert_eq!(snapshot_tree(dir.path()), before, "nothing written");
}
