//! `--html FILE`: a self-contained page, opened in headless Chromium to check that it
//! renders with no console error, that hovering the timeline names the site, its size
//! and its stack, and to take the screenshots docs/snapshot.md describes. Without
//! /usr/bin/chromium the browser part is skipped with a notice, unless
//! INSTRUMENT_REQUIRE_CHROMIUM=1 makes it a failure.

use crate::snapshot_common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use snapshot_common::*;

const CHROMIUM: &str = "/usr/bin/chromium";

fn write_html(args: &[&str], dir: &Path, name: &str) -> String {
    let out = dir.join(name);
    let mut a: Vec<&str> = args.to_vec();
    let o = out.to_str().unwrap().to_string();
    a.push("--html");
    a.push(&o);
    let r = run(&a);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains("HTML report written to"), "{text}");
    std::fs::read_to_string(&out).unwrap()
}

fn assert_self_contained(html: &str) {
    for bad in [
        "http://", "https://", "<link", "<iframe", "<img", "@import", "src=",
    ] {
        assert!(
            !html.contains(bad),
            "external reference {bad:?} in the page"
        );
    }
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
}

fn pages(dir: &Path) -> Vec<(String, String)> {
    let f = |rel: &str| fixture(rel).to_str().unwrap().to_string();
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("oom.html", vec![f("oom/snapshot.pickle")]),
        (
            "fragmentation.html",
            vec![f("fragmentation/snapshot.pickle")],
        ),
        (
            "diff.html",
            vec![
                f("leak_diff/snapshot_step_005.pickle"),
                "--diff".into(),
                f("leak_diff/snapshot_step_050.pickle"),
            ],
        ),
        ("ranks.html", vec![f("multi_rank")]),
    ];
    cases
        .into_iter()
        .map(|(name, args)| {
            let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
            (name.to_string(), write_html(&a, dir, name))
        })
        .collect()
}

