//! Learned entry shapes: the fastest path for trace entries.
//!
//! A writer puts every trace entry's keys in the same order, each a memo reference
//! to the same key string, so after one entry has been read (by [`super::fast`])
//! the next entries of the same kind are the same key bytes with different values.
//! A [`Shape`] is that sequence of key bytes, each with what its value feeds
//! (`action`, `addr`, `size`, ..., `frames`, or nothing). [`Shape::parse`] checks the
//! key bytes and reads each value the way its key needs, without touching anything,
//! into an [`Entry`]: the event's scalars and, in byte order, the operations the
//! entry implies (memo stores, references to check or resolve, a new stack). The
//! main reader performs them with [`apply`] (through [`FastPath`], which also falls
//! back to the scanner and learns from it); the split read's helper performs them
//! symbolically. Any byte the shape does not expect (another key, a FRAME opcode, a
//! value of another kind) fails the parse with nothing changed, and the entry is
//! read by the scanner or the generic machine instead.

use super::builder::keys::*;
use super::builder::{Builder, MAX_SIZE};
use super::fast::{Key, Scan, Store, Undo, Val, index, memo_ref, scalar, scan, text, u32_at};
use super::value::*;
use crate::snapshot::model::{Event, FrameId, StrId};

/// What a field's value feeds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Slot {
    Action,
    Addr,
    Size,
    Stream,
    Time,
    Frames,
    /// Not used by the event: only its memo stores count.
    Other,
}

impl Slot {
    fn of(key: StrId) -> Slot {
        match key {
            K_ACTION => Slot::Action,
            K_ADDR | K_DEVICE_FREE => Slot::Addr,
            K_SIZE => Slot::Size,
            K_STREAM => Slot::Stream,
            K_TIME_US => Slot::Time,
            K_FRAMES => Slot::Frames,
            _ => Slot::Other,
        }
    }
}

/// What a memo store holds.
#[derive(Clone, Copy, Debug)]
pub(crate) enum What {
    /// The entry's dict (folded into the event).
    Released,
    /// A container the event does not use (`pool_id`).
    Discarded,
    /// A string: its bytes in the window.
    Str(u32, u32),
    /// The `frames` list just read.
    Stack,
}

/// One operation an entry implies, in byte order.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    Store(Store, What),
    /// A memo reference in a field the event does not use.
    Check(u32),
    Action(u32),
    FramesRef(u32),
    /// A new `frames` list: the bytes of its memo references, and how many.
    FramesList(u32, u32, u32),
}

const MAX_OPS: usize = 48;
const MAX_FIELDS: usize = 24;

/// A parsed entry.
pub(crate) struct Entry {
    pub ev: Event,
    ops: [Op; MAX_OPS],
    n: usize,
    /// Bytes used, from just after the EMPTY_DICT.
    pub used: usize,
}

impl Default for Entry {
    fn default() -> Self {
        Entry {
            ev: Builder::fresh_event(),
            ops: [Op::Check(0); MAX_OPS],
            n: 0,
            used: 0,
        }
    }
}

impl Entry {
    pub fn ops(&self) -> &[Op] {
        &self.ops[..self.n]
    }

    #[inline(always)]
    fn op(&mut self, op: Op) -> Option<()> {
        if self.n == MAX_OPS {
            return None;
        }
        self.ops[self.n] = op;
        self.n += 1;
        Some(())
    }
}

/// The key bytes of one field (a BINGET or LONG_BINGET).
#[derive(Clone, Copy, Debug, PartialEq)]
struct KeyBytes {
    bytes: [u8; 5],
    len: u8,
}

