//! `--html FILE`: one self-contained page (inline SVG, CSS and a few lines of script;
//! nothing loaded from the network): live memory over time stacked by the top sites
//! with OOMs marked, the segment map, and the report's tables.

use std::fmt::Write;

use crate::snapshot::sites::Category;
use crate::snapshot::model::BlockState;
use super::{Report, SegmentBar, Timeline, human, short};

pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
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

const PALETTE: [&str; 9] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f",
];

fn cat_color(c: Category) -> &'static str {
    match c {
        Category::Parameters => "#4e79a7",
        Category::Gradients => "#76b7b2",
        Category::OptimizerState => "#59a14f",
        Category::Activations => "#f28e2b",
        Category::Temporary => "#edc948",
        Category::Communication => "#b07aa1",
        Category::Other => "#9c755f",
    }
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}svg{max-width:100%;height:auto}\
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}\
td.n{text-align:right;font-variant-numeric:tabular-nums}code{font-size:12px}\
.pat{border-left:4px solid #e15759;padding:4px 12px;margin:10px 0;background:#fafafa}\
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}\
svg text{font:11px system-ui,sans-serif}.muted{color:#777}#tip{position:fixed;pointer-events:none;background:#222;color:#fff;padding:3px 6px;font-size:12px;display:none;border-radius:3px}";

fn timeline_svg(out: &mut String, tl: &Timeline, title: &str, small: bool) {
    let (w, h) = if small {
        (560.0, 120.0)
    } else {
        (960.0, 300.0)
    };
    let (ml, mb, mt) = (70.0, 24.0, 10.0);
    let pw = w - ml - 10.0;
    let ph = h - mb - mt;
    let m = tl.total.len().max(1);
    let max = tl.total.iter().copied().max().unwrap_or(0).max(1) as f64;
    let x = |j: usize| {
        ml + if m <= 1 {
            0.0
        } else {
            j as f64 * pw / (m - 1) as f64
        }
    };
    let y = |v: u64| mt + ph - v as f64 / max * ph;
    let _ = write!(
        out,
        "<svg class=\"timeline\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(title)
    );
    let _ = write!(
        out,
        "<line x1=\"{ml}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text><text x=\"{}\" y=\"{}\">event 0</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">event {}</text>",
        mt + ph,
        ml + pw,
        mt + ph,
        ml - 4.0,
        mt + 10.0,
        esc(&human(max as u64)),
        ml - 4.0,
        mt + ph,
        ml,
        h - 6.0,
        ml + pw,
        h - 6.0,
        tl.events.saturating_sub(1)
    );
    let mut layers: Vec<(String, String, &Vec<u64>)> = Vec::new();
    if small || tl.series.is_empty() {
        layers.push(("live".into(), PALETTE[0].into(), &tl.total));
    } else {
        for (k, (label, _, v)) in tl.series.iter().enumerate() {
            layers.push((label.clone(), PALETTE[k % PALETTE.len()].into(), v));
        }
        layers.push(("other sites".into(), "#bab0ac".into(), &tl.other));
    }
    let mut base = vec![0u64; m];
    for (label, color, v) in &layers {
        let mut pts = String::new();
        for (j, b) in base.iter().enumerate() {
            let top = b.saturating_add(v.get(j).copied().unwrap_or(0));
            let _ = write!(pts, "{:.1},{:.1} ", x(j), y(top));
        }
        for (j, b) in base.iter().enumerate().rev() {
            let _ = write!(pts, "{:.1},{:.1} ", x(j), y(*b));
        }
        let peak = v.iter().copied().max().unwrap_or(0);
        let _ = write!(
            out,
            "<polygon points=\"{pts}\" fill=\"{color}\" fill-opacity=\"0.85\" data-tip=\"{}\"><title>{}</title></polygon>",
            esc(&format!("{label}: peak {}", human(peak))),
            esc(&format!("{label}: peak {}", human(peak)))
        );
        for (j, b) in base.iter_mut().enumerate() {
            *b = b.saturating_add(v.get(j).copied().unwrap_or(0));
        }
    }
    let sample_of = |ev: u32| tl.sample_events.partition_point(|&s| s < ev).min(m - 1);
    if !small && tl.step_starts.len() <= 200 {
        for &s in &tl.step_starts {
            let xs = x(sample_of(s));
            let _ = write!(
                out,
                "<line x1=\"{xs:.1}\" y1=\"{mt}\" x2=\"{xs:.1}\" y2=\"{}\" stroke=\"#666\" stroke-dasharray=\"2,3\" stroke-opacity=\"0.5\"/>",
                mt + ph
            );
        }
    }
    for &o in &tl.ooms {
        let xo = x(sample_of(o));
        let _ = write!(
            out,
            "<line class=\"oom\" x1=\"{xo:.1}\" y1=\"{mt}\" x2=\"{xo:.1}\" y2=\"{}\" stroke=\"#d00\" stroke-width=\"2\"><title>OOM at event {o}</title></line><text x=\"{:.1}\" y=\"{}\" fill=\"#d00\" text-anchor=\"{}\">OOM</text>",
            mt + ph,
            if xo > ml + pw / 2.0 {
                xo - 3.0
            } else {
                xo + 3.0
            },
            mt + 12.0,
            if xo > ml + pw / 2.0 { "end" } else { "start" }
        );
    }
    out.push_str("</svg>");
    if !small && !tl.series.is_empty() {
        out.push_str("<div class=\"legend\">");
        for (k, (label, cat, _)) in tl.series.iter().enumerate() {
            let _ = write!(
                out,
                "<span><i style=\"background:{}\"></i>{} <span class=\"muted\">({})</span></span>",
                PALETTE[k % PALETTE.len()],
                esc(label),
                cat.name()
            );
        }
        out.push_str("<span><i style=\"background:#bab0ac\"></i>other sites</span></div>");
    }
}

fn segment_svg(out: &mut String, segs: &[SegmentBar]) {
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
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{:#x} {}</text><rect x=\"{ml}\" y=\"{y0}\" width=\"{sw:.1}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>",
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
                BlockState::Allocated => "#4e79a7",
                BlockState::PendingFree => "#f28e2b",
                BlockState::Inactive => "#e0e0e0",
            };
            let tip = format!("{} {}", human(*size), label);
            let _ = write!(
                out,
                "<rect x=\"{bx:.1}\" y=\"{y0}\" width=\"{bw:.1}\" height=\"{}\" fill=\"{color}\" data-tip=\"{}\"><title>{}</title></rect>",
                row - 4.0,
                esc(&tip),
                esc(&tip)
            );
            off = off.saturating_add(*size);
        }
    }
    out.push_str("</svg><div class=\"legend\"><span><i style=\"background:#4e79a7\"></i>live (active_allocated)</span><span><i style=\"background:#f28e2b\"></i>delayed free</span><span><i style=\"background:#e0e0e0\"></i>inactive (cached)</span></div>");
}

