//! From an export to the report: read the GPU work (`ops`), project the NVTX ranges onto it in
//! one streaming pass (`nvtx`), then summarise per process — categories, communication by
//! operation, communication/compute overlap — and build the tables (`tables`) and notes
//! (`notes`).
//!
//! The ops array is the only thing held per GPU operation; it is sorted again (device and start
//! for the overlap, kernel name for the summaries) instead of keeping side tables.

use std::collections::BTreeSet;
use std::path::Path;

use crate::nsys::classify::{Classifier, CommOp};
use crate::nsys::conventions::Conventions;
use crate::nsys::error::{Error, Result};
use crate::nsys::hash::IntMap;
use crate::nsys::ids;
use crate::nsys::meta::{self, Meta};
use crate::nsys::names::Grouping;
use crate::nsys::notes::{self, NoteInputs};
use crate::nsys::nvtx::{self, Projection};
use crate::nsys::ops::{self, Classes, NONE, Ops};
use crate::nsys::overlap;
use crate::nsys::ranks::{self, Ranks, WindowPick};

use crate::nsys::report::{
    CaptureInfo, CategoryTime, CommRow, Communication, ExportInfo, Gpu, GroupingInfo, Overlap,
    Process, ProcessTimeline, Report, Timeline, TimelineRange, Totals, WindowInfo,
};
use crate::nsys::sqlite::{self, Db};
use crate::nsys::tables::{self, ratio};

#[derive(Clone)]
pub struct Options {
    /// Rows per table; `None` lists every row (`--all`).
    pub top: Option<usize>,
    pub grouping: Grouping,
    /// Buckets of the all-ranks timeline; `None` leaves it out (no `--html`).
    pub timeline_buckets: Option<usize>,
    pub classifier: Classifier,
    pub conventions: Conventions,
    pub window: WindowPick,
    /// SQLite's memory map per export (bytes): smaller when several exports are read at once.
    pub mmap_bytes: i64,
    /// `--rank N`: only these global ranks' processes (empty: every process).
    pub ranks: Vec<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            top: Some(10),
            grouping: Grouping::Name,
            timeline_buckets: None,
            classifier: Classifier::builtin(),
            conventions: Conventions::builtin(),
            window: WindowPick::Median,
            mmap_bytes: sqlite::MMAP_BYTES,
            ranks: Vec::new(),
        }
    }
}

/// One line saying why an export holds no GPU work and what to add.
fn no_gpu_work(db: &Db, meta: &Meta, have_tables: bool, capture_hint: Option<&str>) -> Error {
    let file = &db.path;
    let what = if have_tables {
        "the export has GPU tables but no rows in them".to_string()
    } else {
        "no CUPTI_ACTIVITY_KIND_KERNEL or CUPTI_ACTIVITY_KIND_GRAPH_TRACE table".to_string()
    };
    match &meta.capture {
        Some(c) if !c.traced.iter().any(|t| t == "cuda") => Error::input(
            file,
            format!(
                "no CUDA kernel data ({what}): the capture traced {} but not cuda; profile with --trace cuda,nvtx (`instrument nsys command` prints the whole command)",
                if c.traced.is_empty() {
                    "nothing".to_string()
                } else {
                    c.traced.join(",")
                }
            ),
        ),
        Some(_) => Error::input(
            file,
            format!(
                "no CUDA kernel data ({what}) although cuda was traced: nothing ran on the GPU while nsys recorded; with --capture-range=cudaProfilerApi only the work between cudaProfilerStart and cudaProfilerStop is recorded{}",
                capture_hint.map(|h| format!(" ({h})")).unwrap_or_default()
            ),
        ),
        None => Error::input(
            file,
            format!("no CUDA kernel data ({what}); profile with --trace cuda"),
        ),
    }
}

/// Per-process totals.
#[derive(Default, Clone)]
struct ProcAcc {
    devices: BTreeSet<i64>,
    first: i64,
    last: i64,
    kernel_ns: i64,
    kernel_count: u64,
    graph_ns: i64,
    graph_count: u64,
    memcpy_ns: i64,
    memcpy_count: u64,
    memset_ns: i64,
    memset_count: u64,
    /// Per category, then cuda_graph last.
    cat_ns: Vec<i64>,
    cat_count: Vec<u64>,
    comm_ns: [i64; 8],
    comm_count: [u64; 8],
    from_sendrecv_ns: [i64; 8],
    from_sendrecv_count: [u64; 8],
    unattributed_ns: i64,
}

