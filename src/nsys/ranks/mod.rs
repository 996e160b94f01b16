//! Per rank, what a trainer's conventions (`conventions`) let the report say about each process:
//! its rank and mesh coordinates (the setup range), its steady-state window (the median window
//! range, or the whole capture, or a window asked for), its streams with their purposes, and per
//! pipeline stage the communication time, the part of it exposed and the hidden share, in the
//! window and over the whole capture.
//!
//! - `scan`    — one pass over the NVTX events: setup ranges, window ranges, innermost ranges;
//! - `figures` — the streams and stages of one process in one window;
//! - `across`  — the ranks side by side: the most exposed rank per stage, pipeline balance;
//! - `diff`    — two runs, rank by rank and stage by stage, and the `--gate`.

pub mod across;
pub mod diff;
pub mod figures;
pub mod scan;

use serde::Serialize;
use serde::ser::SerializeMap;

use std::collections::HashMap;

use crate::mesh::{Label, Mesh};
use crate::nsys::conventions::Conventions;
use crate::nsys::error::Result;
use crate::nsys::ops::Ops;
use crate::nsys::sqlite::Db;
use crate::nsys::stats;

use crate::nsys::ops::Op;
use figures::{Figures, Kernel, Kernels};
use scan::{Query, Tag};

/// Which window the figures are for (`--window`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowPick {
    /// The median window range of each process (index count / 2 in start order), as pithtrain's
    /// find_window.py picks it; the whole capture where a process has none.
    Median,
    /// The whole capture.
    All,
    /// These bounds, for every process.
    Range(i64, i64),
}

/// A `--window` value that is not one: the user's to fix (clap says it, exit 2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "--window takes median, all or START_NS:END_NS (integer nanoseconds of the capture, START_NS <= END_NS), not {given:?}"
)]
pub struct NotAWindow {
    pub given: String,
}

crate::exit::user_errors!(NotAWindow);

impl std::str::FromStr for WindowPick {
    type Err = NotAWindow;

    fn from_str(s: &str) -> std::result::Result<WindowPick, NotAWindow> {
        match s {
            "median" => return Ok(WindowPick::Median),
            "all" => return Ok(WindowPick::All),
            _ => {}
        }
        let bad = || NotAWindow {
            given: s.to_string(),
        };
        let (a, b) = s.split_once(':').ok_or_else(bad)?;
        let (a, b): (i64, i64) = (
            a.trim().parse().map_err(|_| bad())?,
            b.trim().parse().map_err(|_| bad())?,
        );
        if a > b {
            return Err(bad());
        }
        Ok(WindowPick::Range(a, b))
    }
}

/// The window the figures of a process are for.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// `median`, `all` or `range` (`--window`); `all` also where `median` found no window range.
    pub pick: &'static str,
    /// The window range's name (the median chunk), `whole capture`, or `START:END`.
    pub name: String,
    #[serde(flatten)]
    pub figures: Figures,
    /// Why the window is not what was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The window ranges of a process (DualPipeV's overlapped chunks).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Chunks {
    pub count: u64,
    /// Median length of the ranges that ended: the process's chunk time.
    pub median_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
}

/// The setup fields the conventions name, as JSON keys of the process (`"mbs": 1`).
#[derive(Debug, Clone, Default)]
pub struct SetupFields(pub Vec<(String, Option<u64>)>);

