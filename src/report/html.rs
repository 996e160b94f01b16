//! The run report as one self-contained page: the findings first, then per rank a schedule
//! strip, one column per event in schedule order: the peak inside it (light), the live memory
//! at its end stacked by component (the conventions table's categories, a colour each), the
//! value its print read (a dot) and, with `--estimate`, the estimator's state after it (a dash
//! per event, joined by a line); every rank on one scale, so that ranks read against each other.

use std::fmt::Write as _;

use super::Report;
use crate::findings::Unit;
use crate::page::esc;

/// What only this page draws: the schedule strips, legends kept on one line each (the rest is
/// the page kit's).
const STYLE: &str = "svg.strip{margin:8px 0}.legend span{white-space:nowrap}";

const PEAK: &str = "#c6dbef";
const PRINTED: &str = "#e6550d";
const ESTIMATED: &str = "#111111";
const OPEN: &str = "#c0392b";

pub fn render(r: &Report) -> String {
    // The kit's script: the render sentinel the browser tests read (the strips' tooltips are
    // their SVG titles).
    let mut o = crate::page::Page::new("instrument report", STYLE, crate::page::Tips::Script);
    let _ = write!(
        o,
        "<h1>instrument report</h1><p class=\"muted\">{}</p>",
        esc(&r.read_line())
    );
    crate::findings::html::render(&mut o, &r.findings);
    let _ = write!(
        o,
        "<p class=\"legend\"><span><i style=\"background:{PEAK}\"></i>peak inside the event</span>\
         <span><i style=\"background:{PRINTED}\"></i>printed</span>\
         <span><i style=\"background:{ESTIMATED}\"></i>estimated</span>\
         <span><i style=\"background:{OPEN}\"></i>the event it died inside</span></p>"
    );
    component_legend(&mut o, r);
    // One scale for every rank.
    let top = r
        .ranks
        .iter()
        .flat_map(|x| {
            x.events.iter().map(|e| {
                (e.snapshot_peak_bytes as i64)
                    .max(e.printed_bytes.unwrap_or(0))
                    .max(e.estimated_bytes.unwrap_or(0))
            })
        })
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    for rank in &r.ranks {
        let name = match &rank.mesh {
            Some(m) => format!("rank {} ({m})", rank.rank),
            None => format!("rank {}", rank.rank),
        };
        let _ = write!(
            o,
            "<section class=\"rank\" data-rank=\"{}\"><h2>{}</h2>",
            rank.rank,
            esc(&name)
        );
        if let Some(s) = &rank.step_snapshot {
            let _ = write!(o, "<p class=\"muted\">step snapshot: {}</p>", esc(s));
        }
        super::stages::html(&mut o, rank);
        if rank.events.is_empty() {
            o.push_str("<p class=\"muted\">no schedule marks in its step snapshot</p></section>");
            continue;
        }
        strip(&mut o, rank, top);
        o.push_str("</section>");
    }
    o.finish("")
}

/// One rank's events as columns of one SVG.
fn strip(o: &mut String, rank: &super::RankRow, top: f64) {
    let (w, h, pad) = (26.0, 180.0, 4.0);
    let width = rank.events.len() as f64 * w + 2.0 * pad;
    let y = |b: f64| pad + h * (1.0 - b / top);
    let _ = write!(
        o,
        "<svg class=\"strip\" width=\"{width:.0}\" height=\"{:.0}\" viewBox=\"0 0 {width:.0} {:.0}\">",
        h + 2.0 * pad,
        h + 2.0 * pad
    );
    let mut estimates: Vec<String> = Vec::new();
    for (i, e) in rank.events.iter().enumerate() {
        let x = pad + i as f64 * w;
        let title = {
            let mut t = format!(
                "{}: peak {}, end {}",
                e.event,
                Unit::Bytes.show(e.snapshot_peak_bytes as f64),
                Unit::Bytes.show(e.snapshot_end_bytes as f64)
            );
            if let Some(p) = e.printed_bytes {
                let _ = write!(t, ", printed {}", Unit::Bytes.show(p as f64));
            }
            if let Some(p) = e.estimated_bytes {
                let _ = write!(t, ", estimated {}", Unit::Bytes.show(p as f64));
            }
            for c in &e.snapshot_end_by_category {
                let _ = write!(t, "\n  {}: {}", c.name, Unit::Bytes.show(c.bytes as f64));
            }
            t
        };
        let _ = write!(
            o,
            "<g class=\"event\" data-event=\"{}\" data-end-bytes=\"{}\"><title>{}</title>",
            esc(&e.event),
            e.snapshot_end_bytes,
            esc(&title)
        );
        let peak = e.snapshot_peak_bytes as f64;
        let _ = write!(
            o,
            "<rect class=\"peak\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
            y(peak),
            w - 2.0,
            h + pad - y(peak),
            if e.open { OPEN } else { PEAK }
        );
        stack(o, e, x + 3.0, w - 8.0, &y);
        if let Some(p) = e.printed_bytes {
            let _ = write!(
                o,
                "<circle class=\"printed\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{PRINTED}\"/>",
                x + (w - 2.0) / 2.0,
                y(p as f64)
            );
        }
        if let Some(p) = e.estimated_bytes {
            estimates.push(format!("{:.1},{:.1}", x + (w - 2.0) / 2.0, y(p as f64)));
            let _ = write!(
                o,
                "<line class=\"estimated\" x1=\"{x:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"{ESTIMATED}\" stroke-width=\"2\"/>",
                x + w - 2.0,
                y(p as f64),
                y(p as f64)
            );
        }
        o.push_str("</g>");
    }
    estimate_line(o, &estimates);
    o.push_str("</svg>");
}

