//! What `instrument snapshot` says about one snapshot, checked against what the
//! generator (tools/gen_snapshots.py) planted in each scenario.

use crate::snapshot_common;

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

fn planted_site<'a>(planted: &'a Value, stacks: &str, function_part: &str) -> &'a Value {
    planted[format!("sites_{stacks}")]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["site"]["function"]
                .as_str()
                .is_some_and(|f| f.contains(function_part))
        })
        .unwrap_or_else(|| panic!("planted site {function_part}"))
}

#[test]
fn totals_streams_and_delayed_frees() {
    let planted = planted("allocator");
    let r = report_of("allocator/snapshot_p4.pickle");
    for (k, v) in planted["totals"].as_object().unwrap() {
        assert_eq!(&r["totals"][k], v, "totals.{k}");
    }
    let t = &planted["totals"];
    let frac = t["inactive_bytes"].as_f64().unwrap() / t["reserved_bytes"].as_f64().unwrap();
    assert!((r["totals"]["inactive_fraction"].as_f64().unwrap() - frac).abs() < 1e-9);
    let streams: Vec<&Value> = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["stream"])
        .collect();
    let want: Vec<&Value> = planted["streams"].as_array().unwrap().iter().collect();
    assert_eq!(streams, want);
    let sum: u64 = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reserved_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(sum, t["reserved_bytes"].as_u64().unwrap());
    // Blocks freed while used on the comm stream: delayed, in the snapshot and the trace.
    let pend = &planted["pending"];
    let side = r["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stream"] == pend["stream"])
        .unwrap();
    assert_eq!(side["pending_free_bytes"], pend["block_bytes"]);
    let pending = &r["trace"]["pending_frees"];
    assert_eq!(pending.as_array().unwrap().len(), 1);
    assert_eq!(pending[0]["stream"], pend["stream"]);
    assert_eq!(pending[0]["blocks"], pend["blocks"]);
    assert_eq!(pending[0]["bytes"], pend["bytes"]);
    for (action, n) in planted["trace_counts"].as_object().unwrap() {
        assert_eq!(&r["trace"]["counts"][action], n, "count of {action}");
    }
}

#[test]
fn sites_are_the_first_user_frame_or_the_first_frame_past_the_plumbing() {
    let planted = planted("allocator");
    let r = report_of("allocator/snapshot_p4.pickle");
    let sites = &r["sites"];
    let live = r["totals"]["allocated_bytes"].as_f64().unwrap();
    // A parameter made in a custom layer's __init__ (nn.Parameter(torch.empty(...))).
    let p = planted_site(&planted, "all", "__init__");
    assert!(site_matches(&sites[0], &p["site"]), "{}", sites[0]);
    assert_eq!(sites[0]["bytes"], p["bytes"]);
    assert_eq!(sites[0]["category"], "parameters");
    let pct = sites[0]["percent"].as_f64().unwrap();
    assert!((pct - p["bytes"].as_f64().unwrap() * 100.0 / live).abs() < 0.051);
    // A custom autograd.Function's forward allocates activations, not gradients.
    let f = planted_site(&planted, "all", "forward");
    let got = find_site(sites, &f["site"]).expect("grouped_linear forward");
    assert_eq!(got["category"], "activations");
    assert_eq!(got["origin"], "user");
    assert!(
        got["stack"][1]
            .as_str()
            .unwrap()
            .contains("grouped_linear.py:85 in forward"),
        "{}",
        got["stack"]
    );
    // The autograd engine's thread: C++ frames only; the site is the autograd node.
    for (part, cat) in [
        ("AccumulateGrad::apply", "gradients"),
        ("MmBackward0::apply", "gradients"),
    ] {
        let want = planted_site(&planted, "all", part);
        let got = find_site(sites, &want["site"]).unwrap_or_else(|| panic!("{part}"));
        assert_eq!(got["origin"], "native", "{part}");
        assert_eq!(got["category"], cat, "{part}");
        assert_eq!(got["bytes"], want["bytes"], "{part}");
        assert!(
            !sites.as_array().unwrap().iter().any(|s| {
                let f = s["function"].as_str().unwrap();
                f.contains("unwind") || f.contains("CachingAllocator")
            }),
            "no site is the unwinder or the allocator"
        );
    }
    // No user frame: the first torch frame.
    let t = find_site(sites, &planted["torch_fallback_site"]).expect("torch fallback");
    assert_eq!(t["origin"], "torch");
    // Allocated before recording started: no stack.
    let none = sites
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["origin"] == "none")
        .unwrap();
    assert_eq!(none["bytes"], planted["no_stack_bytes"]);
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
    // The text names the C++ site by its short name.
    let text = String::from_utf8_lossy(
        &run(&[fixture("allocator/snapshot_p4.pickle").to_str().unwrap()]).stdout,
    )
    .to_string();
    // Read across the 100-column wrap.
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains("in torch::autograd::AccumulateGrad::apply (no Python frame)"),
        "{text}"
    );
}

