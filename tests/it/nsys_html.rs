//! `instrument nsys report --html FILE`: one self-contained page with every process on one time
//! axis (an NVTX row, a compute lane and a communication lane per process) and the tables.
//! Rendered in headless Chromium when /usr/bin/chromium exists (required when
//! INSTRUMENT_REQUIRE_CHROMIUM=1).

use crate::nsys_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use nsys_common::write_export;
use serde_json::Value;

fn generate(dir: &Path, args: &[&str]) -> (PathBuf, Value) {
    let out = dir.join("x.sqlite");
    write_export(&out, args);
    let truth =
        serde_json::from_str(&std::fs::read_to_string(dir.join("x.expected.json")).unwrap())
            .unwrap();
    (out, truth)
}

fn write_html(db: &Path, html: &Path) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_instrument"))
        .args(["nsys", "report"])
        .arg(db)
        .arg("--html")
        .arg(html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_to_string(html).unwrap()
}

/// The slice of `page` from `start` to the end of the first `end` after it.
fn between<'a>(page: &'a str, start: &str, end: &str) -> &'a str {
    let s = page
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in the page"));
    let e = page[s..]
        .find(end)
        .unwrap_or_else(|| panic!("no {end} after {start}"))
        + s;
    &page[s..e + end.len()]
}

/// (x, width) of every busy rect in a lane group.
fn rects(lane: &str) -> Vec<(f64, f64)> {
    lane.split("<rect ")
        .skip(1)
        .filter(|r| !r.starts_with("class=\"bg\""))
        .map(|r| {
            let attr = |name: &str| -> f64 {
                let at = r.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                r[at..at + r[at..].find('"').unwrap()].parse().unwrap()
            };
            (attr("x"), attr("width"))
        })
        .collect()
}

#[test]
fn page_is_self_contained_with_every_rank_on_one_timeline() {
    let d = tempfile::tempdir().unwrap();
    let (db, truth) = generate(
        d.path(),
        &["--kernels", "1200", "--ranks", "3", "--seed", "5"],
    );
    let page = write_html(&db, &d.path().join("report.html"));
    assert!(page.starts_with("<!DOCTYPE html>"));
    let lower = page.to_ascii_lowercase();
    for banned in ["<script", "http://", "https://", "<link", "@import", "src="] {
        assert!(!lower.contains(banned), "page must not contain {banned}");
    }
    assert_eq!(page.matches("<svg class=\"timeline\"").count(), 1);
    let timeline = between(&page, "<svg class=\"timeline\"", "</svg>");
    for (pid, t) in truth["processes"].as_object().unwrap() {
        let rank = between(
            timeline,
            &format!("<g class=\"rank\" data-pid=\"{pid}\">"),
            "</g>\n</g>",
        );
        for lane in ["nvtx", "compute", "communication"] {
            assert!(
                rank.contains(&format!("data-lane=\"{lane}\"")),
                "pid {pid} lane {lane}"
            );
        }
        let comm = between(rank, "data-lane=\"communication\"", "</g>");
        let ran_comm = t["categories"]["communication"][0].as_i64().unwrap() > 0;
        assert_eq!(
            !rects(comm).is_empty(),
            ran_comm,
            "pid {pid} communication lane"
        );
        assert!(!rects(between(rank, "data-lane=\"compute\"", "</g>")).is_empty());
        // The NVTX row names what the process ran (tooltips).
        let nvtx = between(rank, "data-lane=\"nvtx\"", "</g>");
        assert!(nvtx.contains("<title>step ("), "pid {pid}: {nvtx:.300}");
        // The tables below: the overlap figures of each process.
        let s = between(
            &page,
            &format!("<section class=\"process\" id=\"pid-{pid}\">"),
            "</section>",
        );
        let hidden = t["overlap"]["hidden_ns"].as_i64().unwrap() as f64 / 1e6;
        assert!(
            s.contains(&format!("{hidden:.3} ms hidden under compute")),
            "process {pid}"
        );
    }
}

/// All processes share one time axis: in the edge scenario (see tools/nsys_scenarios.py) the
/// GPU work spans 0..130_000 ns over both processes, and process 2002's all-gather runs from
/// 20_000 to 60_000 ns: its communication lane covers that stretch of the common axis, not the
/// whole width (which it would on a per-process axis).
#[test]
fn lanes_are_placed_on_the_common_axis() {
    let d = tempfile::tempdir().unwrap();
    let (db, _truth) = generate(d.path(), &["--scenario", "edge"]);
    let page = write_html(&db, &d.path().join("report.html"));
    let timeline = between(&page, "<svg class=\"timeline\"", "</svg>");
    let rank = between(
        timeline,
        "<g class=\"rank\" data-pid=\"2002\">",
        "</g>\n</g>",
    );
    let busy = rects(between(rank, "data-lane=\"communication\"", "</g>"));
    let lo = busy.iter().map(|r| r.0).fold(f64::MAX, f64::min);
    let hi = busy.iter().map(|r| r.0 + r.1).fold(f64::MIN, f64::max);
    let (label, width, span) = (170.0, 1200.0, 130_000.0);
    let x = |ns: f64| label + ns / span * width;
    assert!((lo - x(20_000.0)).abs() < 2.0, "{lo} vs {}", x(20_000.0));
    assert!((hi - x(60_000.0)).abs() < 2.0, "{hi} vs {}", x(60_000.0));
    assert!(
        timeline.contains(">0.130 ms</text>"),
        "axis ends at the last op of any process"
    );
}

