//! Training steps in a trace. The run's own markers come first: the
//! `external_annotations` torch >= 2.6 records for `record_function` ranges
//! (`Optimizer.step#AdamW.step` START/END, `ProfilerStep#N`, the DataLoader's
//! `enumerate(DataLoader)#...`), then the optimizer's steps seen in the trace's stacks.
//! With such a marker no heuristic runs, so a benchmark's repetitions (triton's
//! `do_bench`) or a stack that recurs once per layer are never taken for steps.
//! Without one the steps are a guess (a once-per-step allocation, else the sawtooth of
//! live memory) and the report says so.

use super::frames::Match::{self, *};
use super::model::{
    Action, Annotation, DeviceTrace, Event, FrameId, FxMap, NO_TIME, Snapshot, StackId,
};
use super::paths::normalize;
use super::sites::Attributor;

/// Where a step boundary sits relative to an annotated range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    /// A step starts where the range starts (the batch is fetched, a profiler step).
    Start,
    /// A step ends where the range ends (the optimizer has stepped).
    End,
}

/// Annotations that mark steps, most telling first: the optimizer's step (once per
/// step even with gradient accumulation), the profiler's step, a range the user named
/// after a step (`record_function("train_step")`), `zero_grad`, the DataLoader's next
/// batch (once per micro-batch).
pub const STEP_ANNOTATIONS: &[(Match, Edge)] = &[
    (Prefix("Optimizer.step#"), Edge::End),
    (Prefix("ProfilerStep#"), Edge::Start),
    (Contains("step"), Edge::Start),
    (Prefix("Optimizer.zero_grad#"), Edge::Start),
    (Prefix("enumerate(DataLoader)#"), Edge::Start),
];

/// An optimizer's step in a stack: (file, functions). torch's own optimizers (their
/// `step`, the `_single_tensor_*` / `_multi_tensor_*` / `_fused_*` implementations, the
/// state made on the first step) and the optimizers of DeepSpeed, apex, bitsandbytes,
/// transformers and torchao. The learning-rate scheduler's `step` is not one.
pub const OPTIMIZER_STEP: &[(&str, &[Match])] = &[
    (
        "torch/optim/",
        &[
            Prefix("step"),
            Prefix("_single_tensor_"),
            Prefix("_multi_tensor_"),
            Prefix("_fused_"),
            Prefix("_init_group"),
        ],
    ),
    ("deepspeed/ops/adam/", &[Prefix("step")]),
    ("deepspeed/runtime/zero/", &[Prefix("step")]),
    ("apex/optimizers/", &[Prefix("step")]),
    (
        "bitsandbytes/optim/",
        &[Prefix("step"), Prefix("update_step")],
    ),
    ("transformers/optimization.py", &[Prefix("step")]),
    ("torchao/optim/", &[Prefix("step")]),
];

/// Files whose `OPTIMIZER_STEP` match is not an optimizer step.
pub const NOT_OPTIMIZER_STEP: &[&str] =
    &["torch/optim/lr_scheduler.py", "torch/optim/swa_utils.py"];

/// Benchmark repetitions: a stack with one of these frames recurs at a regular
/// interval (each repetition allocates the same) but is not a training step.
pub const NOT_A_STEP: &[(&str, &[Match])] = &[
    ("triton/testing.py", &[Prefix("do_bench")]),
    ("torch/utils/benchmark/", &[Prefix("")]),
    ("torch/_inductor/runtime/benchmarking.py", &[Prefix("")]),
    ("torch/_inductor/select_algorithm.py", &[Prefix("")]),
    ("torch/_inductor/autotune_process.py", &[Prefix("")]),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepMethod {
    /// The run's schedule marks (`super::marks`): the trace is one pipeline step, whatever
    /// recurs per chunk inside it.
    Schedule,
    /// The run's `external_annotations`.
    Annotation,
    /// The end of each optimizer step in the trace's stacks.
    OptimizerStep,
    /// A guess: steps start at each allocation from one stack that recurs once per step.
    Marker,
    /// A guess: steps are the cycles of the live-memory sawtooth.
    Sawtooth,
    None,
}

impl StepMethod {
    pub fn name(self) -> &'static str {
        match self {
            StepMethod::Schedule => "schedule",
            StepMethod::Annotation => "annotation",
            StepMethod::OptimizerStep => "optimizer_step",
            StepMethod::Marker => "marker",
            StepMethod::Sawtooth => "sawtooth",
            StepMethod::None => "none",
        }
    }
    /// Steps the run marked itself (not a guess).
    pub fn from_run(self) -> bool {
        matches!(
            self,
            StepMethod::Schedule | StepMethod::Annotation | StepMethod::OptimizerStep
        )
    }
}

