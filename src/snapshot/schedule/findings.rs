//! What a marked schedule says first (`crate::findings`): the event the process died inside,
//! and the schedule's peak event with the allocation that made it and what grew inside it.

use super::memory::ScheduleMemory;
use crate::findings::{Figure, Finding, Severity, Unit, Where};

fn gib(b: u64) -> String {
    Unit::Bytes.show(b as f64)
}

pub fn findings(s: &ScheduleMemory, place: &Where) -> Vec<Finding> {
    let mut out = Vec::new();
    // The innermost range left open: where the process was when it died.
    if let Some(e) = s.events.iter().rev().find(|e| e.open) {
        let mut f = Finding::new(
            Severity::Error,
            "died-inside-event",
            format!("out of memory inside {}", e.name),
        )
        .at(place.clone().at(e.name.clone()))
        .figure(Figure::new(e.peak_bytes as f64, Unit::Bytes))
        .evidence(format!(
            "the range `{}` was opened and never closed; {} live when it began",
            e.name,
            gib(e.live_start_bytes)
        ));
        if let Some(a) = e.allocated.first() {
            f = f.evidence(format!(
                "allocated inside it, most: {} {}",
                gib(a.bytes),
                a.name
            ));
        }
        out.push(
            f.next("read the out-of-memory snapshot of this rank for the allocation that failed"),
        );
    }
    if let Some(i) = s.peak_event {
        let e = &s.events[i];
        let mut f = Finding::new(
            Severity::Notice,
            "schedule-peak",
            format!("the schedule's peak, in step {}", e.step),
        )
        .at(place.clone().at(e.name.clone()))
        .figure(Figure::new(e.peak_bytes as f64, Unit::Bytes));
        if let Some(p) = &e.peak_by {
            f = f.evidence(format!(
                "made by a {} allocation ({}){}",
                gib(p.bytes),
                p.category,
                p.site
                    .as_ref()
                    .map(|s| format!(" at {s}"))
                    .unwrap_or_default()
            ));
        }
        f = f.evidence(format!(
            "{} live when it began, {} when it ended",
            gib(e.live_start_bytes),
            gib(e.live_end_bytes)
        ));
        if let Some(a) = e.allocated.first() {
            f = f.evidence(format!(
                "allocated inside it, most: {} {}",
                gib(a.bytes),
                a.name
            ));
        }
        out.push(f.next(
            "put the estimator beside it: instrument log --estimate (or the run report) for this \
             rank",
        ));
    }
    out
}
