//! NVTX ranges projected onto the GPU work launched inside them.
//!
//! The rules follow `nsys stats`' `nvtx_gpu_proj_trace` / `nvtx_gpu_proj_sum` reports:
//! - a GPU operation (kernel, memcpy, memset) is joined to the CUDA runtime call that launched
//!   it on `(globalPid, correlationId)` — correlation ids restart in every process;
//! - it belongs to every range on the launching thread (`globalTid` of the runtime call) whose
//!   CPU interval contains the whole runtime call;
//! - only ranges that start and end on the same thread are projected; ranges ended on another
//!   thread are counted in a note and left out, as nsys does;
//! - a range that never ends is closed at the last NVTX timestamp of the export, as nsys does;
//! - a range's name is its `textId` string or else its `text`; nsys prints it as `domain:text`
//!   (the default domain has an empty name).
//!
//! On top of nsys's projected span (first operation start to last operation end) this module
//! adds GPU time: inclusive (every operation launched while the range was open, counted once per
//! range name even when the name nests inside itself) and exclusive (only operations whose
//! innermost open range is this one).

use std::collections::HashMap;

use crate::nsys::hash::IntMap;
use crate::nsys::ids;
use crate::nsys::sqlite::{
    Export, NVTX_DOMAIN_CREATE, NVTX_PUSHPOP_RANGE, NVTX_STARTEND_RANGE, NVTXT_PUSHPOP_RANGE,
    NVTXT_STARTEND_RANGE,
};

/// Number of op classes tracked per range: the five kernel categories, memcpy, memset.
pub const OP_CLASSES: usize = 7;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RangeKey {
    pub global_pid: i64,
    pub domain: String,
    pub text: String,
    pub style: &'static str,
}

#[derive(Debug, Clone, Default)]
pub struct RangeAgg {
    /// Every same-thread instance of the range in this process.
    pub instances: u64,
    /// CPU time of all those instances.
    pub cpu_ns: i64,
    /// Projected span of each instance that launched GPU work (nsys "Proj" figures).
    pub proj_ns: Vec<i64>,
    /// CPU time of the instances that launched GPU work (nsys "Total Range Time").
    pub proj_range_ns: i64,
    /// Distinct launches (correlation ids) inside the instances (nsys "Total GPU Ops").
    pub gpu_ops: u64,
    pub inclusive_ns: i64,
    pub exclusive_ns: i64,
    pub inclusive_by_class: [i64; OP_CLASSES],
}

#[derive(Debug, Default)]
pub struct Projection {
    pub ranges: Vec<(RangeKey, RangeAgg)>,
    /// globalPid -> GPU op time launched outside every range (or whose launch is unknown).
    pub unattributed_ns: IntMap<i64, i64>,
    pub cross_thread_ranges: u64,
    pub cross_thread_names: Vec<String>,
    pub unclosed_ranges: u64,
    /// GPU operations with no matching runtime call.
    pub unmatched_ops: u64,
    pub negative_timestamps: u64,
}

/// Runtime-call lookup by `(globalPid, correlationId)`; dense per process where ids allow.
enum CorrTable {
    Dense { min: i64, idx: Vec<u32> },
    Sparse(IntMap<i64, u32>),
}

struct CorrIndex {
    tables: IntMap<i64, CorrTable>,
}

