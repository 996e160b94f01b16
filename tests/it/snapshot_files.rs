//! The files people have, planted by tools/snapgen/scenarios_run.py: a run on Windows
//! (backslash paths, an installed library between torch and the user's code), history
//! that started after the model was on the GPU, steps the run marks itself, expandable
//! segments. Each report is compared with what the scenario planted.

use crate::snapshot_common;

use serde_json::Value;
use snapshot_common::*;

fn site<'a>(r: &'a Value, want: &Value) -> &'a Value {
    find_site(&r["sites"], want).unwrap_or_else(|| panic!("no site {want} in {}", r["sites"]))
}

#[test]
fn windows_paths_libraries_and_origins() {
    let planted = planted("windows");
    let path = fixture("windows/snapshot.pickle");
    let r = report(&[path.to_str().unwrap()]);
    // model.to("cuda") through transformers: parameters, the user's line, the library below
    let param = site(&r, &planted["param_site"]);
    assert_eq!(param["origin"], "user");
    assert_eq!(param["category"], "parameters");
    assert_eq!(param["library"]["name"], "transformers");
    assert_eq!(param["library"]["file"], planted["param_library"]["file"]);
    assert_eq!(param["library"]["line"], planted["param_library"]["line"]);
    // no user frame: the library's frame, then torch's (a standard-library frame never wins)
    let lib = site(&r, &planted["library_only_site"]);
    assert_eq!(lib["origin"], "library");
    assert_eq!(lib["library"]["name"], "transformers");
    assert_eq!(site(&r, &planted["pin_site"])["origin"], "torch");
    // torch\optim is optimizer state; every live byte with a stack is in its category
    assert_eq!(
        r["categories"]["optimizer_state"],
        planted["optimizer_bytes"]
    );
    for (c, b) in planted["categories_python"].as_object().unwrap() {
        assert_eq!(&r["categories"][c], b, "category {c}");
    }
    assert!(r["categories"].get("no_stack").is_none());
    assert_eq!(
        r["categories"].as_object().unwrap().len(),
        planted["categories_python"].as_object().unwrap().len()
    );
    // the engine thread's .grad: recorded, but stacks="python" keeps no frame for it
    let ns = &r["no_stack"];
    assert_eq!(ns["bytes"], planted["no_stack_python"]["bytes"]);
    assert_eq!(
        ns["no_python_frame_bytes"],
        planted["no_stack_python"]["no_python_frame_bytes"]
    );
    assert_eq!(ns["before_history_bytes"], 0);
    // AdamW's foreach temporaries end each step
    let steps = &r["trace"]["steps"];
    assert_eq!(steps["method"], "optimizer_step");
    assert_eq!(steps["count"], planted["steps"]);
    assert_eq!(steps["from_run"], true);
    assert_eq!(steps["guess"], false);
    for (k, v) in planted["totals"].as_object().unwrap() {
        assert_eq!(&r["totals"][k], v, "totals.{k}");
    }
    // the text names the library below the user's line
    let text = String::from_utf8_lossy(&run(&[path.to_str().unwrap()]).stdout).to_string();
    // Read across the 100-column wrap.
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains(r"transformers modeling_utils.py:4343 in to, called from C:\research\optft\train.py:40 in main"),
        "{text}"
    );
    assert!(text.contains("(no user frame; library)"), "{text}");
}

#[test]
fn internal_globs_with_either_separator() {
    let planted = planted("windows");
    let p = fixture("windows/snapshot.pickle");
    let p = p.to_str().unwrap();
    let plain = report(&[p]);
    assert!(find_site(&plain["sites"], &planted["helper_site"]).is_some());
    for glob in [planted["helper_glob"].as_str().unwrap(), "utils/*"] {
        let r = report(&[p, "--internal", glob]);
        assert!(
            find_site(&r["sites"], &planted["helper_site"]).is_none(),
            "{glob}"
        );
        let caller = site(&r, &planted["helper_caller"]);
        assert_eq!(caller["library"]["name"], glob);
        assert_eq!(caller["library"]["file"], planted["helper_site"]["file"]);
    }
}

#[test]
fn history_that_started_late_is_explained_and_out_of_the_shares() {
    let planted = planted("late_history");
    let r = report_of("late_history/snapshot_p4.pickle");
    let ns = &r["no_stack"];
    assert_eq!(ns["bytes"], planted["no_stack_all"]["bytes"]);
    assert_eq!(ns["bytes"], planted["before_history_bytes"]);
    assert_eq!(ns["before_history_bytes"], planted["before_history_bytes"]);
    assert_eq!(ns["blocks"], planted["no_stack_all"]["blocks"]);
    assert_eq!(ns["stacks_recorded"], true);
    assert!(
        ns["meaning"]
            .as_str()
            .unwrap()
            .contains("_record_memory_history")
    );
    // History begun during the run, as the recipe begins it: named, not advised against.
    assert_eq!(ns["history_started_during_run"], true);
    assert!(
        !ns["fix"]
            .as_str()
            .unwrap()
            .contains("before the model is built")
    );
    let live = r["totals"]["allocated_bytes"].as_f64().unwrap();
    let pct = ns["percent"].as_f64().unwrap();
    assert!((pct - ns["bytes"].as_f64().unwrap() * 100.0 / live).abs() < 0.06);
    for (c, b) in planted["categories_all"].as_object().unwrap() {
        assert_eq!(&r["categories"][c], b, "category {c}");
    }
    let none = find_site(&r["sites"], &Value::Null)
        .or_else(|| {
            r["sites"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["origin"] == "none")
        })
        .expect("the no-stack site");
    assert_eq!(none["category"], "no_stack");
    // stacks="python": the engine thread's gradients have no frame although recorded
    let r = report_of("late_history/snapshot_python.pickle");
    let ns = &r["no_stack"];
    assert_eq!(ns["bytes"], planted["no_stack_python"]["bytes"]);
    assert_eq!(
        ns["no_python_frame_bytes"],
        planted["no_stack_python"]["no_python_frame_bytes"]
    );
    assert_eq!(ns["before_history_bytes"], planted["before_history_bytes"]);
    let text = String::from_utf8_lossy(
        &run(&[fixture("late_history/snapshot_p4.pickle").to_str().unwrap()]).stdout,
    )
    .to_string();
    assert!(
        text.contains("no stack: ") && text.contains("fix: none needed for a snapshot of one step"),
        "{text}"
    );
    assert!(text.contains("with a stack)"), "{text}");
}