impl ProcAcc {
    fn gpu_ns(&self) -> i64 {
        self.kernel_ns + self.graph_ns
    }
}

fn categories(names: &[String], ns: &[i64], count: &[u64], total: i64) -> Vec<CategoryTime> {
    names
        .iter()
        .enumerate()
        .map(|(i, c)| CategoryTime {
            category: c.clone(),
            time_ns: ns[i],
            count: count[i],
            share: ratio(ns[i], total),
        })
        .collect()
}

fn comm_rows(ns: &[i64; 8], count: &[u64; 8]) -> Vec<CommRow> {
    CommOp::ALL
        .iter()
        .filter(|o| count[o.index()] > 0)
        .map(|o| CommRow {
            op: o.as_str(),
            time_ns: ns[o.index()],
            count: count[o.index()],
        })
        .collect()
}

/// Read one export into its report.
pub fn analyze(path: &Path, opts: &Options) -> Result<Report> {
    analyze_export(path, opts).map_err(|e| e.in_file(path))
}

fn analyze_export(path: &Path, opts: &Options) -> Result<Report> {
    let db = sqlite::open_export(path, opts.mmap_bytes)?;
    let meta = meta::read(&db)?;
    let have_tables = [sqlite::KERNEL, sqlite::GRAPH_TRACE]
        .iter()
        .any(|t| db.has(t));
    let hint = opts.conventions.capture_hint.as_deref();
    if !have_tables {
        return Err(no_gpu_work(&db, &meta, false, hint));
    }
    let classifier = &opts.classifier;
    let mut ops = ops::read(&db, &meta, classifier)?;
    if ops.ops.is_empty() {
        return Err(no_gpu_work(&db, &meta, true, hint));
    }
    let mut proc_index: IntMap<i64, u16> = ops
        .procs
        .iter()
        .enumerate()
        .map(|(i, &g)| (g, i as u16))
        .collect();

    // Ops by process, launching thread and launch time: each process's ops and each thread's
    // launches are contiguous. One read of NVTX_EVENTS projects the ranges onto the ops and
    // feeds the per-rank figures' scan (which needs only the launch times, taken before).
    ops.ops
        .sort_unstable_by_key(|o| (o.proc, o.thread, o.launch_start, o.corr));
    let conv = &opts.conventions;
    let pending = ranks::Pending::new(&ops, conv);
    let (mut proj, scanned) = pending.scan_along(&db, conv, |scanner| {
        nvtx::project(
            &db,
            &mut ops,
            &mut proc_index,
            classifier,
            &nvtx::Options {
                grouping: opts.grouping,
                timeline: opts.timeline_buckets.is_some(),
            },
            Some(scanner),
        )
    })?;
    let ranks = scanned.finish(&ops, conv, opts.window);
    build(&db, &meta, ops, &mut proj, ranks, opts)
}

/// Exclusive and unattributed time, SendRecv counted as the collective its range names, and the
/// per-process totals: one pass over the ops.
fn tally(ops: &mut Ops, proj: &mut Projection) -> Vec<ProcAcc> {
    let classes = ops.classes;
    let n_cat = classes.categories as usize;
    let mut acc = vec![
        ProcAcc {
            first: i64::MAX,
            last: i64::MIN,
            cat_ns: vec![0; n_cat + 1],
            cat_count: vec![0; n_cat + 1],
            ..Default::default()
        };
        ops.procs.len()
    ];
    let sendrecv = CommOp::SendRecv.index() as u8 + 1;
    for op in ops.ops.iter_mut() {
        let d = op.dur();
        if op.innermost != NONE {
            proj.aggs[op.innermost as usize].exclusive_ns += d;
        } else {
            acc[op.proc as usize].unattributed_ns += d;
        }
        let a = &mut acc[op.proc as usize];
        let coll = op.coll();
        if op.comm() == sendrecv && coll != 0 && coll != sendrecv {
            a.from_sendrecv_ns[coll as usize - 1] += d;
            a.from_sendrecv_count[coll as usize - 1] += 1;
            op.set_comm(coll);
        }
        a.devices.insert(ops.devices[op.device as usize]);
        a.first = a.first.min(op.start);
        a.last = a.last.max(op.end);
        if classes.is_kernel(op.class) {
            a.kernel_ns += d;
            a.kernel_count += 1;
            a.cat_ns[op.class as usize] += d;
            a.cat_count[op.class as usize] += 1;
            let comm = op.comm();
            if comm > 0 {
                a.comm_ns[comm as usize - 1] += d;
                a.comm_count[comm as usize - 1] += 1;
            }
        } else if op.class == classes.graph() {
            a.graph_ns += d;
            a.graph_count += 1;
            a.cat_ns[n_cat] += d;
            a.cat_count[n_cat] += 1;
        } else if op.class == classes.memcpy() {
            a.memcpy_ns += d;
            a.memcpy_count += 1;
        } else {
            a.memset_ns += d;
            a.memset_count += 1;
        }
    }
    acc
}