#[test]
fn page_renders_in_headless_chromium() {
    let chromium = Path::new("/usr/bin/chromium");
    if !chromium.exists() {
        if std::env::var("INSTRUMENT_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
            panic!("INSTRUMENT_REQUIRE_CHROMIUM=1 but /usr/bin/chromium is missing");
        }
        println!("notice: /usr/bin/chromium not found; skipping the headless rendering check");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (db, truth) = generate(
        d.path(),
        &["--kernels", "1200", "--ranks", "3", "--seed", "5"],
    );
    let html = d.path().join("report.html");
    write_html(&db, &html);
    let profile = tempfile::tempdir().unwrap();
    let o = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dom = String::from_utf8_lossy(&o.stdout);
    // The parsed DOM holds the one timeline with a block per process, and every section.
    assert_eq!(dom.matches("<svg class=\"timeline\"").count(), 1);
    for pid in truth["processes"].as_object().unwrap().keys() {
        assert!(
            dom.contains(&format!("id=\"pid-{pid}\"")),
            "pid {pid} in DOM"
        );
        assert!(
            dom.contains(&format!("class=\"rank\" data-pid=\"{pid}\"")),
            "pid {pid} row"
        );
    }
    assert!(dom.contains("</svg>") && dom.contains("<rect"));
}

/// A pithtrain run of two nodes (tools/nsys_dualpipe.py): one timeline per export with rows
/// labelled by rank and mesh coordinates, the window marked, a stage chart per rank whose bars
/// are the exposed and hidden communication of the report, and the ranks side by side.
#[test]
fn ranks_are_labelled_by_mesh_and_their_stages_charted() {
    let d = tempfile::tempdir().unwrap();
    let run = d.path().join("run");
    std::fs::create_dir(&run).unwrap();
    for node in ["0", "1"] {
        write_export(
            &run.join(format!("pithtrain_node{node}.sqlite")),
            &["--scenario", "dualpipe", "--ranks", "4", "--node", node],
        );
    }
    let page = write_html(&run, &d.path().join("report.html"));
    let o = Command::new(env!("CARGO_BIN_EXE_instrument"))
        .args(["nsys", "report", "--json"])
        .arg(&run)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        page.matches("<svg class=\"timeline\"").count(),
        2,
        "one per export"
    );
    for (e, export) in doc["exports"].as_array().unwrap().iter().enumerate() {
        let timeline = page
            .split("<svg class=\"timeline\"")
            .nth(e + 1)
            .unwrap()
            .split("</svg>")
            .next()
            .unwrap();
        for p in export["processes"].as_array().unwrap() {
            let (pid, rank) = (p["pid"].as_i64().unwrap(), p["rank"].as_i64().unwrap());
            let m = &p["mesh"];
            let label = format!(
                "rank {rank} (pp {}, cp {}, ep {})",
                m["pp"][0], m["cp"][0], m["ep"][0]
            );
            let row = between(
                timeline,
                &format!("<g class=\"rank\" data-pid=\"{pid}\">"),
                "</g>\n</g>",
            );
            assert!(
                row.contains(&format!("class=\"lbl\">{label}</text>")),
                "{label}: {row:.400}"
            );
            assert!(row.contains(&format!(
                "<title>window {}..{} ns</title>",
                p["window"]["start_ns"], p["window"]["end_ns"]
            )));
            let section = between(
                &page,
                &format!(
                    "<section class=\"process\" id=\"e{}-pid-{pid}\" data-rank=\"{rank}\">",
                    e + 1
                ),
                "</section>",
            );
            assert!(section.contains(&format!("<h2>{label}, process {pid}")));
            let chart = between(section, "<svg class=\"stages\"", "</svg>");
            for s in p["stages"].as_array().unwrap() {
                let g = between(
                    chart,
                    &format!("data-stage=\"{}\"", s["stage"].as_str().unwrap()),
                    "</g>",
                );
                let width = |class: &str| -> f64 {
                    let r = between(g, &format!("<rect class=\"{class}\""), ">");
                    let at = r.find("width=\"").unwrap() + 7;
                    r[at..at + r[at..].find('"').unwrap()].parse().unwrap()
                };
                let (comm, exposed) = (
                    s["comm_ns"].as_f64().unwrap(),
                    s["exposed_ns"].as_f64().unwrap(),
                );
                // Both bars on one scale: their widths are in the ratio of the figures.
                let (wh, we) = (width("hidden"), width("exposed"));
                // (Widths are written to 0.1 px: each is off by at most 0.05.)
                let hidden = comm - exposed;
                assert!(
                    (wh * exposed - we * hidden).abs() <= 0.05 * (exposed + hidden),
                    "{label} {}: {wh} {we} for {comm} {exposed}",
                    s["stage"]
                );
                if exposed == comm {
                    assert_eq!(wh, 0.0, "{label} {}: nothing hidden", s["stage"]);
                }
            }
        }
    }
    let across = between(&page, "<section class=\"across\"", "</section>");
    assert!(across.contains(
        "stage4_f: rank 5 (pp 1, cp 0, ep 1) exposes 0.088 ms of 0.088 ms (hidden 0.00%)"
    ));
    assert!(across.contains("<table class=\"balance\">"));
}
