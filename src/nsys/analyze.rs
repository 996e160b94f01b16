//! From a loaded export to the report: kernel categories per process, communication by
//! operation, communication/compute overlap, kernel summaries and the NVTX projection.

use std::collections::BTreeSet;

use crate::nsys::classify::{Category, Class, CommOp, classify};
use crate::nsys::hash::IntMap;
use crate::nsys::ids;
use crate::nsys::nvtx::{self, OP_CLASSES};
use crate::nsys::overlap;
use crate::nsys::report::{
    CategoryTime, ClassTime, CommRow, Communication, Gpu, KernelRow, Note, Overlap, Process,
    ProjRow, ProjStats, RangeRow, Report, SCHEMA, Timeline, Totals,
};
use crate::nsys::sqlite::{Export, OpKind};
use crate::nsys::stats;

#[derive(Debug, Clone)]
pub struct Options {
    /// How many kernels to list per process.
    pub top: usize,
    /// Buckets per process timeline; `None` leaves the timeline out.
    pub timeline_buckets: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            top: 15,
            timeline_buckets: None,
        }
    }
}

const CLASS_NAMES: [&str; OP_CLASSES] = [
    "communication",
    "gemm",
    "attention",
    "elementwise",
    "other",
    "memcpy",
    "memset",
];
const MEMCPY: u8 = 5;
const MEMSET: u8 = 6;