impl Serialize for SetupFields {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// What the conventions say about one process.
#[derive(Debug, Clone)]
pub struct ProcRank {
    pub rank: Option<u64>,
    pub mesh: Option<Mesh>,
    pub fields: SetupFields,
    /// The setup range's name.
    pub setup: Option<String>,
    /// Why the mesh is unknown.
    pub mesh_unknown: Option<String>,
    /// A setup range found, but not as the process's first event.
    pub setup_note: Option<String>,
    pub window: Window,
    pub chunks: Chunks,
    pub whole_capture: Figures,
}

impl ProcRank {
    /// A placeholder left behind when a process's figures are moved into the report.
    pub fn empty() -> ProcRank {
        ProcRank {
            rank: None,
            mesh: None,
            fields: SetupFields::default(),
            setup: None,
            mesh_unknown: None,
            setup_note: None,
            window: Window {
                pick: "all",
                name: String::new(),
                figures: Figures::default(),
                note: None,
            },
            chunks: Chunks::default(),
            whole_capture: Figures::default(),
        }
    }
}

/// One process as the comparisons across ranks (`across`) and runs (`diff`) see it, taken from
/// its export's report.
#[derive(Debug, Clone)]
pub struct RankView {
    pub file: String,
    /// Its export's index among those given, and its own among the export's processes.
    pub export: usize,
    pub index: usize,
    pub pid: i64,
    pub rank: Option<u64>,
    pub mesh: Option<Mesh>,
    /// The window's name, and its sums.
    pub window: String,
    pub totals: figures::WindowTotals,
    pub stages: Vec<figures::StageRow>,
    pub chunks: Chunks,
    /// The GPUs it ran work on, and its overlap over the whole capture (the report's
    /// `overlap`: what a process without the trainer's ranges is compared by).
    pub devices: Vec<i64>,
    pub whole: WholeProcess,
}

/// A process's communication and compute over the whole capture, as unions of its kernels.
#[derive(Debug, Clone, Default)]
pub struct WholeProcess {
    pub exposed_ns: i64,
    pub comm_ns: i64,
    pub compute_ns: i64,
}

/// The per-rank figures of the processes of one export, by globalPid.
pub struct Ranks {
    pub by_gpid: HashMap<i64, ProcRank>,
    /// The NVTX table had to be read again sorted.
    pub reordered: bool,
}

impl Ranks {
    /// The figures of a process (taken out), or those of a process without kernels or NVTX
    /// events in the capture.
    pub fn take(&mut self, gpid: i64, conv: &Conventions, pick: WindowPick) -> ProcRank {
        self.by_gpid.remove(&gpid).unwrap_or_else(|| {
            let none: &[Kernel] = &[];
            proc_rank(none, 0..0, None, &[], &[], conv, pick)
        })
    }
}

/// What the figures read of each kernel name (by `Ops::kernel_names` index): whether its short
/// name is like the communication pattern, and whether it starts with the not-compute prefix
/// (`None`: no short name, the kernel is not read, as in the skill's join on `StringIds`).
type NameFlags = Vec<Option<(bool, bool)>>;

fn flags_of(names: &NameFlags, ops: &Ops, op: &Op) -> Option<(bool, bool)> {
    if !ops.classes.is_kernel(op.class) {
        return None;
    }
    names.get(op.name as usize).copied().flatten()
}

/// The first half of the per-rank figures: the communication kernels' launch times, to look up
/// in the NVTX events (`scan`) while the NVTX projection runs on the same ops (it changes no op's
/// place, only what it writes into them). Holds 16 bytes per communication kernel; borrows
/// nothing, so the scan can run on another thread.
pub struct Pending {
    names: NameFlags,
    /// Sorted by process and time; `groups` gives each process's globalPid and slice.
    queries: Vec<Query>,
    groups: Vec<(i64, usize, usize)>,
}

impl Pending {
    /// The launch time of every communication-like kernel: the innermost range is looked up
    /// there (the kernel's start when the runtime call is missing, or at 0, as the skill does).
    /// Op indexes stay valid as long as the ops are not reordered.
    pub fn new(ops: &Ops, conv: &Conventions) -> Pending {
        let names: NameFlags = ops
            .kernel_names
            .iter()
            .map(|k| {
                k.short.as_deref().map(|s| {
                    (
                        conv.communication.matches(s),
                        s.starts_with(conv.not_compute_prefix.as_str()),
                    )
                })
            })
            .collect();
        let mut keyed: Vec<(u16, Query)> = ops
            .ops
            .iter()
            .enumerate()
            .filter(|(_, op)| flags_of(&names, ops, op).is_some_and(|f| f.0))
            .map(|(i, op)| {
                let t = if op.launch_start == i64::MIN || op.launch_start == 0 {
                    op.start
                } else {
                    op.launch_start
                };
                let q = Query {
                    t,
                    op: i as u32,
                    tag: Tag::default(),
                };
                (op.proc, q)
            })
            .collect();
        keyed.sort_unstable_by_key(|(p, q)| (*p, q.t, q.op));
        let mut groups: Vec<(i64, usize, usize)> = Vec::new();
        for (i, (p, _)) in keyed.iter().enumerate() {
            let g = ops.procs[*p as usize];
            match groups.last_mut() {
                Some(last) if last.0 == g => last.2 = i + 1,
                _ => groups.push((g, i, i + 1)),
            }
        }
        Pending {
            names,
            queries: keyed.into_iter().map(|(_, q)| q).collect(),
            groups,
        }
    }

    /// Read the NVTX events and find every query's innermost range.
    pub fn scan(self, db: &Db, conv: &Conventions) -> Result<Scanned> {
        Ok(self.scan_along(db, conv, |_| Ok(()))?.1)
    }

