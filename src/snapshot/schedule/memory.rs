//! Memory per schedule event, from the trace's replay of live bytes (`trace::TraceAnalysis`):
//! live at the event's start and end, the peak inside it and the allocation that made it, what
//! was allocated and freed inside by category, and the largest sites allocating inside it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::snapshot::analysis::frame_label;
use crate::snapshot::marks::{Conventions, Kind, Marks, Span};
use crate::snapshot::model::{FrameId, Snapshot, StackId};
use crate::snapshot::paths::normalize;
use crate::snapshot::sites::Attributor;
use crate::snapshot::trace::{NONE, Rec, TraceAnalysis};

/// Bytes of one category (or site).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Amount {
    pub name: String,
    pub bytes: u64,
}

/// The allocation that made an event's peak.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeakBy {
    pub bytes: u64,
    /// `file:line in function`, the allocating site.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    pub category: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventMemory {
    /// The estimator's name for the event (`S3.i1 bwd(p1,zb=True) c1`), or the stage's
    /// (`layer25.stage3_f`).
    pub name: String,
    /// The schedule step (1-8) it belongs to.
    pub step: u8,
    /// `fwd`, `bwd`, `fwd_bwd`, `weight_chunk`; `stage` for a detail layer's stage.
    pub op: String,
    /// For a stage: the event it runs inside.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inside: Option<String>,
    /// Never closed: the process died inside it.
    pub open: bool,
    pub live_start_bytes: u64,
    pub live_end_bytes: u64,
    pub peak_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_by: Option<PeakBy>,
    /// Allocated inside the event, by category, largest first.
    pub allocated: Vec<Amount>,
    /// Freed inside the event, by the category of what was freed, largest first.
    pub freed: Vec<Amount>,
    /// The sites that allocated the most inside the event (at most three).
    pub sites: Vec<Amount>,
    /// Live at the event's end, by category, largest first: what `instrument report`
    /// compares with the estimator's buckets.
    pub live_end: Vec<Amount>,
}

/// The schedule of one marked pipeline step.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleMemory {
    /// Schedule events and stages in trace order.
    pub events: Vec<EventMemory>,
    /// The event (not stage) with the highest peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_event: Option<usize>,
    /// Marks that could not be placed on the trace.
    pub unplaced_marks: u64,
}

/// Categorises an allocation: the first frame rule that names one of its frames, else where
/// it lives in the schedule.
struct Categoriser<'a> {
    conv: &'a Conventions,
    snap: &'a Snapshot,
    /// The top-level event each trace index falls in (`usize::MAX`: none).
    event_at: Vec<usize>,
    events: Vec<&'a Span>,
    by_stack: BTreeMap<StackId, Option<usize>>,
    /// The schedule ran to its end (no event left open): what is still live then is no
    /// chunk's activations, which every backward of the step has freed.
    finished: bool,
    /// The trace index of the schedule's first event.
    first_start: Option<u32>,
}

impl<'a> Categoriser<'a> {
    fn new(conv: &'a Conventions, snap: &'a Snapshot, marks: &'a Marks, n: usize) -> Self {
        let events: Vec<&Span> = marks.spans.iter().filter(|s| s.is_event()).collect();
        let mut event_at = vec![usize::MAX; n];
        for (k, s) in events.iter().enumerate() {
            for slot in &mut event_at[s.start as usize..(s.end as usize).min(n)] {
                *slot = k;
            }
        }
        let finished = !marks.spans.iter().any(|s| s.open);
        let first_start = events.iter().map(|s| s.start).min();
        Categoriser {
            conv,
            snap,
            event_at,
            events,
            by_stack: BTreeMap::new(),
            finished,
            first_start,
        }
    }

    fn event_of(&self, idx: u32) -> Option<&Span> {
        if idx == NONE {
            return None;
        }
        match self.event_at.get(idx as usize) {
            Some(&k) if k != usize::MAX => Some(self.events[k]),
            _ => None,
        }
    }

