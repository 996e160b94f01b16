//! `--html FILE`: one self-contained page (inline SVG, CSS and a few lines of script;
//! nothing loaded from the network): memory over the profiled step for every rank on one
//! scale, the allocation and saved tensors of each detail layer's stages, the setup
//! breakdown, and the report's tables.

use std::fmt::Write;

use super::fmt::esc;
use super::model::*;
use super::text::{
    command_line, gib, mesh_axes, mib, no_standout, peak_text, rank_name, signed_gib, standout_text,
};

const GIB: f64 = 1073741824.0;
const MIB: f64 = 1048576.0;

const COLORS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

pub const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}\
svg{max-width:100%;height:auto;display:block}h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}\
h3{font-size:14px;margin:18px 0 6px}table{border-collapse:collapse;margin:8px 0}\
td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}\
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}code{font-size:12px;overflow-wrap:anywhere}.muted{color:#777}\
.standout{border-left:4px solid #e15759;padding:4px 12px;margin:10px 0;background:#fafafa}\
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}\
svg text{font:11px system-ui,sans-serif}.row{display:flex;flex-wrap:wrap;gap:24px}\
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;padding:3px 6px;font-size:12px;display:none;border-radius:3px}";

pub fn render(r: &Report) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>instrument log</title>");
    let _ = write!(o, "<style>{STYLE}{}</style>", crate::findings::html::STYLE);
    o.push_str("<script>window.__errors=[];window.addEventListener('error',function(e){window.__errors.push(String(e.message));});</script>");
    o.push_str("</head><body><div id=\"tip\"></div>");
    let ranks: Vec<String> = r.ranks.iter().map(|x| x.rank.to_string()).collect();
    let _ = write!(
        o,
        "<h1>instrument log</h1><p>{} file(s), {} lines, {} prints from rank(s) {} <span class=\"muted\">(rules: {})</span></p>",
        r.totals.files,
        r.totals.lines,
        r.totals.prints,
        esc(&ranks.join(", ")),
        esc(&r.rules)
    );
    o.push_str("<p class=\"muted\">Memory as printed, rounded to 0.01 GiB; saved tensors in MiB (the prints' \"MB\" are MiB).</p>");
    inputs(&mut o, r);
    crate::findings::html::render(&mut o, &r.findings);
    if let Some(e) = &r.estimate
        && let Some(why) = &e.unavailable
    {
        let _ = write!(
            o,
            "<p class=\"estimate-none\">Estimate: none, {}.</p>",
            esc(why)
        );
    }
    if let Some(a) = &r.across {
        across(&mut o, a);
    }
    step_charts(&mut o, r);
    setup_chart(&mut o, r);
    for rank in &r.ranks {
        rank_section(&mut o, rank);
        if let Some(e) = &r.estimate
            && let Some(x) = e.ranks.iter().find(|x| x.rank == rank.rank)
        {
            super::estimate::render::html(&mut o, e, x);
        }
    }
    o.push_str(STATUS_SCRIPT);
    o.push_str("</body></html>\n");
    o
}

/// Tooltips for every `data-tip`, and the hidden `render-status` element the tests read
/// after the page loads (`render-ok svg=N`, or the script errors).
pub const STATUS_SCRIPT: &str = "<script>(function(){var tip=document.getElementById('tip');\
document.addEventListener('mousemove',function(e){var t=e.target&&e.target.getAttribute&&e.target.getAttribute('data-tip');\
if(t){tip.textContent=t;tip.style.display='block';tip.style.left=(e.clientX+12)+'px';tip.style.top=(e.clientY+12)+'px';}else{tip.style.display='none';}});\
window.addEventListener('load',function(){var s=document.createElement('div');s.id='render-status';\
var n=document.querySelectorAll('svg').length;\
s.textContent=window.__errors.length?('render-error: '+window.__errors.join(' | ')):('render-ok svg='+n);\
s.style.display='none';document.body.appendChild(s);});})();</script>";

