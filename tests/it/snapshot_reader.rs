//! The snapshot reader: every pickle protocol and JSON read the same, old layouts,
//! refused and broken files give one clear line and exit 2, never a panic.

use crate::snapshot_common;

use serde_json::Value;
use snapshot_common::*;

const TOTAL_KEYS: &[&str] = &[
    "reserved_bytes",
    "allocated_bytes",
    "pending_free_bytes",
    "inactive_bytes",
    "requested_bytes",
    "rounding_waste_bytes",
    "segments",
    "allocated_blocks",
    "pending_free_blocks",
    "inactive_blocks",
    "largest_inactive_block_bytes",
    "free_segments",
    "free_segment_bytes",
];

fn assert_totals(got: &Value, want: &Value) {
    for k in TOTAL_KEYS {
        assert_eq!(got[k], want[k], "totals.{k}");
    }
}

#[test]
fn every_protocol_and_json_read_the_same() {
    let planted = planted("allocator");
    let mut reports = Vec::new();
    for p in 0..=5 {
        let r = report_of(&format!("allocator/snapshot_p{p}.pickle"));
        // Protocols 0 and 1 have no PROTO opcode to tell them apart.
        let want = if p >= 2 { Value::from(p) } else { Value::Null };
        assert_eq!(
            r["source"]["layout"]["pickle_protocol"], want,
            "protocol {p}"
        );
        assert_totals(&r["totals"], &planted["totals"]);
        reports.push(r);
    }
    let first = &reports[0];
    for r in &reports[1..] {
        assert_eq!(r["sites"], first["sites"]);
        assert_eq!(r["trace"]["counts"], first["trace"]["counts"]);
        assert_eq!(r["streams"], first["streams"]);
    }
    // The new layout's optional parts were seen.
    let layout = &first["source"]["layout"];
    assert_eq!(layout["time_us"], true);
    assert_eq!(layout["allocator_settings"], true);
    assert_eq!(layout["compile_context"], true);
    assert_eq!(layout["user_metadata"], true);
    assert_eq!(layout["external_annotations"], true);
    assert_eq!(layout["legacy_history"], false);
    assert_eq!(layout["shared_records"], false);
    assert_eq!(layout["pending_free_state_name"], "active_pending_free");
    assert_eq!(first["allocator_settings"]["expandable_segments"], "False");
}

#[test]
fn legacy_layouts_with_history_and_both_delayed_free_names() {
    let planted = planted("legacy");
    for (file, protocol, name) in [
        (
            "legacy/snapshot_v1.13-awaiting.pickle",
            2,
            "active_awaiting_free",
        ),
        ("legacy/snapshot_v2.0.pickle", 4, "active_pending_free"),
    ] {
        let r = report_of(file);
        assert_totals(&r["totals"], &planted["totals"]);
        let layout = &r["source"]["layout"];
        assert_eq!(layout["pickle_protocol"], protocol, "{file}");
        assert_eq!(layout["legacy_history"], true, "{file}");
        assert_eq!(layout["time_us"], false, "{file}");
        assert_eq!(layout["allocator_settings"], false, "{file}");
        assert_eq!(layout["pending_free_state_name"], name, "{file}");
        let top = &r["sites"][0];
        let want = &planted["top_site"];
        assert!(site_matches(top, &want["site"]), "{file}: {top}");
        assert_eq!(top["bytes"], want["bytes"]);
        assert_eq!(top["blocks"], want["blocks"]);
    }
}

#[test]
fn device_is_the_one_the_segments_are_on() {
    let planted = planted("multi_device");
    let r = report_of("multi_device/snapshot.pickle");
    assert_eq!(r["device"], planted["device"]);
    assert_totals(&r["totals"], &planted["totals"]);
    assert_eq!(r["trace"]["lists"].as_array().unwrap().len(), 2);
    assert_eq!(r["trace"]["device"], planted["device"]);
    assert_eq!(r["trace"]["kept_events"], planted["events"]);

    // --device 0: nothing is there, and the trace list of device 0 is empty.
    let path = fixture("multi_device/snapshot.pickle");
    let r0 = report(&[path.to_str().unwrap(), "--device", "0"]);
    assert_eq!(r0["device"], 0);
    assert_eq!(r0["totals"]["reserved_bytes"], 0);
    assert_eq!(r0["trace"]["present"], false);

    let err = user_error(&[path.to_str().unwrap(), "--device", "7"]);
    assert!(err.contains("device 7 is not in this snapshot"), "{err}");
}