/// Busy lanes of one process on the all-ranks axis: (compute, communication) per bucket.
type Lanes = (Vec<i64>, Vec<i64>);

/// Overlap per (process, GPU): unions of communication and compute intervals, from the ops
/// sorted by (process, device, start); with `buckets`, also each process's lanes over `span`.
fn overlaps(
    ops: &mut Ops,
    comm_cat: u8,
    span: (i64, i64),
    buckets: usize,
) -> (Vec<Overlap>, Vec<Lanes>) {
    let classes: Classes = ops.classes;
    let nprocs = ops.procs.len();
    let mut lanes: Vec<Lanes> = vec![(vec![0; buckets], vec![0; buckets]); nprocs];
    ops.ops
        .sort_unstable_by_key(|o| (o.proc, o.device, o.start));
    let mut out: Vec<Overlap> = (0..nprocs).map(|_| Overlap::default()).collect();
    let mut comm_u: Vec<(i64, i64)> = Vec::new();
    let mut comp_u: Vec<(i64, i64)> = Vec::new();
    let v = &ops.ops;
    let mut i = 0;
    while i < v.len() {
        let (p, dev) = (v[i].proc, v[i].device);
        comm_u.clear();
        comp_u.clear();
        let mut j = i;
        while j < v.len() && v[j].proc == p && v[j].device == dev {
            let o = &v[j];
            j += 1;
            if !classes.is_compute_work(o.class) {
                continue;
            }
            let u = if o.class == comm_cat {
                &mut comm_u
            } else {
                &mut comp_u
            };
            overlap::push_sorted(u, o.start, o.end);
        }
        let o = &mut out[p as usize];
        let c = overlap::length(&comm_u);
        let hidden = overlap::intersection_length(&comm_u, &comp_u);
        o.communication_ns += c;
        o.compute_ns += overlap::length(&comp_u);
        o.hidden_ns += hidden;
        o.exposed_ns += c - hidden;
        if buckets > 0 {
            let l = &mut lanes[p as usize];
            overlap::add_buckets(&mut l.0, &comp_u, span.0, span.1);
            overlap::add_buckets(&mut l.1, &comm_u, span.0, span.1);
        }
        i = j;
    }
    for o in &mut out {
        o.hidden_share = ratio(o.hidden_ns, o.communication_ns);
    }
    (out, lanes)
}