fn inputs(o: &mut String, r: &Report) {
    o.push_str("<h2>Files read</h2><table><tr><th>file</th><th class=\"n\">lines</th><th class=\"n\">prints</th><th class=\"n\">cut</th><th class=\"n\">unreadable</th><th>notes</th></tr>");
    for i in &r.inputs {
        let s = &i.stats;
        let mut notes = Vec::new();
        if s.gzip {
            notes.push("gzip".to_string());
        }
        if let (Some(a), Some(l)) = (i.file.attempt, i.file.local_rank) {
            notes.push(format!("torchrun attempt {a}, local rank {l}"));
        }
        if let Some(u) = &s.first_unreadable {
            notes.push(format!("first unreadable, line {}: {}", u.line, u.text));
        }
        if let Some(c) = &s.first_cut {
            notes.push(format!("first cut, line {}", c.line));
        }
        if let Some(e) = &s.error {
            notes.push(e.clone());
        }
        let _ = write!(
            o,
            "<tr><td><code>{}</code></td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&i.file.name),
            s.lines,
            s.prints,
            s.cut,
            s.unreadable,
            esc(&notes.join("; "))
        );
    }
    o.push_str("</table>");
}

fn opt(b: Option<i64>) -> String {
    b.map(gib).unwrap_or_else(|| "-".into())
}

fn across(o: &mut String, a: &Across) {
    o.push_str("<h2>Across ranks</h2>");
    if let Some(s) = &a.standout {
        let _ = write!(
            o,
            "<div class=\"standout\">{}</div>",
            esc(&standout_text(s))
        );
    } else {
        let _ = write!(o, "<p>{}.</p>", esc(&capitalized(no_standout(a))));
    }
    if let Some(n) = &a.not_compared {
        let _ = write!(o, "<p class=\"not-compared\">{}.</p>", esc(&capitalized(n)));
    }
    let labels: Vec<String> = {
        let mut v: Vec<String> = a
            .ranks
            .iter()
            .flat_map(|r| r.setup_costs.keys().cloned())
            .collect();
        v.sort();
        v.dedup();
        v
    };
    // Keyed by the mesh coordinates when the ranks printed them, else by pipeline stage.
    let axes = mesh_axes(&a.ranks);
    o.push_str("<table class=\"across\"><tr><th>rank</th>");
    if axes.is_empty() {
        o.push_str("<th>pp</th>");
    }
    for ax in &axes {
        let _ = write!(o, "<th>{}</th>", esc(ax));
    }
    o.push_str("<th class=\"n\">peak</th><th>peak at</th><th class=\"n\">end of step</th><th class=\"n\">non-PyTorch</th>");
    for l in &labels {
        let _ = write!(o, "<th class=\"n\">{}</th>", esc(l));
    }
    o.push_str("<th>detail layers</th><th>open the snapshot</th></tr>");
    for r in &a.ranks {
        let _ = write!(o, "<tr><td>{}</td>", r.rank);
        if axes.is_empty() {
            let _ = write!(
                o,
                "<td>{}</td>",
                r.pp_rank
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "-".into())
            );
        }
        for ax in &axes {
            let _ = write!(
                o,
                "<td>{}</td>",
                r.mesh
                    .as_ref()
                    .and_then(|m| m.get(ax))
                    .map(|(k, _)| k.to_string())
                    .unwrap_or_else(|| "-".into())
            );
        }
        let _ = write!(
            o,
            "<td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>",
            opt(r.peak_bytes),
            esc(r.peak_label.as_deref().unwrap_or("-")),
            opt(r.schedule_end_bytes),
            opt(r.non_pytorch_max_bytes)
        );
        for l in &labels {
            let _ = write!(
                o,
                "<td class=\"n\">{}</td>",
                opt(r.setup_costs.get(l).copied())
            );
        }
        let commands: Vec<String> = r
            .files
            .iter()
            .filter_map(|f| {
                f.command
                    .as_deref()
                    .map(|c| format!("<code>{}</code>", esc(&command_line(c, f.host.as_deref()))))
            })
            .collect();
        let _ = write!(
            o,
            "<td>{}</td><td>{}</td></tr>",
            esc(r.detail_layers.as_deref().unwrap_or("-")),
            if commands.is_empty() {
                "-".to_string()
            } else {
                commands.join("<br>")
            }
        );
    }
    o.push_str("</table>");
}

