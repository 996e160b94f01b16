//! Allocator-state analysis of one snapshot: the device to look at, totals per device
//! and per stream, and where live (`active_allocated`) memory goes, grouped by site.

use std::collections::BTreeMap;

use serde::Serialize;

use super::expandable;
use super::model::{BlockState, FrameId, Snapshot, StackId};
use super::sites::{Attributor, Category, SiteAgg, group_sites};
use super::trace::{self, TraceAnalysis};

/// Knobs shared by every analysis.
#[derive(Clone, Debug)]
pub struct Options {
    pub device: Option<i64>,
    pub top: usize,
    pub internal: Vec<String>,
    /// Keep the newest this many trace entries per device; `usize::MAX` (the default) reads
    /// the trace whole: the recipe records up to 1,048,576 entries, and a count below that
    /// changed verdicts on real files. Memory bounds it instead (48 bytes an entry).
    pub max_trace_events: usize,
    /// Set for a directory of ranks: the run is known to be distributed.
    pub assume_distributed: bool,
    /// Show C++ frames in OOM stacks (Python frames only otherwise).
    pub cpp_frames: bool,
    /// `--rank N`: in a folder of ranks, only these ranks' files (empty: every rank).
    pub ranks: Vec<u32>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            device: None,
            top: 10,
            internal: Vec::new(),
            max_trace_events: usize::MAX,
            assume_distributed: false,
            cpp_frames: false,
            ranks: Vec::new(),
        }
    }
}

/// Allocator totals for a set of segments.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Totals {
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub pending_free_bytes: u64,
    pub inactive_bytes: u64,
    pub requested_bytes: u64,
    pub rounding_waste_bytes: u64,
    pub segments: u64,
    pub allocated_blocks: u64,
    pub pending_free_blocks: u64,
    pub inactive_blocks: u64,
    pub largest_inactive_block_bytes: u64,
    /// inactive_bytes / reserved_bytes (0 when nothing is reserved).
    pub inactive_fraction: f64,
    /// Segments with no active block.
    pub free_segments: u64,
    pub free_segment_bytes: u64,
    /// Segments of expandable segments (`expandable_segments:True`): each is one mapped
    /// range of an expandable segment, so its `total_size` is mapped memory.
    pub expandable_segments: u64,
    /// Inactive bytes in expandable segments: pages still mapped but free, which the
    /// allocator unmaps when an allocation needs the memory. Not fragmentation.
    pub expandable_inactive_bytes: u64,
    /// Inactive bytes in (not expandable) segments that also hold an active block:
    /// free only for requests that fit the holes (fragmentation).
    pub fragmented_bytes: u64,
    /// fragmented_bytes / reserved_bytes.
    pub fragmentation_fraction: f64,
    /// What `torch.cuda.empty_cache()` would return: segments with no active block,
    /// and the whole free pages of expandable segments.
    pub reclaimable_bytes: u64,
}

