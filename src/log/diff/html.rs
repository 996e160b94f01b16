//! The comparison as one self-contained page: per rank the two runs' schedule timelines
//! overlaid, every rank on one scale, where they part marked; and each rank's changes.

use std::fmt::Write as _;

use super::model::*;
use super::text::{amount, parting_text, signed, who};
use crate::log::fmt::{esc, gib, shorten};
use crate::page::chart::{axis, gridlines};
use crate::page::table::Table;
use crate::page::{Page, Tips, legend};

const GIB: f64 = 1073741824.0;
const BEFORE: &str = "#9c9c9c";
const AFTER: &str = "#4e79a7";

fn opt(kind: &str, b: Option<i64>) -> String {
    b.map(|b| amount(kind, b)).unwrap_or_else(|| "-".into())
}

pub fn render(d: &DiffReport) -> String {
    let mut o = Page::new("instrument log --diff", "", Tips::Script);
    o.push_str("<h1>instrument log --diff</h1>");
    let _ = write!(
        o,
        "<p>Before: {} ({} prints); after: {} ({} prints). Changes are after minus before; a difference within the prints' rounding is no change.</p>",
        esc(&d.before.files.join(", ")),
        d.before.prints,
        esc(&d.after.files.join(", ")),
        d.after.prints
    );
    if let Some(s) = &d.after.shape {
        let _ = write!(o, "<p class=\"muted\">Run: <code>{}</code></p>", esc(s));
    }
    for n in &d.notes {
        let _ = write!(o, "<p class=\"muted\">Note: {}</p>", esc(n));
    }
    if let Some(g) = &d.gate {
        g.render_html(&mut o);
    }
    let max = d
        .ranks
        .iter()
        .flat_map(|r| r.before_points.iter().chain(&r.after_points).map(|p| p.1))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let scale = axis(max / GIB);
    legend(&mut o, [(BEFORE, "before"), (AFTER, "after")]);
    for r in &d.ranks {
        let _ = write!(o, "<h2>{}</h2>", esc(&who(r.rank, &r.mesh, r.pp_rank)));
        if !r.changed {
            o.push_str("<p>No change (every figure within the prints' rounding).</p>");
        }
        if let Some(p) = &r.peak {
            let _ = write!(
                o,
                "<p>Peak {} → {} ({})</p>",
                opt(p.kind, p.before_bytes),
                opt(p.kind, p.after_bytes),
                esc(&p.change)
            );
        }
        if let Some(p) = &r.parted_at {
            let _ = write!(o, "<p class=\"parted\">{}.</p>", esc(&parting_text(p)));
        }
        overlay(&mut o, r, scale);
        if !r.changes.is_empty() {
            let mut t = Table::new(
                &mut o,
                "changes",
                &[
                    ("change", false),
                    ("before", true),
                    ("after", true),
                    ("change", true),
                    ("per cent", true),
                ],
            );
            for c in &r.changes {
                t.row(&[
                    c.figure.clone(),
                    opt(c.kind, c.before_bytes),
                    opt(c.kind, c.after_bytes),
                    signed(c.kind, c.change_bytes),
                    c.change.clone(),
                ]);
            }
            t.end();
        }
    }
    for n in &d.not_compared {
        let _ = write!(
            o,
            "<p class=\"not-compared\">Rank {}: not compared, {}.</p>",
            n.rank,
            esc(&n.why)
        );
    }
    o.finish("")
}

/// The two timelines of one rank on the shared scale: the points in the order the run before
/// printed them (the run after's extra points after their predecessor).
fn overlay(o: &mut String, r: &RankDiff, (top, tick): (f64, f64)) {
    let mut labels: Vec<&str> = r.before_points.iter().map(|p| p.0.as_str()).collect();
    for (i, (l, _)) in r.after_points.iter().enumerate() {
        if !labels.contains(&l.as_str()) {
            let at = i
                .checked_sub(1)
                .and_then(|j| labels.iter().position(|x| *x == r.after_points[j].0))
                .map(|p| p + 1)
                .unwrap_or(labels.len());
            labels.insert(at, l);
        }
    }
    if labels.is_empty() {
        return;
    }
    let (w, h, ml, mr, mt, mb) = (1100.0, 290.0, 110.0, 16.0, 12.0, 130.0);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let n = labels.len().max(2);
    let x = |i: usize| ml + i as f64 * pw / (n - 1) as f64;
    let y = |b: i64| mt + ph - (b as f64 / GIB) / top * ph;
    let _ = write!(
        o,
        "<svg class=\"diff\" data-scale-gib=\"{top}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"memory over the step before and after, rank {}\">",
        r.rank
    );
    gridlines(o, (top, tick), (ml, ml + pw), (mt, ph), " GiB");
    if let Some(p) = &r.parted_at
        && let Some(i) = labels.iter().position(|l| *l == p.point)
    {
        let _ = write!(
            o,
            "<line class=\"parted\" x1=\"{:.1}\" y1=\"{mt}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#e15759\" stroke-dasharray=\"4 3\" data-tip=\"{}\"/>",
            x(i),
            x(i),
            mt + ph,
            esc(&parting_text(p))
        );
    }
    for (side, points, color, dash) in [
        (
            "before",
            &r.before_points,
            BEFORE,
            " stroke-dasharray=\"6 3\"",
        ),
        ("after", &r.after_points, AFTER, ""),
    ] {
        let xy: Vec<(f64, f64, &str, i64)> = points
            .iter()
            .filter_map(|(l, b)| {
                labels
                    .iter()
                    .position(|x| x == l)
                    .map(|i| (x(i), y(*b), l.as_str(), *b))
            })
            .collect();
        let line: Vec<String> = xy
            .iter()
            .map(|(a, b, _, _)| format!("{a:.1},{b:.1}"))
            .collect();
        let _ = write!(
            o,
            "<polyline class=\"{side}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
            line.join(" ")
        );
        for (a, b, l, v) in xy {
            let _ = write!(
                o,
                "<circle class=\"{side}\" cx=\"{a:.1}\" cy=\"{b:.1}\" r=\"3\" fill=\"{color}\" data-tip=\"{}\"/>",
                esc(&format!("{side}: {l}: {}", gib(v)))
            );
        }
    }
    let mut last_label = f64::NEG_INFINITY;
    for (i, l) in labels.iter().enumerate() {
        if x(i) - last_label >= 12.0 {
            last_label = x(i);
            let _ = write!(
                o,
                "<text transform=\"translate({:.1},{:.1}) rotate(-50)\" text-anchor=\"end\">{}</text>",
                x(i) + 3.0,
                mt + ph + 12.0,
                esc(&shorten(l, 28))
            );
        }
    }
    o.push_str("</svg>");
}
