//! NVTX ranges projected onto the GPU work launched inside them, in one streaming pass.
//!
//! The rules follow `nsys stats`' `nvtx_gpu_proj_trace` / `nvtx_gpu_proj_sum` reports:
//! - a GPU operation belongs to every range on its launching thread (the `globalTid` of the CUDA
//!   API call it was joined to, see `ops`) whose CPU interval contains the whole call;
//! - only ranges that start and end on the same thread are projected; ranges ended on another
//!   thread are counted in a note and left out, as nsys does;
//! - a range that never ends is closed at the last NVTX range timestamp of the export, as nsys
//!   does;
//! - a range's name is its `textId` string or else its `text`; nsys prints it as `domain:text`.
//!
//! On top of nsys's projected span this adds GPU time: inclusive (every op launched while the
//! range was open, counted once per range name even when the name nests inside itself) and
//! exclusive (ops whose innermost open range, the latest started, is this one).
//!
//! Memory: ranges are never held. Rows are grouped while reading on integer keys (process,
//! domain id, grouped-name id, style); names are grouped as `names` says (PyTorch's `seq`,
//! `op_id`, `sizes`, `input_op_ids` suffixes taken off). The ops are sorted by (launching thread,
//! launch time), so each range finds its launches by binary search in its thread's slice. This
//! needs each thread's ranges in start order, which is how nsys writes `NVTX_EVENTS` (sorted by
//! start); an export that is not is read again with `ORDER BY globalTid, start`. Per op, the
//! innermost range is the last one processed that contains it; "once per name" is kept with a
//! per-(thread, name) high-water mark of range ends.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use rusqlite::types::ValueRef;

use crate::nsys::classify::{Classifier, CommOp};
use crate::nsys::error::Result;
use crate::nsys::hash::IntMap;
use crate::nsys::ids;
use crate::nsys::names::{self, Name, Names};
use crate::nsys::ops::{NONE, Op, Ops};
use crate::nsys::sqlite::{Db, NVTX_EVENTS, col_or_null, int};

/// NVTX `eventType` values (the export's `ENUM_NSYS_EVENT_TYPE`).
pub const NVTX_PUSHPOP_RANGE: i64 = 59;
pub const NVTX_STARTEND_RANGE: i64 = 60;
pub const NVTXT_PUSHPOP_RANGE: i64 = 70;
pub const NVTXT_STARTEND_RANGE: i64 = 71;
pub const NVTX_DOMAIN_CREATE: i64 = 75;

/// A family of names that differ in one number, with more distinct names than this in one
/// process averaging under two instances per name, becomes one row (`step N`).
pub const FOLD_MIN_NAMES: usize = 16;
/// A counter family reaching this many distinct names in one process is folded while reading,
/// so memory stays bounded whatever the names.
pub const FOLD_HARD_LIMIT: u32 = 4096;
/// Ranges kept per process for the HTML timeline (the longest at depth 0..=2).
pub const TIMELINE_RANGES: usize = 3000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Style {
    PushPop,
    StartEnd,
}

impl Style {
    pub fn as_str(self) -> &'static str {
        match self {
            Style::PushPop => "PushPop",
            Style::StartEnd => "StartEnd",
        }
    }
}

/// One range name (grouped) of one process: everything summed over its instances.
#[derive(Debug, Clone)]
pub struct Agg {
    pub proc: u16,
    pub domain: i64,
    pub name: u32,
    pub style: Style,
    pub instances: u64,
    pub cpu_ns: i64,
    /// Projected span of each instance that launched GPU work (nsys "Proj" figures).
    pub proj_ns: Vec<i64>,
    /// CPU time of the instances that launched GPU work (nsys "Total Range Time").
    pub proj_range_ns: i64,
    /// Distinct launches inside those instances (nsys "Total GPU Ops").
    pub gpu_ops: u64,
    pub inclusive_ns: i64,
    pub exclusive_ns: i64,
    pub inclusive_by_class: Vec<i64>,
    /// The collective the name names (see `Classifier::collective_of_range`).
    pub collective: Option<CommOp>,
    /// Distinct names folded into this row (counter families), 0 for a plain row.
    pub folded_names: u32,
}

