//! `--html FILE`: one self-contained page (inline CSS and SVG, no scripts, no network). At the
//! top, every process (rank) on one time axis: its NVTX ranges (the longest, nesting depth 0 to
//! 2, one thin row each), a compute lane and a communication lane (opacity = how busy the GPU
//! was in each bucket). Below, per process, the category, overlap, kernel and range tables.

use std::fmt::Write;

use crate::nsys::ranks::diff::Diff;
use crate::nsys::report::{
    Document, Process, ProcessTimeline, Report, Timeline, ms, truncate, work_line,
};

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const COMPUTE: &str = "#1f77b4";
const COMMUNICATION: &str = "#d62728";

/// A stable colour per range name.
fn name_color(name: &str) -> String {
    let mut h: u32 = 2166136261;
    for b in name.bytes() {
        h = (h ^ b as u32).wrapping_mul(16777619);
    }
    format!("hsl({},55%,62%)", h % 360)
}

const LABEL_W: f64 = 170.0;
const PLOT_W: f64 = 1200.0;
const NVTX_ROW: f64 = 11.0;
const LANE: f64 = 14.0;
const GAP: f64 = 10.0;

/// One busy lane: runs of buckets with the same (quantised) busy fraction become one rect.
fn lane(out: &mut String, busy: &[i64], bucket_ns: f64, y: f64, color: &str, name: &str) {
    let _ = write!(
        out,
        "<g class=\"lane\" data-lane=\"{name}\" fill=\"{color}\"><rect class=\"bg\" x=\"{LABEL_W}\" y=\"{y:.1}\" width=\"{PLOT_W}\" height=\"{:.1}\" fill=\"#f3f3f3\"/>",
        LANE - 2.0
    );
    let bw = PLOT_W / busy.len().max(1) as f64;
    let level = |b: i64| -> u32 {
        if b <= 0 {
            0
        } else {
            ((b as f64 / bucket_ns).clamp(0.0, 1.0) * 20.0)
                .ceil()
                .max(1.0) as u32
        }
    };
    let mut i = 0;
    while i < busy.len() {
        let l = level(busy[i]);
        let mut j = i + 1;
        while j < busy.len() && level(busy[j]) == l {
            j += 1;
        }
        if l > 0 {
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill-opacity=\"{:.2}\"/>",
                LABEL_W + i as f64 * bw,
                (j - i) as f64 * bw,
                LANE - 2.0,
                0.12 + 0.88 * l as f64 / 20.0
            );
        }
        i = j;
    }
    out.push_str("</g>\n");
}

