//! The default, human-readable rendering of the report (every table already cut to `--top`):
//! per export its processes (rank, window, streams and stages first, then the GPU time), then
//! the ranks side by side; and the comparison of two runs (`--diff`).

use std::fmt::Write;

use crate::nsys::ranks::across::Across;
use crate::nsys::ranks::diff::Diff;
use crate::nsys::ranks::figures::Figures;
use crate::nsys::report::{Document, Process, Report, ms, truncate, work_line};

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A share as pithtrain's compute_overlap.py prints it (two decimals of per cent).
fn pct2(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// `rank 5 (pp 1, ep 1)`, or `pid 4242`.
pub(crate) fn who(p: &Process) -> String {
    match (p.rank, &p.mesh) {
        (Some(r), Some(m)) if !m.is_empty() => format!("rank {r} ({})", m.short()),
        (Some(r), _) => format!("rank {r}"),
        _ => format!("pid {}", p.pid),
    }
}

fn stage_table(out: &mut String, window: &Figures, whole: &Figures) {
    if window.stages.is_empty() && whole.stages.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  {:<10} {:>10} {:>11} {:>8} {:>8} {:>8}   {:>11} {:>8}",
        "stage", "comm ms", "exposed ms", "overlap", "min", "max", "whole: exp", "overlap"
    );
    let mut names: Vec<&str> = window
        .stages
        .iter()
        .chain(&whole.stages)
        .map(|s| s.stage.as_str())
        .collect();
    names.sort();
    names.dedup();
    for n in names {
        let w = window.stages.iter().find(|s| s.stage == n);
        let a = whole.stages.iter().find(|s| s.stage == n);
        let _ = write!(out, "  {n:<10}");
        match w {
            Some(s) => {
                let _ = write!(
                    out,
                    " {:>10} {:>11} {:>8} {:>8} {:>8}",
                    ms(s.comm_ns),
                    ms(s.exposed_ns),
                    pct2(s.overlap),
                    pct2(s.overlap_min),
                    pct2(s.overlap_max)
                );
            }
            None => {
                let _ = write!(
                    out,
                    " {:>10} {:>11} {:>8} {:>8} {:>8}",
                    "-", "-", "", "", ""
                );
            }
        }
        match a {
            Some(s) => {
                let _ = write!(out, "   {:>11} {:>8}", ms(s.exposed_ns), pct2(s.overlap));
            }
            None => {
                let _ = write!(out, "   {:>11} {:>8}", "-", "");
            }
        }
        let d = w.or(a).and_then(|s| s.describe.as_deref()).unwrap_or("");
        let _ = writeln!(out, "  {d}");
    }
}

/// What the conventions say about a process: mesh, window, streams, stages.
fn rank_block(out: &mut String, p: &Process) {
    if let Some(m) = &p.mesh {
        let mut line = format!("  mesh {}", m.full());
        let fields: Vec<String> = p
            .setup_fields
            .0
            .iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k} {v}")))
            .collect();
        if !fields.is_empty() {
            let _ = write!(line, "; {}", fields.join(", "));
        }
        let _ = writeln!(out, "{line}");
    }
    if let Some(n) = &p.setup_note {
        let _ = writeln!(out, "  note: {n}");
    }
    let w = &p.window;
    let t = &w.totals;
    let what = match w.pick {
        "median" => format!("median of {} chunk ranges: {:?}", p.chunks.count, w.name),
        "range" => "as asked".to_string(),
        _ => "the whole capture".to_string(),
    };
    let _ = writeln!(
        out,
        "  window: {what}, {}..{} ns ({} ms){}",
        t.start_ns,
        t.end_ns,
        ms(t.end_ns - t.start_ns),
        if p.chunks.count > 0 {
            format!("; chunk time (median) {} ms", ms(p.chunks.median_ns as i64))
        } else {
            String::new()
        }
    );
    if let Some(n) = &w.note {
        let _ = writeln!(out, "  note: {n}");
    }
    if !p.streams.is_empty() {
        let streams: Vec<String> = p
            .streams
            .iter()
            .map(|s| format!("{} {}", s.stream, s.purpose))
            .collect();
        let _ = writeln!(out, "  streams: {}", streams.join(", "));
        let _ = writeln!(
            out,
            "  in the window: compute {} ms, communication {} ms of which {} ms exposed, barriers {} ms",
            ms(t.compute_ns),
            ms(t.comm_ns),
            ms(t.exposed_ns),
            ms(t.barrier_ns)
        );
    }
    let whole = Figures {
        totals: p.whole_capture.totals.clone(),
        streams: Vec::new(),
        stages: p.whole_capture.stages.clone(),
    };
    let window = Figures {
        totals: t.clone(),
        streams: Vec::new(),
        stages: p.stages.clone(),
    };
    stage_table(out, &window, &whole);
}

