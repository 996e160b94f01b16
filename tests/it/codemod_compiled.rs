//! Never inside compiled code, however it is spelled: `torch.compile` imported under
//! another name, aliased, called through `torch._dynamo.optimize`, or applied by
//! assignment; and `torch.compiler.disable` (the opposite) is not taken for it.

use crate::common;

use std::path::Path;

use common::*;

const QWEN: &str = "pithtrain/models/qwen3_moe.py";
const EXPERTS_FORWARD: &str = "class Qwen3MoeExperts(nn.Module):\n";

fn edit(root: &Path, from: &str, to: &str) {
    let path = root.join(QWEN);
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replacen(from, to, 1);
    assert_ne!(edited, text, "{QWEN} lacks {from:?}");
    std::fs::write(path, edited).unwrap();
}

/// Decorate the experts' `forward` with `decorator`, adding `imports` at the top.
fn decorate(root: &Path, imports: &str, decorator: &str) {
    if !imports.is_empty() {
        edit(root, "import torch\n", &format!("import torch\n{imports}"));
    }
    let path = root.join(QWEN);
    let text = std::fs::read_to_string(&path).unwrap();
    let at = text.find(EXPERTS_FORWARD).unwrap();
    let def = at + text[at..].find("    def forward(").unwrap();
    let text = format!("{}    {decorator}\n{}", &text[..def], &text[def..]);
    std::fs::write(path, text).unwrap();
}

/// `add` refused, the tree untouched; what it said, for the snapshot.
fn refused_for_compiled(root: &Path, how: &str) -> String {
    let before = snapshot_tree(root);
    let mut t = Transcript::new(Redact::default().folder(root, "<CHECKOUT>"));
    t.note(how);
    let out = t.run(&["add", "qwen3-moe"], root);
    assert_eq!(out.status.code(), Some(2), "{how}: {}", stderr(&out));
    assert_eq!(snapshot_tree(root), before);
    t.text().to_string()
}

/// Each refusal names the rule (5D, the experts' prints), `forward`, and how it is
/// compiled, in the spelling of the source.
#[test]
fn compile_under_another_name_is_found() {
    let mut report = String::new();
    for (imports, decorator, how) in [
        (
            "from torch import compile as _tc\n",
            "@_tc",
            "`from torch import compile as _tc`, the experts' forward decorated with `@_tc`",
        ),
        (
            "",
            "@_compiled(fullgraph=True)",
            "`_compiled = torch.compile`, the experts' forward decorated with `@_compiled(fullgraph=True)`",
        ),
        (
            "",
            "@torch._dynamo.optimize(\"inductor\")",
            "the experts' forward decorated with `@torch._dynamo.optimize(\"inductor\")`",
        ),
    ] {
        let dir = scratch_copy(&fixture());
        decorate(dir.path(), imports, decorator);
        if decorator.starts_with("@_compiled") {
            edit(
                dir.path(),
                EXPERTS_FORWARD,
                &format!("_compiled = torch.compile\n\n\n{EXPERTS_FORWARD}"),
            );
        }
        report.push_str(&refused_for_compiled(dir.path(), how));
        report.push('\n');
    }
    insta::assert_snapshot!("compiled_under_another_name", report);
}

#[test]
fn compile_by_assignment_is_found() {
    let dir = scratch_copy(&fixture());
    let path = dir.path().join(QWEN);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("\n\nQwen3MoeExperts.forward = torch.compile(Qwen3MoeExperts.forward)\n");
    std::fs::write(&path, text).unwrap();
    let mut report = refused_for_compiled(
        dir.path(),
        "`Qwen3MoeExperts.forward = torch.compile(Qwen3MoeExperts.forward)` at the end",
    );
    // The NVTX set refuses it by name (a decorator on it would be compiled too) and
    // leaves it out of a glob, with a warning; the rest goes in.
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    let out = t.run(
        &["add", "--rules", "nvtx", "Qwen3MoeExperts.forward"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = t.run(&["add", "--rules", "nvtx", "Qwen3Moe*.forward"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // What went in: the helper, and the one range of the glob that is not compiled.
    let check = t.run(&["check", QWEN], dir.path());
    assert_eq!(check.status.code(), Some(1));
    report.push('\n');
    report.push_str(t.text());
    insta::assert_snapshot!("compiled_by_assignment", report);
}

#[test]
fn compiler_disable_is_not_compiled() {
    let dir = scratch_copy(&fixture());
    decorate(dir.path(), "", "@torch.compiler.disable");
    let before = snapshot_tree(dir.path());
    add_ok(dir.path(), &[]);
    // The experts' prints go in as they do without the decorator: the same regions.
    let plain = scratch_copy(&fixture());
    add_ok(plain.path(), &[]);
    assert_eq!(region_rules(dir.path()), region_rules(plain.path()));
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    assert_eq!(snapshot_tree(dir.path()), before);
}

/// The rules of the regions in the model file, in order, as `check --json` lists them.
fn region_rules(root: &Path) -> Vec<String> {
    let out = instrument(&["check", "--json", QWEN], root);
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules: Vec<String> = doc["files"][0]["regions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(rules.len(), 20, "{rules:?}");
    rules
}
