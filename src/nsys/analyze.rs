//! From an export to the report: read the GPU work (`ops`), project the NVTX ranges onto it in
//! one streaming pass (`nvtx`), then summarise per process — categories, communication by
//! operation, communication/compute overlap, kernel summaries, range tables — with every table
//! cut to the `--top` largest rows plus a summed `rest` row.
//!
//! The ops array is the only thing held per GPU operation; it is sorted three more times
//! (launching thread for the projection, device and start for the overlap, kernel name for the
//! summaries) instead of keeping side tables.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use anyhow::Result;

use crate::exit::user_error;
use crate::nsys::classify::{Classifier, CommOp};
use crate::nsys::hash::IntMap;
use crate::nsys::ids;
use crate::nsys::meta::{self, Meta};
use crate::nsys::names::Grouping;
use crate::nsys::nvtx::{self, Projection};
use crate::nsys::ops::{self, NONE, Op, Ops};
use crate::nsys::overlap;
use crate::nsys::report::{
    CaptureInfo, CategoryTime, ClassTime, CommRow, Communication, ExportInfo, Gpu, GroupingInfo,
    KernelRest, KernelRow, Note, Overlap, Process, ProcessTimeline, ProjRest, ProjRow, ProjStats,
    RangeRest, RangeRow, Report, SCHEMA, Timeline, TimelineRange, Totals,
};
use crate::nsys::sqlite::{self, Db};
use crate::nsys::stats;

pub struct Options {
    /// Rows per table; `None` lists every row (`--all`).
    pub top: Option<usize>,
    pub grouping: Grouping,
    /// Buckets of the all-ranks timeline; `None` leaves it out (no `--html`).
    pub timeline_buckets: Option<usize>,
    pub classifier: Classifier,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            top: Some(20),
            grouping: Grouping::Name,
            timeline_buckets: None,
            classifier: Classifier::builtin(),
        }
    }
}

