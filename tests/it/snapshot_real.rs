//! Real snapshots torch wrote, cut from files public repositories committed
//! (fixtures/snapshots/real/README.md: sources, licences, the cuts). Every fact checked
//! here is read off the file a second way: tools/snapshot_real_reading.py (plain
//! `pickle.load` and a few lines per fact) wrote reading.json; the test reruns it when
//! Python is there, so reading.json is what that reading says.

use crate::snapshot_common;

use std::process::Command;

use serde_json::Value;
use snapshot_common::*;

fn reading() -> Value {
    let p = fixture("real/reading.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn reading_json_is_what_the_second_reading_says() {
    let Ok(out) = Command::new("python3")
        .arg(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/snapshot_real_reading.py"),
        )
        .arg("--print")
        .output()
    else {
        if std::env::var("INSTRUMENT_REQUIRE_PYTHON").as_deref() == Ok("1") {
            panic!("python3 is required (INSTRUMENT_REQUIRE_PYTHON=1)");
        }
        eprintln!("notice: python3 not on PATH; reading.json not re-derived");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let now: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(now, reading());
}

fn totals_agree(r: &Value, want: &Value) {
    for k in [
        "reserved_bytes",
        "allocated_bytes",
        "allocated_blocks",
        "inactive_bytes",
        "segments",
    ] {
        assert_eq!(r["totals"][k], want[k], "totals.{k}");
    }
}

fn site_of<'a>(r: &'a Value, want: &Value) -> &'a Value {
    r["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["file"] == want["site"][0]
                && s["line"] == want["site"][1]
                && s["function"] == want["site"][2]
                && match &want["library"] {
                    Value::Null => s["library"].is_null(),
                    l => s["library"]["file"] == l[0] && s["library"]["line"] == l[1],
                }
        })
        .unwrap_or_else(|| panic!("no site {want} in {}", r["sites"]))
}

/// ZidongLiu/DeComFL: torch 2.9 on Windows, an OPT fine-tune (transformers), with
/// `external_annotations`. The frames are `C:\...\site-packages\torch\...`.
#[test]
fn decomfl_windows_frames_libraries_and_annotated_steps() {
    let want = &reading()["decomfl-torch2.9-windows.pickle"];
    let r = report(&[
        fixture("real/decomfl-torch2.9-windows.pickle")
            .to_str()
            .unwrap(),
        "--top",
        "20",
    ]);
    totals_agree(&r, want);
    for (action, n) in want["trace_counts"].as_object().unwrap() {
        assert_eq!(&r["trace"]["counts"][action], n, "count of {action}");
    }
    // Every site the reading names by its first user frame and the library frame
    // below it: the same bytes, origin user; torch's and transformers' frames are
    // never the site.
    for s in want["user_sites"].as_array().unwrap() {
        let got = site_of(&r, s);
        assert_eq!(got["bytes"], s["bytes"], "{s}");
        assert_eq!(got["blocks"], s["blocks"], "{s}");
        assert_eq!(got["origin"], "user");
        if !s["library"].is_null() {
            assert_eq!(got["library"]["name"], "transformers");
        }
    }
    assert!(r["sites"].as_array().unwrap().iter().all(|s| {
        let f = s["file"].as_str().unwrap();
        !f.contains(r"\site-packages\torch\") || s["origin"] == "torch"
    }));
    // model.to() through Module._apply -> convert: parameters (half of live memory)
    assert_eq!(r["categories"]["parameters"], want["convert_bytes"]);
    assert!(r["no_stack"].is_null());
    assert_eq!(want["no_stack"]["bytes"], 0);
    // the run's zero_grad marks the step inside the window: no guess
    let steps = &r["trace"]["steps"];
    assert_eq!(steps["method"], "annotation");
    assert_eq!(steps["guess"], false);
    assert_eq!(steps["starts"], want["zero_grad_starts"]);
    assert_eq!(
        steps["annotation"]["name"],
        "Optimizer.zero_grad#SGD.zero_grad"
    );
    assert_eq!(r["source"]["layout"]["external_annotations"], true);
    assert_eq!(want["annotations"].as_object().unwrap().len(), 4);
}

/// ZijianDu/Attention: torch 2.2, stacks="all", the trace empty, almost every live
/// block allocated before history was recorded.
#[test]
fn attention_blocks_without_a_stack_are_explained() {
    let want = &reading()["attention-torch2.2-stacks-all.pickle"];
    let r = report_of("real/attention-torch2.2-stacks-all.pickle");
    totals_agree(&r, want);
    let ns = &r["no_stack"];
    assert_eq!(ns["bytes"], want["no_stack"]["bytes"]);
    assert_eq!(ns["blocks"], want["no_stack"]["blocks"]);
    assert_eq!(ns["before_history_bytes"], want["no_stack"]["bytes"]);
    assert_eq!(ns["stacks_recorded"], true);
    let pct = want["no_stack"]["bytes"].as_f64().unwrap() * 100.0
        / want["allocated_bytes"].as_f64().unwrap();
    assert!((ns["percent"].as_f64().unwrap() - pct).abs() < 0.06);
    // the bytes without a stack are in no category share
    let in_categories: u64 = r["categories"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(
        in_categories,
        want["allocated_bytes"].as_u64().unwrap() - want["no_stack"]["bytes"].as_u64().unwrap()
    );
    for s in want["user_sites"].as_array().unwrap() {
        assert_eq!(site_of(&r, s)["bytes"], s["bytes"]);
    }
    assert_eq!(r["trace"]["present"], false);
}