fn timeline(out: &mut String, t: &Timeline, processes: &[Process]) {
    if t.end_ns <= t.start_ns || t.processes.is_empty() {
        return;
    }
    let span = (t.end_ns - t.start_ns) as f64;
    let bucket_ns = span / t.buckets.max(1) as f64;
    let x = |ns: i64| LABEL_W + (ns - t.start_ns) as f64 / span * PLOT_W;
    let block = 3.0 * NVTX_ROW + 2.0 * LANE + GAP;
    let height = block * t.processes.len() as f64 + 30.0;
    let _ = writeln!(
        out,
        "<svg class=\"timeline\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\" role=\"img\" aria-label=\"all processes on one time axis\">",
        w = LABEL_W + PLOT_W + 10.0
    );
    for (r, pt) in t.processes.iter().enumerate() {
        let y0 = r as f64 * block;
        let name = processes
            .iter()
            .find(|p| p.pid == pt.pid)
            .and_then(|p| p.name.clone())
            .unwrap_or_default();
        let _ = writeln!(out, "<g class=\"rank\" data-pid=\"{}\">", pt.pid);
        let _ = writeln!(
            out,
            "<text x=\"0\" y=\"{:.1}\" class=\"lbl\">pid {} {}</text><text x=\"0\" y=\"{:.1}\" class=\"sub\">NVTX</text><text x=\"0\" y=\"{:.1}\" class=\"sub\">compute</text><text x=\"0\" y=\"{:.1}\" class=\"sub\">communication</text>",
            y0 + 10.0,
            pt.pid,
            esc(&truncate(&name, 12)),
            y0 + 3.0 * NVTX_ROW - 2.0,
            y0 + 3.0 * NVTX_ROW + LANE - 3.0,
            y0 + 3.0 * NVTX_ROW + 2.0 * LANE - 3.0
        );
        nvtx_rows(out, pt, y0, &x);
        lane(
            out,
            &pt.compute,
            bucket_ns,
            y0 + 3.0 * NVTX_ROW,
            COMPUTE,
            "compute",
        );
        lane(
            out,
            &pt.communication,
            bucket_ns,
            y0 + 3.0 * NVTX_ROW + LANE,
            COMMUNICATION,
            "communication",
        );
        out.push_str("</g>\n");
    }
    // The shared time axis.
    let ay = block * t.processes.len() as f64 + 4.0;
    let _ = write!(
        out,
        "<g class=\"axis\"><line x1=\"{LABEL_W}\" y1=\"{ay:.1}\" x2=\"{:.1}\" y2=\"{ay:.1}\" stroke=\"#888\"/>",
        LABEL_W + PLOT_W
    );
    for i in 0..=10 {
        let ns = t.start_ns + (span * i as f64 / 10.0) as i64;
        let tx = x(ns);
        let _ = write!(
            out,
            "<line x1=\"{tx:.1}\" y1=\"{ay:.1}\" x2=\"{tx:.1}\" y2=\"{:.1}\" stroke=\"#888\"/><text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"{}\">{} ms</text>",
            ay + 4.0,
            ay + 16.0,
            if i == 0 {
                "start"
            } else if i == 10 {
                "end"
            } else {
                "middle"
            },
            ms(ns - t.start_ns)
        );
    }
    out.push_str("</g>\n</svg>\n");
}

fn nvtx_rows(out: &mut String, pt: &ProcessTimeline, y0: f64, x: &impl Fn(i64) -> f64) {
    out.push_str("<g class=\"lane\" data-lane=\"nvtx\">");
    for r in &pt.ranges {
        // Clipped to the axis (the GPU work's span; ranges can open before it and end after).
        let (x0, x1) = (
            x(r.start_ns).max(LABEL_W),
            x(r.end_ns).min(LABEL_W + PLOT_W),
        );
        let w = x1 - x0;
        if w < 1.0 {
            continue;
        }
        let y = y0 + r.depth as f64 * NVTX_ROW;
        let _ = write!(
            out,
            "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{} ({} ms)</title></rect>",
            NVTX_ROW - 1.0,
            name_color(&r.name),
            esc(&r.name),
            ms(r.end_ns - r.start_ns)
        );
        if w > 50.0 {
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" class=\"rl\">{}</text>",
                x0 + 2.0,
                y + NVTX_ROW - 3.0,
                esc(&truncate(&r.name, (w / 5.5) as usize))
            );
        }
    }
    out.push_str("</g>\n");
}

pub fn render(doc: &Document) -> String {
    let mut o = String::new();
    for r in &doc.exports {
        o.push_str(&export(r));
    }
    o
}

pub fn render_diff(_d: &Diff) -> String {
    String::new()
}

