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
    let help = instrument(&["add", "--rules", set, "--help"], &repo_root());
    assert_eq!(help.status.code(), Some(0), "{}", stderr(&help));
    let text = stdout(&help);
    assert!(text.contains("Parameters of rule set banner:"), "{text}");
    assert!(
        text.contains("--banner <TEXT>  The text the banner prints (default: hello) [BANNER]"),
        "{text}"
    );
    // The built-in set's flags are not there; a parameter without a flag is not a flag.
    assert!(!text.contains("--ranks"), "{text}");
    assert!(!text.contains("--times"), "{text}");

    let dir = scratch_copy(&fixture());
    let out = instrument(
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
    let diff = stdout(&out);
    assert!(
        diff.contains("+for _ in range(2):\n+    print(\"hi there\")"),
        "{diff}"
    );
    // A flag of another rule set is not one of this one's.
    let out = instrument(&["add", "--rules", set, "--ranks", "3"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--ranks: rule set banner has no parameter it sets and add has no such flag (its parameters: BANNER (--banner), TIMES (--param TIMES=);"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_built_in_sets_flags_come_from_their_rule_sets() {
    let help = stdout(&instrument(&["add", "--help"], &repo_root()));
    for flag in [
        "--ranks <LIST>",
        "--detail-layers <LIST>",
        "--step <N>",
        "--snapshot-dir <PATH>",
        "--stacks <python|all>",
    ] {
        assert!(help.contains(flag), "{flag} in:\n{help}");
    }
    let nvtx = stdout(&instrument(
        &["add", "--rules", "nvtx", "--help"],
        &repo_root(),
    ));
    assert!(!nvtx.contains("--ranks"), "{nvtx}");
    assert!(!nvtx.contains("Parameters of rule set"), "{nvtx}");
}

#[test]
fn a_flag_that_is_one_of_adds_own_or_an_undeclared_computed_default_is_refused() {
    let rules = tempfile::tempdir().unwrap();
    banner_set(
        rules.path(),
        "[params.WHERE]\nkind = \"path\"\nflag = \"root\"\nhelp = \"x\"\n",
    );
    let set = rules.path().to_str().unwrap();
    let out = instrument(&["add", "--rules", set, "--help"], &repo_root());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("[params.WHERE] flag = \"root\" is one of add's own flags"),
        "{}",
        stderr(&out)
    );
    banner_set(
        rules.path(),
        "[params.LAYERS]\nkind = \"int-tuple\"\nflag = \"layers\"\nhelp = \"x\"\ndefault = { computed = \"first-layers\" }\n",
    );
    let out = instrument(&["add", "--rules", set, "--dry-run"], &fixture());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("computes its default with \"first-layers\", which no [computed.first-layers] table declares"),
        "{}",
        stderr(&out)
    );
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
    let out = instrument(
        &["add", "--rules", set, "qwen3-moe", "--dry-run"],
        &fixture(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("+FIRST_LAYERS = (0, 1, 2)"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("first (0, 1, 2): every decoder layer builds"),
        "{}",
        stderr(&out)
    );
    // Given, the flag wins; a layer the model does not have is refused by the same method.
    let out = instrument(
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
    assert!(
        stderr(&out).contains("--first 99: the model has"),
        "{}",
        stderr(&out)
    );
}
