//! What `instrument snapshot` says about one snapshot, checked against what the
//! generator (tools/gen_snapshots.py) planted in each scenario.

mod snapshot_common;

use serde_json::Value;
use snapshot_common::*;

fn names(r: &Value) -> Vec<String> {
    r["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

fn assert_absent(r: &Value, planted: &Value) {
    for a in planted["absent"].as_array().into_iter().flatten() {
        let a = a.as_str().unwrap();
        assert!(
            !names(r).contains(&a.to_string()),
            "{a} must not be reported: {:?}",
            names(r)
        );
    }
}

#[test]
fn totals_streams_and_fragmentation() {
    let planted = planted("allocator");
    let r = report_of("allocator/snapshot_p4.pickle");
    let t = &r["totals"];
    let pt = &planted["totals"];
    assert_eq!(t["reserved_bytes"], pt["reserved_bytes"]);
    assert_eq!(t["allocated_bytes"], pt["allocated_bytes"]);
    assert_eq!(t["pending_free_bytes"], pt["pending_free_bytes"]);
    assert_eq!(t["inactive_bytes"], pt["inactive_bytes"]);
    assert_eq!(t["requested_bytes"], pt["requested_bytes"]);
    assert_eq!(t["rounding_waste_bytes"], pt["rounding_waste_bytes"]);
    assert_eq!(
        t["largest_inactive_block_bytes"],
        pt["largest_inactive_block_bytes"]
    );
    let frac = pt["inactive_bytes"].as_f64().unwrap() / pt["reserved_bytes"].as_f64().unwrap();
    assert!((t["inactive_fraction"].as_f64().unwrap() - frac).abs() < 1e-9);
    // Per stream: the planted streams, adding up to the totals.
    let streams: Vec<i64> = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stream"].as_i64().unwrap())
        .collect();
    let want: Vec<i64> = planted["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_i64().unwrap())
        .collect();
    assert_eq!(streams, want);
    let sum: u64 = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reserved_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, pt["reserved_bytes"].as_u64().unwrap());
    // The delayed frees are on the side stream, in the snapshot and in the trace.
    let side = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stream"] == planted["pending"]["stream"])
        .unwrap();
    assert_eq!(side["pending_free_bytes"], planted["pending_block_bytes"]);
    let pending = &r["trace"]["pending_frees"];
    assert_eq!(pending.as_array().unwrap().len(), 1);
    assert_eq!(pending[0]["stream"], planted["pending"]["stream"]);
    assert_eq!(pending[0]["blocks"], planted["pending"]["blocks"]);
    assert_eq!(pending[0]["bytes"], planted["pending"]["bytes"]);
    for (action, n) in planted["trace_counts"].as_object().unwrap() {
        assert_eq!(&r["trace"]["counts"][action], n, "count of {action}");
    }
}

#[test]
fn live_memory_is_attributed_to_the_first_user_frame() {
    let planted = planted("allocator");
    let r = report_of("allocator/snapshot_p4.pickle");
    let sites = &r["sites"];
    let live = r["totals"]["allocated_bytes"].as_f64().unwrap();
    // Largest first; the parameters dominate.
    let p = &planted["param_site"];
    assert!(site_matches(&sites[0], p), "{}", sites[0]);
    assert_eq!(sites[0]["bytes"], p["bytes"]);
    assert_eq!(sites[0]["blocks"], p["blocks"]);
    assert_eq!(sites[0]["category"], "parameters");
    let pct = sites[0]["percent"].as_f64().unwrap();
    assert!((pct - p["bytes"].as_f64().unwrap() * 100.0 / live).abs() < 0.051);
    // Activations under torch/nn/modules are attributed to the user's module, not linear.py.
    let top = find_site(sites, &planted["top_site"]).expect("moe.py:214 site");
    assert_eq!(top["bytes"], planted["top_site"]["bytes"]);
    assert_eq!(top["blocks"], planted["top_site"]["blocks"]);
    assert_eq!(top["category"], "activations");
    assert_eq!(top["origin"], "user");
    assert!(
        top["stack"][1]
            .as_str()
            .unwrap()
            .contains("decoder.py:97 in forward"),
        "{}",
        top["stack"]
    );
    assert!(!sites.as_array().unwrap().iter().any(|s| {
        s["file"]
            .as_str()
            .unwrap()
            .ends_with("torch/nn/modules/linear.py")
    }));
    let attn = find_site(sites, &planted["attn_site"]).expect("attention site");
    assert_eq!(attn["blocks"], planted["attn_site"]["blocks"]);
    // No user frame: fall back to the first torch frame, then to a native frame.
    let t = find_site(sites, &planted["torch_fallback_site"]).expect("torch fallback");
    assert_eq!(t["origin"], "torch");
    let n = find_site(sites, &planted["native_site"]).expect("native fallback");
    assert_eq!(n["origin"], "native");
    assert!(
        sites
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["origin"] == "none")
    );
    // Every live byte is in exactly one site.
    let sum: u64 = sites
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, r["totals"]["allocated_bytes"].as_u64().unwrap());
    assert_eq!(
        r["sites_total"].as_u64().unwrap(),
        sites.as_array().unwrap().len() as u64
    );
}

