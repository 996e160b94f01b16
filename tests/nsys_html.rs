//! `instrument nsys report --html FILE`: one self-contained page with a per-process timeline of
//! kernel categories. Rendered in headless Chromium when /usr/bin/chromium exists (required
//! when INSTRUMENT_REQUIRE_CHROMIUM=1).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn generate(dir: &Path) -> (PathBuf, Value) {
    let out = dir.join("x.sqlite");
    let status =
        Command::new(std::env::var("INSTRUMENT_PYTHON").unwrap_or_else(|_| "python3".into()))
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tools/gen_nsys_sqlite.py"))
            .args(["--kernels", "1200", "--ranks", "3", "--seed", "5", "--out"])
            .arg(&out)
            .status()
            .unwrap();
    assert!(status.success());
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

/// The `<section>` of one process.
fn section<'a>(page: &'a str, pid: &str) -> &'a str {
    let start = page
        .find(&format!("<section class=\"process\" id=\"pid-{pid}\">"))
        .unwrap_or_else(|| panic!("no section for {pid}"));
    let end = page[start..].find("</section>").unwrap() + start;
    &page[start..end]
}

#[test]
fn page_is_self_contained_with_a_timeline_per_process() {
    let d = tempfile::tempdir().unwrap();
    let (db, truth) = generate(d.path());
    let page = write_html(&db, &d.path().join("report.html"));
    assert!(page.starts_with("<!DOCTYPE html>"));
    let lower = page.to_ascii_lowercase();
    for banned in ["<script", "http://", "https://", "<link", "@import", "src="] {
        assert!(!lower.contains(banned), "page must not contain {banned}");
    }
    for (pid, t) in truth["processes"].as_object().unwrap() {
        let s = section(&page, pid);
        assert_eq!(
            s.matches("<svg class=\"timeline\"").count(),
            1,
            "process {pid}"
        );
        // Every category the process ran has a timeline row with at least one busy bucket;
        // categories it never ran have none.
        for (cat, tc) in t["categories"].as_object().unwrap() {
            let marker = format!("data-category=\"{cat}\"");
            let ran = tc[0].as_i64().unwrap() > 0;
            assert_eq!(s.contains(&marker), ran, "process {pid} category {cat}");
            if ran {
                let g = &s[s.find(&marker).unwrap()..];
                let g = &g[..g.find("</g>").unwrap()];
                assert!(g.contains("<rect"), "process {pid} {cat} has busy buckets");
            }
        }
        // The overlap figures are printed.
        let hidden = t["overlap"]["hidden_ns"].as_i64().unwrap() as f64 / 1e6;
        assert!(
            s.contains(&format!("{hidden:.3} ms hidden under compute")),
            "process {pid}"
        );
    }
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
    let (db, truth) = generate(d.path());
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
    // The parsed DOM holds every process section and its SVG timeline.
    for pid in truth["processes"].as_object().unwrap().keys() {
        assert!(
            dom.contains(&format!("id=\"pid-{pid}\"")),
            "pid {pid} in DOM"
        );
    }
    let n = truth["processes"].as_object().unwrap().len();
    assert_eq!(dom.matches("<svg class=\"timeline\"").count(), n);
    assert!(dom.contains("</svg>") && dom.contains("<rect"));
}