fn process(out: &mut String, p: &Process) {
    let name = p.name.as_deref().unwrap_or("?");
    let devices: Vec<String> = p.devices.iter().map(|d| d.to_string()).collect();
    let _ = writeln!(
        out,
        "\n== {}{} ({}) on GPU {} ==",
        if p.rank.is_some() {
            format!("{}, process ", who(p))
        } else {
            "process ".into()
        },
        p.pid,
        name,
        if devices.is_empty() {
            "-".to_string()
        } else {
            devices.join(",")
        }
    );
    rank_block(out, p);
    let line = work_line(p.kernel_ns, p.kernel_count, p.graph_ns, p.graph_count);
    let _ = writeln!(
        out,
        "{line}; memcpy {} ms ({}); memset {} ms ({})",
        ms(p.memcpy_ns),
        p.memcpy_count,
        ms(p.memset_ns),
        p.memset_count
    );
    let _ = writeln!(
        out,
        "\n  {:<15} {:>12} {:>8} {:>9}",
        "category", "time (ms)", "share", "count"
    );
    for c in p.categories.iter().filter(|c| c.count > 0) {
        let _ = writeln!(
            out,
            "  {:<15} {:>12} {:>8} {:>9}",
            c.category,
            ms(c.time_ns),
            pct(c.share),
            c.count
        );
    }
    let _ = writeln!(
        out,
        "\n  communication: {} ms, {} of GPU time",
        ms(p.communication.time_ns),
        pct(p.communication.share_of_gpu_time)
    );
    for r in &p.communication.by_op {
        let _ = writeln!(
            out,
            "    {:<14} {:>12} ms {:>8} kernels",
            r.op,
            ms(r.time_ns),
            r.count
        );
    }
    for r in &p.communication.from_sendrecv {
        let _ = writeln!(
            out,
            "    ({} SendRecv kernels, {} ms, counted as {}: launched inside a range naming it)",
            r.count,
            ms(r.time_ns),
            r.op
        );
    }
    let o = &p.overlap;
    let _ = writeln!(
        out,
        "  overlap: {} ms of communication hidden under compute ({}), {} ms exposed",
        ms(o.hidden_ns),
        pct(o.hidden_share),
        ms(o.exposed_ns)
    );
    if !p.kernels.is_empty() {
        let _ = writeln!(
            out,
            "\n  top kernels\n  {:>10} {:>7} {:>8} {:>10} {:<13} name",
            "total ms", "share", "count", "avg us", "category"
        );
        for k in &p.kernels {
            let _ = writeln!(
                out,
                "  {:>10} {:>7} {:>8} {:>10.1} {:<13} {}",
                ms(k.stats.total_ns),
                pct(k.share),
                k.stats.count,
                k.stats.avg_ns / 1e3,
                k.category,
                truncate(&k.name, 90)
            );
        }
        if let Some(r) = &p.kernels_rest {
            let _ = writeln!(
                out,
                "  {:>10} {:>7} {:>8} {:>10} {:<13} ({} more kernels; --all lists them)",
                ms(r.total_ns),
                pct(r.share),
                r.count,
                "",
                "",
                r.rows
            );
        }
    }
    let ranges: Vec<_> = p.nvtx.iter().filter(|r| r.inclusive_ns > 0).collect();
    if !ranges.is_empty() {
        let _ = writeln!(
            out,
            "\n  NVTX ranges (GPU time of the work launched inside)\n  {:>12} {:>12} {:>12} {:>9} {:>8}  range",
            "incl ms", "excl ms", "proj ms", "instances", "comm"
        );
        for r in &ranges {
            let comm = r
                .inclusive_by_category
                .iter()
                .find(|c| c.category == "communication")
                .map(|c| c.time_ns)
                .unwrap_or(0);
            let mut label = r.nsys_name.clone();
            if let Some(s) = &r.shapes {
                let _ = write!(label, " {s}");
            }
            if let Some(n) = r.folded_names {
                let _ = write!(label, " ({n} names)");
            }
            let _ = writeln!(
                out,
                "  {:>12} {:>12} {:>12} {:>9} {:>8}  {}",
                ms(r.inclusive_ns),
                ms(r.exclusive_ns),
                ms(r.proj.total_ns),
                r.instances,
                pct(if r.inclusive_ns > 0 {
                    comm as f64 / r.inclusive_ns as f64
                } else {
                    0.0
                }),
                truncate(&label, 90)
            );
        }
        if let Some(r) = &p.nvtx_rest {
            let _ = writeln!(
                out,
                "  {:>12} {:>12} {:>12} {:>9} {:>8}  ({} more range names; --all lists them)",
                ms(r.inclusive_ns),
                ms(r.exclusive_ns),
                ms(r.proj_total_ns),
                r.instances,
                "",
                r.rows
            );
        }
        let _ = writeln!(out, "  outside every range: {} ms", ms(p.unattributed_ns));
    }
}

