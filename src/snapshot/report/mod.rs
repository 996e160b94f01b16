//! The report: every fact `instrument snapshot` states, as one serialisable value.
//! `--json` prints it (schema in docs/snapshot.md), the text and HTML renderers read it.

pub mod charts;
pub mod findings;
pub mod html;
pub mod notes;
pub mod text;
pub mod visuals;

pub use notes::{LibraryRef, NoStack, Steps};
pub use visuals::{SegmentBar, SegmentHistory, Timeline};

use std::collections::BTreeMap;

use serde::Serialize;

use crate::snapshot::analysis::{Analysis, Totals};
use crate::snapshot::frames::short_function;
use crate::snapshot::model::{Action, FrameId, Layout, Snapshot, StackId};
use crate::snapshot::sites::SiteAgg;
use crate::snapshot::sites::{Category, Origin};

pub const SCHEMA: &str = "instrument.snapshot/1";

/// Human-readable bytes (binary units).
pub fn human(bytes: u64) -> String {
    const U: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", U[i])
    }
}

/// Signed human-readable bytes: "+1.50 MiB", "-512 B".
pub fn signed_human(delta: i64) -> String {
    let sign = if delta < 0 { "-" } else { "+" };
    format!("{sign}{}", human(delta.unsigned_abs()))
}

/// A sum of byte counts that saturates instead of overflowing.
pub fn sat_sum(it: impl IntoIterator<Item = u64>) -> u64 {
    it.into_iter().fold(0u64, |a, b| a.saturating_add(b))
}

