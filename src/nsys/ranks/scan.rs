//! One streaming pass over `NVTX_EVENTS` for what the per-rank figures need, read the way
//! pithtrain's skill reads it (scripts/common.py, show_setup.py, find_window.py): every event of
//! the capture (`start >= 0`, any event type), its name `text` or else its registered string,
//! attributed to the process of its `globalTid`.
//!
//! Per process: its first event (the setup range), the earliest event that is a setup range, the
//! window ranges; and for the timestamps asked about (a communication kernel's launch time) the
//! innermost enclosing range: of the ranges that can enclose (`Conventions::can_enclose`) and
//! started at or before the time, the `scan` latest, the shortest that still contains it
//! (`end >= t`; an event without an end spans nothing). The skill bisects a list of every range
//! of the process; here rows arrive in start order, so each process keeps only its `scan`
//! latest ranges and answers a timestamp when the first range starting after it arrives. What is
//! held per process is bounded by `scan` and the number of window ranges. An export whose rows
//! are not in start order within a process is read again sorted.

use std::borrow::Cow;
use std::collections::HashMap;

use rusqlite::types::ValueRef;

use crate::nsys::conventions::Conventions;
use crate::nsys::error::Result;
use crate::nsys::hash::IntMap;
use crate::nsys::ids;
use crate::nsys::sqlite::{Db, NVTX_EVENTS, col_or_null, int};

/// What a kernel's innermost range says: its stage (index + 1 into `Scan::stages`, 0 for none)
/// and purpose (index + 1 into `Conventions::purposes`, 0 for unknown).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tag {
    pub stage: u16,
    pub purpose: u8,
}

/// A window range (DualPipeV's overlapped chunk): `end` is `None` when it never ended.
#[derive(Debug, Clone)]
pub struct Chunk {
    pub start: i64,
    pub end: Option<i64>,
    pub name: String,
}

#[derive(Debug, Default)]
pub struct ProcNvtx {
    /// The first timestamp of the process's events, and the names of the events there.
    pub first_start: Option<i64>,
    pub first_names: Vec<Option<String>>,
    /// The earliest event that is a setup range.
    pub setup: Option<(i64, String)>,
    /// Window ranges in start order.
    pub chunks: Vec<Chunk>,
    last_start: i64,
}

#[derive(Debug, Default)]
pub struct Scan {
    /// By globalPid.
    pub procs: HashMap<i64, ProcNvtx>,
    /// Stage names, by `Tag::stage - 1`.
    pub stages: Vec<String>,
    /// Rows were not in start order within a process: read again sorted.
    pub reordered: bool,
}

/// A timestamp to find the innermost range of, for the GPU operation `op`; `tag` is the answer.
/// (16 bytes: one per communication kernel is held.)
#[derive(Debug, Clone, Copy)]
pub struct Query {
    pub t: i64,
    pub op: u32,
    pub tag: Tag,
}

/// A range held for the innermost search; `name` is reused from row to row.
struct Held {
    start: i64,
    end: i64,
    name: String,
    tag: Option<Tag>,
}

/// The `scan` latest ranges that can enclose, oldest first (a ring).
struct Ring {
    items: Vec<Held>,
    head: usize,
    cap: usize,
}

impl Ring {
    fn push(&mut self, start: i64, end: i64, name: &str) {
        if self.items.len() < self.cap {
            self.items.push(Held {
                start,
                end,
                name: name.to_string(),
                tag: None,
            });
            return;
        }
        let h = &mut self.items[self.head];
        h.start = start;
        h.end = end;
        h.name.clear();
        h.name.push_str(name);
        h.tag = None;
        self.head = (self.head + 1) % self.cap;
    }

    /// The innermost held range containing `t`: the shortest, the latest started among equals.
    fn innermost(&self, t: i64) -> Option<usize> {
        let n = self.items.len();
        let mut best: Option<(i64, usize)> = None;
        for k in 0..n {
            // Newest first: the item before `head` is the latest pushed.
            let i = (self.head + n - 1 - k) % n;
            let h = &self.items[i];
            if h.end >= t {
                let span = h.end - h.start;
                if best.is_none_or(|(b, _)| span < b) {
                    best = Some((span, i));
                }
            }
        }
        best.map(|(_, i)| i)
    }
}

struct State {
    ring: Ring,
    /// This process's queries: `queries[..hi]`, answered up to `next`.
    next: usize,
    hi: usize,
}

struct Pass<'a> {
    conv: &'a Conventions,
    queries: &'a mut [Query],
    out: Scan,
    stage_index: HashMap<String, u16>,
}

