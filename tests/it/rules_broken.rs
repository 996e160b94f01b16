//! A rule set whose rule uses a name nothing defines is refused when it loads, by every
//! command that reads it alike: `rules`, `test-rules`, `explain` and `add` print the same
//! one line (the file and line of the rule, its id, the name) and exit 2, writing nothing.
//! Each broken set is a working one (which all four accept) with one defect planted.
//!
//! A defect in the examples (`examples/<stem>.toml`) is refused alike by `rules` and
//! `test-rules`, the two that read them; `explain` and `add` never read them, and print what
//! they print on the set without its examples folder.

use crate::common;

use std::path::Path;

use common::*;

const RULESET: &str = r#"name = "planted"
description = "one rule, with the defect a test plants"
root_marker = "pithtrain/__init__.py"
source_dir = "pithtrain"

[params.RANKS]
kind = "int-set"
flag = "ranks"
default = "0"
help = "ranks that print"

[models]
dir = "pithtrain/models"
exclude = ["__init__", "interface"]

[models.roles.EXPERTS]
about = "the routed experts"
takes = "forward(grouped_mm_offs)"
"#;

/// The working rule (it binds a name of its own: it prints nothing, so it declares no
/// prints); each defect replaces some of its lines.
const RULE: &str = r#"# A name bound after the first rank's block.
[[rule]]
id = "1A.after-flag"
group = "1"
file = "pithtrain/dualpipe/dualpipev.py"
summary = "a name bound after the first rank's block"
scope = ["class DualPipeV", "def step"]
anchor = "if self.is_first_pp_rank"
contains = "self.criterion = criterion"
position = "after"
template = '''
_planted = {RANKS}
'''

[[rule.examples]]
before = '''
class DualPipeV:
    def step(self, criterion):
        if self.is_first_pp_rank:
            self.criterion = criterion
'''
"#;

/// The working set's examples file: a second example of the rule, beside its inline one
/// (a set may write both).
const EXAMPLES: &str = r#"# The block with the criterion among other statements: the name goes after all of it.
[[example]]
rule = "1A.after-flag"
params = { RANKS = "{3, 14}" }
before = '''
class DualPipeV:
    def step(self, criterion):
        if self.is_first_pp_rank:
            self.criterion = criterion
            self.loss = None
        return self.criterion
'''
after = '''
class DualPipeV:
    def step(self, criterion):
        if self.is_first_pp_rank:
            self.criterion = criterion
            self.loss = None
        # >>> instrument planted 1A.after-flag [RANKS={3, 14}] (take out: instrument remove) h=XXXXXXXX
        _planted = {3, 14}
        # <<< instrument planted 1A.after-flag
        return self.criterion
'''
"#;

/// The defects: what each is, and the lines of `RULE` it replaces with what.
type Defect = (&'static str, &'static [(&'static str, &'static str)]);

const TEMPLATE: &str = "_planted = {RANKS}";

const DEFECTS: &[Defect] = &[
    (
        "a metavariable no pattern binds",
        &[(TEMPLATE, "_planted = {RANKS}, $FLAG")],
    ),
    (
        "a metavariable only one alternative of the anchor binds",
        &[
            (
                "anchor = \"if self.is_first_pp_rank\"",
                "anchor = [\"if $FLAG\", \"if self.is_first_pp_rank\"]",
            ),
            (TEMPLATE, "_planted = {RANKS}, $FLAG"),
        ],
    ),
    (
        "a parameter the set does not declare",
        &[(TEMPLATE, "_planted = {RANK}")],
    ),
    (
        "a role the set does not declare",
        &[(
            "scope = [\"class DualPipeV\", \"def step\"]",
            "scope = [\"class {DUALPIPE}\", \"def step\"]",
        )],
    ),
    (
        "{ORIGINAL} in a rule that replaces nothing",
        &[(TEMPLATE, "{ORIGINAL}\n_planted = {RANKS}")],
    ),
    (
        "{MODEL} in a template",
        &[(TEMPLATE, "_planted = \"{MODEL}\", {RANKS}")],
    ),
];

