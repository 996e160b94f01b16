//! What `add --dry-run`, `status` and `check` print, pinned by snapshots a reviewer can
//! read (tests/snapshots/).

use crate::common;

use common::*;

#[test]
fn dry_run_diff_of_the_fixture() {
    let dir = scratch_copy(&fixture());
    let out = instrument(
        &["add", "qwen3-moe", "--ranks", "3,14", "--dry-run"],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("add_qwen3_moe_ranks_3_14.diff", stdout(&out));
    insta::assert_snapshot!("add_qwen3_moe_summary", stderr(&out));
}

/// Every model of the fixture, the one written from pithtrain's add-new-model outline
/// (`olmoe`, which no rule names) included: the whole diff and the report, pinned. With
/// the real trees' digests (`codemod_real`), what pins `add`'s output byte for byte.
#[test]
fn dry_run_diff_of_every_model() {
    for model in ["qwen35-moe", "deepseek-v2", "gpt-oss", "olmoe"] {
        let dir = scratch_copy(&fixture());
        let out = instrument(&["add", model, "--ranks", "3,14", "--dry-run"], dir.path());
        assert_eq!(out.status.code(), Some(0), "{model}: {}", stderr(&out));
        let name = model.replace('-', "_");
        insta::assert_snapshot!(format!("add_{name}_ranks_3_14.diff"), stdout(&out));
        insta::assert_snapshot!(format!("add_{name}_summary"), stderr(&out));
    }
}

#[test]
fn status_lists_groups_files_ranks_and_layers() {
    let dir = scratch_copy(&fixture());
    let clean = instrument(&["status"], dir.path());
    let named = Redact::default().folder(dir.path(), "<CHECKOUT>");
    assert_eq!(
        (
            clean.status.code(),
            named.apply(&stdout(&clean)),
            stderr(&clean)
        ),
        (
            Some(0),
            "no instrumentation in <CHECKOUT>\n".to_string(),
            String::new()
        )
    );
    add_ok(dir.path(), &["--ranks", "3,14", "--detail-layers", "0,1"]);
    let out = instrument(&["status"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("status_text", stdout(&out));

    let out = instrument(&["status", "--json"], dir.path());
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("status --json is JSON");
    assert_eq!(doc["instrumented"], true);
    let files = doc["files"].as_array().unwrap();
    assert_eq!(files.len(), 6);
    let pipeline = files
        .iter()
        .find(|f| f["file"] == "pithtrain/dualpipe/dualpipev.py")
        .unwrap();
    let groups: std::collections::BTreeSet<&str> = pipeline["regions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["1", "4", "8"].into_iter().collect());
    let flag = pipeline["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["rule"] == "4A.profiling-flag")
        .unwrap();
    assert_eq!(flag["params"]["RANKS"], "{3, 14}");
    assert_eq!(flag["edited"], false);
}

#[test]
fn check_lists_every_region_and_exits_1() {
    let dir = scratch_copy(&fixture());
    let clean = instrument(&["check"], dir.path());
    assert_eq!(clean.status.code(), Some(0), "a clean tree passes");
    assert_eq!(stdout(&clean), "");
    add_ok(dir.path(), &[]);
    let out = instrument(&["check"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let lines: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    // One line per region, each `file:line: instrument <set> <rule>` pointing at its marker.
    for l in &lines {
        let (loc, _) = l.split_once(": instrument memory-prints ").expect("format");
        let (file, line) = loc.rsplit_once(':').unwrap();
        let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
        let marker = text
            .lines()
            .nth(line.parse::<usize>().unwrap() - 1)
            .unwrap();
        assert!(
            marker
                .trim_start()
                .starts_with("# >>> instrument memory-prints"),
            "{l}"
        );
    }
    insta::assert_snapshot!("check_after_add", lines.join("\n"));
    assert_eq!(
        stderr(&out),
        format!(
            "instrument check: {} instrumented region(s) in 6 file(s); run `instrument remove` before committing\n",
            lines.len()
        )
    );
}
