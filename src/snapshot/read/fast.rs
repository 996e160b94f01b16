//! The fast path for trace entries, tried at each EMPTY_DICT.
//!
//! A trace entry is most of a snapshot: a dict of memo references to key strings,
//! small ints, short strings, a `pool_id` tuple and the `frames` list, which is either
//! a reference to an earlier list (an entry sharing its traceback) or a new list of
//! references to frame dicts. [`scan`] reads the bytes of one such dict, if they have
//! that shape, into a [`Scan`] without touching anything; [`Scan::apply`] then folds
//! it into an [`Event`] exactly as the generic machine would (the same memo indices,
//! the same interned stack). On any other shape nothing has changed and the generic
//! machine reads the dict. Entries of a shape already seen are read faster still
//! (`shape.rs`, which learns shapes from scans); the split read's helper applies
//! scans symbolically (`split.rs`).
//!
//! Both pickle writers are covered: Python's (memo store right after a container
//! opens, `MEMOIZE` or `BINPUT`, FRAME opcodes between any two opcodes, SETITEM/APPEND
//! for single items) and torch::jit::Pickler's (`BINPUT` after a container closes,
//! strings memoized by value).

use super::builder::Builder;
use super::builder::keys::*;
use super::value::*;
use crate::snapshot::model::{Event, FrameId, StrId};