/// `RULE` with a defect planted.
fn planted(edits: &[(&str, &str)]) -> String {
    let mut text = RULE.to_string();
    for (from, to) in edits {
        assert!(text.contains(from), "{from}");
        text = text.replacen(from, to, 1);
    }
    text
}

fn write_set(dir: &Path, rule: &str) {
    std::fs::create_dir_all(dir.join("examples")).unwrap();
    std::fs::write(dir.join("ruleset.toml"), RULESET).unwrap();
    std::fs::write(dir.join("rules.toml"), rule).unwrap();
    std::fs::write(dir.join("examples/rules.toml"), EXAMPLES).unwrap();
}

/// A defect of the examples: what it is, the lines of `EXAMPLES` it replaces with what, and
/// the files it adds to the set (path, text).
type ExamplesDefect = (
    &'static str,
    &'static [(&'static str, &'static str)],
    fn() -> Vec<(&'static str, String)>,
);

fn no_files() -> Vec<(&'static str, String)> {
    Vec::new()
}

/// An examples file (path) with one example of `RULE`'s rule.
fn example_of_the_rule_in(path: &'static str) -> Vec<(&'static str, String)> {
    let text =
        "[[example]]\nrule = \"1A.after-flag\"\nbefore = '''\nclass DualPipeV:\n    pass\n'''\n";
    vec![(path, text.to_string())]
}

/// A second rule file, whose own rule (`RULE`'s, under another id and name) is tested
/// inline, and an example of `RULE`'s rule in its examples file.
fn a_second_rule_file() -> Vec<(&'static str, String)> {
    let more = RULE
        .replace("1A.after-flag", "1B.more")
        .replace("_planted", "_more");
    let mut files = vec![("more.toml", more)];
    files.extend(example_of_the_rule_in("examples/more.toml"));
    files
}

const RULE_LINE: &str = "rule = \"1A.after-flag\"";

const EXAMPLES_DEFECTS: &[ExamplesDefect] = &[
    (
        "an example naming a rule the set does not have",
        &[(RULE_LINE, "rule = \"1A.after-flags\"")],
        no_files,
    ),
    (
        "an example naming a rule nothing in the set is like",
        &[(RULE_LINE, "rule = \"9.unrelated\"")],
        no_files,
    ),
    (
        "an example naming no rule",
        &[(RULE_LINE, "# (its rule is not named)")],
        no_files,
    ),
    (
        "an example of another rule file's rule",
        &[],
        a_second_rule_file,
    ),
    (
        "an examples file with no rule file of its name",
        &[],
        || example_of_the_rule_in("examples/rule.toml"),
    ),
    (
        "an unknown key in an example",
        &[("after = '''", "expected = '''")],
        no_files,
    ),
    (
        "an unknown key in an examples file",
        &[("[[example]]", "[[examples]]")],
        no_files,
    ),
    (
        "an examples file that is not TOML",
        &[(RULE_LINE, "rule = \"1A.after-flag")],
        no_files,
    ),
];

/// The four commands on the set in `rules` (a folder), run in `checkout`: each one's exit
/// code, stdout and stderr.
fn four(rules: &Path, checkout: &Path) -> Vec<(&'static str, Option<i32>, String, String)> {
    let spec = rules.to_str().unwrap();
    [
        ("rules", vec!["rules", "--rules", spec]),
        ("test-rules", vec!["test-rules", "--rules", spec]),
        ("explain", vec!["explain", "qwen3-moe", "--rules", spec]),
        (
            "add",
            vec!["add", "qwen3-moe", "--rules", spec, "--dry-run"],
        ),
    ]
    .into_iter()
    .map(|(name, args)| {
        let out = instrument(&args, checkout);
        (name, out.status.code(), stdout(&out), stderr(&out))
    })
    .collect()
}

#[test]
fn the_working_set_is_accepted_by_all_four() {
    let checkout = scratch_copy(&fixture());
    let rules = tempfile::tempdir().unwrap();
    write_set(rules.path(), RULE);
    for (name, code, out, err) in four(rules.path(), checkout.path()) {
        assert_eq!(code, Some(0), "{name}: {out}{err}");
    }
    // Both examples of the rule, the inline one and its examples file's, pass.
    let out = instrument(
        &["test-rules", "--rules", rules.path().to_str().unwrap()],
        checkout.path(),
    );
    assert_eq!(
        stdout(&out),
        "rule set planted: 2 examples on 1 of 1 rules\n\
         prints: 0 of 0 lines the templates of 0 rules print read back through 0 declarations\n\
         2 passed, 0 failed\n"
    );
}

#[test]
fn a_set_with_a_name_nothing_defines_is_refused_alike_by_all_four() {
    let checkout = scratch_copy(&fixture());
    let before = snapshot_tree(checkout.path());
    let mut report = String::new();
    for (what, edits) in DEFECTS {
        let rules = tempfile::tempdir().unwrap();
        let text = planted(edits);
        write_set(rules.path(), &text);
        // Where the rule is: the line of its id in the file the test wrote.
        let line = text.lines().position(|l| l.starts_with("id = ")).unwrap() + 1;
        let results = four(rules.path(), checkout.path());
        let (_, code, _, first) = &results[0];
        for (name, c, out, err) in &results {
            assert_eq!(c, code, "{what}: {name}");
            assert_eq!(out, "", "{what}: {name}");
            assert_eq!(err, first, "{what}: {name} says otherwise than rules");
        }
        let shown = Redact::default().folder(rules.path(), "<DIR>").apply(first);
        assert!(
            shown.starts_with(&format!(
                "error: <DIR>/rules.toml:{line}: rule 1A.after-flag: "
            )),
            "{what}: {shown}"
        );
        assert_eq!(shown.lines().count(), 1, "{what}: {shown}");
        report.push_str(&format!("{what}: exit {}\n{shown}\n", code.unwrap()));
    }
    assert_eq!(snapshot_tree(checkout.path()), before);
    insta::assert_snapshot!("broken_sets", report);
}

#[test]
fn a_set_with_a_broken_example_is_refused_by_the_two_that_read_examples() {
    let checkout = scratch_copy(&fixture());
    let before = snapshot_tree(checkout.path());
    let mut report = String::new();
    for (what, edits, added) in EXAMPLES_DEFECTS {
        let rules = tempfile::tempdir().unwrap();
        write_set(rules.path(), RULE);
        let mut examples = EXAMPLES.to_string();
        for (from, to) in *edits {
            assert!(examples.contains(from), "{from}");
            examples = examples.replacen(from, to, 1);
        }
        std::fs::write(rules.path().join("examples/rules.toml"), &examples).unwrap();
        for (path, text) in added() {
            std::fs::write(rules.path().join(path), text).unwrap();
        }
        let results = four(rules.path(), checkout.path());
        // What explain and add print on the same set without its examples folder.
        std::fs::remove_dir_all(rules.path().join("examples")).unwrap();
        let without = four(rules.path(), checkout.path());
        let (_, code, _, first) = &results[0];
        for (name, c, out, err) in &results[..2] {
            assert_eq!(c, code, "{what}: {name}");
            assert_eq!(out, "", "{what}: {name}");
            assert_eq!(err, first, "{what}: {name} says otherwise than rules");
        }
        for (got, want) in results[2..].iter().zip(&without[2..]) {
            assert_eq!(got.1, Some(0), "{what}: {}: {}{}", got.0, got.2, got.3);
            assert_eq!(got, want, "{what}: {} reads the examples", got.0);
        }
        let shown = Redact::default().folder(rules.path(), "<DIR>").apply(first);
        assert!(
            shown.starts_with("error: <DIR>/examples/"),
            "{what}: {shown}"
        );
        assert_eq!(shown.lines().count(), 1, "{what}: {shown}");
        report.push_str(&format!("{what}: exit {}\n{shown}\n", code.unwrap()));
    }
    assert_eq!(snapshot_tree(checkout.path()), before);
    insta::assert_snapshot!("broken_examples", report);
}
