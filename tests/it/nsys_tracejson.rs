//! `instrument nsys trace-json`: the functions-trace JSON from a static scan of a package
//! of our own (inheritance, a re-export, nested definitions, a `__main__` module, a loose
//! script) and of the miniature pithtrain, and `--check` of an existing JSON.

use crate::common;

use std::path::Path;

use common::*;

fn tracepkg() -> std::path::PathBuf {
    repo_root().join("fixtures/tracepkg")
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", stdout(out), stderr(out)))
}

/// module -> functions
fn functions(doc: &serde_json::Value) -> std::collections::BTreeMap<String, Vec<String>> {
    doc.as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let fs = g["functions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap().to_string())
                .collect();
            (g["module"].as_str().unwrap().to_string(), fs)
        })
        .collect()
}

#[test]
fn default_selection_is_every_forward_of_an_nn_module() {
    let out = instrument(&["nsys", "trace-json", ".", "--no-base"], &tracepkg());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let got = functions(&json_of(&out));
    let want: std::collections::BTreeMap<String, Vec<String>> = [
        ("mypkg.base", vec!["Base.forward"]),
        ("mypkg.blocks", vec!["Block.forward", "Outer.forward"]),
    ]
    .into_iter()
    .map(|(m, f)| (m.to_string(), f.into_iter().map(str::to_string).collect()))
    .collect();
    assert_eq!(
        got, want,
        "Helper is no nn.Module; Head inherits forward without defining it"
    );
    let err = stderr(&out);
    assert!(
        err.contains(
            "mypkg/__main__.py:5: `CliModel.forward` is in a module nsys cannot import by name"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "mypkg/blocks.py:20: `Inner.forward` is defined inside another function or class"
        ),
        "{err}"
    );
    assert!(err.contains("mypkg/blocks.py:29: `Local.forward`"), "{err}");
    assert!(
        err.contains("scripts/train.py:5: `ScriptModel.forward`")
            && err.contains("not in a package"),
        "{err}"
    );
    for g in json_of(&out).as_array().unwrap() {
        assert_eq!(g["domain"], "mypkg");
    }
}

