//! The run report as one self-contained page: the findings first, then per rank a schedule
//! strip, one column per event in schedule order: the peak inside it (light), the live memory
//! at its end (dark), the value its print read (a dot) and, with `--estimate`, the estimator's
//! state after it (a dash); every rank on one scale, so that ranks read against each other.

use std::fmt::Write as _;

use super::Report;
use crate::findings::Unit;
use crate::page::esc;

/// What only this page draws: the schedule strips (the rest is the page kit's).
const STYLE: &str = "svg.strip{margin:8px 0}";

const PEAK: &str = "#c6dbef";
const END: &str = "#3182bd";
const PRINTED: &str = "#e6550d";
const ESTIMATED: &str = "#31a354";
const OPEN: &str = "#c0392b";

pub fn render(r: &Report) -> String {
    let mut o = crate::page::Page::new("instrument report", STYLE, crate::page::Tips::Title);
    let _ = write!(
        o,
        "<h1>instrument report</h1><p class=\"muted\">{} log(s), {} snapshot(s), {} nsys export(s); {} rank(s)</p>",
        r.inputs.logs.len(),
        r.inputs.snapshots.len(),
        r.inputs.nsys.len(),
        r.ranks.len()
    );
    crate::findings::html::render(&mut o, &r.findings);
    let _ = write!(
        o,
        "<p class=\"legend\"><span><i style=\"background:{PEAK}\"></i>peak inside the event</span>\
         <span><i style=\"background:{END}\"></i>live at its end</span>\
         <span><i style=\"background:{PRINTED}\"></i>printed</span>\
         <span><i style=\"background:{ESTIMATED}\"></i>estimated</span>\
         <span><i style=\"background:{OPEN}\"></i>the event it died inside</span></p>"
    );
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
        if !rank.stages.is_empty() {
            let parts: Vec<String> = rank
                .stages
                .iter()
                .map(|s| {
                    format!(
                        "{} {} exposed ({:.0}% hidden)",
                        s.stage,
                        Unit::Ns.show(s.exposed_ns as f64),
                        s.hidden * 100.0
                    )
                })
                .collect();
            let _ = write!(
                o,
                "<p>communication per stage (nsys): {}</p>",
                esc(&parts.join("; "))
            );
        }
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
            t
        };
        let _ = write!(
            o,
            "<g class=\"event\" data-event=\"{}\"><title>{}</title>",
            esc(&e.event),
            esc(&title)
        );
        let peak = e.snapshot_peak_bytes as f64;
        let end = e.snapshot_end_bytes as f64;
        let _ = write!(
            o,
            "<rect class=\"peak\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
            y(peak),
            w - 2.0,
            h + pad - y(peak),
            if e.open { OPEN } else { PEAK }
        );
        let _ = write!(
            o,
            "<rect class=\"end\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{END}\"/>",
            x + 3.0,
            y(end),
            w - 8.0,
            h + pad - y(end)
        );
        if let Some(p) = e.printed_bytes {
            let _ = write!(
                o,
                "<circle class=\"printed\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{PRINTED}\"/>",
                x + (w - 2.0) / 2.0,
                y(p as f64)
            );
        }
        if let Some(p) = e.estimated_bytes {
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
    o.push_str("</svg>");
}
