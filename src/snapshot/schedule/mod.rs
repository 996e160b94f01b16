//! Memory along a marked pipeline schedule: a step snapshot whose run wrapped each chunk call
//! of the schedule in a `record_function` range named as the memory estimator names the event
//! (`instrument add`'s schedule marks), read per event.
//!
//! - `conventions` — the table (`conventions.toml`): which names are events and stages, the
//!   categories of memory;
//! - `spans`       — the marks placed on the trace;
//! - `memory`      — memory per event: live at its start and end, its peak and what made it,
//!   allocated and freed by category, the largest sites;
//! - `findings`    — what leads the report: the schedule's peak event and its cause, an event
//!   the process died inside.

pub mod conventions;
pub mod findings;
pub mod memory;
pub mod spans;

pub use conventions::Conventions;
pub use memory::{EventMemory, ScheduleMemory};

use super::model::Snapshot;
use super::sites::Attributor;
use super::trace::TraceAnalysis;

/// The schedule of `device`'s trace when the run marked it; `None` for a snapshot without
/// schedule marks (it reads as any other).
pub fn read(
    snap: &Snapshot,
    device: i64,
    ta: &TraceAnalysis,
    attr: &mut Attributor,
) -> Option<ScheduleMemory> {
    let conv = Conventions::builtin();
    let trace = snap.traces.get(usize::try_from(device).ok()?)?;
    let marks = spans::find(conv, &snap.annotations, device, &trace.events)?;
    Some(memory::per_event(conv, snap, ta, &marks, attr))
}