/// The steps found, and what found them.
#[derive(Clone, Debug)]
pub struct Steps {
    pub method: StepMethod,
    /// Event index where each step starts (taken by the trace analysis).
    pub starts: Vec<u32>,
    /// The recurring allocation's site (`Marker`).
    pub marker_site: Option<FrameId>,
    /// The annotation's name and edge (`Annotation`).
    pub annotation: Option<(String, Edge)>,
    /// The optimizer frame of the first step (`OptimizerStep`).
    pub optimizer_frame: Option<FrameId>,
    /// Annotations in the file that could not be placed in the trace (no `time_us`).
    pub unplaced_annotations: bool,
}

impl Steps {
    pub fn new(method: StepMethod) -> Self {
        Steps {
            method,
            starts: Vec::new(),
            marker_site: None,
            annotation: None,
            optimizer_frame: None,
            unplaced_annotations: false,
        }
    }
}

/// Find the steps of device `device`'s trace `ev` (`live`: live bytes after each event).
pub fn detect(
    snap: &Snapshot,
    device: i64,
    t: &DeviceTrace,
    live: &[u64],
    baseline: u64,
    attr: &mut Attributor,
) -> Steps {
    let ev = &t.events[..];
    // A file's entries all have `time_us` (torch >= 2.5) or none do.
    let timed = matches!((ev.first(), ev.last()), (Some(a), Some(b)) if a.time_us != NO_TIME && b.time_us != NO_TIME);
    // A pipeline step marked by schedule event: one step, from its first event. Each chunk
    // allocates alike, which the guesses below would take for a step each.
    if timed
        && let Some(m) = super::marks::find(
            super::marks::Conventions::builtin(),
            &snap.annotations,
            device,
            ev,
        )
        && let Some(first) = m.spans.first()
    {
        let mut s = Steps::new(StepMethod::Schedule);
        s.starts = vec![first.start];
        return s;
    }
    if timed && let Some(s) = from_annotations(&snap.annotations, device, ev, t.dropped) {
        return s;
    }
    if let Some(s) = from_optimizer(snap, ev, t.dropped) {
        return s;
    }
    let mut s = guess(snap, ev, live, baseline, attr);
    s.unplaced_annotations = !timed && !snap.annotations.is_empty();
    s
}

/// Step boundaries from the annotations on the trace's clock: the first family of
/// [`STEP_ANNOTATIONS`] seen inside the trace window, its most frequent name (two
/// optimizers stepping back to back mark one step). Annotations of the device come
/// first; without any, those of every device (one clock for the process).
fn from_annotations(anns: &[Annotation], device: i64, ev: &[Event], dropped: u64) -> Option<Steps> {
    let (first, last) = (ev[0].time_us, ev[ev.len() - 1].time_us);
    let mine: Vec<&Annotation> = anns.iter().filter(|a| a.device == Some(device)).collect();
    let pool: Vec<&Annotation> = if mine.is_empty() {
        anns.iter().collect()
    } else {
        mine
    };
    for &(m, edge) in STEP_ANNOTATIONS {
        let stage = match edge {
            Edge::Start => "START",
            Edge::End => "END",
        };
        let mut count: FxMap<&str, usize> = FxMap::default();
        let hits: Vec<&Annotation> = pool
            .iter()
            .copied()
            .filter(|a| {
                a.stage == stage
                    && m.test(&a.name)
                    && a.time_us.is_some_and(|t| t >= first && t <= last)
            })
            .collect();
        for a in &hits {
            *count.entry(a.name.as_str()).or_default() += 1;
        }
        let Some(name) = count
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(n, _)| n.to_string())
        else {
            continue;
        };
        let idx: Vec<u32> = hits
            .iter()
            .filter(|a| a.name == name)
            .filter_map(|a| a.time_us)
            .map(|t| match edge {
                // The first entry at or after the range's start; after its end.
                Edge::Start => ev.partition_point(|e| e.time_us < t) as u32,
                Edge::End => ev.partition_point(|e| e.time_us <= t) as u32,
            })
            .collect();
        let starts = match edge {
            Edge::End => after_ends(idx, ev, dropped),
            Edge::Start => {
                let mut s: Vec<u32> = idx
                    .into_iter()
                    .filter(|&i| (i as usize) < ev.len())
                    .collect();
                s.sort_unstable();
                s.dedup();
                s
            }
        };
        if starts.is_empty() {
            continue;
        }
        return Some(Steps {
            starts,
            annotation: Some((name, edge)),
            ..Steps::new(StepMethod::Annotation)
        });
    }
    None
}