impl CorrIndex {
    fn build(export: &Export) -> CorrIndex {
        let mut bounds: IntMap<i64, (i64, i64, usize)> = IntMap::default();
        for rt in &export.runtime {
            let gpid = ids::global_pid(rt.global_tid);
            let b = bounds
                .entry(gpid)
                .or_insert((rt.correlation_id, rt.correlation_id, 0));
            b.0 = b.0.min(rt.correlation_id);
            b.1 = b.1.max(rt.correlation_id);
            b.2 += 1;
        }
        let mut tables: IntMap<i64, CorrTable> = IntMap::default();
        for (&gpid, &(min, max, n)) in &bounds {
            let span = (max - min) as u128 + 1;
            let t = if span <= (4 * n as u128 + 1024) {
                CorrTable::Dense {
                    min,
                    idx: vec![u32::MAX; span as usize],
                }
            } else {
                CorrTable::Sparse(IntMap::default())
            };
            tables.insert(gpid, t);
        }
        for (i, rt) in export.runtime.iter().enumerate() {
            let gpid = ids::global_pid(rt.global_tid);
            match tables.get_mut(&gpid) {
                Some(CorrTable::Dense { min, idx }) => {
                    idx[(rt.correlation_id - *min) as usize] = i as u32
                }
                Some(CorrTable::Sparse(m)) => {
                    m.insert(rt.correlation_id, i as u32);
                }
                None => {}
            }
        }
        CorrIndex { tables }
    }

    fn get(&self, gpid: i64, corr: i64) -> Option<usize> {
        match self.tables.get(&gpid)? {
            CorrTable::Dense { min, idx } => {
                let off = corr.checked_sub(*min)?;
                if off < 0 {
                    return None;
                }
                let v = *idx.get(off as usize)?;
                (v != u32::MAX).then_some(v as usize)
            }
            CorrTable::Sparse(m) => m.get(&corr).map(|&v| v as usize),
        }
    }
}

struct Instance {
    start: i64,
    end: i64,
    key: u32,
    first_op: i64,
    last_op: i64,
    ops: u64,
    last_corr: i64,
}

