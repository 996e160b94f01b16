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
    assert!(text.contains(from), "{file} lacks {from:?}");
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
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
    let out = instrument(&["add", "qwen3-moe", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("a rank holding every layer takes (1, 5): first 2 MoE layers by"),
        "{err}"
    );
    assert!(
        err.contains("decoder_sparse_step=2") && err.contains("mlp_only_layers=[3]"),
        "{err}"
    );
    // The code itself decides at run time.
    assert!(
        stdout(&out).contains("_layer_mem_detail_given = None"),
        "{}",
        stdout(&out)
    );
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
    let out = instrument(&["add", "qwen3-moe"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(snapshot_tree(dir.path()), before);
    let err = stderr(&out);
    assert!(err.contains("group 5   cannot apply"), "{err}");
    assert!(err.contains("`def decoder_layer_forward`"), "{err}");
    assert!(err.contains("group 4   would apply"), "{err}");
    // The preview that cannot be worked out is no error.
    assert!(!err.contains("error: detail layers"), "{err}");
    // --partial skips group 5 and puts the rest in; the missing preview is said.
    let out = instrument(&["add", "qwen3-moe", "--partial"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("7 of 8 groups"), "{err}");
    assert!(
        err.contains("no preview here") && err.contains("decoder_sparse_step"),
        "{err}"
    );
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
    let out = instrument(
        &[
            "add",
            "qwen3-moe",
            "--dry-run",
            "--config",
            cfg.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("among the first 10000 of 4000000000 layers"),
        "{}",
        stderr(&out)
    );
    std::fs::write(
        &cfg,
        r#"{"model_type": "qwen3_moe", "num_hidden_layers": 4000000000, "decoder_sparse_step": 1}"#,
    )
    .unwrap();
    let out = instrument(
        &[
            "add",
            "qwen3-moe",
            "--dry-run",
            "--config",
            cfg.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("a rank holding every layer takes (0, 1)"),
        "{}",
        stderr(&out)
    );
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
    let out = instrument(&["add", "qwen3-moe", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot find the MoE-vs-dense decision"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("unconditionally"));
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
    let out = instrument(
        &["add", "gpt-oss", "--dry-run", "--detail-layers", "10"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("gpt-oss-tiny/config.json has fewer layers")
            && stderr(&out).contains("--config"),
        "{}",
        stderr(&out)
    );
    let out = instrument(
        &["add", "gpt-oss", "--dry-run", "--detail-layers", "20"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("--detail-layers 20: the model has 12 layers")
            && err.contains("gpt-oss-big/config.json (12 layers)")
            && err.contains("gpt-oss-tiny/config.json (8 layers)")
            && err.contains("--config FILE"),
        "{err}"
    );
}
