//! `add` on real pithtrain trees prints byte for byte what it printed before the rules
//! became one set for every model (issue #19): the digests of every case, recorded then on
//! whole checkouts, are in `codemod_real.digests`. The trees are the cut of pithtrain in
//! `fixtures/pithtrain-real` (unmodified copies of the files `add` reads and writes, at
//! 889a408 and e5bd465; its README says what and under which licence), or whole checkouts
//! given as INSTRUMENT_PITHTRAIN_889A408 and INSTRUMENT_PITHTRAIN_E5BD465.
//! INSTRUMENT_PIN_WRITE=1 writes the digests anew (after a change meant to alter output).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;

const LONG_RANKS: &str =
    "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31";
const LONG_PATH: &str = "/data/a very long path/that/goes/on/and/on/for/quite/a/while/snaps";
/// Every parameter of memory-prints given, the rank set and the path long.
const EVERY_PARAMETER_LONG: [&str; 10] = [
    "--ranks",
    LONG_RANKS,
    "--detail-layers",
    "1,2",
    "--step",
    "5",
    "--snapshot-dir",
    LONG_PATH,
    "--stacks",
    "all",
];

/// Every case: (name, arguments), for each model name users type.
fn cases() -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for m in [
        "qwen3-moe",
        "qwen35-moe",
        "qwen3.5-moe",
        "deepseek-v2",
        "gpt-oss",
    ] {
        let dry = ["--dry-run", "--color", "never"];
        let with = |args: &[&str]| {
            let mut v = s(&["add", m]);
            v.extend(s(args));
            v
        };
        out.push((format!("{m}.default"), with(&dry)));
        out.push((
            format!("{m}.ranks"),
            with(&[&["--ranks", "3,14"][..], &dry].concat()),
        ));
        out.push((
            format!("{m}.all"),
            with(&[&EVERY_PARAMETER_LONG[..], &dry].concat()),
        ));
        out.push((
            format!("{m}.layers0"),
            with(&[&["--detail-layers", "0"][..], &dry].concat()),
        ));
        out.push((
            format!("{m}.partial"),
            with(&[&["--partial", "--ranks", "1"][..], &dry].concat()),
        ));
        out.push((
            format!("{m}.json"),
            with(&["--json", "--dry-run", "--ranks", "2"]),
        ));
        out.push((format!("{m}.explain"), s(&["explain", m])));
    }
    out.push((
        "nvtx".into(),
        s(&[
            "add",
            "--rules",
            "nvtx",
            "*.forward",
            "DualPipeV.step",
            "--dry-run",
            "--color",
            "never",
        ]),
    ));
    out.push((
        "nvtx2".into(),
        s(&[
            "add",
            "--rules",
            "nvtx",
            "layer_forward",
            "--dry-run",
            "--color",
            "never",
        ]),
    ));
    out
}

/// FNV-1a, 64 bits.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    })
}

