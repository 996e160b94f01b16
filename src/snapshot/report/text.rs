//! The plain-text rendering of a [`Report`].

use std::fmt::Write;

use crate::findings::text;

use super::{Report, human, pct, short, signed_human};
use crate::snapshot::analysis::Totals;
use crate::snapshot::frames::short_function;
use crate::snapshot::sites::Origin;

fn totals_lines(out: &mut String, t: &Totals) {
    let mapped = if t.expandable_segments > 0 && t.expandable_segments == t.segments {
        " (expandable segments: the pages mapped, not the address space reserved for them)"
    } else if t.expandable_segments > 0 {
        " (in expandable segments: the pages mapped)"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "  reserved          {:>12}  in {} segment(s){mapped}",
        human(t.reserved_bytes),
        t.segments
    );
    let _ = writeln!(
        out,
        "  live (allocated)  {:>12}  in {} block(s)",
        human(t.allocated_bytes),
        t.allocated_blocks
    );
    let _ = writeln!(
        out,
        "  delayed frees     {:>12}  in {} block(s) (active_pending_free)",
        human(t.pending_free_bytes),
        t.pending_free_blocks
    );
    let _ = writeln!(
        out,
        "  inactive cached   {:>12}  in {} block(s); largest inactive block {}; {:.1}% of reserved",
        human(t.inactive_bytes),
        t.inactive_blocks,
        human(t.largest_inactive_block_bytes),
        t.inactive_fraction * 100.0
    );
    if t.expandable_inactive_bytes > 0 {
        let _ = writeln!(
            out,
            "    {} of it in expandable segments: pages still mapped but free, not fragmentation (the allocator unmaps them when an allocation needs the memory)",
            human(t.expandable_inactive_bytes)
        );
    }
    if t.fragmented_bytes > 0 {
        let _ = writeln!(
            out,
            "    {} of it free inside segments that also hold live blocks: fragmentation, {:.1}% of reserved (only requests that fit the holes can use it)",
            human(t.fragmented_bytes),
            t.fragmentation_fraction * 100.0
        );
    }
    let _ = writeln!(
        out,
        "  requested         {:>12}  rounding waste {} ({}% of live)",
        human(t.requested_bytes),
        human(t.rounding_waste_bytes),
        pct(t.rounding_waste_bytes, t.allocated_bytes)
    );
    if t.reclaimable_bytes > 0 {
        let mut parts = Vec::new();
        if t.free_segments > 0 && t.free_segment_bytes > 0 {
            parts.push(format!(
                "{} segment(s) hold no active block",
                t.free_segments
            ));
        }
        if t.expandable_segments > 0 {
            parts.push("the whole free pages of expandable segments".to_string());
        }
        let _ = writeln!(
            out,
            "  torch.cuda.empty_cache() would return {} ({})",
            human(t.reclaimable_bytes),
            parts.join("; ")
        );
    }
}

fn stream_name(s: i64) -> String {
    if s == 0 {
        "0 (default)".into()
    } else {
        format!("{s:#x}")
    }
}

/// The text report: the findings first (an OOM leads them), the OOMs in detail, then the
/// state at the snapshot; a gate's verdict is the last line. No line is wider than
/// `findings::text::WIDTH`.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    body(&mut out, r);
    // Whatever a section wrote past the edge (a long path, a table row) is wrapped here.
    let mut fitted = text::fit(&out);
    // The gate last: its verdict is one line however long, for the tail of a CI log.
    if let Some(g) = &r.gate {
        fitted.push('\n');
        g.render(&mut fitted, 10);
    }
    fitted
}