impl Pass<'_> {
    fn tag(&mut self, name: &str) -> Tag {
        let stage = match self.conv.stage_of(name) {
            Some(s) => match self.stage_index.get(&s) {
                Some(&i) => i,
                None => {
                    self.out.stages.push(s.clone());
                    let i = self.out.stages.len().min(u16::MAX as usize) as u16;
                    self.stage_index.insert(s, i);
                    i
                }
            },
            None => 0,
        };
        Tag {
            stage,
            purpose: self
                .conv
                .purpose_of(name)
                .map_or(0, |i| (i + 1).min(255) as u8),
        }
    }

    /// Answer the process's queries with a time before `until` (all of them for `None`).
    fn answer(&mut self, st: &mut State, until: Option<i64>) {
        while st.next < st.hi {
            let t = self.queries[st.next].t;
            if until.is_some_and(|u| t >= u) {
                break;
            }
            let tag = match st.ring.innermost(t) {
                Some(i) => match st.ring.items[i].tag {
                    Some(tag) => tag,
                    None => {
                        let tag = self.tag(&st.ring.items[i].name);
                        st.ring.items[i].tag = Some(tag);
                        tag
                    }
                },
                None => Tag::default(),
            };
            self.queries[st.next].tag = tag;
            st.next += 1;
        }
    }
}

/// The pass over the rows: fed one row at a time, by its own read of the table (`scan`) or by
/// the NVTX projection's (`nvtx::RowObserver`), so the table can be read once for both.
pub struct Scanner<'a> {
    pass: Pass<'a>,
    states: IntMap<i64, State>,
    strings: IntMap<i64, Option<String>>,
    n_queries: usize,
    last_gtid: i64,
    last_gpid: i64,
    /// A process's rows came out of start order: what was read is void, read again sorted.
    out_of_order: bool,
}

impl<'a> Scanner<'a> {
    pub fn new(
        conv: &'a Conventions,
        groups: &[(i64, usize, usize)],
        queries: &'a mut [Query],
    ) -> Scanner<'a> {
        for q in queries.iter_mut() {
            q.tag = Tag::default();
        }
        let n_queries = queries.len();
        let mut states: IntMap<i64, State> = IntMap::default();
        for &(g, lo, hi) in groups {
            states.insert(g, State::new(conv.scan, lo, hi));
        }
        Scanner {
            pass: Pass {
                conv,
                queries,
                out: Scan::default(),
                stage_index: HashMap::new(),
            },
            states,
            strings: IntMap::default(),
            n_queries,
            last_gtid: i64::MIN,
            last_gpid: i64::MIN,
            out_of_order: false,
        }
    }

    /// Whether the rows fed so far were usable (in start order within each process).
    pub fn usable(&self) -> bool {
        !self.out_of_order
    }

    /// One event of `NVTX_EVENTS` (any type), in table order. Events before the capture
    /// (`start < 0`) are skipped here.
    pub fn row(
        &mut self,
        db: &Db,
        start: i64,
        end: Option<i64>,
        gtid: i64,
        text_id: Option<i64>,
        text: ValueRef<'_>,
    ) -> Result<()> {
        if start < 0 || self.out_of_order {
            return Ok(());
        }
        if gtid != self.last_gtid {
            self.last_gtid = gtid;
            self.last_gpid = ids::global_pid(gtid);
        }
        let gpid = self.last_gpid;
        let conv = self.pass.conv;
        // COALESCE(text, StringIds.value), as the skill reads a name.
        let name: Option<Cow<'_, str>> = match text {
            ValueRef::Text(b) => Some(String::from_utf8_lossy(b)),
            _ => match text_id {
                Some(id) => {
                    if let std::collections::hash_map::Entry::Vacant(e) = self.strings.entry(id) {
                        e.insert(db.string(id)?);
                    }
                    self.strings[&id].as_deref().map(Cow::Borrowed)
                }
                None => None,
            },
        };
        let proc = self.pass.out.procs.entry(gpid).or_insert_with(|| ProcNvtx {
            last_start: i64::MIN,
            ..Default::default()
        });
        if start < proc.last_start {
            self.out_of_order = true;
            return Ok(());
        }
        proc.last_start = start;
        match proc.first_start {
            None => {
                proc.first_start = Some(start);
                proc.first_names.push(name.as_deref().map(str::to_string));
            }
            Some(f) if f == start && proc.first_names.len() < 16 => {
                proc.first_names.push(name.as_deref().map(str::to_string));
            }
            _ => {}
        }
        let Some(name) = name else { return Ok(()) };
        if conv.window.matches(&name) {
            proc.chunks.push(Chunk {
                start,
                end,
                name: name.to_string(),
            });
        }
        if conv.is_setup(&name) {
            proc.setup.get_or_insert_with(|| (start, name.to_string()));
            return Ok(());
        }
        if !conv.can_enclose(&name) {
            return Ok(());
        }
        let n = self.n_queries;
        let st = self
            .states
            .entry(gpid)
            .or_insert_with(|| State::new(conv.scan, n, n));
        self.pass.answer(st, Some(start));
        st.ring.push(start, end.unwrap_or(start), &name);
        Ok(())
    }

    /// Answer what is left and hand over the result (`None` when the rows were not usable).
    pub fn finish(mut self) -> Option<Scan> {
        if self.out_of_order {
            return None;
        }
        for st in self.states.values_mut() {
            self.pass.answer(st, None);
        }
        Some(self.pass.out)
    }
}

