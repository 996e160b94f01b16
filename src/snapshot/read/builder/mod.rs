//! Turns a stream of container operations (from the pickle machine or the JSON
//! reader) into the typed [`Snapshot`], without ever holding a generic tree of the file.
//!
//! Containers under construction live in an arena of slots. When a container is used
//! (a dict appended to a list, a list stored under `frames`) it is recognised by its
//! keys and *folded*: a frame dict into an interned [`Frame`], a `frames` list into an
//! interned stack, a trace entry into an [`Event`] in its device's bounded ring, a
//! block or segment dict into a [`Block`] / [`Segment`].
//!
//! Sharing follows pickle's memo semantics: any memo reference may name any earlier
//! object. A folded frame or stack leaves its value in the memo, so later references
//! resolve to the interned id. Copies of a container's reference on the VM stack are
//! counted (`refs`): a container folded while another copy is still on the stack (a
//! frame dict that recurs in its own stack, torch's one `empty_frames` list on a
//! segment and its block) forwards that copy to the folded value. Records (trace
//! entries, blocks, segments) are not kept once folded: in *lean* mode a later
//! reference to one asks the caller to read the file again in *retain* mode
//! ([`BuildError::retain`]), where every memoized container stays intact and is folded
//! again on each use. torch never shares records, so that second pass is for files
//! other tools wrote.

mod finish;
mod fold;
pub mod keys;

use std::collections::VecDeque;

use super::memo::{MEMO_CHUNK, Memo, NO_MEMO, Overlay};
use super::value::*;
use crate::snapshot::model::*;
use keys::*;

/// A problem found while building; the caller adds the file name and offset.
#[derive(Debug)]
pub struct BuildError {
    pub msg: String,
    /// The file shares a record (or refers to a dropped container): read it again
    /// with every memoized container kept.
    pub retain: bool,
}

pub type BResult<T> = Result<T, BuildError>;

pub fn err<T>(msg: impl Into<String>) -> BResult<T> {
    Err(BuildError {
        msg: msg.into(),
        retain: false,
    })
}

pub fn need_retain<T>(what: &str) -> BResult<T> {
    Err(BuildError {
        msg: format!("{what} refers to a record that was already folded"),
        retain: true,
    })
}

pub struct EventRing {
    pub ring: VecDeque<Event>,
    pub dropped: u64,
}

impl EventRing {
    fn new() -> Self {
        EventRing {
            ring: VecDeque::new(),
            dropped: 0,
        }
    }
    #[inline(always)]
    fn push(&mut self, ev: Event, max: usize) {
        if self.ring.len() >= max {
            self.ring.pop_front();
            self.dropped += 1;
        }
        self.ring.push_back(ev);
    }
}

pub enum ListRepr {
    Generic(Vec<PV>),
    Frames(Vec<FrameId>),
    Blocks(Vec<Block>),
    Segments(Vec<Segment>),
    Events(EventRing),
    History(Vec<(u64, StackId)>),
}

impl ListRepr {
    pub fn is_empty_generic(&self) -> bool {
        matches!(self, ListRepr::Generic(v) if v.is_empty())
    }
    fn kind(&self) -> &'static str {
        match self {
            ListRepr::Generic(_) => "values",
            ListRepr::Frames(_) => "frames",
            ListRepr::Blocks(_) => "blocks",
            ListRepr::Segments(_) => "segments",
            ListRepr::Events(_) => "trace entries",
            ListRepr::History(_) => "history entries",
        }
    }
    /// A copy for retain mode (every list kind but a generic one is plain data).
    fn duplicate(&self) -> ListRepr {
        match self {
            ListRepr::Generic(v) => ListRepr::Generic(v.clone()),
            ListRepr::Frames(v) => ListRepr::Frames(v.clone()),
            ListRepr::Blocks(v) => ListRepr::Blocks(v.clone()),
            ListRepr::Segments(v) => ListRepr::Segments(v.clone()),
            ListRepr::Events(r) => ListRepr::Events(EventRing {
                ring: r.ring.clone(),
                dropped: r.dropped,
            }),
            ListRepr::History(v) => ListRepr::History(v.clone()),
        }
    }
}

pub(crate) enum Body {
    Free,
    Dict(Vec<(PV, PV)>),
    /// A dict recognised as a trace entry from its first key (`action`), filled in place.
    Event(Event),
    List(ListRepr),
    Tuple(Vec<PV>),
    /// Folded while another copy of its reference was still on the VM stack.
    Forward(PV),
}