    /// Find every query's innermost range from the rows another pass over `NVTX_EVENTS` feeds
    /// the scanner (`feed`, e.g. the NVTX projection); where those rows were not usable (not in
    /// start order), the table is read again for it alone.
    pub fn scan_along<R>(
        mut self,
        db: &Db,
        conv: &Conventions,
        feed: impl FnOnce(&mut scan::Scanner<'_>) -> Result<R>,
    ) -> Result<(R, Scanned)> {
        let mut sc = scan::Scanner::new(conv, &self.groups, &mut self.queries);
        let r = feed(&mut sc)?;
        let scanned = match sc.finish() {
            Some(s) => s,
            None => scan::scan(db, conv, &self.groups, &mut self.queries, false)?,
        };
        self.queries.sort_unstable_by_key(|q| q.op);
        Ok((
            r,
            Scanned {
                names: self.names,
                queries: self.queries,
                scan: scanned,
            },
        ))
    }
}

/// The scan's answers, ready to be summed with the ops (in the order `Pending::new` saw).
pub struct Scanned {
    names: NameFlags,
    /// Sorted by op index.
    queries: Vec<Query>,
    scan: scan::Scan,
}

impl Scanned {
    /// The figures of every process. `ops` in the order `Pending::new` saw, each process's ops
    /// together (sorted by process first).
    pub fn finish(self, ops: &Ops, conv: &Conventions, pick: WindowPick) -> Ranks {
        let names = &self.names;
        let flags = |o: &Op| flags_of(names, ops, o);
        let source = OpsKernels {
            ops: &ops.ops,
            flags: &flags,
            queries: &self.queries,
            cursor: std::cell::Cell::new(0),
        };
        let scanned = &self.scan;
        let mut by_gpid = HashMap::new();
        let v = &ops.ops;
        let mut lo = 0;
        while lo < v.len() {
            let p = v[lo].proc;
            let hi = lo + v[lo..].partition_point(|o| o.proc == p);
            let gpid = ops.procs[p as usize];
            let nvtx = scanned.procs.get(&gpid);
            let which = lo as u32..hi as u32;
            by_gpid.insert(
                gpid,
                proc_rank(
                    &source,
                    which,
                    nvtx,
                    &ops.streams,
                    &scanned.stages,
                    conv,
                    pick,
                ),
            );
            lo = hi;
        }
        // Processes with NVTX events and no GPU work.
        for (gpid, nvtx) in &scanned.procs {
            by_gpid.entry(*gpid).or_insert_with(|| {
                proc_rank(
                    &source,
                    0..0,
                    Some(nvtx),
                    &ops.streams,
                    &scanned.stages,
                    conv,
                    pick,
                )
            });
        }
        Ranks {
            by_gpid,
            reordered: scanned.reordered,
        }
    }
}

/// The per-rank figures of an export in one go (`Pending`, `scan`, `finish` on this thread).
pub fn analyze(db: &Db, ops: &Ops, conv: &Conventions, pick: WindowPick) -> Result<Ranks> {
    Ok(Pending::new(ops, conv)
        .scan(db, conv)?
        .finish(ops, conv, pick))
}

/// The kernels of the ops array as the figures read them, with their innermost ranges' tags.
struct OpsKernels<'a, F: Fn(&Op) -> Option<(bool, bool)>> {
    ops: &'a [Op],
    flags: &'a F,
    /// Sorted by op index.
    queries: &'a [Query],
    /// Where the last tag was found: kernels are mostly read in op order, so the next one is
    /// usually just after it.
    cursor: std::cell::Cell<usize>,
}

impl<F: Fn(&Op) -> Option<(bool, bool)>> Kernels for OpsKernels<'_, F> {
    fn kernel(&self, i: u32) -> Option<Kernel> {
        let o = self.ops.get(i as usize)?;
        let (comm_like, not_compute) = (self.flags)(o)?;
        let tag = if comm_like {
            let q = self.queries;
            let c = self.cursor.get();
            let k = if c < q.len() && q[c].op == i {
                Some(c)
            } else if c + 1 < q.len() && q[c + 1].op == i {
                Some(c + 1)
            } else {
                q.binary_search_by_key(&i, |q| q.op).ok()
            };
            match k {
                Some(k) => {
                    self.cursor.set(k);
                    q[k].tag
                }
                None => Tag::default(),
            }
        } else {
            Tag::default()
        };
        Some(Kernel {
            start: o.start,
            end: o.end,
            stream: o.stream,
            comm_like,
            not_compute,
            tag,
        })
    }
}

