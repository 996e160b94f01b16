//! Split reads: a helper thread reads the second half of a long trace while the main
//! reader reads the first.
//!
//! The helper starts at a trace-entry boundary about half-way through the file and
//! reads entries with learned shapes and the fast path's scanner, *symbolically*: it
//! cannot know the
//! memo's length where it starts (protocol 4's MEMOIZE numbers implicitly), so every
//! memo reference is kept as its raw index and every memo store it makes is numbered
//! from zero. Key strings are resolved from the main reader's published memo; actions
//! and stacks are resolved only at take-over, when the main reader reaches the
//! helper's first byte and knows the memo's length `L` there: an index below `L` is
//! the main reader's entry, index `L + k` is the helper's k-th store.
//!
//! The main reader takes the helper's part only if it reaches that byte exactly, at
//! an EMPTY_DICT inside a batch of trace entries, and every reference resolves (to a
//! string for an action, a stack for `frames`, frames inside a new stack); otherwise
//! it reads everything itself. Either way the snapshot is the same.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};

use super::builder::keys::*;
use super::builder::{Builder, MAX_SIZE};
use super::fast::{Key, Scan, Store, Val, WINDOW, scan};
use super::input::{Input, Source};
use super::memo::{Local, Overlay};
use super::shape::{self, Entry, Op, Shape, Shapes, What};
use crate::snapshot::model::{Action, Event, FxMap, Interner, StrId};

/// A key written out in an entry (not a memo reference): where its memo store goes, and its text.
type KeyText = (Option<Store>, String);

/// The main reader's key strings (memo index and text) and where the helper starts looking.
pub struct Publication {
    strings: Vec<(u32, String)>,
    target: u64,
}

#[derive(Clone, Copy)]
enum ActionSym {
    /// Already in the event.
    Known,
    Ref(u32),
}

#[derive(Clone, Copy)]
enum StackSym {
    Empty,
    Helper(u32),
    Ref(u32),
}

/// An entry's symbolic action and stack, packed beside its event: the action's
/// memo index (bit 63 set) and the stack (kind in bits 30-31, value below).
fn pack_sym(a: ActionSym, s: StackSym) -> u64 {
    let hi = match a {
        ActionSym::Known => 0,
        ActionSym::Ref(i) => (1u64 << 31) | i as u64,
    };
    let lo = match s {
        StackSym::Empty => 0,
        StackSym::Helper(h) => (1u64 << 30) | h as u64,
        StackSym::Ref(i) => (2u64 << 30) | i as u64,
    };
    (hi << 32) | lo
}

fn unpack_sym(x: u64) -> (Option<u32>, StackSym) {
    let hi = (x >> 32) as u32;
    let a = (hi & (1 << 31) != 0).then_some(hi & !(1 << 31));
    let lo = x as u32;
    let v = lo & ((1 << 30) - 1);
    let s = match lo >> 30 {
        0 => StackSym::Empty,
        1 => StackSym::Helper(v),
        _ => StackSym::Ref(v),
    };
    (a, s)
}

/// Indices that fit the packing (larger memos are left to the main reader).
const MAX_SYM: u32 = 1 << 30;

/// What the helper read: the trace entries from `start` (an EMPTY_DICT) to `stop`
/// (just after an entry), and the memo stores those bytes made.
pub struct HelperResult {
    start: u64,
    stop: u64,
    events: Vec<Event>,
    syms: Vec<u64>,
    dropped: u64,
    locals: Vec<Local>,
    strs: Vec<String>,
    /// Explicit PUT indices: (store number, index), checked against `L + k`.
    explicit: Vec<(u32, u32)>,
    /// New stacks: the memo indices of their frames.
    stacks: Vec<Box<[u32]>>,
    seen: (bool, bool, bool),
}

/// The main reader's side of a split read.
pub struct SplitMain {
    publish_after: u64,
    target: u64,
    tx: Option<Sender<Publication>>,
    rx: Receiver<HelperResult>,
    start: Arc<AtomicU64>,
    cancel: Arc<AtomicBool>,
    done: bool,
    waited: bool,
    taken_events: u64,
}

/// `start` before the helper has decided, and after it gave up.
const NOT_YET: u64 = u64::MAX;
const GAVE_UP: u64 = u64::MAX - 1;

/// Tells the main reader the helper gave up unless it posted a start.
struct GiveUpOnDrop<'a>(&'a AtomicU64);

