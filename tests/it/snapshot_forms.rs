//! Every scenario of tools/gen_snapshots.py in every form a user can have it in
//! (torch 1.13 to 2.9 schemas, stacks "python" and "all", pickle protocols 2, 4
//! and 5, torch::jit::Pickler's protocol 2, JSON, both names of the delayed-free
//! state, and legal pickles no standard writer makes: protocol 4 without FRAME,
//! skipped memo indices, MEMOIZE after BINPUT) reads to the facts the scenario
//! planted: totals, sites and their categories, live bytes per category, trace
//! counts; and a split read of each form of the long trace is what one pass reads.

use crate::snapshot_common;

use std::path::Path;

use serde_json::Value;
use snapshot_common::*;

/// The stacks setting a form was recorded with (see tools/snapgen/forms.py).
fn stacks_of(form: &str) -> &'static str {
    match form {
        "python" | "python-p2" | "python-p5" | "v2.1" | "v1.13" => "python",
        _ => "all",
    }
}

type Row = (String, i64, String, u64, u64, String, String);

fn site_rows(sites: &Value) -> Vec<Row> {
    let mut v: Vec<_> = sites
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            // Planted rows name the site under "site" (null: no stack); reports inline it.
            let site = s.get("site").unwrap_or(s);
            let (file, line, function) = match site {
                Value::Null => ("<no stack recorded>", 0, ""),
                x => (
                    x["file"].as_str().unwrap(),
                    x["line"].as_i64().unwrap(),
                    x["function"].as_str().unwrap(),
                ),
            };
            // The library frame below the site, as `file:line:function`.
            let library = match &s["library"] {
                Value::Null => String::new(),
                l => format!(
                    "{}:{}:{}",
                    l["file"].as_str().unwrap(),
                    l["line"],
                    l["function"].as_str().unwrap()
                ),
            };
            (
                file.to_string(),
                line,
                function.to_string(),
                s["bytes"].as_u64().unwrap(),
                s["blocks"].as_u64().unwrap(),
                s["category"].as_str().unwrap().to_string(),
                library,
            )
        })
        .collect();
    v.sort();
    v
}

/// Compare one device's report with the facts planted for it.
fn check(r: &Value, want: &Value, form: &str, what: &str) {
    let stacks = stacks_of(form);
    for (k, v) in want["totals"].as_object().unwrap() {
        assert_eq!(&r["totals"][k], v, "{what}: totals.{k}");
    }
    assert_eq!(
        site_rows(&r["sites"]),
        site_rows(&want[format!("sites_{stacks}")]),
        "{what}: sites"
    );
    for (c, b) in want[format!("categories_{stacks}")].as_object().unwrap() {
        assert_eq!(&r["categories"][c], b, "{what}: category {c}");
    }
    let total: u64 = want["trace_events"].as_u64().unwrap();
    assert_eq!(
        r["trace"]["kept_events"].as_u64().unwrap() + r["trace"]["dropped"].as_u64().unwrap(),
        total,
        "{what}: trace events"
    );
    if total > 0 {
        for (action, n) in want["trace_counts"].as_object().unwrap() {
            let name = if action == "annotate" {
                "other"
            } else {
                action
            };
            assert_eq!(&r["trace"]["counts"][name], n, "{what}: count of {action}");
        }
    }
}

fn report(path: &Path) -> Value {
    let opts = instrument::snapshot::Options::default();
    let (rep, _) = instrument::snapshot::analyse_file(path, &opts, false, usize::MAX)
        .unwrap_or_else(|e| panic!("{e}"));
    serde_json::to_value(&rep).unwrap()
}