#[test]
fn max_trace_events_keeps_the_newest() {
    let path = fixture("growing_container/snapshot.pickle");
    let p = path.to_str().unwrap();
    let full = report(&[p]);
    let total = full["trace"]["kept_events"].as_u64().unwrap();
    assert_eq!(full["trace"]["dropped"], 0);
    let r = report(&[p, "--max-trace-events", "40"]);
    assert_eq!(r["trace"]["kept_events"], 40);
    assert_eq!(r["trace"]["dropped"].as_u64().unwrap(), total - 40);
    assert_eq!(r["trace"]["total_events"].as_u64().unwrap(), total);
    let kept: u64 = r["trace"]["counts"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(kept, 40);
    // The newest events are kept: same last event, a later first one.
    assert_eq!(r["trace"]["last_time_us"], full["trace"]["last_time_us"]);
    assert!(r["trace"]["first_time_us"].as_i64() > full["trace"]["first_time_us"].as_i64());
    let text = run(&[p, "--max-trace-events", "40"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("{} older event(s) dropped", total - 40)),
        "{text}"
    );
}

#[test]
fn refuses_pickles_that_would_run_code() {
    let planted = planted("refused");
    for (file, opcode) in planted["refused"].as_object().unwrap() {
        let path = fixture(&format!("refused/{file}"));
        let err = user_error(&[path.to_str().unwrap()]);
        assert!(
            err.contains(path.to_str().unwrap()),
            "names the file: {err}"
        );
        assert!(err.contains("refused opcode"), "{err}");
        assert!(
            err.contains(opcode.as_str().unwrap()),
            "names {opcode}: {err}"
        );
        assert!(err.contains("byte "), "gives the offset: {err}");
        assert!(
            !err.contains(planted["marker"].as_str().unwrap()),
            "never ran: {err}"
        );
    }
}

#[test]
fn truncated_malformed_and_wrong_files_are_one_line_errors() {
    let planted = planted("refused");
    let at = planted["truncated_at"].as_u64().unwrap();
    let p = fixture("refused/truncated.pickle");
    let err = user_error(&[p.to_str().unwrap()]);
    assert!(err.contains("truncated"), "{err}");
    assert!(
        err.contains(&format!("at byte {at}")) || err.contains(&format!("ends at byte {at}")),
        "{err}"
    );

    let cases = [
        (
            "refused/wrong_types.pickle",
            "`total_size` is str, expected int",
        ),
        (
            "refused/not_snapshot.pickle",
            "not a PyTorch memory snapshot",
        ),
        ("refused/garbage.pickle", "unknown opcode 0xff"),
        ("refused/truncated.json", "not a readable JSON snapshot"),
    ];
    for (rel, want) in cases {
        let p = fixture(rel);
        let err = user_error(&[p.to_str().unwrap()]);
        assert!(err.contains(want), "{rel}: {err}");
        assert!(
            err.contains(p.to_str().unwrap()),
            "{rel} names the file: {err}"
        );
    }

    let err = user_error(&["/nonexistent/snap.pickle"]);
    assert!(err.contains("/nonexistent/snap.pickle"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pickle");
    std::fs::write(&empty, b"").unwrap();
    assert!(user_error(&[empty.to_str().unwrap()]).contains("empty file"));
    let other = fixture("allocator/snapshot_p4.pickle");
    let err = user_error(&[
        other.to_str().unwrap(),
        "--diff",
        "/nonexistent/other.pickle",
    ]);
    assert!(err.contains("/nonexistent/other.pickle"), "{err}");
}

/// Inputs the fuzzer found: each is an error, not a panic.
#[test]
fn fuzzer_findings_are_errors() {
    let mut huge_len = vec![0x8e];
    huge_len.extend([0xff; 41]);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (huge_len, "runs past the end of the file"),
        // A block size no GPU has.
        (
            b"\x80\x04}(\x8c\x08segments](}(\x8c\ntotal_size\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x8c\x06blocks]ue\x8c\rdevice_traces]u.".to_vec(),
            "larger than any GPU allocation",
        ),
    ];
    for (bytes, want) in cases {
        let Err(err) = instrument::snapshot::read::load_bytes(&bytes, 1000) else {
            panic!("read as a snapshot: {want}");
        };
        let err = err.to_string();
        assert!(err.contains(want), "{err}");
    }
}

/// Deterministic mutations of real snapshots (flipped bytes, cuts, spliced opcodes):
/// the reader returns a snapshot or an error, never panics. The cargo-fuzz target in
/// fuzz/ explores the same function without bounds.
#[test]
fn mutated_snapshots_never_panic() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut sources: Vec<std::path::PathBuf> = [
        "allocator/snapshot_p0.pickle",
        "allocator/snapshot_p2.pickle",
        "allocator/snapshot_p4.pickle",
        "oom/snapshot.pickle",
        "legacy/snapshot_v1.13-awaiting.pickle",
        "pithtrain_moe/snapshot_p4.pickle",
    ]
    .iter()
    .map(|s| fixture(s))
    .collect();
    // The fuzzer's seeds: torch::jit::Pickler, skipped memo indices, MEMOIZE after BINPUT.
    let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/snapshot_reader");
    let mut seed_files: Vec<_> = std::fs::read_dir(seeds)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    seed_files.sort();
    assert!(seed_files.len() >= 8);
    sources.extend(seed_files);
    let special = [
        b'c', b'R', 0x93, b'h', b'j', b'q', b'(', b'u', b'e', b'.', 0x8a, 0x8d, b'X', 0x94, b'0',
        b'1',
    ];
    let mut ok = 0;
    let mut errors = 0;
    for src in &sources {
        let data = std::fs::read(src).unwrap();
        for _ in 0..300 {
            let mut d = data.clone();
            match next() % 4 {
                0 => {
                    let i = (next() as usize) % d.len();
                    d[i] ^= 1 << (next() % 8);
                }
                1 => {
                    let cut = (next() as usize) % d.len();
                    d.truncate(cut);
                }
                2 => {
                    let i = (next() as usize) % d.len();
                    d[i] = special[(next() as usize) % special.len()];
                }
                _ => {
                    for _ in 0..8 {
                        let i = (next() as usize) % d.len();
                        d[i] = next() as u8;
                    }
                }
            }
            match instrument::snapshot::read::load_bytes(&d, 1000) {
                Ok(_) => ok += 1,
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    errors += 1;
                }
            }
        }
    }
    assert!(
        errors > 0 && ok + errors == 300 * sources.len(),
        "ok {ok} errors {errors}"
    );
}

