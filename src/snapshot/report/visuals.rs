//! What the HTML page draws, aggregated here so that the page stays small for any
//! snapshot: live memory over time at a few hundred sample points (stacked by the
//! largest sites), the blocks over time of the largest segments (at most a few
//! thousand rectangles), and the end-state segment map.

use std::collections::BTreeMap;

use crate::snapshot::analysis::Analysis;
use crate::snapshot::frames::short_function;
use crate::snapshot::model::{Action, BlockState, FrameId, NO_TIME, Snapshot, StackId};
use crate::snapshot::sites::{Category, Class, SiteAgg, group_sites};
use crate::snapshot::trace::{NONE, TraceAnalysis};

use super::{SiteRef, short};

/// Sample points of the live-memory timeline.
const SAMPLES: usize = 600;
/// Sites drawn as their own band (the rest is "other sites").
pub const SERIES: usize = 8;
/// Segments whose blocks are drawn over time.
const HISTORY_SEGMENTS: usize = 6;
/// Blocks drawn per segment (the longest-lived, largest ones).
const HISTORY_BLOCKS: usize = 1500;

/// The x axis: seconds since the first trace entry (`time_us`), or the entry's
/// index in traces that have no times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Axis {
    Seconds,
    Event,
}

#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub category: Category,
    /// A few frames of the heaviest stack, for the tooltip.
    pub stack: Vec<String>,
    pub values: Vec<u64>,
}

/// Live memory over time (not part of the JSON).
#[derive(Clone, Debug)]
pub struct Timeline {
    pub axis: Axis,
    pub x: Vec<f64>,
    pub x_max: f64,
    pub total: Vec<u64>,
    pub series: Vec<Series>,
    pub other: Vec<u64>,
    pub ooms: Vec<f64>,
    pub steps: Vec<f64>,
    pub events: u64,
}

impl Timeline {
    pub fn peak(&self) -> u64 {
        self.total.iter().copied().max().unwrap_or(0)
    }
}

/// One block's lifetime inside a segment.
#[derive(Clone, Debug)]
pub struct HistBlock {
    pub offset: u64,
    pub size: u64,
    pub x0: f64,
    pub x1: f64,
    /// The timeline band it belongs to (its color), if one of the top sites.
    pub series: Option<usize>,
    pub label: u32,
}

/// The blocks over time of one segment (the allocator's state, for fragmentation).
#[derive(Clone, Debug)]
pub struct SegmentHistory {
    pub address: u64,
    pub total_size: u64,
    pub stream: i64,
    /// When the segment was cudaMalloc'ed, if the trace saw it.
    pub x_start: f64,
    pub blocks: Vec<HistBlock>,
    pub labels: Vec<String>,
    /// Blocks in the window, drawn or not.
    pub total_blocks: usize,
}

/// One segment for the end-state segment map (not part of the JSON).
#[derive(Clone, Debug)]
pub struct SegmentBar {
    pub address: u64,
    pub total_size: u64,
    pub stream: i64,
    pub blocks: Vec<(u64, BlockState, String)>,
}

/// A few frames of a stack for a tooltip, short names: its Python frames from the
/// site on, or (no Python frame) the C++ frames past the plumbing.
pub fn stack_lines(a: &mut Analysis, stack: StackId, max: usize) -> Vec<String> {
    let snap = a.snap;
    let python = snap
        .stack(stack)
        .iter()
        .any(|&f| snap.frame_file(f).ends_with(".py"));
    let site = a.attr.attribute(snap, stack).site;
    let mut started = site.is_none();
    let mut out = Vec::new();
    for &f in snap.stack(stack) {
        started |= Some(f) == site;
        let keep = if python {
            snap.frame_file(f).ends_with(".py")
        } else {
            !matches!(a.attr.class(snap, f), Class::Plumbing)
        };
        if started && keep {
            out.push(frame_short(snap, f));
            if out.len() >= max {
                break;
            }
        }
    }
    out
}

fn frame_short(snap: &Snapshot, f: FrameId) -> String {
    format!(
        "{}:{} in {}",
        short(snap.frame_file(f)),
        snap.frame_line(f),
        short_function(snap.frame_name(f))
    )
}

/// Where each trace entry sits on the x axis.
struct Xs<'a> {
    axis: Axis,
    times: Vec<i64>,
    t0: i64,
    _snap: &'a Snapshot,
}

