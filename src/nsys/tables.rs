//! The report's tables, cut to `--top` rows with the rest summed: kernel summaries (per process
//! and export-wide, nsys's `cuda_gpu_kern_sum`) from the ops sorted by kernel name, and NVTX range
//! tables (per process, and export-wide nsys's `nvtx_gpu_proj_sum`) from the range aggregates.

use std::collections::HashMap;

use crate::nsys::classify::{Classifier, CommOp};
use crate::nsys::ids;
use crate::nsys::nvtx::Projection;
use crate::nsys::ops::{NONE, Op, Ops};
use crate::nsys::report::{
    ClassTime, KernelRest, KernelRow, ProjRest, ProjRow, ProjStats, RangeRest, RangeRow,
};
use crate::nsys::stats;

pub fn ratio(a: i64, b: i64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
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

pub struct KernelTables {
    pub per_process: Vec<Vec<KernelRow>>,
    pub per_process_rest: Vec<Option<KernelRest>>,
    pub summary: Vec<KernelRow>,
    pub summary_rest: Option<KernelRest>,
}

/// Kernel summaries per process and over the whole export, with exact medians: the ops are
/// sorted by (kernel name, process) and each group's durations summarised in turn.
/// `gpu_ns[p]` is process p's GPU time (the share's denominator).
pub fn kernels(
    ops: &mut Ops,
    gpu_ns: &[i64],
    classifier: &Classifier,
    top: Option<usize>,
) -> KernelTables {
    let nprocs = gpu_ns.len();
    ops.ops.sort_unstable_by_key(|o| (o.name, o.proc));
    let mut per_process: Vec<Vec<KernelRow>> = (0..nprocs).map(|_| Vec::new()).collect();
    let mut summary: Vec<KernelRow> = Vec::new();
    let export_gpu_ns: i64 = gpu_ns.iter().sum();
    let mut durs: Vec<i64> = Vec::new();
    let v = &ops.ops;
    let mut i = 0;
    while i < v.len() && v[i].name != NONE {
        let name = v[i].name;
        let mut j = i;
        while j < v.len() && v[j].name == name {
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
            let p = v[k].proc as usize;
            let mut m = k;
            durs.clear();
            while m < j && v[m].proc as usize == p {
                durs.push(v[m].dur());
                m += 1;
            }
            per_process[p].push(row(stats::summarize(&mut durs), gpu_ns[p]));
            k = m;
        }
        durs.clear();
        durs.extend(v[i..j].iter().map(Op::dur));
        summary.push(row(stats::summarize(&mut durs), export_gpu_ns));
        i = j;
    }
    summary.sort_by(kernel_order);
    let summary_rest = cut_kernels(&mut summary, top);
    let per_process_rest = per_process
        .iter_mut()
        .map(|rows| {
            rows.sort_by(kernel_order);
            cut_kernels(rows, top)
        })
        .collect();
    KernelTables {
        per_process,
        per_process_rest,
        summary,
        summary_rest,
    }
}

pub struct RangeTables {
    pub per_process: Vec<Vec<RangeRow>>,
    pub per_process_rest: Vec<Option<RangeRest>>,
    pub proj_sum: Vec<ProjRow>,
    pub proj_sum_rest: Option<ProjRest>,
}

/// Class names for `inclusive_by_category`, in op-class order: kernel categories, then memcpy,
/// memset, cuda_graph (see `ops::Classes`).
fn class_names(classifier: &Classifier) -> Vec<String> {
    let mut v = classifier.categories.clone();
    v.push("memcpy".into());
    v.push("memset".into());
    v.push("cuda_graph".into());
    v
}

/// NVTX range tables per process (by inclusive GPU time) and over the whole export (by total
/// projected time, merged on `domain:name`, shapes and style). `procs[p]` is process p's globalPid.
/// Ranges whose name is `not_work` (a trainer's setup range, open for the whole capture) are left
/// out of the per-process tables; the export-wide table is nsys's and keeps them.
pub fn ranges(
    proj: &mut Projection,
    procs: &[i64],
    classifier: &Classifier,
    top: Option<usize>,
    not_work: impl Fn(&str) -> bool,
) -> RangeTables {
    let cls_names = class_names(classifier);
    let domain_name = |proc: usize, domain: i64| -> String {
        if domain == 0 {
            return String::new();
        }
        proj.domains
            .get(&(ids::pid(procs[proc]), domain))
            .cloned()
            .unwrap_or_default()
    };
    let mut per_process: Vec<Vec<RangeRow>> = (0..procs.len()).map(|_| Vec::new()).collect();
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
        if not_work(&n.name) {
            continue;
        }
        per_process[agg.proc as usize].push(RangeRow {
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
    let per_process_rest = per_process
        .iter_mut()
        .map(|rows| {
            rows.sort_by(|a, b| {
                b.inclusive_ns
                    .cmp(&a.inclusive_ns)
                    .then(b.cpu_ns.cmp(&a.cpu_ns))
                    .then(a.nsys_name.cmp(&b.nsys_name))
                    .then(a.shapes.cmp(&b.shapes))
                    .then(a.style.cmp(b.style))
            });
            match top {
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
            }
        })
        .collect();
    let mut proj_sum: Vec<ProjRow> = export_proj
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
    proj_sum.sort_by(|a, b| {
        b.proj
            .total_ns
            .cmp(&a.proj.total_ns)
            .then(a.nsys_name.cmp(&b.nsys_name))
            .then(a.shapes.cmp(&b.shapes))
            .then(a.style.cmp(b.style))
    });
    let proj_sum_rest = match top {
        Some(top) if proj_sum.len() > top => {
            let rest = proj_sum.split_off(top);
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
    RangeTables {
        per_process,
        per_process_rest,
        proj_sum,
        proj_sum_rest,
    }
}
