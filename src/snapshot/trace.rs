//! `device_traces` analysis: event counts, frees requested but not completed, a replay
//! of live memory over time (anchored on the snapshot's end state), OOM events with
//! the sites holding memory just before them, training steps, allocations retained
//! across steps, the activation sawtooth, and bursts of frees.

use super::model::{Action, BlockState, DeviceTrace, FrameId, FxMap, NO_TIME, Snapshot, StackId};
use super::oom::{self, OomState};
use super::sites::{Attributor, Category, SiteAgg, group_sites};
use super::steps::{self, Steps};

pub const NONE: u32 = u32::MAX;

/// One allocation seen in (or inferred from) the trace window.
#[derive(Clone, Copy, Debug)]
pub struct Rec {
    pub addr: u64,
    pub size: u64,
    pub stack: StackId,
    /// Event index of the `alloc`, or NONE if it happened before the window.
    pub alloc_idx: u32,
    /// Event index of the `free_requested`, or NONE if still live at the end.
    pub free_idx: u32,
}

#[derive(Clone, Debug)]
pub struct PendingGroup {
    pub stream: i64,
    pub blocks: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug)]
pub struct OomInfo {
    pub idx: u32,
    pub size: u64,
    pub device_free: u64,
    pub stream: i64,
    pub time_us: Option<i64>,
    pub stack: StackId,
    pub live_before: u64,
    pub holders: Vec<SiteAgg>,
    /// The allocator's state at the OOM and why it failed.
    pub state: OomState,
}

#[derive(Clone, Debug, Default)]
pub struct StepStat {
    pub start: u32,
    pub end: u32,
    pub peak: u64,
    pub peak_idx: u32,
    pub trough: u64,
    /// Bytes allocated in this step and freed in this step.
    pub released: u64,
    /// The same, for activation-category allocations.
    pub activation_released: u64,
    /// Activation bytes live at the step's peak that were allocated before it in this
    /// step and freed after it in this step: what checkpointing would not hold at peak.
    pub activation_at_peak: u64,
}

/// A site whose allocations from earlier steps are still live at the end.
#[derive(Clone, Debug)]
pub struct Retained {
    pub site: Option<FrameId>,
    pub category: Category,
    pub stack: StackId,
    /// Distinct steps (before the last) with at least one unfreed allocation.
    pub steps: Vec<u32>,
    pub blocks: u64,
    pub bytes: u64,
    pub min_per_step: u64,
    pub max_per_step: u64,
}

/// A run of frees (no allocation in between) of blocks allocated over several steps.
#[derive(Clone, Debug)]
pub struct Burst {
    pub start_idx: u32,
    pub end_idx: u32,
    pub step: u32,
    pub blocks: u64,
    pub bytes: u64,
    pub alloc_steps: u32,
    pub site: Option<FrameId>,
}

pub struct TraceAnalysis {
    pub kept: u64,
    pub dropped: u64,
    pub counts: [u64; 10],
    pub pending: Vec<PendingGroup>,
    pub recs: Vec<Rec>,
    /// Live bytes after each event.
    pub live: Vec<u64>,
    pub baseline: u64,
    pub peak_live_bytes: u64,
    pub peak_idx: u32,
    pub ooms: Vec<OomInfo>,
    pub oom_count: u64,
    /// How the steps were found (the run's own markers, else a guess).
    pub steps_found: Steps,
    /// Event index where each step starts (steps are numbered from 1).
    pub step_starts: Vec<u32>,
    pub steps: Vec<StepStat>,
    pub retained: Vec<Retained>,
    pub bursts: Vec<Burst>,
    pub first_time_us: Option<i64>,
    pub last_time_us: Option<i64>,
    /// Reserved (for expandable segments: mapped) bytes at the window's start and at
    /// most during it, from `segment_alloc`/`segment_map` less `segment_free`/
    /// `segment_unmap`, anchored on the segments at the end.
    pub reserved_start: u64,
    pub reserved_peak: u64,
}

impl TraceAnalysis {
    /// The step an event index falls in (0: before the first step start).
    pub fn step_of(&self, idx: u32) -> u32 {
        if idx == NONE {
            return 0;
        }
        self.step_starts.partition_point(|&s| s <= idx) as u32
    }
    pub fn step_count(&self) -> u32 {
        self.step_starts.len() as u32
    }
    pub fn sawtooth_steps(&self) -> Vec<&StepStat> {
        self.steps
            .iter()
            .filter(|s| s.released > 0 && s.released * 5 >= s.peak)
            .collect()
    }
}