impl Totals {
    fn add_segment(&mut self, seg: &super::model::Segment) {
        self.reserved_bytes = self.reserved_bytes.saturating_add(seg.total_size);
        self.segments = self.segments.saturating_add(1);
        let all_free = seg.blocks.iter().all(|b| b.state == BlockState::Inactive);
        if all_free {
            self.free_segments = self.free_segments.saturating_add(1);
            self.free_segment_bytes = self.free_segment_bytes.saturating_add(seg.total_size);
        }
        let inactive = seg
            .blocks
            .iter()
            .filter(|b| b.state == BlockState::Inactive)
            .fold(0u64, |a, b| a.saturating_add(b.size));
        if seg.is_expandable {
            self.expandable_segments = self.expandable_segments.saturating_add(1);
            self.expandable_inactive_bytes =
                self.expandable_inactive_bytes.saturating_add(inactive);
            self.reclaimable_bytes = self
                .reclaimable_bytes
                .saturating_add(expandable::free_pages(seg));
        } else if all_free {
            self.reclaimable_bytes = self.reclaimable_bytes.saturating_add(seg.total_size);
        } else {
            self.fragmented_bytes = self.fragmented_bytes.saturating_add(inactive);
        }
        for b in &seg.blocks {
            match b.state {
                BlockState::Allocated => {
                    self.allocated_bytes = self.allocated_bytes.saturating_add(b.size);
                    self.allocated_blocks = self.allocated_blocks.saturating_add(1);
                    let req = b.requested_size.min(b.size);
                    self.requested_bytes = self.requested_bytes.saturating_add(req);
                    self.rounding_waste_bytes =
                        self.rounding_waste_bytes.saturating_add(b.size - req);
                }
                BlockState::PendingFree => {
                    self.pending_free_bytes = self.pending_free_bytes.saturating_add(b.size);
                    self.pending_free_blocks = self.pending_free_blocks.saturating_add(1);
                }
                BlockState::Inactive => {
                    self.inactive_bytes = self.inactive_bytes.saturating_add(b.size);
                    self.inactive_blocks = self.inactive_blocks.saturating_add(1);
                    self.largest_inactive_block_bytes =
                        self.largest_inactive_block_bytes.max(b.size);
                }
            }
        }
    }
    fn finish(&mut self) {
        let share = |b: u64| {
            if self.reserved_bytes > 0 {
                b as f64 / self.reserved_bytes as f64
            } else {
                0.0
            }
        };
        self.inactive_fraction = share(self.inactive_bytes);
        self.fragmentation_fraction = share(self.fragmented_bytes);
    }
    /// Sum of several totals (for directories of ranks).
    pub fn merge(&mut self, o: &Totals) {
        self.reserved_bytes = self.reserved_bytes.saturating_add(o.reserved_bytes);
        self.allocated_bytes = self.allocated_bytes.saturating_add(o.allocated_bytes);
        self.pending_free_bytes = self.pending_free_bytes.saturating_add(o.pending_free_bytes);
        self.inactive_bytes = self.inactive_bytes.saturating_add(o.inactive_bytes);
        self.requested_bytes = self.requested_bytes.saturating_add(o.requested_bytes);
        self.rounding_waste_bytes = self
            .rounding_waste_bytes
            .saturating_add(o.rounding_waste_bytes);
        self.segments = self.segments.saturating_add(o.segments);
        self.allocated_blocks = self.allocated_blocks.saturating_add(o.allocated_blocks);
        self.pending_free_blocks = self
            .pending_free_blocks
            .saturating_add(o.pending_free_blocks);
        self.inactive_blocks = self.inactive_blocks.saturating_add(o.inactive_blocks);
        self.largest_inactive_block_bytes = self
            .largest_inactive_block_bytes
            .max(o.largest_inactive_block_bytes);
        self.free_segments = self.free_segments.saturating_add(o.free_segments);
        self.free_segment_bytes = self.free_segment_bytes.saturating_add(o.free_segment_bytes);
        self.expandable_segments = self
            .expandable_segments
            .saturating_add(o.expandable_segments);
        self.expandable_inactive_bytes = self
            .expandable_inactive_bytes
            .saturating_add(o.expandable_inactive_bytes);
        self.fragmented_bytes = self.fragmented_bytes.saturating_add(o.fragmented_bytes);
        self.reclaimable_bytes = self.reclaimable_bytes.saturating_add(o.reclaimable_bytes);
        self.finish();
    }
}

pub struct Analysis<'s> {
    pub snap: &'s Snapshot,
    pub opts: Options,
    pub attr: Attributor,
    pub device: i64,
    pub device_note: String,
    pub devices: Vec<(i64, Totals)>,
    pub totals: Totals,
    pub streams: Vec<(i64, Totals)>,
    pub sites: Vec<SiteAgg>,
    /// Live bytes per category on the analysed device.
    pub category_bytes: BTreeMap<Category, u64>,
    pub trace: Option<TraceAnalysis>,
}

/// Pick the device: `--device`, else the one the segments are on (the largest
/// reserved if several), else the first device whose trace has events.
/// `--device N` names a device the snapshot does not have (`available` says which it has).
#[derive(Debug)]
pub struct UnknownDevice {
    pub device: i64,
    pub available: String,
}

fn choose_device(snap: &Snapshot, wanted: Option<i64>) -> Result<(i64, String), UnknownDevice> {
    let mut seg_devices: BTreeMap<i64, u64> = BTreeMap::new();
    for s in &snap.segments {
        let r = seg_devices.entry(s.device).or_default();
        *r = r.saturating_add(s.total_size);
    }
    let traced: Vec<i64> = snap
        .traces
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.events.is_empty() || t.dropped > 0)
        .map(|(i, _)| i as i64)
        .collect();
    let list =
        |v: &mut dyn Iterator<Item = i64>| v.map(|d| d.to_string()).collect::<Vec<_>>().join(", ");
    let where_ = format!(
        "segments on device(s) [{}]; device_traces has {} list(s), events on [{}]",
        list(&mut seg_devices.keys().copied()),
        snap.traces.len(),
        list(&mut traced.iter().copied())
    );
    if let Some(d) = wanted {
        if seg_devices.contains_key(&d) || (d >= 0 && (d as usize) < snap.traces.len()) {
            return Ok((d, format!("device {d} (--device); {where_}")));
        }
        return Err(UnknownDevice {
            device: d,
            available: where_,
        });
    }
    if let Some((&d, _)) = seg_devices
        .iter()
        .max_by_key(|&(d, r)| (*r, std::cmp::Reverse(*d)))
    {
        let note = if seg_devices.len() > 1 {
            format!("device {d} (largest reserved; pass --device N for another); {where_}")
        } else {
            format!("device {d}; {where_}")
        };
        return Ok((d, note));
    }
    if let Some(&d) = traced.first() {
        return Ok((
            d,
            format!("device {d} (no segments; first device with trace events); {where_}"),
        ));
    }
    Ok((0, format!("device 0 (empty snapshot); {where_}")))
}