    /// The frame rule naming this stack, cached per stack.
    fn by_frames(&mut self, stack: StackId) -> Option<usize> {
        if let Some(r) = self.by_stack.get(&stack) {
            return *r;
        }
        let snap = self.snap;
        let rule = snap.stack(stack).iter().find_map(|&f: &FrameId| {
            let file = normalize(snap.frame_file(f));
            let name = snap.frame_name(f);
            self.conv.frames.iter().position(|r| r.matches(&file, name))
        });
        self.by_stack.insert(stack, rule);
        rule
    }

    fn category(&mut self, r: &Rec) -> String {
        if let Some(i) = self.by_frames(r.stack) {
            return self.conv.frames[i].name.clone();
        }
        let s = &self.conv.structural;
        let born = self.event_of(r.alloc_idx);
        let dies = self.event_of(r.free_idx);
        if r.alloc_idx == NONE {
            return s.before.clone();
        }
        if self.first_start.is_some_and(|f| r.alloc_idx < f) {
            return s.before_schedule.clone();
        }
        let (Some(born), dies) = (born, dies) else {
            return s.other.clone();
        };
        if let Some(d) = dies
            && std::ptr::eq(born, d)
        {
            return s.temporary.clone();
        }
        let op = |x: &Span| match &x.kind {
            Kind::Event { op, .. } => op.clone(),
            Kind::Stage { .. } => String::new(),
        };
        let zb = matches!(
            born.kind,
            Kind::Event {
                zero_bubble: true,
                ..
            }
        );
        match (op(born).as_str(), dies.map(op).as_deref()) {
            // An overlapped chunk's backward makes gradients that outlive the step.
            ("fwd_bwd", None) if self.finished => s.gradient.clone(),
            ("fwd" | "fwd_bwd", Some("bwd" | "fwd_bwd") | None) => s.saved.clone(),
            ("bwd", Some("weight_chunk")) if zb => s.deferred.clone(),
            ("bwd" | "fwd_bwd" | "weight_chunk", _) => s.gradient.clone(),
            _ => s.other.clone(),
        }
    }
}

fn sorted(map: BTreeMap<String, u64>) -> Vec<Amount> {
    let mut v: Vec<Amount> = map
        .into_iter()
        .filter(|(_, b)| *b > 0)
        .map(|(name, bytes)| Amount { name, bytes })
        .collect();
    v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
    v
}

