//! The pickle memo: values by index, in chunks of 4096 that are released once no
//! entry in them holds a value any more (a run of folded trace entries needs no
//! storage; strings, frames and stacks stay), and an [`Overlay`]: the stores a split
//! read's helper made, read in place from its packed form.
//!
//! Writers store indices in order (pickle's `len(memo)`, torch::jit::Pickler's
//! counter). A file may legally skip indices (`LONG_BINPUT 4096`, `LONG_BINPUT 8192`,
//! ...); from the first skip on the memo keeps what lies outside its chunks in a map,
//! so that memory follows what the file stores, not the indices it names, and MEMOIZE
//! still stores at `len(memo)`, as Python's unpickler does.

use super::value::PV;
use std::collections::HashMap;

use crate::snapshot::model::StrId;

/// One of a split read's helper's memo stores, packed: kind in the top 3 bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Local(pub u32);

impl Local {
    pub const RELEASED: Local = Local(0);
    pub const DISCARDED: Local = Local(1 << 29);
    pub const EMPTY_STACK: Local = Local(4 << 29);
    pub fn str(i: u32) -> Local {
        Local((2 << 29) | i)
    }
    pub fn stack(h: u32) -> Local {
        Local((3 << 29) | h)
    }
    pub fn kind(self) -> u32 {
        self.0 >> 29
    }
    pub fn value(self) -> u32 {
        self.0 & ((1 << 29) - 1)
    }
    pub fn is_str(self) -> bool {
        self.kind() == 2
    }
    pub fn is_stack(self) -> bool {
        matches!(self.kind(), 3 | 4)
    }
}

/// A helper's memo stores from some index on, with what its strings and stacks are
/// in the main reader's terms.
pub(crate) struct Overlay {
    start: u64,
    locals: Vec<Local>,
    str_ids: Vec<StrId>,
    stack_ids: Vec<u32>,
}

impl Overlay {
    pub fn new(locals: Vec<Local>, str_ids: Vec<StrId>, stack_ids: Vec<u32>) -> Self {
        Overlay {
            start: 0,
            locals,
            str_ids,
            stack_ids,
        }
    }
    pub fn len(&self) -> u64 {
        self.locals.len() as u64
    }
    fn get(&self, idx: u64) -> Option<PV> {
        let l = *self.locals.get(idx.checked_sub(self.start)? as usize)?;
        Some(match l.kind() {
            0 => PV::RELEASED,
            1 => PV::DISCARDED,
            2 => PV::str(self.str_ids[l.value() as usize]),
            3 => PV::stack(self.stack_ids[l.value() as usize]),
            _ => PV::stack(0),
        })
    }
    fn covers_chunk(&self, c: usize) -> bool {
        let (lo, hi) = ((c * MEMO_CHUNK) as u64, ((c + 1) * MEMO_CHUNK) as u64);
        lo < self.start + self.len() && self.start < hi
    }
}

pub const MEMO_CHUNK: usize = 4096;
/// Indices from here on are refused (they would not fit the slot's memo field).
pub const NO_MEMO: u32 = u32::MAX;

#[derive(Default)]
pub struct Memo {
    pub(crate) chunks: Vec<Option<Box<[PV]>>>,
    /// Entries holding a value, per chunk.
    live: Vec<u32>,
    /// One past the highest index set: what MEMOIZE uses next (the number of
    /// entries, as writers store indices in order).
    pub(crate) filled: u64,
    /// Values replaced by other values (writers never do; caches keyed by memo
    /// indices check it).
    pub(crate) overwrites: u64,
    /// Values below `filled` that live in a helper's stores (where no chunk value is).
    overlay: Option<Overlay>,
    /// How many distinct indices hold an entry: where MEMOIZE stores next (Python's
    /// `len(memo)`). `filled` too, unless the file skipped indices.
    count: u64,
    /// Once the file skipped an index: the entries outside the chunks.
    gaps: Option<Gaps>,
}