const MAX_DETAILED_OOMS: usize = 16;

pub fn analyse(
    snap: &Snapshot,
    device: i64,
    t: &DeviceTrace,
    attr: &mut Attributor,
) -> TraceAnalysis {
    let ev = &t.events;
    let n = ev.len();
    let mut counts = [0u64; 10];
    let mut recs: Vec<Rec> = Vec::new();
    let mut open: FxMap<u64, u32> = FxMap::default();
    let mut pending: FxMap<u64, (i64, u64)> = FxMap::default();
    let mut frees: Vec<(u32, u32)> = Vec::new(); // (event idx, rec)
    let mut first_time = None;
    let mut last_time = None;

    // Reserved bytes over the window, relative to its start (anchored on the end below).
    let (mut reserved, mut reserved_top) = (0i128, 0i128);
    for (i, e) in ev.iter().enumerate() {
        let i = i as u32;
        counts[e.action.index()] += 1;
        if e.time_us != NO_TIME {
            first_time.get_or_insert(e.time_us);
            last_time = Some(e.time_us);
        }
        match e.action {
            Action::Alloc => {
                if let Some(old) = open.insert(e.addr, recs.len() as u32) {
                    // The trace lost this block's free: close it here.
                    recs[old as usize].free_idx = i;
                }
                recs.push(Rec {
                    addr: e.addr,
                    size: e.size,
                    stack: e.stack,
                    alloc_idx: i,
                    free_idx: NONE,
                });
            }
            Action::FreeRequested => {
                let r = match open.remove(&e.addr) {
                    Some(r) => {
                        recs[r as usize].free_idx = i;
                        r
                    }
                    None => {
                        // Allocated before the window.
                        recs.push(Rec {
                            addr: e.addr,
                            size: e.size,
                            stack: e.stack,
                            alloc_idx: NONE,
                            free_idx: i,
                        });
                        recs.len() as u32 - 1
                    }
                };
                frees.push((i, r));
                pending.insert(e.addr, (e.stream, e.size));
            }
            Action::FreeCompleted => {
                pending.remove(&e.addr);
            }
            Action::SegmentAlloc | Action::SegmentMap => {
                reserved += e.size as i128;
                reserved_top = reserved_top.max(reserved);
            }
            Action::SegmentFree | Action::SegmentUnmap => reserved -= e.size as i128,
            _ => {}
        }
    }

    // Blocks live at the end that the window never saw allocated: allocated before it.
    for seg in snap.segments.iter().filter(|s| s.device == device) {
        for b in seg
            .blocks
            .iter()
            .filter(|b| b.state == BlockState::Allocated)
        {
            let addr = b.address.unwrap_or(0);
            if !open.contains_key(&addr) {
                recs.push(Rec {
                    addr,
                    size: b.size,
                    stack: b.stack,
                    alloc_idx: NONE,
                    free_idx: NONE,
                });
            }
        }
    }

    let baseline: u64 = recs
        .iter()
        .filter(|r| r.alloc_idx == NONE)
        .fold(0u64, |a, r| a.saturating_add(r.size));

    // Live bytes after each event.
    let mut delta = vec![0i64; n];
    for r in &recs {
        if r.alloc_idx != NONE {
            delta[r.alloc_idx as usize] += r.size as i64;
        }
        if r.free_idx != NONE {
            delta[r.free_idx as usize] -= r.size as i64;
        }
    }
    let mut live = Vec::with_capacity(n);
    let mut cur = baseline as i64;
    let (mut peak, mut peak_idx) = (baseline, 0u32);
    for (i, d) in delta.iter().enumerate() {
        cur = cur.saturating_add(*d);
        let v = cur.max(0) as u64;
        if v > peak {
            peak = v;
            peak_idx = i as u32;
        }
        live.push(v);
    }
    drop(delta);

    // Frees requested and never completed, per stream.
    let mut by_stream: std::collections::BTreeMap<i64, (u64, u64)> = Default::default();
    for (_, (stream, size)) in pending {
        let e = by_stream.entry(stream).or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(size);
    }
    let pending = by_stream
        .into_iter()
        .map(|(stream, (blocks, bytes))| PendingGroup {
            stream,
            blocks,
            bytes,
        })
        .collect();

    // OOMs and who held memory just before each.
    let mut ooms = Vec::new();
    let mut oom_count = 0;
    for (i, e) in ev
        .iter()
        .enumerate()
        .filter(|(_, e)| e.action == Action::Oom)
    {
        oom_count += 1;
        if ooms.len() >= MAX_DETAILED_OOMS {
            continue;
        }
        let i = i as u32;
        let holders = group_sites(
            snap,
            attr,
            recs.iter()
                .filter(|r| {
                    (r.alloc_idx == NONE || r.alloc_idx < i)
                        && (r.free_idx == NONE || r.free_idx > i)
                })
                .map(|r| (r.stack, r.size)),
        );
        let live_before = if i == 0 {
            baseline
        } else {
            live[i as usize - 1]
        };
        ooms.push(OomInfo {
            idx: i,
            size: e.size,
            device_free: e.addr,
            stream: e.stream,
            time_us: (e.time_us != NO_TIME).then_some(e.time_us),
            stack: e.stack,
            live_before,
            holders,
            state: oom::state_at(snap, device, t, i as usize),
        });
    }

    let mut steps_found = steps::detect(snap, device, t, &live, baseline, attr);
    let step_starts = std::mem::take(&mut steps_found.starts);

    let (reserved_start, reserved_peak) = anchor_reserved(snap, device, reserved, reserved_top);
    let mut ta = TraceAnalysis {
        kept: n as u64,
        dropped: t.dropped,
        counts,
        pending,
        recs,
        live,
        baseline,
        peak_live_bytes: peak,
        peak_idx,
        ooms,
        oom_count,
        steps_found,
        step_starts,
        steps: Vec::new(),
        retained: Vec::new(),
        bursts: Vec::new(),
        first_time_us: first_time,
        last_time_us: last_time,
        reserved_start,
        reserved_peak,
    };
    ta.steps = step_stats(snap, &ta, attr);
    ta.retained = retained_sites(snap, &ta, attr);
    ta.bursts = free_bursts(snap, &ta, &frees, attr);
    ta
}