/// A range instance kept for the HTML timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimelineRange {
    pub dur: i64,
    pub start: i64,
    pub end: i64,
    pub depth: u8,
    pub agg: u32,
}

#[derive(Debug, Default)]
pub struct Projection {
    pub aggs: Vec<Agg>,
    pub names: Names,
    /// (pid, domainId) -> domain name.
    pub domains: HashMap<(i64, i64), String>,
    pub cross_thread_ranges: u64,
    pub cross_thread_names: Vec<String>,
    pub unclosed_ranges: u64,
    pub negative_timestamps: u64,
    /// Per process index: the longest ranges at depth 0..=2, for the HTML timeline.
    pub timeline: Vec<Vec<TimelineRange>>,
    /// Counter families folded into one row.
    pub folded_families: u64,
    /// Whether the table had to be re-read in thread order.
    pub reordered: bool,
}

pub struct Options {
    pub grouping: names::Grouping,
    pub timeline: bool,
}

/// Another reader of every NVTX event (the per-rank figures' scan), fed each row (of any event
/// type) as this pass reads the table, so the table is read once for both.
pub trait RowObserver {
    fn row(
        &mut self,
        db: &Db,
        start: i64,
        end: Option<i64>,
        global_tid: i64,
        text_id: Option<i64>,
        text: ValueRef<'_>,
    ) -> Result<()>;
    /// The projection reads the table again, in another order: what was fed is void.
    fn abandon(&mut self);
}

struct ThreadState {
    /// The thread's ops in `ops` (sorted by launch time), when it launched any.
    slice: Option<(usize, usize)>,
    last_start: i64,
    /// Per aggregate: the latest end of a processed range (for "once per name").
    cover: IntMap<u32, i64>,
    /// Ends of the ranges open at the last start (for the timeline depth).
    open: Vec<i64>,
}

impl Default for ThreadState {
    fn default() -> Self {
        ThreadState {
            slice: None,
            last_start: i64::MIN,
            cover: IntMap::default(),
            open: Vec::new(),
        }
    }
}

struct OutOfOrder;

struct Pass<'a> {
    db: &'a Db,
    classifier: &'a Classifier,
    classes: usize,
    timeline: bool,
    proj: Projection,
    agg_index: IntMap<(u16, i64, u32, u8), u32>,
    text_ids: IntMap<i64, u32>,
    /// Per grouped-name id: its counter family's name id (NONE: no digits).
    family_of: Vec<u32>,
    /// (proc, family name id) -> distinct names seen.
    family_names: IntMap<(u16, u32), u32>,
    threads: IntMap<i64, ThreadState>,
    max_ts: Option<i64>,
    heaps: Vec<BinaryHeap<Reverse<TimelineRange>>>,
}

