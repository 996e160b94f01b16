//! The pickle memo: values by index, in chunks of 4096 that are released once no
//! entry in them holds a value any more (a run of folded trace entries needs no
//! storage; strings, frames and stacks stay).

use super::value::PV;

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
        let c = idx as usize / MEMO_CHUNK;
        let o = idx as usize % MEMO_CHUNK;
        let live_now = holds_value(v);
        if c >= self.chunks.len() {
            // A new chunk: the one before it may hold nothing any more.
            let n = self.chunks.len();
            if n > 0 && self.live[n - 1] == 0 {
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
        let c = idx as usize / MEMO_CHUNK;
        let o = idx as usize % MEMO_CHUNK;
        if idx as u64 + 1 == self.filled {
            self.filled = idx as u64;
        }
        if let Some(Some(chunk)) = self.chunks.get_mut(c) {
            if holds_value(chunk[o]) {
                self.live[c] -= 1;
            }
            chunk[o] = PV::UNSET;
        }
    }

    #[inline(always)]
    pub fn get(&self, idx: u32) -> PV {
        let c = idx as usize / MEMO_CHUNK;
        match self.chunks.get(c) {
            Some(Some(chunk)) => chunk[idx as usize % MEMO_CHUNK],
            Some(None) => PV::RELEASED,
            None => PV::UNSET,
        }
    }

    /// Count `n` indices from the next one as folded records without storing them.
    pub fn skip(&mut self, mut n: u64) {
        while n > 0 {
            let idx = self.filled;
            let c = idx as usize / MEMO_CHUNK;
            if matches!(self.chunks.get(c), Some(None)) || c >= self.chunks.len() {
                let chunk_end = ((c + 1) * MEMO_CHUNK) as u64;
                if c >= self.chunks.len() {
                    self.set(idx as u32, PV::RELEASED);
                    n -= 1;
                    continue;
                }
                let k = (chunk_end - idx).min(n);
                self.filled += k;
                n -= k;
            } else {
                self.set(idx as u32, PV::RELEASED);
                n -= 1;
            }
        }
    }

    /// Every entry holding a value: `(index, value)`.
    pub fn values(&self) -> impl Iterator<Item = (u32, PV)> + '_ {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            chunk.iter().flat_map(move |ch| {
                ch.iter()
                    .enumerate()
                    .filter(|(_, v)| holds_value(**v))
                    .map(move |(o, v)| ((c * MEMO_CHUNK + o) as u32, *v))
            })
        })
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
        m.skip(10_000);
        assert_eq!(m.filled, 3 * MEMO_CHUNK as u64 + 10_000);
        m.set(m.filled as u32, PV::stack(2));
        assert_eq!(m.get((3 * MEMO_CHUNK + 10_000) as u32), PV::stack(2));
        assert_eq!(m.values().count(), 2);
    }
}