/// The memo's state after a skipped index. No chunk is made or released any more;
/// an entry whose chunk is absent is in `map`, or below `dense` (every index below
/// it was stored before the first skip: a released chunk), or was never stored.
///
/// The map hashes with std's SipHash: the indices are the file's choice, and a fast
/// multiplicative hash puts every multiple of 4096 in one bucket.
#[derive(Default)]
struct Gaps {
    dense: u64,
    map: HashMap<u32, PV>,
}

#[cold]
#[inline(never)]
fn new_chunk() -> Box<[PV]> {
    vec![PV::UNSET; MEMO_CHUNK].into_boxed_slice()
}

#[inline(always)]
fn holds_value(v: PV) -> bool {
    !v.is_missing()
}

impl Memo {
    pub fn set(&mut self, idx: u32, v: PV) {
        if v != PV::UNSET && idx as u64 > self.filled && self.gaps.is_none() {
            self.gaps = Some(Gaps {
                dense: self.filled,
                map: HashMap::new(),
            });
        }
        if self.gaps.is_some() {
            return self.set_gapped(idx, v);
        }
        let c = idx as usize / MEMO_CHUNK;
        let o = idx as usize % MEMO_CHUNK;
        if self.overlay.as_ref().is_some_and(|ov| ov.covers_chunk(c)) {
            return self.set_covered(idx, v);
        }
        if v != PV::UNSET && idx as u64 >= self.filled {
            // No index is skipped: every one below `filled` is stored already.
            self.count += 1;
        }
        let live_now = holds_value(v);
        if c >= self.chunks.len() {
            // A new chunk: the one before it may hold nothing any more.
            let n = self.chunks.len();
            if n > 0 && self.live[n - 1] == 0 && !self.covered(n - 1) {
                self.chunks[n - 1] = None;
            }
            self.chunks.resize_with(c + 1, || None);
            self.live.resize(c + 1, 0);
        }
        if v != PV::UNSET {
            self.filled = self.filled.max(idx as u64 + 1);
        }
        if self.chunks[c].is_none() {
            if !live_now {
                // A folded record or dropped container needs no storage.
                return;
            }
            self.chunks[c] = Some(new_chunk());
        }
        let chunk = self.chunks[c].as_mut().expect("just made");
        let old = chunk[o];
        if holds_value(old) && old != v {
            self.overwrites += 1;
        }
        chunk[o] = v;
        match (holds_value(old), live_now) {
            (false, true) => self.live[c] += 1,
            (true, false) => self.live[c] -= 1,
            _ => {}
        }
        if self.live[c] == 0 && c + 1 < self.chunks.len() {
            self.chunks[c] = None;
        }
    }

    /// Undo a `set` of an index that was unset before (the fast path bailing out).
    pub fn unset(&mut self, idx: u32) {
        if self.gaps.is_some() {
            return self.set_gapped(idx, PV::UNSET);
        }
        let c = idx as usize / MEMO_CHUNK;
        let o = idx as usize % MEMO_CHUNK;
        // The fast path undoes its stores newest first: each is the top one.
        debug_assert_eq!(idx as u64 + 1, self.filled, "memo undo out of order");
        if idx as u64 + 1 == self.filled {
            self.filled = idx as u64;
            self.count -= 1;
        }
        let covered = self.covered(c);
        if let Some(Some(chunk)) = self.chunks.get_mut(c) {
            if holds_value(chunk[o]) && !covered {
                self.live[c] -= 1;
            }
            chunk[o] = PV::UNSET;
        }
    }

    #[inline(always)]
    pub fn get(&self, idx: u32) -> PV {
        if self.gaps.is_some() {
            return self.get_gapped(idx);
        }
        let c = idx as usize / MEMO_CHUNK;
        match self.chunks.get(c) {
            Some(Some(chunk)) => {
                let v = chunk[idx as usize % MEMO_CHUNK];
                if v == PV::UNSET {
                    return self.over(idx).unwrap_or(v);
                }
                v
            }
            // A released chunk held values up to `filled`; past it nothing was set.
            Some(None) => self.over(idx).unwrap_or(if (idx as u64) < self.filled {
                PV::RELEASED
            } else {
                PV::UNSET
            }),
            None => self.over(idx).unwrap_or(PV::UNSET),
        }
    }

