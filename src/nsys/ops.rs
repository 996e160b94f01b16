//! GPU work, read once into one compact array: kernels, memcpy, memset and CUDA graph launches
//! (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`), each joined to the CUDA API call that launched it.
//!
//! One `Op` is 56 bytes; nothing per NVTX range or per runtime call is kept. The runtime table is
//! streamed: ops are sorted by (process, correlation id) and each runtime row looks its ops up
//! through a dense per-process index. Correlation ids restart in every process, so the join key is
//! (globalPid, correlationId), as in nsys's own reports. A graph launch traced whole has one row
//! and the launch's correlation id; when the graph's nodes are traced too (kernel rows with the
//! same process and correlation id) the graph row is dropped, so no GPU time counts twice.

use crate::nsys::classify::{Class, Classifier};
use crate::nsys::error::{Error, Result};
use crate::nsys::hash::IntMap;
use crate::nsys::ids;
use crate::nsys::meta::Meta;
use crate::nsys::sqlite::{Db, GRAPH_TRACE, KERNEL, MEMCPY, MEMSET, RUNTIME, col_or_null, int};

pub const NONE: u32 = u32::MAX;

/// One GPU operation.
#[derive(Debug, Clone, Copy)]
pub struct Op {
    pub start: i64,
    pub end: i64,
    /// The launching CUDA API call (`i64::MIN` until joined).
    pub launch_start: i64,
    pub launch_end: i64,
    pub corr: u32,
    /// Index into `Ops::threads` of the launching thread, `NONE` when unknown.
    pub thread: u32,
    /// Index into `Ops::kernel_names` (kernels), `NONE` otherwise.
    pub name: u32,
    /// The NVTX range aggregate the op's innermost enclosing range belongs to (`nvtx`).
    pub innermost: u32,
    pub proc: u16,
    /// Index into `Ops::devices`.
    pub device: u16,
    /// Index into `Ops::streams`: the CUDA stream the op ran on.
    pub stream: u16,
    /// Op class: a kernel category index, or `Classes::memcpy()` / `memset()` / `graph()`.
    pub class: u8,
    /// Two `CommOp` indexes + 1 (0: none) in one byte, so an op stays 56 bytes: the low half is
    /// the op's own operation (communication kernels), the high half the collective its
    /// innermost collective-naming range names.
    comm_coll: u8,
}

const _: () = assert!(std::mem::size_of::<Op>() == 56);

impl Op {
    pub fn dur(&self) -> i64 {
        self.end - self.start
    }
    pub fn launched(&self) -> bool {
        self.thread != NONE
    }
    /// `CommOp` index + 1 of a communication kernel, 0 otherwise.
    pub fn comm(&self) -> u8 {
        self.comm_coll & 0x0F
    }
    pub fn set_comm(&mut self, v: u8) {
        self.comm_coll = (self.comm_coll & 0xF0) | (v & 0x0F);
    }
    /// `CommOp` index + 1 of the collective the innermost collective-naming range names.
    pub fn coll(&self) -> u8 {
        self.comm_coll >> 4
    }
    pub fn set_coll(&mut self, v: u8) {
        self.comm_coll = (self.comm_coll & 0x0F) | (v << 4);
    }
}

/// Op classes: the classifier's kernel categories, then memcpy, memset, CUDA graph.
#[derive(Debug, Clone, Copy)]
pub struct Classes {
    pub categories: u8,
}

impl Classes {
    pub fn memcpy(&self) -> u8 {
        self.categories
    }
    pub fn memset(&self) -> u8 {
        self.categories + 1
    }
    pub fn graph(&self) -> u8 {
        self.categories + 2
    }
    pub fn count(&self) -> usize {
        self.categories as usize + 3
    }
    pub fn is_kernel(&self, class: u8) -> bool {
        class < self.categories
    }
    /// Kernels and graph launches: what "GPU work" and category shares are measured over.
    pub fn is_compute_work(&self, class: u8) -> bool {
        class < self.categories || class == self.graph()
    }
}

pub struct KernelName {
    pub name: String,
    pub class: Class,
    /// The `shortName` string (what pithtrain's scripts read), `None` when the table has no
    /// such column or its id is not in `StringIds`.
    pub short: Option<String>,
}