impl Xs<'_> {
    fn of(&self, i: u32) -> f64 {
        match self.axis {
            Axis::Seconds => (self.times[i as usize] - self.t0) as f64 / 1e6,
            Axis::Event => i as f64,
        }
    }
    /// The last entry in `lo..hi` at or before `x` (measured from entry `lo`).
    fn at(&self, x: f64, lo: usize, hi: usize) -> Option<usize> {
        let k = match self.axis {
            Axis::Seconds => {
                let t = self.times[lo] + (x * 1e6) as i64;
                self.times[lo..hi].partition_point(|&v| v <= t)
            }
            Axis::Event => ((x.floor() as usize) + 1).min(hi - lo),
        };
        k.checked_sub(1).map(|k| lo + k)
    }
}

fn xs<'a>(snap: &'a Snapshot, device: i64) -> Xs<'a> {
    let events = &snap.traces[device as usize].events;
    let timed = !events.is_empty() && events.iter().all(|e| e.time_us != NO_TIME);
    let mut times: Vec<i64> = events.iter().map(|e| e.time_us).collect();
    // Times are per entry in order; guard against a clock that went backwards.
    for i in 1..times.len() {
        times[i] = times[i].max(times[i - 1]);
    }
    let t0 = times.first().copied().unwrap_or(0);
    Xs {
        axis: if timed && times.last() > times.first() {
            Axis::Seconds
        } else {
            Axis::Event
        },
        times,
        t0,
        _snap: snap,
    }
}

/// Live memory over time, stacked by the sites holding the most at the peak.
pub fn timeline(a: &mut Analysis, t: &TraceAnalysis) -> Option<Timeline> {
    timeline_range(a, t, 0, t.live.len())
}

/// The step that holds the trace's peak, when the trace has several steps: the
/// whole-trace timeline draws one step in a few pixels.
pub fn peak_step(a: &mut Analysis, t: &TraceAnalysis) -> Option<(Timeline, (usize, usize))> {
    let (lo, hi) = peak_step_range(t)?;
    timeline_range(a, t, lo, hi).map(|tl| (tl, (lo, hi)))
}

/// Trace entries of the step that holds the peak (several steps only).
pub fn peak_step_range(t: &TraceAnalysis) -> Option<(usize, usize)> {
    if t.step_starts.len() < 3 {
        return None;
    }
    let s = t.step_of(t.peak_idx) as usize;
    let lo = if s == 0 {
        0
    } else {
        t.step_starts[s - 1] as usize
    };
    let hi = t
        .step_starts
        .get(s)
        .map(|&e| e as usize)
        .unwrap_or(t.live.len());
    (hi > lo + 1).then_some((lo, hi))
}