    /// Where MEMOIZE stores next: how many distinct indices hold an entry.
    pub fn stored(&self) -> u64 {
        self.count
    }

    /// Did the file skip an index (or a store get undone below the top)?
    #[inline(always)]
    pub fn has_gaps(&self) -> bool {
        self.gaps.is_some()
    }

    /// A folded record stored at `idx` where its chunk holds nothing (a run of them
    /// needs no storage while no index is skipped).
    pub fn set_released_run(&mut self, idx: u32) {
        if self.gaps.is_some() || idx as u64 > self.filled {
            return self.set(idx, PV::RELEASED);
        }
        if idx as u64 == self.filled {
            self.count += 1;
            self.filled += 1;
        }
    }

    #[cold]
    #[inline(never)]
    fn get_gapped(&self, idx: u32) -> PV {
        let c = idx as usize / MEMO_CHUNK;
        if let Some(Some(chunk)) = self.chunks.get(c) {
            let v = chunk[idx as usize % MEMO_CHUNK];
            if v != PV::UNSET {
                return v;
            }
        }
        if let Some(v) = self.over(idx) {
            return v;
        }
        let g = self.gaps.as_ref().expect("gapped");
        if let Some(&v) = g.map.get(&idx) {
            return v;
        }
        match self.chunks.get(c) {
            Some(None) if (idx as u64) < g.dense => PV::RELEASED,
            _ => PV::UNSET,
        }
    }

    /// `set` once an index was skipped: into the chunk if it has one (none is made
    /// or released now), into the map otherwise; the count follows what was stored.
    #[cold]
    #[inline(never)]
    fn set_gapped(&mut self, idx: u32, v: PV) {
        let old = self.get_gapped(idx);
        if holds_value(old) && old != v {
            self.overwrites += 1;
        }
        match (old == PV::UNSET, v == PV::UNSET) {
            (true, false) => self.count += 1,
            (false, true) => self.count -= 1,
            _ => {}
        }
        if v != PV::UNSET {
            self.filled = self.filled.max(idx as u64 + 1);
        }
        let c = idx as usize / MEMO_CHUNK;
        let o = idx as usize % MEMO_CHUNK;
        if let Some(Some(chunk)) = self.chunks.get_mut(c) {
            let was = chunk[o];
            chunk[o] = v;
            match (holds_value(was), holds_value(v)) {
                (false, true) => self.live[c] += 1,
                (true, false) => self.live[c] -= 1,
                _ => {}
            }
            if v != PV::UNSET {
                return;
            }
        }
        let g = self.gaps.as_mut().expect("gapped");
        if v == PV::UNSET {
            g.map.remove(&idx);
        } else {
            g.map.insert(idx, v);
        }
    }

    #[inline]
    fn over(&self, idx: u32) -> Option<PV> {
        self.overlay.as_ref()?.get(idx as u64)
    }

    fn covered(&self, c: usize) -> bool {
        self.overlay.as_ref().is_some_and(|o| o.covers_chunk(c))
    }

    /// Read the memo from the next index on through a helper's stores.
    pub(crate) fn set_overlay(&mut self, mut o: Overlay) {
        debug_assert!(
            self.gaps.is_none(),
            "a split read is declined on skipped indices"
        );
        o.start = self.filled;
        self.filled += o.len();
        self.count += o.len();
        self.overlay = Some(o);
    }

    /// `set` in a chunk the overlay covers: the value is kept there (such chunks are
    /// never released; an UNSET slot in them reads through to the overlay).
    #[cold]
    fn set_covered(&mut self, idx: u32, v: PV) {
        let old = self.get(idx);
        if holds_value(old) && old != v {
            self.overwrites += 1;
        }
        if old == PV::UNSET && v != PV::UNSET {
            self.count += 1;
        }
        let c = idx as usize / MEMO_CHUNK;
        let existed = c < self.chunks.len();
        if !existed {
            self.chunks.resize_with(c + 1, || None);
            self.live.resize(c + 1, 0);
        }
        if self.chunks[c].is_none() {
            // A released chunk keeps reading as released outside the overlay.
            let mut chunk = new_chunk();
            if existed {
                for (o, slot) in chunk.iter_mut().enumerate() {
                    let i = (c * MEMO_CHUNK + o) as u32;
                    if (i as u64) < self.filled && self.over(i).is_none() {
                        *slot = PV::RELEASED;
                    }
                }
            }
            self.chunks[c] = Some(chunk);
        }
        self.chunks[c].as_mut().expect("just made")[idx as usize % MEMO_CHUNK] = v;
        if v != PV::UNSET {
            self.filled = self.filled.max(idx as u64 + 1);
        }
    }