/// Everything read from the GPU-work and runtime tables.
pub struct Ops {
    pub ops: Vec<Op>,
    pub classes: Classes,
    /// globalPid of each process index.
    pub procs: Vec<i64>,
    /// GPU id of each device index.
    pub devices: Vec<i64>,
    /// globalTid of each thread index (threads that launched GPU work).
    pub threads: Vec<i64>,
    /// `streamId` of each stream index (`i64::MIN`: none recorded).
    pub streams: Vec<i64>,
    pub kernel_names: Vec<KernelName>,
    pub has_kernel_table: bool,
    pub has_graph_table: bool,
    pub has_runtime: bool,
    /// Graph rows dropped because the graph's nodes were traced as well.
    pub graph_rows_with_nodes: u64,
    /// Ops that carry a correlation id no runtime call has.
    pub unmatched: u64,
    pub negative_timestamps: u64,
}

struct Reader<'a> {
    db: &'a Db,
    meta: &'a Meta,
    classifier: &'a Classifier,
    out: Ops,
    proc_index: IntMap<i64, u16>,
    device_index: IntMap<(u16, i64), u16>,
    stream_index: IntMap<i64, u16>,
    name_index: IntMap<(i64, i64), u32>,
}

impl Reader<'_> {
    fn proc(&mut self, gpid: i64) -> u16 {
        if let Some(&p) = self.proc_index.get(&gpid) {
            return p;
        }
        let p = self.out.procs.len() as u16;
        self.out.procs.push(gpid);
        self.proc_index.insert(gpid, p);
        p
    }

    fn device(&mut self, proc: u16, ordinal: i64) -> u16 {
        if let Some(&d) = self.device_index.get(&(proc, ordinal)) {
            return d;
        }
        let gpu = self
            .meta
            .gpu_of(ids::pid(self.out.procs[proc as usize]), ordinal);
        let d = match self.out.devices.iter().position(|&g| g == gpu) {
            Some(d) => d as u16,
            None => {
                self.out.devices.push(gpu);
                (self.out.devices.len() - 1) as u16
            }
        };
        self.device_index.insert((proc, ordinal), d);
        d
    }

    fn stream(&mut self, id: i64) -> Result<u16> {
        if let Some(&s) = self.stream_index.get(&id) {
            return Ok(s);
        }
        let s = u16::try_from(self.out.streams.len()).map_err(|_| {
            Error::input(
                &self.db.path,
                "more than 65,535 distinct CUDA stream ids; this does not look like an nsys export",
            )
        })?;
        self.out.streams.push(id);
        self.stream_index.insert(id, s);
        Ok(s)
    }

    /// A kernel's name (demangled, the classifier's input) and short name, by their string ids.
    fn kernel_name(&mut self, id: i64, short_id: Option<i64>) -> Result<u32> {
        let key = (id, short_id.unwrap_or(i64::MIN));
        if let Some(&n) = self.name_index.get(&key) {
            return Ok(n);
        }
        let name = self
            .db
            .string(id)?
            .unwrap_or_else(|| format!("<unknown kernel name {id}>"));
        let short = match short_id {
            Some(s) => self.db.string(s)?,
            None => None,
        };
        let class = self.classifier.classify(&name);
        let n = self.out.kernel_names.len() as u32;
        self.out
            .kernel_names
            .push(KernelName { name, class, short });
        self.name_index.insert(key, n);
        Ok(n)
    }

    /// Read one GPU-work table; `class` is `None` for kernels (classified by name).
    fn table(&mut self, table: &str, class: Option<u8>) -> Result<bool> {
        let Some(cols) = self.db.columns(table)? else {
            return Ok(false);
        };
        self.db.require(
            table,
            &cols,
            &["start", "end", "deviceId", "correlationId", "globalPid"],
        )?;
        let has = |c: &str| cols.iter().any(|x| x == c);
        let short = if class.is_none() && has("shortName") {
            "shortName"
        } else {
            "NULL"
        };
        let name = if class.is_none() {
            if has("demangledName") {
                "demangledName"
            } else if has("shortName") {
                "shortName"
            } else {
                return Err(Error::input(
                    &self.db.path,
                    format!("table {table} has neither `demangledName` nor `shortName`"),
                ));
            }
        } else {
            "NULL"
        };
        let stream = col_or_null(&cols, "streamId");
        let sql = format!(
            "SELECT start, end, globalPid, correlationId, deviceId, {name}, {short}, {stream} FROM {table}"
        );
        let mut stmt = self.db.conn.prepare(&sql)?;
        let mut rows = stmt.raw_query();
        let (mut last_gpid, mut last_proc) = (i64::MIN, 0u16);
        while let Some(row) = rows.next()? {
            let (Some(start), Some(end)) = (int(row.get_ref(0)?), int(row.get_ref(1)?)) else {
                continue;
            };
            let gpid = int(row.get_ref(2)?).unwrap_or(0);
            let proc = if gpid == last_gpid {
                last_proc
            } else {
                last_gpid = gpid;
                last_proc = self.proc(gpid);
                last_proc
            };
            let corr = int(row.get_ref(3)?)
                .and_then(|c| u32::try_from(c).ok())
                .unwrap_or(NONE);
            let device = self.device(proc, int(row.get_ref(4)?).unwrap_or(-1));
            let stream = self.stream(int(row.get_ref(7)?).unwrap_or(i64::MIN))?;
            let (class, comm, name) = match class {
                Some(c) => (c, 0, NONE),
                None => {
                    let n =
                        self.kernel_name(int(row.get_ref(5)?).unwrap_or(-1), int(row.get_ref(6)?))?;
                    let k = self.out.kernel_names[n as usize].class;
                    (k.category, k.comm.map_or(0, |c| c.index() as u8 + 1), n)
                }
            };
            if start < 0 {
                self.out.negative_timestamps += 1;
            }
            self.out.ops.push(Op {
                start,
                end,
                launch_start: i64::MIN,
                launch_end: i64::MIN,
                corr,
                thread: NONE,
                name,
                innermost: NONE,
                proc,
                device,
                stream,
                class,
                comm_coll: comm,
            });
        }
        Ok(true)
    }
}

