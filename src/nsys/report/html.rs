//! `--html FILE`: one self-contained page (inline CSS and SVG, no scripts, no network) with a
//! per-process timeline of kernel categories and the report's tables.

use std::fmt::Write;

use crate::nsys::report::{Process, Report};

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

fn color(category: &str) -> &'static str {
    match category {
        "communication" => "#d62728",
        "gemm" => "#1f77b4",
        "attention" => "#9467bd",
        "elementwise" => "#2ca02c",
        "memcpy" => "#ff7f0e",
        "memset" => "#8c564b",
        _ => "#7f7f7f",
    }
}

fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn timeline(out: &mut String, p: &Process) {
    let Some(t) = &p.timeline else { return };
    if t.rows.is_empty() || t.end_ns <= t.start_ns {
        return;
    }
    let label_w = 110.0;
    let width = 1000.0;
    let row_h = 18.0;
    let h = row_h * t.rows.len() as f64 + 20.0;
    let bw = width / t.buckets as f64;
    let bucket_ns = (t.end_ns - t.start_ns) as f64 / t.buckets as f64;
    let _ = writeln!(
        out,
        "<svg class=\"timeline\" data-pid=\"{}\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"timeline of process {}\">",
        p.pid,
        label_w + width,
        h,
        label_w + width,
        h,
        p.pid
    );
    for (i, (cat, buckets)) in t.rows.iter().enumerate() {
        let y = i as f64 * row_h;
        let _ = writeln!(
            out,
            "<text x=\"0\" y=\"{:.1}\" class=\"lbl\">{}</text>",
            y + row_h * 0.7,
            esc(cat)
        );
        let _ = writeln!(
            out,
            "<rect x=\"{label_w}\" y=\"{y:.1}\" width=\"{width}\" height=\"{:.1}\" fill=\"#f4f4f4\"/>",
            row_h - 2.0
        );
        let mut path = String::new();
        for (b, &busy) in buckets.iter().enumerate() {
            if busy <= 0 {
                continue;
            }
            let frac = (busy as f64 / bucket_ns).clamp(0.0, 1.0);
            let _ = write!(
                path,
                "<rect x=\"{:.2}\" y=\"{y:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill-opacity=\"{:.3}\"/>",
                label_w + b as f64 * bw,
                bw.max(0.5),
                row_h - 2.0,
                0.15 + 0.85 * frac
            );
        }
        let _ = writeln!(
            out,
            "<g class=\"cat\" data-category=\"{}\" fill=\"{}\">{}</g>",
            esc(cat),
            color(cat),
            path
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{label_w}\" y=\"{:.1}\" class=\"axis\">{} ms</text><text x=\"{}\" y=\"{:.1}\" class=\"axis\" text-anchor=\"end\">{} ms (span {} ms)</text>",
        h - 4.0,
        ms(t.start_ns),
        label_w + width,
        h - 4.0,
        ms(t.end_ns),
        ms(t.end_ns - t.start_ns)
    );
    out.push_str("</svg>\n");
}

pub fn render(report: &Report) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    let _ = writeln!(o, "<title>nsys report: {}</title>", esc(&report.file));
    o.push_str(
        "<style>body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.2em}td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:right}\
td.n,th.n{text-align:left;max-width:60em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}\
.lbl{font:12px sans-serif}.axis{font:11px sans-serif;fill:#555}h2{margin-top:1.6em}\
.sw{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 1em;vertical-align:middle}</style>\n</head><body>\n",
    );
    let _ = writeln!(o, "<h1>nsys report</h1><p>{}</p>", esc(&report.file));
    o.push_str("<p>");
    for c in [
        "communication",
        "gemm",
        "attention",
        "elementwise",
        "other",
        "memcpy",
        "memset",
    ] {
        let _ = write!(
            o,
            "<span class=\"sw\" style=\"background:{}\"></span>{}",
            color(c),
            c
        );
    }
    o.push_str("</p>\n");
    let t = &report.totals;
    let _ = writeln!(
        o,
        "<p id=\"totals\">{} process(es); kernels {} ms in {} launches; communication {:.1}% of kernel time.</p>",
        report.processes.len(),
        ms(t.kernel_ns),
        t.kernel_count,
        t.communication_share * 100.0
    );
    for p in &report.processes {
        let _ = writeln!(
            o,
            "<section class=\"process\" id=\"pid-{}\"><h2>process {} ({}) on device {}</h2>",
            p.pid,
            p.pid,
            esc(p.name.as_deref().unwrap_or("?")),
            p.devices
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        timeline(&mut o, p);
        o.push_str("<table class=\"categories\"><tr><th class=\"n\">category</th><th>time ms</th><th>share</th><th>kernels</th></tr>\n");
        for c in &p.categories {
            let _ = writeln!(
                o,
                "<tr><td class=\"n\">{}</td><td>{}</td><td>{:.1}%</td><td>{}</td></tr>",
                c.category,
                ms(c.time_ns),
                c.share * 100.0,
                c.count
            );
        }
        o.push_str("</table>\n");
        let ov = &p.overlap;
        let _ = writeln!(
            o,
            "<p>Communication {} ms ({:.1}% of kernel time); {} ms hidden under compute ({:.1}%), {} ms exposed.</p>",
            ms(p.communication.time_ns),
            p.communication.share_of_kernel_time * 100.0,
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
                k.category,
                esc(&k.name),
                esc(&k.name)
            );
        }
        o.push_str("</table>\n");
        let ranges: Vec<_> = p.nvtx.iter().filter(|r| r.inclusive_ns > 0).collect();
        if !ranges.is_empty() {
            o.push_str("<table class=\"nvtx\"><tr><th>inclusive ms</th><th>exclusive ms</th><th>proj ms</th><th>instances</th><th class=\"n\">range</th></tr>\n");
            for r in ranges {
                let _ = writeln!(
                    o,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
                    ms(r.inclusive_ns),
                    ms(r.exclusive_ns),
                    ms(r.proj.total_ns),
                    r.instances,
                    esc(&r.nsys_name)
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