impl Pass<'_> {
    fn max_ts(&mut self) -> Result<i64> {
        if let Some(t) = self.max_ts {
            return Ok(t);
        }
        let t: Option<i64> = self.db.conn.query_row(
            &format!(
                "SELECT max(max(start), coalesce(max(end), max(start))) FROM {NVTX_EVENTS} WHERE eventType IN ({NVTX_PUSHPOP_RANGE}, {NVTX_STARTEND_RANGE}, {NVTXT_PUSHPOP_RANGE}, {NVTXT_STARTEND_RANGE})"
            ),
            [],
            |r| r.get(0),
        )?;
        let t = t.unwrap_or(0);
        self.max_ts = Some(t);
        Ok(t)
    }

    /// A range's grouped name: a registered string (textId) wins over inline text, as in nsys's
    /// reports.
    fn name(&mut self, text_id: Option<i64>, text: ValueRef<'_>) -> Result<u32> {
        Ok(match text_id {
            Some(t) => match self.text_ids.get(&t) {
                Some(&n) => n,
                None => {
                    let s = self.db.string(t)?.unwrap_or_default();
                    let n = self.proj.names.intern(&s);
                    self.text_ids.insert(t, n);
                    n
                }
            },
            None => match text {
                ValueRef::Text(b) => match std::str::from_utf8(b) {
                    Ok(s) => self.proj.names.intern(s),
                    Err(_) => self.proj.names.intern(&String::from_utf8_lossy(b)),
                },
                _ => self.proj.names.intern(""),
            },
        })
    }

    fn family(&mut self, name: u32) -> u32 {
        while self.family_of.len() <= name as usize {
            let id = self.family_of.len() as u32;
            let n = self.proj.names.get(id).clone();
            let fam = match names::family(&n.name) {
                Some(f) => self.proj.names.intern_name(&Name {
                    name: f,
                    shapes: n.shapes,
                }),
                None => NONE,
            };
            self.family_of.push(fam);
        }
        self.family_of[name as usize]
    }

    fn new_agg(&mut self, proc: u16, domain: i64, name: u32, style: Style) -> u32 {
        let collective = self
            .classifier
            .collective_of_range(&self.proj.names.get(name).name);
        self.proj.aggs.push(Agg {
            proc,
            domain,
            name,
            style,
            instances: 0,
            cpu_ns: 0,
            proj_ns: Vec::new(),
            proj_range_ns: 0,
            gpu_ops: 0,
            inclusive_ns: 0,
            exclusive_ns: 0,
            inclusive_by_class: vec![0; self.classes],
            collective,
            folded_names: 0,
        });
        (self.proj.aggs.len() - 1) as u32
    }

    fn agg(&mut self, proc: u16, domain: i64, name: u32, style: Style) -> u32 {
        let key = (proc, domain, name, style as u8);
        if let Some(&a) = self.agg_index.get(&key) {
            return a;
        }
        let fam = self.family(name);
        let a = if fam != NONE {
            let seen = self.family_names.entry((proc, fam)).or_insert(0);
            *seen += 1;
            if *seen > FOLD_HARD_LIMIT {
                // Folded while reading: this name goes straight to the family's row.
                let fkey = (proc, domain, fam, style as u8);
                let f = match self.agg_index.get(&fkey) {
                    Some(&f) => f,
                    None => {
                        let f = self.new_agg(proc, domain, fam, style);
                        self.agg_index.insert(fkey, f);
                        f
                    }
                };
                self.proj.aggs[f as usize].folded_names += 1;
                f
            } else {
                self.new_agg(proc, domain, name, style)
            }
        } else {
            self.new_agg(proc, domain, name, style)
        };
        self.agg_index.insert(key, a);
        a
    }
}

fn style_of(event_type: i64) -> Option<Style> {
    match event_type {
        NVTX_PUSHPOP_RANGE | NVTXT_PUSHPOP_RANGE => Some(Style::PushPop),
        NVTX_STARTEND_RANGE | NVTXT_STARTEND_RANGE => Some(Style::StartEnd),
        _ => None,
    }
}