fn export(out: &mut String, report: &Report) {
    let _ = writeln!(out, "nsys report: {}", report.file);
    if let Some(v) = &report.export.nsys_version {
        let _ = writeln!(out, "written by nsys {v}");
    }
    for g in &report.gpus {
        let _ = writeln!(out, "GPU {}: {}", g.id, g.name);
    }
    let t = &report.totals;
    let line = format!(
        "{} process(es); {}",
        report.processes.len(),
        work_line(t.kernel_ns, t.kernel_count, t.graph_ns, t.graph_count)
    );
    let _ = writeln!(
        out,
        "{line}; communication {} of GPU time",
        pct(t.communication_share)
    );
    let _ = writeln!(out, "CUDA graphs: {}", report.capture.cuda_graphs);
    for p in &report.processes {
        process(out, p);
    }
    if !report.notes.is_empty() {
        let _ = writeln!(out, "\nnotes:");
        for n in &report.notes {
            let _ = writeln!(out, "  - {}", n.message);
        }
    }
}

/// The header block (what was read), the findings, the ranks side by side, then each export's
/// processes in detail: what to act on first, the detail after.
pub fn render(doc: &Document) -> String {
    let mut out = String::new();
    let procs: usize = doc.exports.iter().map(|r| r.processes.len()).sum();
    let files: Vec<&str> = doc.exports.iter().map(|r| r.file.as_str()).collect();
    crate::findings::text::wrap(
        &mut out,
        &format!(
            "nsys report: {} ({} export(s), {procs} process(es), window {})",
            files.join(", "),
            doc.exports.len(),
            doc.window
        ),
    );
    out.push('\n');
    crate::findings::text::render(&mut out, &doc.findings);
    if doc.exports.len() > 1 || doc.across.ranks.iter().any(|r| r.mesh.is_some()) {
        across(&mut out, &doc.across, doc.exports.len(), procs, &doc.window);
        out.push('\n');
    }
    for (i, r) in doc.exports.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        export(&mut out, r);
    }
    crate::findings::text::fit(&out)
}

fn mesh_of(m: &Option<crate::mesh::Mesh>, rank: Option<u64>, pid: i64) -> String {
    match (rank, m) {
        (Some(r), Some(m)) => format!("rank {r} ({})", m.short()),
        (Some(r), None) => format!("rank {r}"),
        _ => format!("pid {pid}"),
    }
}