fn row(out: &mut String, cells: &[String], numeric: &[bool]) {
    out.push_str("<tr>");
    for (i, c) in cells.iter().enumerate() {
        if numeric.get(i).copied().unwrap_or(false) {
            let _ = write!(out, "<td class=\"n\">{}</td>", esc(c));
        } else {
            let _ = write!(out, "<td>{}</td>", esc(c));
        }
    }
    out.push_str("</tr>");
}

fn head(out: &mut String, cells: &[&str]) {
    out.push_str("<table><tr>");
    for c in cells {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    out.push_str("</tr>");
}

pub fn render(r: &Report) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(
        o,
        "<title>instrument snapshot: {}</title>",
        esc(&r.source.path)
    );
    o.push_str("<script>window.__errors=[];window.addEventListener('error',function(e){window.__errors.push(String(e.message||e));});</script>");
    let _ = write!(
        o,
        "<style>{STYLE}</style></head><body><div id=\"tip\"></div>"
    );
    let _ = write!(
        o,
        "<h1>Memory snapshot: <code>{}</code></h1><p class=\"muted\">{} &middot; {} &middot; {}</p>",
        esc(&r.source.path),
        esc(&r.source.layout.format),
        esc(&human(r.source.file_bytes)),
        esc(&r.device_note)
    );

    if !r.ranks.is_empty() {
        o.push_str("<h2>Ranks</h2>");
        head(
            &mut o,
            &[
                "rank",
                "peak",
                "live",
                "reserved",
                "OOMs",
                "file",
                "stands out",
            ],
        );
        for x in &r.ranks {
            row(
                &mut o,
                &[
                    x.rank.to_string(),
                    human(x.peak_bytes),
                    human(x.allocated_bytes),
                    human(x.reserved_bytes),
                    x.ooms.to_string(),
                    x.file.clone(),
                    x.reasons.join("; "),
                ],
                &[true, true, true, true, true, false, false],
            );
        }
        o.push_str("</table>");
        for x in r.ranks.iter().filter(|x| x.stands_out) {
            let _ = write!(o, "<p>Rank {} differs most at:</p>", x.rank);
            head(&mut o, &["delta", "this rank", "median", "site"]);
            for d in &x.differing_sites {
                row(
                    &mut o,
                    &[
                        format!("{:+}", d.delta_bytes),
                        human(d.bytes),
                        human(d.median_bytes),
                        format!("{}:{} in {}", d.file, d.line, d.function),
                    ],
                    &[true, true, true, false],
                );
            }
            o.push_str("</table>");
        }
        head(&mut o, &["file", "rank", "note"]);
        for f in &r.rank_files {
            row(
                &mut o,
                &[
                    f.file.clone(),
                    f.rank.map(|r| r.to_string()).unwrap_or_default(),
                    f.note.clone(),
                ],
                &[false, true, false],
            );
        }
        o.push_str("</table>");
        for (rank, tl) in &r.rank_timelines {
            let _ = write!(o, "<h3>Rank {rank}: live memory over time</h3>");
            timeline_svg(&mut o, tl, &format!("rank {rank} live memory"), true);
        }
    }

    if let Some(tl) = &r.timeline {
        o.push_str("<h2>Live memory over time</h2><p class=\"muted\">From <code>device_traces</code>, stacked by the sites holding the most at the peak; dashed lines start steps, red lines are OOMs.</p>");
        timeline_svg(&mut o, tl, "live memory over time", false);
    }

    if !r.patterns.is_empty() {
        o.push_str("<h2>Patterns</h2>");
        for p in &r.patterns {
            let _ = write!(
                o,
                "<div class=\"pat\"><b>{}</b> <code>{}</code><ul>",
                esc(&p.title),
                esc(&p.name)
            );
            for e in &p.evidence {
                let _ = write!(o, "<li>{}</li>", esc(e));
            }
            let _ = write!(o, "</ul><p><b>Fix:</b> {}</p></div>", esc(&p.fix));
        }
    }

    o.push_str("<h2>Totals</h2>");
    head(&mut o, &["", "bytes", "blocks"]);
    let t = &r.totals;
    for (name, b, n) in [
        ("reserved (segments)", t.reserved_bytes, t.segments),
        (
            "live (active_allocated)",
            t.allocated_bytes,
            t.allocated_blocks,
        ),
        (
            "delayed frees (active_pending_free)",
            t.pending_free_bytes,
            t.pending_free_blocks,
        ),
        ("inactive cached", t.inactive_bytes, t.inactive_blocks),
    ] {
        row(
            &mut o,
            &[name.into(), human(b), n.to_string()],
            &[false, true, true],
        );
    }
    row(
        &mut o,
        &[
            "requested / rounding waste".into(),
            human(t.requested_bytes),
            human(t.rounding_waste_bytes),
        ],
        &[false, true, true],
    );
    row(
        &mut o,
        &[
            "largest inactive block / inactive share of reserved".into(),
            human(t.largest_inactive_block_bytes),
            format!("{:.1}%", t.inactive_fraction * 100.0),
        ],
        &[false, true, true],
    );
    o.push_str("</table>");
    if !r.streams.is_empty() {
        head(
            &mut o,
            &[
                "stream",
                "reserved",
                "live",
                "delayed frees",
                "inactive",
                "segments",
            ],
        );
        for s in &r.streams {
            row(
                &mut o,
                &[
                    format!("{:#x}", s.stream),
                    human(s.totals.reserved_bytes),
                    human(s.totals.allocated_bytes),
                    human(s.totals.pending_free_bytes),
                    human(s.totals.inactive_bytes),
                    s.totals.segments.to_string(),
                ],
                &[false, true, true, true, true, true],
            );
        }
        o.push_str("</table>");
    }

    let _ = write!(
        o,
        "<h2>Where live memory goes</h2><p class=\"muted\">Top {} of {} sites, grouped by the first frame in user code.</p>",
        r.sites.len(),
        r.sites_total
    );
    head(
        &mut o,
        &[
            "bytes",
            "% live",
            "blocks",
            "category",
            "site",
            "called from",
        ],
    );
    for s in &r.sites {
        let _ = write!(
            o,
            "<tr><td class=\"n\">{}</td><td class=\"n\">{:.1}%</td><td class=\"n\">{}</td><td><i style=\"display:inline-block;width:9px;height:9px;background:{}\"></i> {}</td><td>{}</td><td class=\"muted\">{}</td></tr>",
            esc(&human(s.bytes)),
            s.percent,
            s.blocks,
            cat_color(s.category),
            s.category.name(),
            esc(&format!("{}:{} in {}", s.file, s.line, s.function)),
            esc(&s
                .stack
                .iter()
                .skip(1)
                .cloned()
                .collect::<Vec<_>>()
                .join(" ← "))
        );
    }
    o.push_str("</table>");

    if let Some(d) = &r.diff {
        let _ = write!(
            o,
            "<h2>Diff</h2><p><code>{}</code> &rarr; <code>{}</code>: live {} &rarr; {}</p>",
            esc(&d.before.path),
            esc(&d.after.path),
            esc(&human(d.totals_before.allocated_bytes)),
            esc(&human(d.totals_after.allocated_bytes))
        );
        head(
            &mut o,
            &["verdict", "delta", "blocks", "bytes", "site", "category"],
        );
        for s in &d.sites {
            row(
                &mut o,
                &[
                    s.verdict.clone(),
                    format!("{:+}", s.delta_bytes),
                    format!("{} → {}", s.blocks_before, s.blocks_after),
                    format!("{} → {}", human(s.bytes_before), human(s.bytes_after)),
                    format!("{}:{} in {}", s.file, s.line, s.function),
                    s.category.name().into(),
                ],
                &[false, true, true, true, false, false],
            );
        }
        o.push_str("</table>");
    }

    if r.trace.present {
        let tr = &r.trace;
        let _ = write!(
            o,
            "<h2>Trace</h2><p>{} events analysed, {} older dropped. Peak live {}.</p>",
            tr.kept_events,
            tr.dropped,
            esc(&human(tr.peak_live_bytes))
        );
        head(&mut o, &["action", "count"]);
        for (k, v) in &tr.counts {
            row(&mut o, &[k.clone(), v.to_string()], &[false, true]);
        }
        o.push_str("</table>");
        if !tr.pending_frees.is_empty() {
            head(
                &mut o,
                &["frees requested, not completed: stream", "blocks", "bytes"],
            );
            for p in &tr.pending_frees {
                row(
                    &mut o,
                    &[
                        format!("{:#x}", p.stream),
                        p.blocks.to_string(),
                        human(p.bytes),
                    ],
                    &[false, true, true],
                );
            }
            o.push_str("</table>");
        }
        if !tr.repeated_unfreed.is_empty() {
            head(
                &mut o,
                &[
                    "allocated every step, never freed",
                    "steps",
                    "blocks",
                    "bytes",
                ],
            );
            for u in &tr.repeated_unfreed {
                row(
                    &mut o,
                    &[
                        format!("{}:{} in {}", short(&u.file), u.line, u.function),
                        format!("{} of {}", u.steps_with_unfreed, u.steps),
                        u.blocks.to_string(),
                        human(u.bytes),
                    ],
                    &[false, true, true, true],
                );
            }
            o.push_str("</table>");
        }
    }

    for (i, oom) in r.oom.iter().enumerate() {
        let _ = write!(
            o,
            "<h2>OOM #{}{}</h2><p>Tried to allocate <b>{}</b> with {} free on the device (stream {:#x}), {} live just before, at <code>{}</code>.</p>",
            i + 1,
            oom.rank.map(|r| format!(" (rank {r})")).unwrap_or_default(),
            esc(&human(oom.size_bytes)),
            esc(&human(oom.device_free_bytes)),
            oom.stream,
            esc(&human(oom.live_bytes_before)),
            esc(&oom.site.label())
        );
        head(
            &mut o,
            &["holding just before", "bytes", "blocks", "category"],
        );
        for h in &oom.holders {
            row(
                &mut o,
                &[
                    format!("{}:{} in {}", h.file, h.line, h.function),
                    human(h.bytes),
                    h.blocks.to_string(),
                    h.category.name().into(),
                ],
                &[false, true, true, false],
            );
        }
        o.push_str("</table>");
    }

    if !r.segment_map.is_empty() {
        let _ = write!(
            o,
            "<h2>Segment map</h2><p class=\"muted\">{} segment(s) on device {}, blocks in address order (the largest 200 segments are drawn).</p>",
            r.totals.segments,
            r.device.unwrap_or(0)
        );
        segment_svg(&mut o, &r.segment_map);
    }

    o.push_str(
        "<script>(function(){var tip=document.getElementById('tip');\
document.addEventListener('mousemove',function(e){var t=e.target&&e.target.getAttribute&&e.target.getAttribute('data-tip');\
if(t){tip.textContent=t;tip.style.display='block';tip.style.left=(e.clientX+12)+'px';tip.style.top=(e.clientY+12)+'px';}else{tip.style.display='none';}});\
window.addEventListener('load',function(){var s=document.createElement('div');s.id='render-status';\
var n=document.querySelectorAll('svg').length;\
s.textContent=window.__errors.length?('render-error: '+window.__errors.join(' | ')):('render-ok svg='+n);\
s.style.display='none';document.body.appendChild(s);});})();</script>",
    );
    o.push_str("</body></html>\n");
    o
}