impl<'s> Analysis<'s> {
    pub fn new(snap: &'s Snapshot, opts: &Options) -> Result<Self, UnknownDevice> {
        let (device, device_note) = choose_device(snap, opts.device)?;
        let mut attr = Attributor::new(&opts.internal);

        let mut per_dev: BTreeMap<i64, Totals> = BTreeMap::new();
        let mut per_stream: BTreeMap<i64, Totals> = BTreeMap::new();
        let mut totals = Totals::default();
        for seg in &snap.segments {
            per_dev.entry(seg.device).or_default().add_segment(seg);
            if seg.device == device {
                totals.add_segment(seg);
                per_stream.entry(seg.stream).or_default().add_segment(seg);
            }
        }
        totals.finish();
        let devices = per_dev
            .into_iter()
            .map(|(d, mut t)| {
                t.finish();
                (d, t)
            })
            .collect();
        let streams = per_stream
            .into_iter()
            .map(|(s, mut t)| {
                t.finish();
                (s, t)
            })
            .collect();

        let live = snap
            .segments
            .iter()
            .filter(|s| s.device == device)
            .flat_map(|s| s.blocks.iter())
            .filter(|b| b.state == BlockState::Allocated)
            .map(|b| (b.stack, b.size));
        let sites = group_sites(snap, &mut attr, live);
        let mut category_bytes: BTreeMap<Category, u64> = BTreeMap::new();
        for seg in snap.segments.iter().filter(|s| s.device == device) {
            for b in seg
                .blocks
                .iter()
                .filter(|b| b.state == BlockState::Allocated)
            {
                let c = attr.attribute(snap, b.stack).category;
                let e = category_bytes.entry(c).or_default();
                *e = e.saturating_add(b.size);
            }
        }

        let trace = if device >= 0 && (device as usize) < snap.traces.len() {
            let t = &snap.traces[device as usize];
            if t.events.is_empty() && t.dropped == 0 {
                None
            } else {
                Some(trace::analyse(snap, device, t, &mut attr))
            }
        } else {
            None
        };

        Ok(Analysis {
            snap,
            opts: opts.clone(),
            attr,
            device,
            device_note,
            devices,
            totals,
            streams,
            sites,
            category_bytes,
            trace,
        })
    }

    pub fn live_bytes(&self) -> u64 {
        self.totals.allocated_bytes
    }

    pub fn cat_bytes(&self, c: Category) -> u64 {
        self.category_bytes.get(&c).copied().unwrap_or(0)
    }

    /// "file:line in function" lines for a stack: the user frames first few, for context.
    pub fn context_lines(&mut self, stack: StackId, max: usize) -> Vec<String> {
        let snap = self.snap;
        let mut out = Vec::new();
        for &f in snap.stack(stack) {
            if self.attr.is_user(snap, f) {
                out.push(frame_label(snap, f));
                if out.len() >= max {
                    break;
                }
            }
        }
        out
    }

    /// Evidence that the run is distributed: a directory of ranks, communication
    /// buffers, or frames from torch.distributed / DDP anywhere in the snapshot.
    pub fn distributed(&self) -> bool {
        self.opts.assume_distributed
            || self.cat_bytes(Category::Communication) > 0
            || self.snap.frames.iter().any(|f| {
                let file = super::paths::normalize(self.snap.strings.get(f.file));
                file.contains("torch/distributed/") || file.contains("torch/nn/parallel/")
            })
    }

    /// Peak live bytes: the trace's peak when there is one, else live bytes now.
    pub fn peak_bytes(&self) -> u64 {
        let now = self.totals.allocated_bytes;
        match &self.trace {
            Some(t) => t.peak_live_bytes.max(now),
            None => now,
        }
    }
}

/// `file:line in function` (the file as written in the snapshot).
pub fn frame_label(snap: &Snapshot, f: FrameId) -> String {
    format!(
        "{}:{} in {}",
        snap.frame_file(f),
        snap.frame_line(f),
        snap.frame_name(f)
    )
}