fn across(out: &mut String, a: &Across, exports: usize, procs: usize, window: &str) {
    let _ = writeln!(
        out,
        "== across ranks: {procs} process(es) in {exports} export(s), window {window} ==\n"
    );
    let _ = writeln!(
        out,
        "  {:<24} {:>10} {:>11} {:>10} {:>11} {:>8}  most exposed",
        "rank", "chunk ms", "compute ms", "comm ms", "exposed ms", "overlap"
    );
    for r in &a.ranks {
        let _ = writeln!(
            out,
            "  {:<24} {:>10} {:>11} {:>10} {:>11} {:>8}  {}",
            mesh_of(&r.mesh, r.rank, r.pid),
            ms(r.chunk_ns as i64),
            ms(r.compute_ns),
            ms(r.comm_ns),
            ms(r.exposed_ns),
            pct2(r.overlap),
            r.worst_stage.as_deref().unwrap_or("-")
        );
    }
    if !a.stages.is_empty() {
        let _ = writeln!(out, "\n  most exposed communication per stage:");
        for s in &a.stages {
            let others = if s.others > 0 {
                format!(
                    "; the other {} {} ms",
                    s.others,
                    if s.others_min_exposed_ns == s.others_max_exposed_ns {
                        ms(s.others_min_exposed_ns)
                    } else {
                        format!(
                            "{}..{}",
                            ms(s.others_min_exposed_ns),
                            ms(s.others_max_exposed_ns)
                        )
                    }
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "    {}: {} exposes {} ms of {} ms (hidden {}){others}",
                s.stage,
                mesh_of(&s.mesh, s.rank, s.pid),
                ms(s.exposed_ns),
                ms(s.comm_ns),
                pct2(s.overlap)
            );
        }
    }
    if let Some(b) = &a.balance {
        let _ = writeln!(
            out,
            "\n  pipeline balance ({}): chunk time (median)",
            b.axis
        );
        for g in &b.groups {
            let _ = writeln!(
                out,
                "    {} {}: {} ms ({} rank(s), {}..{}), compute in the window {} ms",
                b.axis,
                g.coordinate,
                ms(g.chunk_ns as i64),
                g.ranks,
                ms(g.min_chunk_ns as i64),
                ms(g.max_chunk_ns as i64),
                ms(g.compute_ns as i64)
            );
        }
        for s in &b.slower {
            let who = match s.kind {
                "coordinate" => format!("{} {}", b.axis, s.coordinate),
                _ => mesh_of(&s.mesh, s.rank, 0),
            };
            let peers = match s.kind {
                "coordinate" => format!("its {} peers", b.axis),
                _ => format!("the other ranks at {} {}", b.axis, s.coordinate),
            };
            let _ = writeln!(
                out,
                "    {who} is slower than {peers}: chunk {} ms vs {} ms (+{:.1}%)",
                ms(s.chunk_ns as i64),
                ms(s.peers_chunk_ns as i64),
                s.excess * 100.0
            );
        }
    }
}

/// How many gate rows within the gate the text shows (every one that failed is shown).
const GATE_ROWS: usize = 10;

/// `--diff`: rank by rank, stage by stage; with `--gate`, the gate's figures, largest growth
/// first, and its verdict as the last line.
pub fn render_diff(d: &Diff) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "nsys diff: {} ({} process(es)) -> {} ({} process(es)), window {}",
        d.before.files.join(", "),
        d.before.processes,
        d.after.files.join(", "),
        d.after.processes,
        d.window
    );
    if d.compared_by == "chunk-ranges" {
        let _ = writeln!(
            out,
            "\n  {:<24} {:>21} {:>8}   {:>23} {:>8}",
            "rank", "chunk ms", "change", "exposed ms", "change"
        );
        for r in &d.ranks {
            let _ = writeln!(
                out,
                "  {:<24} {:>10} -> {:>7} {:>8}   {:>11} -> {:>8} {:>8}",
                r.label,
                ms(r.chunk_ns.before as i64),
                ms(r.chunk_ns.after as i64),
                r.chunk_ns.change,
                ms(r.exposed_ns.before as i64),
                ms(r.exposed_ns.after as i64),
                r.exposed_ns.change
            );
        }
        let _ = writeln!(out, "\n  exposed communication per stage (ms):");
        for r in &d.ranks {
            let changed: Vec<String> = r
                .stages
                .iter()
                .filter(|s| s.exposed_ns.delta != 0.0)
                .map(|s| {
                    format!(
                        "{} {} -> {} ({})",
                        s.stage,
                        ms(s.exposed_ns.before as i64),
                        ms(s.exposed_ns.after as i64),
                        s.exposed_ns.change
                    )
                })
                .collect();
            crate::findings::text::wrap(
                &mut out,
                &format!(
                    "    {}: {}",
                    r.label,
                    if changed.is_empty() {
                        "no change".to_string()
                    } else {
                        changed.join(", ")
                    }
                ),
            );
        }
    } else {
        // Without chunk ranges on both sides: the whole capture's unions of each process.
        let _ = writeln!(
            out,
            "\n  whole capture, per process (no DualPipeV chunk ranges{}):",
            if d.compared_by == "mixed" {
                " in one of the runs"
            } else {
                ""
            }
        );
        // Communication is in the JSON and the gate; two figures keep the line in 100 columns.
        let _ = writeln!(
            out,
            "  {:<24} {:>22} {:>8}   {:>22} {:>8}",
            "process", "exposed comm ms", "change", "compute ms", "change"
        );
        for r in &d.ranks {
            let c = |x: &crate::nsys::ranks::diff::Change| {
                format!(
                    "{:>9} -> {:>9} {:>8}",
                    ms(x.before as i64),
                    ms(x.after as i64),
                    x.change
                )
            };
            let _ = writeln!(
                out,
                "  {:<24} {}   {}",
                r.label,
                c(&r.process_exposed_ns),
                c(&r.process_compute_ns)
            );
        }
    }
    for (what, v) in [
        ("only before", &d.only_before),
        ("only after", &d.only_after),
    ] {
        if !v.is_empty() {
            crate::findings::text::wrap(&mut out, &format!("\n  {what}: {}", v.join(", ")));
        }
    }
    // The body fitted to 100 columns; the gate's verdict stays one line, however long.
    let mut out = crate::findings::text::fit(&out);
    if let Some(g) = &d.gate {
        out.push('\n');
        g.render(&mut out, GATE_ROWS);
    }
    out
}
