//! `instrument rules`, `explain` and `test-rules`: what rule authors and reviewers use.

use crate::common;

use common::*;

#[test]
fn rules_lists_every_rule_with_its_anchor() {
    let out = instrument(&["rules", "--json"], &repo_root());
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules = doc["rules"].as_array().unwrap();
    let groups: std::collections::BTreeSet<&str> =
        rules.iter().map(|r| r["group"].as_str().unwrap()).collect();
    assert_eq!(
        groups,
        ["1", "2", "3", "4", "5", "6", "7", "8"]
            .into_iter()
            .collect()
    );
    let r = rules
        .iter()
        .find(|r| r["id"] == "4A.profiling-flag")
        .unwrap();
    assert_eq!(r["anchor"], "if self.is_first_pp_rank");
    assert_eq!(r["position"], "after");
    // The listing as a whole: every rule with its scope, position and anchor.
    insta::assert_snapshot!(
        "rules_memory_prints",
        stdout(&instrument(&["rules"], &repo_root()))
    );
}

#[test]
fn explain_shows_where_each_anchor_lands() {
    let dir = scratch_copy(&fixture());
    let out = instrument(&["explain", "qwen3-moe"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    // Where every anchor of every rule lands in the fixture, file, line and matched text.
    insta::assert_snapshot!("explain_qwen3_moe_fixture", text);
    // On an instrumented tree it reports where each anchor is now, and writes nothing.
    add_ok(dir.path(), &[]);
    let after = snapshot_tree(dir.path());
    let again = instrument(&["explain", "qwen3-moe", "--json"], dir.path());
    assert_eq!(snapshot_tree(dir.path()), after);
    let doc: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(doc["schema"], "instrument.explain/1");
    assert_eq!(doc["model"], "qwen3-moe");
    let mut moved = 0;
    for l in doc["rules"].as_array().unwrap() {
        let (file, line) = (l["file"].as_str().unwrap(), l["line"].as_u64().unwrap());
        let now = std::fs::read_to_string(dir.path().join(file)).unwrap();
        let at = now.lines().nth(line as usize - 1).unwrap();
        let matched = l["matched"].as_str().unwrap();
        // The anchor's first line, or its kept original in a region that replaced it.
        assert!(
            at.trim_start().starts_with('@')
                || at
                    .trim_start()
                    .trim_start_matches("# | ")
                    .starts_with(matched.trim()),
            "{}: line {line} is `{at}`, not `{matched}`",
            l["rule"]
        );
        let before_line = text
            .lines()
            .find(|t| t.starts_with(l["rule"].as_str().unwrap()))
            .and_then(|t| t.rsplit_once(':'))
            .map(|(_, rest)| rest.split_whitespace().next().unwrap().to_string());
        if before_line.as_deref() != Some(&line.to_string()) {
            moved += 1;
        }
    }
    assert!(
        moved > 10,
        "anchors below inserted code have moved ({moved})"
    );
}

#[test]
fn explain_reports_anchors_that_do_not_resolve() {
    let dir = scratch_copy(&fixture());
    let path = dir.path().join("pithtrain/modules/training.py");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "apply_fsdp(modules, device_mesh)",
        "shard(modules, device_mesh)",
    );
    std::fs::write(&path, text).unwrap();
    let out = instrument(&["explain", "qwen3-moe", "--json"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bad: Vec<&serde_json::Value> = doc["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| !l["error"].is_null())
        .collect();
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0]["rule"], "3.after-apply-fsdp");
    insta::assert_snapshot!(
        "explain_unresolved_error",
        bad[0]["error"].as_str().unwrap()
    );
}

#[test]
fn test_rules_passes_on_the_shipped_rules_and_fails_on_a_wrong_expectation() {
    let out = instrument(&["test-rules"], &repo_root());
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let passing = stdout(&out);
    let last = passing.lines().last().unwrap();
    let checked: usize = last
        .strip_suffix(" passed, 0 failed")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{passing}"));
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&repo_root().join("rules/memory-prints"), dir.path());
    let path = dir.path().join("examples/5-model.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let wrong = text.replacen(
        "        _out = self.down_proj(_gu, **kwargs)\n",
        "        _out = self.down_proj(_gu)\n",
        1,
    );
    assert_ne!(wrong, text);
    std::fs::write(&path, wrong).unwrap();
    let out = instrument(
        &["test-rules", "--rules", dir.path().to_str().unwrap()],
        &repo_root(),
    );
    assert_eq!(out.status.code(), Some(1));
    // The same report with one FAIL line before the summary, and one check fewer passed.
    let fail = "FAIL 5D.return example 1: unexpected output (line 14: expected \"        _out = self.down_proj(_gu)\", got \"        _out = self.down_proj(_gu, **kwargs)\")";
    let mut want: Vec<String> = passing.lines().map(str::to_string).collect();
    let summary = want
        .iter()
        .position(|l| l.starts_with("rule set memory-prints: "))
        .unwrap();
    want.insert(summary, fail.to_string());
    *want.last_mut().unwrap() = format!("{} passed, 1 failed", checked - 1);
    assert_eq!(stdout(&out), format!("{}\n", want.join("\n")));
}

/// A rule set of one's own with one rule (group 1) and, optionally, examples.
fn one_rule_set(dir: &std::path::Path, rule: &str) {
    std::fs::write(
        dir.join("ruleset.toml"),
        "name = \"own\"\ndescription = \"own\"\nsource_dir = \"pithtrain\"\n[params.N]\nkind = \"int\"\ndefault = \"2\"\nhelp = \"n\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("rules.toml"), rule).unwrap();
}

const PRINTING_RULE: &str = r#"[[rule]]
id = "1.hello"
group = "1"
file = "pithtrain/x.py"
summary = "say hello"
scope = ["def f"]
position = "body-start"
template = '''
_rank = 0
print(f"[rank={_rank}] hello n={len(str({N}))}", flush=True)
'''
"#;

/// Every group carries examples in each file it has rules in: a group none of whose
/// rules in a file has one fails `test-rules`, in one line naming set, group and file.
#[test]
fn test_rules_fails_on_a_group_without_examples() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let print = "[[rule.prints]]\nkind = \"note\"\nlabel = \"hello\"\nline = \"[rank={rank}] hello n={n}\"\nfields = { n = \"int\" }\n";
    one_rule_set(dir.path(), &format!("{PRINTING_RULE}\n{print}"));
    let out = instrument(&["test-rules", "--rules", root], &repo_root());
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "FAIL rule set own group 1 in {root}/rules.toml: none of its 1 rule(s) there has examples; write [[example]] tables in {root}/examples/rules.toml for each rule whose shape differs\n\
             rule set own: 0 examples on 0 of 1 rules\n\
             prints: 1 of 1 lines the templates of 1 rules print read back through 1 declarations\n\
             1 passed, 1 failed\n"
        )
    );
    // With an example there (inline, as a set may write them), the group passes; its rules
    // in another file need their own.
    let example = "[[rule.examples]]\nbefore = '''\ndef f():\n    return 1\n'''\n";
    one_rule_set(dir.path(), &format!("{PRINTING_RULE}\n{example}\n{print}"));
    let other = PRINTING_RULE
        .replace("1.hello", "1.again")
        .replace("def f", "def g");
    std::fs::write(dir.path().join("more.toml"), format!("{other}\n{print}")).unwrap();
    let out = instrument(&["test-rules", "--rules", root], &repo_root());
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "FAIL rule set own group 1 in {root}/more.toml: none of its 1 rule(s) there has examples; write [[example]] tables in {root}/examples/more.toml for each rule whose shape differs\n\
             rule set own: 1 examples on 1 of 2 rules\n\
             prints: 2 of 2 lines the templates of 2 rules print read back through 2 declarations\n\
             3 passed, 1 failed\n"
        )
    );
    // Given in that file's examples file, beside the other file's inline one, they pass.
    std::fs::create_dir(dir.path().join("examples")).unwrap();
    std::fs::write(
        dir.path().join("examples/more.toml"),
        "[[example]]\nrule = \"1.again\"\nbefore = '''\ndef g():\n    return 1\n'''\n",
    )
    .unwrap();
    let out = instrument(&["test-rules", "--rules", root], &repo_root());
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        "rule set own: 2 examples on 2 of 2 rules\n\
         prints: 2 of 2 lines the templates of 2 rules print read back through 2 declarations\n\
         4 passed, 0 failed\n"
    );
}

