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
    let edited = text.replacen(from, to, 1);
    assert_ne!(edited, text, "{file}: no {from:?}");
    std::fs::write(&path, edited).unwrap();
}

#[test]
fn a_model_written_from_the_outline_gets_every_group_and_comes_out_byte_exact() {
    let dir = scratch_copy(&fixture());
    let before = snapshot_tree(dir.path());
    let out = instrument(&["add", "olmoe", "--ranks", "3,14"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Every group; the layer preview reads the model's example config (its model_type is
    // its name).
    assert_eq!(
        stderr(&out),
        "detail layers chosen at run time: each profiled rank takes the first 2 MoE layers it holds and prints which; a rank holding every layer takes (0, 1): every decoder layer builds the MoE block unconditionally (pithtrain/models/olmoe.py:71), so the first 2 layers (the model has 8, per examples/pretrain_lm/olmoe-tiny/config.json)\n\
         instrument add olmoe: 8 of 8 groups; changed 6 file(s) (+788 -27 lines), ranks {3, 14}\n"
    );
    // Each region of the model file, with the class it is in: the rule ids carry the
    // model, as every model's but qwen3-moe's do, and the experts (5D) and the gate's MoE
    // block are told apart by structure.
    let file = "pithtrain/models/olmoe.py";
    let check = instrument(&["check", file], dir.path());
    assert_eq!(check.status.code(), Some(1));
    let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let placed: Vec<String> = stdout(&check)
        .lines()
        .map(|l| {
            let rest = l.strip_prefix(&format!("{file}:")).expect("this file");
            let (line, rule) = rest
                .split_once(": instrument memory-prints ")
                .expect("a region");
            let at: usize = line.parse().unwrap();
            let class = lines[..at]
                .iter()
                .rev()
                .find_map(|l| l.strip_prefix("class "))
                .map_or("(module)", |c| c.split(['(', ':']).next().unwrap());
            format!("{line:>4} {rule:<26} in {class}")
        })
        .collect();
    insta::assert_snapshot!("outline_model_regions", placed.join("\n"));
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
    let rules = tempfile::tempdir().unwrap();
    let mut t = Transcript::new(
        Redact::default()
            .folder(dir.path(), "<CHECKOUT>")
            .folder(rules.path(), "<RULES>"),
    );
    t.note("OlmoeExperts.forward takes its offsets as `offsets`");
    // The role, why no class fits, the likeliest class and the table line that places it.
    let out = t.run(&["add", "olmoe"], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(snapshot_tree(dir.path()), before, "nothing written");

    // The table line the message gives places it: every group applies again.
    copy_tree(&repo_root().join("rules/memory-prints"), rules.path());
    let manifest = rules.path().join("ruleset.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        format!("{text}\n[models.known.olmoe.roles]\nEXPERTS = \"OlmoeExperts\"\n"),
    )
    .unwrap();
    t.note("[models.known.olmoe.roles] EXPERTS = \"OlmoeExperts\" added to a copy of the set");
    let out = t.run_diff(
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

    // With --partial, the groups that do not need the role apply.
    let out = t.run_diff(&["add", "olmoe", "--partial", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("role_no_class_fits", t.text());
}

#[test]
fn a_model_file_that_is_not_a_model_names_every_role_it_lacks() {
    let dir = scratch_copy(&fixture());
    std::fs::write(
        dir.path().join("pithtrain/models/helpers.py"),
        "def square(x):\n    return x * x\n",
    )
    .unwrap();
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("pithtrain/models/helpers.py: one function, `square`");
    // Each of DECODER_LAYER, EXPERTS and MODEL_CLASS is named as not placed.
    let out = t.run(&["add", "helpers", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("not_a_model", t.text());
}