/// The timeline of trace entries `lo..hi`, its x axis starting at entry `lo`.
pub fn timeline_range(
    a: &mut Analysis,
    t: &TraceAnalysis,
    lo: usize,
    hi: usize,
) -> Option<Timeline> {
    let n = t.live.len();
    if n == 0 || hi <= lo {
        return None;
    }
    let snap = a.snap;
    let xs = xs(snap, a.device);
    let rel = |i: u32| xs.of(i) - xs.of(lo as u32);
    let x_max = rel(hi as u32 - 1).max(1e-9);
    let m = SAMPLES.min((hi - lo).max(2));
    let x: Vec<f64> = (0..m).map(|j| x_max * j as f64 / (m - 1) as f64).collect();
    let before = if lo == 0 { t.baseline } else { t.live[lo - 1] };
    // Each sample shows the entry with the most live memory since the previous one,
    // so peaks survive the downsampling.
    let mut at: Vec<Option<usize>> = Vec::with_capacity(m);
    let mut prev: Option<usize> = None;
    for &v in &x {
        let last = xs.at(v, lo, hi);
        let pick = match (prev, last) {
            (_, None) => None,
            (p, Some(l)) => {
                let from = p.map(|p| p + 1).unwrap_or(lo).min(l);
                (from..=l).max_by_key(|&i| (t.live[i], std::cmp::Reverse(i)))
            }
        };
        at.push(pick.or(last));
        prev = last.or(prev);
    }
    let total: Vec<u64> = at
        .iter()
        .map(|e| e.map(|i| t.live[i]).unwrap_or(before))
        .collect();
    let peak_idx = (lo..hi)
        .max_by_key(|&i| (t.live[i], std::cmp::Reverse(i)))
        .unwrap_or(lo) as u32;
    let at_peak = group_sites(
        snap,
        &mut a.attr,
        t.recs
            .iter()
            .filter(|r| {
                (r.alloc_idx == NONE || r.alloc_idx <= peak_idx)
                    && (r.free_idx == NONE || r.free_idx > peak_idx)
            })
            .map(|r| (r.stack, r.size)),
    );
    let top: Vec<SiteAgg> = at_peak.into_iter().take(SERIES).collect();
    let index: BTreeMap<Option<FrameId>, usize> =
        top.iter().enumerate().map(|(i, s)| (s.site, i)).collect();
    // Per band: (entry index, +/- bytes), swept once in sample order.
    let mut deltas: Vec<Vec<(i64, i64)>> = vec![Vec::new(); top.len()];
    for r in &t.recs {
        let site = a.attr.attribute(snap, r.stack).site;
        let Some(&k) = index.get(&site) else { continue };
        let from = if r.alloc_idx == NONE {
            -1
        } else {
            r.alloc_idx as i64
        };
        deltas[k].push((from, r.size as i64));
        if r.free_idx != NONE {
            deltas[k].push((r.free_idx as i64, -(r.size as i64)));
        }
    }
    let mut series = Vec::new();
    let mut sum = vec![0u64; m];
    for (k, s) in top.iter().enumerate() {
        let d = &mut deltas[k];
        d.sort_unstable();
        let (mut cur, mut p) = (0i64, 0usize);
        let mut values = Vec::with_capacity(m);
        for (j, e) in at.iter().enumerate() {
            let upto = e.map(|i| i as i64).unwrap_or(-1);
            while p < d.len() && d[p].0 <= upto {
                cur = cur.saturating_add(d[p].1);
                p += 1;
            }
            let v = cur.max(0) as u64;
            sum[j] = sum[j].saturating_add(v);
            values.push(v);
        }
        series.push(Series {
            label: SiteRef::of(snap, s.site).label(),
            category: s.category,
            stack: stack_lines(a, s.example_stack, 5),
            values,
        });
    }
    let other = total
        .iter()
        .zip(&sum)
        .map(|(t, s)| t.saturating_sub(*s))
        .collect();
    let inside = |i: u32| (i as usize) >= lo && (i as usize) < hi;
    Some(Timeline {
        axis: xs.axis,
        x,
        x_max,
        total,
        series,
        other,
        ooms: t
            .ooms
            .iter()
            .filter(|o| inside(o.idx))
            .map(|o| rel(o.idx))
            .collect(),
        steps: t
            .step_starts
            .iter()
            .filter(|&&s| inside(s))
            .map(|&s| rel(s))
            .collect(),
        events: (hi - lo) as u64,
    })
}

