//! The page's charts as inline SVG, with the data their tooltips read embedded as
//! JSON next to them (the script in `html.rs` reads it; nothing is fetched). The timelines and
//! the blocks over time handle the pointer themselves (`data-hover`).

use std::fmt::Write;

use crate::snapshot::model::BlockState;
use crate::snapshot::sites::Category;

use super::visuals::{Axis, SegmentBar, SegmentHistory, Timeline};
use super::{Diff, human, short, signed_human};

/// The timeline's bands: the kit's palette but its last colour, which is `OTHER`'s.
const PALETTE: &[&str] = crate::page::PALETTE.split_at(9).0;
use crate::page::OTHER;

pub fn cat_color(c: Category) -> &'static str {
    match c {
        Category::Parameters => "#4e79a7",
        Category::Gradients => "#76b7b2",
        Category::OptimizerState => "#59a14f",
        Category::Activations => "#f28e2b",
        Category::Temporary => "#edc948",
        Category::Communication => "#b07aa1",
        Category::Other => "#9c755f",
        Category::NoStack => "#d9d9d9",
    }
}

use crate::page::chart::{Bar, HBars, Part};
pub use crate::page::esc;
use crate::page::{Tips, legend};

/// A position on the x axis for people.
pub fn fmt_x(axis: Axis, x: f64) -> String {
    match axis {
        Axis::Seconds if x >= 10.0 => format!("{x:.1} s"),
        Axis::Seconds if x >= 0.01 => format!("{x:.3} s"),
        Axis::Seconds => format!("{:.0} µs", x * 1e6),
        Axis::Event => format!("entry {}", x.round() as u64),
    }
}

fn axis_name(axis: Axis) -> &'static str {
    match axis {
        Axis::Seconds => "seconds since the first trace entry (time_us)",
        Axis::Event => "trace entry (the file has no time_us)",
    }
}

/// JSON text safe inside a `<script>` element.
fn json_script(id: &str, v: &serde_json::Value) -> String {
    // No markup can start inside the script: `<` is written as its escape.
    let text = v.to_string().replace('<', "\\u003c");
    format!("<script type=\"application/json\" id=\"{id}\">{text}</script>")
}

pub struct Frame {
    pub w: f64,
    pub h: f64,
    pub ml: f64,
    pub mt: f64,
    pub pw: f64,
    pub ph: f64,
}

impl Frame {
    pub fn new(w: f64, h: f64) -> Frame {
        let (ml, mr, mt, mb) = (78.0, 12.0, 10.0, 34.0);
        Frame {
            w,
            h,
            ml,
            mt,
            pw: w - ml - mr,
            ph: h - mt - mb,
        }
    }
}

fn y_ticks(out: &mut String, f: &Frame, y_max: u64) {
    for k in 0..=4 {
        let v = y_max as f64 * k as f64 / 4.0;
        let y = f.mt + f.ph - f.ph * k as f64 / 4.0;
        let _ = write!(
            out,
            "<line x1=\"{}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"tick\">{}</text>",
            f.ml,
            f.ml + f.pw,
            f.ml - 6.0,
            y + 4.0,
            esc(&human(v as u64))
        );
    }
}