/// Drop graph rows whose nodes were traced too. `ops` is sorted by (proc, corr).
fn drop_shadowed_graphs(ops: &mut Vec<Op>, graph: u8) -> u64 {
    let mut shadowed = vec![false; ops.len()];
    let mut dropped = 0;
    let mut i = 0;
    while i < ops.len() {
        let mut j = i + 1;
        while j < ops.len() && ops[j].proc == ops[i].proc && ops[j].corr == ops[i].corr {
            j += 1;
        }
        if ops[i].corr != NONE && j - i > 1 {
            let nodes = ops[i..j].iter().any(|o| o.class != graph);
            if nodes {
                for (k, o) in ops[i..j].iter().enumerate() {
                    if o.class == graph {
                        shadowed[i + k] = true;
                        dropped += 1;
                    }
                }
            }
        }
        i = j;
    }
    if dropped > 0 {
        let mut k = 0;
        ops.retain(|_| {
            k += 1;
            !shadowed[k - 1]
        });
    }
    dropped
}

/// Per-process lookup from correlation id to the first op with it (ops sorted by proc, corr).
enum CorrIndex {
    Dense { min: u32, first: Vec<u32> },
    Sorted { lo: usize, hi: usize },
}

fn corr_indexes(ops: &[Op], procs: usize) -> Vec<Option<CorrIndex>> {
    let mut out: Vec<Option<CorrIndex>> = (0..procs).map(|_| None).collect();
    let mut i = 0;
    while i < ops.len() {
        let p = ops[i].proc;
        let mut j = i;
        while j < ops.len() && ops[j].proc == p {
            j += 1;
        }
        // Sorted by corr, so the ops without one (NONE) come last.
        let m = ops[i..j].partition_point(|o| o.corr != NONE);
        if m > 0 {
            let (a, b) = (i, i + m - 1);
            let (min, max) = (ops[a].corr, ops[b].corr);
            let span = (max - min) as usize + 1;
            out[p as usize] = Some(if span <= 4 * (b - a + 1) + 4096 {
                let mut first = vec![NONE; span];
                for k in (a..=b).rev() {
                    first[(ops[k].corr - min) as usize] = k as u32;
                }
                CorrIndex::Dense { min, first }
            } else {
                CorrIndex::Sorted { lo: a, hi: b + 1 }
            });
        }
        i = j;
    }
    out
}

fn first_with(ops: &[Op], index: &CorrIndex, corr: u32) -> Option<usize> {
    match index {
        CorrIndex::Dense { min, first } => {
            let off = corr.checked_sub(*min)? as usize;
            let v = *first.get(off)?;
            (v != NONE).then_some(v as usize)
        }
        CorrIndex::Sorted { lo, hi } => {
            let k = lo + ops[*lo..*hi].partition_point(|o| o.corr < corr);
            (k < *hi && ops[k].corr == corr).then_some(k)
        }
    }
}