pub fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (part as f64 * 1000.0 / whole as f64).round() / 10.0
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Source {
    pub path: String,
    pub file_bytes: u64,
    pub layout: Layout,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct SiteRef {
    pub file: String,
    pub line: i64,
    pub function: String,
}

impl SiteRef {
    pub fn of(snap: &Snapshot, f: Option<FrameId>) -> SiteRef {
        match f {
            Some(f) => SiteRef {
                file: snap.frame_file(f).to_string(),
                line: snap.frame_line(f),
                function: snap.frame_name(f).to_string(),
            },
            None => SiteRef {
                file: "<no stack recorded>".into(),
                line: 0,
                function: String::new(),
            },
        }
    }
    /// `file:line in function` with the full path (just the file for no stack; C++
    /// names without their argument lists).
    pub fn label_full(&self) -> String {
        if self.function.is_empty() {
            self.file.clone()
        } else {
            format!(
                "{}:{} in {}",
                self.file,
                self.line,
                short_function(&self.function)
            )
        }
    }

    pub fn label(&self) -> String {
        if self.function.is_empty() {
            self.file.clone()
        } else {
            format!(
                "{}:{} in {}",
                short(&self.file),
                self.line,
                short_function(&self.function)
            )
        }
    }
}

pub use crate::snapshot::paths::short;

#[derive(Clone, Debug, Serialize)]
pub struct Site {
    pub file: String,
    pub line: i64,
    pub function: String,
    pub bytes: u64,
    pub blocks: u64,
    pub percent: f64,
    pub category: Category,
    pub origin: Origin,
    /// The innermost library frame below the site (for `origin: "library"`, the site).
    pub library: Option<LibraryRef>,
    /// Up to five user frames of the heaviest stack under this site, innermost first.
    pub stack: Vec<String>,
}

impl Site {
    pub fn site_ref(&self) -> SiteRef {
        SiteRef {
            file: self.file.clone(),
            line: self.line,
            function: self.function.clone(),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct DeviceRow {
    pub device: i64,
    #[serde(flatten)]
    pub totals: Totals,
}

#[derive(Clone, Debug, Serialize)]
pub struct StreamRow {
    pub stream: i64,
    #[serde(flatten)]
    pub totals: Totals,
}

#[derive(Clone, Debug, Serialize)]
pub struct TraceList {
    pub device: usize,
    pub events: u64,
    pub dropped: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PendingFree {
    pub stream: i64,
    pub blocks: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RepeatedUnfreed {
    pub file: String,
    pub line: i64,
    pub function: String,
    pub category: Category,
    pub steps_with_unfreed: u32,
    pub steps: u32,
    pub blocks: u64,
    pub bytes: u64,
    pub per_step_min: u64,
    pub per_step_max: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Sawtooth {
    pub cycles: u32,
    pub steps: u32,
    pub mean_peak_bytes: u64,
    pub mean_trough_bytes: u64,
    pub mean_released_bytes: u64,
    pub mean_activation_released_bytes: u64,
    pub max_activation_at_peak_bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct FreeBurst {
    pub start_event: u32,
    pub end_event: u32,
    pub step: u32,
    pub blocks: u64,
    pub bytes: u64,
    pub allocated_over_steps: u32,
    pub site: SiteRef,
}

#[derive(Clone, Debug, Serialize, Default)]
pub struct Trace {
    pub present: bool,
    pub device: Option<i64>,
    pub kept_events: u64,
    pub dropped: u64,
    pub total_events: u64,
    /// `--max-trace-events`; `null`: the trace was read whole (the default).
    pub max_trace_events: Option<u64>,
    pub counts: BTreeMap<String, u64>,
    pub lists: Vec<TraceList>,
    pub first_time_us: Option<i64>,
    pub last_time_us: Option<i64>,
    pub pending_frees: Vec<PendingFree>,
    pub baseline_live_bytes: u64,
    pub peak_live_bytes: u64,
    pub peak_event: Option<u32>,
    /// Reserved (mapped, for expandable segments) at the window's start and its peak.
    pub reserved_at_start_bytes: u64,
    pub peak_reserved_bytes: u64,
    pub steps: Option<Steps>,
    pub repeated_unfreed: Vec<RepeatedUnfreed>,
    pub sawtooth: Option<Sawtooth>,
    pub free_bursts: Vec<FreeBurst>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FrameOut {
    pub file: String,
    pub line: i64,
    pub function: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Holder {
    pub file: String,
    pub line: i64,
    pub function: String,
    pub bytes: u64,
    pub blocks: u64,
    pub category: Category,
}

#[derive(Clone, Debug, Serialize)]
pub struct Oom {
    pub rank: Option<u32>,
    pub event_index: u32,
    pub size_bytes: u64,
    pub device_free_bytes: u64,
    pub stream: i64,
    pub time_us: Option<i64>,
    pub site: SiteRef,
    /// The Python frames of the failing allocation, innermost first (all frames with
    /// --cpp-frames), up to 40.
    pub frames: Vec<FrameOut>,
    pub live_bytes_before: u64,
    pub holders: Vec<Holder>,
    /// The allocator's state at the OOM, in the pool and stream the request needed.
    pub state: crate::snapshot::oom::OomState,
    /// Why it failed, in a sentence.
    pub why: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Pattern {
    pub name: String,
    pub title: String,
    pub evidence: Vec<String>,
    pub fix: String,
    pub bytes: Option<u64>,
    pub sites: Vec<SiteRef>,
    pub ranks: Vec<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct DiffSite {
    pub file: String,
    pub line: i64,
    pub function: String,
    pub category: Category,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub blocks_before: u64,
    pub blocks_after: u64,
    pub delta_bytes: i64,
    /// "growing" (bytes and blocks both grew: leaking or retaining), "one_time", "shrinking".
    pub verdict: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Diff {
    /// The device analysed in both.
    pub device: i64,
    /// The ranks the file names give (`snapshot-rank00003.pickle`), if any.
    pub rank_before: Option<u32>,
    pub rank_after: Option<u32>,
    /// Peak live bytes (the trace's peak, or the snapshot's when higher) and peak reserved.
    pub peak_before: u64,
    pub peak_after: u64,
    pub peak_reserved_before: u64,
    pub peak_reserved_after: u64,
    /// Live bytes per category (blocks with a stack).
    pub categories_before: BTreeMap<Category, u64>,
    pub categories_after: BTreeMap<Category, u64>,
    pub before: Source,
    pub after: Source,
    pub totals_before: Totals,
    pub totals_after: Totals,
    pub sites: Vec<DiffSite>,
    pub unchanged_sites: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct RankFile {
    pub file: String,
    pub rank: Option<u32>,
    pub taken: bool,
    pub note: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct RankRow {
    pub rank: u32,
    pub file: String,
    pub device: i64,
    pub peak_bytes: u64,
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
    pub ooms: u64,
    /// The pipeline stage and role this rank is compared within; `null` when unknown, as it
    /// always is from snapshots alone (the run's logs know it), and then it is compared with
    /// no other rank.
    pub peers: Option<String>,
    /// Its peak is more than 10% from the median of three or more peers.
    pub stands_out: bool,
    /// The median peak of its peers, when it was compared.
    pub peers_median_peak_bytes: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    /// "snapshot", "diff" or "ranks".
    pub mode: String,
    /// What stands out, ranked (an OOM first); the text and the page open with them.
    pub findings: Vec<crate::findings::Finding>,
    /// `--diff --gate PCT`: the gate's verdict on the paired figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<crate::gate::Outcome>,
    pub source: Source,
    pub device: Option<i64>,
    pub device_note: String,
    pub devices: Vec<DeviceRow>,
    pub totals: Totals,
    pub streams: Vec<StreamRow>,
    /// Live bytes per category; blocks without a stack are in `no_stack`, not here.
    pub categories: BTreeMap<Category, u64>,
    /// Live blocks without a stack, what that means and the fix.
    pub no_stack: Option<NoStack>,
    pub sites: Vec<Site>,
    pub sites_total: usize,
    pub trace: Trace,
    pub oom: Vec<Oom>,
    pub patterns: Vec<Pattern>,
    /// A step whose run marked its pipeline schedule: memory per schedule event
    /// (`crate::snapshot::schedule`); absent for a snapshot without schedule marks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::snapshot::schedule::ScheduleMemory>,
    pub diff: Option<Diff>,
    pub ranks: Vec<RankRow>,
    pub rank_files: Vec<RankFile>,
    pub allocator_settings: BTreeMap<String, String>,
    pub internal_patterns: Vec<String>,
    #[serde(skip)]
    pub timeline: Option<Timeline>,
    #[serde(skip)]
    pub segment_map: Vec<SegmentBar>,
    #[serde(skip)]
    pub history: Vec<SegmentHistory>,
    /// The step holding the peak, in detail.
    #[serde(skip)]
    pub peak_step: Option<Timeline>,
    #[serde(skip)]
    pub rank_timelines: Vec<(u32, Timeline)>,
}

pub fn site_out(a: &mut Analysis, s: &SiteAgg, live: u64) -> Site {
    let r = SiteRef::of(a.snap, s.site);
    Site {
        file: r.file,
        line: r.line,
        function: r.function,
        bytes: s.bytes,
        blocks: s.blocks,
        percent: pct(s.bytes, live),
        category: s.category,
        origin: s.origin,
        library: s.library.map(|f| notes::library_ref(a, f)),
        stack: a.context_lines(s.example_stack, 5),
    }
}

pub fn source_of(path: &str, snap: &Snapshot) -> Source {
    Source {
        path: path.to_string(),
        file_bytes: snap.file_bytes,
        layout: snap.layout.clone(),
    }
}

/// A `--max-trace-events` for the report: `None` when the trace is read whole.
pub fn cap(max: usize) -> Option<u64> {
    (max != usize::MAX).then_some(max as u64)
}

fn trace_out(a: &mut Analysis) -> Trace {
    let snap = a.snap;
    let lists = snap
        .traces
        .iter()
        .enumerate()
        .map(|(i, t)| TraceList {
            device: i,
            events: t.events.len() as u64,
            dropped: t.dropped,
        })
        .collect();
    let Some(t) = a.trace.take() else {
        return Trace {
            lists,
            max_trace_events: cap(a.opts.max_trace_events),
            ..Trace::default()
        };
    };
    let mut counts = BTreeMap::new();
    for act in Action::ALL {
        counts.insert(act.name().to_string(), t.counts[act.index()]);
    }
    let steps = Some(notes::steps_out(snap, &t));
    let repeated_unfreed = t
        .retained
        .iter()
        .map(|r| {
            let s = SiteRef::of(snap, r.site);
            RepeatedUnfreed {
                file: s.file,
                line: s.line,
                function: s.function,
                category: r.category,
                steps_with_unfreed: r.steps.len() as u32,
                steps: t.step_count(),
                blocks: r.blocks,
                bytes: r.bytes,
                per_step_min: r.min_per_step,
                per_step_max: r.max_per_step,
            }
        })
        .collect();
    let saw = t.sawtooth_steps();
    let sawtooth = (!saw.is_empty()).then(|| {
        let n = saw.len() as u64;
        Sawtooth {
            cycles: saw.len() as u32,
            steps: t.step_count(),
            mean_peak_bytes: sat_sum(saw.iter().map(|s| s.peak)) / n,
            mean_trough_bytes: sat_sum(saw.iter().map(|s| s.trough)) / n,
            mean_released_bytes: sat_sum(saw.iter().map(|s| s.released)) / n,
            mean_activation_released_bytes: sat_sum(saw.iter().map(|s| s.activation_released)) / n,
            max_activation_at_peak_bytes: saw
                .iter()
                .map(|s| s.activation_at_peak)
                .max()
                .unwrap_or(0),
        }
    });
    let free_bursts = t
        .bursts
        .iter()
        .map(|b| FreeBurst {
            start_event: b.start_idx,
            end_event: b.end_idx,
            step: b.step,
            blocks: b.blocks,
            bytes: b.bytes,
            allocated_over_steps: b.alloc_steps,
            site: SiteRef::of(snap, b.site),
        })
        .collect();
    let out = Trace {
        present: true,
        device: Some(a.device),
        kept_events: t.kept,
        dropped: t.dropped,
        total_events: t.kept + t.dropped,
        max_trace_events: cap(a.opts.max_trace_events),
        counts,
        lists,
        first_time_us: t.first_time_us,
        last_time_us: t.last_time_us,
        pending_frees: t
            .pending
            .iter()
            .map(|p| PendingFree {
                stream: p.stream,
                blocks: p.blocks,
                bytes: p.bytes,
            })
            .collect(),
        baseline_live_bytes: t.baseline,
        peak_live_bytes: t.peak_live_bytes,
        peak_event: (!t.live.is_empty()).then_some(t.peak_idx),
        reserved_at_start_bytes: t.reserved_start,
        peak_reserved_bytes: t.reserved_peak,
        steps,
        repeated_unfreed,
        sawtooth,
        free_bursts,
    };
    a.trace = Some(t);
    out
}

fn frames_out(snap: &Snapshot, stack: StackId, max: usize, cpp: bool) -> Vec<FrameOut> {
    snap.stack(stack)
        .iter()
        .filter(|&&f| cpp || snap.frame_file(f).ends_with(".py"))
        .take(max)
        .map(|&f| FrameOut {
            file: snap.frame_file(f).to_string(),
            line: snap.frame_line(f),
            function: snap.frame_name(f).to_string(),
        })
        .collect()
}

fn ooms_out(a: &mut Analysis, top: usize) -> Vec<Oom> {
    let snap = a.snap;
    let Some(t) = a.trace.take() else {
        return Vec::new();
    };
    let out = t
        .ooms
        .iter()
        .map(|o| {
            let site = a.attr.attribute(snap, o.stack).site;
            Oom {
                rank: None,
                event_index: o.idx,
                size_bytes: o.size,
                device_free_bytes: o.device_free,
                stream: o.stream,
                time_us: o.time_us,
                site: SiteRef::of(snap, site),
                frames: frames_out(snap, o.stack, 40, a.opts.cpp_frames),
                live_bytes_before: o.live_before,
                state: o.state.clone(),
                why: oom_why(o),
                holders: o
                    .holders
                    .iter()
                    .take(top)
                    .map(|h| {
                        let r = SiteRef::of(snap, h.site);
                        Holder {
                            file: r.file,
                            line: r.line,
                            function: r.function,
                            bytes: h.bytes,
                            blocks: h.blocks,
                            category: h.category,
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    a.trace = Some(t);
    out
}

/// Why an OOM happened, for people.
fn oom_why(o: &crate::snapshot::trace::OomInfo) -> String {
    use crate::snapshot::oom::Cause;
    let st = &o.state;
    match st.cause {
        Cause::Fragmentation => format!(
            "fragmentation: {} was cached free in {} of {} segment(s), more than the {} requested, but the largest free block was {}: the free memory was in pieces",
            human(st.cached_free_bytes),
            st.segments_with_free,
            st.segments,
            human(o.size),
            human(st.largest_free_block_bytes)
        ),
        Cause::OutOfMemory if st.expandable => format!(
            "out of memory: live tensors held {}; in expandable segments the allocator unmaps free pages before it reports an OOM, so only {} stayed cached (the partial pages at the ends of free blocks, largest block {}), and the device had {} free, not enough for {}",
            human(o.live_before),
            human(st.cached_free_bytes),
            human(st.largest_free_block_bytes),
            human(o.device_free),
            human(o.size)
        ),
        Cause::OutOfMemory => format!(
            "out of memory: live tensors held {}; the allocator had {} cached free (largest block {}) and the device {} free, not enough for {}",
            human(o.live_before),
            human(st.cached_free_bytes),
            human(st.largest_free_block_bytes),
            human(o.device_free),
            human(o.size)
        ),
    }
}

/// Build the report of one snapshot. `top` limits sites and holders.
pub fn build(a: &mut Analysis, path: &str, top: usize, visuals: bool) -> Report {
    let snap = a.snap;
    let live = a.live_bytes();
    let sites_all = a.sites.clone();
    let sites = sites_all
        .iter()
        .take(top)
        .map(|s| site_out(a, s, live))
        .collect();
    let schedule = match &a.trace {
        Some(t) => crate::snapshot::schedule::read(snap, a.device, t, &mut a.attr),
        None => None,
    };
    let trace = trace_out(a);
    let oom = ooms_out(a, top);
    let (tl, map, history, peak_step) = if visuals {
        let t = a.trace.take();
        let tl = t.as_ref().and_then(|t| visuals::timeline(a, t));
        let peak = t.as_ref().and_then(|t| visuals::peak_step(a, t));
        // The blocks over time of the step with the peak, else of the whole trace.
        let history = match (&t, &peak, &tl) {
            (Some(t), Some((ps, range)), _) => visuals::segment_history(a, t, ps, *range),
            (Some(t), None, Some(tl)) => visuals::segment_history(a, t, tl, (0, t.live.len())),
            _ => Vec::new(),
        };
        a.trace = t;
        (tl, visuals::segment_map(a), history, peak.map(|p| p.0))
    } else {
        (None, Vec::new(), Vec::new(), None)
    };
    Report {
        schema: SCHEMA,
        mode: "snapshot".into(),
        findings: Vec::new(),
        gate: None,
        source: source_of(path, snap),
        device: Some(a.device),
        device_note: a.device_note.clone(),
        devices: a
            .devices
            .iter()
            .map(|(d, t)| DeviceRow {
                device: *d,
                totals: t.clone(),
            })
            .collect(),
        totals: a.totals.clone(),
        streams: a
            .streams
            .iter()
            .map(|(s, t)| StreamRow {
                stream: *s,
                totals: t.clone(),
            })
            .collect(),
        categories: a
            .category_bytes
            .iter()
            .filter(|(c, _)| **c != Category::NoStack)
            .map(|(c, b)| (*c, *b))
            .collect(),
        no_stack: notes::no_stack_out(a),
        sites,
        sites_total: sites_all.len(),
        trace,
        oom,
        patterns: Vec::new(),
        schedule,
        diff: None,
        ranks: Vec::new(),
        rank_files: Vec::new(),
        allocator_settings: snap.allocator_settings.iter().cloned().collect(),
        internal_patterns: a.attr.patterns().to_vec(),
        timeline: tl,
        segment_map: map,
        history,
        peak_step,
        rank_timelines: Vec::new(),
    }
}