/// Memory over the profiled step: one panel per rank, every panel on the same scale.
fn step_charts(o: &mut String, r: &Report) {
    let with_step: Vec<(&RankReport, &Step)> = r
        .ranks
        .iter()
        .filter_map(|x| x.step.as_ref().map(|s| (x, s)))
        .collect();
    if with_step.is_empty() {
        return;
    }
    let max = with_step
        .iter()
        .flat_map(|(_, s)| s.trace.iter().map(|t| t.allocated_bytes))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let (top, tick) = axis(max / GIB);
    o.push_str("<h2>Memory over the profiled step</h2><p class=\"muted\">Allocated memory at every print of the step, one panel per rank on one scale: the schedule's points joined by the line, probes inside the layers as dots, the peak in red.</p>");
    for (rank, s) in with_step {
        let _ = write!(
            o,
            "<h3>{}</h3>",
            esc(&rank_name(rank.rank, &rank.mesh, rank.pp_rank))
        );
        let (w, h, ml, mr, mt, mb) = (1100.0, 290.0, 110.0, 16.0, 12.0, 130.0);
        let pw = w - ml - mr;
        let ph = h - mt - mb;
        let n = s.trace.len().max(2);
        let x = |i: usize| ml + i as f64 * pw / (n - 1) as f64;
        let y = |b: i64| mt + ph - (b as f64 / GIB) / top * ph;
        let _ = write!(
            o,
            "<svg class=\"step\" data-scale-gib=\"{top}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"memory over the step, rank {}\">",
            rank.rank
        );
        gridlines(o, (top, tick), (ml, ml + pw), (mt, ph), " GiB");
        // The line through the schedule's points.
        let pts: Vec<String> = s
            .trace
            .iter()
            .enumerate()
            .filter(|(_, t)| t.point)
            .map(|(i, t)| format!("{:.1},{:.1}", x(i), y(t.allocated_bytes)))
            .collect();
        let _ = write!(
            o,
            "<polyline fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"2\" points=\"{}\"/>",
            pts.join(" ")
        );
        // Labels of points too close to the previous label are left to the tooltip.
        let mut last_label = f64::NEG_INFINITY;
        let peak_index = s
            .trace
            .iter()
            .position(|t| t.allocated_bytes == s.peak.allocated_bytes);
        for (i, t) in s.trace.iter().enumerate() {
            let place = match (t.layer, &t.stage) {
                (Some(l), Some(st)) => format!(" (layer {l} {st})"),
                _ => String::new(),
            };
            let tip = esc(&format!("{}{place}: {}", t.label, gib(t.allocated_bytes)));
            if Some(i) == peak_index {
                let _ = write!(
                    o,
                    "<circle class=\"peak\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"#e15759\" data-tip=\"peak: {tip}\"/>",
                    x(i),
                    y(t.allocated_bytes)
                );
            } else if t.point {
                let _ = write!(
                    o,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"#4e79a7\" data-tip=\"{tip}\"/>",
                    x(i),
                    y(t.allocated_bytes)
                );
            } else {
                let _ = write!(
                    o,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\" fill=\"#f28e2b\" data-tip=\"{tip}\"/>",
                    x(i),
                    y(t.allocated_bytes)
                );
            }
            if t.point && x(i) - last_label >= 12.0 {
                last_label = x(i);
                let _ = write!(
                    o,
                    "<text transform=\"translate({:.1},{:.1}) rotate(-50)\" text-anchor=\"end\">{}</text>",
                    x(i) + 3.0,
                    mt + ph + 12.0,
                    esc(&super::text::shorten(&t.label, 28))
                );
            }
        }
        let _ = write!(
            o,
            "<line x1=\"{ml}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#999\"/></svg>",
            mt + ph,
            ml + pw,
            mt + ph
        );
        let _ = write!(o, "<p>Peak {}</p>", esc(&peak_text(&s.peak)));
    }
}

/// Horizontal gridlines at each tick from 0 to `top`, labelled at the left of `x0`.
pub fn gridlines(
    o: &mut String,
    (top, tick): (f64, f64),
    (x0, x1): (f64, f64),
    (mt, ph): (f64, f64),
    unit: &str,
) {
    let ticks = (top / tick).round() as usize;
    for k in 0..=ticks {
        let v = tick * k as f64;
        let y = mt + ph - ph * v / top;
        let _ = write!(
            o,
            "<line x1=\"{x0}\" y1=\"{y:.1}\" x2=\"{x1:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{v:.2}{unit}</text>",
            x0 - 5.0,
            y + 4.0
        );
    }
}

