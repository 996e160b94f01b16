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
        let edited = text.replace(from, to);
        assert_ne!(edited, text, "{file} lacks {from:?}");
        text = edited;
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

#[test]
fn an_older_layout_is_refused_whole_with_a_report() {
    let dir = ctx_layout();
    let before = snapshot_tree(dir.path());
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("the layout before f53f32d: a `ctx` argument, stage functions, one optimizer");
    let out = t.run(&["add", "qwen3-moe", "--ranks", "3,14"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(snapshot_tree(dir.path()), before, "all or nothing");
    // Groups 1, 3, 4, 7 and 8 would apply; 2, 5 and 6 cannot. Each failed anchor names
    // the file, what was expected and the closest candidates; the decoder layer's stage
    // methods have other names, so the role is not placed, and the report says which
    // class came closest and the table line that would place it; code that reads
    // `distributed` or `optimizers` is refused where they are not defined.
    insta::assert_snapshot!("older_layout_refused", t.text());
}

#[test]
fn partial_applies_whole_groups_that_fit_and_round_trips() {
    let dir = ctx_layout();
    let before = snapshot_tree(dir.path());
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("the layout before f53f32d: a `ctx` argument, stage functions, one optimizer");
    let out = t.run(
        &["add", "qwen3-moe", "--ranks", "3,14", "--partial"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Groups 2, 5 and 6 skipped, and why; 5 of 8 applied.
    insta::assert_snapshot!("older_layout_partial", t.text());
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
    let model = "pithtrain/models/qwen3_moe.py";
    assert_eq!(snapshot_tree(dir.path())[model], before[model]);
    assert_eq!(instrument(&["remove"], dir.path()).status.code(), Some(0));
    assert_eq!(snapshot_tree(dir.path()), before);
}

#[test]
fn a_missing_target_file_is_reported_per_group() {
    let dir = old_task_name_layout();
    let mut t = Transcript::new(Redact::default().folder(dir.path(), "<CHECKOUT>"));
    t.note("pithtrain/tasks/pretrain_lm.py named pretrain_language_model.py, as before c49227e");
    let out = t.run(&["add", "qwen3-moe"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    // Groups 6 and 7 cannot apply; the pipeline prints (4) and the schedule marks (8) need
    // 7, which switches them off after the profiled step, and the per-layer prints (5)
    // need 4: three of eight apply.
    let out = t.run(&["add", "qwen3-moe", "--partial"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("missing_target_file", t.text());
}

#[test]
fn detail_layers_are_chosen_at_run_time_unless_given() {
    let dir = scratch_copy(&fixture());
    // Given layers are checked against the model config: --config wins over the examples.
    let cfg = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        cfg.path(),
        r#"{"model_type": "deepseek_v2", "num_hidden_layers": 6, "first_k_dense_replace": 3}"#,
    )
    .unwrap();
    let mut t = Transcript::new(
        Redact::default()
            .folder(dir.path(), "<CHECKOUT>")
            .folder(cfg.path(), "<CONFIG>"),
    );
    // Which layers a rank holds depends on the pipeline layout, so by default each
    // profiled rank chooses its first two MoE layers when it runs (rule 1B.layer-helpers);
    // add says what a rank holding every layer would take, evaluated from the example
    // config (deepseek-v2's first_k_dense_replace=1).
    let default = t.run_diff(&["add", "deepseek-v2", "--dry-run"], dir.path());
    assert_eq!(default.status.code(), Some(0), "{}", stderr(&default));
    let with = |t: &mut Transcript, layers: &str| {
        let args = [
            "add",
            "deepseek-v2",
            "--dry-run",
            "--config",
            cfg.path().to_str().unwrap(),
            "--detail-layers",
            layers,
        ];
        t.run_diff(&args, dir.path())
    };
    let given = with(&mut t, "3,4");
    assert_eq!(given.status.code(), Some(0), "{}", stderr(&given));
    let out = with(&mut t, "6");
    assert_eq!(out.status.code(), Some(2));
    // Without any config the default needs nothing: the run decides.
    std::fs::remove_dir_all(dir.path().join("examples")).unwrap();
    t.note("examples/ deleted");
    let out = t.run_diff(&["add", "deepseek-v2", "--dry-run"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("detail_layers", t.text());
    // The code the run decides in, and the layers given written in its place: the diffs
    // are the same but for the literal and its region's marker.
    assert_eq!(
        line_changes(&stdout(&default), &stdout(&given)),
        [
            (
                "+# >>> instrument memory-prints 1B.layer-helpers [RANKS={0}; DETAIL_LAYERS=None] (take out: instrument remove) h=13f063e0",
                "+# >>> instrument memory-prints 1B.layer-helpers [RANKS={0}; DETAIL_LAYERS=(3, 4)] (take out: instrument remove) h=c1f69134",
            ),
            (
                "+_layer_mem_detail_given = None",
                "+_layer_mem_detail_given = (3, 4)"
            ),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
}

#[test]
fn model_names_users_type() {
    let dir = scratch_copy(&fixture());
    for name in ["qwen35-moe", "gpt-oss", "deepseek-v2"] {
        let own = instrument(&["add", name, "--dry-run"], dir.path());
        assert_eq!(own.status.code(), Some(0), "{name}: {}", stderr(&own));
        let file = format!("pithtrain/models/{}.py", name.replace('-', "_"));
        assert!(
            stdout(&own).lines().any(|l| l == format!("+++ b/{file}")),
            "{name}: {file} is in the diff"
        );
        // Each other name a user types for it is the model's own: the same whole output.
        let typed: &[&str] = match name {
            "qwen35-moe" => &["qwen3.5-moe", "Qwen35-MoE"],
            "gpt-oss" => &["gpt_oss"],
            _ => &["DeepSeek-V2"],
        };
        for typed in typed {
            let out = instrument(&["add", typed, "--dry-run"], dir.path());
            assert_eq!(
                (out.status.code(), stdout(&out), stderr(&out)),
                (Some(0), stdout(&own), stderr(&own)),
                "{typed}"
            );
        }
    }
}