fn body(out: &mut String, r: &Report) {
    let out = &mut *out;
    let layout = &r.source.layout;
    let fmt = match (layout.format.as_str(), layout.pickle_protocol) {
        ("pickle", Some(p)) => format!("pickle protocol {p}"),
        ("pickle", None) => "pickle protocol 0 or 1".to_string(),
        (f, _) => f.to_string(),
    };
    let _ = writeln!(
        out,
        "instrument snapshot: {} ({}, {})",
        r.source.path,
        fmt,
        human(r.source.file_bytes)
    );
    if r.mode != "ranks" {
        let _ = writeln!(out, "analysing {}", r.device_note);
    }
    if !r.findings.is_empty() {
        out.push('\n');
        text::render(out, &r.findings);
        // The block ends with a blank line; every section below opens with one.
        out.pop();
    }
    if let Some(s) = &r.schedule {
        crate::snapshot::schedule::text::render(out, s);
    }
    render_ooms(out, r);
    if r.mode == "ranks" {
        render_ranks(out, r);
    }
    if let Some(d) = &r.diff {
        let _ = writeln!(out, "\nDiff: {} -> {}", d.before.path, d.after.path);
        let _ = writeln!(
            out,
            "  live {} -> {}   reserved {} -> {}",
            human(d.totals_before.allocated_bytes),
            human(d.totals_after.allocated_bytes),
            human(d.totals_before.reserved_bytes),
            human(d.totals_after.reserved_bytes)
        );
        if d.sites.is_empty() {
            let _ = writeln!(out, "  no site changed ({} unchanged)", d.unchanged_sites);
        }
        for s in d.sites.iter().take(r.sites.len().max(10)) {
            let verdict = match s.verdict.as_str() {
                "growing" => "GROWING (leaking or retaining)",
                "one_time" => "one-time growth",
                _ => "shrinking",
            };
            let _ = writeln!(
                out,
                "  {:<31} {:>12}  blocks {} -> {}  bytes {} -> {}  {}:{} in {} [{}]",
                verdict,
                signed_human(s.delta_bytes),
                s.blocks_before,
                s.blocks_after,
                human(s.bytes_before),
                human(s.bytes_after),
                short(&s.file),
                s.line,
                short_function(&s.function),
                s.category.name()
            );
        }
    }

    let _ = writeln!(
        out,
        "\nTotals{}",
        r.device
            .map(|d| format!(" (device {d})"))
            .unwrap_or_default()
    );
    totals_lines(out, &r.totals);
    if r.devices.len() > 1 {
        let _ = writeln!(out, "  per device:");
        for d in &r.devices {
            let _ = writeln!(
                out,
                "    device {}: reserved {}, live {}, inactive {}",
                d.device,
                human(d.totals.reserved_bytes),
                human(d.totals.allocated_bytes),
                human(d.totals.inactive_bytes)
            );
        }
    }
    if !r.streams.is_empty() {
        let _ = writeln!(out, "  per stream:");
        for s in &r.streams {
            let _ = writeln!(
                out,
                "    stream {}: reserved {}, live {}, delayed frees {}, inactive {} ({} segment(s))",
                stream_name(s.stream),
                human(s.totals.reserved_bytes),
                human(s.totals.allocated_bytes),
                human(s.totals.pending_free_bytes),
                human(s.totals.inactive_bytes),
                s.totals.segments
            );
        }
    }

    let _ = writeln!(
        out,
        "\nWhere live memory goes (top {} of {} site(s), by first user frame)",
        r.sites.len(),
        r.sites_total
    );
    if r.sites.is_empty() {
        let _ = writeln!(out, "  no live blocks");
    }
    for s in &r.sites {
        let origin = match s.origin {
            Origin::User | Origin::None => "",
            Origin::Library => " (no user frame; library)",
            Origin::Torch => " (no user frame; torch)",
            Origin::Native => " (no Python frame)",
        };
        let label = match (&s.library, s.origin) {
            (Some(l), Origin::User) => {
                format!("{}, called from {}", l.label(), s.site_ref().label_full())
            }
            _ => s.site_ref().label_full(),
        };
        let _ = writeln!(
            out,
            "  {:>12} {:>5.1}% {:>6} blk  {:<15} {}{}",
            human(s.bytes),
            s.percent,
            s.blocks,
            s.category.name(),
            label,
            origin
        );
        if s.stack.len() > 1 {
            text::wrap_chain(out, "      called from ", &s.stack[1..]);
        }
    }
    if let Some(n) = &r.no_stack {
        let _ = writeln!(
            out,
            "  no stack: {} ({}% of live) in {} block(s), {}",
            human(n.bytes),
            n.percent,
            n.blocks,
            n.meaning
        );
        let _ = writeln!(out, "    fix: {}", n.fix);
    }
    if !r.categories.is_empty() {
        let with_stack: u64 = r.categories.values().sum();
        let parts: Vec<String> = r
            .categories
            .iter()
            .map(|(c, b)| format!("{} {} ({}%)", c.name(), human(*b), pct(*b, with_stack)))
            .collect();
        let of = if r.no_stack.is_some() {
            format!(" (of the {} with a stack)", human(with_stack))
        } else {
            String::new()
        };
        let _ = writeln!(out, "  by category{of}: {}", parts.join(", "));
    }

    render_trace(out, r);

    let _ = writeln!(out, "\nPatterns");
    if r.patterns.is_empty() {
        let _ = writeln!(
            out,
            "  none of the named patterns has evidence in this snapshot"
        );
    }
    for p in &r.patterns {
        let _ = writeln!(out, "  [{}] {}", p.name, p.title);
        for e in &p.evidence {
            let _ = writeln!(out, "    - {e}");
        }
        let _ = writeln!(out, "    fix: {}", p.fix);
    }
}

