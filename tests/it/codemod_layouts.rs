//! Trees the rules were not written for: two older pithtrain layouts (made from the
//! fixture by the changes pithtrain's history made), all-or-nothing refusal with its
//! report, `--partial`, and how the detail layers are chosen.

use crate::common;

use std::path::Path;

use common::*;

fn edit(root: &Path, file: &str, pairs: &[(&str, &str)]) {
    let path = root.join(file);
    let mut text = std::fs::read_to_string(&path).unwrap();
    for (from, to) in pairs {
        assert!(text.contains(from), "{file} lacks {from:?}");
        text = text.replace(from, to);
    }
    std::fs::write(path, text).unwrap();
}

/// The layout before commits f53f32d and 889a408's context modules: runtime state passed
/// as a `ctx` argument instead of the module-level `distributed`/`training` contexts,
/// stage functions instead of `layer_forward`, `forward_attn`/`forward_mlp` instead of
/// the model's `forward_stage1`/`forward_stage3`, and one `optimizer`.
fn ctx_layout() -> tempfile::TempDir {
    let dir = scratch_copy(&fixture());
    let r = dir.path();
    edit(
        r,
        "pithtrain/modules/distributed.py",
        &[
            ("from pithtrain.contexts import distributed\n", ""),
            (
                "def setup_default_process_group(cfg: DistributedCfg) -> None:",
                "def setup_default_process_group(cfg: DistributedCfg, ctx: object) -> None:",
            ),
            (
                "def setup_device_mesh(cfg: DistributedCfg) -> None:",
                "def setup_device_mesh(cfg: DistributedCfg, ctx: object) -> None:",
            ),
            (
                "    setup_default_process_group(cfg.distributed)\n    setup_device_mesh(cfg.distributed)",
                "    setup_default_process_group(cfg.distributed, cfg)\n    setup_device_mesh(cfg.distributed, cfg)",
            ),
        ],
    );
    let text = std::fs::read_to_string(r.join("pithtrain/modules/distributed.py"))
        .unwrap()
        .replace("torch.distributed.", "TORCH_DISTRIBUTED")
        .replace("distributed.", "ctx.")
        .replace("TORCH_DISTRIBUTED", "torch.distributed.");
    std::fs::write(r.join("pithtrain/modules/distributed.py"), text).unwrap();
    edit(
        r,
        "pithtrain/dualpipe/execution.py",
        &[
            ("def layer_forward(", "def stage_forward("),
            (
                "hidden_states = layer_forward(",
                "hidden_states = stage_forward(",
            ),
        ],
    );
    edit(
        r,
        "pithtrain/models/qwen3_moe.py",
        &[
            ("def forward_stage1(\n", "def forward_attn(\n"),
            ("def forward_stage3(\n", "def forward_mlp(\n"),
        ],
    );
    edit(
        r,
        "pithtrain/tasks/pretrain_lm.py",
        &[
            (
                "optimizers, schedulers = training.optimizers, training.schedulers",
                "optimizer = training.optimizers[0]",
            ),
            (
                "dcp.load({\"app\": (model, optimizers, schedulers)}",
                "dcp.load({\"app\": (model, optimizer)}",
            ),
        ],
    );
    dir
}

/// The layout before commit c49227e: the task module was `pretrain_language_model.py`.
fn old_task_name_layout() -> tempfile::TempDir {
    let dir = scratch_copy(&fixture());
    let tasks = dir.path().join("pithtrain/tasks");
    std::fs::rename(
        tasks.join("pretrain_lm.py"),
        tasks.join("pretrain_language_model.py"),
    )
    .unwrap();
    dir
}

fn group_line<'a>(report: &'a str, group: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.starts_with(&format!("group {group:<3} ")))
        .unwrap_or_else(|| panic!("no group {group} in:\n{report}"))
}