/// Memory per span of `marks`, from the device's trace replay.
pub fn per_event(
    conv: &Conventions,
    snap: &Snapshot,
    ta: &TraceAnalysis,
    marks: &Marks,
    attr: &mut Attributor,
) -> ScheduleMemory {
    let n = ta.live.len();
    let mut cat = Categoriser::new(conv, snap, marks, n);
    // Which record each trace index allocates or frees (at most one each).
    let mut alloc_at = vec![NONE; n];
    let mut free_at = vec![NONE; n];
    for (k, r) in ta.recs.iter().enumerate() {
        if r.alloc_idx != NONE {
            alloc_at[r.alloc_idx as usize] = k as u32;
        }
        if r.free_idx != NONE {
            free_at[r.free_idx as usize] = k as u32;
        }
    }
    let live_before = |i: u32| -> u64 {
        if i == 0 || n == 0 {
            ta.baseline
        } else {
            ta.live[(i as usize - 1).min(n - 1)]
        }
    };
    let mut categories: BTreeMap<u32, String> = BTreeMap::new();
    let mut category_of = |k: u32, cat: &mut Categoriser| -> String {
        categories
            .entry(k)
            .or_insert_with(|| cat.category(&ta.recs[k as usize]))
            .clone()
    };
    // Live bytes by category at each span's end: one sweep over the trace, the records
    // sorted by when they are born and die.
    let ends: Vec<u32> = marks.spans.iter().map(|s| s.end.min(n as u32)).collect();
    let live_ends = live_by_category_at(ta, &ends, &mut |k| category_of(k, &mut cat));
    let mut events = Vec::new();
    for (si, s) in marks.spans.iter().enumerate() {
        let (start, end) = (s.start.min(n as u32), s.end.min(n as u32));
        let live_start = live_before(start);
        let live_end = if end > start {
            ta.live[end as usize - 1]
        } else {
            live_start
        };
        let (mut peak, mut peak_idx) = (live_start, None);
        for i in start..end {
            if ta.live[i as usize] > peak {
                peak = ta.live[i as usize];
                peak_idx = Some(i);
            }
        }
        let mut allocated = BTreeMap::new();
        let mut freed = BTreeMap::new();
        let mut sites: BTreeMap<String, u64> = BTreeMap::new();
        for i in start..end {
            let (a, f) = (alloc_at[i as usize], free_at[i as usize]);
            if a != NONE {
                let r = ta.recs[a as usize];
                *allocated.entry(category_of(a, &mut cat)).or_insert(0) += r.size;
                let site = attr
                    .attribute(snap, r.stack)
                    .site
                    .map(|f| frame_label(snap, f))
                    .unwrap_or_else(|| "(no stack)".into());
                *sites.entry(site).or_insert(0) += r.size;
            }
            if f != NONE {
                let r = ta.recs[f as usize];
                *freed.entry(category_of(f, &mut cat)).or_insert(0) += r.size;
            }
        }
        let peak_by = peak_idx.and_then(|i| {
            let a = alloc_at[i as usize];
            (a != NONE).then(|| {
                let r = ta.recs[a as usize];
                PeakBy {
                    bytes: r.size,
                    site: attr
                        .attribute(snap, r.stack)
                        .site
                        .map(|f| frame_label(snap, f)),
                    category: category_of(a, &mut cat),
                }
            })
        });
        let (step, op) = match &s.kind {
            Kind::Event { step, op, .. } => (*step, op.clone()),
            Kind::Stage { .. } => (
                s.parent
                    .and_then(|p| match &marks.spans[p].kind {
                        Kind::Event { step, .. } => Some(*step),
                        Kind::Stage { .. } => None,
                    })
                    .unwrap_or(0),
                "stage".to_string(),
            ),
        };
        let mut sites = sorted(sites);
        sites.truncate(3);
        events.push(EventMemory {
            name: s.name.clone(),
            step,
            op,
            inside: s.parent.map(|p| marks.spans[p].name.clone()),
            open: s.open,
            live_start_bytes: live_start,
            live_end_bytes: live_end,
            peak_bytes: peak,
            peak_by,
            allocated: sorted(allocated),
            freed: sorted(freed),
            sites,
            live_end: sorted(live_ends[si].clone()),
        });
    }
    let peak_event = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.op != "stage")
        .max_by_key(|(i, e)| (e.peak_bytes, std::cmp::Reverse(*i)))
        .map(|(i, _)| i);
    ScheduleMemory {
        events,
        peak_event,
        unplaced_marks: marks.unplaced,
    }
}

/// Live bytes by category just before each of `cuts` (trace indices, one past an event's last):
/// records born before the cut (or before the window) and not freed before it.
fn live_by_category_at(
    ta: &TraceAnalysis,
    cuts: &[u32],
    category_of: &mut dyn FnMut(u32) -> String,
) -> Vec<BTreeMap<String, u64>> {
    // (index, +size or -size, record): births at their index, deaths at theirs; the window's
    // earlier records are born at 0.
    let mut changes: Vec<(u32, bool, u32)> = Vec::with_capacity(ta.recs.len() * 2);
    for (k, r) in ta.recs.iter().enumerate() {
        let born = if r.alloc_idx == NONE { 0 } else { r.alloc_idx };
        changes.push((born, true, k as u32));
        if r.free_idx != NONE {
            changes.push((r.free_idx, false, k as u32));
        }
    }
    changes.sort_unstable_by_key(|c| (c.0, !c.1));
    let mut order: Vec<usize> = (0..cuts.len()).collect();
    order.sort_unstable_by_key(|&i| cuts[i]);
    let mut out = vec![BTreeMap::new(); cuts.len()];
    let mut live: BTreeMap<String, u64> = BTreeMap::new();
    let mut next = 0;
    for i in order {
        while next < changes.len() && changes[next].0 < cuts[i] {
            let (_, born, k) = changes[next];
            let size = ta.recs[k as usize].size;
            let e = live.entry(category_of(k)).or_insert(0);
            *e = if born {
                *e + size
            } else {
                e.saturating_sub(size)
            };
            next += 1;
        }
        out[i] = live.clone();
    }
    out
}