/// Reserved bytes at the start of the window and their peak in it, from the change
/// over the window (`net`) and its highest point (`top`), anchored on the segments at
/// the end.
fn anchor_reserved(snap: &Snapshot, device: i64, net: i128, top: i128) -> (u64, u64) {
    let end = snap
        .segments
        .iter()
        .filter(|s| s.device == device)
        .fold(0u64, |a, s| a.saturating_add(s.total_size)) as i128;
    let start = (end - net).max(0);
    (start as u64, (start + top).max(end) as u64)
}

fn step_stats(snap: &Snapshot, ta: &TraceAnalysis, attr: &mut Attributor) -> Vec<StepStat> {
    let k = ta.step_starts.len();
    if k == 0 {
        return Vec::new();
    }
    let n = ta.live.len() as u32;
    let mut steps: Vec<StepStat> = (0..k)
        .map(|s| {
            let start = ta.step_starts[s];
            let end = if s + 1 < k { ta.step_starts[s + 1] } else { n };
            let mut st = StepStat {
                start,
                end,
                trough: u64::MAX,
                ..StepStat::default()
            };
            for i in start..end {
                let v = ta.live[i as usize];
                if v > st.peak {
                    st.peak = v;
                    st.peak_idx = i;
                }
                st.trough = st.trough.min(v);
            }
            if st.trough == u64::MAX {
                st.trough = 0;
            }
            st
        })
        .collect();
    for r in &ta.recs {
        if r.alloc_idx == NONE || r.free_idx == NONE {
            continue;
        }
        let s = ta.step_of(r.alloc_idx);
        if s == 0 || s != ta.step_of(r.free_idx) {
            continue;
        }
        let st = &mut steps[s as usize - 1];
        st.released = st.released.saturating_add(r.size);
        if attr.attribute(snap, r.stack).category == Category::Activations {
            st.activation_released = st.activation_released.saturating_add(r.size);
            if r.alloc_idx <= st.peak_idx && r.free_idx > st.peak_idx {
                st.activation_at_peak = st.activation_at_peak.saturating_add(r.size);
            }
        }
    }
    steps
}