impl Drop for GiveUpOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self
            .0
            .compare_exchange(NOT_YET, GAVE_UP, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// The helper's part, resolved in the main reader's terms, for it to take.
pub(crate) struct Taken {
    pub events: Vec<Event>,
    pub dropped: u64,
    pub seen: (bool, bool, bool),
    /// The helper's memo stores, from the main reader's next index on.
    pub overlay: Overlay,
    /// Where the main reader goes on.
    pub stop: u64,
}

impl SplitMain {
    /// Inside a batch of trace entries (at least one read), at `offset`: publish
    /// the key strings once, for the helper to start on.
    /// Would [`publish`](Self::publish) at `offset` send anything?
    pub(crate) fn wants_publication(&self, offset: u64) -> bool {
        self.tx.is_some() && offset >= self.publish_after
    }

    pub(crate) fn publish(&mut self, offset: u64, b: &Builder) {
        if offset < self.publish_after {
            return;
        }
        let Some(tx) = self.tx.take() else {
            return;
        };
        let strings = b
            .memo
            .values()
            .into_iter()
            .filter_map(|(i, v)| v.str_id().map(|s| (i, b.strings.get(s).to_string())))
            .collect();
        self.target = self.target.max(offset);
        let _ = tx.send(Publication {
            strings,
            target: self.target,
        });
    }

    /// At an EMPTY_DICT at `off`: is this where the helper started? The first one
    /// past the helper's target waits (briefly) for the helper to say where it
    /// starts, so that the outcome does not depend on which thread is faster.
    pub(crate) fn at_start(&mut self, off: u64) -> bool {
        if self.done {
            return false;
        }
        if !self.waited && self.tx.is_none() && off >= self.target {
            self.waited = true;
            let t0 = std::time::Instant::now();
            while self.start.load(Ordering::Acquire) == NOT_YET
                && t0.elapsed() < std::time::Duration::from_secs(5)
            {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        let start = self.start.load(Ordering::Acquire);
        if start == GAVE_UP || (start != NOT_YET && off > start) {
            self.decline();
            return false;
        }
        start == off
    }

    /// The main reader reads on by itself.
    pub(crate) fn decline(&mut self) {
        self.done = true;
        self.cancel.store(true, Ordering::Release);
    }

    /// At the helper's start (`off`, inside a batch of trace entries): its part,
    /// resolved against `b`; None, with nothing changed, when anything does not
    /// resolve.
    pub(crate) fn take(&mut self, off: u64, b: &mut Builder) -> Option<Taken> {
        self.done = true;
        let mut res = self.rx.recv().ok()?;
        if res.start != off || res.stop <= res.start {
            return None;
        }
        let stack_ids = resolve(b, &mut res)?;
        self.taken_events = res.events.len() as u64 + res.dropped;
        let str_ids = res.strs.iter().map(|t| b.strings.intern(t)).collect();
        Some(Taken {
            events: res.events,
            dropped: res.dropped,
            seen: res.seen,
            overlay: Overlay::new(res.locals, str_ids, stack_ids),
            stop: res.stop,
        })
    }

    /// The read is over: stop the helper; how many trace entries came from it.
    pub(crate) fn finish(self) -> u64 {
        self.cancel.store(true, Ordering::Release);
        self.taken_events
    }
}

/// Start the helper thread in `scope` for `path` (`total` bytes), to start near
/// `at` of the file; the main reader's side.
pub(crate) fn spawn<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    path: &'scope Path,
    total: u64,
    max_events: usize,
    at: f64,
) -> SplitMain {
    let (pub_tx, pub_rx) = channel();
    let (res_tx, res_rx) = channel();
    let start = Arc::new(AtomicU64::new(NOT_YET));
    let cancel = Arc::new(AtomicBool::new(false));
    let (start2, cancel2) = (start.clone(), cancel.clone());
    scope.spawn(move || helper(path, total, max_events, pub_rx, res_tx, &start2, &cancel2));
    SplitMain {
        publish_after: total / 50,
        target: (total as f64 * at) as u64,
        tx: Some(pub_tx),
        rx: res_rx,
        start,
        cancel,
        done: false,
        waited: false,
        taken_events: 0,
    }
}

/// Resolve the helper's part in the main reader's terms: its events in place; returns
/// the interned stacks its memo stores refer to. None (nothing changed) if anything
/// does not resolve.
fn resolve(b: &mut Builder, res: &mut HelperResult) -> Option<Vec<u32>> {
    if b.memo_has_gaps() {
        // The helper numbered its stores from a count it could not know.
        return None;
    }
    let base = b.memo_len();
    if res
        .explicit
        .iter()
        .any(|&(k, idx)| idx as u64 != base + k as u64)
    {
        return None;
    }
    let n_local = res.locals.len() as u64;
    let locals = &res.locals;
    let local_of = |i: u32| -> Option<Local> {
        let i = i as u64;
        (i >= base && i < base + n_local).then(|| locals[(i - base) as usize])
    };
    // Check everything before changing anything.
    let mut stack_frames = Vec::with_capacity(res.stacks.len());
    for st in &res.stacks {
        let mut frames = Vec::with_capacity(st.len());
        for &i in st.iter() {
            if local_of(i).is_some() {
                return None;
            }
            frames.push(b.memo_raw(i as u64).frame_id()?);
        }
        stack_frames.push(frames);
    }
    for &x in &res.syms {
        let (a, s) = unpack_sym(x);
        if let Some(i) = a {
            match local_of(i) {
                Some(l) if l.is_str() => {}
                Some(_) => return None,
                None => {
                    b.memo_raw(i as u64).str_id()?;
                }
            }
        }
        if let StackSym::Ref(i) = s {
            match local_of(i) {
                Some(l) if l.is_stack() => {}
                Some(_) => return None,
                None => {
                    b.memo_raw(i as u64).stack_id()?;
                }
            }
        }
    }
    let stack_ids: Vec<u32> = stack_frames.iter().map(|f| b.intern_stack(f)).collect();
    drop(stack_frames);
    let syms = std::mem::take(&mut res.syms);
    let strs = &res.strs;
    for (ev, x) in res.events.iter_mut().zip(syms) {
        let (a, s) = unpack_sym(x);
        if let Some(i) = a {
            let id = match local_of(i) {
                Some(l) => b.strings.intern(&strs[l.value() as usize]),
                None => b.memo_raw(i as u64).str_id()?,
            };
            ev.action = b.action(id);
        }
        ev.stack = match s {
            StackSym::Empty => 0,
            StackSym::Helper(h) => stack_ids[h as usize],
            StackSym::Ref(i) => match local_of(i) {
                Some(l) if l.kind() == 3 => stack_ids[l.value() as usize],
                Some(_) => 0,
                None => b.memo_raw(i as u64).stack_id()?,
            },
        };
    }
    Some(stack_ids)
}

/// The helper's symbolic reading of trace entries.
struct Helper {
    keys: FxMap<u32, StrId>,
    names: Interner,
    locals: Vec<Local>,
    strs: Vec<String>,
    explicit: Vec<(u32, u32)>,
    stacks: Vec<Box<[u32]>>,
    stack_map: FxMap<Box<[u32]>, u32>,
    /// New stacks by the bytes of their references (entries read with a shape).
    raw_stacks: FxMap<Box<[u8]>, u32>,
    scratch: Vec<u32>,
    events: Vec<Event>,
    syms: Vec<u64>,
    dropped: u64,
    max_events: usize,
    seen: (bool, bool, bool),
}

impl Helper {
    fn store(&mut self, s: Option<Store>, l: Local) {
        if let Some(s) = s {
            if let Store::At(i) = s {
                self.explicit.push((self.locals.len() as u32, i));
            }
            self.locals.push(l);
        }
    }

    fn store_str(&mut self, s: Option<Store>, text: &str) {
        if s.is_some() {
            let l = Local::str(self.strs.len() as u32);
            self.strs.push(text.to_string());
            self.store(s, l);
        }
    }

    fn key(&self, k: Key, buf: &[u8]) -> Option<(StrId, Option<KeyText>)> {
        match k {
            Key::Ref(i) => self.keys.get(&i).map(|&s| (s, None)),
            Key::Str(off, n, s) => {
                let t = std::str::from_utf8(&buf[off as usize..(off + n) as usize]).ok()?;
                Some((self.names.lookup(t)?, Some((s, t.to_string()))))
            }
        }
    }

    /// One scanned entry; false when it cannot be read symbolically.
    fn entry(&mut self, sc: &Scan, buf: &[u8]) -> bool {
        self.all_or_nothing(|s| s.entry_inner(sc, buf))
    }

    /// One entry parsed with a shape; false (nothing changed) when it cannot be read
    /// symbolically.
    fn shaped(&mut self, e: &Entry, buf: &[u8]) -> bool {
        self.all_or_nothing(|s| s.shaped_inner(e, buf))
    }

    /// Run `read` on one entry; when it cannot finish (or the symbol table is full),
    /// take back every local, explicit store and stack it added.
    fn all_or_nothing(&mut self, read: impl FnOnce(&mut Self) -> Option<()>) -> bool {
        let mark = (self.locals.len(), self.explicit.len(), self.stacks.len());
        let ok = self.locals.len() < MAX_SYM as usize && read(self).is_some();
        if !ok {
            self.locals.truncate(mark.0);
            self.explicit.truncate(mark.1);
            self.stacks.truncate(mark.2);
            self.stack_map.retain(|_, v| (*v as usize) < mark.2);
            self.raw_stacks.retain(|_, v| (*v as usize) < mark.2);
        }
        ok
    }

    fn shaped_inner(&mut self, e: &Entry, buf: &[u8]) -> Option<()> {
        let ev = e.ev;
        let mut action = ActionSym::Known;
        let mut stack = StackSym::Empty;
        let mut local = Local::EMPTY_STACK;
        for &op in e.ops() {
            match op {
                Op::Store(s, w) => {
                    let l = match w {
                        What::Released => Local::RELEASED,
                        What::Discarded => Local::DISCARDED,
                        What::Stack => local,
                        What::Str(off, n) => {
                            let b = &buf[off as usize..(off + n) as usize];
                            let t = std::str::from_utf8(b).ok()?;
                            self.store_str(Some(s), t);
                            continue;
                        }
                    };
                    self.store(Some(s), l);
                }
                Op::Check(_) => {}
                Op::Action(i) if i < MAX_SYM => action = ActionSym::Ref(i),
                Op::FramesRef(i) if i < MAX_SYM => stack = StackSym::Ref(i),
                Op::Action(_) | Op::FramesRef(_) => return None,
                Op::FramesList(_, _, 0) => {
                    stack = StackSym::Empty;
                    local = Local::EMPTY_STACK;
                }
                Op::FramesList(from, to, _) => {
                    let bytes = &buf[from as usize..to as usize];
                    let h = match self.raw_stacks.get(bytes) {
                        Some(&h) => h,
                        None => {
                            let mut items = std::mem::take(&mut self.scratch);
                            shape::refs(bytes, &mut items)?;
                            let h = match self.stack_map.get(&items[..]) {
                                Some(&h) => h,
                                None => {
                                    let h = self.stacks.len() as u32;
                                    let b: Box<[u32]> = items[..].into();
                                    self.stack_map.insert(b.clone(), h);
                                    self.stacks.push(b);
                                    h
                                }
                            };
                            self.scratch = items;
                            self.raw_stacks.insert(bytes.into(), h);
                            h
                        }
                    };
                    stack = StackSym::Helper(h);
                    local = Local::stack(h);
                }
            }
        }
        self.push_event(ev, action, stack);
        Some(())
    }

    fn push_event(&mut self, ev: Event, action: ActionSym, stack: StackSym) {
        if self.max_events == 0 {
            self.dropped += 1;
            return;
        }
        self.events.push(ev);
        self.syms.push(pack_sym(action, stack));
        // The oldest are dropped in bulk (a ring would need rotating at the end).
        if self.events.len() >= self.max_events.saturating_add(self.max_events / 2) {
            self.trim();
        }
    }

    /// Keep the newest `max_events`.
    fn trim(&mut self) {
        let excess = self.events.len().saturating_sub(self.max_events);
        self.events.drain(..excess);
        self.syms.drain(..excess);
        self.dropped += excess as u64;
    }

    fn entry_inner(&mut self, sc: &Scan, buf: &[u8]) -> Option<()> {
        self.store(sc.dict_before, Local::RELEASED);
        let mut ev = Builder::fresh_event();
        let mut action = ActionSym::Known;
        let mut stack = StackSym::Empty;
        for (n, &(k, v)) in sc.fields.iter().enumerate() {
            let (key, inline) = self.key(k, buf)?;
            if n == 0 && key != K_ACTION {
                return None;
            }
            if let Some((s, t)) = inline {
                self.store_str(s, &t);
            }
            match (key, v) {
                (K_ACTION, Val::Ref(i)) if i < MAX_SYM => action = ActionSym::Ref(i),
                (K_ACTION, Val::Str(off, len, s)) => {
                    let t = std::str::from_utf8(&buf[off as usize..(off + len) as usize]).ok()?;
                    ev.action = Action::from_name(t);
                    action = ActionSym::Known;
                    self.store_str(s, t);
                }
                (K_ADDR | K_DEVICE_FREE, Val::Int(i)) if i >= 0 => ev.addr = i as u64,
                (K_SIZE, Val::Int(i)) if i >= 0 && i as u64 <= MAX_SIZE => ev.size = i as u64,
                (K_STREAM, Val::Int(i)) => ev.stream = i,
                (K_TIME_US, Val::Int(i)) => {
                    ev.time_us = i;
                    self.seen.0 = true;
                }
                (K_FRAMES, Val::Ref(i)) if i < MAX_SYM => stack = StackSym::Ref(i),
                (K_FRAMES, Val::None) => stack = StackSym::Empty,
                (
                    K_FRAMES,
                    Val::List {
                        before,
                        after,
                        start,
                        len,
                        ..
                    },
                ) => {
                    let items = &sc.refs[start as usize..(start + len) as usize];
                    stack = if items.is_empty() {
                        StackSym::Empty
                    } else if let Some(&h) = self.stack_map.get(items) {
                        StackSym::Helper(h)
                    } else {
                        let h = self.stacks.len() as u32;
                        let b: Box<[u32]> = items.into();
                        self.stack_map.insert(b.clone(), h);
                        self.stacks.push(b);
                        StackSym::Helper(h)
                    };
                    let local = match stack {
                        StackSym::Helper(h) => Local::stack(h),
                        _ => Local::EMPTY_STACK,
                    };
                    if before.is_some() && after.is_some() {
                        return None;
                    }
                    self.store(before.or(after), local);
                }
                (K_COMPILE_CONTEXT | K_USER_METADATA | K_POOL_ID | K_FORWARD_FRAMES, _)
                | (_, Val::Tuple(_))
                | (_, Val::Strings { .. }) => {
                    if key == K_COMPILE_CONTEXT {
                        self.seen.1 = true;
                    }
                    if key == K_USER_METADATA {
                        self.seen.2 = true;
                    }
                    self.ignored(v, sc, buf)?;
                }
                (
                    K_ACTION | K_ADDR | K_DEVICE_FREE | K_SIZE | K_STREAM | K_TIME_US | K_FRAMES,
                    _,
                ) => {
                    return None;
                }
                _ => self.ignored(v, sc, buf)?,
            }
        }
        self.store(sc.dict_after, Local::RELEASED);
        self.push_event(ev, action, stack);
        Some(())
    }

    /// A value the event does not use: only its memo stores count.
    fn ignored(&mut self, v: Val, sc: &Scan, buf: &[u8]) -> Option<()> {
        match v {
            Val::Str(off, len, s) => {
                let t = std::str::from_utf8(&buf[off as usize..(off + len) as usize]).ok()?;
                self.store_str(s, t);
            }
            Val::Tuple(s) => self.store(s, Local::DISCARDED),
            Val::List {
                before, after, len, ..
            } => {
                if len > 0 {
                    return None;
                }
                self.store(before, Local::DISCARDED);
                self.store(after, Local::DISCARDED);
            }
            Val::Strings {
                before,
                after,
                start,
                len,
            } => {
                self.store(before, Local::DISCARDED);
                for &(off, n, s) in &sc.strs[start as usize..(start + len) as usize] {
                    let t = std::str::from_utf8(&buf[off as usize..(off + n) as usize]).ok()?;
                    self.store_str(s, t);
                }
                self.store(after, Local::DISCARDED);
            }
            _ => {}
        }
        Some(())
    }
}

/// Past any FRAME opcodes in the input.
fn skip_frames<R: Source>(inp: &mut Input<R>) -> Option<u8> {
    loop {
        if inp.end - inp.pos < 16 && inp.fill(16).is_err() {
            return None;
        }
        let op = *inp.buf.get(inp.pos)?;
        if op != 0x95 {
            return Some(op);
        }
        inp.pos += 9;
    }
}

/// Read entries from `c` (an EMPTY_DICT) on; returns the offset after the last
/// whole entry (`c` when the first one does not read).
fn run_helper<R: Source>(
    inp: &mut Input<R>,
    h: &mut Helper,
    start: &AtomicU64,
    cancel: &AtomicBool,
) -> u64 {
    let mut sc = Scan::default();
    let mut shapes = Shapes::default();
    let mut entry = Entry::default();
    let mut commit = inp.offset();
    let first = commit;
    let mut posted = false;
    let mut n = 0u64;
    loop {
        match skip_frames(inp) {
            Some(b'}') => inp.pos += 1,
            Some(b'e') => {
                // The batch ends; go on only if a new batch of entries follows.
                let save = inp.pos;
                inp.pos += 1;
                let again = skip_frames(inp) == Some(b'(') && {
                    inp.pos += 1;
                    skip_frames(inp) == Some(b'}')
                };
                if !again {
                    inp.pos = save;
                    break;
                }
                inp.pos += 1;
            }
            _ => break,
        }
        if inp.end - inp.pos < WINDOW && inp.fill(WINDOW).is_err() {
            break;
        }
        let at = inp.pos;
        let buf = &inp.buf[at..inp.end.min(at + WINDOW)];
        let used = if shapes.parse(buf, &mut entry, 0).is_some() && h.shaped(&entry, buf) {
            entry.used
        } else if scan(buf, &mut sc).is_some() && h.entry(&sc, buf) {
            if let Some(sh) = Shape::learn(&sc, |i| h.keys.get(&i).copied()) {
                shapes.learn(sh, 0);
            }
            sc.used
        } else {
            break;
        };
        inp.pos = at + used;
        commit = inp.offset();
        n += 1;
        if !posted && n >= 4 {
            // The candidate reads: tell the main reader where we start.
            posted = true;
            start.store(first, Ordering::Release);
        }
        if n.is_multiple_of(4096) && cancel.load(Ordering::Acquire) {
            break;
        }
    }
    if posted { commit } else { first }
}

/// The helper thread: wait for the publication, find an entry boundary after the
/// target, read entries symbolically, send what it read.
fn helper(
    path: &Path,
    total: u64,
    max_events: usize,
    rx: Receiver<Publication>,
    tx: Sender<HelperResult>,
    start: &AtomicU64,
    cancel: &AtomicBool,
) {
    let _give_up = GiveUpOnDrop(start);
    let Ok(publication) = rx.recv() else { return };
    let Ok(mut f) = std::fs::File::open(path) else {
        return;
    };
    let target = publication.target;
    if f.seek(SeekFrom::Start(target)).is_err() {
        return;
    }
    let mut window = vec![0u8; 1 << 20];
    let mut n = 0;
    while n < window.len() {
        match f.read(&mut window[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    let mut names = Interner::default();
    for k in KNOWN {
        names.intern(k);
    }
    let keys: FxMap<u32, StrId> = publication
        .strings
        .iter()
        .filter_map(|(i, s)| names.lookup(s).map(|id| (*i, id)))
        .collect();
    // Candidates: an entry's SETITEMS (and a C++ BINPUT) then the next EMPTY_DICT,
    // or a batch's APPENDS, MARK, EMPTY_DICT.
    let w = &window[..n];
    let candidates = (1..w.len().saturating_sub(8))
        .filter(|&i| {
            w[i] == b'}'
                && (w[i - 1] == b'u'
                    || (i >= 2 && &w[i - 2..i] == b"e(")
                    || (i >= 3 && w[i - 3] == b'u' && w[i - 2] == b'q')
                    || (i >= 6 && w[i - 6] == b'u' && w[i - 5] == b'r'))
        })
        .map(|i| target + i as u64)
        .take(32);
    for c in candidates {
        if cancel.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut file) = std::fs::File::open(path) else {
            return;
        };
        if file.seek(SeekFrom::Start(c)).is_err() {
            return;
        }
        let mut inp = Input::at(file, total, c);
        let mut h = Helper {
            keys: keys.clone(),
            names: Interner::default(),
            locals: Vec::new(),
            strs: Vec::new(),
            explicit: Vec::new(),
            stacks: Vec::new(),
            stack_map: FxMap::default(),
            raw_stacks: FxMap::default(),
            scratch: Vec::new(),
            events: Vec::new(),
            syms: Vec::new(),
            dropped: 0,
            max_events,
            seen: (false, false, false),
        };
        for k in KNOWN {
            h.names.intern(k);
        }
        let stop = run_helper(&mut inp, &mut h, start, cancel);
        h.trim();
        if stop > c {
            let _ = tx.send(HelperResult {
                start: c,
                stop,
                events: h.events,
                syms: h.syms,
                dropped: h.dropped,
                locals: h.locals,
                strs: h.strs,
                explicit: h.explicit,
                stacks: h.stacks,
                seen: h.seen,
            });
            return;
        }
    }
}
