//! The detail layers' static preview (the inserted code chooses per rank at run time; `add`
//! says what a rank holding every layer would take) on decoders written other ways: locals
//! and `getattr` defaults before the decision, configs that claim absurd layer counts,
//! several example configs for one model, and a preview that cannot be worked out, which
//! must neither hide the drift report nor refuse the run.

use crate::common;

use std::path::Path;

use common::*;

fn edit(root: &Path, file: &str, from: &str, to: &str) {
    let path = root.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replacen(from, to, 1);
    assert_ne!(edited, text, "{file} lacks {from:?}");
    std::fs::write(path, edited).unwrap();
}

const QWEN: &str = "pithtrain/models/qwen3_moe.py";
const QWEN_CONFIG: &str = "examples/pretrain_lm/qwen3-tiny/config.json";

/// The decoder of a revision whose MoE condition reads locals.
fn with_locals(root: &Path) {
    edit(
        root,
        QWEN,
        "        self.mlp = Qwen3MoeMoE(config)\n",
        "        decoder_sparse_step = config.decoder_sparse_step\n        mlp_only_layers = getattr(config, \"mlp_only_layers\", []) or []\n        use_moe = (layer_id + 1) % decoder_sparse_step == 0 and layer_id not in mlp_only_layers\n        self.mlp = Qwen3MoeMoE(config) if use_moe else nn.Linear(1.0)\n",
    );
}

#[test]
fn a_condition_that_reads_locals_is_evaluated() {
    let dir = scratch_copy(&fixture());
    with_locals(dir.path());
    edit(
        dir.path(),
        QWEN_CONFIG,
        "\"num_hidden_layers\": 8,",
        "\"num_hidden_layers\": 8,\n  \"decoder_sparse_step\": 2,\n  \"mlp_only_layers\": [3],",
    );
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note(
        "the MoE condition reads locals; the config has decoder_sparse_step=2, mlp_only_layers=[3]",
    );
    let out = t.run_diff(&["add", "qwen3-moe", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A rank holding every layer takes (1, 5), by the values the condition read.
    insta::assert_snapshot!("condition_reads_locals", t.text());
    // The code itself decides at run time.
    let given: Vec<String> = stdout(&out)
        .lines()
        .filter(|l| l.starts_with("+_layer_mem_detail_given ="))
        .map(str::to_string)
        .collect();
    assert_eq!(given, ["+_layer_mem_detail_given = None"]);
}

#[test]
fn a_layer_problem_comes_after_the_whole_drift_report() {
    let dir = scratch_copy(&fixture());
    with_locals(dir.path());
    // The config lacks decoder_sparse_step, and layer_forward moved: both are reported.
    edit(
        dir.path(),
        "pithtrain/dualpipe/execution.py",
        "def layer_forward(",
        "def decoder_layer_forward(",
    );
    edit(
        dir.path(),
        "pithtrain/dualpipe/execution.py",
        "hidden_states = layer_forward(",
        "hidden_states = decoder_layer_forward(",
    );
    let before = snapshot_tree(dir.path());
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("the MoE condition reads decoder_sparse_step, which the config lacks; layer_forward renamed decoder_layer_forward");
    // Group 5 cannot apply (the closest scope is `def decoder_layer_forward`), group 4
    // would; the preview that cannot be worked out is no error.
    let out = t.run(&["add", "qwen3-moe"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(snapshot_tree(dir.path()), before);
    // --partial skips group 5 and puts the rest in; the missing preview is said.
    let out = t.run(&["add", "qwen3-moe", "--partial"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("layer_problem_after_drift", t.text());
}

#[test]
fn an_absurd_layer_count_is_bounded_work() {
    let dir = scratch_copy(&fixture());
    with_locals(dir.path());
    let cfg = dir.path().join("huge.json");
    std::fs::write(
        &cfg,
        r#"{"model_type": "qwen3_moe", "num_hidden_layers": 4000000000, "decoder_sparse_step": 1000000000000}"#,
    )
    .unwrap();
    let args = [
        "add",
        "qwen3-moe",
        "--dry-run",
        "--config",
        cfg.to_str().unwrap(),
    ];
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("4000000000 layers, every 1000000000000th of them MoE");
    // It looks among the first 10000 layers only, and says so.
    let out = t.run_diff(&args, dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    std::fs::write(
        &cfg,
        r#"{"model_type": "qwen3_moe", "num_hidden_layers": 4000000000, "decoder_sparse_step": 1}"#,
    )
    .unwrap();
    t.note("4000000000 layers, every one MoE");
    let out = t.run_diff(&args, dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("absurd_layer_count", t.text());
}

#[test]
fn a_guarded_moe_block_is_not_taken_for_every_layer() {
    let dir = scratch_copy(&fixture());
    edit(
        dir.path(),
        QWEN,
        "        self.mlp = Qwen3MoeMoE(config)\n",
        "        if config.num_experts > 2:\n            self.mlp = Qwen3MoeMoE(config)\n        else:\n            self.mlp = nn.Linear(1.0)\n",
    );
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("the MoE block built only if config.num_experts > 2");
    // No preview: the decision is not found, and no layer is said to be MoE
    // unconditionally.
    let out = t.run_diff(&["add", "qwen3-moe", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("guarded_moe_block", t.text());
}

#[test]
fn several_example_configs_are_named_and_config_is_suggested() {
    let dir = scratch_copy(&fixture());
    let ex = dir.path().join("examples/pretrain_lm");
    std::fs::create_dir(ex.join("gpt-oss-big")).unwrap();
    let tiny = std::fs::read_to_string(ex.join("gpt-oss-tiny/config.json")).unwrap();
    std::fs::write(
        ex.join("gpt-oss-big/config.json"),
        tiny.replace("\"num_hidden_layers\": 8", "\"num_hidden_layers\": 12"),
    )
    .unwrap();
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("a second example config for gpt-oss, gpt-oss-big, with 12 layers");
    // Layer 10 is in the bigger config only: taken, with a word that the other config has
    // fewer layers and that --config says which one is trained.
    let out = t.run_diff(
        &["add", "gpt-oss", "--dry-run", "--detail-layers", "10"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Layer 20 is in neither: refused, naming both configs and their layers.
    let out = t.run(
        &["add", "gpt-oss", "--dry-run", "--detail-layers", "20"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("several_example_configs", t.text());
}