impl Body {
    fn duplicate(&self) -> Body {
        match self {
            Body::Free => Body::Free,
            Body::Dict(v) => Body::Dict(v.clone()),
            Body::Event(e) => Body::Event(*e),
            Body::List(l) => Body::List(l.duplicate()),
            Body::Tuple(v) => Body::Tuple(v.clone()),
            Body::Forward(p) => Body::Forward(*p),
        }
    }
}

pub(crate) struct Slot {
    generation: u32,
    memo: u32,
    /// References on the VM stack and inside other containers.
    refs: u32,
    pub(crate) body: Body,
}

/// Per-file counters that say which parts of the schema were present.
#[derive(Default)]
pub(crate) struct Seen {
    pub time_us: bool,
    pub compile_context: bool,
    pub user_metadata: bool,
    pub history: bool,
    pub pending_name: Option<StrId>,
}

pub struct Builder {
    pub(crate) strings: Interner,
    pub(crate) frames: Vec<Frame>,
    frame_map: FxMap<Frame, FrameId>,
    pub(crate) stacks: Stacks,
    pub(crate) slots: Vec<Slot>,
    free_slots: Vec<u32>,
    dict_pool: Vec<Vec<(PV, PV)>>,
    wide: Vec<i128>,
    floats: Vec<f64>,
    pub(crate) memo: Memo,
    pub(crate) max_events: usize,
    pub(crate) seen: Seen,
    action_of: Vec<Action>,
    /// Trace entries from the fast path, until APPENDS moves them to a list.
    pending: Vec<Option<Event>>,
    pending_base: u64,
    pending_left: usize,
    /// Keep every memoized container (see the module docs).
    pub retain: bool,
    /// Stacks by the bytes of their list of memo references (the fast path's
    /// shortcut), valid while no memo value was overwritten.
    raw_stacks: FxMap<Box<[u8]>, StackId>,
    raw_stacks_memo: u64,
}

fn as_u64(v: Value, what: &str) -> BResult<u64> {
    match v {
        Value::Int(i) if i >= 0 => Ok(i as u64),
        Value::Int(i) => err(format!("{what} is negative ({i})")),
        Value::UInt(u) => Ok(u),
        Value::Bool(b) => Ok(b as u64),
        Value::BigInt => err(format!("{what} does not fit in 64 bits")),
        Value::Released | Value::Discarded => need_retain(what),
        other => err(format!("{what} is {}, expected int", other.type_name())),
    }
}

/// No single GPU allocation or segment is anywhere near this; larger values are
/// refused, which also keeps every sum of sizes far from overflowing.
pub const MAX_SIZE: u64 = 1 << 40;

fn as_size(v: Value, what: &str) -> BResult<u64> {
    let n = as_u64(v, what)?;
    if n > MAX_SIZE {
        return err(format!("{what} is {n}, larger than any GPU allocation"));
    }
    Ok(n)
}

fn as_i64(v: Value, what: &str) -> BResult<i64> {
    match v {
        Value::Int(i) => Ok(i),
        Value::UInt(u) => Ok(u as i64),
        Value::Bool(b) => Ok(b as i64),
        Value::BigInt => err(format!("{what} does not fit in 64 bits")),
        Value::Released | Value::Discarded => need_retain(what),
        other => err(format!("{what} is {}, expected int", other.type_name())),
    }
}

