//! The default, human-readable rendering of the report.

use std::fmt::Write;

use crate::nsys::report::{Process, Report};

fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn process(out: &mut String, p: &Process, top: usize) {
    let name = p.name.as_deref().unwrap_or("?");
    let devices: Vec<String> = p.devices.iter().map(|d| d.to_string()).collect();
    let _ = writeln!(
        out,
        "\n== process {} ({}) on device {} ==",
        p.pid,
        name,
        if devices.is_empty() {
            "-".to_string()
        } else {
            devices.join(",")
        }
    );
    let _ = writeln!(
        out,
        "kernels {} ms in {} launches; memcpy {} ms ({}); memset {} ms ({})",
        ms(p.kernel_ns),
        p.kernel_count,
        ms(p.memcpy_ns),
        p.memcpy_count,
        ms(p.memset_ns),
        p.memset_count
    );
    let _ = writeln!(
        out,
        "\n  {:<15} {:>12} {:>8} {:>9}",
        "category", "time (ms)", "share", "kernels"
    );
    for c in &p.categories {
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
        "\n  communication: {} ms, {} of kernel time",
        ms(p.communication.time_ns),
        pct(p.communication.share_of_kernel_time)
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
        for k in p.kernels.iter().take(top) {
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
    }
    let ranges: Vec<_> = p.nvtx.iter().filter(|r| r.inclusive_ns > 0).collect();
    if !ranges.is_empty() {
        let _ = writeln!(
            out,
            "\n  NVTX ranges (GPU time of the work launched inside)\n  {:>12} {:>12} {:>12} {:>9} {:>10}  range",
            "incl ms", "excl ms", "proj ms", "instances", "comm"
        );
        for r in ranges.iter().take(40) {
            let comm = r
                .inclusive_by_category
                .first()
                .map(|c| c.time_ns)
                .unwrap_or(0);
            let _ = writeln!(
                out,
                "  {:>12} {:>12} {:>12} {:>9} {:>10}  {}",
                ms(r.inclusive_ns),
                ms(r.exclusive_ns),
                ms(r.proj.total_ns),
                r.instances,
                pct(if r.inclusive_ns > 0 {
                    comm as f64 / r.inclusive_ns as f64
                } else {
                    0.0
                }),
                truncate(&r.nsys_name, 80)
            );
        }
        if ranges.len() > 40 {
            let _ = writeln!(out, "  ... {} more ranges (see --json)", ranges.len() - 40);
        }
        let _ = writeln!(out, "  outside every range: {} ms", ms(p.unattributed_ns));
    }
}

pub fn render(report: &Report, top: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "nsys report: {}", report.file);
    for g in &report.gpus {
        let _ = writeln!(out, "GPU {}: {}", g.id, g.name);
    }
    let t = &report.totals;
    let _ = writeln!(
        out,
        "{} process(es); kernels {} ms in {} launches; communication {} of kernel time",
        report.processes.len(),
        ms(t.kernel_ns),
        t.kernel_count,
        pct(t.communication_share)
    );
    for p in &report.processes {
        process(&mut out, p, top);
    }
    if !report.notes.is_empty() {
        let _ = writeln!(out, "\nnotes:");
        for n in &report.notes {
            let _ = writeln!(out, "  - {}", n.message);
        }
    }
    out
}