fn replace(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if !from.is_empty() && bytes[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// The revisions pinned, with the variable that names a checkout of each.
const TREES: [(&str, &str); 2] = [
    ("889a408", "INSTRUMENT_PITHTRAIN_889A408"),
    ("e5bd465", "INSTRUMENT_PITHTRAIN_E5BD465"),
];

/// The tree at `rev` in a new temporary folder (nothing is run in the tree given), and
/// where it came from: the checkout `var` names, else the cut in fixtures/pithtrain-real
/// (its 889a408 files, with those that differ at `rev` laid over them).
fn tree(rev: &str, var: &str) -> (tempfile::TempDir, String) {
    let copy = tempfile::tempdir().unwrap();
    if let Some(dir) = std::env::var_os(var) {
        let src = Path::new(&dir);
        // `cp -a`: a real checkout holds symlinks, which stay symlinks.
        let status = Command::new("cp")
            .arg("-a")
            .arg(src.join("."))
            .arg(copy.path())
            .status()
            .expect("cp runs");
        assert!(status.success(), "cp -a {}", src.display());
        return (copy, format!("the checkout {}", src.display()));
    }
    let cut = repo_root().join("fixtures/pithtrain-real");
    copy_tree(&cut.join("889a408"), copy.path());
    if rev != "889a408" {
        copy_tree(&cut.join(rev), copy.path());
    }
    (
        copy,
        format!("the cut in fixtures/pithtrain-real ({var} not set)"),
    )
}

/// The digest lines of every case on the tree at `root`.
fn digests(tree: &str, root: &Path) -> Vec<String> {
    let root = root.canonicalize().unwrap();
    let root_text = root.to_string_lossy().to_string();
    cases()
        .into_iter()
        .map(|(name, args)| {
            let out = Command::new(env!("CARGO_BIN_EXE_instrument"))
                .args(&args)
                .current_dir(&root)
                .env_remove("NO_COLOR")
                .output()
                .expect("instrument runs");
            let mut data = Vec::new();
            for part in [
                out.stdout.clone(),
                out.stderr.clone(),
                format!("{}\n", out.status.code().unwrap_or(-1)).into_bytes(),
            ] {
                data.extend(replace(&part, root_text.as_bytes(), b"<ROOT>"));
                data.push(0);
            }
            format!("{tree} {name} {:016x} {}", fnv(&data), data.len())
        })
        .collect()
}

#[test]
fn add_on_the_real_trees_prints_what_it_printed_before() {
    let pinned_path = repo_root().join("tests/codemod_real.digests");
    let pinned = std::fs::read_to_string(&pinned_path).unwrap();
    let mut got = Vec::new();
    let mut checked = 0;
    for (rev, var) in TREES {
        let (dir, from) = tree(rev, var);
        let lines = digests(rev, dir.path());
        for l in &lines {
            let key = l.rsplitn(3, ' ').last().unwrap().to_string();
            let want = pinned
                .lines()
                .find(|p| p.starts_with(&format!("{key} ")))
                .unwrap_or_else(|| panic!("no pinned digest for {key}"));
            if std::env::var_os("INSTRUMENT_PIN_WRITE").is_none() {
                assert_eq!(l, want, "{key} on {from}: the output changed");
            }
            checked += 1;
        }
        got.extend(lines);
    }
    if std::env::var_os("INSTRUMENT_PIN_WRITE").is_some() && !got.is_empty() {
        let header: String = pinned
            .lines()
            .take_while(|l| l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&pinned_path, format!("{header}{}\n", got.join("\n"))).unwrap();
    }
    assert_eq!(checked, 2 * cases().len());
}

/// Each model's `add` with every parameter at a long value (and the nvtx ranges on every
/// `forward`) leaves the real tree as pithtrain's ruff wants it, and `remove` gives back
/// every byte.
#[test]
fn add_on_the_real_trees_passes_pithtrains_ruff_and_removes_cleanly() {
    let Some(ruff) = tool("ruff", "INSTRUMENT_REQUIRE_RUFF") else {
        return;
    };
    let mut adds: Vec<Vec<&str>> = ["qwen3-moe", "qwen35-moe", "deepseek-v2", "gpt-oss"]
        .into_iter()
        .map(|m| [&["add", m][..], &EVERY_PARAMETER_LONG[..]].concat())
        .collect();
    adds.push(vec![
        "add",
        "--rules",
        "nvtx",
        "*.forward",
        "DualPipeV.step",
        "layer_forward",
    ]);
    for (rev, var) in TREES {
        let (dir, from) = tree(rev, var);
        let root = dir.path();
        let clean = snapshot_tree(root);
        for args in &adds {
            let out = instrument(args, root);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{args:?} on {from}: {}",
                stderr(&out)
            );
            let added = snapshot_tree(root);
            let changed: Vec<&String> = added
                .iter()
                .filter(|(path, bytes)| clean.get(*path) != Some(*bytes))
                .map(|(path, _)| path)
                .collect();
            assert!(!changed.is_empty(), "{args:?} on {from} changed nothing");
            ruff_clean(&ruff, root, &changed, &format!("{args:?} on {from}"));
            let rules = if args[1] == "--rules" {
                args[2]
            } else {
                "memory-prints"
            };
            let out = instrument(&["remove", "--rules", rules], root);
            assert_eq!(
                out.status.code(),
                Some(0),
                "remove {rules} on {from}: {}",
                stderr(&out)
            );
            assert!(
                snapshot_tree(root) == clean,
                "{args:?} then remove on {from} did not give back every byte"
            );
        }
    }
}

/// The pin covers every case on both trees.
#[test]
fn the_pin_has_every_case() {
    let pinned = std::fs::read_to_string(repo_root().join("tests/codemod_real.digests")).unwrap();
    for tree in ["889a408", "e5bd465"] {
        for (name, _) in cases() {
            assert!(
                pinned
                    .lines()
                    .any(|l| l.starts_with(&format!("{tree} {name} "))),
                "{tree} {name}"
            );
        }
    }
}

/// `ruff check` and `ruff format --check` pass on `files` of the tree at `root`, with
/// pithtrain's settings (the pyproject.toml there). Only the files `add` wrote: a whole
/// checkout holds files pithtrain's ruff does not pass either (its skills' templates).
fn ruff_clean(ruff: &Path, root: &Path, files: &[&String], what: &str) {
    for args in [&["check"][..], &["format", "--check"][..]] {
        let out = Command::new(ruff)
            .args(args)
            .arg("--no-cache")
            .args(files)
            .current_dir(root)
            .output()
            .expect("ruff runs");
        assert!(
            out.status.success(),
            "ruff {args:?} after {what}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