impl Builder {
    pub fn new(max_events: usize) -> Self {
        let mut strings = Interner::default();
        for (i, k) in KNOWN.iter().enumerate() {
            let id = strings.intern(k);
            debug_assert_eq!(id as usize, i);
        }
        let mut b = Builder {
            strings,
            frames: Vec::new(),
            frame_map: FxMap::default(),
            stacks: Stacks::default(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            dict_pool: Vec::new(),
            wide: Vec::new(),
            floats: Vec::new(),
            memo: Memo::default(),
            max_events: max_events.max(1),
            seen: Seen::default(),
            action_of: Vec::new(),
            pending: Vec::new(),
            pending_base: 0,
            pending_left: 0,
            retain: false,
            raw_stacks: FxMap::default(),
            raw_stacks_memo: 0,
        };
        b.refresh_actions();
        b
    }

    fn refresh_actions(&mut self) {
        let n = self.strings.len();
        while self.action_of.len() < n {
            let id = self.action_of.len() as StrId;
            self.action_of.push(Action::from_name(self.strings.get(id)));
        }
    }

    #[inline(always)]
    pub(crate) fn action(&mut self, s: StrId) -> Action {
        if s as usize >= self.action_of.len() {
            self.refresh_actions();
        }
        self.action_of[s as usize]
    }

    pub fn str(&mut self, s: &str) -> PV {
        PV::str(self.strings.intern(s))
    }

    /// Pack a scalar decoded by a front end.
    #[inline]
    pub fn pack(&mut self, v: Value) -> PV {
        match v {
            Value::None => PV::NONE,
            Value::Bool(b) => PV::bool(b),
            Value::Int(i) => PV::small_int(i).unwrap_or_else(|| self.wide_pv(i as i128)),
            Value::UInt(u) => self.wide_pv(u as i128),
            Value::BigInt => PV::new(T_BIGINT, 0),
            Value::Float(f) => {
                self.floats.push(f);
                PV::new(T_FLOAT, self.floats.len() as u64 - 1)
            }
            Value::Str(id) => PV::str(id),
            Value::Bytes => PV::new(T_BYTES, 0),
            Value::Obj(r) => PV::obj(r),
            Value::Frame(f) => PV::frame(f),
            Value::Stack(s) => PV::stack(s),
            Value::Unset => PV::UNSET,
            Value::Released => PV::RELEASED,
            Value::Discarded => PV::DISCARDED,
        }
    }

    #[inline(always)]
    pub fn int_pv(&mut self, i: i64) -> PV {
        PV::small_int(i).unwrap_or_else(|| self.wide_pv(i as i128))
    }

    fn wide_pv(&mut self, v: i128) -> PV {
        self.wide.push(v);
        PV::new(T_WIDE, self.wide.len() as u64 - 1)
    }

    /// Unpack a stored value.
    #[inline]
    pub fn val(&self, p: PV) -> Value {
        let x = p.payload();
        match p.tag() {
            T_NONE => Value::None,
            T_BOOL => Value::Bool(x != 0),
            T_INT => Value::Int(((x << 4) as i64) >> 4),
            T_WIDE => {
                let w = self.wide[x as usize];
                if let Ok(i) = i64::try_from(w) {
                    Value::Int(i)
                } else if let Ok(u) = u64::try_from(w) {
                    Value::UInt(u)
                } else {
                    Value::BigInt
                }
            }
            T_FLOAT => Value::Float(self.floats[x as usize]),
            T_STR => Value::Str(x as StrId),
            T_BYTES => Value::Bytes,
            T_OBJ => Value::Obj(p.as_obj().expect("tagged obj")),
            T_FRAME => Value::Frame(x as FrameId),
            T_STACK => Value::Stack(x as StackId),
            T_UNSET => Value::Unset,
            T_RELEASED | T_EVENT => Value::Released,
            T_DISCARDED => Value::Discarded,
            _ => Value::BigInt,
        }
    }

    // --- the arena ---

    fn alloc_slot(&mut self, body: Body) -> PV {
        if let Some(id) = self.free_slots.pop() {
            let slot = &mut self.slots[id as usize];
            slot.body = body;
            slot.memo = NO_MEMO;
            slot.refs = 1;
            PV::obj(ObjRef {
                id,
                generation: slot.generation,
            })
        } else {
            let id = self.slots.len() as u32;
            self.slots.push(Slot {
                generation: 0,
                memo: NO_MEMO,
                refs: 1,
                body,
            });
            PV::obj(ObjRef { id, generation: 0 })
        }
    }

    pub fn new_dict(&mut self) -> PV {
        let v = self
            .dict_pool
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(12));
        self.alloc_slot(Body::Dict(v))
    }

    pub fn new_list(&mut self) -> PV {
        self.alloc_slot(Body::List(ListRepr::Generic(Vec::new())))
    }

    /// A tuple of `items` (their references move into it).
    pub fn new_tuple(&mut self, mut items: Vec<PV>) -> BResult<PV> {
        for it in items.iter_mut() {
            *it = self.resolve(*it)?;
        }
        Ok(self.alloc_slot(Body::Tuple(items)))
    }

    /// The live slot a reference names (a stale one is an error the caller reports).
    fn slot_of(&self, r: ObjRef) -> Option<&Slot> {
        match self.slots.get(r.id as usize) {
            Some(s) if s.generation == r.generation && !matches!(s.body, Body::Free) => Some(s),
            _ => None,
        }
    }

