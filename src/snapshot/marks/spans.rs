//! The run's schedule marks as ranges of trace events: each `START`/`END` pair of a schedule
//! event's (or a detail layer stage's) annotation on this device, placed on the trace by its
//! `time_us`. A range opened and never closed (the process died inside it: an out-of-memory
//! error) runs to the end of the trace and is said to be open: evidence, not an error.

use super::conventions::Conventions;
use crate::snapshot::model::{Annotation, Event, NO_TIME};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A chunk call of the schedule: its step (1-8), iteration, operation (`fwd`, `bwd`,
    /// `fwd_bwd`, `weight_chunk`), and for a backward whether it deferred its weight gradients.
    Event {
        step: u8,
        iter: u32,
        op: String,
        zero_bubble: bool,
    },
    /// A detail layer's stage inside an event (`layer25.stage3_f`).
    Stage { layer: u32, stage: String },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    pub name: String,
    pub kind: Kind,
    /// The first trace event inside, and one past the last.
    pub start: u32,
    pub end: u32,
    /// Never closed: the range ran to the end of the trace.
    pub open: bool,
    /// The event this stage is inside (an index into the spans).
    pub parent: Option<usize>,
}

impl Span {
    pub fn is_event(&self) -> bool {
        matches!(self.kind, Kind::Event { .. })
    }
}

/// What the marks held, and what could not be placed.
#[derive(Debug, Default)]
pub struct Marks {
    /// In trace order: events, each followed by the stages inside it.
    pub spans: Vec<Span>,
    /// Schedule annotations on this device that could not be used (an `END` with no `START`,
    /// or no `time_us` to place them on the trace).
    pub unplaced: u64,
}

/// The schedule's spans among `annotations` on `device`, placed on `events` (the device's
/// trace, in order). `None` when the file holds no schedule annotation at all: a snapshot
/// without marks reads as any other.
pub fn find(
    conv: &Conventions,
    annotations: &[Annotation],
    device: i64,
    events: &[Event],
) -> Option<Marks> {
    let ours: Vec<(&Annotation, Kind)> = annotations
        .iter()
        .filter(|a| a.device.is_none_or(|d| d == device))
        .filter_map(|a| kind(conv, &a.name).map(|k| (a, k)))
        .collect();
    if ours.is_empty() {
        return None;
    }
    let times: Vec<i64> = events.iter().map(|e| e.time_us).collect();
    let placed = times.iter().all(|&t| t != NO_TIME);
    let mut marks = Marks::default();
    // Ranges open by name, innermost last (a name may nest in itself only by mistake).
    let mut open: Vec<(usize, String)> = Vec::new();
    for (a, k) in ours {
        let Some(t) = a.time_us.filter(|_| placed) else {
            marks.unplaced += 1;
            continue;
        };
        match a.stage.as_str() {
            "START" => {
                // The first event at or after the start.
                let start = times.partition_point(|&x| x < t) as u32;
                let parent = match k {
                    Kind::Stage { .. } => open
                        .iter()
                        .rev()
                        .find(|(i, _)| marks.spans[*i].is_event())
                        .map(|(i, _)| *i),
                    Kind::Event { .. } => None,
                };
                marks.spans.push(Span {
                    name: a.name.clone(),
                    kind: k,
                    start,
                    end: events.len() as u32,
                    open: true,
                    parent,
                });
                open.push((marks.spans.len() - 1, a.name.clone()));
            }
            "END" => match open.iter().rposition(|(_, n)| *n == a.name) {
                Some(p) => {
                    let (i, _) = open.remove(p);
                    // One past the last event at or before the end.
                    let end = times.partition_point(|&x| x <= t) as u32;
                    let s = &mut marks.spans[i];
                    s.end = end.max(s.start);
                    s.open = false;
                }
                None => marks.unplaced += 1,
            },
            _ => marks.unplaced += 1,
        }
    }
    Some(marks)
}

fn kind(conv: &Conventions, name: &str) -> Option<Kind> {
    if let Some(m) = conv.event.captures(name) {
        return Some(Kind::Event {
            step: m["step"].parse().ok()?,
            iter: m["iter"].parse().ok()?,
            op: m["op"].to_string(),
            zero_bubble: name.contains("zb=True"),
        });
    }
    let m = conv.stage.captures(name)?;
    Some(Kind::Stage {
        layer: m["layer"].parse().ok()?,
        stage: m["stage"].to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::model::Action;

    fn ev(t: i64) -> Event {
        Event {
            action: Action::Alloc,
            addr: 0,
            size: 0,
            stream: 0,
            time_us: t,
            stack: 0,
        }
    }

    fn ann(name: &str, stage: &str, t: i64) -> Annotation {
        Annotation {
            name: name.into(),
            stage: stage.into(),
            device: Some(0),
            time_us: Some(t),
        }
    }

    #[test]
    fn ranges_are_placed_nested_and_an_unclosed_one_is_open() {
        let events: Vec<Event> = (0..10).map(|i| ev(i * 10)).collect();
        let a = [
            ann("Optimizer.step#AdamW.step", "START", 0),
            ann("S1.i0 fwd(p0) c0", "START", 5),
            ann("layer2.stage1_f", "START", 15),
            ann("layer2.stage1_f", "END", 25),
            ann("S1.i0 fwd(p0) c0", "END", 35),
            ann("S3.i1 bwd(p1,zb=True) c1", "START", 40),
            ann("S8.i0 weight_chunk", "END", 99),
        ];
        let m = find(Conventions::builtin(), &a, 0, &events).unwrap();
        assert_eq!(m.unplaced, 1, "the END without a START");
        let got: Vec<(&str, u32, u32, bool, Option<usize>)> = m
            .spans
            .iter()
            .map(|s| (s.name.as_str(), s.start, s.end, s.open, s.parent))
            .collect();
        assert_eq!(
            got,
            vec![
                ("S1.i0 fwd(p0) c0", 1, 4, false, None),
                ("layer2.stage1_f", 2, 3, false, Some(0)),
                ("S3.i1 bwd(p1,zb=True) c1", 4, 10, true, None),
            ]
        );
        assert_eq!(
            m.spans[2].kind,
            Kind::Event {
                step: 3,
                iter: 1,
                op: "bwd".into(),
                zero_bubble: true
            }
        );
        // No schedule annotation at all: no marks (the snapshot reads as any other).
        assert!(find(Conventions::builtin(), &a[..1], 0, &events).is_none());
        // Another device's marks are not this device's.
        let mut other = a.to_vec();
        for x in &mut other {
            x.device = Some(1);
        }
        assert!(find(Conventions::builtin(), &other, 0, &events).is_none());
    }
}