/// Stream the runtime table and give every op its launching call.
fn join_runtime(db: &Db, out: &mut Ops, proc_index: &IntMap<i64, u16>) -> Result<bool> {
    let Some(cols) = db.columns(RUNTIME)? else {
        return Ok(false);
    };
    db.require(
        RUNTIME,
        &cols,
        &["start", "end", "globalTid", "correlationId"],
    )?;
    let index = corr_indexes(&out.ops, out.procs.len());
    let mut thread_index: IntMap<i64, u32> = IntMap::default();
    let mut stmt = db.conn.prepare(&format!(
        "SELECT start, end, globalTid, correlationId FROM {RUNTIME}"
    ))?;
    let mut rows = stmt.raw_query();
    let (mut last_gpid, mut last_proc) = (i64::MIN, None::<u16>);
    let ops = &mut out.ops;
    while let Some(row) = rows.next()? {
        let (Some(start), Some(end), Some(gtid), Some(corr)) = (
            int(row.get_ref(0)?),
            int(row.get_ref(1)?),
            int(row.get_ref(2)?),
            int(row.get_ref(3)?),
        ) else {
            continue;
        };
        let gpid = ids::global_pid(gtid);
        if gpid != last_gpid {
            last_gpid = gpid;
            last_proc = proc_index.get(&gpid).copied();
        }
        let Some(p) = last_proc else { continue };
        let (Some(ix), Ok(corr)) = (&index[p as usize], u32::try_from(corr)) else {
            continue;
        };
        let Some(mut k) = first_with(ops, ix, corr) else {
            continue;
        };
        let t = *thread_index.entry(gtid).or_insert_with(|| {
            out.threads.push(gtid);
            (out.threads.len() - 1) as u32
        });
        while k < ops.len() && ops[k].proc == p && ops[k].corr == corr {
            let op = &mut ops[k];
            op.thread = t;
            op.launch_start = start;
            op.launch_end = end;
            k += 1;
        }
    }
    Ok(true)
}

/// How many GPU operations an export holds, at most: max(rowid) is the row count of a table nsys
/// wrote, and costs one b-tree descent. A row takes more than 32 bytes on disk, so never more
/// than the file can hold.
pub fn rows(db: &Db) -> u64 {
    let mut rows: i64 = 0;
    for t in [KERNEL, MEMCPY, MEMSET, GRAPH_TRACE] {
        if db.has(t) {
            let n: Option<i64> = db
                .conn
                .query_row(&format!("SELECT max(rowid) FROM {t}"), [], |r| r.get(0))
                .unwrap_or(None);
            rows = rows.saturating_add(n.unwrap_or(0).max(0));
        }
    }
    let file_len = std::fs::metadata(&db.path).map(|m| m.len()).unwrap_or(0);
    (rows.max(0) as u64).min(file_len / 32)
}

/// Read the GPU work of an export and join it to the runtime calls.
pub fn read(db: &Db, meta: &Meta, classifier: &Classifier) -> Result<Ops> {
    let classes = Classes {
        categories: classifier.categories.len() as u8,
    };
    let mut r = Reader {
        db,
        meta,
        classifier,
        out: Ops {
            ops: Vec::new(),
            classes,
            procs: Vec::new(),
            devices: Vec::new(),
            threads: Vec::new(),
            streams: Vec::new(),
            kernel_names: Vec::new(),
            has_kernel_table: false,
            has_graph_table: false,
            has_runtime: false,
            graph_rows_with_nodes: 0,
            unmatched: 0,
            negative_timestamps: 0,
        },
        proc_index: IntMap::default(),
        device_index: IntMap::default(),
        stream_index: IntMap::default(),
        name_index: IntMap::default(),
    };
    // One allocation of the right size: growing by doubling would hold the old and new arrays
    // at once.
    r.out.ops.reserve(rows(db) as usize);
    r.out.has_kernel_table = r.table(KERNEL, None)?;
    r.table(MEMCPY, Some(classes.memcpy()))?;
    r.table(MEMSET, Some(classes.memset()))?;
    r.out.has_graph_table = r.table(GRAPH_TRACE, Some(classes.graph()))?;
    let proc_index = std::mem::take(&mut r.proc_index);
    let mut out = r.out;
    out.ops.sort_unstable_by_key(|o| (o.proc, o.corr));
    if out.has_graph_table {
        out.graph_rows_with_nodes = drop_shadowed_graphs(&mut out.ops, classes.graph());
    }
    out.has_runtime = join_runtime(db, &mut out, &proc_index)?;
    if out.has_runtime {
        out.unmatched = out.ops.iter().filter(|o| !o.launched()).count() as u64;
    }
    Ok(out)
}