impl KeyBytes {
    fn of(i: u32) -> KeyBytes {
        let mut bytes = [0u8; 5];
        if i < 256 {
            bytes[0] = b'h';
            bytes[1] = i as u8;
            KeyBytes { bytes, len: 2 }
        } else {
            bytes[0] = b'j';
            bytes[1..].copy_from_slice(&i.to_le_bytes());
            KeyBytes { bytes, len: 5 }
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Shape {
    fields: Vec<(KeyBytes, Slot)>,
}

/// An optional memo store at `p` (no FRAME before it): (store, end).
#[inline(always)]
fn store(buf: &[u8], p: usize) -> Option<(Option<Store>, usize)> {
    Some(match *buf.get(p)? {
        0x94 => (Some(Store::Next), p + 1),
        b'q' => (Some(Store::At(*buf.get(p + 1)? as u32)), p + 2),
        b'r' => (Some(Store::At(u32_at(buf, p + 1)?)), p + 5),
        _ => (None, p),
    })
}

/// An int at `p`: (value, end).
#[inline(always)]
fn int(buf: &[u8], p: usize) -> Option<(i64, usize)> {
    match scalar(buf, p)? {
        (Val::Int(i), q) => Some((i, q)),
        _ => None,
    }
}

impl Shape {
    /// The shape of an entry the scanner read and the reader applied; None when its
    /// keys are not all memo references or its values are of kinds shapes do not read.
    pub fn learn(sc: &Scan, key_of: impl Fn(u32) -> Option<StrId>) -> Option<Shape> {
        let mut fields = Vec::with_capacity(sc.fields.len());
        for &(k, v) in &sc.fields {
            let Key::Ref(i) = k else { return None };
            let slot = Slot::of(key_of(i)?);
            let ok = match (slot, v) {
                (Slot::Action, Val::Ref(_)) => true,
                (Slot::Addr | Slot::Size | Slot::Stream | Slot::Time, Val::Int(_)) => true,
                (Slot::Frames, Val::Ref(_) | Val::List { .. } | Val::None) => true,
                (Slot::Other, Val::Strings { .. }) => false,
                (Slot::Other, _) => true,
                _ => false,
            };
            if !ok {
                return None;
            }
            fields.push((KeyBytes::of(i), slot));
        }
        (!fields.is_empty() && fields.len() <= MAX_FIELDS).then_some(Shape { fields })
    }

    /// Parse an entry whose EMPTY_DICT was just read (`buf` starts after it).
    pub fn parse(&self, buf: &[u8], e: &mut Entry) -> Option<()> {
        e.n = 0;
        e.ev = Builder::fresh_event();
        let (s, mut p) = store(buf, 0)?;
        if let Some(s) = s {
            e.op(Op::Store(s, What::Released))?;
        }
        if *buf.get(p)? != b'(' {
            return None;
        }
        p += 1;
        for &(k, slot) in &self.fields {
            // Compared as words, not with memcmp.
            let two = buf.get(p..p + 2)?;
            if two[0] != k.bytes[0] || two[1] != k.bytes[1] {
                return None;
            }
            if k.len == 5 && buf.get(p + 2..p + 5)? != &k.bytes[2..5] {
                return None;
            }
            p += k.len as usize;
            p = match slot {
                Slot::Addr => {
                    let (i, q) = int(buf, p)?;
                    if i < 0 {
                        return None;
                    }
                    e.ev.addr = i as u64;
                    q
                }
                Slot::Size => {
                    let (i, q) = int(buf, p)?;
                    if i < 0 || i as u64 > MAX_SIZE {
                        return None;
                    }
                    e.ev.size = i as u64;
                    q
                }
                Slot::Stream => {
                    let (i, q) = int(buf, p)?;
                    e.ev.stream = i;
                    q
                }
                Slot::Time => {
                    let (i, q) = int(buf, p)?;
                    e.ev.time_us = i;
                    q
                }
                Slot::Action => {
                    let (i, q) = memo_ref(buf, p)?;
                    e.op(Op::Action(i))?;
                    q
                }
                Slot::Frames => frames(buf, p, e)?,
                Slot::Other => other(buf, p, e)?,
            };
        }
        if *buf.get(p)? != b'u' {
            return None;
        }
        let (s, p) = store(buf, p + 1)?;
        if let Some(s) = s {
            e.op(Op::Store(s, What::Released))?;
        }
        e.used = p;
        Some(())
    }
}

/// The `frames` value at `p`: a reference, None, or a new list of references.
#[inline(always)]
fn frames(buf: &[u8], p: usize, e: &mut Entry) -> Option<usize> {
    match *buf.get(p)? {
        b'h' | b'j' => {
            let (i, q) = memo_ref(buf, p)?;
            e.op(Op::FramesRef(i))?;
            Some(q)
        }
        b'N' => Some(p + 1),
        b']' => {
            let (before, q) = store(buf, p + 1)?;
            let q = if *buf.get(q)? == b'(' {
                let first = q + 1;
                let (mut r, mut n) = (first, 0u32);
                loop {
                    // Four references at a time where the bytes allow it.
                    if let Some(w) = buf.get(r..r + 20) {
                        let w8 = u64::from_le_bytes(w[..8].try_into().ok()?);
                        if w8 & 0x00ff_00ff_00ff_00ff == 0x0068_0068_0068_0068 {
                            r += 8;
                            n += 4;
                            continue;
                        }
                        if w[0] == b'j' && w[5] == b'j' && w[10] == b'j' && w[15] == b'j' {
                            r += 20;
                            n += 4;
                            continue;
                        }
                    }
                    match *buf.get(r)? {
                        b'h' => r += 2,
                        b'j' => r += 5,
                        b'e' => break,
                        _ => return None,
                    }
                    n += 1;
                }
                if n == 0 {
                    return None;
                }
                e.op(Op::FramesList(first as u32, r as u32, n))?;
                r + 1
            } else {
                // An empty list, unless one item and APPEND follow (left to the scanner).
                single_item(buf, q)?;
                e.op(Op::FramesList(q as u32, q as u32, 0))?;
                q
            };
            let (after, q) = store(buf, q)?;
            if let Some(s) = before {
                e.op(Op::Store(s, What::Stack))?;
            }
            if let Some(s) = after {
                e.op(Op::Store(s, What::Stack))?;
            }
            Some(q)
        }
        _ => None,
    }
}

/// A value the event does not use at `p`: a reference, a scalar, a string, a tuple
/// of up to three scalars, an empty list.
#[inline(always)]
fn other(buf: &[u8], p: usize, e: &mut Entry) -> Option<usize> {
    match *buf.get(p)? {
        b'h' | b'j' => {
            let (i, q) = memo_ref(buf, p)?;
            e.op(Op::Check(i))?;
            Some(q)
        }
        0x8c => {
            let n = *buf.get(p + 1)? as usize;
            let q = p + 2 + n;
            buf.get(p + 2..q)?;
            let (s, r) = store(buf, q)?;
            if let Some(s) = s {
                e.op(Op::Store(s, What::Str((p + 2) as u32, n as u32)))?;
            }
            Some(r)
        }
        b')' => Some(p + 1),
        b']' => {
            // An empty list: its store, then the next key.
            let (s, q) = store(buf, p + 1)?;
            single_item(buf, q)?;
            if let Some(s) = s {
                e.op(Op::Store(s, What::Discarded))?;
            }
            Some(q)
        }
        _ => {
            let mut q = scalar(buf, p)?.1;
            // A tuple of scalars (`pool_id`)?
            let mut n = 1;
            loop {
                match *buf.get(q)? {
                    op @ 0x85..=0x87 if (op - 0x84) as usize == n => {
                        let (s, r) = store(buf, q + 1)?;
                        if let Some(s) = s {
                            e.op(Op::Store(s, What::Discarded))?;
                        }
                        return Some(r);
                    }
                    0x88 | 0x89 | b'N' | b'K' | b'M' | b'J' | 0x8a if n < 3 => {
                        // Another scalar: only ours if a TUPLEn follows it.
                        let r = scalar(buf, q)?.1;
                        if tuple_follows(buf, r, n + 1) {
                            q = r;
                            n += 1;
                        } else {
                            return Some(q);
                        }
                    }
                    _ => return Some(q),
                }
            }
        }
    }
}

/// None when the bytes at `p` are one memo reference and APPEND (a one-item list).
#[inline(always)]
fn single_item(buf: &[u8], p: usize) -> Option<()> {
    match memo_ref(buf, p) {
        Some((_, q)) if *buf.get(q)? == b'a' => None,
        _ => Some(()),
    }
}

fn tuple_follows(buf: &[u8], p: usize, n: usize) -> bool {
    match buf.get(p) {
        Some(&op @ 0x85..=0x87) => (op - 0x84) as usize == n,
        Some(_) if n < 3 => match scalar(buf, p) {
            Some((_, e)) => tuple_follows(buf, e, n + 1),
            None => false,
        },
        _ => false,
    }
}

/// The learned shapes of one reader, most recently used first.
#[derive(Default)]
pub(crate) struct Shapes {
    shapes: Vec<Shape>,
    /// The memo's overwrite count when they were learned (keys must still be keys).
    overwrites: u64,
    /// Entries read with a shape, and parses that failed (to stop trying).
    pub hits: u64,
    pub misses: u64,
}

const MAX_SHAPES: usize = 8;

impl Shapes {
    /// Parse with the first shape that fits; its index moves to the front.
    #[inline]
    pub fn parse(&mut self, buf: &[u8], e: &mut Entry, overwrites: u64) -> Option<()> {
        if overwrites != self.overwrites {
            self.shapes.clear();
            self.overwrites = overwrites;
            return None;
        }
        // Once shapes rarely fit, the scanner alone is cheaper.
        if self.misses > 4096 && self.misses > self.hits {
            return None;
        }
        for k in 0..self.shapes.len() {
            if self.shapes[k].parse(buf, e).is_some() {
                if k > 0 {
                    self.shapes[..=k].rotate_right(1);
                }
                self.hits += 1;
                return Some(());
            }
        }
        self.misses += 1;
        None
    }

    pub fn learn(&mut self, shape: Shape, overwrites: u64) {
        if overwrites != self.overwrites {
            self.shapes.clear();
            self.overwrites = overwrites;
        }
        if self.shapes.iter().any(|s| s.fields == shape.fields) {
            return;
        }
        if self.shapes.len() == MAX_SHAPES {
            self.shapes.pop();
        }
        self.shapes.insert(0, shape);
    }
}

/// Perform a parsed entry's operations in the main reader, as the generic machine
/// would; None (with the stores made listed in `undo`) when anything does not fit.
pub(crate) fn apply(e: &Entry, buf: &[u8], b: &mut Builder, undo: &mut Undo) -> Option<Event> {
    let mut ev = e.ev;
    let mut stack = 0;
    for &op in e.ops() {
        match op {
            Op::Store(s, w) => {
                let i = index(b, s)?;
                match w {
                    What::Released => b.memo_release(i, PV::RELEASED),
                    What::Discarded => b.memo_set_value(i, PV::DISCARDED).ok()?,
                    What::Str(off, n) => {
                        let pv = b.str(text(buf, off, n));
                        b.memo_set_value(i, pv).ok()?
                    }
                    What::Stack => b.memo_set_value(i, PV::stack(stack)).ok()?,
                }
                undo.push(i)?;
            }
            Op::Check(i) => {
                let pv = b.memo_raw(i as u64);
                if pv == PV::UNSET || pv.tag() == T_OBJ {
                    return None;
                }
            }
            Op::Action(i) => {
                let s = b.memo_raw(i as u64).str_id()?;
                ev.action = b.action(s);
            }
            Op::FramesRef(i) => {
                let pv = b.memo_raw(i as u64);
                ev.stack = if pv == PV::NONE { 0 } else { pv.stack_id()? };
            }
            Op::FramesList(from, to, n) => {
                stack = if n == 0 {
                    0
                } else {
                    let bytes = &buf[from as usize..to as usize];
                    match b.raw_stack(bytes) {
                        Some(id) => id,
                        None => {
                            let mut frames: [FrameId; 256] = [0; 256];
                            if n as usize > frames.len() {
                                return None;
                            }
                            let mut p = 0;
                            for f in frames.iter_mut().take(n as usize) {
                                let (i, q) = memo_ref(bytes, p)?;
                                *f = b.memo_raw(i as u64).frame_id()?;
                                p = q;
                            }
                            let id = b.intern_stack(&frames[..n as usize]);
                            b.remember_raw_stack(bytes, id);
                            id
                        }
                    }
                };
                ev.stack = stack;
            }
        }
    }
    Some(ev)
}

/// The main reader's fast path: learned shapes first, then the scanner, whose
/// entries teach new shapes.
#[derive(Default)]
pub(crate) struct FastPath {
    shapes: Shapes,
    entry: Entry,
    scan: Scan,
}

impl FastPath {
    /// The trace entry at the start of `buf` (just after its EMPTY_DICT), folded
    /// into an event, and the bytes it used; None, with nothing changed, when
    /// neither reads it (the generic machine does then).
    pub fn read(&mut self, buf: &[u8], b: &mut Builder) -> Option<(Event, usize)> {
        if self
            .shapes
            .parse(buf, &mut self.entry, b.memo.overwrites)
            .is_some()
        {
            let mut undo = Undo::new();
            match apply(&self.entry, buf, b, &mut undo) {
                Some(ev) => return Some((ev, self.entry.used)),
                None => undo.undo(b),
            }
        }
        scan(buf, &mut self.scan)?;
        let mut undo = Undo::new();
        let Some(ev) = self.scan.apply(buf, b, &mut undo) else {
            undo.undo(b);
            return None;
        };
        if let Some(sh) = Shape::learn(&self.scan, |i| b.memo_raw(i as u64).str_id()) {
            self.shapes.learn(sh, b.memo.overwrites);
        }
        Some((ev, self.scan.used))
    }
}

/// The memo references in `bytes` (a list's BINGETs and LONG_BINGETs).
pub(crate) fn refs(bytes: &[u8], out: &mut Vec<u32>) -> Option<()> {
    out.clear();
    let mut p = 0;
    while p < bytes.len() {
        let (i, q) = memo_ref(bytes, p)?;
        out.push(i);
        p = q;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(fields: &[(u32, Slot)]) -> Shape {
        Shape {
            fields: fields.iter().map(|&(i, s)| (KeyBytes::of(i), s)).collect(),
        }
    }

    #[test]
    fn parses_python_and_cpp_entries() {
        let sh = shape(&[
            (1, Slot::Action),
            (2, Slot::Addr),
            (3, Slot::Size),
            (4, Slot::Other),
            (5, Slot::Frames),
        ]);
        // Python: MEMOIZE after the EMPTY_DICT; a fresh string, a new frames list.
        let mut buf = vec![0x94, b'(', b'h', 1, b'h', 9, b'h', 2, 0x8a, 6];
        buf.extend_from_slice(&[0, 0, 0, 0, 0x7f, 0x00, 0, 0]);
        buf.truncate(buf.len() - 2);
        buf.extend_from_slice(&[b'h', 3, b'J', 0, 2, 0, 0]);
        buf.extend_from_slice(&[b'h', 4, 0x8c, 3, b'N', b'/', b'A', 0x94]);
        buf.extend_from_slice(&[b'h', 5, b']', 0x94, b'(', b'h', 7, b'j', 0, 1, 0, 0, b'e']);
        buf.extend_from_slice(&[b'u', b'}', 0, 0, 0, 0, 0, 0, 0, 0]);
        let mut e = Entry::default();
        sh.parse(&buf, &mut e).expect("parses");
        assert_eq!(e.ev.addr, 0x7f00000000);
        assert_eq!(e.ev.size, 2 << 8);
        assert_eq!(buf[e.used], b'}');
        let ops: Vec<String> = e.ops().iter().map(|o| format!("{o:?}")).collect();
        assert_eq!(ops.len(), 5, "{ops:?}");
        assert!(ops[0].starts_with("Store(Next, Released"));
        assert!(ops[1].starts_with("Action(9)"));
        assert!(ops[2].starts_with("Store(Next, Str"));
        assert!(ops[3].starts_with("FramesList"));
        assert!(ops[4].starts_with("Store(Next, Stack"));
        // A FRAME opcode anywhere fails the parse.
        let mut cut = buf.clone();
        cut.insert(6, 0x95);
        assert!(sh.parse(&cut, &mut e).is_none());
        // Another key fails it.
        let mut other = buf.clone();
        other[3] = 2;
        assert!(sh.parse(&other, &mut e).is_none());
    }

    #[test]
    fn pool_id_tuples_and_cpp_stores() {
        let sh = shape(&[(1, Slot::Action), (6, Slot::Other), (5, Slot::Frames)]);
        // C++: no store after the EMPTY_DICT; a tuple (0, 0); a shared list, BINPUT
        // after it closes; the dict's own BINPUT after SETITEMS.
        let buf = [
            b'(', b'h', 1, b'h', 9, b'h', 6, b'K', 0, b'K', 0, 0x86, b'h', 5, b']', b'(', b'h', 7,
            b'e', b'q', 20, b'u', b'q', 21, b'}', 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let mut e = Entry::default();
        sh.parse(&buf, &mut e).expect("parses");
        let ops: Vec<String> = e.ops().iter().map(|o| format!("{o:?}")).collect();
        assert_eq!(ops.len(), 4, "{ops:?}");
        assert!(ops[1].starts_with("FramesList"));
        assert!(ops[2].starts_with("Store(At(20), Stack"));
        assert!(ops[3].starts_with("Store(At(21), Released"));
        assert_eq!(buf[e.used], b'}');
    }
}