    fn stale<T>(&self) -> BResult<T> {
        // Only lean mode frees slots; a reference that outlived its slot means a
        // sharing the reference counts did not see. Retain mode keeps them all.
        need_retain("a reference")
    }

    /// A copy of a reference was pushed (memo GET, DUP).
    #[inline]
    pub fn note_copy(&mut self, v: PV) {
        if let Some(r) = v.as_obj()
            && let Some(s) = self.slots.get_mut(r.id as usize)
            && s.generation == r.generation
        {
            s.refs = s.refs.saturating_add(1);
        }
    }

    /// Follow a forwarded reference without using it up.
    pub fn peek(&self, v: PV) -> PV {
        match v.as_obj().and_then(|r| self.slot_of(r)) {
            Some(Slot {
                body: Body::Forward(x),
                ..
            }) => *x,
            _ => v,
        }
    }

    /// A reference being used up (moved into a container or folded): a forwarded one
    /// becomes its value.
    #[inline]
    pub fn resolve(&mut self, v: PV) -> BResult<PV> {
        let Some(r) = v.as_obj() else {
            return Ok(v);
        };
        let Some(slot) = self.slots.get_mut(r.id as usize) else {
            return self.stale();
        };
        if slot.generation != r.generation || matches!(slot.body, Body::Free) {
            return self.stale();
        }
        if let Body::Forward(x) = slot.body {
            slot.refs = slot.refs.saturating_sub(1);
            if slot.refs == 0 {
                self.free_slot(r.id);
            }
            return Ok(x);
        }
        Ok(v)
    }

    fn free_slot(&mut self, id: u32) {
        let slot = &mut self.slots[id as usize];
        slot.body = Body::Free;
        slot.generation = slot.generation.wrapping_add(1) & GEN_MASK;
        slot.memo = NO_MEMO;
        slot.refs = 0;
        self.free_slots.push(id);
    }

    /// Is this slot kept whole in retain mode (memoized or shared)?
    fn kept(&self, r: ObjRef) -> bool {
        self.retain && {
            let s = &self.slots[r.id as usize];
            s.memo != NO_MEMO || s.refs > 1
        }
    }

    /// The body of a container being folded: moved out, or copied in retain mode.
    pub(crate) fn take_body(&mut self, r: ObjRef) -> BResult<Body> {
        if self.slot_of(r).is_none() {
            return self.stale();
        }
        if self.kept(r) {
            // The copy holds its own references to what the container holds.
            let body = self.slots[r.id as usize].body.duplicate();
            let inner: Vec<PV> = match &body {
                Body::Dict(items) => items.iter().flat_map(|&(k, v)| [k, v]).collect(),
                Body::List(ListRepr::Generic(items)) | Body::Tuple(items) => items.clone(),
                _ => Vec::new(),
            };
            for v in inner {
                self.note_copy(v);
            }
            return Ok(body);
        }
        Ok(std::mem::replace(
            &mut self.slots[r.id as usize].body,
            Body::Forward(PV::UNSET),
        ))
    }

    /// A container was folded into `replacement` (a frame, a stack, RELEASED for a
    /// record, DISCARDED for a dropped container): the memo entry and any other
    /// copies of the reference now mean that.
    pub(crate) fn folded(&mut self, r: ObjRef, replacement: PV) {
        let is_value = matches!(replacement.tag(), T_FRAME | T_STACK);
        let slot = &mut self.slots[r.id as usize];
        slot.refs = slot.refs.saturating_sub(1);
        if self.retain && (slot.memo != NO_MEMO || slot.refs > 0) {
            // Kept whole for the next use; frames and stacks resolve faster by value.
            if is_value && slot.memo != NO_MEMO {
                let m = slot.memo;
                self.memo.set(m, replacement);
                slot.memo = NO_MEMO;
            }
            if slot.refs == 0 && slot.memo == NO_MEMO {
                self.free_slot(r.id);
            }
            return;
        }
        let memo = std::mem::replace(&mut slot.memo, NO_MEMO);
        if slot.refs == 0 {
            self.free_slot(r.id);
        } else {
            slot.body = Body::Forward(replacement);
        }
        if memo != NO_MEMO {
            self.memo.set(memo, replacement);
        }
    }

    pub(crate) fn recycle_dict(&mut self, mut items: Vec<(PV, PV)>) {
        if items.capacity() <= 64 && self.dict_pool.len() < 4096 {
            items.clear();
            self.dict_pool.push(items);
        }
    }