fn render_trace(out: &mut String, r: &Report) {
    let t = &r.trace;
    if !t.present {
        let _ = writeln!(
            out,
            "\nTrace: none for this device (record with torch.cuda.memory._record_memory_history() to get allocation history)"
        );
        return;
    }
    let _ = writeln!(
        out,
        "\nTrace ({}): {} event(s) analysed{}",
        t.device
            .map(|d| format!("device {d}"))
            .unwrap_or_else(|| "all ranks".into()),
        t.kept_events,
        if t.dropped > 0 {
            format!(
                ", {} older event(s) dropped (--max-trace-events {})",
                t.dropped,
                t.max_trace_events.map_or("none".into(), |m| m.to_string())
            )
        } else {
            String::new()
        }
    );
    let counts: Vec<String> = t
        .counts
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(out, "  {}", counts.join(", "));
    if r.mode == "ranks" {
        return;
    }
    let _ = writeln!(
        out,
        "  live memory: {} at the window start, peak {}",
        human(t.baseline_live_bytes),
        human(t.peak_live_bytes)
    );
    if t.pending_frees.is_empty() {
        let _ = writeln!(out, "  every requested free completed");
    }
    for p in &t.pending_frees {
        let _ = writeln!(
            out,
            "  frees requested but not completed: {} block(s), {} on stream {} (still in use by another stream, or its work has not reached the free yet)",
            p.blocks,
            human(p.bytes),
            stream_name(p.stream)
        );
    }
    if t.counts
        .iter()
        .any(|(k, v)| k.starts_with("segment_") && *v > 0)
    {
        let _ = writeln!(
            out,
            "  reserved: {} at the window start, peak {}",
            human(t.reserved_at_start_bytes),
            human(t.peak_reserved_bytes)
        );
    }
    if let Some(s) = &t.steps {
        let _ = writeln!(out, "  steps: {}, {}", s.count, s.note);
    }
    for u in &t.repeated_unfreed {
        let _ = writeln!(
            out,
            "  allocated in {} of {} steps without a matching free: {}:{} in {} [{}], {} block(s), {}",
            u.steps_with_unfreed,
            u.steps,
            short(&u.file),
            u.line,
            u.function,
            u.category.name(),
            u.blocks,
            human(u.bytes)
        );
    }
    if let Some(s) = &t.sawtooth {
        let _ = writeln!(
            out,
            "  sawtooth: {} of {} steps rise and fall; mean peak {}, mean trough {}, {} allocated and released per step ({} of it activations)",
            s.cycles,
            s.steps,
            human(s.mean_peak_bytes),
            human(s.mean_trough_bytes),
            human(s.mean_released_bytes),
            human(s.mean_activation_released_bytes)
        );
    }
    for b in &t.free_bursts {
        let _ = writeln!(
            out,
            "  burst of frees at events {}-{} (step {}): {} block(s), {} allocated over {} steps, mostly {}",
            b.start_event,
            b.end_event,
            b.step,
            b.blocks,
            human(b.bytes),
            b.allocated_over_steps,
            b.site.label()
        );
    }
}

/// Each OOM in detail, right after the findings: the run died of it.
fn render_ooms(out: &mut String, r: &Report) {
    for (i, o) in r.oom.iter().enumerate() {
        let rank = o.rank.map(|r| format!(" rank {r}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "\nOOM #{}{} at event {}: tried to allocate {}, device_free {}, stream {}, live just before {}",
            i + 1,
            rank,
            o.event_index,
            human(o.size_bytes),
            human(o.device_free_bytes),
            stream_name(o.stream),
            human(o.live_bytes_before)
        );
        let _ = writeln!(out, "  why: {}", o.why);
        let _ = writeln!(out, "  at {}", o.site.label());
        for f in o.frames.iter().take(12) {
            let _ = writeln!(
                out,
                "    {}:{} in {}",
                f.file,
                f.line,
                short_function(&f.function)
            );
        }
        if o.frames.len() > 12 {
            let _ = writeln!(
                out,
                "    ... {} more frame(s) (--json lists them)",
                o.frames.len() - 12
            );
        }
        let _ = writeln!(out, "  holding memory just before:");
        for h in &o.holders {
            let _ = writeln!(
                out,
                "    {:>12} {:>6} blk  {:<15} {}:{} in {}",
                human(h.bytes),
                h.blocks,
                h.category.name(),
                short(&h.file),
                h.line,
                short_function(&h.function)
            );
        }
    }
}

fn render_ranks(out: &mut String, r: &Report) {
    let _ = writeln!(out, "\nRank files");
    for f in &r.rank_files {
        let _ = writeln!(out, "  {:<40} {}", f.file, f.note);
    }
    let _ = writeln!(out, "\nRanks");
    let _ = writeln!(
        out,
        "  {:>4}  {:>12}  {:>12}  {:>12}  {:>4}  file",
        "rank", "peak", "live", "reserved", "OOMs"
    );
    for row in &r.ranks {
        let _ = writeln!(
            out,
            "  {:>4}  {:>12}  {:>12}  {:>12}  {:>4}  {}{}",
            row.rank,
            human(row.peak_bytes),
            human(row.allocated_bytes),
            human(row.reserved_bytes),
            row.ooms,
            row.file,
            if row.stands_out {
                "  <- stands out"
            } else {
                ""
            }
        );
    }
    if r.ranks.iter().all(|x| x.peers.is_none()) {
        // Ranks of different pipeline stages hold different memory by design.
        let _ = writeln!(
            out,
            "  not compared with each other: snapshots alone do not say which stage and role each rank has"
        );
    }
    let _ = writeln!(out, "\nThe sections below add up all ranks.");
}
