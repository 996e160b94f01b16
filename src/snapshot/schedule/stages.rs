//! Memory per DualPipeV layer stage (`stage1_f` .. `stage5_b`, `stage3_w`), from the Python
//! frames torch records with each allocation of the step snapshot's trace: the stage functions
//! on an allocation's stack name its stage (`marks/stage_frames.rs`, the conventions table's
//! `[[stage_frame]]`). Per stage: what was allocated inside it, how much of that is still live
//! at the step's end, and the site that allocated the most. What no rule names is counted as
//! unattributed, so that the coverage shows.
//!
//! The step is the marked schedule (its first event's start to its last event's end) when the
//! run marked it; the whole trace otherwise (the recipe's history begins at the profiled step).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::snapshot::analysis::frame_label;
use crate::snapshot::frames::is_python_file;
use crate::snapshot::marks::{self, Conventions};
use crate::snapshot::model::{Snapshot, StackId};
use crate::snapshot::paths::normalize;
use crate::snapshot::sites::Attributor;
use crate::snapshot::trace::{NONE, TraceAnalysis};

/// The site that allocated the most inside a stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageSite {
    /// `file:line in function`.
    pub site: String,
    pub bytes: u64,
    pub allocations: u64,
}

/// One stage's memory in the step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageBytes {
    pub stage: String,
    /// Allocated inside the stage during the step.
    pub allocated_bytes: u64,
    pub allocations: u64,
    /// Of those, still live at the step's end.
    pub kept_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_site: Option<StageSite>,
}

/// The step's memory by layer stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageMemory {
    /// `schedule`: the marked schedule's span; `trace`: the whole trace (no marks).
    pub window: &'static str,
    /// Everything allocated in the window.
    pub allocated_bytes: u64,
    /// Allocated in the window by no stage the rules name.
    pub unattributed_bytes: u64,
    /// Of those, allocations with no Python frame at all (C++ only, or none recorded).
    pub without_python_frames_bytes: u64,
    /// By stage name.
    pub stages: Vec<StageBytes>,
}

#[derive(Default)]
struct Acc {
    allocated: u64,
    allocations: u64,
    kept: u64,
    sites: BTreeMap<String, (u64, u64)>,
}

/// The memory per stage of `device`'s trace.
pub fn read(
    conv: &Conventions,
    snap: &Snapshot,
    device: i64,
    ta: &TraceAnalysis,
    attr: &mut Attributor,
) -> StageMemory {
    let n = ta.live.len() as u32;
    let spans = usize::try_from(device)
        .ok()
        .and_then(|d| snap.traces.get(d))
        .and_then(|t| marks::find(conv, &snap.annotations, device, &t.events));
    let events = spans
        .as_ref()
        .map(|m| m.spans.iter().filter(|s| s.is_event()).collect::<Vec<_>>())
        .filter(|e| !e.is_empty());
    let (window, start, end) = match &events {
        Some(e) => (
            "schedule",
            e.iter().map(|s| s.start).min().unwrap_or(0),
            e.iter().map(|s| s.end).max().unwrap_or(n).min(n),
        ),
        None => ("trace", 0, n),
    };
    // Per stack: the stage its frames name (an index into `names`), whether it has a Python
    // frame, and its site; an allocation's stack is shared by many allocations.
    let mut names: Vec<String> = Vec::new();
    let mut by_stack: HashMap<StackId, (Option<usize>, bool)> = HashMap::new();
    let mut site_of: HashMap<StackId, String> = HashMap::new();
    let mut acc: Vec<Acc> = Vec::new();
    let (mut total, mut unattributed, mut no_python) = (0u64, 0u64, 0u64);
    for r in &ta.recs {
        if r.alloc_idx == NONE || r.alloc_idx < start || r.alloc_idx >= end {
            continue;
        }
        total += r.size;
        let (stage, python) = *by_stack.entry(r.stack).or_insert_with(|| {
            let frames: Vec<(std::borrow::Cow<'_, str>, &str)> = snap
                .stack(r.stack)
                .iter()
                .map(|&f| (normalize(snap.frame_file(f)), snap.frame_name(f)))
                .collect();
            let python = frames.iter().any(|(file, _)| is_python_file(file));
            let view: Vec<(&str, &str)> = frames.iter().map(|(a, b)| (a.as_ref(), *b)).collect();
            let stage = conv.stage_frames.stage_of(&view).map(|s| {
                names.iter().position(|x| *x == s).unwrap_or_else(|| {
                    names.push(s);
                    acc.push(Acc::default());
                    names.len() - 1
                })
            });
            (stage, python)
        });
        let Some(i) = stage else {
            unattributed += r.size;
            if !python {
                no_python += r.size;
            }
            continue;
        };
        let a = &mut acc[i];
        a.allocated += r.size;
        a.allocations += 1;
        if r.free_idx == NONE || r.free_idx >= end {
            a.kept += r.size;
        }
        let site = site_of
            .entry(r.stack)
            .or_insert_with(|| {
                attr.attribute(snap, r.stack)
                    .site
                    .map(|f| frame_label(snap, f))
                    .unwrap_or_else(|| "(no stack)".into())
            })
            .clone();
        let s = a.sites.entry(site).or_insert((0, 0));
        s.0 += r.size;
        s.1 += 1;
    }
    let mut stages: Vec<StageBytes> = names
        .into_iter()
        .zip(acc)
        .map(|(stage, a)| StageBytes {
            stage,
            allocated_bytes: a.allocated,
            allocations: a.allocations,
            kept_bytes: a.kept,
            largest_site: a
                .sites
                .into_iter()
                .max_by(|x, y| x.1.0.cmp(&y.1.0).then_with(|| y.0.cmp(&x.0)))
                .map(|(site, (bytes, allocations))| StageSite {
                    site,
                    bytes,
                    allocations,
                }),
        })
        .collect();
    stages.sort_by(|a, b| a.stage.cmp(&b.stage));
    StageMemory {
        window,
        allocated_bytes: total,
        unattributed_bytes: unattributed,
        without_python_frames_bytes: no_python,
        stages,
    }
}
