//! `add MODEL` for any file under pithtrain/models/: a model no rule names, written from
//! pithtrain's add-new-model outline (the fixture's `olmoe`), gets every group; a model
//! that departs from every known shape is told which role could not be placed, why, and
//! the lines of table that place it.

use crate::common;

use std::path::Path;

use common::*;

fn edit(root: &Path, file: &str, from: &str, to: &str) {
    let path = root.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file}: no {from:?}");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn a_model_written_from_the_outline_gets_every_group_and_comes_out_byte_exact() {
    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    let out = instrument(&["add", "olmoe", "--ranks", "3,14"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("instrument add olmoe: 8 of 8 groups"), "{err}");
    // The layer preview reads the model's example config (its model_type is its name).
    assert!(
        err.contains("a rank holding every layer takes (0, 1): every decoder layer builds the MoE block unconditionally (pithtrain/models/olmoe.py:")
            && err.contains("(the model has 8, per examples/pretrain_lm/olmoe-tiny/config.json)"),
        "{err}"
    );
    let text = std::fs::read_to_string(dir.path().join("pithtrain/models/olmoe.py")).unwrap();
    // Its rule ids carry the model, as every model's but qwen3-moe's do.
    for id in [
        "5B.olmoe.flags",
        "5C.olmoe.experts-call",
        "5D.olmoe.param",
        "5D.olmoe.return",
        "5E.olmoe.epilog-return",
    ] {
        assert!(
            text.contains(&format!("# >>> instrument memory-prints {id} ")),
            "{id}"
        );
    }
    // The experts and the gate's MoE block are told apart by structure.
    assert!(text.contains("experts: after silu_mul"));
    let out = instrument(&["remove"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(snapshot_tree(dir.path()), before, "byte for byte");
}

#[test]
fn a_role_no_class_fits_is_named_with_why_and_the_table_line() {
    let dir = scratch_copy(&fixture());
    // The experts' forward takes its offsets under another name.
    edit(
        dir.path(),
        "pithtrain/models/olmoe.py",
        "        grouped_mm_offs: torch.Tensor,\n        ks: list | None = None,",
        "        offsets: torch.Tensor,\n        ks: list | None = None,",
    );
    edit(
        dir.path(),
        "pithtrain/models/olmoe.py",
        "gi = precompute_group_indices(grouped_mm_offs, x.shape[0])\n        kwargs = dict(grouped_mm_offs=grouped_mm_offs,",
        "gi = precompute_group_indices(offsets, x.shape[0])\n        kwargs = dict(grouped_mm_offs=offsets,",
    );
    let before = snapshot_tree(dir.path());
    let out = instrument(&["add", "olmoe"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("pithtrain/models/olmoe.py:26: rule 5D.olmoe.param: cannot place role EXPERTS (the routed experts, run as grouped GEMMs): no class of pithtrain/models/olmoe.py has a `forward` that takes `grouped_mm_offs`; the likeliest by its name, `OlmoeExperts` (line 26), its `forward` takes no `grouped_mm_offs`; to place it, add to the rule set's ruleset.toml: [models.known.olmoe.roles] EXPERTS = \"OlmoeExperts\""),
        "{err}"
    );
    assert!(err.contains("group 5   cannot apply"), "{err}");
    assert!(
        err.contains("Next: name the class of each role above in the rule set's model table"),
        "{err}"
    );
    assert_eq!(snapshot_tree(dir.path()), before, "nothing written");

    // The table line the message gives places it: every group applies again.
    let rules = tempfile::tempdir().unwrap();
    copy_tree(&repo_root().join("rules/memory-prints"), rules.path());
    let manifest = rules.path().join("ruleset.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        format!("{text}\n[models.known.olmoe.roles]\nEXPERTS = \"OlmoeExperts\"\n"),
    )
    .unwrap();
    let out = instrument(
        &[
            "add",
            "olmoe",
            "--rules",
            rules.path().to_str().unwrap(),
            "--dry-run",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("8 of 8 groups"), "{}", stderr(&out));

    // With --partial, the groups that do not need the role apply.
    let out = instrument(&["add", "olmoe", "--partial", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("7 of 8 groups"), "{}", stderr(&out));
}

#[test]
fn a_model_file_that_is_not_a_model_names_every_role_it_lacks() {
    let dir = scratch_copy(&fixture());
    std::fs::write(
        dir.path().join("pithtrain/models/helpers.py"),
        "def square(x):\n    return x * x\n",
    )
    .unwrap();
    let out = instrument(&["add", "helpers", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    for role in ["DECODER_LAYER", "EXPERTS", "MODEL_CLASS"] {
        assert!(
            err.contains(&format!("cannot place role {role}")),
            "{role}: {err}"
        );
    }
}