#[test]
fn every_scenario_in_every_form_gives_the_planted_truth() {
    let Some(dir) = generate(&["--all-forms"]) else {
        return;
    };
    let mut checked = 0;
    let mut per_form: std::collections::BTreeMap<String, usize> = Default::default();
    for scenario in std::fs::read_dir(dir.path()).unwrap() {
        let scenario = scenario.unwrap().path();
        let forms = scenario.join("forms");
        let Ok(planted) = std::fs::read_to_string(scenario.join("planted.json")) else {
            continue;
        };
        let planted: Value = serde_json::from_str(&planted).unwrap();
        if !forms.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&forms).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_str().unwrap().to_string();
            // snapshot_step_005.p4.pickle -> (snapshot_step_005, p4)
            let stem = name.rsplit_once('.').unwrap().0;
            let (snap, form) = stem.split_once('.').unwrap();
            let want = if let Some(ranks) = planted.get("ranks") {
                &ranks[format!("{snap}.pickle")]
            } else if planted.get("before").is_some() {
                &planted[if snap.ends_with("005") {
                    "before"
                } else {
                    "after"
                }]
            } else {
                &planted
            };
            if want.get("totals").is_none() {
                continue;
            }
            let r = report(&f);
            let what = format!("{}/{name}", scenario.file_name().unwrap().to_string_lossy());
            assert_eq!(r["device"], want["device"], "{what}: device");
            check(&r, want, form, &what);
            checked += 1;
            *per_form.entry(form.to_string()).or_default() += 1;
        }
    }
    // Every form of tools/snapgen/forms.py FORMS, for every snapshot the scenarios take.
    let forms = [
        "awaiting",
        "cpp",
        "json",
        "mixed",
        "noframe",
        "p2",
        "p4",
        "p5",
        "python",
        "python-p2",
        "python-p5",
        "sparse",
        "v1.13",
        "v2.0",
        "v2.1",
        "v2.5",
    ];
    assert_eq!(
        per_form.keys().map(String::as_str).collect::<Vec<_>>(),
        forms,
        "forms read"
    );
    let per_snapshot = per_form["p4"];
    // Expandable segments came with torch 2.1: that snapshot has no 1.13 or 2.0 form.
    assert!(
        per_form.iter().all(|(f, &n)| n == per_snapshot
            || (matches!(f.as_str(), "v1.13" | "v2.0") && n == per_snapshot - 1)),
        "every snapshot in every form: {per_form:?}"
    );
    assert!(checked >= 16 * 14, "only {checked} files checked");
    split_read_of_every_form_matches_one_pass(dir.path());
    fuzz_seeds_are_what_the_generator_writes(dir.path());
}

/// The fuzzer's seeds (fuzz/seeds/snapshot_reader/SCENARIO.FILE) are forms the
/// generator writes, byte for byte: torch's sharing, not a hand-made approximation.
fn fuzz_seeds_are_what_the_generator_writes(dir: &Path) {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/snapshot_reader");
    let mut n = 0;
    for f in std::fs::read_dir(&seeds).unwrap() {
        let f = f.unwrap().path();
        let name = f.file_name().unwrap().to_str().unwrap().to_string();
        let (scenario, file) = name.split_once('.').unwrap();
        let generated = dir.join(scenario).join("forms").join(file);
        assert!(
            std::fs::read(&f).unwrap() == std::fs::read(&generated).unwrap(),
            "{name} differs from {} (regenerate the seed)",
            generated.display()
        );
        n += 1;
    }
    assert!(n >= 8, "{n} seeds");
}

/// The split read (a helper thread reads the second half of the trace) of every
/// form of the long trace gives what one pass gives, and the helper's part is used.
fn split_read_of_every_form_matches_one_pass(dir: &Path) {
    use instrument::snapshot::read::{read_pickle_split, read_pickle_with};
    let forms = dir.join("long_trace/forms");
    let mut n = 0;
    for f in std::fs::read_dir(&forms).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "json") {
            continue;
        }
        let data = std::fs::read(&f).unwrap();
        let total = data.len() as u64;
        let one = read_pickle_with(&data[..], total, 1_000_000, true, false).unwrap();
        let (split, ahead) = read_pickle_split(&f, total, 1_000_000, 0.5).unwrap();
        assert_eq!(canonical(&one), canonical(&split), "{}", f.display());
        // A file that skips memo indices numbers its stores in a way a helper
        // starting mid-file cannot know: the main reader reads it all.
        let skips = ["sparse", "mixed"].iter().any(|r| {
            f.file_name()
                .unwrap()
                .to_string_lossy()
                .contains(&format!(".{r}."))
        });
        assert!(
            if skips { ahead == 0 } else { ahead >= 1000 },
            "{}: the helper read {ahead} entries",
            f.display()
        );
        n += 1;
    }
    assert!(n >= 14);
}