#[test]
fn a_prints_line_is_derived_from_its_f_string_where_it_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    // No `line`: the f-string gives it, the value after `n=` named `n`.
    one_rule_set(
        dir.path(),
        &format!(
            "{PRINTING_RULE}\n[[rule.examples]]\nbefore = '''\ndef f():\n    return 1\n'''\n\n[[rule.prints]]\nkind = \"note\"\nlabel = \"hello\"\nfields = {{ n = \"int\" }}\n"
        ),
    );
    let out = instrument(
        &["test-rules", "--rules", dir.path().to_str().unwrap()],
        &repo_root(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        "rule set own: 1 examples on 1 of 1 rules\n\
         prints: 1 of 1 lines the templates of 1 rules print read back through 1 declarations\n\
         2 passed, 0 failed\n"
    );
    // A print the naming cannot name is refused at load, asking for `line`.
    one_rule_set(
        dir.path(),
        &format!(
            "{}\n[[rule.examples]]\nbefore = '''\ndef f():\n    return 1\n'''\n\n[[rule.prints]]\nkind = \"note\"\nlabel = \"hello\"\n",
            PRINTING_RULE.replace("n={len", "{len")
        ),
    );
    let out = instrument(
        &["test-rules", "--rules", dir.path().to_str().unwrap()],
        &repo_root(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "error: {}/rules.toml: rule 1.hello print 1: its `line` cannot be derived from `[rank=⟨_rank⟩] hello ⟨len(str(None))⟩`: the value `len(str(None))` has no name (not in [prints.values], not after `name=`, not a plain name); write `line`\n",
            dir.path().display()
        )
    );
}