fn ratio(a: i64, b: i64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// One line saying why an export holds no GPU work and what to add.
fn no_gpu_work(db: &Db, meta: &Meta, have_tables: bool) -> anyhow::Error {
    let file = db.path.display();
    let what = if have_tables {
        "the export has GPU tables but no rows in them".to_string()
    } else {
        "no CUPTI_ACTIVITY_KIND_KERNEL or CUPTI_ACTIVITY_KIND_GRAPH_TRACE table".to_string()
    };
    match &meta.capture {
        Some(c) if !c.traced.iter().any(|t| t == "cuda") => user_error(format!(
            "{file}: no CUDA kernel data ({what}): the capture traced {} but not cuda; profile with --trace cuda,nvtx (`instrument nsys command` prints the whole command)",
            if c.traced.is_empty() {
                "nothing".to_string()
            } else {
                c.traced.join(",")
            }
        )),
        Some(_) => user_error(format!(
            "{file}: no CUDA kernel data ({what}) although cuda was traced: nothing ran on the GPU while nsys recorded; with --capture-range=cudaProfilerApi only the work between cudaProfilerStart and cudaProfilerStop is recorded (pithtrain: set training.nsys_start and nsys_stop)"
        )),
        None => user_error(format!(
            "{file}: no CUDA kernel data ({what}); profile with --trace cuda"
        )),
    }
}

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

fn proj_stats(spans: &mut [i64], range_ns: i64, gpu_ops: u64) -> ProjStats {
    let s = stats::summarize(spans);
    ProjStats {
        instances: s.count,
        total_ns: s.total_ns,
        range_ns,
        avg_ns: s.avg_ns,
        med_ns: s.med_ns,
        min_ns: s.min_ns,
        max_ns: s.max_ns,
        stddev_ns: s.stddev_ns,
        gpu_ops,
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

/// Cut kernel rows to `top`, summing the rest.
fn cut_kernels(rows: &mut Vec<KernelRow>, top: Option<usize>) -> Option<KernelRest> {
    let top = top?;
    if rows.len() <= top {
        return None;
    }
    let rest = rows.split_off(top);
    Some(KernelRest {
        rows: rest.len() as u64,
        total_ns: rest.iter().map(|r| r.stats.total_ns).sum(),
        count: rest.iter().map(|r| r.stats.count).sum(),
        share: rest.iter().map(|r| r.share).sum(),
    })
}

/// Class names for `inclusive_by_category`: kernel categories, then memcpy, memset, cuda_graph.
fn class_names(classifier: &Classifier) -> Vec<String> {
    let mut v = classifier.categories.clone();
    v.push("memcpy".into());
    v.push("memset".into());
    v.push("cuda_graph".into());
    v
}

pub fn analyze(path: &Path, opts: &Options) -> Result<Report> {
    let db = sqlite::open_export(path)?;
    let meta = meta::read(&db)?;
    let have_tables = [sqlite::KERNEL, sqlite::GRAPH_TRACE]
        .iter()
        .any(|t| db.has(t));
    if !have_tables {
        return Err(no_gpu_work(&db, &meta, false));
    }
    let classifier = &opts.classifier;
    let mut ops = ops::read(&db, &meta, classifier)?;
    if ops.ops.is_empty() {
        return Err(no_gpu_work(&db, &meta, true));
    }
    let mut proc_index: IntMap<i64, u16> = ops
        .procs
        .iter()
        .enumerate()
        .map(|(i, &g)| (g, i as u16))
        .collect();

    // NVTX projection (ops by launching thread and launch time).
    ops.ops
        .sort_unstable_by_key(|o| (o.thread, o.launch_start, o.corr));
    let proj = nvtx::project(
        &db,
        &mut ops,
        &mut proc_index,
        classifier,
        &nvtx::Options {
            grouping: opts.grouping,
            timeline: opts.timeline_buckets.is_some(),
        },
    )?;
    let mut proj = proj;
    build(&db, &meta, ops, &mut proj, opts)
}

fn build(
    db: &Db,
    meta: &Meta,
    mut ops: Ops,
    proj: &mut Projection,
    opts: &Options,
) -> Result<Report> {
    let classifier = &opts.classifier;
    let classes = ops.classes;
    let n_cat = classes.categories as usize;
    let comm_cat = classifier.communication();
    let nprocs = ops.procs.len();
    let mut acc: Vec<ProcAcc> = vec![
        ProcAcc {
            first: i64::MAX,
            last: i64::MIN,
            cat_ns: vec![0; n_cat + 1],
            cat_count: vec![0; n_cat + 1],
            ..Default::default()
        };
        nprocs
    ];

    // Exclusive time, unattributed time, SendRecv counted as the collective its range names,
    // and the per-process totals: one pass.
    let sendrecv = CommOp::SendRecv.index() as u8 + 1;
    for op in ops.ops.iter_mut() {
        let d = op.dur();
        if op.innermost != NONE {
            proj.aggs[op.innermost as usize].exclusive_ns += d;
        } else {
            acc[op.proc as usize].unattributed_ns += d;
        }
        let a = &mut acc[op.proc as usize];
        if op.comm == sendrecv && op.coll != 0 && op.coll != sendrecv {
            a.from_sendrecv_ns[op.coll as usize - 1] += d;
            a.from_sendrecv_count[op.coll as usize - 1] += 1;
            op.comm = op.coll;
        }
        a.devices.insert(ops.devices[op.device as usize]);
        a.first = a.first.min(op.start);
        a.last = a.last.max(op.end);
        if classes.is_kernel(op.class) {
            a.kernel_ns += d;
            a.kernel_count += 1;
            a.cat_ns[op.class as usize] += d;
            a.cat_count[op.class as usize] += 1;
            if op.comm > 0 {
                a.comm_ns[op.comm as usize - 1] += d;
                a.comm_count[op.comm as usize - 1] += 1;
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

    // The all-ranks time axis, for the HTML page.
    let span = acc
        .iter()
        .filter(|a| a.first <= a.last)
        .fold((i64::MAX, i64::MIN), |(s, e), a| {
            (s.min(a.first), e.max(a.last))
        });
    let buckets = opts.timeline_buckets.unwrap_or(0);
    let mut lanes: Vec<(Vec<i64>, Vec<i64>)> = vec![(vec![0; buckets], vec![0; buckets]); nprocs];

    // Overlap per (process, device): unions of communication and compute intervals.
    ops.ops
        .sort_unstable_by_key(|o| (o.proc, o.device, o.start));
    let mut overlaps: Vec<Overlap> = (0..nprocs).map(|_| Overlap::default()).collect();
    let mut i = 0;
    let mut comm_u: Vec<(i64, i64)> = Vec::new();
    let mut comp_u: Vec<(i64, i64)> = Vec::new();
    while i < ops.ops.len() {
        let (p, dev) = (ops.ops[i].proc, ops.ops[i].device);
        comm_u.clear();
        comp_u.clear();
        let mut j = i;
        while j < ops.ops.len() && ops.ops[j].proc == p && ops.ops[j].device == dev {
            let o = &ops.ops[j];
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
        let o = &mut overlaps[p as usize];
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
    for o in &mut overlaps {
        o.hidden_share = ratio(o.hidden_ns, o.communication_ns);
    }

    // Kernel summaries: per process and over the whole export, by name.
    ops.ops.sort_unstable_by_key(|o| (o.name, o.proc));
    let mut per_proc_rows: Vec<Vec<KernelRow>> = (0..nprocs).map(|_| Vec::new()).collect();
    let mut kernel_summary: Vec<KernelRow> = Vec::new();
    let export_gpu_ns: i64 = acc.iter().map(|a| a.gpu_ns()).sum();
    let mut durs: Vec<i64> = Vec::new();
    let mut i = 0;
    while i < ops.ops.len() && ops.ops[i].name != NONE {
        let name = ops.ops[i].name;
        let mut j = i;
        while j < ops.ops.len() && ops.ops[j].name == name {
            j += 1;
        }
        let kn = &ops.kernel_names[name as usize];
        let row = |s: stats::Summary, scope: i64| KernelRow {
            name: kn.name.clone(),
            family: classifier.family(&kn.class).map(str::to_string),
            category: classifier.category_name(kn.class.category).to_string(),
            comm_op: kn.class.comm.map(CommOp::as_str),
            share: ratio(s.total_ns, scope),
            stats: s,
        };
        let mut k = i;
        while k < j {
            let p = ops.ops[k].proc;
            let mut m = k;
            durs.clear();
            while m < j && ops.ops[m].proc == p {
                durs.push(ops.ops[m].dur());
                m += 1;
            }
            per_proc_rows[p as usize]
                .push(row(stats::summarize(&mut durs), acc[p as usize].gpu_ns()));
            k = m;
        }
        durs.clear();
        durs.extend(ops.ops[i..j].iter().map(Op::dur));
        kernel_summary.push(row(stats::summarize(&mut durs), export_gpu_ns));
        i = j;
    }
    drop(durs);
    kernel_summary.sort_by(kernel_order);
    let kernel_summary_rest = cut_kernels(&mut kernel_summary, opts.top);
    let mut kernels_rest: Vec<Option<KernelRest>> = Vec::with_capacity(nprocs);
    for rows in &mut per_proc_rows {
        rows.sort_by(kernel_order);
        kernels_rest.push(cut_kernels(rows, opts.top));
    }
    let graph_rows = ops.graph_rows_with_nodes;
    let unmatched = ops.unmatched;
    let negative_ops = ops.negative_timestamps;
    let has_runtime = ops.has_runtime;
    let has_graph_table = ops.has_graph_table;
    drop(ops.ops);

    // NVTX tables.
    let cls_names = class_names(classifier);
    // The op class order is categories, memcpy, memset, graph; `cls_names` is the same.
    let domain_name = |proc: usize, domain: i64| -> String {
        if domain == 0 {
            return String::new();
        }
        proj.domains
            .get(&(ids::pid(ops.procs[proc]), domain))
            .cloned()
            .unwrap_or_default()
    };
    let mut nvtx_rows: Vec<Vec<RangeRow>> = (0..nprocs).map(|_| Vec::new()).collect();
    // (nsys name, shapes, style) -> (projected spans, range ns, GPU ops), over all processes.
    type ProjKey = (String, Option<String>, &'static str);
    let mut export_proj: HashMap<ProjKey, (Vec<i64>, i64, u64)> = HashMap::new();
    for agg in proj.aggs.iter_mut() {
        if agg.instances == 0 {
            continue; // folded into a family row
        }
        let n = proj.names.get(agg.name);
        let domain = domain_name(agg.proc as usize, agg.domain);
        let nsys_name = format!("{domain}:{}", n.name);
        if agg.gpu_ops > 0 {
            let e = export_proj
                .entry((nsys_name.clone(), n.shapes.clone(), agg.style.as_str()))
                .or_default();
            e.0.extend_from_slice(&agg.proj_ns);
            e.1 += agg.proj_range_ns;
            e.2 += agg.gpu_ops;
        }
        let proj_figures = proj_stats(&mut agg.proj_ns, agg.proj_range_ns, agg.gpu_ops);
        agg.proj_ns = Vec::new();
        nvtx_rows[agg.proc as usize].push(RangeRow {
            name: n.name.clone(),
            shapes: n.shapes.clone(),
            domain,
            nsys_name,
            style: agg.style.as_str(),
            instances: agg.instances,
            cpu_ns: agg.cpu_ns,
            inclusive_ns: agg.inclusive_ns,
            exclusive_ns: agg.exclusive_ns,
            inclusive_by_category: cls_names
                .iter()
                .zip(agg.inclusive_by_class.iter())
                .filter(|(_, t)| **t > 0)
                .map(|(c, &t)| ClassTime {
                    category: c.clone(),
                    time_ns: t,
                })
                .collect(),
            collective: agg.collective.map(CommOp::as_str),
            folded_names: (agg.folded_names > 0).then_some(agg.folded_names),
            proj: proj_figures,
        });
    }
    let mut nvtx_rest: Vec<Option<RangeRest>> = Vec::with_capacity(nprocs);
    for rows in &mut nvtx_rows {
        rows.sort_by(|a, b| {
            b.inclusive_ns
                .cmp(&a.inclusive_ns)
                .then(b.cpu_ns.cmp(&a.cpu_ns))
                .then(a.nsys_name.cmp(&b.nsys_name))
                .then(a.shapes.cmp(&b.shapes))
                .then(a.style.cmp(b.style))
        });
        nvtx_rest.push(match opts.top {
            Some(top) if rows.len() > top => {
                let rest = rows.split_off(top);
                Some(RangeRest {
                    rows: rest.len() as u64,
                    instances: rest.iter().map(|r| r.instances).sum(),
                    cpu_ns: rest.iter().map(|r| r.cpu_ns).sum(),
                    inclusive_ns: rest.iter().map(|r| r.inclusive_ns).sum(),
                    exclusive_ns: rest.iter().map(|r| r.exclusive_ns).sum(),
                    proj_total_ns: rest.iter().map(|r| r.proj.total_ns).sum(),
                })
            }
            _ => None,
        });
    }
    let mut nvtx_gpu_proj_sum: Vec<ProjRow> = export_proj
        .into_iter()
        .map(
            |((nsys_name, shapes, style), (mut spans, range_ns, gpu_ops))| ProjRow {
                nsys_name,
                shapes,
                style,
                proj: proj_stats(&mut spans, range_ns, gpu_ops),
            },
        )
        .collect();
    nvtx_gpu_proj_sum.sort_by(|a, b| {
        b.proj
            .total_ns
            .cmp(&a.proj.total_ns)
            .then(a.nsys_name.cmp(&b.nsys_name))
            .then(a.shapes.cmp(&b.shapes))
            .then(a.style.cmp(b.style))
    });
    let nvtx_gpu_proj_sum_rest = match opts.top {
        Some(top) if nvtx_gpu_proj_sum.len() > top => {
            let rest = nvtx_gpu_proj_sum.split_off(top);
            Some(ProjRest {
                rows: rest.len() as u64,
                instances: rest.iter().map(|r| r.proj.instances).sum(),
                total_ns: rest.iter().map(|r| r.proj.total_ns).sum(),
                range_ns: rest.iter().map(|r| r.proj.range_ns).sum(),
                gpu_ops: rest.iter().map(|r| r.proj.gpu_ops).sum(),
            })
        }
        _ => None,
    };

    // Processes, ordered by pid.
    let names: IntMap<i64, String> = meta
        .processes
        .iter()
        .filter_map(|p| p.name.clone().map(|n| (p.global_pid, n)))
        .collect();
    let mut cat_names: Vec<String> = classifier.categories.clone();
    cat_names.push("cuda_graph".into());
    let mut order: Vec<usize> = (0..nprocs).collect();
    order.sort_by_key(|&p| (ids::pid(ops.procs[p]), ops.procs[p]));
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
        let rows = |ns: &[i64; 8], count: &[u64; 8]| -> Vec<CommRow> {
            CommOp::ALL
                .iter()
                .filter(|o| count[o.index()] > 0)
                .map(|o| CommRow {
                    op: o.as_str(),
                    time_ns: ns[o.index()],
                    count: count[o.index()],
                })
                .collect()
        };
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
                compute,
                communication,
                ranges,
            });
        }
        processes.push(Process {
            global_pid: gpid,
            pid,
            name,
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
                by_op: rows(&a.comm_ns, &a.comm_count),
                from_sendrecv: rows(&a.from_sendrecv_ns, &a.from_sendrecv_count),
            },
            overlap: std::mem::take(&mut overlaps[p]),
            kernels: std::mem::take(&mut per_proc_rows[p]),
            kernels_rest: kernels_rest[p].take(),
            nvtx: std::mem::take(&mut nvtx_rows[p]),
            nvtx_rest: nvtx_rest[p].take(),
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
        cuda_graphs: graphs_meaning(graph_mode.as_deref(), totals.graph_count, has_graph_table),
        cuda_graph_trace: graph_mode,
    };

    let notes = notes(NoteInputs {
        has_runtime,
        has_nvtx: db.has(sqlite::NVTX_EVENTS),
        proj,
        unmatched,
        negative: negative_ops + proj.negative_timestamps,
        graph_rows,
    });
    let timeline = opts.timeline_buckets.map(|n| Timeline {
        start_ns: if span.0 <= span.1 { span.0 } else { 0 },
        end_ns: if span.0 <= span.1 { span.1 } else { 0 },
        buckets: n,
        processes: timeline_procs,
    });
    Ok(Report {
        schema: SCHEMA,
        file: db.path.display().to_string(),
        export: ExportInfo {
            schema_version: meta.export_schema_version.clone(),
            nsys_version: meta.product_version.clone(),
            metadata_table: meta.metadata_table,
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
        kernel_summary,
        kernel_summary_rest,
        nvtx_gpu_proj_sum,
        nvtx_gpu_proj_sum_rest,
        notes,
        timeline,
    })
}

/// What the CUDA graph trace mode means for the figures.
fn graphs_meaning(mode: Option<&str>, graph_count: u64, has_graph_table: bool) -> String {
    match (mode, graph_count) {
        (Some("graph"), n) if n > 0 => format!(
            "--cuda-graph-trace=graph: each of the {n} CUDA graph launches is one GPU interval (category cuda_graph), counted as compute and projected onto the NVTX range that launched it; the kernels inside graphs are not listed (profile with --cuda-graph-trace=node to see them)"
        ),
        (Some("graph"), _) => "--cuda-graph-trace=graph: no CUDA graph was launched".into(),
        (Some("node"), _) => "--cuda-graph-trace=node: kernels inside CUDA graphs are traced one by one and counted like any kernel".into(),
        (Some(m), _) => format!("--cuda-graph-trace={m}"),
        (None, n) if n > 0 => format!(
            "{n} CUDA graph launches traced whole (category cuda_graph, counted as compute); the export does not record the trace mode"
        ),
        (None, _) if has_graph_table => "CUDA graph rows are all shadowed by traced nodes".into(),
        (None, _) => "no CUDA graph launches in the export".into(),
    }
}

struct NoteInputs<'a> {
    has_runtime: bool,
    has_nvtx: bool,
    proj: &'a Projection,
    unmatched: u64,
    negative: u64,
    graph_rows: u64,
}

fn notes(n: NoteInputs) -> Vec<Note> {
    let mut notes = Vec::new();
    let proj = n.proj;
    if !n.has_runtime {
        notes.push(Note {
            kind: "no_runtime_table",
            count: 0,
            message: "no CUPTI_ACTIVITY_KIND_RUNTIME table: GPU work cannot be tied to NVTX ranges"
                .into(),
        });
    }
    if !n.has_nvtx {
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
    if n.has_runtime && n.unmatched > 0 {
        notes.push(Note {
            kind: "unmatched_gpu_ops",
            count: n.unmatched,
            message: format!(
                "{} GPU operation(s) have no CUDA runtime call with the same process and correlation id; they count toward no NVTX range",
                n.unmatched
            ),
        });
    }
    if n.negative > 0 {
        notes.push(Note {
            kind: "negative_timestamps",
            count: n.negative,
            message: format!(
                "{} event(s) have negative timestamps (recorded before the capture range started); they are kept",
                n.negative
            ),
        });
    }
    if n.graph_rows > 0 {
        notes.push(Note {
            kind: "graph_rows_with_nodes",
            count: n.graph_rows,
            message: format!(
                "{} CUDA graph launch row(s) also have their nodes traced as kernels; the nodes are counted, the graph rows are not",
                n.graph_rows
            ),
        });
    }
    if proj.names.stripped > 0 {
        notes.push(Note {
            kind: "grouped_autograd_names",
            count: proj.names.stripped,
            message: format!(
                "{} NVTX range name(s) carried PyTorch's per-op suffixes (seq, op_id, sizes, input_op_ids); they are grouped by op name (--by-shape keeps the input shapes)",
                proj.names.stripped
            ),
        });
    }
    if proj.folded_families > 0 {
        notes.push(Note {
            kind: "folded_counter_names",
            count: proj.folded_families,
            message: format!(
                "{} family(ies) of range names that differ only in numbers (e.g. `step N`) were folded into one row each",
                proj.folded_families
            ),
        });
    }
    if proj.reordered {
        notes.push(Note {
            kind: "nvtx_reordered",
            count: 0,
            message: "NVTX_EVENTS is not in start order per thread; it was read sorted by thread and start (slower)".into(),
        });
    }
    notes
}