/// Project every same-thread NVTX range of `export` onto the GPU operations it launched.
/// `op_class[i]` is the class (0..OP_CLASSES) of `export.ops[i]`.
pub fn project(export: &Export, op_class: &[u8]) -> Projection {
    let mut out = Projection::default();

    // Domain names per (pid, domainId).
    let mut domains: HashMap<(i64, i64), (i64, u32)> = HashMap::new();
    let mut max_ts = i64::MIN;
    for ev in &export.nvtx {
        if ev.event_type == NVTX_DOMAIN_CREATE {
            let k = (ids::pid(ev.global_tid), ev.domain_id);
            let e = domains.entry(k).or_insert((ev.start, ev.text));
            if ev.start < e.0 {
                *e = (ev.start, ev.text);
            }
        } else {
            max_ts = max_ts.max(ev.start).max(ev.end.unwrap_or(i64::MIN));
        }
    }

    // Range instances grouped by thread.
    let mut key_ids: HashMap<RangeKey, u32> = HashMap::new();
    let mut aggs: Vec<(RangeKey, RangeAgg)> = Vec::new();
    let mut by_thread: IntMap<i64, Vec<Instance>> = IntMap::default();
    for ev in &export.nvtx {
        let style = match ev.event_type {
            NVTX_PUSHPOP_RANGE | NVTXT_PUSHPOP_RANGE => "PushPop",
            NVTX_STARTEND_RANGE | NVTXT_STARTEND_RANGE => "StartEnd",
            _ => continue,
        };
        if ev.start < 0 {
            out.negative_timestamps += 1;
        }
        let text = &export.nvtx_texts[ev.text as usize];
        if ev.end_global_tid.is_some_and(|t| t != ev.global_tid) {
            out.cross_thread_ranges += 1;
            if out.cross_thread_names.len() < 5 && !out.cross_thread_names.contains(text) {
                out.cross_thread_names.push(text.clone());
            }
            continue;
        }
        let end = match ev.end {
            Some(e) => e,
            None => {
                out.unclosed_ranges += 1;
                max_ts
            }
        };
        let domain = if ev.domain_id == 0 {
            String::new()
        } else {
            domains
                .get(&(ids::pid(ev.global_tid), ev.domain_id))
                .map(|&(_, t)| export.nvtx_texts[t as usize].clone())
                .unwrap_or_default()
        };
        let key = RangeKey {
            global_pid: ids::global_pid(ev.global_tid),
            domain,
            text: text.clone(),
            style,
        };
        let k = *key_ids.entry(key.clone()).or_insert_with(|| {
            aggs.push((key, RangeAgg::default()));
            (aggs.len() - 1) as u32
        });
        let agg = &mut aggs[k as usize].1;
        agg.instances += 1;
        agg.cpu_ns += end - ev.start;
        by_thread.entry(ev.global_tid).or_default().push(Instance {
            start: ev.start,
            end,
            key: k,
            first_op: i64::MAX,
            last_op: i64::MIN,
            ops: 0,
            last_corr: i64::MIN,
        });
    }

    // Launches: (globalTid, runtime start, runtime end, correlation id, op index).
    let index = CorrIndex::build(export);
    let mut launches: Vec<(i64, i64, i64, i64, u32)> = Vec::new();
    for (i, op) in export.ops.iter().enumerate() {
        if op.start < 0 {
            out.negative_timestamps += 1;
        }
        let dur = op.end - op.start;
        match index.get(op.global_pid, op.correlation_id) {
            Some(r) => {
                let rt = &export.runtime[r];
                if by_thread.contains_key(&rt.global_tid) {
                    launches.push((rt.global_tid, rt.start, rt.end, op.correlation_id, i as u32));
                } else {
                    *out.unattributed_ns.entry(op.global_pid).or_default() += dur;
                }
            }
            None => {
                out.unmatched_ops += 1;
                *out.unattributed_ns.entry(op.global_pid).or_default() += dur;
            }
        }
    }
    launches.sort_unstable();

    let mut seen_keys: Vec<u32> = Vec::with_capacity(16);
    let mut active: Vec<usize> = Vec::with_capacity(32);
    let mut li = 0;
    while li < launches.len() {
        let gtid = launches[li].0;
        let mut lj = li;
        while lj < launches.len() && launches[lj].0 == gtid {
            lj += 1;
        }
        let ranges = by_thread.get_mut(&gtid).expect("thread has ranges");
        // Outer ranges first when two start together.
        ranges.sort_unstable_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
        active.clear();
        let mut ri = 0;
        for &(_, rstart, rend, corr, opi) in &launches[li..lj] {
            while ri < ranges.len() && ranges[ri].start <= rstart {
                active.push(ri);
                ri += 1;
            }
            active.retain(|&r| ranges[r].end >= rstart);
            let op = &export.ops[opi as usize];
            let dur = op.end - op.start;
            let class = op_class[opi as usize] as usize;
            seen_keys.clear();
            let mut innermost: Option<u32> = None;
            for &r in active.iter() {
                let inst = &mut ranges[r];
                if inst.end < rend {
                    continue;
                }
                inst.first_op = inst.first_op.min(op.start);
                inst.last_op = inst.last_op.max(op.end);
                if inst.last_corr != corr {
                    inst.ops += 1;
                    inst.last_corr = corr;
                }
                innermost = Some(inst.key);
                if !seen_keys.contains(&inst.key) {
                    seen_keys.push(inst.key);
                    let agg = &mut aggs[inst.key as usize].1;
                    agg.inclusive_ns += dur;
                    agg.inclusive_by_class[class] += dur;
                }
            }
            match innermost {
                Some(k) => aggs[k as usize].1.exclusive_ns += dur,
                None => *out.unattributed_ns.entry(op.global_pid).or_default() += dur,
            }
        }
        li = lj;
    }

    for ranges in by_thread.values() {
        for inst in ranges {
            if inst.ops > 0 {
                let agg = &mut aggs[inst.key as usize].1;
                agg.proj_ns.push(inst.last_op - inst.first_op);
                agg.proj_range_ns += inst.end - inst.start;
                agg.gpu_ops += inst.ops;
            }
        }
    }
    out.ranges = aggs;
    out
}