/// An axis for values up to `v`: (top, tick), the tick a round number giving 3 to 6
/// gridlines, the top a multiple of it.
pub fn axis(v: f64) -> (f64, f64) {
    let v = if v > 0.0 { v } else { 1.0 };
    let mag = 10f64.powf((v / 4.0).log10().floor());
    let tick = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|t| v / t <= 5.0)
        .unwrap_or(10.0 * mag);
    let round = |x: f64| (x * 1e9).round() / 1e9;
    (round((v / tick).ceil().max(1.0) * tick), round(tick))
}

/// The setup breakdown: what each rank's setup cost, item by item, on one scale.
fn setup_chart(o: &mut String, r: &Report) {
    let rows: Vec<(&RankReport, Vec<&Cost>)> = r
        .ranks
        .iter()
        .map(|x| {
            (
                x,
                x.setup_breakdown.iter().filter(|c| c.bytes > 0).collect(),
            )
        })
        .filter(|(_, c): &(&RankReport, Vec<&Cost>)| !c.is_empty())
        .collect();
    if rows.is_empty() {
        return;
    }
    let mut labels: Vec<String> = Vec::new();
    for (_, cs) in &rows {
        for c in cs {
            if !labels.contains(&c.label) {
                labels.push(c.label.clone());
            }
        }
    }
    let color = |l: &str| COLORS[labels.iter().position(|x| x == l).unwrap_or(0) % COLORS.len()];
    let total = rows
        .iter()
        .map(|(_, cs)| cs.iter().map(|c| c.bytes).sum::<i64>())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    o.push_str("<h2>Setup breakdown</h2><p class=\"muted\">What setup cost on each rank: the costs the prints state (CUDA context, communicators, optimizer state) and the allocation each setup phase added.</p><div class=\"legend\">");
    for l in &labels {
        let _ = write!(
            o,
            "<span><i style=\"background:{}\"></i>{}</span>",
            color(l),
            esc(l)
        );
    }
    o.push_str("</div>");
    let (w, bar, ml) = (1100.0, 22.0, 70.0);
    let h = rows.len() as f64 * (bar + 8.0) + 24.0;
    let pw = w - ml - 90.0;
    let _ = write!(
        o,
        "<svg class=\"setup\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"setup breakdown\">"
    );
    for (k, (rank, cs)) in rows.iter().enumerate() {
        let yy = 4.0 + k as f64 * (bar + 8.0);
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">rank {}</text>",
            ml - 8.0,
            yy + bar * 0.7,
            rank.rank
        );
        let mut xx = ml;
        let mut sum = 0;
        for c in cs {
            let ww = c.bytes as f64 / total * pw;
            let _ = write!(
                o,
                "<rect x=\"{xx:.1}\" y=\"{yy:.1}\" width=\"{ww:.1}\" height=\"{bar}\" fill=\"{}\" data-tip=\"{}\"/>",
                color(&c.label),
                esc(&format!("{}: {} ({})", c.label, gib(c.bytes), c.phase))
            );
            xx += ww;
            sum += c.bytes;
        }
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            xx + 6.0,
            yy + bar * 0.7,
            gib(sum)
        );
    }
    o.push_str("</svg>");
}

/// One bar: its label and its stacked parts (value, colour, tooltip).
type Bar<'a> = (String, Vec<(f64, &'a str, String)>);

/// One bar chart: `bars` against a common maximum.
fn bars(o: &mut String, class: &str, title: &str, bars: &[Bar], unit: &str) {
    let max = bars
        .iter()
        .map(|(_, stack)| stack.iter().map(|(v, _, _)| *v).sum::<f64>())
        .fold(0.0, f64::max);
    let (top, tick) = axis(max);
    let (w, h, ml, mt, mb) = (
        (60.0 + bars.len() as f64 * 54.0).max(260.0),
        200.0,
        54.0,
        30.0,
        28.0,
    );
    let ph = h - mt - mb;
    let _ = write!(
        o,
        "<svg class=\"{class}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\"><text x=\"{ml}\" y=\"12\">{}</text><text x=\"{:.1}\" y=\"24\" text-anchor=\"end\" class=\"muted\">{unit}</text>",
        esc(title),
        esc(title),
        ml - 4.0
    );
    gridlines(o, (top, tick), (ml, w - 6.0), (mt, ph), "");
    for (i, (label, stack)) in bars.iter().enumerate() {
        let xx = ml + 8.0 + i as f64 * 54.0;
        let mut base = mt + ph;
        for (v, color, tip) in stack {
            let hh = v / top * ph;
            let _ = write!(
                o,
                "<rect x=\"{xx:.1}\" y=\"{:.1}\" width=\"36\" height=\"{hh:.1}\" fill=\"{color}\" data-tip=\"{}\"/>",
                base - hh,
                esc(tip)
            );
            base -= hh;
        }
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            xx + 18.0,
            mt + ph + 14.0,
            esc(label)
        );
    }
    o.push_str("</svg>");
}