/// Project every same-thread NVTX range onto the ops. `ops.ops` must hold each launching
/// thread's ops together, sorted by (launch_start, corr) (as sorting by (proc, thread,
/// launch_start, corr) does); `procs`/`proc_index` get the processes that only have NVTX.
pub fn project(
    db: &Db,
    ops: &mut Ops,
    proc_index: &mut IntMap<i64, u16>,
    classifier: &Classifier,
    opts: &Options,
    mut observer: Option<&mut (dyn RowObserver + '_)>,
) -> Result<Projection> {
    if !db.has(NVTX_EVENTS) {
        return Ok(Projection::default());
    }
    match pass(
        db,
        ops,
        proc_index,
        classifier,
        opts,
        false,
        observer.as_deref_mut(),
    )? {
        Ok(p) => Ok(p),
        Err(OutOfOrder) => {
            if let Some(o) = observer {
                o.abandon();
            }
            for o in ops.ops.iter_mut() {
                o.innermost = NONE;
                o.set_coll(0);
            }
            match pass(db, ops, proc_index, classifier, opts, true, None)? {
                Ok(mut p) => {
                    p.reordered = true;
                    Ok(p)
                }
                Err(OutOfOrder) => unreachable!("rows are read in thread and start order"),
            }
        }
    }
}

fn pass(
    db: &Db,
    ops: &mut Ops,
    proc_index: &mut IntMap<i64, u16>,
    classifier: &Classifier,
    opts: &Options,
    ordered: bool,
    mut observer: Option<&mut (dyn RowObserver + '_)>,
) -> Result<std::result::Result<Projection, OutOfOrder>> {
    let cols = db.columns(NVTX_EVENTS)?.unwrap_or_default();
    db.require(NVTX_EVENTS, &cols, &["start", "end", "eventType"])?;
    let mut p = Pass {
        db,
        classifier,
        classes: ops.classes.count(),
        timeline: opts.timeline,
        proj: Projection {
            names: Names::new(opts.grouping),
            ..Default::default()
        },
        agg_index: IntMap::default(),
        text_ids: IntMap::default(),
        family_of: Vec::new(),
        family_names: IntMap::default(),
        threads: IntMap::default(),
        max_ts: None,
        heaps: Vec::new(),
    };
    // Each launching thread's slice of the ops.
    let mut i = 0;
    while i < ops.ops.len() {
        let t = ops.ops[i].thread;
        let mut j = i + 1;
        while j < ops.ops.len() && ops.ops[j].thread == t {
            j += 1;
        }
        if t != NONE {
            p.threads.entry(ops.threads[t as usize]).or_default().slice = Some((i, j));
        }
        i = j;
    }

    // An observer reads every event type; the projection only ranges and domain names.
    let types = if observer.is_some() {
        String::new()
    } else {
        format!(
            " WHERE eventType IN ({NVTX_PUSHPOP_RANGE}, {NVTX_STARTEND_RANGE}, {NVTXT_PUSHPOP_RANGE}, {NVTXT_STARTEND_RANGE}, {NVTX_DOMAIN_CREATE})"
        )
    };
    let sql = format!(
        "SELECT start, end, eventType, {}, {}, {}, {}, {} FROM {NVTX_EVENTS}{types}{}",
        col_or_null(&cols, "globalTid"),
        col_or_null(&cols, "endGlobalTid"),
        col_or_null(&cols, "textId"),
        col_or_null(&cols, "text"),
        col_or_null(&cols, "domainId"),
        if ordered {
            " ORDER BY globalTid, start, rowid"
        } else {
            ""
        }
    );
    let mut stmt = db.conn.prepare(&sql)?;
    let mut rows = stmt.raw_query();
    let (mut last_gpid, mut last_proc) = (i64::MIN, 0u16);
    let ops_v: &mut [Op] = &mut ops.ops;
    while let Some(row) = rows.next()? {
        let Some(start) = int(row.get_ref(0)?) else {
            continue;
        };
        let event_type = int(row.get_ref(2)?).unwrap_or(0);
        let gtid = int(row.get_ref(3)?).unwrap_or(0);
        let domain = int(row.get_ref(7)?).unwrap_or(0);
        let text_id = int(row.get_ref(5)?);
        if let Some(o) = observer.as_deref_mut() {
            o.row(
                db,
                start,
                int(row.get_ref(1)?),
                gtid,
                text_id,
                row.get_ref(6)?,
            )?;
            if !matches!(
                event_type,
                NVTX_PUSHPOP_RANGE
                    | NVTX_STARTEND_RANGE
                    | NVTXT_PUSHPOP_RANGE
                    | NVTXT_STARTEND_RANGE
                    | NVTX_DOMAIN_CREATE
            ) {
                continue;
            }
        }
        if event_type == NVTX_DOMAIN_CREATE {
            let name = match text_id {
                Some(t) => db.string(t)?,
                None => crate::nsys::sqlite::text(row.get_ref(6)?),
            };
            if let Some(name) = name {
                p.proj
                    .domains
                    .entry((ids::pid(gtid), domain))
                    .or_insert(name);
            }
            continue;
        }
        let Some(style) = style_of(event_type) else {
            continue;
        };
        if start < 0 {
            p.proj.negative_timestamps += 1;
        }
        let end_gtid = int(row.get_ref(4)?);
        let name = p.name(text_id, row.get_ref(6)?)?;
        if end_gtid.is_some_and(|t| t != gtid) {
            p.proj.cross_thread_ranges += 1;
            let n = &p.proj.names.get(name).name;
            if p.proj.cross_thread_names.len() < 5 && !p.proj.cross_thread_names.contains(n) {
                p.proj.cross_thread_names.push(n.clone());
            }
            continue;
        }
        let end = match int(row.get_ref(1)?) {
            Some(e) => e,
            None => {
                p.proj.unclosed_ranges += 1;
                p.max_ts()?
            }
        };
        let gpid = ids::global_pid(gtid);
        let proc = if gpid == last_gpid {
            last_proc
        } else {
            last_gpid = gpid;
            last_proc = match proc_index.get(&gpid) {
                Some(&pi) => pi,
                None => {
                    let pi = ops.procs.len() as u16;
                    ops.procs.push(gpid);
                    proc_index.insert(gpid, pi);
                    pi
                }
            };
            last_proc
        };
        let a = p.agg(proc, domain, name, style);
        {
            let agg = &mut p.proj.aggs[a as usize];
            agg.instances += 1;
            agg.cpu_ns += end - start;
        }
        let collective = p.proj.aggs[a as usize].collective;
        let st = p.threads.entry(gtid).or_default();
        if p.timeline {
            keep_for_timeline(st, &mut p.heaps, proc, start, end, a);
        }
        let agg = &mut p.proj.aggs[a as usize];
        if project_range(ops_v, st, agg, a, start, end, collective).is_err() {
            return Ok(Err(OutOfOrder));
        }
    }
    drop(rows);
    let mut proj = p.proj;
    proj.timeline = p
        .heaps
        .into_iter()
        .map(|h| {
            let mut v: Vec<TimelineRange> = h.into_iter().map(|Reverse(r)| r).collect();
            v.sort_by_key(|r| (r.depth, r.start));
            v
        })
        .collect();
    fold_families(&mut proj, ops_v, p.family_of);
    Ok(Ok(proj))
}

/// Keep a range for the HTML timeline when it is among the longest of its process at nesting
/// depth 0 to 2 (depth from the ranges still open on its thread).
fn keep_for_timeline(
    st: &mut ThreadState,
    heaps: &mut Vec<BinaryHeap<Reverse<TimelineRange>>>,
    proc: u16,
    start: i64,
    end: i64,
    agg: u32,
) {
    while st.open.last().is_some_and(|&e| e <= start) {
        st.open.pop();
    }
    let depth = st.open.len();
    st.open.push(end);
    if depth > 2 {
        return;
    }
    if heaps.len() <= proc as usize {
        heaps.resize_with(proc as usize + 1, BinaryHeap::new);
    }
    let h = &mut heaps[proc as usize];
    h.push(Reverse(TimelineRange {
        dur: end - start,
        start,
        end,
        depth: depth as u8,
        agg,
    }));
    if h.len() > TIMELINE_RANGES {
        h.pop();
    }
}

/// One range instance against its thread's launches (`st.slice` of `ops`, by launch start):
/// inclusive time (once per name, see `ThreadState::cover`), each op's innermost range and
/// collective, and nsys's projected span. `Err` when the thread's ranges are not in start order.
fn project_range(
    ops: &mut [Op],
    st: &mut ThreadState,
    agg: &mut Agg,
    a: u32,
    start: i64,
    end: i64,
    collective: Option<CommOp>,
) -> std::result::Result<(), OutOfOrder> {
    let Some((lo, hi)) = st.slice else {
        return Ok(());
    };
    if start < st.last_start {
        return Err(OutOfOrder);
    }
    st.last_start = start;
    let cover = st.cover.get(&a).copied().unwrap_or(i64::MIN);
    let mut k = lo + ops[lo..hi].partition_point(|o| o.launch_start < start);
    let (mut first, mut last, mut n_ops, mut last_corr) = (i64::MAX, i64::MIN, 0u64, None);
    while k < hi && ops[k].launch_start <= end {
        let op = &mut ops[k];
        k += 1;
        if op.launch_end > end {
            continue;
        }
        first = first.min(op.start);
        last = last.max(op.end);
        if last_corr != Some(op.corr) {
            n_ops += 1;
            last_corr = Some(op.corr);
        }
        if op.launch_end > cover {
            let d = op.end - op.start;
            agg.inclusive_ns += d;
            agg.inclusive_by_class[op.class as usize] += d;
        }
        op.innermost = a;
        if let Some(c) = collective {
            op.set_coll(c.index() as u8 + 1);
        }
    }
    if end > cover {
        st.cover.insert(a, end);
    }
    if n_ops > 0 {
        agg.proj_ns.push(last - first);
        agg.proj_range_ns += end - start;
        agg.gpu_ops += n_ops;
    }
    Ok(())
}

/// Fold counter families with many one-off names into one row per family (`step N`).
fn fold_families(proj: &mut Projection, ops: &mut [Op], family_of: Vec<u32>) {
    // (proc, domain, style, family) -> (member aggregates, names with one number), and the
    // rows folded while reading.
    type FamilyKey = (u16, i64, Style, u32);
    let mut groups: HashMap<FamilyKey, (Vec<u32>, bool)> = HashMap::new();
    let mut hard_rows: HashMap<FamilyKey, u32> = HashMap::new();
    for (i, a) in proj.aggs.iter().enumerate() {
        if a.folded_names > 0 {
            hard_rows.insert((a.proc, a.domain, a.style, a.name), i as u32);
            continue;
        }
        let fam = family_of.get(a.name as usize).copied().unwrap_or(NONE);
        if fam != NONE && fam != a.name {
            let g = groups.entry((a.proc, a.domain, a.style, fam)).or_default();
            g.0.push(i as u32);
            // Names that differ in one number only; `layer05.stage1_f` keeps its own row
            // (unless its family was folded while reading).
            g.1 = names::digit_runs(&proj.names.get(a.name).name) == 1;
        }
    }
    let mut remap: IntMap<u32, u32> = IntMap::default();
    let mut keys: Vec<_> = groups.keys().copied().collect();
    keys.sort();
    for key in keys {
        let (members, single) = &groups[&key];
        let instances: u64 = members
            .iter()
            .map(|&m| proj.aggs[m as usize].instances)
            .sum();
        let hard = hard_rows.get(&key).copied();
        let one_offs =
            *single && members.len() > FOLD_MIN_NAMES && instances < 2 * members.len() as u64;
        if hard.is_none() && !one_offs {
            continue;
        }
        let target = match hard {
            Some(t) => t,
            None => {
                let (proc, domain, style, fam) = key;
                let mut a = proj.aggs[members[0] as usize].clone();
                a.name = fam;
                a.instances = 0;
                a.cpu_ns = 0;
                a.proj_ns = Vec::new();
                a.proj_range_ns = 0;
                a.gpu_ops = 0;
                a.inclusive_ns = 0;
                a.exclusive_ns = 0;
                a.inclusive_by_class.iter_mut().for_each(|v| *v = 0);
                a.folded_names = 0;
                (a.proc, a.domain, a.style) = (proc, domain, style);
                proj.aggs.push(a);
                (proj.aggs.len() - 1) as u32
            }
        };
        for &m in members {
            let src = {
                let a = &mut proj.aggs[m as usize];
                let taken = Agg {
                    proj_ns: std::mem::take(&mut a.proj_ns),
                    inclusive_by_class: std::mem::take(&mut a.inclusive_by_class),
                    ..a.clone()
                };
                a.instances = 0; // emptied: the report leaves it out
                taken
            };
            let t = &mut proj.aggs[target as usize];
            t.instances += src.instances;
            t.cpu_ns += src.cpu_ns;
            t.proj_ns.extend(src.proj_ns);
            t.proj_range_ns += src.proj_range_ns;
            t.gpu_ops += src.gpu_ops;
            t.inclusive_ns += src.inclusive_ns;
            t.exclusive_ns += src.exclusive_ns;
            for (x, y) in t.inclusive_by_class.iter_mut().zip(src.inclusive_by_class) {
                *x += y;
            }
            t.folded_names += 1;
            remap.insert(m, target);
        }
        proj.folded_families += 1;
    }
    if remap.is_empty() {
        return;
    }
    for o in ops.iter_mut() {
        if let Some(&t) = remap.get(&o.innermost) {
            o.innermost = t;
        }
    }
    for t in proj.timeline.iter_mut().flatten() {
        if let Some(&to) = remap.get(&t.agg) {
            t.agg = to;
        }
    }
    // Emptied members are dropped by the report (no instances).
}