    // --- the memo ---

    pub fn memo_put(&mut self, idx: u64, v: PV) -> BResult<()> {
        if idx >= NO_MEMO as u64 {
            return err(format!("memo index {idx} is too large"));
        }
        let idx = idx as u32;
        let v = self.peek(v);
        // A store over another container's entry (no writer does; legal): that one
        // no longer updates this index when it is folded.
        if let Some(old) = self.memo.get(idx).as_obj()
            && old != v.as_obj().unwrap_or(old)
            && let Some(s) = self.slots.get_mut(old.id as usize)
            && s.generation == old.generation
            && s.memo == idx
        {
            s.memo = NO_MEMO;
        }
        if let Some(r) = v.as_obj() {
            let Some(slot) = self.slots.get_mut(r.id as usize) else {
                return self.stale();
            };
            if slot.memo != NO_MEMO && slot.memo != idx {
                // Memoized a second time (MEMOIZE after BINPUT): the slot records one
                // index; the older entry holds its reference like a GET's copy, so the
                // folded value stays reachable through it.
                slot.refs = slot.refs.saturating_add(1);
            }
            slot.memo = idx;
        }
        self.memo.set(idx, v);
        Ok(())
    }

    /// The index MEMOIZE uses: the number of distinct memo entries set so far.
    pub fn memo_len(&self) -> u64 {
        self.memo.stored()
    }

    /// Did the file skip memo indices? (The fast path and the split read then leave
    /// the memo to the generic machine.)
    #[inline(always)]
    pub fn memo_has_gaps(&self) -> bool {
        self.memo.has_gaps()
    }

    /// The value at `idx` for a GET (a container's reference counts one more copy).
    #[inline]
    pub fn memo_get(&mut self, idx: u64) -> BResult<PV> {
        if idx >= NO_MEMO as u64 {
            return err(format!("memo index {idx} was never stored"));
        }
        let v = self.memo.get(idx as u32);
        match v.tag() {
            T_UNSET => err(format!("memo index {idx} was never stored")),
            T_OBJ => {
                self.note_copy(v);
                Ok(v)
            }
            _ => Ok(v),
        }
    }

    /// The raw memo entry (UNSET, RELEASED and DISCARDED included).
    #[inline(always)]
    pub fn memo_raw(&self, idx: u64) -> PV {
        if idx >= NO_MEMO as u64 {
            return PV::UNSET;
        }
        self.memo.get(idx as u32)
    }

    /// Store a folded value at `idx` directly (the fast path, a helper's entries).
    #[inline]
    pub fn memo_set_value(&mut self, idx: u64, v: PV) -> BResult<()> {
        if idx >= NO_MEMO as u64 {
            return err(format!("memo index {idx} is too large"));
        }
        self.memo.set(idx as u32, v);
        Ok(())
    }

    /// Take a split read's helper's memo stores from the next index on, in place.
    pub(crate) fn memo_overlay(&mut self, o: Overlay) -> BResult<()> {
        if self.memo.filled + o.len() >= NO_MEMO as u64 {
            return err("memo index too large");
        }
        self.memo.set_overlay(o);
        Ok(())
    }

    /// Mark a memo index as holding a folded record (the fast path's trace-entry dict).
    #[inline]
    pub fn memo_release(&mut self, idx: u64, what: PV) {
        if idx >= NO_MEMO as u64 {
            return;
        }
        let c = idx as usize / MEMO_CHUNK;
        if matches!(self.memo.chunks.get(c), Some(None)) {
            // A run of folded records with no chunk to store into.
            return self.memo.set_released_run(idx as u32);
        }
        self.memo.set(idx as u32, what);
    }

    /// Undo a memo store made since the fast path began.
    pub fn memo_unset(&mut self, idx: u64) {
        if idx < NO_MEMO as u64 {
            self.memo.unset(idx as u32);
        }
    }

    // --- interning ---

    pub fn intern_frame(&mut self, f: Frame) -> FrameId {
        match self.frame_map.get(&f) {
            Some(&id) => id,
            None => {
                let id = self.frames.len() as FrameId;
                self.frames.push(f);
                self.frame_map.insert(f, id);
                id
            }
        }
    }

    pub fn intern_stack(&mut self, frames: &[FrameId]) -> StackId {
        self.stacks.intern(frames)
    }