fn build(
    db: &Db,
    meta: &Meta,
    mut ops: Ops,
    proj: &mut Projection,
    mut ranks: Ranks,
    opts: &Options,
) -> Result<Report> {
    let classifier = &opts.classifier;
    let n_cat = ops.classes.categories as usize;
    let comm_cat = classifier.communication();
    let nprocs = ops.procs.len();
    let acc = tally(&mut ops, proj);

    // The all-ranks time axis, for the HTML page.
    let span = acc
        .iter()
        .filter(|a| a.first <= a.last)
        .fold((i64::MAX, i64::MIN), |(s, e), a| {
            (s.min(a.first), e.max(a.last))
        });
    let buckets = opts.timeline_buckets.unwrap_or(0);
    let (mut overlaps, mut lanes) = overlaps(&mut ops, comm_cat, span, buckets);
    let gpu_ns: Vec<i64> = acc.iter().map(ProcAcc::gpu_ns).collect();
    let mut kernels = tables::kernels(&mut ops, &gpu_ns, classifier, opts.top);
    let unmatched = ops.unmatched;
    let negative_ops = ops.negative_timestamps;
    let graph_rows = ops.graph_rows_with_nodes;
    let has_runtime = ops.has_runtime;
    let has_graph_table = ops.has_graph_table;
    drop(ops.ops);
    let conv = &opts.conventions;
    let mut ranges = tables::ranges(proj, &ops.procs, classifier, opts.top, |n| conv.is_setup(n));

    // Processes, ordered by pid.
    let names: IntMap<i64, String> = meta
        .processes
        .iter()
        .filter_map(|p| p.name.clone().map(|n| (p.global_pid, n)))
        .collect();
    let mut cat_names: Vec<String> = classifier.categories.clone();
    cat_names.push("cuda_graph".into());
    // Processes by rank where the setup range says it, then by pid.
    let mut per_proc: Vec<ranks::ProcRank> = ops
        .procs
        .iter()
        .map(|&g| ranks.take(g, conv, opts.window))
        .collect();
    let mut order: Vec<usize> = (0..nprocs).collect();
    order.sort_by_key(|&p| {
        (
            per_proc[p].rank.unwrap_or(u64::MAX),
            ids::pid(ops.procs[p]),
            ops.procs[p],
        )
    });
    let notes = notes::notes(NoteInputs {
        has_runtime,
        has_nvtx: db.has(sqlite::NVTX_EVENTS),
        proj,
        unmatched,
        negative: negative_ops + proj.negative_timestamps,
        graph_rows,
        ranks: &per_proc,
        ranks_reordered: ranks.reordered,
    });
    let ranks = &mut per_proc;
    let mut processes = Vec::with_capacity(nprocs);
    let mut totals = Totals::default();
    let mut tot_ns = vec![0i64; n_cat + 1];
    let mut tot_count = vec![0u64; n_cat + 1];
    let mut timeline_procs = Vec::new();
    for &p in &order {
        let gpid = ops.procs[p];
        let a = &acc[p];
        totals.kernel_ns += a.kernel_ns;
        totals.kernel_count += a.kernel_count;
        totals.graph_ns += a.graph_ns;
        totals.graph_count += a.graph_count;
        totals.memcpy_ns += a.memcpy_ns;
        totals.memcpy_count += a.memcpy_count;
        totals.memset_ns += a.memset_ns;
        totals.memset_count += a.memset_count;
        for i in 0..=n_cat {
            tot_ns[i] += a.cat_ns[i];
            tot_count[i] += a.cat_count[i];
        }
        let pid = ids::pid(gpid);
        let name = names
            .get(&gpid)
            .cloned()
            .or_else(|| meta.thread_names.get(&(gpid | pid)).cloned());
        let comm_ns = a.cat_ns[comm_cat as usize];
        let has_gpu = a.first <= a.last;
        if buckets > 0 {
            let (compute, communication) = std::mem::take(&mut lanes[p]);
            let ranges = proj
                .timeline
                .get(p)
                .map(|v| {
                    v.iter()
                        .map(|r| TimelineRange {
                            start_ns: r.start,
                            end_ns: r.end,
                            depth: r.depth,
                            name: proj.names.get(proj.aggs[r.agg as usize].name).name.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            timeline_procs.push(ProcessTimeline {
                pid,
                label: label(&ranks[p], pid),
                window: (
                    ranks[p].window.figures.totals.start_ns,
                    ranks[p].window.figures.totals.end_ns,
                ),
                compute,
                communication,
                ranges,
            });
        }
        let r = std::mem::replace(&mut ranks[p], ranks::ProcRank::empty());
        let win = r.window;
        processes.push(Process {
            global_pid: gpid,
            pid,
            name,
            rank: r.rank,
            mesh: r.mesh,
            setup_fields: r.fields,
            setup: r.setup,
            mesh_unknown: r.mesh_unknown,
            setup_note: r.setup_note,
            window: WindowInfo {
                pick: win.pick,
                name: win.name,
                totals: win.figures.totals,
                note: win.note,
            },
            streams: win.figures.streams,
            stages: win.figures.stages,
            chunks: r.chunks,
            whole_capture: r.whole_capture,
            devices: a.devices.iter().copied().collect(),
            first_ns: if has_gpu { a.first } else { 0 },
            last_ns: if has_gpu { a.last } else { 0 },
            gpu_ns: a.gpu_ns(),
            kernel_ns: a.kernel_ns,
            kernel_count: a.kernel_count,
            graph_ns: a.graph_ns,
            graph_count: a.graph_count,
            memcpy_ns: a.memcpy_ns,
            memcpy_count: a.memcpy_count,
            memset_ns: a.memset_ns,
            memset_count: a.memset_count,
            categories: categories(&cat_names, &a.cat_ns, &a.cat_count, a.gpu_ns()),
            communication: Communication {
                time_ns: comm_ns,
                count: a.cat_count[comm_cat as usize],
                share_of_gpu_time: ratio(comm_ns, a.gpu_ns()),
                by_op: comm_rows(&a.comm_ns, &a.comm_count),
                from_sendrecv: comm_rows(&a.from_sendrecv_ns, &a.from_sendrecv_count),
            },
            overlap: std::mem::take(&mut overlaps[p]),
            kernels: std::mem::take(&mut kernels.per_process[p]),
            kernels_rest: kernels.per_process_rest[p].take(),
            nvtx: std::mem::take(&mut ranges.per_process[p]),
            nvtx_rest: ranges.per_process_rest[p].take(),
            unattributed_ns: a.unattributed_ns,
        });
    }
    totals.gpu_ns = totals.kernel_ns + totals.graph_ns;
    totals.categories = categories(&cat_names, &tot_ns, &tot_count, totals.gpu_ns);
    totals.communication_share = ratio(tot_ns[comm_cat as usize], totals.gpu_ns);

    let graph_mode = meta
        .capture
        .as_ref()
        .and_then(|c| c.cuda_graph_trace.clone())
        .map(|m| m.to_ascii_lowercase());
    let capture = CaptureInfo {
        traced: meta.capture.as_ref().map(|c| c.traced.clone()),
        cuda_graphs: notes::graphs_meaning(
            graph_mode.as_deref(),
            totals.graph_count,
            has_graph_table,
        ),
        cuda_graph_trace: graph_mode,
    };
    let timeline = opts.timeline_buckets.map(|n| Timeline {
        start_ns: if span.0 <= span.1 { span.0 } else { 0 },
        end_ns: if span.0 <= span.1 { span.1 } else { 0 },
        buckets: n,
        processes: timeline_procs,
    });
    Ok(Report {
        file: db.path.display().to_string(),
        export: ExportInfo {
            schema_version: meta.export_schema_version.clone(),
            nsys_version: meta.product_version.clone(),
            metadata_table: meta.metadata_table,
            session_start_utc_ns: meta.session_start_utc_ns,
        },
        capture,
        grouping: GroupingInfo {
            by: match opts.grouping {
                Grouping::Name => "name",
                Grouping::NameAndShape => "name_and_shape",
            },
            stripped_suffixes: proj.names.stripped,
            folded_families: proj.folded_families,
            top: opts.top,
        },
        gpus: meta
            .gpus
            .iter()
            .map(|(id, name)| Gpu {
                id: *id,
                name: name.clone(),
            })
            .collect(),
        categories: cat_names,
        totals,
        processes,
        kernel_summary: kernels.summary,
        kernel_summary_rest: kernels.summary_rest,
        nvtx_gpu_proj_sum: ranges.proj_sum,
        nvtx_gpu_proj_sum_rest: ranges.proj_sum_rest,
        notes,
        timeline,
    })
}

/// A process as people name it on the timeline: `rank 5 (pp 1, ep 1)`, or `pid 4242`.
pub fn label(r: &ranks::ProcRank, pid: i64) -> String {
    match (&r.rank, &r.mesh) {
        (Some(rank), Some(m)) if !m.is_empty() => format!("rank {rank} ({})", m.short()),
        (Some(rank), _) => format!("rank {rank}"),
        _ => format!("pid {pid}"),
    }
}
