//! The schedule as a terminal shows it: one row per event in schedule order, memory in MiB
//! or GiB, at most 100 columns; a detail layer's stages indented under their event.

use std::fmt::Write as _;

use super::memory::ScheduleMemory;
use crate::findings::Unit;

fn show(b: u64) -> String {
    Unit::Bytes.show(b as f64)
}

/// The "Schedule" section: each event's live memory at its start and end, its peak, and what
/// it allocated most; the peak event marked `*`, an event left open `!`.
pub fn render(out: &mut String, s: &ScheduleMemory) {
    let events = s.events.iter().filter(|e| e.op != "stage").count();
    let stages = s.events.len() - events;
    let _ = writeln!(
        out,
        "\nSchedule (marked by the run): {events} event(s){}, live memory at each event's start \
         and end, its peak, and what it allocated most",
        if stages > 0 {
            format!(", {stages} detail-layer stage(s)")
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "  (* the event with the schedule's peak; ! the event the process died inside)"
    );
    let _ = writeln!(
        out,
        "  {:<35} {:>9} {:>9} {:>9}  allocated most",
        "event", "start", "end", "peak"
    );
    for (i, e) in s.events.iter().enumerate() {
        let name = if e.op == "stage" {
            format!("  {}", e.name)
        } else {
            e.name.clone()
        };
        let most = e
            .allocated
            .first()
            .map(|a| format!("{} {}", show(a.bytes), a.name))
            .unwrap_or_else(|| "-".into());
        let mark = if e.open {
            "!"
        } else if s.peak_event == Some(i) {
            "*"
        } else {
            " "
        };
        let line = format!(
            "{mark} {:<35} {:>9} {:>9} {:>9}  {most}",
            name,
            show(e.live_start_bytes),
            show(e.live_end_bytes),
            show(e.peak_bytes),
        );
        crate::findings::text::wrap(out, &line);
    }
    if s.unplaced_marks > 0 {
        let _ = writeln!(
            out,
            "  {} mark(s) could not be placed on the trace (an END without its START, or no time_us)",
            s.unplaced_marks
        );
    }
}
