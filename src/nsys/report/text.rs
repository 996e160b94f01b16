//! The default, human-readable rendering of the report (every table already cut to `--top`).

use std::fmt::Write;

use crate::nsys::report::{Process, Report, ms, truncate, work_line};

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn process(out: &mut String, p: &Process) {
    let name = p.name.as_deref().unwrap_or("?");
    let devices: Vec<String> = p.devices.iter().map(|d| d.to_string()).collect();
    let _ = writeln!(
        out,
        "\n== process {} ({}) on GPU {} ==",
        p.pid,
        name,
        if devices.is_empty() {
            "-".to_string()
        } else {
            devices.join(",")
        }
    );
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

pub fn render(report: &Report) -> String {
    let mut out = String::new();
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
        process(&mut out, p);
    }
    if !report.notes.is_empty() {
        let _ = writeln!(out, "\nnotes:");
        for n in &report.notes {
            let _ = writeln!(out, "  - {}", n.message);
        }
    }
    out
}