    /// Every entry holding a value: `(index, value)`.
    pub fn values(&self) -> Vec<(u32, PV)> {
        let mut out: Vec<(u32, PV)> = self
            .chunks
            .iter()
            .enumerate()
            .flat_map(|(c, chunk)| {
                chunk.iter().flat_map(move |ch| {
                    ch.iter()
                        .enumerate()
                        .filter(|(_, v)| holds_value(**v))
                        .map(move |(o, v)| ((c * MEMO_CHUNK + o) as u32, *v))
                })
            })
            .collect();
        if let Some(g) = &self.gaps {
            out.extend(
                g.map
                    .iter()
                    .filter(|(_, v)| holds_value(**v))
                    .map(|(&i, &v)| (i, v)),
            );
            out.sort_unstable_by_key(|&(i, _)| i);
        }
        if let Some(o) = &self.overlay {
            for i in o.start..o.start + o.len() {
                let v = self.get(i as u32);
                if holds_value(v) && self.chunk_slot(i as u32).is_none() {
                    out.push((i as u32, v));
                }
            }
            out.sort_unstable_by_key(|&(i, _)| i);
        }
        out
    }

    /// The value a chunk holds at `idx`, if it holds one there.
    fn chunk_slot(&self, idx: u32) -> Option<PV> {
        let v = (*self.chunks.get(idx as usize / MEMO_CHUNK)?).as_ref()?[idx as usize % MEMO_CHUNK];
        (v != PV::UNSET).then_some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_of_folded_records_are_released() {
        let mut m = Memo::default();
        m.set(0, PV::str(3));
        for i in 1..(3 * MEMO_CHUNK as u32) {
            m.set(i, PV::RELEASED);
        }
        assert_eq!(m.filled, 3 * MEMO_CHUNK as u64);
        assert_eq!(m.get(0), PV::str(3));
        assert!(m.chunks[1].is_none());
        assert_eq!(m.get(MEMO_CHUNK as u32 + 5), PV::RELEASED);
        assert_eq!(m.values().len(), 1);
    }

    #[test]
    fn skipped_indices_cost_what_is_stored_not_what_is_named() {
        let mut m = Memo::default();
        // A run of folded records first (their chunks released), then a skip.
        for i in 0..(2 * MEMO_CHUNK as u32) {
            m.set(i, PV::RELEASED);
        }
        let base = 2 * MEMO_CHUNK as u32;
        m.set(base, PV::str(1));
        assert!(!m.has_gaps());
        // 100k entries, each 4096 indices past the last: a chunk each if made dense.
        for i in 1..100_000u32 {
            m.set(base + i * MEMO_CHUNK as u32, PV::str(i));
        }
        assert!(m.has_gaps());
        assert!(m.chunks.iter().filter(|c| c.is_some()).count() <= 2);
        assert_eq!(m.get(base + 77 * MEMO_CHUNK as u32), PV::str(77));
        assert_eq!(m.get(base), PV::str(1));
        // Below the skip, released records stay released; skipped ones were never stored.
        assert_eq!(m.get(5), PV::RELEASED);
        assert_eq!(m.get(base + 1), PV::UNSET);
        assert_eq!(m.get(base + 99_999 * MEMO_CHUNK as u32 + 1), PV::UNSET);
        assert_eq!(m.stored(), 2 * MEMO_CHUNK as u64 + 100_000);
        // Overwrites count once; a record folded later frees nothing it should keep.
        m.set(base + MEMO_CHUNK as u32, PV::str(9));
        assert_eq!(m.overwrites, 1);
        assert_eq!(m.stored(), 2 * MEMO_CHUNK as u64 + 100_000);
        m.set(base + 2 * MEMO_CHUNK as u32, PV::RELEASED);
        assert_eq!(m.get(base + 2 * MEMO_CHUNK as u32), PV::RELEASED);
        assert_eq!(m.values().len(), 100_000 - 1);
    }

    #[test]
    fn memoize_after_a_skipped_put_stores_at_len_memo() {
        // BINPUT 5, then MEMOIZE twice: Python's unpickler stores at len(memo), 1 and 2.
        let mut m = Memo::default();
        m.set(5, PV::str(0));
        assert_eq!(m.stored(), 1);
        m.set(m.stored() as u32, PV::str(1));
        m.set(m.stored() as u32, PV::str(2));
        assert_eq!(
            (m.get(1), m.get(2), m.get(5)),
            (PV::str(1), PV::str(2), PV::str(0))
        );
        assert_eq!(m.get(0), PV::UNSET);
        // len(memo) reaches 5: the next MEMOIZE replaces index 5, as Python's does.
        m.set(3, PV::str(3));
        m.set(4, PV::str(4));
        assert_eq!(m.stored(), 5);
        m.set(m.stored() as u32, PV::str(6));
        assert_eq!((m.get(5), m.stored()), (PV::str(6), 5));
        m.set_released_run(m.stored() as u32);
        assert_eq!((m.get(5), m.stored()), (PV::RELEASED, 5));
        // Sequential stores count as indices; an undo of the top one gives it back.
        let mut m = Memo::default();
        for i in 0..10 {
            m.set(i, PV::str(i));
        }
        m.set_released_run(10);
        assert_eq!(m.stored(), 11);
        m.unset(10);
        assert_eq!((m.stored(), m.filled), (10, 10));
        assert!(!m.has_gaps());
    }

    #[test]
    fn an_overlay_reads_through_until_set() {
        let mut m = Memo::default();
        m.set(0, PV::str(3));
        for i in 1..(MEMO_CHUNK as u32 + 10) {
            m.set(i, PV::RELEASED);
        }
        let start = m.filled as u32;
        let locals = vec![
            Local::RELEASED,
            Local::stack(1),
            Local::str(0),
            Local::DISCARDED,
        ];
        m.set_overlay(Overlay::new(locals, vec![7], vec![0, 42]));
        assert_eq!(m.filled, start as u64 + 4);
        assert_eq!(m.get(start), PV::RELEASED);
        assert_eq!(m.get(start + 1), PV::stack(42));
        assert_eq!(m.get(start + 2), PV::str(7));
        assert_eq!(m.get(start + 3), PV::DISCARDED);
        assert_eq!(m.get(start + 4), PV::UNSET);
        // Below the overlay nothing changed: a released chunk reads as released.
        assert_eq!(m.get(5), PV::RELEASED);
        assert_eq!(m.get(0), PV::str(3));
        // Values set later: past it, and over it (an overwrite).
        m.set(start + 4, PV::stack(5));
        assert_eq!(m.get(start + 4), PV::stack(5));
        assert_eq!(m.overwrites, 0);
        m.set(start + 1, PV::stack(6));
        assert_eq!(m.get(start + 1), PV::stack(6));
        assert_eq!(m.overwrites, 1);
        assert_eq!(m.get(start + 2), PV::str(7));
        assert_eq!(m.get(MEMO_CHUNK as u32 + 1), PV::RELEASED);
        m.unset(start + 4);
        assert_eq!(m.get(start + 4), PV::UNSET);
        let vals = m.values();
        assert_eq!(
            vals,
            vec![
                (0, PV::str(3)),
                (start + 1, PV::stack(6)),
                (start + 2, PV::str(7))
            ]
        );
        // Far past it the memo works as before.
        for i in start + 4..start + 3 * MEMO_CHUNK as u32 {
            m.set(i, PV::RELEASED);
        }
        m.set(start + 3 * MEMO_CHUNK as u32, PV::str(1));
        assert_eq!(m.get(start + 2), PV::str(7));
        assert_eq!(m.get(start + 2 * MEMO_CHUNK as u32), PV::RELEASED);
    }
}