fn rank_section(o: &mut String, r: &RankReport) {
    let _ = write!(
        o,
        "<h2>{}</h2><p class=\"muted\">Read from {}; this run from {}.</p>",
        esc(&capitalized(&rank_name(r.rank, &r.mesh, r.pp_rank))),
        esc(&r.files.join(", ")),
        esc(&r.run_from)
    );
    if let Some(run) = &r.run {
        let _ = write!(
            o,
            "<p class=\"run\">Run: <code>{}</code> <span class=\"muted\">({})</span></p>",
            esc(&run.label),
            esc(&run.at)
        );
    }
    if let Some(d) = &r.detail_layers {
        let _ = write!(
            o,
            "<p>Detail layers {} <span class=\"muted\">({})</span></p>",
            esc(&d.label),
            esc(&d.at)
        );
    }
    if !r.layers.is_empty() {
        o.push_str("<h3>Detail layers</h3><div class=\"legend\"><span><i style=\"background:#4e79a7\"></i>allocated after the stage</span><span><i style=\"background:#f28e2b\"></i>saved activations</span><span><i style=\"background:#76b7b2\"></i>saved weights</span></div><div class=\"row\">");
        for l in &r.layers {
            let name = if l.layer < 0 {
                "layer ?".to_string()
            } else {
                format!("layer {}", l.layer)
            };
            let alloc: Vec<Bar> = l
                .stages
                .iter()
                .map(|s| {
                    let v = s.allocated_after_bytes.unwrap_or(0);
                    (
                        s.stage.clone(),
                        vec![(
                            v as f64 / GIB,
                            "#4e79a7",
                            format!("{name} {}: {} after", s.stage, gib(v)),
                        )],
                    )
                })
                .collect();
            bars(
                o,
                "stages",
                &format!("{name}: allocated after each stage"),
                &alloc,
                "GiB",
            );
            let mut saved: Vec<Bar> = l
                .stages
                .iter()
                .filter_map(|s| s.saved.as_ref().map(|x| (s, x)))
                .map(|(s, x)| {
                    let a = x.activations_bytes.unwrap_or(x.list_activation_bytes);
                    let w = x.weights_bytes.unwrap_or(x.list_weight_bytes);
                    (
                        s.stage.clone(),
                        vec![
                            (
                                a as f64 / MIB,
                                "#f28e2b",
                                format!("{name} {}: activations {}", s.stage, mib(a)),
                            ),
                            (
                                w as f64 / MIB,
                                "#76b7b2",
                                format!("{name} {}: weights {}", s.stage, mib(w)),
                            ),
                        ],
                    )
                })
                .collect();
            if let Some(all) = &l.saved_all {
                saved.push((
                    "all".into(),
                    vec![
                        (
                            all.activations_bytes as f64 / MIB,
                            "#f28e2b",
                            format!(
                                "{name}, all {} stages: activations {}",
                                all.stages,
                                mib(all.activations_bytes)
                            ),
                        ),
                        (
                            all.weights_bytes as f64 / MIB,
                            "#76b7b2",
                            format!(
                                "{name}, all {} stages: weights {}",
                                all.stages,
                                mib(all.weights_bytes)
                            ),
                        ),
                    ],
                ));
            }
            if !saved.is_empty() {
                bars(
                    o,
                    "saved",
                    &format!("{name}: saved for backward"),
                    &saved,
                    "MiB",
                );
            }
        }
        o.push_str("</div>");
        for l in &r.layers {
            for s in &l.stages {
                let steps: Vec<&Probe> = s.probes.iter().filter(|p| p.part.is_some()).collect();
                if steps.is_empty() {
                    continue;
                }
                let _ = write!(
                    o,
                    "<p><b>{}, layer {} {}</b>: {}</p>",
                    esc(steps[0].part.as_deref().unwrap_or("")),
                    l.layer,
                    esc(&s.stage),
                    esc(&steps
                        .iter()
                        .map(|p| format!("{} {}", p.label, gib(p.allocated_bytes)))
                        .collect::<Vec<_>>()
                        .join(" · "))
                );
            }
        }
    }
    o.push_str("<details><summary>Setup and schedule tables</summary>");
    o.push_str("<table><tr><th>setup phase</th><th class=\"n\">allocated</th><th class=\"n\">cached</th><th class=\"n\">non-PyTorch</th><th>stated cost</th></tr>");
    for p in &r.setup {
        let costs: Vec<String> = p
            .costs
            .iter()
            .map(|c| format!("{} {}", c.label, gib(c.bytes)))
            .collect();
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&p.label),
            opt(p.allocated_bytes),
            opt(p.cached_bytes),
            opt(p.non_pytorch_bytes),
            esc(&costs.join("; "))
        );
    }
    o.push_str("</table>");
    if let Some(s) = &r.step {
        o.push_str("<table><tr><th>schedule point</th><th class=\"n\">allocated</th><th class=\"n\">change</th><th class=\"n\">cached</th><th class=\"n\">non-PyTorch</th></tr>");
        for p in &s.points {
            let _ = write!(
                o,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(&p.label),
                gib(p.allocated_bytes),
                p.change_bytes.map(signed_gib).unwrap_or_else(|| "-".into()),
                opt(p.cached_bytes),
                opt(p.non_pytorch_bytes)
            );
        }
        o.push_str("</table>");
    }
    o.push_str("</details>");
    for m in &r.out_of_memory {
        let mut line = format!("{}: {} requested", m.label, gib(m.requested_bytes));
        if let Some(f) = m.free_bytes {
            let _ = write!(line, ", {} free", gib(f));
        }
        if let Some(t) = m.total_bytes {
            let _ = write!(line, " of {}", gib(t));
        }
        let _ = write!(
            o,
            "<p><b>{}</b> <span class=\"muted\">({})</span></p>",
            esc(&line),
            esc(&m.at)
        );
    }
    for f in &r.files_written {
        let _ = write!(
            o,
            "<p>{}{}: <code>{}</code>{}{}</p>",
            esc(&f.label),
            if f.at_out_of_memory {
                " (at the out-of-memory error)"
            } else {
                ""
            },
            esc(&f.path),
            f.host
                .as_deref()
                .map(|h| format!(" on {}", esc(h)))
                .unwrap_or_default(),
            f.command
                .as_deref()
                .map(|c| format!(" — open it: <code>{}</code>", esc(c)))
                .unwrap_or_default()
        );
    }
    for f in &r.files_not_written {
        let _ = write!(
            o,
            "<p><b>{}: <code>{}</code>{}</b> <span class=\"muted\">({})</span></p>",
            esc(&f.label),
            esc(&f.path),
            f.reason
                .as_deref()
                .map(|x| format!(": {}", esc(x)))
                .unwrap_or_default(),
            esc(&f.at)
        );
    }
    for w in &r.warnings {
        let _ = write!(
            o,
            "<p><b>Warning: {}</b> <span class=\"muted\">({})</span></p>",
            esc(&w.label),
            esc(&w.at)
        );
    }
    for n in &r.notes {
        let _ = write!(
            o,
            "<p>Note: {} <span class=\"muted\">({})</span></p>",
            esc(&n.label),
            esc(&n.at)
        );
    }
}

/// The sentence with its first letter in capitals (a paragraph of its own).
fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::axis;

    #[test]
    fn axes_have_round_ticks() {
        assert_eq!(axis(0.14), (0.15, 0.05));
        assert_eq!(axis(12.0), (12.5, 2.5));
        assert_eq!(axis(0.0), (1.0, 0.2));
        let (top, tick) = axis(73.0);
        assert!(top >= 73.0 && (top / tick).round() <= 6.0, "{top} {tick}");
    }
}