fn frame_matches(table: &[(&str, &[Match])], name: &str, file: &str) -> bool {
    table
        .iter()
        .any(|(f, names)| file.contains(f) && names.iter().any(|m| m.test(name)))
}

/// The innermost optimizer-step frame of a stack, if it has one.
fn optimizer_frame(snap: &Snapshot, stack: StackId) -> Option<FrameId> {
    snap.stack(stack).iter().copied().find(|&f| {
        let file = normalize(snap.frame_file(f));
        frame_matches(OPTIMIZER_STEP, snap.frame_name(f), &file)
            && !NOT_OPTIMIZER_STEP.iter().any(|n| file.contains(n))
    })
}

/// Was this stack allocated inside a benchmark's repetitions?
fn in_benchmark(snap: &Snapshot, stack: StackId) -> bool {
    snap.stack(stack).iter().any(|&f| {
        frame_matches(
            NOT_A_STEP,
            snap.frame_name(f),
            &normalize(snap.frame_file(f)),
        )
    })
}

/// Step boundaries after each optimizer step: a run of allocations made inside an
/// optimizer's step (other entries, frees, may come between) ends at the next
/// allocation made elsewhere; the next step starts after the run's last allocation.
/// Only an optimizer that allocates in every step marks steps: with one run (the
/// state a fused optimizer makes in its first step) the steps are left to the guess.
fn from_optimizer(snap: &Snapshot, ev: &[Event], dropped: u64) -> Option<Steps> {
    // Per interned stack: not yet looked at, or its optimizer frame (if any).
    let mut is_opt: Vec<Option<Option<FrameId>>> = vec![None; snap.stacks.len()];
    let mut ends = Vec::new();
    let (mut last_opt, mut first_frame) = (None::<usize>, None);
    for (i, e) in ev.iter().enumerate() {
        if e.action != Action::Alloc || e.stack == 0 {
            continue;
        }
        let Some(slot) = is_opt.get_mut(e.stack as usize) else {
            continue;
        };
        let f = *slot.get_or_insert_with(|| optimizer_frame(snap, e.stack));
        match (f, last_opt) {
            (Some(f), _) => {
                first_frame.get_or_insert(f);
                last_opt = Some(i);
            }
            (None, Some(l)) => {
                ends.push(l as u32 + 1);
                last_opt = None;
            }
            (None, None) => {}
        }
    }
    if let Some(l) = last_opt {
        ends.push(l as u32 + 1);
    }
    if ends.len() < 2 {
        return None;
    }
    Some(Steps {
        starts: after_ends(ends, ev, dropped),
        optimizer_frame: first_frame,
        ..Steps::new(StepMethod::OptimizerStep)
    })
}

/// Step starts from the ends of steps: the first step starts with the window (unless
/// older entries were dropped: it began before), each next one after an end that an
/// allocation follows (after the last end, frees only are that step's tail:
/// `zero_grad`, the batch going out of scope).
fn after_ends(ends: Vec<u32>, ev: &[Event], dropped: u64) -> Vec<u32> {
    let last_alloc = ev.iter().rposition(|e| e.action == Action::Alloc);
    let mut starts: Vec<u32> = (dropped == 0).then_some(0).into_iter().collect();
    starts.extend(
        ends.into_iter()
            .filter(|&e| last_alloc.is_some_and(|l| e as usize <= l)),
    );
    starts.sort_unstable();
    starts.dedup();
    starts
}