/// The colours of the components, in the conventions table's order of its categories.
const PALETTE: [&str; 10] = [
    "#525252", "#969696", "#e6ab02", "#a6761d", "#7570b3", "#2171b5", "#e7298a", "#66a61e",
    "#fdae6b", "#bdbdbd",
];

/// A category's colour: its place in the conventions table (one colour per category on every
/// page), grey for a name the table does not have.
fn colour(category: &str) -> &'static str {
    crate::snapshot::marks::Conventions::builtin()
        .categories()
        .iter()
        .position(|c| *c == category)
        .and_then(|i| PALETTE.get(i))
        .copied()
        .unwrap_or("#cccccc")
}

/// The components on the page, a colour each, in the table's order.
fn component_legend(o: &mut String, r: &Report) {
    let present: Vec<&str> = crate::snapshot::marks::Conventions::builtin()
        .categories()
        .into_iter()
        .filter(|c| {
            r.ranks.iter().any(|x| {
                x.events.iter().any(|e| {
                    e.snapshot_end_by_category
                        .iter()
                        .any(|a| a.name == *c && a.bytes > 0)
                })
            })
        })
        .collect();
    if present.is_empty() {
        return;
    }
    o.push_str("<p class=\"legend components\">live at the event's end, by component: ");
    for c in present {
        let _ = write!(
            o,
            "<span data-category=\"{}\"><i style=\"background:{}\"></i>{}</span>",
            esc(c),
            colour(c),
            esc(c)
        );
    }
    o.push_str("</p>");
}

/// One event's live memory at its end, stacked by component from the bottom, in the table's
/// order (the static memory at the bottom), each part carrying its bytes.
fn stack(o: &mut String, e: &super::EventRow, x: f64, width: f64, y: &dyn Fn(f64) -> f64) {
    let order = crate::snapshot::marks::Conventions::builtin().categories();
    let mut parts: Vec<&crate::snapshot::schedule::memory::Amount> = e
        .snapshot_end_by_category
        .iter()
        .filter(|a| a.bytes > 0)
        .collect();
    parts.sort_by_key(|a| {
        order
            .iter()
            .position(|c| *c == a.name)
            .unwrap_or(usize::MAX)
    });
    let mut below = 0.0;
    for a in parts {
        let top = below + a.bytes as f64;
        let _ = write!(
            o,
            "<rect class=\"part\" data-category=\"{}\" data-bytes=\"{}\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{width:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
            esc(&a.name),
            a.bytes,
            y(top),
            y(below) - y(top),
            colour(&a.name)
        );
        below = top;
    }
}

/// The estimator's state after each event, joined across the strip.
fn estimate_line(o: &mut String, points: &[String]) {
    if points.len() < 2 {
        return;
    }
    let _ = write!(
        o,
        "<polyline class=\"estimate-line\" points=\"{}\" fill=\"none\" stroke=\"{ESTIMATED}\" stroke-width=\"1\" stroke-dasharray=\"3,2\"/>",
        points.join(" ")
    );
}
