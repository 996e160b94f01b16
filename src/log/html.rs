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
use crate::page::chart::{Bar, HBars, Part, axis, gridlines};
use crate::page::table::Table;
use crate::page::{PALETTE, Page, Tips, legend};

const GIB: f64 = 1073741824.0;
const MIB: f64 = 1048576.0;

/// The detail layers' columns: allocated after a stage, saved activations and weights.
const ALLOCATED: &str = PALETTE[0];
const ACTIVATIONS: &str = PALETTE[1];
const WEIGHTS: &str = PALETTE[4];

/// What only this page draws: the rank that stands out, the detail layers' charts in a row.
pub const STYLE: &str = ".standout{border-left:4px solid #e15759;padding:4px 12px;margin:10px 0;background:#fafafa}\
.row{display:flex;flex-wrap:wrap;gap:24px}";

pub fn render(r: &Report) -> String {
    let mut o = Page::new("instrument log", STYLE, Tips::Script);
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
    o.finish("")
}

fn inputs(o: &mut String, r: &Report) {
    o.push_str("<h2>Files read</h2>");
    let mut t = Table::new(
        o,
        "",
        &[
            ("file", false),
            ("lines", true),
            ("prints", true),
            ("cut", true),
            ("unreadable", true),
            ("notes", false),
        ],
    );
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
        t.row_with(
            "",
            [
                format!("<code>{}</code>", esc(&i.file.name)),
                s.lines.to_string(),
                s.prints.to_string(),
                s.cut.to_string(),
                s.unreadable.to_string(),
                esc(&notes.join("; ")),
            ],
        );
    }
    t.end();
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
    let mut cols: Vec<(&str, bool)> = vec![("rank", false)];
    if axes.is_empty() {
        cols.push(("pp", false));
    }
    cols.extend(axes.iter().map(|ax| (ax.as_str(), false)));
    cols.extend([
        ("peak", true),
        ("peak at", false),
        ("end of step", true),
        ("non-PyTorch", true),
    ]);
    cols.extend(labels.iter().map(|l| (l.as_str(), true)));
    cols.extend([("detail layers", false), ("open the snapshot", false)]);
    let mut t = Table::new(o, "across", &cols);
    for r in &a.ranks {
        let mut cells = vec![r.rank.to_string()];
        if axes.is_empty() {
            cells.push(
                r.pp_rank
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "-".into()),
            );
        }
        for ax in &axes {
            cells.push(
                r.mesh
                    .as_ref()
                    .and_then(|m| m.get(ax))
                    .map(|(k, _)| k.to_string())
                    .unwrap_or_else(|| "-".into()),
            );
        }
        cells.extend([
            opt(r.peak_bytes),
            esc(r.peak_label.as_deref().unwrap_or("-")),
            opt(r.schedule_end_bytes),
            opt(r.non_pytorch_max_bytes),
        ]);
        for l in &labels {
            cells.push(opt(r.setup_costs.get(l).copied()));
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
        cells.push(esc(r.detail_layers.as_deref().unwrap_or("-")));
        cells.push(if commands.is_empty() {
            "-".to_string()
        } else {
            commands.join("<br>")
        });
        t.row_with("", cells);
    }
    t.end();
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
    let color = |l: &str| PALETTE[labels.iter().position(|x| x == l).unwrap_or(0) % PALETTE.len()];
    let total = rows
        .iter()
        .map(|(_, cs)| cs.iter().map(|c| c.bytes).sum::<i64>())
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    o.push_str("<h2>Setup breakdown</h2><p class=\"muted\">What setup cost on each rank: the costs the prints state (CUDA context, communicators, optimizer state) and the allocation each setup phase added.</p>");
    legend(o, labels.iter().map(|l| (color(l), l.as_str())));
    let bars: Vec<Bar> = rows
        .iter()
        .map(|(rank, cs)| Bar {
            label: format!("rank {}", rank.rank),
            parts: cs
                .iter()
                .map(|c| Part {
                    value: c.bytes as f64,
                    color: color(&c.label).to_string(),
                    tip: format!("{}: {} ({})", c.label, gib(c.bytes), c.phase),
                    class: "",
                })
                .collect(),
            note: gib(cs.iter().map(|c| c.bytes).sum()),
            attrs: String::new(),
        })
        .collect();
    HBars {
        class: "setup",
        aria: "setup breakdown",
        label_width: 70.0,
        plot: 940.0,
        note_width: 90.0,
        row: 30.0,
        bar: 22.0,
        scale: total,
        min_width: 0.0,
        tips: Tips::Script,
    }
    .draw(o, &bars);
}

/// One column: its label and its stacked parts (value, colour, tooltip).
type Column<'a> = (String, Vec<(f64, &'a str, String)>);

/// One chart of vertical columns against a common maximum.
fn columns(o: &mut String, class: &str, title: &str, bars: &[Column], unit: &str) {
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
        o.push_str("<h3>Detail layers</h3>");
        legend(
            o,
            [
                (ALLOCATED, "allocated after the stage"),
                (ACTIVATIONS, "saved activations"),
                (WEIGHTS, "saved weights"),
            ],
        );
        o.push_str("<div class=\"row\">");
        for l in &r.layers {
            let name = if l.layer < 0 {
                "layer ?".to_string()
            } else {
                format!("layer {}", l.layer)
            };
            let alloc: Vec<Column> = l
                .stages
                .iter()
                .map(|s| {
                    let v = s.allocated_after_bytes.unwrap_or(0);
                    (
                        s.stage.clone(),
                        vec![(
                            v as f64 / GIB,
                            ALLOCATED,
                            format!("{name} {}: {} after", s.stage, gib(v)),
                        )],
                    )
                })
                .collect();
            columns(
                o,
                "stages",
                &format!("{name}: allocated after each stage"),
                &alloc,
                "GiB",
            );
            let mut saved: Vec<Column> = l
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
                                ACTIVATIONS,
                                format!("{name} {}: activations {}", s.stage, mib(a)),
                            ),
                            (
                                w as f64 / MIB,
                                WEIGHTS,
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
                            ACTIVATIONS,
                            format!(
                                "{name}, all {} stages: activations {}",
                                all.stages,
                                mib(all.activations_bytes)
                            ),
                        ),
                        (
                            all.weights_bytes as f64 / MIB,
                            WEIGHTS,
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
                columns(
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
    let mut t = Table::new(
        o,
        "",
        &[
            ("setup phase", false),
            ("allocated", true),
            ("cached", true),
            ("non-PyTorch", true),
            ("stated cost", false),
        ],
    );
    for p in &r.setup {
        let costs: Vec<String> = p
            .costs
            .iter()
            .map(|c| format!("{} {}", c.label, gib(c.bytes)))
            .collect();
        t.row(&[
            p.label.clone(),
            opt(p.allocated_bytes),
            opt(p.cached_bytes),
            opt(p.non_pytorch_bytes),
            costs.join("; "),
        ]);
    }
    t.end();
    if let Some(s) = &r.step {
        let mut t = Table::new(
            o,
            "",
            &[
                ("schedule point", false),
                ("allocated", true),
                ("change", true),
                ("cached", true),
                ("non-PyTorch", true),
            ],
        );
        for p in &s.points {
            t.row(&[
                p.label.clone(),
                gib(p.allocated_bytes),
                p.change_bytes.map(signed_gib).unwrap_or_else(|| "-".into()),
                opt(p.cached_bytes),
                opt(p.non_pytorch_bytes),
            ]);
        }
        t.end();
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
