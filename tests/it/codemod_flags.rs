//! `add`'s flags come from the rule set: each `[params.X] flag = "x"` is `--x`, for the
//! built-in sets and for a folder given with `--rules`; `--help` lists them; computed
//! defaults are declared by the rule set.

use crate::common;

use std::path::Path;

use common::*;

/// A rule set of one's own: a banner printed at the end of `pithtrain/__init__.py`.
fn banner_set(dir: &Path, extra_manifest: &str) {
    std::fs::write(
        dir.join("ruleset.toml"),
        format!(
            r#"name = "banner"
description = "a banner at import"
source_dir = "pithtrain"
root_marker = "pithtrain/__init__.py"

[params.BANNER]
kind = "string"
flag = "banner"
default = "hello"
help = "the text the banner prints"

[params.TIMES]
kind = "int"
help = "how often (no flag: --param TIMES=N)"
default = "1"
{extra_manifest}"#
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("banner.toml"),
        r#"[[rule]]
id = "1.banner"
group = "1"
file = "pithtrain/__init__.py"
summary = "print the banner"
position = "body-end"
template = '''
for _ in range({TIMES}):
    print({BANNER})
'''

[[rule.examples]]
before = '''
"""Doc."""
'''
"#,
    )
    .unwrap();
}

#[test]
fn a_rule_sets_parameters_are_flags_of_add_and_listed_by_help() {
    let rules = tempfile::tempdir().unwrap();
    banner_set(rules.path(), "");
    let set = rules.path().to_str().unwrap();
    let dir = scratch_copy(&fixture());
    let mut t = Transcript::new(
        Redact::default()
            .folder(rules.path(), "<RULES>")
            .folder(dir.path(), "<CHECKOUT>"),
    );
    // The help lists the set's parameters with their flags, help and defaults; not the
    // built-in set's flags, and not a parameter without a flag (TIMES).
    let help = t.run(&["add", "--rules", set, "--help"], &repo_root());
    assert_eq!(help.status.code(), Some(0), "{}", stderr(&help));
    // The banner printed twice: the flag and --param, in the whole diff.
    let out = t.run(
        &[
            "add",
            "--rules",
            set,
            "--banner",
            "hi there",
            "--param",
            "TIMES=2",
            "--dry-run",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A flag of another rule set is not one of this one's.
    let out = t.run(&["add", "--rules", set, "--ranks", "3"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("own_set_flags", t.text());
}

/// memory-prints' parameters (--ranks, --detail-layers, --step, --snapshot-dir, --stacks)
/// are add's flags; nvtx has none, and its help lists none.
#[test]
fn the_built_in_sets_flags_come_from_their_rule_sets() {
    let mut t = Transcript::new(Redact::default());
    for args in [
        &["add", "--help"][..],
        &["add", "--rules", "nvtx", "--help"],
    ] {
        let out = t.run(args, &repo_root());
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    insta::assert_snapshot!("built_in_sets_help", t.text());
}

#[test]
fn a_flag_that_is_one_of_adds_own_or_an_undeclared_computed_default_is_refused() {
    let rules = tempfile::tempdir().unwrap();
    banner_set(
        rules.path(),
        "[params.WHERE]\nkind = \"path\"\nflag = \"root\"\nhelp = \"x\"\n",
    );
    let set = rules.path().to_str().unwrap();
    let mut t = Transcript::new(Redact::default().folder(rules.path(), "<RULES>"));
    t.note("[params.WHERE] flag = \"root\"");
    let out = t.run(&["add", "--rules", set, "--help"], &repo_root());
    assert_eq!(out.status.code(), Some(2));
    // The commands that review a set refuse it the same way.
    for review in ["rules", "test-rules"] {
        let out = t.run(&[review, "--rules", set], &repo_root());
        assert_eq!(out.status.code(), Some(2));
    }
    banner_set(
        rules.path(),
        "[params.LAYERS]\nkind = \"int-tuple\"\nflag = \"layers\"\nhelp = \"x\"\ndefault = { computed = \"first-layers\" }\n",
    );
    t.note("[params.LAYERS] default = { computed = \"first-layers\" }, with no [computed.first-layers]");
    let out = t.run(&["add", "--rules", set, "--dry-run"], &fixture());
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("own_flag_and_undeclared_computed_default", t.text());
}

#[test]
fn a_computed_default_is_declared_by_the_rule_set() {
    // The layer-condition method with this set's own patterns: every decoder layer of
    // the fixture's qwen3_moe builds its MoE block, so the first three layers.
    let rules = tempfile::tempdir().unwrap();
    std::fs::write(
        rules.path().join("ruleset.toml"),
        r#"name = "layers"
description = "the first layers"
source_dir = "pithtrain"
root_marker = "pithtrain/__init__.py"

[models]
dir = "pithtrain/models"
exclude = ["__init__", "interface"]

[models.known.qwen3_moe]
model_type = "qwen3_moe"

[params.FIRST]
kind = "int-tuple"
flag = "first"
default = { computed = "first-three" }
help = "layers"

[computed.first-three]
method = "layer-condition"
count = 3
index = "self.idx = $LAYER"
always_moe = ["self.mlp = $_($$$)"]
example_configs = "examples/pretrain_lm/*/config.json"
"#,
    )
    .unwrap();
    std::fs::write(
        rules.path().join("r.toml"),
        r#"[[rule]]
id = "1.first"
group = "1"
file = "pithtrain/__init__.py"
summary = "the layers"
position = "body-end"
template = '''
FIRST_LAYERS = {FIRST}
'''
"#,
    )
    .unwrap();
    let set = rules.path().to_str().unwrap();
    let mut t = Transcript::new(Redact::default().folder(rules.path(), "<RULES>"));
    // The first three layers, written as the literal, and why.
    let out = t.run(
        &["add", "--rules", set, "qwen3-moe", "--dry-run"],
        &fixture(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Given, the flag wins; a layer the model does not have is refused by the same method.
    let out = t.run(
        &[
            "add",
            "--rules",
            set,
            "qwen3-moe",
            "--first",
            "99",
            "--dry-run",
        ],
        &fixture(),
    );
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("computed_default", t.text());
}
