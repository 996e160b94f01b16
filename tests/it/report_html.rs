//! `instrument report --html`: per rank the schedule strip holds, per event, the live memory
//! at its end stacked by component, part by part the JSON's `snapshot_end_by_category` (bytes
//! in data attributes, heights on one scale for every rank), the estimate overlaid (a dash per
//! event and a line through them) and the printed values marked; the legend names the
//! components on the page. Rendered in headless Chromium (no script error, every strip drawn).

use crate::log_common;
use crate::report_run::gather;

use log_common::*;
use regex::Regex;
use serde_json::Value;

fn attr(tag: &str, name: &str) -> String {
    let re = Regex::new(&format!(r#"\b{name}="([^"]*)""#)).unwrap();
    re.captures(tag)
        .unwrap_or_else(|| panic!("no {name} in {tag}"))[1]
        .to_string()
}

fn unescape(s: &str) -> String {
    s.replace("&#39;", "'")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[test]
fn each_event_stacks_its_components_beside_the_estimate_and_the_print() {
    let Some(py) = python() else { return };
    let s = scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]);
    let run = gather(&s);
    let page = run.path().join("report.html");
    let root = s.checkout.path().to_str().unwrap().to_string();
    let r: Value = crate::report_run::json_ok(&[
        "report",
        "--json",
        "--estimate",
        "--root",
        &root,
        "--html",
        page.to_str().unwrap(),
        run.path().to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();

    let group = Regex::new(r#"(?s)<g class="event"[^>]*>.*?</g>"#).unwrap();
    let part = Regex::new(r#"<rect class="part"[^>]*/>"#).unwrap();
    // Every part's (bytes, height): one scale for every rank, checked at the end.
    let mut heights: Vec<(u64, f64, String)> = Vec::new();
    let mut present = std::collections::BTreeSet::new();
    for x in r["ranks"].as_array().unwrap() {
        let at = html
            .find(&format!(
                "<section class=\"rank\" data-rank=\"{}\">",
                x["rank"]
            ))
            .unwrap();
        let section = &html[at..at + html[at..].find("</section>").unwrap()];
        let events = x["events"].as_array().unwrap();
        let groups: Vec<&str> = group.find_iter(section).map(|m| m.as_str()).collect();
        assert_eq!(groups.len(), events.len(), "rank {}", x["rank"]);
        for (g, e) in groups.iter().zip(events) {
            assert_eq!(
                unescape(&attr(g, "data-event")),
                e["event"].as_str().unwrap()
            );
            assert_eq!(
                attr(g, "data-end-bytes"),
                e["snapshot_end_bytes"].to_string()
            );
            // The parts are the JSON's components (those with bytes), bottom up, stacked
            // without gaps, each as tall as its bytes on the page's one scale.
            let mut want: Vec<(String, u64)> = e["snapshot_end_by_category"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["bytes"].as_u64() > Some(0))
                .map(|c| {
                    (
                        c["name"].as_str().unwrap().to_string(),
                        c["bytes"].as_u64().unwrap(),
                    )
                })
                .collect();
            let mut got: Vec<(String, u64)> = Vec::new();
            let mut bottom: Option<f64> = None;
            for p in part.find_iter(g) {
                let p = p.as_str();
                let bytes: u64 = attr(p, "data-bytes").parse().unwrap();
                let (y, h): (f64, f64) = (
                    attr(p, "y").parse().unwrap(),
                    attr(p, "height").parse().unwrap(),
                );
                if let Some(b) = bottom {
                    assert!((y + h - b).abs() < 0.15, "{p}: a gap below");
                }
                bottom = Some(y);
                heights.push((bytes, h, p.to_string()));
                let c = unescape(&attr(p, "data-category"));
                present.insert(c.clone());
                got.push((c, bytes));
            }
            let sum: u64 = got.iter().map(|(_, b)| b).sum();
            assert_eq!(sum, e["snapshot_end_bytes"].as_u64().unwrap(), "{g}");
            got.sort();
            want.sort();
            assert_eq!(got, want, "{}", e["event"]);
            assert_eq!(
                g.contains("<circle class=\"printed\""),
                e.get("printed_bytes").is_some(),
                "{}",
                e["event"]
            );
            assert_eq!(
                g.contains("<line class=\"estimated\""),
                e["estimated_bytes"].is_i64(),
                "{}",
                e["event"]
            );
        }
        assert!(events.iter().all(|e| e["estimated_bytes"].is_i64()));
        assert_eq!(
            section.matches("<polyline class=\"estimate-line\"").count(),
            1
        );
    }
    // Pixels per byte, the same for every part of every rank (to the page's 0.1 px).
    let scale =
        heights.iter().map(|x| x.1).sum::<f64>() / heights.iter().map(|x| x.0 as f64).sum::<f64>();
    for (bytes, h, p) in &heights {
        assert!(
            (h - scale * *bytes as f64).abs() < 0.25,
            "{p}: {h} px for {bytes} bytes, the scale is {scale}"
        );
    }
    // The legend names exactly the components drawn, once each.
    let legend_at = html.find("<p class=\"legend components\">").unwrap();
    let legend = &html[legend_at..legend_at + html[legend_at..].find("</p>").unwrap()];
    let named: std::collections::BTreeSet<String> = Regex::new(r#"data-category="([^"]*)""#)
        .unwrap()
        .captures_iter(legend)
        .map(|c| unescape(&c[1]))
        .collect();
    assert_eq!(named, present);
    assert!(present.contains("saved activations"), "{present:?}");

    crate::log_html::renders(&page, r["ranks"].as_array().unwrap().len());
}
