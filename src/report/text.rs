//! The run report as text: the findings first, then per rank (by mesh coordinates) the
//! schedule's events with the printed value beside the snapshot's, at most 100 columns.

use std::fmt::Write as _;

use super::Report;
use crate::findings::Unit;

fn show(b: f64) -> String {
    Unit::Bytes.show(b)
}

pub fn render(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "instrument report: {}", r.read_line());
    o.push('\n');
    crate::findings::text::render(&mut o, &r.findings);
    for rank in &r.ranks {
        let name = match &rank.mesh {
            Some(m) => format!("rank {} ({m})", rank.rank),
            None => format!("rank {}", rank.rank),
        };
        let _ = writeln!(o, "== {name}");
        let peaks = format!(
            "  peak in the profiled step: printed {}, snapshot {}",
            rank.printed_peak_bytes
                .map_or("-".into(), |b| show(b as f64)),
            rank.snapshot_peak_bytes
                .map_or("-".into(), |b| show(b as f64))
        );
        crate::findings::text::wrap(&mut o, &peaks);
        if let Some(s) = &rank.step_snapshot {
            crate::findings::text::wrap(&mut o, &format!("  step snapshot: {s}"));
        }
        if let Some(s) = &rank.oom_snapshot {
            crate::findings::text::wrap(&mut o, &format!("  out-of-memory snapshot: {s}"));
        }
        if rank.events.is_empty() {
            super::stages::text(&mut o, rank);
            continue;
        }
        let estimated = rank.events.iter().any(|e| e.estimated_bytes.is_some());
        let _ = writeln!(
            o,
            "  {:<35} {:>11} {:>11} {:>10}{}",
            "schedule event",
            "printed",
            "at its end",
            "peak",
            if estimated { "   estimated" } else { "" }
        );
        for e in &rank.events {
            let printed = e.printed_bytes.map_or("-".into(), |p| show(p as f64));
            let snap = show(e.snapshot_end_bytes as f64);
            let est = match (estimated, e.estimated_bytes) {
                (true, Some(b)) => format!(" {:>11}", show(b as f64)),
                (true, None) => format!(" {:>11}", "-"),
                (false, _) => String::new(),
            };
            let _ = writeln!(
                o,
                "{} {:<35} {:>11} {:>11} {:>10}{est}",
                if e.open { "!" } else { " " },
                e.event,
                printed,
                snap,
                show(e.snapshot_peak_bytes as f64)
            );
        }
        crate::findings::text::wrap(
            &mut o,
            "  (printed: the print that reads the event's end, beside the snapshot's live memory \
             there; peak: the highest inside the event; `!` the event it died inside)",
        );
        super::stages::text(&mut o, rank);
    }
    crate::findings::text::fit(&o)
}