#[test]
fn matches_add_methods_functions_and_inherited_methods() {
    let out = instrument(
        &[
            "nsys",
            "trace-json",
            "mypkg",
            "--no-base",
            "--no-forwards",
            "--match",
            "Head.forward",
            "--match",
            "*.sample",
            "--match",
            "run",
            "--domain",
            "Mine",
        ],
        &tracepkg(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    let got = functions(&doc);
    assert_eq!(
        got["mypkg.sub.heads"],
        vec!["Head.forward", "run"],
        "Head.forward is inherited through the re-exported Block"
    );
    assert_eq!(got["mypkg.blocks"], vec!["Block.sample"]);
    assert!(
        doc.as_array()
            .unwrap()
            .iter()
            .all(|g| g["domain"] == "Mine")
    );
}

#[test]
fn bad_selections_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("trace.json");
    let cases: [(&[&str], &str); 3] = [
        (
            &["--match", "Head.nope"],
            "--match Head.nope: matches no function or method",
        ),
        (
            &["--match", "Inner.forward"],
            "`Inner.forward` is defined inside another function or class",
        ),
        (
            &["--match", "CliModel.forward"],
            "a `__main__` module is not importable by name",
        ),
    ];
    for (extra, needle) in cases {
        let mut args = vec![
            "nsys",
            "trace-json",
            ".",
            "--no-base",
            "--out",
            out_file.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = instrument(&args, &tracepkg());
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(stderr(&out).contains(needle), "{extra:?}: {}", stderr(&out));
        assert!(!out_file.exists(), "{extra:?} wrote a file");
    }
}

#[test]
fn functions_run_inside_compiled_code_are_left_out() {
    // Named exactly: an error, nothing written.
    let out = instrument(
        &[
            "nsys",
            "trace-json",
            "mypkg",
            "--no-base",
            "--no-forwards",
            "--match",
            "scale",
        ],
        &tracepkg(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "error: mypkg/base.py:17: `scale` runs inside a compiled function (torch.compile or the like): code added around it would break the graph, and its Python frame does not run there; left out\n\
         instrument nsys trace-json: nothing was written; fix the selection above\n"
    );
    assert!(stdout(&out).is_empty());
    // Picked by a glob: a warning, left out of what is written.
    let out = instrument(
        &[
            "nsys",
            "trace-json",
            "mypkg",
            "--no-base",
            "--no-forwards",
            "--match",
            "sca*",
        ],
        &tracepkg(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: mypkg/base.py:17: `scale` runs inside"),
        "{}",
        stderr(&out)
    );
    assert!(!stdout(&out).contains("\"scale\""));
}

/// On the miniature pithtrain, the forwards `torch.compile` bodies call (gates, MLPs) are left
/// out of the default selection silently: it chose them itself. The last line says how many.
#[test]
fn default_forwards_inside_compiled_code_are_left_out_quietly() {
    let out = instrument(
        &["nsys", "trace-json", ".", "--no-base"],
        &repo_root().join("fixtures/pithtrain"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        !err.contains("torch.compile:") && !err.contains("runs inside"),
        "{err}"
    );
    let last = err.lines().last().unwrap();
    assert!(
        last.contains("forward(s) that run inside torch.compile left out"),
        "{last}"
    );
    let got = functions(&json_of(&out));
    let all: Vec<&String> = got.values().flatten().collect();
    assert!(!all.iter().any(|f| *f == "Qwen3MoeGate.forward"), "{all:?}");
    assert!(
        all.iter()
            .any(|f| *f == "Qwen3MoeDecoderLayer.forward" || f.ends_with(".forward")),
        "{all:?}"
    );
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_shipped_pytorch_json_is_merged_first() {
    let base =
        r#"[{"domain": "PyTorch", "module": "torch.nn.functional", "functions": ["linear"]}]"#;
    let dir = tempfile::tempdir().unwrap();
    // A fake nsys install: the binary and its PythonFunctionsTrace folder.
    let bin = dir.path().join("nsys-2025/bin");
    write(&bin.join("nsys"), "#!/bin/sh\nexit 0\n");
    write(&bin.join("PythonFunctionsTrace/pytorch.json"), base);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_instrument"))
        .args(["nsys", "trace-json", "mypkg"])
        .current_dir(tracepkg())
        .env("PATH", path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let doc = json_of(&out);
    assert_eq!(doc[0]["module"], "torch.nn.functional");
    assert!(stderr(&out).contains("merged after"), "{}", stderr(&out));
    // --base names one explicitly; --no-base leaves it out.
    let file = dir.path().join("base.json");
    write(&file, base);
    let out = instrument(
        &[
            "nsys",
            "trace-json",
            "mypkg",
            "--base",
            file.to_str().unwrap(),
        ],
        &tracepkg(),
    );
    assert_eq!(json_of(&out)[0]["module"], "torch.nn.functional");
}

#[test]
fn check_reports_the_slips_of_an_existing_json() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("trace.json");
    write(
        &bad,
        r#"[
  {"domain": "mypkg", "module": "mypkg.blocks", "functions": ["Block", "Block.forward", "Block.forward", "Block.nope", "make_local", "gone"]},
  {"domain": "mypkg", "module": "mypkg.sub.heads", "functions": ["Head.forward"]},
  {"domain": "PyTorch", "module": "torch.nn", "functions": ["Linear", "Linear.forward"]}
]"#,
    );
    let out = instrument(
        &["nsys", "trace-json", ".", "--check", bad.to_str().unwrap()],
        &tracepkg(),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("mypkg/blocks.py:6: `Block` is a class without `.method`"),
        "{err}"
    );
    assert!(
        err.contains("`Block.forward` is listed twice for mypkg.blocks"),
        "{err}"
    );
    assert!(err.contains("`Block` has no method `nope`"), "{err}");
    assert!(
        err.contains("no top-level function `gone` in mypkg.blocks"),
        "{err}"
    );
    assert!(
        err.contains("`Linear` looks like a class without `.method`"),
        "{err}"
    );
    assert!(
        !err.contains("Head.forward"),
        "an inherited method counts as existing: {err}"
    );
    assert!(err.contains("4 error(s), 1 warning(s)"), "{err}");

    let good = dir.path().join("good.json");
    let out = instrument(
        &[
            "nsys",
            "trace-json",
            ".",
            "--no-base",
            "--out",
            good.to_str().unwrap(),
        ],
        &tracepkg(),
    );
    assert_eq!(out.status.code(), Some(0));
    let out = instrument(
        &["nsys", "trace-json", ".", "--check", good.to_str().unwrap()],
        &tracepkg(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn the_miniature_pithtrain() {
    let out = instrument(
        &[
            "nsys",
            "trace-json",
            "pithtrain",
            "--no-base",
            "--match",
            "DualPipeV.step",
            "--match",
            "layer_forward",
        ],
        &fixture(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let got = functions(&json_of(&out));
    assert_eq!(got["pithtrain.dualpipe.dualpipev"], vec!["DualPipeV.step"]);
    assert_eq!(got["pithtrain.dualpipe.execution"], vec!["layer_forward"]);
    assert!(got["pithtrain.models.qwen3_moe"].contains(&"Qwen3MoeExperts.forward".to_string()));
}