    /// The stack of a list whose memo references are exactly `bytes`, if known.
    #[inline]
    pub fn raw_stack(&mut self, bytes: &[u8]) -> Option<StackId> {
        if self.raw_stacks_memo != self.memo.overwrites {
            self.raw_stacks.clear();
            self.raw_stacks_memo = self.memo.overwrites;
        }
        self.raw_stacks.get(bytes).copied()
    }

    pub fn remember_raw_stack(&mut self, bytes: &[u8], id: StackId) {
        if self.raw_stacks.len() < 1 << 20 {
            self.raw_stacks.insert(bytes.into(), id);
        }
    }

    // --- trace entries from the fast path ---

    pub fn fresh_event() -> Event {
        Event {
            action: Action::Other,
            addr: 0,
            size: 0,
            stream: 0,
            time_us: NO_TIME,
            stack: 0,
        }
    }

    /// Park a decoded trace entry; the returned value stands for it on the VM stack.
    pub fn park_event(&mut self, ev: Event) -> PV {
        if self.pending_left == 0 {
            self.pending_base += self.pending.len() as u64;
            self.pending.clear();
        }
        let idx = self.pending_base + self.pending.len() as u64;
        self.pending.push(Some(ev));
        self.pending_left += 1;
        PV::new(T_EVENT, idx)
    }

    fn take_parked(&mut self, p: PV) -> BResult<Event> {
        let i = p.payload().wrapping_sub(self.pending_base) as usize;
        match self.pending.get_mut(i).and_then(Option::take) {
            Some(ev) => {
                self.pending_left -= 1;
                Ok(ev)
            }
            None => need_retain("a trace entry"),
        }
    }

    /// Which optional trace-entry keys were seen: (time_us, compile_context, user_metadata).
    pub fn seen_event_keys(&self) -> (bool, bool, bool) {
        (
            self.seen.time_us,
            self.seen.compile_context,
            self.seen.user_metadata,
        )
    }

    pub fn add_seen_event_keys(&mut self, k: (bool, bool, bool)) {
        self.seen.time_us |= k.0;
        self.seen.compile_context |= k.1;
        self.seen.user_metadata |= k.2;
    }

    /// Is `v` a trace entry (parked by the fast path, or a dict read as one)?
    pub fn is_trace_entry(&self, v: PV) -> bool {
        v.tag() == T_EVENT
            || matches!(
                v.as_obj().and_then(|r| self.slot_of(r)).map(|s| &s.body),
                Some(Body::Event(_))
            )
    }

    /// Is `l` a list of trace entries (or an empty list)?
    pub fn is_event_list(&self, l: PV) -> bool {
        let Some(r) = self.peek(l).as_obj() else {
            return false;
        };
        match self.slot_of(r).map(|s| &s.body) {
            Some(Body::List(ListRepr::Events(_))) => true,
            Some(Body::List(list)) => list.is_empty_generic(),
            _ => false,
        }
    }

    /// Append already-read trace entries (a helper's) to a list of trace entries.
    pub fn extend_events(&mut self, l: PV, events: Vec<Event>, dropped: u64) -> BResult<()> {
        let Some(lr) = self.peek(l).as_obj() else {
            return err("not a list");
        };
        let max_events = self.max_events;
        let Some(Slot {
            body: Body::List(list),
            ..
        }) = self.slots.get_mut(lr.id as usize)
        else {
            return err("not a list");
        };
        if list.is_empty_generic() {
            *list = ListRepr::Events(EventRing::new());
        }
        let ListRepr::Events(ring) = list else {
            return err(format!(
                "a list of {} also holds trace entries",
                list.kind()
            ));
        };
        ring.dropped += dropped;
        if events.len() >= max_events || ring.ring.is_empty() {
            ring.dropped += ring.ring.len() as u64;
            // O(1): the helper's vector becomes the ring, and the model's vector again.
            ring.ring = events.into();
        } else {
            ring.ring.extend(events);
        }
        let excess = ring.ring.len().saturating_sub(max_events);
        ring.ring.drain(..excess);
        ring.dropped += excess as u64;
        Ok(())
    }

    pub(crate) fn mark_history(&mut self) {
        self.seen.history = true;
    }

    pub(crate) fn convert(&self, v: PV, what: &str, kind: Conv) -> BResult<u64> {
        let v = self.val(v);
        match kind {
            Conv::U64 => as_u64(v, what),
            Conv::Size => as_size(v, what),
            Conv::I64 => as_i64(v, what).map(|i| i as u64),
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Conv {
    U64,
    Size,
    I64,
}
