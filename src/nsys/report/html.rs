//! `--html FILE`: one self-contained page (inline CSS and SVG, no scripts, no network). Per
//! export, every process (rank) on one time axis, labelled `rank N (pp r, ep e)` where the setup
//! range says it: its NVTX ranges (the longest, nesting depth 0 to 2, one thin row each), a
//! compute lane and a communication lane (opacity = how busy the GPU was in each bucket), its
//! window marked. Then the ranks side by side (most exposed rank per stage, pipeline balance)
//! and, per process, a chart of exposed against hidden communication per stage, and the
//! category, overlap, kernel and range tables. With `--diff`, the comparison of two runs.

use std::fmt::Write;

use crate::nsys::ranks::across::Across;
use crate::nsys::ranks::diff::Diff;
use crate::nsys::report::{
    Document, Process, ProcessTimeline, Report, Timeline, ms, truncate, work_line,
};

use crate::page::chart::{Bar, HBars, Part};
use crate::page::{Page, Tips, esc, legend};

const COMPUTE: &str = "#1f77b4";
const COMMUNICATION: &str = "#d62728";

/// A stable colour per range name.
fn name_color(name: &str) -> String {
    let mut h = crate::fnv::Fnv1a32::default();
    h.write(name.as_bytes());
    format!("hsl({},55%,62%)", h.finish() % 360)
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
        "<svg class=\"timeline\" width=\"{w}\" height=\"{height}\" viewBox=\"0 0 {w} {height}\" role=\"img\" aria-label=\"all processes of the export on one time axis\">",
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
        let label = if pt.label.starts_with("pid ") {
            format!("{} {}", pt.label, truncate(&name, 12))
        } else {
            pt.label.clone()
        };
        // The process's window, behind its lanes.
        let (w0, w1) = (
            x(pt.window.0).clamp(LABEL_W, LABEL_W + PLOT_W),
            x(pt.window.1).clamp(LABEL_W, LABEL_W + PLOT_W),
        );
        if w1 > w0 {
            let _ = writeln!(
                out,
                "<rect class=\"window\" x=\"{w0:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#444\" stroke-dasharray=\"3,2\"><title>window {}..{} ns</title></rect>",
                (w1 - w0).max(1.0),
                3.0 * NVTX_ROW + 2.0 * LANE,
                pt.window.0,
                pt.window.1
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"0\" y=\"{:.1}\" class=\"lbl\">{}</text><text x=\"0\" y=\"{:.1}\" class=\"sub\">NVTX</text><text x=\"0\" y=\"{:.1}\" class=\"sub\">compute</text><text x=\"0\" y=\"{:.1}\" class=\"sub\">communication</text>",
            y0 + 10.0,
            esc(&truncate(&label, 28)),
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

/// What only this page draws: the timeline's labels, lanes and axis (as wide as the capture's
/// timeline: the page is not narrowed), kernel and range names cut to one line.
const STYLE: &str = "body{max-width:none;margin:24px}\
.lbl{font:12px sans-serif;font-weight:600}.sub{font:10px sans-serif;fill:#666}.rl{font:9px sans-serif;fill:#111;pointer-events:none}\
.axis text{font:11px sans-serif;fill:#555}\
table.kernels td:last-child,table.nvtx td:last-child,table.streams td:nth-child(2){max-width:60em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}";

/// `rank 5 (pp 1, ep 1)`, or `pid 4242`.
fn who(p: &Process) -> String {
    crate::nsys::report::text::who(p)
}

fn mesh_label(m: &Option<crate::mesh::Mesh>, rank: Option<u64>, pid: i64) -> String {
    match (rank, m) {
        (Some(r), Some(m)) => format!("rank {r} ({})", m.short()),
        (Some(r), None) => format!("rank {r}"),
        _ => format!("pid {pid}"),
    }
}

pub fn render(doc: &Document) -> String {
    let files: Vec<&str> = doc.exports.iter().map(|r| r.file.as_str()).collect();
    let mut o = Page::new(
        &format!("nsys report: {}", files.join(", ")),
        STYLE,
        Tips::Title,
    );
    let _ = writeln!(o, "<h1>nsys report</h1><p>{}</p>", esc(&files.join(", ")));
    // Findings first, then the ranks side by side, then each export in detail.
    crate::findings::html::render(&mut o, &doc.findings);
    across(&mut o, &doc.across);
    // One scale for every stage chart, so bars compare across ranks.
    let scale = doc
        .exports
        .iter()
        .flat_map(|r| &r.processes)
        .flat_map(|p| &p.stages)
        .map(|s| s.comm_ns)
        .max()
        .unwrap_or(0);
    let many = doc.exports.len() > 1;
    for (i, r) in doc.exports.iter().enumerate() {
        if many {
            let _ = writeln!(o, "<h2 class=\"export\">{}</h2>", esc(&r.file));
        }
        export(
            &mut o,
            r,
            if many {
                format!("e{}-", i + 1)
            } else {
                String::new()
            },
            scale,
        );
    }
    o.finish("")
}

fn pct(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// Per stage, one bar: the hidden part, then the exposed part, on the page's common scale.
fn stage_chart(o: &mut String, p: &Process, scale: i64) {
    if p.stages.is_empty() || scale <= 0 {
        return;
    }
    let bars: Vec<Bar> = p
        .stages
        .iter()
        .map(|s| {
            let hidden = (s.comm_ns - s.exposed_ns).max(0);
            Bar {
                label: s.stage.clone(),
                parts: vec![
                    Part {
                        value: hidden as f64,
                        color: COMPUTE.into(),
                        tip: format!("{}: {} ms hidden", s.stage, ms(hidden)),
                        class: "hidden",
                    },
                    Part {
                        value: s.exposed_ns as f64,
                        color: COMMUNICATION.into(),
                        tip: format!("{}: {} ms exposed", s.stage, ms(s.exposed_ns)),
                        class: "exposed",
                    },
                ],
                note: format!("{} ms exposed, {} hidden", ms(s.exposed_ns), pct(s.overlap)),
                attrs: format!(" data-stage=\"{}\"", esc(&s.stage)),
            }
        })
        .collect();
    HBars {
        class: "stages",
        aria: "exposed and hidden communication per stage",
        label_width: 88.0,
        plot: 600.0,
        note_width: 200.0,
        row: 16.0,
        bar: 13.0,
        scale: scale as f64,
        min_width: 0.0,
        tips: Tips::Title,
    }
    .draw(o, &bars);
}

/// What the conventions say about a process: mesh, window, streams, the stage chart and table.
fn rank_section(o: &mut String, p: &Process, scale: i64) {
    let mut line = String::new();
    if let Some(m) = &p.mesh {
        let _ = write!(line, "mesh {}", esc(&m.full()));
        for (k, v) in &p.setup_fields.0 {
            if let Some(v) = v {
                let _ = write!(line, ", {} {v}", esc(k));
            }
        }
        line.push_str(". ");
    } else if let Some(why) = &p.mesh_unknown {
        let _ = write!(line, "mesh unknown: {}. ", esc(why));
    }
    let w = &p.window;
    let _ = write!(
        line,
        "Window ({}): {} ({}..{} ns, {} ms)",
        w.pick,
        esc(&w.name),
        w.totals.start_ns,
        w.totals.end_ns,
        ms(w.totals.end_ns - w.totals.start_ns)
    );
    if p.chunks.count > 0 {
        let _ = write!(
            line,
            "; {} chunk ranges, median {} ms",
            p.chunks.count,
            ms(p.chunks.median_ns as i64)
        );
    }
    if let Some(n) = &w.note {
        let _ = write!(line, " ({})", esc(n));
    }
    let _ = writeln!(o, "<p class=\"window\">{line}.</p>");
    if !p.streams.is_empty() {
        o.push_str("<table class=\"streams\"><tr><th class=\"n\">stream</th><th>purpose</th><th class=\"n\">comm kernels</th><th class=\"n\">other kernels</th><th class=\"n\">comm ms</th><th class=\"n\">other ms</th></tr>\n");
        for s in &p.streams {
            let _ = writeln!(
                o,
                "<tr data-stream=\"{}\"><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                s.stream,
                s.stream,
                esc(&s.purpose),
                s.n_comm,
                s.n_comp,
                ms(s.comm_ns),
                ms(s.comp_ns)
            );
        }
        o.push_str("</table>\n");
    }
    stage_chart(o, p, scale);
    if !p.stages.is_empty() {
        o.push_str("<table class=\"stages\"><tr><th>stage</th><th class=\"n\">comm ms</th><th class=\"n\">exposed ms</th><th class=\"n\">overlap</th><th class=\"n\">min</th><th class=\"n\">max</th><th class=\"n\">whole capture: exposed ms</th><th class=\"n\">overlap</th><th></th></tr>\n");
        for s in &p.stages {
            let whole = p.whole_capture.stages.iter().find(|x| x.stage == s.stage);
            let _ = writeln!(
                o,
                "<tr data-stage=\"{st}\"><td>{st}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                ms(s.comm_ns),
                ms(s.exposed_ns),
                pct(s.overlap),
                pct(s.overlap_min),
                pct(s.overlap_max),
                whole.map_or("-".into(), |x| ms(x.exposed_ns)),
                whole.map_or(String::new(), |x| pct(x.overlap)),
                esc(s.describe.as_deref().unwrap_or("")),
                st = esc(&s.stage)
            );
        }
        o.push_str("</table>\n");
    }
}

fn across(o: &mut String, a: &Across) {
    if !a.ranks.iter().any(|r| r.mesh.is_some()) && a.ranks.len() < 2 {
        return;
    }
    o.push_str("<section class=\"across\" id=\"across\"><h2>Across ranks</h2>\n");
    o.push_str("<table class=\"ranks\"><tr><th>rank</th><th>file</th><th class=\"n\">chunk ms</th><th class=\"n\">compute ms</th><th class=\"n\">comm ms</th><th class=\"n\">exposed ms</th><th class=\"n\">overlap</th><th>most exposed</th></tr>\n");
    for r in &a.ranks {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&mesh_label(&r.mesh, r.rank, r.pid)),
            esc(&r.file),
            ms(r.chunk_ns as i64),
            ms(r.compute_ns),
            ms(r.comm_ns),
            ms(r.exposed_ns),
            pct(r.overlap),
            esc(r.worst_stage.as_deref().unwrap_or("-"))
        );
    }
    o.push_str("</table>\n");
    if !a.stages.is_empty() {
        o.push_str("<h3>Most exposed communication per stage</h3><ul class=\"worst\">\n");
        for s in &a.stages {
            let _ = writeln!(
                o,
                "<li data-stage=\"{}\">{}: {} exposes {} ms of {} ms (hidden {}){}</li>",
                esc(&s.stage),
                esc(&s.stage),
                esc(&mesh_label(&s.mesh, s.rank, s.pid)),
                ms(s.exposed_ns),
                ms(s.comm_ns),
                pct(s.overlap),
                if s.others > 0 {
                    format!(
                        "; the other {} {}..{} ms",
                        s.others,
                        ms(s.others_min_exposed_ns),
                        ms(s.others_max_exposed_ns)
                    )
                } else {
                    String::new()
                }
            );
        }
        o.push_str("</ul>\n");
    }
    if let Some(b) = &a.balance {
        let _ = writeln!(
            o,
            "<h3>Pipeline balance ({})</h3><table class=\"balance\"><tr><th>{}</th><th class=\"n\">ranks</th><th class=\"n\">chunk ms (median)</th><th class=\"n\">min</th><th class=\"n\">max</th><th class=\"n\">compute ms</th></tr>",
            esc(&b.axis),
            esc(&b.axis)
        );
        for g in &b.groups {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                g.coordinate,
                g.ranks,
                ms(g.chunk_ns as i64),
                ms(g.min_chunk_ns as i64),
                ms(g.max_chunk_ns as i64),
                ms(g.compute_ns as i64)
            );
        }
        o.push_str("</table>\n");
        for s in &b.slower {
            let who = match s.kind {
                "coordinate" => format!("{} {}", b.axis, s.coordinate),
                _ => mesh_label(&s.mesh, s.rank, 0),
            };
            let _ = writeln!(
                o,
                "<p class=\"slower\">{} is slower than its peers: chunk {} ms vs {} ms (+{:.1}%).</p>",
                esc(&who),
                ms(s.chunk_ns as i64),
                ms(s.peers_chunk_ns as i64),
                s.excess * 100.0
            );
        }
    }
    o.push_str("</section>\n");
}

/// `--diff --html`: the comparison as a page.
pub fn render_diff(d: &Diff) -> String {
    let mut o = Page::new("nsys diff", STYLE, Tips::Title);
    let _ = writeln!(
        o,
        "<h1>nsys diff</h1><p>before: {} ({} processes)<br>after: {} ({} processes)<br>window: {}</p>",
        esc(&d.before.files.join(", ")),
        d.before.processes,
        esc(&d.after.files.join(", ")),
        d.after.processes,
        esc(&d.window)
    );
    if let Some(g) = &d.gate {
        g.render_html(&mut o);
    }
    if d.compared_by != "chunk-ranges" {
        // Without chunk ranges on both sides: the whole capture's figures of each process.
        o.push_str("<table class=\"diff\"><tr><th>process</th><th class=\"n\">exposed comm ms before</th><th class=\"n\">after</th><th class=\"n\">change</th><th class=\"n\">compute ms before</th><th class=\"n\">after</th><th class=\"n\">change</th></tr>\n");
        for r in &d.ranks {
            let (e, c) = (&r.process_exposed_ns, &r.process_compute_ns);
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(&r.label),
                ms(e.before as i64),
                ms(e.after as i64),
                esc(&e.change),
                ms(c.before as i64),
                ms(c.after as i64),
                esc(&c.change)
            );
        }
        o.push_str("</table>\n");
    } else {
        diff_ranks(&mut o, d);
    }
    for (what, v) in [
        ("Only before", &d.only_before),
        ("Only after", &d.only_after),
    ] {
        if !v.is_empty() {
            let _ = writeln!(o, "<p>{what}: {}</p>", esc(&v.join(", ")));
        }
    }
    o.finish("")
}