/// The blocks over time of the busiest segments, over the trace entries `lo..hi`
/// that `tl` draws (the step with the peak when there are many steps: a whole long
/// trace draws each block in less than a pixel).
pub fn segment_history(
    a: &mut Analysis,
    t: &TraceAnalysis,
    tl: &Timeline,
    (lo, hi): (usize, usize),
) -> Vec<SegmentHistory> {
    let snap = a.snap;
    if t.live.is_empty() || hi <= lo {
        return Vec::new();
    }
    let xs = xs(snap, a.device);
    let x_lo = xs.of(lo as u32);
    let rel = |i: u32| xs.of(i) - x_lo;
    let events = &snap.traces[a.device as usize].events;
    // The allocations live at some point in the window.
    let (lo32, hi32) = (lo as u32, hi as u32);
    let mut by_addr: Vec<usize> = (0..t.recs.len())
        .filter(|&i| {
            let r = &t.recs[i];
            (r.alloc_idx == NONE || r.alloc_idx < hi32)
                && (r.free_idx == NONE || r.free_idx >= lo32)
        })
        .collect();
    by_addr.sort_unstable_by_key(|&i| t.recs[i].addr);
    let range = |s: &crate::snapshot::model::Segment| {
        let (a0, a1) = (s.address, s.address.saturating_add(s.total_size));
        (
            by_addr.partition_point(|&i| t.recs[i].addr < a0),
            by_addr.partition_point(|&i| t.recs[i].addr < a1),
        )
    };
    // The segments the window allocated the most bytes in (the allocator's busy
    // state, where fragmentation shows), largest first among equals.
    let busy = |s: &crate::snapshot::model::Segment| -> u64 {
        let (from, to) = range(s);
        by_addr[from..to]
            .iter()
            .filter(|&&i| t.recs[i].alloc_idx != NONE && t.recs[i].alloc_idx >= lo32)
            .fold(0u64, |acc, &i| acc.saturating_add(t.recs[i].size))
    };
    let mut segs: Vec<(u64, &crate::snapshot::model::Segment)> = snap
        .segments
        .iter()
        .filter(|s| s.device == a.device)
        .map(|s| (busy(s), s))
        .collect();
    segs.sort_by(|x, y| {
        y.0.cmp(&x.0)
            .then(y.1.total_size.cmp(&x.1.total_size))
            .then(x.1.address.cmp(&y.1.address))
    });
    let band: BTreeMap<&str, usize> = tl
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| (s.label.as_str(), i))
        .collect();
    let mut out = Vec::new();
    for (_, s) in segs {
        if out.len() >= HISTORY_SEGMENTS {
            break;
        }
        let base = s.address;
        let (from, to) = range(s);
        if from == to {
            continue;
        }
        let mut labels: Vec<String> = Vec::new();
        let mut label_of: BTreeMap<StackId, u32> = BTreeMap::new();
        let mut blocks: Vec<HistBlock> = by_addr[from..to]
            .iter()
            .map(|&i| {
                let r = &t.recs[i];
                let x0 = if r.alloc_idx == NONE || r.alloc_idx < lo32 {
                    0.0
                } else {
                    rel(r.alloc_idx)
                };
                let x1 = if r.free_idx == NONE || r.free_idx >= hi32 {
                    tl.x_max
                } else {
                    rel(r.free_idx)
                };
                let label = *label_of.entry(r.stack).or_insert_with(|| {
                    let site = a.attr.attribute(snap, r.stack).site;
                    labels.push(SiteRef::of(snap, site).label());
                    labels.len() as u32 - 1
                });
                HistBlock {
                    offset: r.addr - base,
                    size: r.size,
                    x0,
                    x1,
                    series: band.get(labels[label as usize].as_str()).copied(),
                    label,
                }
            })
            .collect();
        let total_blocks = blocks.len();
        if blocks.len() > HISTORY_BLOCKS {
            // Keep what covers the most of the picture.
            blocks.sort_by(|p, q| {
                let (wp, wq) = ((p.x1 - p.x0) * p.size as f64, (q.x1 - q.x0) * q.size as f64);
                wq.total_cmp(&wp)
            });
            blocks.truncate(HISTORY_BLOCKS);
        }
        let x_start = events
            .iter()
            .position(|e| {
                matches!(e.action, Action::SegmentAlloc | Action::SegmentMap) && e.addr == base
            })
            .map(|i| rel(i as u32).max(0.0))
            .unwrap_or(0.0);
        out.push(SegmentHistory {
            address: base,
            total_size: s.total_size,
            stream: s.stream,
            x_start,
            blocks,
            labels,
            total_blocks,
        });
    }
    out
}

/// The end-state segment map: blocks in address order, the largest 200 segments.
pub fn segment_map(a: &mut Analysis) -> Vec<SegmentBar> {
    let snap = a.snap;
    let mut segs: Vec<&crate::snapshot::model::Segment> = snap
        .segments
        .iter()
        .filter(|s| s.device == a.device)
        .collect();
    segs.sort_by(|x, y| {
        y.total_size
            .cmp(&x.total_size)
            .then(x.address.cmp(&y.address))
    });
    segs.truncate(200);
    segs.sort_by_key(|s| s.address);
    segs.iter()
        .map(|s| SegmentBar {
            address: s.address,
            total_size: s.total_size,
            stream: s.stream,
            blocks: s
                .blocks
                .iter()
                .take(4000)
                .map(|b| {
                    let label = match b.state {
                        BlockState::Allocated => {
                            SiteRef::of(snap, a.attr.attribute(snap, b.stack).site).label()
                        }
                        BlockState::PendingFree => "delayed free".to_string(),
                        BlockState::Inactive => "inactive (cached)".to_string(),
                    };
                    (b.size, b.state, label)
                })
                .collect(),
        })
        .collect()
}