/// The guess, when the run marked no step. First choice: a "marker" stack that is
/// allocated at a regular interval across the window (low variation between the gaps
/// of its occurrences, unlike per-layer stacks that recur in clusters); among those,
/// the one found where live memory is lowest, i.e. at the start of forward (the input
/// batch, say). Each of its allocations starts a step. Stacks inside a benchmark's
/// repetitions ([`NOT_A_STEP`]) are never markers. Else: the cycles of the live-memory
/// sawtooth.
fn guess(
    snap: &Snapshot,
    ev: &[Event],
    live: &[u64],
    baseline: u64,
    attr: &mut Attributor,
) -> Steps {
    let n = ev.len() as u64;
    let mut occ: FxMap<StackId, Vec<u32>> = FxMap::default();
    for (i, e) in ev.iter().enumerate() {
        if e.action == Action::Alloc && e.stack != 0 {
            occ.entry(e.stack).or_default().push(i as u32);
        }
    }
    struct Cand {
        stack: StackId,
        count: usize,
        cv: f64,
        live_before: f64,
        first: u32,
    }
    let mut cands: Vec<Cand> = Vec::new();
    for (&stack, o) in &occ {
        if o.len() < 2 || (o[o.len() - 1] - o[0]) as u64 * 2 < n || in_benchmark(snap, stack) {
            continue;
        }
        let gaps: Vec<f64> = o.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean) * (g - mean)).sum::<f64>() / gaps.len() as f64;
        let cv = if mean > 0.0 {
            var.sqrt() / mean
        } else {
            f64::INFINITY
        };
        // A step is a forward and a backward: many events, and frees among them.
        if cv > 0.5 || mean < 8.0 || !frees_within(o, live) || !comes_back(o, live, baseline) {
            continue;
        }
        let live_before = o
            .iter()
            .map(|&i| {
                if i == 0 {
                    baseline as f64
                } else {
                    live[i as usize - 1] as f64
                }
            })
            .sum::<f64>()
            / o.len() as f64;
        cands.push(Cand {
            stack,
            count: o.len(),
            cv,
            live_before,
            first: o[0],
        });
    }
    // Prefer markers seen at least three times (two gaps to compare).
    if cands.iter().any(|c| c.count >= 3) {
        cands.retain(|c| c.count >= 3);
    }
    let best = cands.iter().min_by(|a, b| {
        a.live_before
            .total_cmp(&b.live_before)
            .then(b.count.cmp(&a.count))
            .then(a.cv.total_cmp(&b.cv))
            .then(a.first.cmp(&b.first))
    });
    if let Some(c) = best {
        let site = attr.attribute(snap, c.stack).site;
        return Steps {
            marker_site: site,
            starts: occ.remove(&c.stack).unwrap_or_default(),
            ..Steps::new(StepMethod::Marker)
        };
    }
    // Sawtooth cycles: a step ends where live memory bottoms out after a big drop.
    let (lo, hi) = live
        .iter()
        .fold((u64::MAX, 0u64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    if live.is_empty() || hi <= lo {
        return Steps::new(StepMethod::None);
    }
    let t = (hi - lo) / 4;
    let mut starts = vec![0u32];
    let mut seeking_peak = true;
    let (mut ext, mut ext_i) = (live[0], 0usize);
    for (i, &v) in live.iter().enumerate() {
        if seeking_peak {
            if v > ext {
                ext = v;
                ext_i = i;
            } else if ext - v > t {
                seeking_peak = false;
                ext = v;
                ext_i = i;
            }
        } else if v < ext {
            ext = v;
            ext_i = i;
        } else if v - ext > t {
            starts.push(ext_i as u32 + 1);
            seeking_peak = true;
            ext = v;
            ext_i = i;
        }
    }
    let _ = ext_i;
    if starts.len() >= 2 {
        Steps {
            starts,
            ..Steps::new(StepMethod::Sawtooth)
        }
    } else {
        Steps::new(StepMethod::None)
    }
}

/// A training step frees memory (backward releases activations and temporaries):
/// live memory falls somewhere between consecutive markers in most of them, unlike a
/// site that simply alternates with another while memory fills up.
fn frees_within(o: &[u32], live: &[u64]) -> bool {
    let with = o
        .windows(2)
        .filter(|w| {
            live[w[0] as usize..w[1] as usize]
                .windows(2)
                .any(|p| p[1] < p[0])
        })
        .count();
    with * 4 >= (o.len() - 1) * 3
}

/// A step does not leave live memory lower than it found it by more than it rose in
/// between: a stack that recurs once per layer in the backward pass fails this, since each
/// layer's backward frees that layer's activations, so the level falls from one occurrence
/// to the next by more than the layer's temporaries raise it (seen on real snapshots: the
/// autograd thread's `NegBackward0` stack, once per layer's rotary embedding, taken for 22
/// steps). A level that rises from step to step is a leak or a retained graph, and stays.
fn comes_back(o: &[u32], live: &[u64], baseline: u64) -> bool {
    let before = |i: u32| {
        if i == 0 {
            baseline
        } else {
            live[i as usize - 1]
        }
    };
    let ok = o
        .windows(2)
        .filter(|w| {
            let (l0, l1) = (before(w[0]), before(w[1]));
            let top = live[w[0] as usize..w[1] as usize]
                .iter()
                .copied()
                .max()
                .unwrap_or(0);
            l1 >= l0 || top.saturating_sub(l0) > l0 - l1
        })
        .count();
    ok * 4 >= (o.len() - 1) * 3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(action: Action, t: i64) -> Event {
        Event {
            action,
            addr: 0,
            size: 0,
            stream: 0,
            time_us: t,
            stack: 0,
        }
    }

    fn ann(name: &str, stage: &str, device: Option<i64>, t: i64) -> Annotation {
        Annotation {
            name: name.into(),
            stage: stage.into(),
            device,
            time_us: Some(t),
        }
    }

    #[test]
    fn optimizer_step_ends_mark_steps_and_outside_the_window_nothing() {
        // allocs at t = 10, 20, ..., 100
        let events: Vec<Event> = (1..=10).map(|i| ev(Action::Alloc, i * 10)).collect();
        let anns = vec![
            ann("Optimizer.step#AdamW.step", "END", Some(0), 5), // before the window
            ann("Optimizer.step#AdamW.step", "END", Some(0), 35),
            ann("Optimizer.step#AdamW.step", "END", Some(0), 70), // at an entry: after it
            ann("Optimizer.step#AdamW.step", "END", Some(0), 100), // nothing allocates after
            ann("enumerate(DataLoader)#_Iter.__next__", "START", Some(0), 15),
        ];
        let s = from_annotations(&anns, 0, &events, 0).unwrap();
        assert_eq!(s.method, StepMethod::Annotation);
        assert_eq!(s.starts, vec![0, 3, 7]);
        assert_eq!(s.annotation.unwrap().1, Edge::End);
        // older entries dropped: the first step began before the window
        assert_eq!(
            from_annotations(&anns, 0, &events, 5).unwrap().starts,
            vec![3, 7]
        );
        // another device's annotations count only when this one has none
        let other = vec![ann("ProfilerStep#1", "START", Some(1), 42)];
        assert_eq!(
            from_annotations(&other, 0, &events, 0).unwrap().starts,
            vec![4]
        );
        let mixed = vec![
            other[0].clone(),
            ann("ProfilerStep#1", "START", Some(0), 61),
        ];
        assert_eq!(
            from_annotations(&mixed, 0, &events, 0).unwrap().starts,
            vec![6]
        );
        assert!(from_annotations(&[], 0, &events, 0).is_none());
    }

    #[test]
    fn the_most_telling_family_wins() {
        let events: Vec<Event> = (1..=10).map(|i| ev(Action::Alloc, i * 10)).collect();
        let anns = vec![
            ann("enumerate(DataLoader)#_Iter.__next__", "START", None, 15),
            ann("enumerate(DataLoader)#_Iter.__next__", "START", None, 45),
            ann("train_step", "START", None, 31),
            ann("train_step", "START", None, 71),
        ];
        let s = from_annotations(&anns, 0, &events, 0).unwrap();
        assert_eq!(s.annotation.unwrap().0, "train_step");
        assert_eq!(s.starts, vec![3, 7]);
    }
}