#[test]
fn categories_of_a_pithtrain_step() {
    let planted = planted("pithtrain_moe");
    for (file, stacks) in [
        ("pithtrain_moe/snapshot_p4.pickle", "all"),
        ("pithtrain_moe/snapshot_python.pickle", "python"),
    ] {
        let r = report_of(file);
        for (c, b) in planted[format!("categories_{stacks}")].as_object().unwrap() {
            assert_eq!(&r["categories"][c], b, "{file}: {c}");
        }
    }
    // The NCCL buffer is communication, named by pithtrain's all_to_all call.
    let r = report_of("pithtrain_moe/snapshot_p4.pickle");
    let nccl = find_site(&r["sites"], &planted["nccl_site"]).expect("nccl site");
    assert_eq!(nccl["category"], "communication");
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
fn oom_with_the_python_frames_the_holders_and_why() {
    let planted = planted("oom");
    let want = &planted["oom"];
    let r = report_of("oom/snapshot.pickle");
    let ooms = r["oom"].as_array().unwrap();
    assert_eq!(ooms.len(), 1);
    let o = &ooms[0];
    for k in [
        "size_bytes",
        "device_free_bytes",
        "event_index",
        "live_bytes_before",
    ] {
        assert_eq!(o[k], want[k], "{k}");
    }
    assert!(site_matches(&o["site"], &want["site"]), "{}", o["site"]);
    // Python frames only, innermost first, unless --cpp-frames.
    let frames = o["frames"].as_array().unwrap();
    assert!(frames.len() > 8);
    assert!(
        frames
            .iter()
            .all(|f| f["file"].as_str().unwrap().ends_with(".py"))
    );
    assert!(site_matches(&frames[0], &want["site"]));
    let cpp = report(&[
        fixture("oom/snapshot.pickle").to_str().unwrap(),
        "--cpp-frames",
    ]);
    assert_eq!(
        cpp["oom"][0]["frames"][0]["function"],
        "torch::unwind::unwind()"
    );
    // The live memory at the OOM (freed before the snapshot was taken) is in the trace.
    let h = o["holders"].as_array().unwrap();
    assert!(site_matches(&h[0], &planted["top_holder"]), "{}", h[0]);
    assert_eq!(h[0]["bytes"], planted["top_holder"]["bytes"]);
    let sum: u64 = h.iter().map(|x| x["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, want["live_bytes_before"].as_u64().unwrap());
    // Why: not fragmentation; the allocator's state as the simulator had it.
    for k in [
        "cause",
        "cached_free_bytes",
        "largest_free_block_bytes",
        "reserved_bytes",
        "segments",
        "segments_with_free",
    ] {
        assert_eq!(o["state"][k], want[k], "state.{k}");
    }
    assert!(o["why"].as_str().unwrap().starts_with("out of memory"));
    assert!(pattern(&r, "allocator_fragmentation").is_none());
    let text =
        String::from_utf8_lossy(&run(&[fixture("oom/snapshot.pickle").to_str().unwrap()]).stdout)
            .to_string();
    assert!(text.contains("OOM #1"), "{text}");
    assert!(text.contains("why: out of memory"), "{text}");
    assert!(text.contains("holding memory just before"), "{text}");
    assert!(!text.contains("torch::unwind"), "{text}");
}

#[test]
fn oom_from_fragmentation_and_the_pattern() {
    let planted = planted("fragmentation");
    let want = &planted["oom"];
    let r = report_of("fragmentation/snapshot.pickle");
    let o = &r["oom"][0];
    assert_eq!(o["state"]["cause"], "fragmentation");
    for k in [
        "cached_free_bytes",
        "largest_free_block_bytes",
        "reserved_bytes",
        "segments",
        "segments_with_free",
    ] {
        assert_eq!(o["state"][k], want[k], "state.{k}");
    }
    assert!(o["why"].as_str().unwrap().starts_with("fragmentation"));
    let p = pattern(&r, "allocator_fragmentation").expect("fragmentation pattern");
    let ev = p["evidence"].to_string();
    assert!(ev.contains("12.00 MiB"), "the failed request: {ev}");
    assert!(ev.contains("largest free block was only 4.00 MiB"), "{ev}");
    assert!(ev.contains("9 segment(s)"), "{ev}");
    assert!(
        p["fix"]
            .as_str()
            .unwrap()
            .contains("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    );
    assert!(p["fix"].as_str().unwrap().contains("max_split_size_mb"));
    // Nothing else is claimed of it.
    assert_eq!(names(&r), ["allocator_fragmentation"]);
}

#[test]
fn dropped_ring_buffer_history() {
    let planted = planted("ring_buffer");
    let r = report_of("ring_buffer/snapshot.pickle");
    let t = &r["trace"];
    assert_eq!(t["kept_events"], planted["max_entries"]);
    assert_eq!(t["first_time_us"], planted["first_time_us"]);
    // Live memory at the window's start: allocations the trace never saw.
    assert_eq!(t["baseline_live_bytes"], planted["window_start_live_bytes"]);
    assert!(t["steps"]["count"].as_u64().unwrap() >= 8);
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
            e.contains("one tensor per step") && e.contains(&format!("pretrain_lm.py:{loss}"))
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

/// The gradients a LoRA backward leaves as .grad: four small blocks per layer from the
/// autograd engine's `mm_mat2_backward`, C++ frames only.
fn lora_gradients(r: &Value, planted: &Value) {
    let g = find_site(&r["sites"], &planted["grad_site"]).expect("mm_mat2_backward site");
    assert_eq!(g["category"], "gradients");
    assert_eq!(g["origin"], "native");
    assert_eq!(g["blocks"], planted["grad_blocks"]);
    assert_eq!(g["bytes"], planted["grad_bytes"]);
    assert!(
        !r["trace"]["repeated_unfreed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| site_matches(x, &planted["grad_site"])),
        "gradients are not retained step after step: {}",
        r["trace"]["repeated_unfreed"]
    );
}

#[test]
fn a_stack_that_recurs_once_per_layer_in_backward_is_not_a_step() {
    // One forward and backward (a notebook's `_dump_snapshot` after `loss.backward()`):
    // stacks on the autograd thread recur once or twice per layer, the same in every
    // layer, at a regular interval over most of the window, while the layers' backward
    // frees their activations. A memory engineer sees one step here and no marker to
    // count steps by: at most the one step, never one per layer, and the layers' LoRA
    // gradients are not a container that grows.
    let planted = planted("lora_layers");
    let r = report_of("lora_layers/snapshot.pickle");
    assert!(planted["step_marker"].is_null());
    let steps = &r["trace"]["steps"];
    assert!(
        steps["count"].as_u64().unwrap() <= planted["steps"].as_u64().unwrap(),
        "{} layers, {} step(s): {steps}",
        planted["layers"],
        planted["steps"]
    );
    assert_ne!(steps["method"], "marker", "{steps}");
    assert!(steps["marker"].is_null(), "{steps}");
    assert_absent(&r, &planted);
    lora_gradients(&r, &planted);
}

#[test]
fn steps_of_a_lora_fine_tune_start_at_the_batch_not_at_a_layer() {
    let planted = planted("lora_steps");
    let r = report_of("lora_steps/snapshot.pickle");
    let steps = &r["trace"]["steps"];
    assert_eq!(steps["count"], planted["steps"], "{steps}");
    assert_eq!(steps["method"], "marker");
    assert!(
        site_matches(&steps["marker"], &planted["step_marker"]),
        "{steps}"
    );
    for s in planted["per_layer_sites"].as_array().unwrap() {
        assert!(!site_matches(&steps["marker"], s), "{steps}");
    }
    assert_absent(&r, &planted);
    lora_gradients(&r, &planted);
    let p = pattern(&r, "first_step_optimizer_state").expect("optimizer state pattern");
    assert_eq!(p["bytes"], planted["optimizer_bytes"]);
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
    // enabled="state" keeps one trace entry (torch sets max_entries to 1).
    assert_eq!(r["trace"]["kept_events"], 1);
    // A single-GPU run with the same shape but no sign of distribution is not DDP.
    let single = report_of("optimizer_first_step/snapshot.pickle");
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