fn proc_rank(
    source: &(impl Kernels + ?Sized),
    which: std::ops::Range<u32>,
    nvtx: Option<&scan::ProcNvtx>,
    streams: &[i64],
    stages: &[String],
    conv: &Conventions,
    pick: WindowPick,
) -> ProcRank {
    // The whole capture: the kernels that ran after it started.
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for k in which.clone().filter_map(|i| source.kernel(i)) {
        if k.start >= 0 {
            first = first.min(k.start);
            last = last.max(k.end);
        }
    }
    let whole = if first <= last { (first, last) } else { (0, 0) };
    let fig =
        |(s, e): (i64, i64)| figures::figures(source, which.clone(), s, e, streams, stages, conv);
    let chunks: &[scan::Chunk] = nvtx.map_or(&[], |n| &n.chunks);
    let mut lengths: Vec<i64> = chunks
        .iter()
        .filter_map(|c| c.end.map(|e| e - c.start))
        .collect();
    let summary = stats::summarize(&mut lengths);
    let chunk_stats = Chunks {
        count: chunks.len() as u64,
        median_ns: summary.med_ns,
        min_ns: summary.min_ns,
        max_ns: summary.max_ns,
    };
    let window = match pick {
        WindowPick::Median if !chunks.is_empty() => {
            let c = &chunks[chunks.len() / 2];
            match c.end {
                Some(end) => Window {
                    pick: "median",
                    name: c.name.clone(),
                    figures: fig((c.start, end)),
                    note: None,
                },
                // The skill's window would end at NULL and hold no kernel.
                None => Window {
                    pick: "median",
                    name: c.name.clone(),
                    figures: {
                        let mut f = fig((c.start, c.start - 1));
                        f.totals.end_ns = c.start;
                        f
                    },
                    note: Some(
                        "the median window range never ended: the window holds nothing".into(),
                    ),
                },
            }
        }
        WindowPick::Median => Window {
            pick: "all",
            name: "whole capture".into(),
            figures: fig(whole),
            note: Some(format!(
                "no {:?} ranges: the window is the whole capture",
                conv.window.pattern
            )),
        },
        WindowPick::All => Window {
            pick: "all",
            name: "whole capture".into(),
            figures: fig(whole),
            note: None,
        },
        WindowPick::Range(s, e) => Window {
            pick: "range",
            name: format!("{s}:{e}"),
            figures: fig((s, e)),
            note: None,
        },
    };
    let (label, mesh_unknown, setup_note) = setup_label(nvtx, conv);
    let parsed = label.as_deref().and_then(Label::parse);
    let (rank, mesh, mesh_unknown) = match (&label, &parsed) {
        (Some(_), Some(l)) => match l.int(&conv.rank_field) {
            Some(r) => (Some(r), Some(l.mesh()), None),
            None => (
                None,
                None,
                Some(format!(
                    "the setup range has no integer field {:?}",
                    conv.rank_field
                )),
            ),
        },
        (Some(t), None) => (
            None,
            None,
            Some(format!(
                "the setup range {t:?} does not read as key=value fields"
            )),
        ),
        (None, _) => (None, None, mesh_unknown),
    };
    let fields = SetupFields(
        conv.fields
            .iter()
            .map(|f| (f.clone(), parsed.as_ref().and_then(|l| l.int(f))))
            .collect(),
    );
    ProcRank {
        rank,
        mesh,
        fields,
        setup: label,
        mesh_unknown,
        setup_note,
        window,
        chunks: chunk_stats,
        whole_capture: fig(whole),
    }
}

/// The setup range of a process: its first event when that is one (as the skill reads it), else
/// the earliest setup range with a note; `None` with the reason when there is none.
fn setup_label(
    nvtx: Option<&scan::ProcNvtx>,
    conv: &Conventions,
) -> (Option<String>, Option<String>, Option<String>) {
    let Some(n) = nvtx else {
        return (
            None,
            Some("the process has no NVTX events in the capture".into()),
            None,
        );
    };
    if let Some(name) = n.first_names.iter().flatten().find(|s| conv.is_setup(s)) {
        return (Some(name.clone()), None, None);
    }
    let first = n
        .first_names
        .iter()
        .flatten()
        .next()
        .map_or("an event without a name".to_string(), |s| format!("{s:?}"));
    match &n.setup {
        Some((at, label)) => (
            Some(label.clone()),
            None,
            Some(format!(
                "the setup range is not the first NVTX event of the capture (that is {first}; the setup range starts at {at} ns)"
            )),
        ),
        None => (
            None,
            Some(format!(
                "no NVTX range matches the setup pattern {} (the first event is {first}): captured without the trainer's setup range, or another program",
                conv.setup_text
            )),
            None,
        ),
    }
}