#[test]
fn steps_the_run_marks_come_before_any_guess() {
    let planted = planted("annotated_steps");
    let r = report_of("annotated_steps/snapshot.pickle");
    let s = &r["trace"]["steps"];
    assert_eq!(s["method"], "annotation");
    assert_eq!(s["from_run"], true);
    assert_eq!(s["guess"], false);
    assert_eq!(s["count"], planted["steps"]);
    assert_eq!(s["starts"], planted["step_starts"]);
    assert_eq!(s["annotation"]["name"], planted["annotation"]);
    assert_eq!(s["annotation"]["edge"], planted["edge"]);
    assert_eq!(s["marker"], Value::Null);
    assert_eq!(r["source"]["layout"]["external_annotations"], true);
    // without the annotations the same run's steps are a guess, and said to be one
    let g = report_of("annotated_steps/snapshot_no_annotations.pickle");
    let s = &g["trace"]["steps"];
    assert_eq!(s["guess"], true, "{s}");
    assert_eq!(s["from_run"], false);
    assert!(s["note"].as_str().unwrap().starts_with("a guess"));
    assert_ne!(
        s["count"], planted["steps"],
        "the guess is not the run's steps here"
    );
    let text = String::from_utf8_lossy(
        &run(&[fixture("annotated_steps/snapshot_no_annotations.pickle")
            .to_str()
            .unwrap()])
        .stdout,
    )
    .to_string();
    assert!(
        text.contains("steps: ") && text.contains("a guess: the run marked no steps"),
        "{text}"
    );
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("p.html");
    let out = run(&[
        fixture("annotated_steps/snapshot_no_annotations.pickle")
            .to_str()
            .unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("a guess: the run marked none"),
        "the page says the steps are a guess"
    );
}

#[test]
fn expandable_segments_are_mapped_pages_not_fragmentation() {
    let planted = planted("expandable");
    let r = report_of("expandable/snapshot.pickle");
    for (k, v) in planted["totals"].as_object().unwrap() {
        assert_eq!(&r["totals"][k], v, "totals.{k}");
    }
    let t = &r["totals"];
    assert_eq!(t["fragmented_bytes"], 0);
    assert_eq!(t["expandable_inactive_bytes"], t["inactive_bytes"]);
    assert!(pattern(&r, "allocator_fragmentation").is_none());
    assert_eq!(r["allocator_settings"]["expandable_segments"], "True");
    for (k, v) in planted["trace_counts"].as_object().unwrap() {
        assert_eq!(&r["trace"]["counts"][k], v, "count of {k}");
    }
    assert_eq!(
        r["trace"]["peak_reserved_bytes"],
        planted["peak_reserved_bytes"]
    );
    assert_eq!(r["trace"]["reserved_at_start_bytes"], 0);
    let o = &r["oom"][0];
    let want = &planted["oom"];
    for k in [
        "size_bytes",
        "device_free_bytes",
        "event_index",
        "live_bytes_before",
    ] {
        assert_eq!(&o[k], &want[k], "oom.{k}");
    }
    for k in [
        "cause",
        "cached_free_bytes",
        "largest_free_block_bytes",
        "reserved_bytes",
        "segments",
        "segments_with_free",
        "expandable",
    ] {
        assert_eq!(&o["state"][k], &want[k], "oom.state.{k}");
    }
    let text = String::from_utf8_lossy(
        &run(&[fixture("expandable/snapshot.pickle").to_str().unwrap()]).stdout,
    )
    .split_whitespace()
    .collect::<Vec<_>>()
    .join(" ");
    assert!(text.contains("not fragmentation"), "{text}");
    assert!(!text.contains("fragmentation, "), "{text}");
    assert!(
        text.contains("the pages mapped, not the address space"),
        "{text}"
    );
}

#[test]
fn the_page_says_it_too() {
    let dir = tempfile::tempdir().unwrap();
    let page = |rel: &str| {
        let out = dir.path().join(rel.replace('/', "_") + ".html");
        let r = run(&[
            fixture(rel).to_str().unwrap(),
            "--html",
            out.to_str().unwrap(),
        ]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        std::fs::read_to_string(out).unwrap()
    };
    let late = page("late_history/snapshot_p4.pickle");
    assert!(late.contains("No stack:") && late.contains("_record_memory_history"));
    let win = page("windows/snapshot.pickle");
    assert!(win.contains("transformers modeling_utils.py:4343 in to, called from"));
    assert!(win.contains("marked by the run"));
    let exp = page("expandable/snapshot.pickle");
    assert!(exp.contains("mapped pages, free (not fragmentation)"));
    assert!(exp.contains("torch.cuda.empty_cache() would return"));
}
