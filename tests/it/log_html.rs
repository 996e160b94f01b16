//! `instrument log --html FILE`: a self-contained page with the plots, checked in the
//! markup and rendered in headless Chromium (a render sentinel written by the page's own
//! script after load, no console errors, a screenshot taken). Without /usr/bin/chromium
//! the browser part is skipped with a notice, unless INSTRUMENT_REQUIRE_CHROMIUM=1.

use crate::log_common;

use std::path::Path;
use std::process::Command;

use log_common::*;

const CHROMIUM: &str = "/usr/bin/chromium";

fn chromium(args: &[String]) -> (String, Vec<String>) {
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
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .output()
        .expect("run chromium");
    let console = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (String::from_utf8_lossy(&out.stdout).to_string(), console)
}

fn status(dom: &str) -> Option<String> {
    let start = dom.find("id=\"render-status\"")?;
    let rest = &dom[start..];
    let open = rest.find('>')? + 1;
    let close = rest[open..].find('<')?;
    Some(rest[open..open + close].to_string())
}

fn page(s: &Scenario, dir: &Path) -> (std::path::PathBuf, String) {
    let html = dir.join("log.html");
    let out = instrument(&[
        "log",
        &s.path("node0.console.log"),
        &s.path("node1.console.log.gz"),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("HTML report written to"));
    let text = std::fs::read_to_string(&html).unwrap();
    (html, text)
}

#[test]
fn the_page_holds_the_plots_and_renders_in_chromium() {
    let Some(py) = python() else { return };
    // Rank 3 (stage 0) holds 200 MiB more through the step, rank 14 (stage 1) pays half a
    // GiB more for its NCCL world: only the second is compared across the two stages.
    let s = scenario(
        &py,
        "qwen3-moe",
        "qwen3-tiny",
        2,
        &["--hold-mib", "3:200", "--nccl-world-gib", "14:1.5"],
    );
    let dir = tempfile::tempdir().unwrap();
    let (html_path, html) = page(&s, dir.path());
    for bad in [
        "http://", "https://", "<link", "<iframe", "<img", "@import", "src=",
    ] {
        assert!(
            !html.contains(bad),
            "external reference {bad:?} in the page"
        );
    }
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    // Memory over the step for both ranks, one scale; the setup breakdown; each rank's two
    // detail layers, chosen at run time (allocation and saved tensors): rank 3 on the first
    // stage details layers 0 and 1, rank 14 on the second the first two it holds.
    assert_eq!(html.matches("<svg class=\"step\"").count(), 2);
    assert_eq!(html.matches("<svg class=\"setup\"").count(), 1);
    assert_eq!(html.matches("<svg class=\"stages\"").count(), 4);
    assert_eq!(html.matches("<svg class=\"saved\"").count(), 4);
    for r in ["3", "14"] {
        let layers: Vec<String> = s.truth["ranks"][r]["saved"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["layer"].to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert!(
            html.contains(&format!("Detail layers {}: ", layers.join(", "))),
            "rank {r}: detail layers {layers:?}"
        );
    }
    assert_eq!(html.matches("class=\"peak\"").count(), 2);
    // Rank 14's NCCL world costs half a GiB more than rank 3's, but two ranks are no
    // peer group: the page calls no rank out and says what would let it.
    assert!(
        html.contains(
            "No rank is called out: standing out needs three ranks or more of one pipeline stage"
        ),
        "two ranks: none called out"
    );
    assert!(!html.contains("stands out"));
    assert!(
        html.contains("Ranks 3 and 14 are on different pipeline stages"),
        "rank 3's 200 MiB are not compared with a rank on another stage"
    );
    assert!(html.contains("instrument snapshot "));
    // The same y-scale on every panel.
    let scales: Vec<&str> = html
        .split("<svg class=\"step\" data-scale-gib=\"")
        .skip(1)
        .map(|svg| svg.split('"').next().unwrap())
        .collect();
    assert_eq!(scales.len(), 2);
    assert_eq!(scales[0], scales[1], "panels on one scale");
    // Text from the log is escaped.
    assert!(!html.contains("<rank"));

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
    let url = format!("file://{}", html_path.display());
    let (dom, console) = chromium(&["--dump-dom".into(), url.clone()]);
    assert!(console.is_empty(), "console output {console:?}");
    let st = status(&dom).expect("the page finished rendering");
    let svgs: usize = st
        .strip_prefix("render-ok svg=")
        .expect(&st)
        .parse()
        .unwrap();
    assert!(svgs >= 7, "{st}");
    let png = dir.path().join("log.png");
    chromium(&[
        "--window-size=1240,2000".into(),
        format!("--screenshot={}", png.display()),
        url,
    ]);
    let bytes = std::fs::read(&png).expect("a screenshot");
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 20_000,
        "{} bytes",
        bytes.len()
    );
    // The check can fail: a page with a script error is caught both ways.
    let bad = dir.path().join("bad.html");
    std::fs::write(
        &bad,
        html.replace("</body>", "<script>notDefined();</script></body>"),
    )
    .unwrap();
    let (dom, console) = chromium(&["--dump-dom".into(), format!("file://{}", bad.display())]);
    assert!(
        console.iter().any(|l| l.contains("notDefined")),
        "{console:?}"
    );
    assert!(status(&dom).unwrap().starts_with("render-error"));
}

/// Render `page` in headless Chromium: no console output, the sentinel says it rendered
/// `svgs` charts or more. Skipped (with a notice) without Chromium, outside CI.
pub(crate) fn renders(page: &Path, svgs: usize) {
    if !Path::new(CHROMIUM).exists() {
        if std::env::var("INSTRUMENT_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
            panic!("{CHROMIUM} is missing and INSTRUMENT_REQUIRE_CHROMIUM=1");
        }
        eprintln!(
            "NOTICE: skipping the headless-Chromium check of {}",
            page.display()
        );
        return;
    }
    let (dom, console) = chromium(&["--dump-dom".into(), format!("file://{}", page.display())]);
    assert!(console.is_empty(), "console output {console:?}");
    let st = status(&dom).expect("the page finished rendering");
    let n: usize = st
        .strip_prefix("render-ok svg=")
        .expect(&st)
        .parse()
        .unwrap();
    assert!(n >= svgs, "{st}");
}

#[test]
fn the_diff_and_estimate_pages_render_in_chromium() {
    let Some(py) = python() else { return };
    let before = scenario(&py, "qwen3-moe", "qwen3-tiny", 2, &[]);
    let after = scenario(
        &py,
        "qwen3-moe",
        "qwen3-tiny",
        2,
        &["--extra-saved", "3:256"],
    );
    let dir = tempfile::tempdir().unwrap();
    // The two runs overlaid per rank, where they part marked, the changes listed.
    let diff = dir.path().join("diff.html");
    let out = instrument(&[
        "log",
        &before.path("srun.log"),
        "--diff",
        &after.path("srun.log"),
        "--html",
        diff.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let html = std::fs::read_to_string(&diff).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert!(html.contains("layer 3 stage1 saved activations"));
    assert!(html.contains("No change (every figure within the prints' rounding)."));
    renders(&diff, 2);
    // The estimate beside each rank's figures on the report's page.
    let page = dir.path().join("estimate.html");
    let root = repo_root().join("fixtures/pithtrain");
    let out = instrument(&[
        "log",
        &after.path("srun.log"),
        "--estimate",
        "--root",
        root.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("<table class=\"estimate\">").count(), 2);
    assert!(html.contains("The measured timeline leaves the estimate at"));
    // Each rank's coordinates on the mesh name its sections and key the across table.
    let short = mesh_short(&after.truth["ranks"]["14"]["mesh"]);
    assert!(
        html.contains(&format!("<h2>Rank 14 ({short})</h2>")),
        "{short}"
    );
    assert!(
        html.contains("<table class=\"across\"><tr><th>rank</th><th>pp</th><th>dp</th><th>ep</th>")
    );
    renders(&page, 7);
}