/// Per rank, the chunk time and the window's exposed communication, and the stages that changed.
fn diff_ranks(o: &mut String, d: &Diff) {
    o.push_str("<table class=\"diff\"><tr><th>rank</th><th class=\"n\">chunk ms before</th><th class=\"n\">after</th><th class=\"n\">change</th><th class=\"n\">exposed ms before</th><th class=\"n\">after</th><th class=\"n\">change</th><th>stages that changed</th></tr>\n");
    for r in &d.ranks {
        let stages: Vec<String> = r
            .stages
            .iter()
            .filter(|s| s.exposed_ns.delta != 0.0)
            .map(|s| {
                format!(
                    "{} {} &rarr; {} ({})",
                    esc(&s.stage),
                    ms(s.exposed_ns.before as i64),
                    ms(s.exposed_ns.after as i64),
                    esc(&s.exposed_ns.change)
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&r.label),
            ms(r.chunk_ns.before as i64),
            ms(r.chunk_ns.after as i64),
            esc(&r.chunk_ns.change),
            ms(r.exposed_ns.before as i64),
            ms(r.exposed_ns.after as i64),
            esc(&r.exposed_ns.change),
            stages.join("; ")
        );
    }
    o.push_str("</table>\n");
}

fn export(o: &mut String, report: &Report, id_prefix: String, scale: i64) {
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
    legend(
        o,
        [
            (
                COMPUTE,
                "compute (kernels that are not communication, CUDA graphs)",
            ),
            (COMMUNICATION, "communication"),
        ],
    );
    o.push_str("<p class=\"muted\">Opacity: share of each time slice the GPU was busy. NVTX: the longest ranges at nesting depth 0 to 2 (hover for names).</p>\n");
    if let Some(tl) = &report.timeline {
        timeline(o, tl, &report.processes);
    }
    for p in &report.processes {
        let _ = writeln!(
            o,
            "<section class=\"process\" id=\"{}pid-{}\"{}><h2>{}process {} ({}) on GPU {}</h2>",
            id_prefix,
            p.pid,
            p.rank
                .map(|r| format!(" data-rank=\"{r}\""))
                .unwrap_or_default(),
            if p.rank.is_some() {
                format!("{}, ", esc(&who(p)))
            } else {
                String::new()
            },
            p.pid,
            esc(p.name.as_deref().unwrap_or("?")),
            p.devices
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        rank_section(o, p, scale);
        o.push_str("<table class=\"categories\"><tr><th>category</th><th class=\"n\">time ms</th><th class=\"n\">share</th><th class=\"n\">count</th></tr>\n");
        for c in p.categories.iter().filter(|c| c.count > 0) {
            let _ = writeln!(
                o,
                "<tr data-category=\"{}\"><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1}%</td><td class=\"n\">{}</td></tr>",
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
        o.push_str("<table class=\"kernels\"><tr><th class=\"n\">total ms</th><th class=\"n\">count</th><th class=\"n\">avg us</th><th>category</th><th>kernel</th></tr>\n");
        for k in &p.kernels {
            let _ = writeln!(
                o,
                "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1}</td><td>{}</td><td title=\"{}\">{}</td></tr>",
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
                "<tr class=\"rest\"><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\"></td><td></td><td>{} more kernels</td></tr>",
                ms(r.total_ns),
                r.count,
                r.rows
            );
        }
        o.push_str("</table>\n");
        let ranges: Vec<_> = p.nvtx.iter().filter(|r| r.inclusive_ns > 0).collect();
        if !ranges.is_empty() {
            o.push_str("<table class=\"nvtx\"><tr><th class=\"n\">inclusive ms</th><th class=\"n\">exclusive ms</th><th class=\"n\">proj ms</th><th class=\"n\">instances</th><th>range</th></tr>\n");
            for r in ranges {
                let _ = writeln!(
                    o,
                    "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}{}</td></tr>",
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
                    "<tr class=\"rest\"><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{} more range names</td></tr>",
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
}