impl crate::nsys::nvtx::RowObserver for Scanner<'_> {
    fn row(
        &mut self,
        db: &Db,
        start: i64,
        end: Option<i64>,
        global_tid: i64,
        text_id: Option<i64>,
        text: ValueRef<'_>,
    ) -> Result<()> {
        Scanner::row(self, db, start, end, global_tid, text_id, text)
    }

    fn abandon(&mut self) {
        self.out_of_order = true;
    }
}

impl State {
    fn new(cap: usize, next: usize, hi: usize) -> State {
        State {
            ring: Ring {
                items: Vec::new(),
                head: 0,
                cap,
            },
            next,
            hi,
        }
    }
}

/// The columns the scan reads, for a `SELECT` (NULL where the export lacks one).
fn columns(db: &Db) -> Result<Option<String>> {
    Ok(match db.columns(NVTX_EVENTS)? {
        Some(c) if c.iter().any(|x| x == "globalTid") && c.iter().any(|x| x == "start") => {
            Some(format!(
                "start, {}, globalTid, {}, {}",
                col_or_null(&c, "end"),
                col_or_null(&c, "textId"),
                col_or_null(&c, "text")
            ))
        }
        _ => None,
    })
}

/// Read the NVTX events and answer `queries` (sorted by process and time) in place; `groups`
/// gives each process's globalPid and slice of them. `sorted`: read them sorted by start (what
/// is done when the table's own order is not start order within each process).
pub fn scan(
    db: &Db,
    conv: &Conventions,
    groups: &[(i64, usize, usize)],
    queries: &mut [Query],
    sorted: bool,
) -> Result<Scan> {
    let Some(cols) = columns(db)? else {
        return Ok(Scan::default());
    };
    let sql = format!(
        "SELECT {cols} FROM {NVTX_EVENTS} WHERE start >= 0{}",
        if sorted { " ORDER BY start, rowid" } else { "" }
    );
    let mut sc = Scanner::new(conv, groups, queries);
    let mut stmt = db.conn.prepare(&sql)?;
    let mut rows = stmt.raw_query();
    while let Some(row) = rows.next()? {
        let Some(start) = int(row.get_ref(0)?) else {
            continue;
        };
        sc.row(
            db,
            start,
            int(row.get_ref(1)?),
            int(row.get_ref(2)?).unwrap_or(0),
            int(row.get_ref(3)?),
            row.get_ref(4)?,
        )?;
        if !sc.usable() {
            break;
        }
    }
    drop(rows);
    match sc.finish() {
        Some(s) => Ok(s),
        None if !sorted => {
            let mut s = scan(db, conv, groups, queries, true)?;
            s.reordered = true;
            Ok(s)
        }
        None => unreachable!("rows read sorted by start are in start order"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The innermost range at `t` as the pass finds it: the ring holds the ranges started at or
    /// before `t`, in start order.
    fn at(cap: usize, items: &[(i64, i64, &'static str)], t: i64) -> Option<String> {
        let mut r = Ring {
            items: Vec::new(),
            head: 0,
            cap,
        };
        for (s, e, n) in items.iter().filter(|i| i.0 <= t) {
            r.push(*s, *e, n);
        }
        r.innermost(t).map(|i| r.items[i].name.clone())
    }

    /// The skill's search: the shortest containing range among the `scan` latest started at or
    /// before the time; an end equal to the time contains it; among equals the later started.
    #[test]
    fn innermost_is_the_shortest_of_the_latest() {
        let items = [
            (0, 100, "chunk"),
            (10, 50, "stage2_f"),
            (20, 30, "inner"),
            (40, 40, "mark"),
        ];
        let at8 = |t| at(8, &items, t);
        assert_eq!(at8(25).as_deref(), Some("inner"));
        assert_eq!(at8(30).as_deref(), Some("inner"), "end is inclusive");
        assert_eq!(at8(35).as_deref(), Some("stage2_f"));
        assert_eq!(
            at8(40).as_deref(),
            Some("mark"),
            "an event without an end spans nothing"
        );
        assert_eq!(at8(41).as_deref(), Some("stage2_f"));
        assert_eq!(at8(99).as_deref(), Some("chunk"));
        assert_eq!(at8(101), None);
        assert_eq!(
            at(8, &[(0, 10, "first"), (0, 10, "second")], 5).as_deref(),
            Some("second")
        );
        // Only the `cap` latest are looked at: here the enclosing range is further back.
        let mut items = vec![(0, 1000, "stage4_b")];
        items.extend((1..=3).map(|k| (k * 10, k * 10 + 1, "small")));
        assert_eq!(at(4, &items, 500).as_deref(), Some("stage4_b"));
        assert_eq!(at(3, &items, 500), None);
    }
}
