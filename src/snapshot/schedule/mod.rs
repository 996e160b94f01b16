//! Memory along a marked pipeline schedule: a step snapshot whose run wrapped each chunk call
//! of the schedule in a `record_function` range named as the memory estimator names the event
//! (`instrument add`'s schedule marks), read per event.
//!
//! The marks themselves are read by `super::marks`.
//!
//! - `memory`      — memory per event: live at its start and end, its peak and what made it,
//!   allocated and freed by category, the largest sites;
//! - `text`        — the section of the text report;
//! - `findings`    — what leads the report: the schedule's peak event and its cause, an event
//!   the process died inside;
//! - `stages`      — memory per layer stage, by the stage functions in the allocations' frames.

pub mod findings;
pub mod memory;
pub mod stages;
pub mod text;

pub use memory::{EventMemory, ScheduleMemory};

use super::marks::{self, Conventions};
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
    let marks = marks::find(conv, &snap.annotations, device, &trace.events)?;
    Some(memory::per_event(conv, snap, ta, &marks, attr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::analysis::{Analysis, Options};
    use serde_json::Value;

    fn fixture(name: &str) -> (Snapshot, Value) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/snapshots");
        let snap = crate::snapshot::read::load(&dir.join(name).join("snapshot.pickle"), usize::MAX)
            .expect("the fixture reads");
        let planted = std::fs::read_to_string(dir.join(name).join("planted.json")).unwrap();
        (snap, serde_json::from_str(&planted).unwrap())
    }

    fn schedule_of(snap: &Snapshot) -> ScheduleMemory {
        let a = Analysis::new(snap, &Options::default()).unwrap();
        let mut attr = Attributor::new(&[]);
        read(snap, 0, a.trace.as_ref().unwrap(), &mut attr).expect("the step is marked")
    }

    /// Every event of the generator's DualPipeV step, against what the program planted:
    /// names in order, live at start and end, the peak and what made it, allocated and freed
    /// by category.
    #[test]
    fn each_event_reads_the_planted_truth() {
        let (snap, planted) = fixture("pipeline_step");
        let s = schedule_of(&snap);
        let events: Vec<&EventMemory> = s.events.iter().filter(|e| e.op != "stage").collect();
        let want = planted["schedule"]["events"].as_array().unwrap();
        let names = |v: &[&EventMemory]| v.iter().map(|e| e.name.clone()).collect::<Vec<_>>();
        let want_names: Vec<String> = want
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names(&events), want_names);
        for (got, w) in events.iter().zip(want) {
            let g = serde_json::to_value(got).unwrap();
            for key in [
                "step",
                "op",
                "live_start_bytes",
                "live_end_bytes",
                "peak_bytes",
            ] {
                assert_eq!(g[key], w[key], "{} {key}", got.name);
            }
            assert_eq!(g["allocated"], w["allocated"], "{} allocated", got.name);
            assert_eq!(g["freed"], w["freed"], "{} freed", got.name);
            match w["peak_by"].as_object() {
                None => assert!(got.peak_by.is_none(), "{}", got.name),
                Some(p) => {
                    let pb = got.peak_by.as_ref().expect("a peak allocation");
                    assert_eq!(pb.bytes, p["bytes"].as_u64().unwrap(), "{}", got.name);
                    assert_eq!(pb.category, p["category"].as_str().unwrap(), "{}", got.name);
                }
            }
            assert!(!got.open);
        }
        // The peak event is the first with the highest peak.
        let top = want
            .iter()
            .map(|e| e["peak_bytes"].as_u64().unwrap())
            .max()
            .unwrap();
        let first = want
            .iter()
            .position(|e| e["peak_bytes"].as_u64() == Some(top))
            .unwrap();
        assert_eq!(s.events[s.peak_event.unwrap()].name, want_names[first]);
        // The detail layer's stage inside the first forward of phase 0.
        let stage = s.events.iter().find(|e| e.op == "stage").unwrap();
        assert_eq!(stage.name, "layer2.stage1_f");
        assert_eq!(stage.inside.as_deref(), Some("S2.i0 fwd(p0) c0"));
        assert_eq!(stage.allocated.len(), 1);
        assert_eq!(stage.allocated[0].bytes, 2 << 20);
        assert_eq!(s.unplaced_marks, 0);
        // Live by category at each end sums to the replay's live bytes there.
        for e in &s.events {
            let sum: u64 = e.live_end.iter().map(|a| a.bytes).sum();
            assert_eq!(sum, e.live_end_bytes, "{}", e.name);
        }
        // What was there before the history began is named so.
        let first = &s.events[0];
        let before = first
            .live_end
            .iter()
            .find(|a| a.name == "before history (static)");
        assert_eq!(
            before.map(|a| a.bytes),
            planted["schedule"]["static_bytes"].as_u64()
        );
    }

    #[test]
    fn the_event_it_died_inside_is_open_and_leads() {
        let (snap, planted) = fixture("pipeline_oom");
        let s = schedule_of(&snap);
        let died = planted["schedule"]["died_inside"].as_str().unwrap();
        let open: Vec<&str> = s
            .events
            .iter()
            .filter(|e| e.open)
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(open, vec![died]);
        let closed = s
            .events
            .iter()
            .filter(|e| !e.open && e.op != "stage")
            .count() as u64;
        assert_eq!(
            closed,
            planted["schedule"]["closed_events"].as_u64().unwrap()
        );
        let f = findings::findings(&s, &crate::findings::Where::default());
        assert_eq!(f[0].kind, "died-inside-event");
        assert_eq!(f[0].what, format!("out of memory inside {died}"));
    }
}