fn retained_sites(snap: &Snapshot, ta: &TraceAnalysis, attr: &mut Attributor) -> Vec<Retained> {
    let k = ta.step_count();
    if k < 3 {
        return Vec::new();
    }
    // site -> (category, a stack, unfreed blocks per step, blocks, bytes)
    type Acc = (Category, StackId, Vec<u64>, u64, u64);
    let mut by: std::collections::BTreeMap<Option<FrameId>, Acc> = Default::default();
    for r in &ta.recs {
        if r.alloc_idx == NONE || r.free_idx != NONE {
            continue;
        }
        let s = ta.step_of(r.alloc_idx);
        // The last step may be in progress: only earlier steps count as retention.
        if s == 0 || s >= k {
            continue;
        }
        let a = attr.attribute(snap, r.stack);
        let e = by
            .entry(a.site)
            .or_insert_with(|| (a.category, r.stack, vec![0; k as usize], 0, 0));
        e.2[s as usize - 1] += 1;
        e.3 += 1;
        e.4 = e.4.saturating_add(r.size);
    }
    let complete = (k - 1) as usize;
    let mut out: Vec<Retained> = by
        .into_iter()
        .filter_map(|(site, (category, stack, per, blocks, bytes))| {
            let steps: Vec<u32> = per
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(i, _)| i as u32 + 1)
                .collect();
            if steps.len() < 2 || steps.len() * 4 < complete * 3 {
                return None;
            }
            let counts: Vec<u64> = per[..complete].iter().copied().filter(|&c| c > 0).collect();
            Some(Retained {
                site,
                category,
                stack,
                min_per_step: counts.iter().copied().min().unwrap_or(0),
                max_per_step: counts.iter().copied().max().unwrap_or(0),
                steps,
                blocks,
                bytes,
            })
        })
        .collect();
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.site.cmp(&b.site)));
    out
}

fn free_bursts(
    snap: &Snapshot,
    ta: &TraceAnalysis,
    frees: &[(u32, u32)],
    attr: &mut Attributor,
) -> Vec<Burst> {
    if ta.step_count() < 3 {
        return Vec::new();
    }
    // Event index of every alloc, to test whether two frees are adjacent in a run.
    let mut alloc_idx: Vec<u32> = ta
        .recs
        .iter()
        .filter(|r| r.alloc_idx != NONE)
        .map(|r| r.alloc_idx)
        .collect();
    alloc_idx.sort_unstable();
    let allocs_upto = |i: u32| alloc_idx.partition_point(|&a| a <= i);

    let mut out = Vec::new();
    let mut run: Vec<u32> = Vec::new();
    let mut run_start = 0u32;
    let mut last_allocs = usize::MAX;
    // In each run, the frees of blocks that outlived their step: two or more of them,
    // allocated in two or more earlier steps, freed together.
    let flush =
        |run: &mut Vec<u32>, start: u32, end: u32, out: &mut Vec<Burst>, attr: &mut Attributor| {
            let burst_step = ta.step_of(start);
            let old: Vec<u32> = run
                .iter()
                .copied()
                .filter(|&r| {
                    let s = ta.step_of(ta.recs[r as usize].alloc_idx);
                    s > 0 && s < burst_step
                })
                .collect();
            let mut steps: Vec<u32> = old
                .iter()
                .map(|&r| ta.step_of(ta.recs[r as usize].alloc_idx))
                .collect();
            steps.sort_unstable();
            steps.dedup();
            if old.len() >= 2 && steps.len() >= 2 {
                let sites = group_sites(
                    snap,
                    attr,
                    old.iter().map(|&r| {
                        let rec = &ta.recs[r as usize];
                        (rec.stack, rec.size)
                    }),
                );
                out.push(Burst {
                    start_idx: start,
                    end_idx: end,
                    step: burst_step,
                    blocks: old.len() as u64,
                    bytes: old
                        .iter()
                        .fold(0u64, |a, &r| a.saturating_add(ta.recs[r as usize].size)),
                    alloc_steps: steps.len() as u32,
                    site: sites.first().and_then(|s| s.site),
                });
            }
            run.clear();
        };
    let mut last_i = 0u32;
    for &(i, r) in frees {
        let a = allocs_upto(i);
        if a != last_allocs {
            flush(&mut run, run_start, last_i, &mut out, attr);
            run_start = i;
            last_allocs = a;
        }
        run.push(r);
        last_i = i;
    }
    flush(&mut run, run_start, last_i, &mut out, attr);
    out
}