#[test]
fn internal_globs_and_top() {
    let planted = planted("allocator");
    let path = fixture("allocator/snapshot_p4.pickle");
    let p = path.to_str().unwrap();
    let plain = report(&[p]);
    assert!(find_site(&plain["sites"], &planted["helper_site"]).is_some());
    assert!(find_site(&plain["sites"], &planted["helper_site_internal"]).is_none());
    let glob = planted["helper_glob"].as_str().unwrap();
    let with = report(&[p, "--internal", glob]);
    assert!(find_site(&with["sites"], &planted["helper_site"]).is_none());
    assert!(find_site(&with["sites"], &planted["helper_site_internal"]).is_some());
    assert!(
        with["internal_patterns"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == glob)
    );
    let top2 = report(&[p, "--top", "2"]);
    assert_eq!(top2["sites"].as_array().unwrap().len(), 2);
    assert_eq!(top2["sites"][0], plain["sites"][0]);
    assert!(top2["sites_total"].as_u64().unwrap() > 2);
}

#[test]
fn oom_event_and_the_sites_holding_memory_before_it() {
    let planted = planted("oom");
    let r = report_of("oom/snapshot.pickle");
    let ooms = r["oom"].as_array().unwrap();
    assert_eq!(ooms.len(), 1);
    let o = &ooms[0];
    assert_eq!(o["size_bytes"], planted["oom"]["size_bytes"]);
    assert_eq!(o["device_free_bytes"], planted["oom"]["device_free_bytes"]);
    assert_eq!(o["event_index"], planted["oom"]["event_index"]);
    assert_eq!(o["stream"], 0);
    assert!(
        site_matches(&o["site"], &planted["oom"]["site"]),
        "{}",
        o["site"]
    );
    assert!(o["frames"].as_array().unwrap().len() > 4);
    assert_eq!(o["live_bytes_before"], planted["live_before_requested"]);
    let h = o["holders"].as_array().unwrap();
    let moe = h
        .iter()
        .find(|x| site_matches(x, &planted["top_holder"]))
        .expect("moe holder");
    assert_eq!(moe["bytes"], planted["top_holder"]["bytes"]);
    let sum: u64 = h.iter().map(|x| x["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, planted["live_before_requested"].as_u64().unwrap());
    assert_eq!(r["trace"]["counts"]["oom"], 1);
    let text =
        String::from_utf8_lossy(&run(&[fixture("oom/snapshot.pickle").to_str().unwrap()]).stdout)
            .to_string();
    assert!(text.contains("OOM #1"), "{text}");
    assert!(text.contains("holding memory just before"), "{text}");
}

#[test]
fn retained_autograd_graph() {
    let planted = planted("retained_graph");
    let r = report_of("retained_graph/snapshot.pickle");
    let p = pattern(&r, "retained_autograd_graph").expect("pattern");
    for s in planted["activation_sites"].as_array().unwrap() {
        assert!(
            p["sites"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| site_matches(x, s)),
            "{s}"
        );
    }
    let loss = planted["loss_site"]["line"].as_i64().unwrap();
    assert!(
        p["evidence"].as_array().unwrap().iter().any(|e| {
            let e = e.as_str().unwrap();
            e.contains("one tensor per step") && e.contains(&format!("train.py:{loss}"))
        }),
        "{}",
        p["evidence"]
    );
    assert!(p["fix"].as_str().unwrap().contains("detach()"));
    assert_eq!(r["trace"]["steps"]["count"], planted["steps"]);
    assert_absent(&r, &planted);
}

#[test]
fn growing_python_container() {
    let planted = planted("growing_container");
    let r = report_of("growing_container/snapshot.pickle");
    let p = pattern(&r, "growing_python_container").expect("pattern");
    assert!(site_matches(&p["sites"][0], &planted["site"]));
    let steps = planted["steps"].as_u64().unwrap();
    assert_eq!(r["trace"]["steps"]["count"], steps);
    let rep = r["trace"]["repeated_unfreed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| site_matches(x, &planted["site"]))
        .expect("repeated site");
    // Every step before the last one left its block behind.
    assert_eq!(rep["steps_with_unfreed"].as_u64().unwrap(), steps - 1);
    assert_eq!(rep["blocks"].as_u64().unwrap(), steps - 1);
    assert_eq!(rep["per_step_min"], 1);
    assert_eq!(rep["per_step_max"], 1);
    let live = find_site(&r["sites"], &planted["site"]).unwrap();
    assert_eq!(live["blocks"], planted["blocks_live"]);
    assert_eq!(
        live["bytes"].as_u64().unwrap(),
        planted["blocks_live"].as_u64().unwrap() * planted["block_bytes"].as_u64().unwrap()
    );
    assert_absent(&r, &planted);
}

#[test]
fn first_step_optimizer_state_is_expected() {
    let planted = planted("optimizer_first_step");
    let r = report_of("optimizer_first_step/snapshot.pickle");
    let p = pattern(&r, "first_step_optimizer_state").expect("pattern");
    assert_eq!(p["bytes"], planted["optimizer_bytes"]);
    assert_eq!(
        r["categories"]["optimizer_state"],
        planted["optimizer_bytes"]
    );
    let ev: Vec<&str> = p["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    let step = planted["optimizer_step"].as_u64().unwrap();
    assert!(
        ev.iter()
            .any(|e| e.contains(&format!("appeared in step {step} of"))),
        "{ev:?}"
    );
    assert!(
        ev.iter()
            .any(|e| e.contains("expected retention, not a leak")),
        "{ev:?}"
    );
    assert!(p["fix"].as_str().unwrap().contains("not a leak"));
    assert_absent(&r, &planted);
}

#[test]
fn activation_sawtooth_and_checkpointing() {
    let planted = planted("optimizer_first_step");
    let r = report_of("optimizer_first_step/snapshot.pickle");
    let p = pattern(&r, planted["also"].as_str().unwrap()).expect("checkpointing pattern");
    assert_eq!(p["bytes"], planted["activation_at_peak_bytes"]);
    let saw = &r["trace"]["sawtooth"];
    assert_eq!(
        saw["max_activation_at_peak_bytes"],
        planted["activation_at_peak_bytes"]
    );
    assert!(saw["cycles"].as_u64().unwrap() >= 2);
    assert!(
        p["fix"]
            .as_str()
            .unwrap()
            .contains("torch.utils.checkpoint")
    );
}

#[test]
fn python_reference_cycles() {
    let planted = planted("reference_cycles");
    let r = report_of("reference_cycles/snapshot.pickle");
    let p = pattern(&r, "python_reference_cycles").expect("pattern");
    assert!(site_matches(&p["sites"][0], &planted["site"]));
    let bursts = r["trace"]["free_bursts"].as_array().unwrap();
    assert_eq!(bursts.len() as u64, planted["bursts"].as_u64().unwrap());
    for b in bursts {
        assert_eq!(b["blocks"], planted["burst_blocks"]);
        assert_eq!(b["bytes"], planted["burst_bytes"]);
        assert!(site_matches(&b["site"], &planted["site"]));
    }
    assert!(p["fix"].as_str().unwrap().contains("warn_tensor_cycles"));
    assert_absent(&r, &planted);
}

#[test]
fn ddp_replication() {
    let planted = planted("ddp");
    let r = report_of("ddp/snapshot.pickle");
    let c = &r["categories"];
    assert_eq!(c["parameters"], planted["parameters"]);
    assert_eq!(c["gradients"], planted["gradients"]);
    assert_eq!(c["optimizer_state"], planted["optimizer_state"]);
    assert_eq!(c["communication"], planted["communication"]);
    let p = pattern(&r, "ddp_replication").expect("pattern");
    let sum = planted["parameters"].as_u64().unwrap()
        + planted["gradients"].as_u64().unwrap()
        + planted["optimizer_state"].as_u64().unwrap();
    assert_eq!(p["bytes"].as_u64().unwrap(), sum);
    assert!(p["fix"].as_str().unwrap().contains("FSDP"));
    assert_eq!(r["trace"]["present"], false);
    // A single-GPU run with the same shape but no sign of distribution is not DDP.
    let single = report_of("oom/snapshot.pickle");
    assert!(pattern(&single, "ddp_replication").is_none());
}

#[test]
fn no_pattern_without_evidence() {
    let r = report_of("allocator/snapshot_p4.pickle");
    assert!(names(&r).is_empty(), "{:?}", names(&r));
    let text = String::from_utf8_lossy(
        &run(&[fixture("allocator/snapshot_p4.pickle").to_str().unwrap()]).stdout,
    )
    .to_string();
    assert!(text.contains("none of the named patterns"), "{text}");
}