/// The JSON a chart's tooltips read.
fn chart_data(html: &str, id: &str) -> Value {
    let tag = format!("<script type=\"application/json\" id=\"{id}-data\">");
    let start = html.find(&tag).unwrap_or_else(|| panic!("{id}")) + tag.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

#[test]
fn pages_are_self_contained_and_show_what_memory_viz_shows() {
    let dir = tempfile::tempdir().unwrap();
    let pages = pages(dir.path());
    for (name, html) in &pages {
        assert_self_contained(html);
        assert!(html.contains("id=\"tip\""), "{name}");
        // Frame names are escaped everywhere, in the tables and in the chart data.
        assert!(!html.contains("<module>"), "{name}");
    }
    let oom = &pages[0].1;
    let planted = planted("oom");
    // Live memory over time on time_us, stacked by sites, with the OOM marked.
    assert!(oom.contains("<svg class=\"timeline\""));
    assert!(oom.contains("class=\"oom\""));
    assert!(oom.contains("seconds since the first trace entry (time_us)"));
    let tl = chart_data(oom, "tl0");
    let series = tl["series"].as_array().unwrap();
    assert!(!series.is_empty() && series.len() <= 8);
    let peak = tl["total"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .max()
        .unwrap();
    // The downsampled curve keeps the peak of the trace.
    let r = report_of("oom/snapshot.pickle");
    assert_eq!(peak, r["trace"]["peak_live_bytes"].as_u64().unwrap());
    let moe = series
        .iter()
        .find(|s| {
            s["label"]
                .as_str()
                .unwrap()
                .contains("grouped_linear.py:36 in forward")
        })
        .expect("a band for the expert GEMM");
    assert!(
        moe["stack"][0]
            .as_str()
            .unwrap()
            .contains("grouped_linear.py:36")
    );
    assert!(moe["stack"].as_array().unwrap().len() >= 3);
    // The blocks over time of the largest segments, and the end-state map.
    assert!(oom.contains("<svg class=\"history\""));
    assert!(oom.contains("<svg class=\"segments\""));
    let segs = planted["totals"]["segments"].as_u64().unwrap() as usize;
    assert_eq!(oom.matches("fill=\"none\" stroke=\"#999\"/>").count(), segs);
    for want in [
        "Where live memory goes",
        "Totals",
        "Patterns",
        "OOM #1",
        "Why:",
        "out of memory: live tensors held",
        "Trace",
    ] {
        assert!(oom.contains(want), "missing {want}");
    }
    assert!(pages[1].1.contains("fragmentation: "));
    assert!(pages[1].1.contains("Allocator fragmentation"));
    // A diff leads with the diff, in readable units.
    let diff = &pages[2].1;
    let first = diff.find("<h2>What changed</h2>").expect("diff section");
    assert!(first < diff.find("<h2>Patterns</h2>").unwrap());
    assert!(first < diff.find("Live memory over time").unwrap());
    assert!(diff.contains("<svg class=\"diff\""));
    assert!(diff.contains("+26.37 MiB"), "deltas in MiB");
    // The ranks of a run on one y-scale; none marked: snapshots alone do not know the stages.
    let ranks = &pages[3].1;
    assert!(ranks.contains("<h2>Ranks</h2>"));
    let scales: Vec<u64> = (0..4)
        .map(|r| {
            chart_data(ranks, &format!("rank{r}"))["ymax"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(scales.iter().all(|&s| s == scales[0]), "{scales:?}");
    assert_eq!(ranks.matches("class=\"rank standout\"").count(), 0);
}

/// Run headless Chromium on a page: (the DOM after scripts ran, console lines).
fn chromium(page: &str, extra: &[&str]) -> (String, Vec<String>) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
        ])
        .args(extra)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(page)
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout).to_string();
    let console = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (dom, console)
}

fn element_text(dom: &str, id: &str) -> Option<String> {
    let start = dom.find(&format!("id=\"{id}\""))?;
    let rest = &dom[start..];
    let open = rest.find('>')? + 1;
    let close = rest[open..].find("</div>")?;
    Some(rest[open..open + close].to_string())
}

#[test]
fn pages_render_in_headless_chromium_without_console_errors() {
    if !Path::new(CHROMIUM).exists() {
        if std::env::var("INSTRUMENT_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
            panic!(
                "{CHROMIUM} is missing and INSTRUMENT_REQUIRE_CHROMIUM=1 (apt-get install -y chromium)"
            );
        }
        eprintln!(
            "NOTICE: skipping the headless-Chromium check of --html: {CHROMIUM} is not installed"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, _) in pages(dir.path()) {
        let page = dir.path().join(&name);
        let url = format!("file://{}", page.display());
        let (dom, console) = chromium(&url, &["--dump-dom"]);
        assert!(console.is_empty(), "{name}: console output {console:?}");
        let s = element_text(&dom, "render-status")
            .unwrap_or_else(|| panic!("{name}: the page did not finish rendering"));
        assert!(s.starts_with("render-ok"), "{name}: {s}");
        let svgs: usize = s.trim_start_matches("render-ok svg=").parse().unwrap();
        assert!(svgs >= 2, "{name}: {svgs} charts");
        // A screenshot of the page as a browser draws it.
        let png = dir.path().join(name.replace(".html", ".png"));
        let shot = format!("--screenshot={}", png.display());
        chromium(
            &url,
            &[&shot, "--window-size=1100,1600", "--hide-scrollbars"],
        );
        let bytes = std::fs::read(&png).unwrap_or_default();
        assert!(
            bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000,
            "{name}: screenshot"
        );
    }
    // Hovering the timeline names the time, the live total, the band's site, its
    // size and its stack.
    let url = format!(
        "file://{}#hover=0.62,0.35",
        dir.path().join("oom.html").display()
    );
    let (dom, _) = chromium(&url, &["--dump-dom"]);
    let tip = element_text(&dom, "tip").expect("tooltip");
    assert!(tip.contains(" s\nlive ") || tip.contains("live "), "{tip}");
    assert!(tip.contains(" in "), "a site: {tip}");
    assert!(tip.contains("MiB"), "a size: {tip}");
    // The check can fail: a page with a script error is caught both ways.
    let bad = dir.path().join("bad.html");
    let html = std::fs::read_to_string(dir.path().join("oom.html"))
        .unwrap()
        .replace("</body>", "<script>notDefined();</script></body>");
    std::fs::write(&bad, html).unwrap();
    let (dom, console) = chromium(&format!("file://{}", bad.display()), &["--dump-dom"]);
    assert!(
        console.iter().any(|l| l.contains("notDefined")),
        "{console:?}"
    );
    assert!(
        element_text(&dom, "render-status")
            .unwrap()
            .starts_with("render-error")
    );
}