/// Every committed pickle (refused ones aside).
fn pickles() -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for e in walkdir::WalkDir::new(fixtures()).sort_by_file_name() {
        let p = e.unwrap().path().to_path_buf();
        if p.extension().is_some_and(|x| x == "pickle") && !p.to_string_lossy().contains("refused")
        {
            files.push(p);
        }
    }
    assert!(files.len() >= 20);
    files
}

/// The trace-entry fast path reads every snapshot exactly as the generic machine
/// does, and a reading that keeps every memoized object (the second pass for files
/// that share records) reads torch's files as the lean one does.
#[test]
fn fast_path_and_retain_mode_read_like_the_generic_machine() {
    use instrument::snapshot::read::read_pickle_with;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for f in pickles() {
        let data = std::fs::read(&f).unwrap();
        let n = data.len() as u64;
        for max in [1_000_000, 7] {
            let fast = read_pickle_with(&data[..], n, max, true, false).unwrap();
            let slow = read_pickle_with(&data[..], n, max, false, false).unwrap();
            let kept = read_pickle_with(&data[..], n, max, false, true).unwrap();
            assert!(!fast.layout.shared_records, "{}", f.display());
            assert_eq!(canonical(&fast), canonical(&slow), "{}", f.display());
            assert_eq!(
                canonical(&fast),
                canonical(&kept),
                "{} retained",
                f.display()
            );
        }
        // Damaged copies: whenever both read one, they read the same.
        for _ in 0..30 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut d = data.clone();
            let i = (seed as usize) % d.len();
            d[i] = (seed >> 32) as u8;
            let a = read_pickle_with(&d[..], d.len() as u64, 1000, true, false);
            let b = read_pickle_with(&d[..], d.len() as u64, 1000, false, false);
            if let (Ok(a), Ok(b)) = (a, b) {
                assert_eq!(
                    canonical(&a),
                    canonical(&b),
                    "{} mutated at {i}",
                    f.display()
                );
            }
        }
    }
}

/// A split read (a helper thread reads the second half of the trace) gives exactly
/// what a one-pass read gives, and the helper's part is used.
#[test]
fn split_read_matches_one_pass() {
    use instrument::snapshot::read::{read_pickle_split, read_pickle_with};
    let planted = planted("long_trace");
    for name in ["snapshot_python.pickle", "snapshot_python-p2.pickle"] {
        let path = fixture(&format!("long_trace/{name}"));
        let data = std::fs::read(&path).unwrap();
        for (max, at) in [(1_000_000, 0.5), (700, 0.5), (100, 0.3), (1_000_000, 0.9)] {
            let plain = read_pickle_with(&data[..], data.len() as u64, max, true, false).unwrap();
            let (split, ahead) = read_pickle_split(&path, data.len() as u64, max, at).unwrap();
            assert_eq!(
                canonical(&plain),
                canonical(&split),
                "{name} max {max} at {at}"
            );
            if at < 0.9 {
                assert!(
                    ahead >= 1000,
                    "{name} max {max} at {at}: the helper read {ahead} entries"
                );
            }
            let kept = split.traces[0].events.len() as u64 + split.traces[0].dropped;
            assert_eq!(kept, planted["events"].as_u64().unwrap());
        }
    }
    // The file reads the same through the command too.
    let r = report_of("long_trace/snapshot_python.pickle");
    assert_eq!(r["trace"]["kept_events"], planted["events"]);
    for (action, n) in planted["trace_counts"].as_object().unwrap() {
        assert_eq!(&r["trace"]["counts"][action], n);
    }
}