fn x_ticks(out: &mut String, f: &Frame, axis: Axis, x_max: f64) {
    for k in 0..=4 {
        let x = f.ml + f.pw * k as f64 / 4.0;
        let anchor = match k {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = write!(
            out,
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\" class=\"tick\">{}</text>",
            f.mt + f.ph + 16.0,
            esc(&fmt_x(axis, x_max * k as f64 / 4.0))
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"axis\">{}</text>",
        f.ml + f.pw / 2.0,
        f.h - 4.0,
        axis_name(axis)
    );
}

/// Live memory over time, stacked by site, steps dashed, OOMs in red. `y_max`
/// shares one y-scale between charts (the ranks of a run); `bands` false draws
/// the total only.
pub fn timeline_svg(out: &mut String, tl: &Timeline, id: &str, f: &Frame, y_max: u64, bands: bool) {
    let m = tl.total.len().max(1);
    let y_max = y_max.max(1);
    let px = |j: usize| f.ml + j as f64 * f.pw / (m.max(2) - 1) as f64;
    let py = |v: u64| f.mt + f.ph - (v as f64 / y_max as f64).min(1.0) * f.ph;
    let xx = |x: f64| f.ml + x / tl.x_max * f.pw;
    let _ = write!(
        out,
        "<svg class=\"timeline\" data-id=\"{id}\" data-hover width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"live memory over time\">",
        f.w, f.h, f.w, f.h
    );
    y_ticks(out, f, y_max);
    let mut layers: Vec<(&str, &Vec<u64>)> = Vec::new();
    if bands {
        for (k, s) in tl.series.iter().enumerate() {
            layers.push((PALETTE[k % PALETTE.len()], &s.values));
        }
        layers.push((OTHER, &tl.other));
    } else {
        layers.push((PALETTE[0], &tl.total));
    }
    let mut base = vec![0u64; m];
    for (color, v) in layers {
        let mut d = String::new();
        for (j, b) in base.iter().enumerate() {
            let top = b.saturating_add(v.get(j).copied().unwrap_or(0));
            let _ = write!(
                d,
                "{}{:.1},{:.1}",
                if j == 0 { "M" } else { "L" },
                px(j),
                py(top)
            );
        }
        for (j, b) in base.iter().enumerate().rev() {
            let _ = write!(d, "L{:.1},{:.1}", px(j), py(*b));
        }
        let _ = write!(
            out,
            "<path d=\"{d}Z\" fill=\"{color}\" fill-opacity=\"0.88\"/>"
        );
        for (j, b) in base.iter_mut().enumerate() {
            *b = b.saturating_add(v.get(j).copied().unwrap_or(0));
        }
    }
    if tl.steps.len() <= 200 {
        for &s in &tl.steps {
            let x = xx(s);
            let _ = write!(
                out,
                "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#555\" stroke-dasharray=\"2,3\" stroke-opacity=\"0.5\"/>",
                f.mt,
                f.mt + f.ph
            );
        }
    }
    for &o in &tl.ooms {
        let x = xx(o);
        let right = x > f.ml + f.pw / 2.0;
        let _ = write!(
            out,
            "<line class=\"oom\" x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#d00\" stroke-width=\"2\"/><text x=\"{:.1}\" y=\"{}\" fill=\"#d00\" text-anchor=\"{}\">OOM at {}</text>",
            f.mt,
            f.mt + f.ph,
            if right { x - 4.0 } else { x + 4.0 },
            f.mt + 12.0,
            if right { "end" } else { "start" },
            esc(&fmt_x(tl.axis, o))
        );
    }
    x_ticks(out, f, tl.axis, tl.x_max);
    let _ = write!(
        out,
        "<line class=\"cursor\" x1=\"0\" y1=\"{}\" x2=\"0\" y2=\"{}\" stroke=\"#000\" stroke-width=\"1\" visibility=\"hidden\"/></svg>",
        f.mt,
        f.mt + f.ph
    );
    let series: Vec<serde_json::Value> = tl
        .series
        .iter()
        .map(|s| {
            serde_json::json!({"label": s.label, "cat": s.category.name(), "stack": s.stack, "v": s.values})
        })
        .collect();
    let x: Vec<String> = tl.x.iter().map(|&v| fmt_x(tl.axis, v)).collect();
    let data = serde_json::json!({
        "x": x, "total": tl.total, "series": if bands { series } else { Vec::new() },
        "other": if bands { tl.other.clone() } else { Vec::new() },
        "ml": f.ml, "mt": f.mt, "pw": f.pw, "ph": f.ph, "ymax": y_max,
    });
    out.push_str(&json_script(&format!("{id}-data"), &data));
}

pub fn series_legend(out: &mut String, tl: &Timeline) {
    out.push_str("<div class=\"legend\">");
    for (k, s) in tl.series.iter().enumerate() {
        let _ = write!(
            out,
            "<span><i style=\"background:{}\"></i>{} <span class=\"muted\">({})</span></span>",
            PALETTE[k % PALETTE.len()],
            esc(&s.label),
            s.category.name()
        );
    }
    let _ = write!(
        out,
        "<span><i style=\"background:{OTHER}\"></i>other sites</span></div>"
    );
}

/// One segment's blocks over time: x time, y the offset in the segment, a rectangle
/// per allocation from its alloc to its free, colored as its site's timeline band.
pub fn history_svg(out: &mut String, h: &SegmentHistory, tl: &Timeline, id: &str) {
    let f = Frame::new(960.0, 170.0);
    let xx = |x: f64| f.ml + (x / tl.x_max).clamp(0.0, 1.0) * f.pw;
    let yy = |off: u64| f.mt + off as f64 / h.total_size.max(1) as f64 * f.ph;
    let _ = write!(
        out,
        "<svg class=\"history\" data-id=\"{id}\" data-hover width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"blocks over time\">",
        f.w, f.h, f.w, f.h
    );
    // The segment exists from its cudaMalloc (or before the trace) on.
    let x0 = xx(h.x_start);
    let _ = write!(
        out,
        "<rect x=\"{x0:.1}\" y=\"{}\" width=\"{:.1}\" height=\"{}\" fill=\"#f4f4f4\" stroke=\"#ccc\"/>",
        f.mt,
        f.ml + f.pw - x0,
        f.ph
    );
    for (off, label, dy) in [
        (0u64, "0".to_string(), 9.0),
        (h.total_size, human(h.total_size), 0.0),
    ] {
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"tick\">{}</text>",
            f.ml - 6.0,
            yy(off) + dy,
            esc(&label)
        );
    }
    for b in &h.blocks {
        let (x, w) = (xx(b.x0), (xx(b.x1) - xx(b.x0)).max(0.6));
        let (y, hh) = (
            yy(b.offset),
            (yy(b.offset + b.size) - yy(b.offset)).max(0.6),
        );
        let color = b
            .series
            .map(|k| PALETTE[k % PALETTE.len()])
            .unwrap_or(OTHER);
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{hh:.1}\" fill=\"{color}\" data-l=\"{}\" data-b=\"{}\" data-t=\"{}|{}\"/>",
            b.label,
            b.size,
            esc(&fmt_x(tl.axis, b.x0)),
            esc(&fmt_x(tl.axis, b.x1))
        );
    }
    x_ticks(out, &f, tl.axis, tl.x_max);
    out.push_str("</svg>");
    out.push_str(&json_script(
        &format!("{id}-data"),
        &serde_json::json!({"labels": h.labels}),
    ));
}