#[test]
fn an_older_layout_is_refused_whole_with_a_report() {
    let dir = ctx_layout();
    let before = snapshot_tree(dir.path());
    let out = instrument(&["add", "qwen3-moe", "--ranks", "3,14"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(snapshot_tree(dir.path()), before, "all or nothing");
    let report = stderr(&out);
    for g in ["1", "3", "4", "7", "8"] {
        assert!(group_line(&report, g).contains("would apply"), "{report}");
    }
    for g in ["2", "5", "6"] {
        assert!(group_line(&report, g).contains("cannot apply"), "{report}");
    }
    // Each failed anchor names the file, what was expected and the closest candidates.
    assert!(report.contains("pithtrain/dualpipe/execution.py: rule 5A.flags: scope `def layer_forward` not found; closest: line"), "{report}");
    assert!(report.contains("`def stage_forward`"), "{report}");
    // The decoder layer's stage methods have other names: the role is not placed, and
    // the report says which class came closest and the table line that would place it.
    assert!(
        report.contains("rule 5B.flags: cannot place role DECODER_LAYER"),
        "{report}"
    );
    assert!(
        report.contains("the closest, `Qwen3MoeDecoderLayer` (line 59), defines no `forward_stage1`, `forward_stage3`"),
        "{report}"
    );
    assert!(
        report.contains("[models.known.qwen3_moe.roles] DECODER_LAYER = \"Qwen3MoeDecoderLayer\""),
        "{report}"
    );
    assert!(
        report.contains("rule 2A.probe-after: the inserted code reads `distributed`"),
        "{report}"
    );
    assert!(
        report.contains("rule 6.load-ckpt: the inserted code reads `optimizers`"),
        "{report}"
    );
    assert!(report.contains("nothing was changed"), "{report}");
}

#[test]
fn partial_applies_whole_groups_that_fit_and_round_trips() {
    let dir = ctx_layout();
    let before = snapshot_tree(dir.path());
    let out = instrument(
        &["add", "qwen3-moe", "--ranks", "3,14", "--partial"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("skipped group 2 (--partial)")
            && err.contains("skipped group 5")
            && err.contains("skipped group 6"),
        "{err}"
    );
    assert!(err.contains("5 of 8 groups"), "{err}");
    let status = instrument(&["status", "--json"], dir.path());
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let groups: std::collections::BTreeSet<String> = doc["files"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| {
            f["regions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["group"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(
        groups,
        ["1", "3", "4", "7", "8"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    // No group is half-applied: none of group 5's 20-odd regions went in.
    assert!(
        !std::fs::read_to_string(dir.path().join("pithtrain/models/qwen3_moe.py"))
            .unwrap()
            .contains("# >>> instrument")
    );
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    assert_eq!(snapshot_tree(dir.path()), before);
}

#[test]
fn a_missing_target_file_is_reported_per_group() {
    let dir = old_task_name_layout();
    let out = instrument(&["add", "qwen3-moe"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let report = stderr(&out);
    assert!(
        group_line(&report, "6").contains("cannot apply"),
        "{report}"
    );
    assert!(report.contains("pithtrain/tasks/pretrain_lm.py: rule 6.load-ckpt: the target file does not exist in this checkout"), "{report}");
    // Groups 6 and 7 cannot apply; the pipeline prints (4) and the schedule marks (8) need 7,
    // which switches them off after the profiled step, and the per-layer prints (5) need 4:
    // three of eight apply.
    assert!(
        group_line(&report, "4").contains("cannot apply (needs group 7)"),
        "{report}"
    );
    let out = instrument(&["add", "qwen3-moe", "--partial"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("3 of 8 groups"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("skipped group 8 (--partial): it requires group 7"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out)
            .contains("skipped group 5 (--partial): it requires group 4, which does not apply"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn detail_layers_are_chosen_at_run_time_unless_given() {
    let dir = scratch_copy(&fixture());
    // Which layers a rank holds depends on the pipeline layout, so by default each
    // profiled rank chooses its first two MoE layers when it runs (rule 1B.layer-helpers).
    let out = instrument(&["add", "deepseek-v2", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("detail layers chosen at run time: each profiled rank takes the first 2 MoE layers it holds"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("+_layer_mem_detail_given = None"));
    // What a rank holding every layer would take, evaluated from the example config.
    assert!(
        stderr(&out).contains("a rank holding every layer takes (1, 2)")
            && stderr(&out).contains("first_k_dense_replace=1"),
        "{}",
        stderr(&out)
    );

    // Given layers are checked against the model config: --config wins over the examples.
    let cfg = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        cfg.path(),
        r#"{"model_type": "deepseek_v2", "num_hidden_layers": 6, "first_k_dense_replace": 3}"#,
    )
    .unwrap();
    let with = |layers: &str| {
        let args = [
            "add",
            "deepseek-v2",
            "--dry-run",
            "--config",
            cfg.path().to_str().unwrap(),
            "--detail-layers",
            layers,
        ];
        instrument(&args, dir.path())
    };
    let out = with("3,4");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("+_layer_mem_detail_given = (3, 4)"));
    let out = with("6");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--detail-layers 6: the model has 6 layers"),
        "{}",
        stderr(&out)
    );

    // Without any config the default needs nothing: the run decides.
    std::fs::remove_dir_all(dir.path().join("examples")).unwrap();
    let out = instrument(&["add", "deepseek-v2", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn model_names_users_type() {
    let dir = scratch_copy(&fixture());
    for (typed, file) in [
        ("qwen3.5-moe", "qwen35_moe"),
        ("qwen35-moe", "qwen35_moe"),
        ("gpt_oss", "gpt_oss"),
        ("DeepSeek-V2", "deepseek_v2"),
    ] {
        let out = instrument(&["add", typed, "--dry-run"], dir.path());
        assert_eq!(out.status.code(), Some(0), "{typed}: {}", stderr(&out));
        assert!(
            stdout(&out).contains(&format!("+++ b/pithtrain/models/{file}.py")),
            "{typed}"
        );
    }
}