/// A memo store: MEMOIZE (the next index) or PUT with an explicit index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Store {
    Next,
    At(u32),
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Key {
    Ref(u32),
    /// An inline string: its bytes in the scanned window.
    Str(u32, u32, Option<Store>),
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Val {
    Ref(u32),
    Int(i64),
    Bool(bool),
    None,
    Str(u32, u32, Option<Store>),
    /// A tuple of scalars (`pool_id`): dropped.
    Tuple(Option<Store>),
    /// A list of memo references (`frames`): `items` indexes into `Scan::refs`;
    /// `raw` the bytes of the references in the window (empty when a FRAME cut them).
    List {
        before: Option<Store>,
        after: Option<Store>,
        start: u32,
        len: u32,
        raw: (u32, u32),
    },
    /// A list of strings (`forward_frames`): dropped, its strings in `Scan::strs`.
    Strings {
        before: Option<Store>,
        after: Option<Store>,
        start: u32,
        len: u32,
    },
}

#[derive(Default, Debug)]
pub(crate) struct Scan {
    pub dict_before: Option<Store>,
    pub dict_after: Option<Store>,
    pub fields: Vec<(Key, Val)>,
    pub refs: Vec<u32>,
    pub strs: Vec<(u32, u32, Option<Store>)>,
    /// Bytes used, from just after the EMPTY_DICT.
    pub used: usize,
}

const MAX_FIELDS: usize = 24;

#[inline(always)]
fn skip_frames(buf: &[u8], mut p: usize) -> Option<usize> {
    while *buf.get(p)? == 0x95 {
        p += 9;
    }
    Some(p)
}

#[inline(always)]
pub(crate) fn u32_at(buf: &[u8], p: usize) -> Option<u32> {
    Some(u32::from_le_bytes(buf.get(p..p + 4)?.try_into().ok()?))
}

/// An optional memo store at `p`: (store, bytes used).
#[inline(always)]
fn store(buf: &[u8], p: usize) -> Option<(Option<Store>, usize)> {
    let q = skip_frames(buf, p)?;
    Some(match buf[q] {
        0x94 => (Some(Store::Next), q + 1 - p),
        b'q' => (Some(Store::At(*buf.get(q + 1)? as u32)), q + 2 - p),
        b'r' => (Some(Store::At(u32_at(buf, q + 1)?)), q + 5 - p),
        _ => (None, 0),
    })
}

/// A memo reference at `p` (after FRAMEs): (index, end).
#[inline(always)]
pub(crate) fn memo_ref(buf: &[u8], p: usize) -> Option<(u32, usize)> {
    match *buf.get(p)? {
        b'h' => Some((*buf.get(p + 1)? as u32, p + 2)),
        b'j' => Some((u32_at(buf, p + 1)?, p + 5)),
        _ => None,
    }
}

/// An inline string at `p`: (offset, length, end), before its memo store.
#[inline(always)]
fn string(buf: &[u8], p: usize) -> Option<(u32, u32, usize)> {
    match *buf.get(p)? {
        0x8c => {
            let n = *buf.get(p + 1)? as usize;
            buf.get(p + 2..p + 2 + n)?;
            Some(((p + 2) as u32, n as u32, p + 2 + n))
        }
        b'X' => {
            let n = u32_at(buf, p + 1)? as usize;
            buf.get(p + 5..p + 5 + n)?;
            Some(((p + 5) as u32, n as u32, p + 5 + n))
        }
        _ => None,
    }
}

/// A scalar at `p`: (value, end).
#[inline(always)]
pub(crate) fn scalar(buf: &[u8], p: usize) -> Option<(Val, usize)> {
    Some(match *buf.get(p)? {
        b'K' => (Val::Int(*buf.get(p + 1)? as i64), p + 2),
        b'M' => (
            Val::Int(u16::from_le_bytes(buf.get(p + 1..p + 3)?.try_into().ok()?) as i64),
            p + 3,
        ),
        b'J' => (Val::Int(u32_at(buf, p + 1)? as i32 as i64), p + 5),
        0x8a => {
            let n = *buf.get(p + 1)? as usize;
            if n > 8 {
                return None;
            }
            let v = if n == 0 {
                0
            } else if let Some(w) = buf.get(p + 2..p + 10) {
                // One unaligned word, the bytes past the integer shifted out.
                let shift = 64 - 8 * n as u32;
                (i64::from_le_bytes(w.try_into().ok()?) << shift) >> shift
            } else {
                let mut a = [0u8; 8];
                a[..n].copy_from_slice(buf.get(p + 2..p + 2 + n)?);
                let shift = 64 - 8 * n as u32;
                (i64::from_le_bytes(a) << shift) >> shift
            };
            (Val::Int(v), p + 2 + n)
        }
        0x88 => (Val::Bool(true), p + 1),
        0x89 => (Val::Bool(false), p + 1),
        b'N' => (Val::None, p + 1),
        _ => return None,
    })
}

impl Scan {
    fn value(&mut self, buf: &[u8], p: usize) -> Option<(Val, usize)> {
        let p = skip_frames(buf, p)?;
        if let Some((i, e)) = memo_ref(buf, p) {
            return Some((Val::Ref(i), e));
        }
        if let Some((off, n, e)) = string(buf, p) {
            let (s, used) = store(buf, e)?;
            return Some((Val::Str(off, n, s), e + used));
        }
        match buf[p] {
            b']' => return self.list(buf, p + 1),
            b')' => return Some((Val::Tuple(None), p + 1)),
            _ => {}
        }
        // A scalar, or a tuple of one to three scalars.
        let (v, mut e) = scalar(buf, p)?;
        let mut n = 1;
        loop {
            let q = skip_frames(buf, e)?;
            match buf[q] {
                0x85..=0x87 if (buf[q] - 0x84) as usize == n => {
                    let (s, used) = store(buf, q + 1)?;
                    return Some((Val::Tuple(s), q + 1 + used));
                }
                _ if n < 3 => match scalar(buf, q) {
                    // Only a tuple if a TUPLEn follows; else the next scalar is not ours.
                    Some((_, e2)) if self.tuple_follows(buf, e2, n + 1) => {
                        e = e2;
                        n += 1;
                    }
                    _ => return Some((v, e)),
                },
                _ => return Some((v, e)),
            }
        }
    }

    fn tuple_follows(&self, buf: &[u8], p: usize, n: usize) -> bool {
        let Some(q) = skip_frames(buf, p) else {
            return false;
        };
        match buf.get(q) {
            Some(&op @ 0x85..=0x87) => (op - 0x84) as usize == n,
            Some(_) if n < 3 => match scalar(buf, q) {
                Some((_, e)) => self.tuple_follows(buf, e, n + 1),
                None => false,
            },
            _ => false,
        }
    }

    /// A list after its EMPTY_LIST at `p`.
    fn list(&mut self, buf: &[u8], p: usize) -> Option<(Val, usize)> {
        let (before, used) = store(buf, p)?;
        let mut p = skip_frames(buf, p + used)?;
        let (ref_start, str_start) = (self.refs.len(), self.strs.len());
        let mut batch = false;
        let mut raw = (0u32, 0u32);
        if buf[p] == b'(' {
            batch = true;
            p += 1;
            // The common case first: a batch of memo references to frame dicts.
            let raw_start = p;
            let mut clean = true;
            loop {
                match *buf.get(p)? {
                    b'h' => {
                        self.refs.push(*buf.get(p + 1)? as u32);
                        p += 2;
                    }
                    b'j' => {
                        self.refs.push(u32_at(buf, p + 1)?);
                        p += 5;
                    }
                    0x95 => {
                        clean = false;
                        p += 9
                    }
                    _ => break,
                }
            }
            if clean && buf[p] == b'e' {
                raw = (raw_start as u32, p as u32);
            }
        }
        loop {
            p = skip_frames(buf, p)?;
            if batch && buf[p] == b'e' {
                p += 1;
                break;
            }
            let item_end = if let Some((i, e)) = memo_ref(buf, p) {
                self.refs.push(i);
                e
            } else if let Some((off, n, e)) = string(buf, p) {
                let (s, used) = store(buf, e)?;
                self.strs.push((off, n, s));
                e + used
            } else if !batch {
                // An empty list: EMPTY_LIST (and its store), nothing added.
                break;
            } else {
                return None;
            };
            if !batch {
                // One item and APPEND; else the list was empty and this is the next key.
                let q = skip_frames(buf, item_end)?;
                if buf[q] == b'a' {
                    p = q + 1;
                } else {
                    self.refs.truncate(ref_start);
                    self.strs.truncate(str_start);
                }
                break;
            }
            p = item_end;
        }
        let (nr, ns) = (self.refs.len() - ref_start, self.strs.len() - str_start);
        if nr > 0 && ns > 0 {
            return None;
        }
        let (after, used) = store(buf, p)?;
        let val = if ns > 0 {
            Val::Strings {
                before,
                after,
                start: str_start as u32,
                len: ns as u32,
            }
        } else {
            Val::List {
                before,
                after,
                start: ref_start as u32,
                len: nr as u32,
                raw,
            }
        };
        Some((val, p + used))
    }

    fn key(&mut self, buf: &[u8], p: usize) -> Option<(Key, usize)> {
        if let Some((i, e)) = memo_ref(buf, p) {
            return Some((Key::Ref(i), e));
        }
        let (off, n, e) = string(buf, p)?;
        let (s, used) = store(buf, e)?;
        Some((Key::Str(off, n, s), e + used))
    }
}

/// Scan a trace-entry dict whose EMPTY_DICT was just read (`buf` starts after it).
pub(crate) fn scan(buf: &[u8], sc: &mut Scan) -> Option<()> {
    sc.fields.clear();
    sc.refs.clear();
    sc.strs.clear();
    let (before, used) = store(buf, 0)?;
    sc.dict_before = before;
    let mut p = skip_frames(buf, used)?;
    if buf[p] != b'(' {
        return None;
    }
    p += 1;
    loop {
        p = skip_frames(buf, p)?;
        if buf[p] == b'u' {
            p += 1;
            break;
        }
        if sc.fields.len() == MAX_FIELDS {
            return None;
        }
        let (k, e) = sc.key(buf, p)?;
        let (v, e) = sc.value(buf, e)?;
        sc.fields.push((k, v));
        p = e;
    }
    let (after, used) = store(buf, p)?;
    sc.dict_after = after;
    sc.used = p + used;
    Some(())
}

/// Memo stores made while applying a scan, to undo when it fails.
pub(crate) struct Undo {
    idx: [u64; 64],
    n: usize,
}

impl Undo {
    pub fn new() -> Self {
        Undo { idx: [0; 64], n: 0 }
    }
    pub(crate) fn push(&mut self, i: u64) -> Option<()> {
        if self.n == self.idx.len() {
            return None;
        }
        self.idx[self.n] = i;
        self.n += 1;
        Some(())
    }
    pub fn undo(&self, b: &mut Builder) {
        for &i in self.idx[..self.n].iter().rev() {
            b.memo_unset(i);
        }
    }
}

/// The index a store takes in the main reader: MEMOIZE's next one, or an explicit
/// PUT to exactly that index (anything else is left to the generic machine).
#[inline(always)]
pub(crate) fn index(b: &Builder, s: Store) -> Option<u64> {
    if b.memo_has_gaps() {
        return None;
    }
    let next = b.memo_len();
    match s {
        Store::Next => Some(next),
        Store::At(i) if i as u64 == next => Some(next),
        _ => None,
    }
}

fn put(b: &mut Builder, undo: &mut Undo, s: Option<Store>, v: PV) -> Option<()> {
    if let Some(s) = s {
        let i = index(b, s)?;
        b.memo_set_value(i, v).ok()?;
        undo.push(i)?;
    }
    Some(())
}

pub(crate) fn text(buf: &[u8], off: u32, n: u32) -> &str {
    let bytes = &buf[off as usize..(off + n) as usize];
    std::str::from_utf8(bytes).unwrap_or("\u{fffd}")
}

impl Scan {
    /// Fold the scanned entry into an event, as the generic machine would.
    pub(crate) fn apply(&self, buf: &[u8], b: &mut Builder, undo: &mut Undo) -> Option<Event> {
        if let Some(s) = self.dict_before {
            let i = index(b, s)?;
            b.memo_release(i, PV::RELEASED);
            undo.push(i)?;
        }
        let mut ev = Builder::fresh_event();
        let mut stack_buf: [FrameId; 256] = [0; 256];
        for (n, &(k, v)) in self.fields.iter().enumerate() {
            let key: StrId = match k {
                Key::Ref(i) => b.memo_raw(i as u64).str_id()?,
                Key::Str(off, len, s) => {
                    let pv = b.str(text(buf, off, len));
                    put(b, undo, s, pv)?;
                    pv.str_id()?
                }
            };
            // torch writes `action` first; a dict that does not is not ours.
            if n == 0 && key != K_ACTION {
                return None;
            }
            let pv = match v {
                Val::Ref(i) => {
                    // A dropped container (an earlier `pool_id` tuple) is fine where
                    // it is ignored; apply_event refuses it anywhere else.
                    let pv = b.memo_raw(i as u64);
                    if pv == PV::UNSET || pv.tag() == T_OBJ {
                        return None;
                    }
                    pv
                }
                Val::Int(i) => b.int_pv(i),
                Val::Bool(x) => PV::bool(x),
                Val::None => PV::NONE,
                Val::Str(off, len, s) => {
                    let pv = b.str(text(buf, off, len));
                    put(b, undo, s, pv)?;
                    pv
                }
                Val::Tuple(s) => {
                    put(b, undo, s, PV::DISCARDED)?;
                    PV::DISCARDED
                }
                Val::List {
                    before,
                    after,
                    start,
                    len,
                    raw,
                } => {
                    // Reserve the list's index first (Python stores it before its items).
                    let reserved = match before {
                        Some(s) => Some(index(b, s)?),
                        None => None,
                    };
                    let items = &self.refs[start as usize..(start + len) as usize];
                    if key != K_FRAMES && !items.is_empty() {
                        return None;
                    }
                    let bytes = &buf[raw.0 as usize..raw.1 as usize];
                    // The same references as an earlier list: the same stack.
                    let id = match (!bytes.is_empty()).then(|| b.raw_stack(bytes)).flatten() {
                        Some(id) => id,
                        None => {
                            if items.len() > stack_buf.len() {
                                return None;
                            }
                            for (j, &r) in items.iter().enumerate() {
                                stack_buf[j] = b.memo_raw(r as u64).frame_id()?;
                            }
                            let id = b.intern_stack(&stack_buf[..items.len()]);
                            if !bytes.is_empty() {
                                b.remember_raw_stack(bytes, id);
                            }
                            id
                        }
                    };
                    let pv = PV::stack(id);
                    if let Some(i) = reserved {
                        b.memo_set_value(i, pv).ok()?;
                        undo.push(i)?;
                    }
                    put(b, undo, after, pv)?;
                    pv
                }
                Val::Strings {
                    before,
                    after,
                    start,
                    len,
                } => {
                    put(b, undo, before, PV::DISCARDED)?;
                    for &(off, n, s) in &self.strs[start as usize..(start + len) as usize] {
                        let pv = b.str(text(buf, off, n));
                        put(b, undo, s, pv)?;
                    }
                    put(b, undo, after, PV::DISCARDED)?;
                    PV::DISCARDED
                }
            };
            b.apply_event(&mut ev, PV::str(key), pv).ok()?;
        }
        if let Some(s) = self.dict_after {
            let i = index(b, s)?;
            b.memo_release(i, PV::RELEASED);
            undo.push(i)?;
        }
        Some(ev)
    }
}

/// Bytes buffered before trying an entry (an entry cut by the window is left to the
/// generic machine).
pub(crate) const WINDOW: usize = 1 << 14;