/// The end-state segments: blocks in address order, colored by state.
pub fn segment_map_svg(out: &mut String, segs: &[SegmentBar]) {
    let w = 960.0;
    let ml = 170.0;
    let pw = w - ml - 10.0;
    let row = 16.0;
    let h = segs.len() as f64 * row + 8.0;
    let maxsz = segs.iter().map(|s| s.total_size).max().unwrap_or(1).max(1) as f64;
    let _ = write!(
        out,
        "<svg class=\"segments\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"segment map\">"
    );
    for (i, s) in segs.iter().enumerate() {
        let y0 = 4.0 + i as f64 * row;
        let sw = (s.total_size as f64 / maxsz * pw).max(2.0);
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" class=\"tick\">{:#x} {}</text><rect x=\"{ml}\" y=\"{y0}\" width=\"{sw:.1}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>",
            ml - 6.0,
            y0 + 11.0,
            s.address,
            esc(&human(s.total_size)),
            row - 4.0
        );
        let total: u64 = s
            .blocks
            .iter()
            .map(|b| b.0)
            .sum::<u64>()
            .max(s.total_size)
            .max(1);
        let mut off = 0u64;
        for (size, state, label) in &s.blocks {
            let bx = ml + off as f64 / total as f64 * sw;
            let bw = (*size as f64 / total as f64 * sw).max(0.5);
            let color = match state {
                BlockState::Allocated => LIVE,
                BlockState::PendingFree => DELAYED,
                BlockState::Inactive => INACTIVE,
            };
            let tip = format!("{} {}", human(*size), label);
            let _ = write!(
                out,
                "<rect x=\"{bx:.1}\" y=\"{y0}\" width=\"{bw:.1}\" height=\"{}\" fill=\"{color}\" data-tip=\"{}\"/>",
                row - 4.0,
                esc(&tip)
            );
            off = off.saturating_add(*size);
        }
    }
    out.push_str("</svg>");
    legend(
        out,
        [
            (LIVE, "live (active_allocated)"),
            (DELAYED, "delayed free"),
            (INACTIVE, "inactive (cached)"),
        ],
    );
}

/// The sites that changed between two snapshots, as bars of their change.
pub fn diff_svg(out: &mut String, d: &Diff) {
    let rows: Vec<_> = d.sites.iter().take(15).collect();
    if rows.is_empty() {
        return;
    }
    let max = rows
        .iter()
        .map(|s| s.delta_bytes.unsigned_abs())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let bars: Vec<Bar> = rows
        .iter()
        .map(|s| {
            let label = format!(
                "{}:{} in {}",
                short(&s.file),
                s.line,
                crate::snapshot::frames::short_function(&s.function)
            );
            let tip = format!(
                "{label}: {} -> {} ({} -> {} blocks), {}",
                human(s.bytes_before),
                human(s.bytes_after),
                s.blocks_before,
                s.blocks_after,
                s.verdict.replace('_', "-")
            );
            Bar {
                label,
                parts: vec![Part {
                    value: s.delta_bytes.unsigned_abs() as f64,
                    color: verdict_color(&s.verdict).to_string(),
                    tip,
                    class: "",
                }],
                note: signed_human(s.delta_bytes),
                attrs: String::new(),
            }
        })
        .collect();
    HBars {
        class: "diff",
        aria: "change per site",
        label_width: 360.0,
        plot: 490.0,
        note_width: 110.0,
        row: 22.0,
        bar: 16.0,
        scale: max,
        min_width: 1.0,
        tips: Tips::Script,
    }
    .draw(out, &bars);
    legend(
        out,
        [
            (
                GROWING,
                "growing: bytes and blocks grew (leaking or retaining)",
            ),
            (ONE_TIME, "one-time growth"),
            (SHRINKING, "shrinking"),
        ],
    );
}

/// A site's change by its verdict.
fn verdict_color(verdict: &str) -> &'static str {
    match verdict {
        "growing" => GROWING,
        "one_time" => ONE_TIME,
        _ => SHRINKING,
    }
}

const GROWING: &str = crate::page::PALETTE[3];
const ONE_TIME: &str = crate::page::PALETTE[1];
const SHRINKING: &str = crate::page::PALETTE[2];
/// The segment map's blocks by state.
const LIVE: &str = crate::page::PALETTE[0];
const DELAYED: &str = crate::page::PALETTE[1];
const INACTIVE: &str = "#e0e0e0";
