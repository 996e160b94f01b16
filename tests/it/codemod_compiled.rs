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
    assert!(text.contains(from), "{QWEN} lacks {from:?}");
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

/// Decorate the experts' `forward` with `decorator`, adding `imports` at the top.
fn decorate(root: &Path, imports: &str, decorator: &str) {
    edit(root, "import torch\n", &format!("import torch\n{imports}"));
    let path = root.join(QWEN);
    let text = std::fs::read_to_string(&path).unwrap();
    let at = text.find(EXPERTS_FORWARD).unwrap();
    let def = at + text[at..].find("    def forward(").unwrap();
    let text = format!("{}    {decorator}\n{}", &text[..def], &text[def..]);
    std::fs::write(path, text).unwrap();
}

fn refused_for_compiled(root: &Path, how: &str) {
    let before = snapshot_tree(root);
    let out = instrument(&["add", "qwen3-moe"], root);
    assert_eq!(out.status.code(), Some(2), "{how}: {}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("rule 5D.") && err.contains("refusing to insert into `forward`"),
        "{how}: {err}"
    );
    assert!(err.contains(how), "{how}: {err}");
    assert_eq!(snapshot_tree(root), before);
}

#[test]
fn compile_under_another_name_is_found() {
    for (imports, decorator, how) in [
        (
            "from torch import compile as _tc\n",
            "@_tc",
            "decorated with `@_tc` (torch.compile)",
        ),
        (
            "",
            "@_compiled(fullgraph=True)",
            "decorated with `@_compiled(fullgraph=True)` (torch.compile)",
        ),
        (
            "",
            "@torch._dynamo.optimize(\"inductor\")",
            "(torch._dynamo.optimize)",
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
        refused_for_compiled(dir.path(), how);
    }
}

#[test]
fn compile_by_assignment_is_found() {
    let dir = scratch_copy(&fixture());
    let path = dir.path().join(QWEN);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("\n\nQwen3MoeExperts.forward = torch.compile(Qwen3MoeExperts.forward)\n");
    std::fs::write(&path, text).unwrap();
    refused_for_compiled(
        dir.path(),
        "compiled by `Qwen3MoeExperts.forward = torch.compile(Qwen3MoeExperts.forward)`",
    );
    // The NVTX set refuses it by name (a decorator on it would be compiled too) and
    // leaves it out of a glob.
    let out = instrument(
        &["add", "--rules", "nvtx", "Qwen3MoeExperts.forward"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`Qwen3MoeExperts.forward` runs inside"),
        "{}",
        stderr(&out)
    );
    let out = instrument(&["add", "--rules", "nvtx", "Qwen3Moe*.forward"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains("\"Qwen3MoeExperts.forward\""));
    assert!(text.contains("\"Qwen3MoeModel.forward\""), "{text}");
}

#[test]
fn compiler_disable_is_not_compiled() {
    let dir = scratch_copy(&fixture());
    decorate(dir.path(), "", "@torch.compiler.disable");
    let before = snapshot_tree(dir.path());
    add_ok(dir.path(), &[]);
    let text = std::fs::read_to_string(dir.path().join(QWEN)).unwrap();
    assert!(text.contains("# >>> instrument memory-prints 5D.return"));
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    assert_eq!(snapshot_tree(dir.path()), before);
}