fn export(report: &Report) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    let _ = writeln!(o, "<title>nsys report: {}</title>", esc(&report.file));
    o.push_str(
        "<style>body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.2em}td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}\
td.n,th.n{text-align:left;max-width:60em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}\
.lbl{font:12px sans-serif;font-weight:600}.sub{font:10px sans-serif;fill:#666}.rl{font:9px sans-serif;fill:#111;pointer-events:none}\
.axis text{font:11px sans-serif;fill:#555}h2{margin-top:1.6em}\
.sw{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 1em;vertical-align:middle}</style>\n</head><body>\n",
    );
    let _ = writeln!(o, "<h1>nsys report</h1><p>{}</p>", esc(&report.file));
    let t = &report.totals;
    let _ = writeln!(
        o,
        "<p id=\"totals\">{} process(es); {}; communication {:.1}% of GPU time.</p>",
        report.processes.len(),
        work_line(t.kernel_ns, t.kernel_count, t.graph_ns, t.graph_count),
        t.communication_share * 100.0
    );
    let _ = writeln!(
        o,
        "<p>CUDA graphs: {}</p>",
        esc(&report.capture.cuda_graphs)
    );
    let _ = writeln!(
        o,
        "<p><span class=\"sw\" style=\"background:{COMPUTE}\"></span>compute (kernels that are not communication, CUDA graphs)<span class=\"sw\" style=\"background:{COMMUNICATION}\"></span>communication; opacity: share of each time slice the GPU was busy. NVTX: the longest ranges at nesting depth 0 to 2 (hover for names).</p>"
    );
    if let Some(tl) = &report.timeline {
        timeline(&mut o, tl, &report.processes);
    }
    for p in &report.processes {
        let _ = writeln!(
            o,
            "<section class=\"process\" id=\"pid-{}\"><h2>process {} ({}) on GPU {}</h2>",
            p.pid,
            p.pid,
            esc(p.name.as_deref().unwrap_or("?")),
            p.devices
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        o.push_str("<table class=\"categories\"><tr><th class=\"n\">category</th><th>time ms</th><th>share</th><th>count</th></tr>\n");
        for c in p.categories.iter().filter(|c| c.count > 0) {
            let _ = writeln!(
                o,
                "<tr data-category=\"{}\"><td class=\"n\">{}</td><td>{}</td><td>{:.1}%</td><td>{}</td></tr>",
                esc(&c.category),
                esc(&c.category),
                ms(c.time_ns),
                c.share * 100.0,
                c.count
            );
        }
        o.push_str("</table>\n");
        let ov = &p.overlap;
        let _ = writeln!(
            o,
            "<p>Communication {} ms ({:.1}% of GPU time); {} ms hidden under compute ({:.1}%), {} ms exposed.</p>",
            ms(p.communication.time_ns),
            p.communication.share_of_gpu_time * 100.0,
            ms(ov.hidden_ns),
            ov.hidden_share * 100.0,
            ms(ov.exposed_ns)
        );
        o.push_str("<table class=\"kernels\"><tr><th>total ms</th><th>count</th><th>avg us</th><th class=\"n\">category</th><th class=\"n\">kernel</th></tr>\n");
        for k in &p.kernels {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td class=\"n\">{}</td><td class=\"n\" title=\"{}\">{}</td></tr>",
                ms(k.stats.total_ns),
                k.stats.count,
                k.stats.avg_ns / 1e3,
                esc(&k.category),
                esc(&k.name),
                esc(&truncate(&k.name, 160))
            );
        }
        if let Some(r) = &p.kernels_rest {
            let _ = writeln!(
                o,
                "<tr class=\"rest\"><td>{}</td><td>{}</td><td></td><td class=\"n\"></td><td class=\"n\">{} more kernels</td></tr>",
                ms(r.total_ns),
                r.count,
                r.rows
            );
        }
        o.push_str("</table>\n");
        let ranges: Vec<_> = p.nvtx.iter().filter(|r| r.inclusive_ns > 0).collect();
        if !ranges.is_empty() {
            o.push_str("<table class=\"nvtx\"><tr><th>inclusive ms</th><th>exclusive ms</th><th>proj ms</th><th>instances</th><th class=\"n\">range</th></tr>\n");
            for r in ranges {
                let _ = writeln!(
                    o,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}{}</td></tr>",
                    ms(r.inclusive_ns),
                    ms(r.exclusive_ns),
                    ms(r.proj.total_ns),
                    r.instances,
                    esc(&r.nsys_name),
                    r.shapes
                        .as_deref()
                        .map(|s| format!(" {}", esc(s)))
                        .unwrap_or_default()
                );
            }
            if let Some(r) = &p.nvtx_rest {
                let _ = writeln!(
                    o,
                    "<tr class=\"rest\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{} more range names</td></tr>",
                    ms(r.inclusive_ns),
                    ms(r.exclusive_ns),
                    ms(r.proj_total_ns),
                    r.instances,
                    r.rows
                );
            }
            o.push_str("</table>\n");
        }
        o.push_str("</section>\n");
    }
    if !report.notes.is_empty() {
        o.push_str("<h2>Notes</h2><ul>\n");
        for n in &report.notes {
            let _ = writeln!(o, "<li>{}</li>", esc(&n.message));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</body></html>\n");
    o
}
