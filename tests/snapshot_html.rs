//! `--html FILE`: a self-contained page, opened in headless Chromium to check that it
//! renders with no console error. Without /usr/bin/chromium the browser part is
//! skipped with a notice, unless INSTRUMENT_REQUIRE_CHROMIUM=1 makes it a failure.

mod snapshot_common;

use std::path::Path;
use std::process::Command;

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
    let oom = fixture("oom/snapshot.pickle");
    let a = fixture("leak_diff/snapshot_step_005.pickle");
    let b = fixture("leak_diff/snapshot_step_050.pickle");
    let ranks = fixture("multi_rank");
    vec![
        (
            "oom.html".into(),
            write_html(&[oom.to_str().unwrap()], dir, "oom.html"),
        ),
        (
            "diff.html".into(),
            write_html(
                &[a.to_str().unwrap(), "--diff", b.to_str().unwrap()],
                dir,
                "diff.html",
            ),
        ),
        (
            "ranks.html".into(),
            write_html(&[ranks.to_str().unwrap()], dir, "ranks.html"),
        ),
    ]
}

#[test]
fn pages_are_self_contained_and_show_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let pages = pages(dir.path());
    for (name, html) in &pages {
        assert_self_contained(html);
        assert!(html.contains("id=\"tip\""), "{name}");
    }
    let oom = &pages[0].1;
    let planted = planted("oom");
    // Live memory over time, stacked by sites, with the OOM marked.
    assert!(oom.contains("<svg class=\"timeline\""));
    assert!(oom.contains("class=\"oom\""));
    assert!(oom.contains(&format!("OOM at event {}", planted["oom"]["event_index"])));
    assert!(oom.contains("models/moe.py:214 in forward"));
    // The segment map: one row per segment.
    assert!(oom.contains("<svg class=\"segments\""));
    let segs = planted["totals"]["segments"].as_u64().unwrap() as usize;
    assert_eq!(oom.matches("fill=\"none\" stroke=\"#999\"/>").count(), segs);
    // Frame names are escaped, never raw markup.
    assert!(oom.contains("&lt;module&gt;"));
    assert!(!oom.contains("<module>"));
    // The tables.
    for want in [
        "Where live memory goes",
        "Totals",
        "Patterns",
        "OOM #1",
        "Trace",
    ] {
        assert!(oom.contains(want), "missing {want}");
    }
    assert!(pages[1].1.contains("<h2>Diff</h2>"));
    assert!(pages[2].1.contains("<h2>Ranks</h2>"));
    assert!(pages[2].1.contains("Rank 3 differs most at"));
}

/// Run headless Chromium on a page: (text the page wrote into the DOM, console lines).
fn chromium(page: &Path) -> (String, Vec<String>) {
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
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", page.display()))
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

fn status(dom: &str) -> Option<String> {
    let start = dom.find("id=\"render-status\"")?;
    let rest = &dom[start..];
    let open = rest.find('>')? + 1;
    let close = rest[open..].find('<')?;
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
        let (dom, console) = chromium(&page);
        assert!(console.is_empty(), "{name}: console output {console:?}");
        let s = status(&dom).unwrap_or_else(|| panic!("{name}: the page did not finish rendering"));
        assert!(s.starts_with("render-ok"), "{name}: {s}");
        let svgs: usize = s.trim_start_matches("render-ok svg=").parse().unwrap();
        assert!(svgs >= 1, "{name}: no chart rendered");
    }
    // The check can fail: a page with a script error is caught both ways.
    let bad = dir.path().join("bad.html");
    let html = std::fs::read_to_string(dir.path().join("oom.html"))
        .unwrap()
        .replace("</body>", "<script>notDefined();</script></body>");
    std::fs::write(&bad, html).unwrap();
    let (dom, console) = chromium(&bad);
    assert!(
        console.iter().any(|l| l.contains("notDefined")),
        "{console:?}"
    );
    assert!(status(&dom).unwrap().starts_with("render-error"));
}