/// What groups require of each other is the rule set's (`[groups.N] requires`), shown by
/// `rules`; a group named there that no rule is in is a load error with file and line.
#[test]
fn group_requirements_are_declared_shown_and_checked() {
    let out = instrument(&["rules", "--json"], &repo_root());
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "instrument.rules/1");
    assert_eq!(
        doc["groups"]["4"]["requires"],
        serde_json::json!(["1", "7"])
    );
    assert_eq!(
        doc["groups"]["5"]["requires"],
        serde_json::json!(["1", "4"])
    );
    assert_eq!(
        doc["groups"]["8"]["requires"],
        serde_json::json!(["1", "7"])
    );
    // (`rules` shows them: the rules_memory_prints snapshot.)

    let dir = tempfile::tempdir().unwrap();
    copy_tree(&repo_root().join("rules/memory-prints"), dir.path());
    let manifest = dir.path().join("ruleset.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let line = text.lines().position(|l| l == "[groups.4]").unwrap() + 2;
    // Group 4 requires a group no rule is in (group 9); only its line changes.
    let at = text.find("[groups.4]\nrequires = [\"1\", \"7\"]").unwrap();
    let mut edited = text.clone();
    edited.replace_range(
        at..at + "[groups.4]\nrequires = [\"1\", \"7\"]".len(),
        "[groups.4]\nrequires = [\"1\", \"9\"]",
    );
    std::fs::write(&manifest, edited).unwrap();
    let out = instrument(
        &["rules", "--rules", dir.path().to_str().unwrap()],
        &repo_root(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "error: {}/ruleset.toml:{line}: [groups.4]: requires group \"9\", which no rule is in (the groups: 1, 2, 3, 4, 5, 6, 7, 8)\n",
            dir.path().display()
        )
    );
}