fn ratio(a: i64, b: i64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

#[derive(Default)]
struct ProcAcc {
    devices: BTreeSet<i64>,
    first: i64,
    last: i64,
    kernel_ns: i64,
    kernel_count: u64,
    memcpy_ns: i64,
    memcpy_count: u64,
    memset_ns: i64,
    memset_count: u64,
    cat_ns: [i64; 5],
    cat_count: [u64; 5],
    comm_ns: [i64; 8],
    comm_count: [u64; 8],
}

fn categories(ns: &[i64; 5], count: &[u64; 5], total: i64) -> Vec<CategoryTime> {
    Category::ALL
        .iter()
        .map(|c| CategoryTime {
            category: c.as_str(),
            time_ns: ns[c.index()],
            count: count[c.index()],
            share: ratio(ns[c.index()], total),
        })
        .collect()
}

fn proj_stats(agg: &mut nvtx::RangeAgg) -> ProjStats {
    let s = stats::summarize(&mut agg.proj_ns);
    ProjStats {
        instances: s.count,
        total_ns: s.total_ns,
        range_ns: agg.proj_range_ns,
        avg_ns: s.avg_ns,
        med_ns: s.med_ns,
        min_ns: s.min_ns,
        max_ns: s.max_ns,
        stddev_ns: s.stddev_ns,
        gpu_ops: agg.gpu_ops,
    }
}

fn kernel_order(a: &KernelRow, b: &KernelRow) -> std::cmp::Ordering {
    // nsys: ORDER BY total DESC, instances, name.
    b.stats
        .total_ns
        .cmp(&a.stats.total_ns)
        .then(a.stats.count.cmp(&b.stats.count))
        .then(a.name.cmp(&b.name))
}

pub fn analyze(export: &Export, opts: &Options) -> Report {
    // Classify each distinct kernel name once.
    let mut classes: IntMap<i64, Class> = IntMap::default();
    for op in &export.ops {
        if op.kind == OpKind::Kernel && !classes.contains_key(&op.name) {
            let name = export.string(op.name).unwrap_or("");
            classes.insert(op.name, classify(name));
        }
    }
    let class_of = |name: i64| -> Class {
        classes.get(&name).copied().unwrap_or(Class {
            category: Category::Other,
            comm: None,
        })
    };

    // Processes: every globalPid with GPU work or NVTX ranges, ordered by pid.
    let mut gpids: BTreeSet<(i64, i64)> = BTreeSet::new();
    for op in &export.ops {
        gpids.insert((ids::pid(op.global_pid), op.global_pid));
    }
    for ev in &export.nvtx {
        let g = ids::global_pid(ev.global_tid);
        gpids.insert((ids::pid(g), g));
    }
    let gpids: Vec<i64> = gpids.into_iter().map(|(_, g)| g).collect();
    let proc_index: IntMap<i64, usize> = gpids.iter().enumerate().map(|(i, &g)| (g, i)).collect();
    let mut acc: Vec<ProcAcc> = (0..gpids.len())
        .map(|_| ProcAcc {
            first: i64::MAX,
            last: i64::MIN,
            ..Default::default()
        })
        .collect();

    let mut op_class: Vec<u8> = Vec::with_capacity(export.ops.len());
    let mut groups: IntMap<(u32, i64), Vec<i64>> = IntMap::default();
    // (process, device) -> (communication intervals, compute intervals)
    type Intervals = Vec<(i64, i64)>;
    let mut lanes: IntMap<(u32, i64), (Intervals, Intervals)> = IntMap::default();
    let mut cat_lanes: IntMap<(u32, u8), Intervals> = IntMap::default();
    let want_timeline = opts.timeline_buckets.is_some();

    for op in &export.ops {
        let p = proc_index[&op.global_pid];
        let a = &mut acc[p];
        let dur = op.end - op.start;
        a.devices.insert(op.device);
        a.first = a.first.min(op.start);
        a.last = a.last.max(op.end);
        let class = match op.kind {
            OpKind::Kernel => {
                let c = class_of(op.name);
                a.kernel_ns += dur;
                a.kernel_count += 1;
                a.cat_ns[c.category.index()] += dur;
                a.cat_count[c.category.index()] += 1;
                if let Some(cop) = c.comm {
                    a.comm_ns[cop.index()] += dur;
                    a.comm_count[cop.index()] += 1;
                }
                groups.entry((p as u32, op.name)).or_default().push(dur);
                let lane = lanes.entry((p as u32, op.device)).or_default();
                if c.category == Category::Communication {
                    lane.0.push((op.start, op.end));
                } else {
                    lane.1.push((op.start, op.end));
                }
                c.category.index() as u8
            }
            OpKind::Memcpy => {
                a.memcpy_ns += dur;
                a.memcpy_count += 1;
                MEMCPY
            }
            OpKind::Memset => {
                a.memset_ns += dur;
                a.memset_count += 1;
                MEMSET
            }
        };
        if want_timeline {
            cat_lanes
                .entry((p as u32, class))
                .or_default()
                .push((op.start, op.end));
        }
        op_class.push(class);
    }

    // Overlap, per process summed over its devices.
    let mut overlaps: Vec<Overlap> = (0..gpids.len()).map(|_| Overlap::default()).collect();
    for ((p, _dev), (comm, compute)) in lanes {
        let comm = overlap::union(comm);
        let compute = overlap::union(compute);
        let o = &mut overlaps[p as usize];
        let c = overlap::length(&comm);
        let hidden = overlap::intersection_length(&comm, &compute);
        o.communication_ns += c;
        o.compute_ns += overlap::length(&compute);
        o.hidden_ns += hidden;
        o.exposed_ns += c - hidden;
    }
    for o in &mut overlaps {
        o.hidden_share = ratio(o.hidden_ns, o.communication_ns);
    }

    // Kernel summaries: per process, and over the whole export (by name).
    let mut per_proc_rows: Vec<Vec<KernelRow>> = (0..gpids.len()).map(|_| Vec::new()).collect();
    let mut by_name: IntMap<i64, Vec<Vec<i64>>> = IntMap::default();
    let kernel_row = |name_id: i64, durs: &mut [i64], scope_total: i64| -> KernelRow {
        let c = class_of(name_id);
        let s = stats::summarize(durs);
        KernelRow {
            name: export.string(name_id).unwrap_or("<unknown>").to_string(),
            category: c.category.as_str(),
            comm_op: c.comm.map(CommOp::as_str),
            share: ratio(s.total_ns, scope_total),
            stats: s,
        }
    };
    for ((p, name), mut durs) in groups {
        let total = acc[p as usize].kernel_ns;
        per_proc_rows[p as usize].push(kernel_row(name, &mut durs, total));
        by_name.entry(name).or_default().push(durs);
    }
    let export_kernel_ns: i64 = acc.iter().map(|a| a.kernel_ns).sum();
    let mut kernel_summary: Vec<KernelRow> = by_name
        .into_iter()
        .map(|(name, parts)| {
            let mut all: Vec<i64> = parts.concat();
            kernel_row(name, &mut all, export_kernel_ns)
        })
        .collect();
    kernel_summary.sort_by(kernel_order);
    for rows in &mut per_proc_rows {
        rows.sort_by(kernel_order);
        rows.truncate(opts.top);
    }

    // NVTX projection.
    let mut proj = nvtx::project(export, &op_class);
    let mut nvtx_rows: Vec<Vec<RangeRow>> = (0..gpids.len()).map(|_| Vec::new()).collect();
    let mut export_proj: std::collections::HashMap<(String, &'static str), Vec<nvtx::RangeAgg>> =
        std::collections::HashMap::new();
    for (key, mut agg) in std::mem::take(&mut proj.ranges) {
        let nsys_name = format!("{}:{}", key.domain, key.text);
        if agg.gpu_ops > 0 {
            export_proj
                .entry((nsys_name.clone(), key.style))
                .or_default()
                .push(agg.clone());
        }
        let p = proc_index[&key.global_pid];
        nvtx_rows[p].push(RangeRow {
            name: key.text,
            domain: key.domain,
            nsys_name,
            style: key.style,
            instances: agg.instances,
            cpu_ns: agg.cpu_ns,
            inclusive_ns: agg.inclusive_ns,
            exclusive_ns: agg.exclusive_ns,
            inclusive_by_category: CLASS_NAMES
                .iter()
                .zip(agg.inclusive_by_class.iter())
                .map(|(c, &t)| ClassTime {
                    category: c,
                    time_ns: t,
                })
                .collect(),
            proj: proj_stats(&mut agg),
        });
    }
    for rows in &mut nvtx_rows {
        rows.sort_by(|a, b| {
            b.inclusive_ns
                .cmp(&a.inclusive_ns)
                .then(b.cpu_ns.cmp(&a.cpu_ns))
                .then(a.nsys_name.cmp(&b.nsys_name))
        });
    }
    let mut nvtx_gpu_proj_sum: Vec<ProjRow> = export_proj
        .into_iter()
        .map(|((nsys_name, style), aggs)| {
            let mut merged = nvtx::RangeAgg::default();
            for a in aggs {
                merged.proj_ns.extend(a.proj_ns);
                merged.proj_range_ns += a.proj_range_ns;
                merged.gpu_ops += a.gpu_ops;
            }
            ProjRow {
                nsys_name,
                style,
                proj: proj_stats(&mut merged),
            }
        })
        .collect();
    nvtx_gpu_proj_sum.sort_by(|a, b| {
        b.proj
            .total_ns
            .cmp(&a.proj.total_ns)
            .then(a.nsys_name.cmp(&b.nsys_name))
    });

    // Processes.
    let names: IntMap<i64, String> = export
        .processes
        .iter()
        .filter_map(|p| p.name.clone().map(|n| (p.global_pid, n)))
        .collect();
    let mut processes = Vec::with_capacity(gpids.len());
    let mut totals = Totals::default();
    let mut tot_cat_ns = [0i64; 5];
    let mut tot_cat_count = [0u64; 5];
    for (p, (&gpid, a)) in gpids.iter().zip(acc.iter()).enumerate() {
        totals.kernel_ns += a.kernel_ns;
        totals.kernel_count += a.kernel_count;
        totals.memcpy_ns += a.memcpy_ns;
        totals.memcpy_count += a.memcpy_count;
        totals.memset_ns += a.memset_ns;
        totals.memset_count += a.memset_count;
        for i in 0..5 {
            tot_cat_ns[i] += a.cat_ns[i];
            tot_cat_count[i] += a.cat_count[i];
        }
        let pid = ids::pid(gpid);
        let main_thread = gpid | pid;
        let name = names
            .get(&gpid)
            .cloned()
            .or_else(|| export.thread_names.get(&main_thread).cloned());
        let comm_ns = a.cat_ns[Category::Communication.index()];
        let timeline = opts.timeline_buckets.map(|n| {
            let (t0, t1) = if a.first <= a.last {
                (a.first, a.last)
            } else {
                (0, 0)
            };
            let rows = (0..OP_CLASSES as u8)
                .filter_map(|c| {
                    let iv = cat_lanes.remove(&(p as u32, c))?;
                    let u = overlap::union(iv);
                    Some((
                        CLASS_NAMES[c as usize].to_string(),
                        overlap::bucketize(&u, t0, t1, n),
                    ))
                })
                .collect();
            Timeline {
                start_ns: t0,
                end_ns: t1,
                buckets: n,
                rows,
            }
        });
        let has_gpu = a.first <= a.last;
        processes.push(Process {
            global_pid: gpid,
            pid,
            name,
            devices: a.devices.iter().copied().collect(),
            first_ns: if has_gpu { a.first } else { 0 },
            last_ns: if has_gpu { a.last } else { 0 },
            kernel_ns: a.kernel_ns,
            kernel_count: a.kernel_count,
            memcpy_ns: a.memcpy_ns,
            memcpy_count: a.memcpy_count,
            memset_ns: a.memset_ns,
            memset_count: a.memset_count,
            categories: categories(&a.cat_ns, &a.cat_count, a.kernel_ns),
            communication: Communication {
                time_ns: comm_ns,
                count: a.cat_count[Category::Communication.index()],
                share_of_kernel_time: ratio(comm_ns, a.kernel_ns),
                by_op: CommOp::ALL
                    .iter()
                    .filter(|o| a.comm_count[o.index()] > 0)
                    .map(|o| CommRow {
                        op: o.as_str(),
                        time_ns: a.comm_ns[o.index()],
                        count: a.comm_count[o.index()],
                    })
                    .collect(),
            },
            overlap: std::mem::take(&mut overlaps[p]),
            kernels: std::mem::take(&mut per_proc_rows[p]),
            nvtx: std::mem::take(&mut nvtx_rows[p]),
            unattributed_ns: proj.unattributed_ns.get(&gpid).copied().unwrap_or(0),
            timeline,
        });
    }
    totals.categories = categories(&tot_cat_ns, &tot_cat_count, totals.kernel_ns);
    totals.communication_share = ratio(
        tot_cat_ns[Category::Communication.index()],
        totals.kernel_ns,
    );

    // Notes about what the export contained.
    let mut notes = Vec::new();
    if !export.has_runtime {
        notes.push(Note {
            kind: "no_runtime_table",
            count: 0,
            message: "no CUPTI_ACTIVITY_KIND_RUNTIME table: GPU work cannot be tied to NVTX ranges"
                .into(),
        });
    }
    if !export.has_nvtx {
        notes.push(Note {
            kind: "no_nvtx_table",
            count: 0,
            message: "no NVTX_EVENTS table: profile with --trace nvtx (and --python-functions-trace) to name modules".into(),
        });
    }
    if proj.cross_thread_ranges > 0 {
        notes.push(Note {
            kind: "cross_thread_ranges",
            count: proj.cross_thread_ranges,
            message: format!(
                "{} NVTX range(s) ended on another thread than they started on (e.g. {}); left out of the projection, as nsys does",
                proj.cross_thread_ranges,
                proj.cross_thread_names.join(", ")
            ),
        });
    }
    if proj.unclosed_ranges > 0 {
        notes.push(Note {
            kind: "unclosed_ranges",
            count: proj.unclosed_ranges,
            message: format!(
                "{} NVTX range(s) never ended; closed at the last NVTX timestamp, as nsys does",
                proj.unclosed_ranges
            ),
        });
    }
    if export.has_runtime && proj.unmatched_ops > 0 {
        notes.push(Note {
            kind: "unmatched_gpu_ops",
            count: proj.unmatched_ops,
            message: format!(
                "{} GPU operation(s) have no CUDA runtime call with the same process and correlation id; they count toward no NVTX range",
                proj.unmatched_ops
            ),
        });
    }
    if proj.negative_timestamps > 0 {
        notes.push(Note {
            kind: "negative_timestamps",
            count: proj.negative_timestamps,
            message: format!(
                "{} event(s) have negative timestamps (recorded before the capture range started); they are kept",
                proj.negative_timestamps
            ),
        });
    }

    Report {
        schema: SCHEMA,
        file: export.path.display().to_string(),
        export_schema_version: export.schema_version.clone(),
        gpus: export
            .gpus
            .iter()
            .map(|(id, name)| Gpu {
                id: *id,
                name: name.clone(),
            })
            .collect(),
        totals,
        processes,
        kernel_summary,
        nvtx_gpu_proj_sum,
        notes,
    }
}
