//! Turns a stream of container operations (from the pickle VM or the JSON reader)
//! into the typed [`Snapshot`] model, without ever holding a generic tree of the file.
//!
//! Containers under construction live in a small arena. The moment a container is
//! complete and used (a dict appended to a list, a list stored under `frames`), it is
//! recognised by its keys and folded into a compact record: a frame dict becomes an
//! interned [`Frame`], a `frames` list an interned stack, a trace-entry dict an
//! [`Event`] pushed straight into its device's bounded ring, a block or segment dict a
//! [`Block`] / [`Segment`]. Its arena slot is then released, and the pickle memo
//! entry that pointed at it is updated (frames, stacks) or released (records), so
//! memory follows the number of distinct frames and stacks plus the kept events.

use std::collections::VecDeque;

use super::model::*;

/// A value on the VM stack, in the memo, or inside a container under construction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An integer above `i64::MAX` that fits in a `u64`.
    UInt(u64),
    /// An integer that fits in neither.
    BigInt,
    Float(f64),
    Str(StrId),
    Bytes,
    Obj(ObjRef),
    Frame(FrameId),
    Stack(StackId),
    /// Memo marker: no entry at this index.
    Unset,
    /// Memo marker: the object was folded into a record and released.
    Released,
}

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::UInt(_) | Value::BigInt => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes => "bytes",
            Value::Obj(_) => "container",
            Value::Frame(_) => "frame",
            Value::Stack(_) => "list of frames",
            Value::Unset | Value::Released => "nothing",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ObjRef {
    id: u32,
    generation: u32,
}

/// A packed value: 4 bits of tag and 60 bits of payload in one `u64`, so that the VM
/// stack, the memo and dicts under construction move values in registers. Integers
/// outside 60 bits and floats (rare in snapshots) live in side tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PV(u64);

const T_NONE: u64 = 0;
const T_BOOL: u64 = 1;
const T_INT: u64 = 2;
const T_WIDE: u64 = 3;
const T_FLOAT: u64 = 4;
const T_STR: u64 = 5;
const T_BYTES: u64 = 6;
const T_OBJ: u64 = 7;
const T_FRAME: u64 = 8;
const T_STACK: u64 = 9;
const T_UNSET: u64 = 10;
const T_RELEASED: u64 = 11;
const T_BIGINT: u64 = 12;
/// A trace entry decoded by the reader's fast path, waiting in `pending` for its list.
const T_EVENT: u64 = 13;
const PAYLOAD: u64 = (1 << 60) - 1;
const GEN_MASK: u32 = (1 << 28) - 1;

impl PV {
    /// The interned `"action"` key (the first key torch writes in a trace entry).
    pub const ACTION_KEY: PV = PV::str(K_ACTION);
    pub const NONE: PV = PV(T_NONE << 60);
    pub const UNSET: PV = PV(T_UNSET << 60);
    pub const RELEASED: PV = PV(T_RELEASED << 60);
    #[inline(always)]
    const fn new(tag: u64, payload: u64) -> PV {
        PV((tag << 60) | (payload & PAYLOAD))
    }
    #[inline(always)]
    pub const fn str(id: StrId) -> PV {
        PV::new(T_STR, id as u64)
    }
    #[inline(always)]
    fn tag(self) -> u64 {
        self.0 >> 60
    }
    /// UNSET or RELEASED: not a value.
    #[inline(always)]
    pub fn is_missing(self) -> bool {
        self == PV::UNSET || self == PV::RELEASED
    }
    #[inline(always)]
    pub fn bool(b: bool) -> PV {
        PV::new(T_BOOL, b as u64)
    }
    #[inline(always)]
    fn payload(self) -> u64 {
        self.0 & PAYLOAD
    }
    /// The string id, if this is a string.
    #[inline(always)]
    fn str_id(self) -> Option<StrId> {
        (self.tag() == T_STR).then_some(self.payload() as StrId)
    }
    #[inline(always)]
    fn obj(self) -> Option<ObjRef> {
        (self.tag() == T_OBJ).then(|| ObjRef {
            id: self.payload() as u32,
            generation: (self.payload() >> 32) as u32,
        })
    }
}

/// A problem found while building; the caller adds the file name and offset.
#[derive(Debug)]
pub struct BuildError(pub String);

type BResult<T> = Result<T, BuildError>;

fn err<T>(msg: impl Into<String>) -> BResult<T> {
    Err(BuildError(msg.into()))
}

// Well-known strings, interned first so that their ids are these constants.
const KNOWN: &[&str] = &[
    "",
    "action",
    "addr",
    "size",
    "stream",
    "time_us",
    "frames",
    "device_free",
    "compile_context",
    "user_metadata",
    "state",
    "requested_size",
    "address",
    "total_size",
    "blocks",
    "device",
    "segment_type",
    "is_expandable",
    "filename",
    "line",
    "name",
    "real_size",
    "history",
    "segments",
    "device_traces",
    "allocator_settings",
    "external_annotations",
    "large",
    "active_allocated",
    "active_pending_free",
    "active_awaiting_free",
    "inactive",
];
const K_ACTION: StrId = 1;
const K_ADDR: StrId = 2;
const K_SIZE: StrId = 3;
const K_STREAM: StrId = 4;
const K_TIME_US: StrId = 5;
const K_FRAMES: StrId = 6;
const K_DEVICE_FREE: StrId = 7;
const K_COMPILE_CONTEXT: StrId = 8;
const K_USER_METADATA: StrId = 9;
const K_STATE: StrId = 10;
const K_REQUESTED_SIZE: StrId = 11;
const K_ADDRESS: StrId = 12;
const K_TOTAL_SIZE: StrId = 13;
const K_BLOCKS: StrId = 14;
const K_DEVICE: StrId = 15;
const K_SEGMENT_TYPE: StrId = 16;
const K_IS_EXPANDABLE: StrId = 17;
const K_FILENAME: StrId = 18;
const K_LINE: StrId = 19;
const K_NAME: StrId = 20;
const K_REAL_SIZE: StrId = 21;
const K_HISTORY: StrId = 22;
const K_SEGMENTS: StrId = 23;
const K_DEVICE_TRACES: StrId = 24;
const K_ALLOCATOR_SETTINGS: StrId = 25;
const K_EXTERNAL_ANNOTATIONS: StrId = 26;
const K_LARGE: StrId = 27;
const K_ACTIVE_ALLOCATED: StrId = 28;
const K_ACTIVE_PENDING_FREE: StrId = 29;
const K_ACTIVE_AWAITING_FREE: StrId = 30;
const K_INACTIVE: StrId = 31;

struct EventRing {
    ring: VecDeque<Event>,
    dropped: u64,
}

enum ListRepr {
    Generic(Vec<PV>),
    Frames(Vec<FrameId>),
    Blocks(Vec<Block>),
    Segments(Vec<Segment>),
    Events(EventRing),
    History(Vec<(u64, StackId)>),
}

impl ListRepr {
    fn is_empty_generic(&self) -> bool {
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
}

enum Body {
    Free,
    Dict(Vec<(PV, PV)>),
    /// A dict recognised as a trace entry from its first key (`action`), filled in place.
    Event(Event),
    List(ListRepr),
    Tuple(Vec<PV>),
}

struct Slot {
    generation: u32,
    memo: u32,
    body: Body,
}

const NO_MEMO: u32 = u32::MAX;
const MEMO_CHUNK: usize = 4096;

/// The pickle memo, in chunks that are released once every entry in them was released.
#[derive(Default)]
struct Memo {
    chunks: Vec<Option<Box<[PV]>>>,
    /// Live (not released) entries per chunk.
    live: Vec<u32>,
    filled: u64,
}

#[cold]
#[inline(never)]
fn new_chunk() -> Box<[PV]> {
    vec![PV::UNSET; MEMO_CHUNK].into_boxed_slice()
}

impl Memo {
    fn set(&mut self, idx: u32, v: PV) {
        let c = idx as usize / MEMO_CHUNK;
        let o = idx as usize % MEMO_CHUNK;
        let is_live = v != PV::UNSET && v != PV::RELEASED;
        if c >= self.chunks.len() {
            // A new chunk: the one before it may hold nothing live any more.
            let n = self.chunks.len();
            if n > 0 && self.live[n - 1] == 0 {
                self.chunks[n - 1] = None;
            }
            self.chunks.resize_with(c + 1, || None);
            self.live.resize(c + 1, 0);
        }
        if self.chunks[c].is_none() {
            if !is_live {
                // A released record needs no storage; the index counts as used (memo
                // indices are stored once: MEMOIZE always takes the next one).
                if v == PV::RELEASED {
                    self.filled += 1;
                }
                return;
            }
            self.chunks[c] = Some(new_chunk());
        }
        let chunk = self.chunks[c].as_mut().expect("just made");
        let old = chunk[o];
        if old == PV::UNSET {
            self.filled += 1;
        }
        let was_live = old != PV::UNSET && old != PV::RELEASED;
        chunk[o] = v;
        match (was_live, is_live) {
            (false, true) => self.live[c] += 1,
            (true, false) => self.live[c] -= 1,
            _ => {}
        }
        if self.live[c] == 0 && c + 1 < self.chunks.len() {
            self.chunks[c] = None;
        }
    }

    /// Undo a `set` of an index that was unset before (the reader's fast path bailing
    /// out). A released record may have been counted without being stored.
    fn unset(&mut self, idx: u32) {
        let c = idx as usize / MEMO_CHUNK;
        let o = idx as usize % MEMO_CHUNK;
        self.filled -= 1;
        if let Some(Some(chunk)) = self.chunks.get_mut(c) {
            let old = chunk[o];
            if old != PV::UNSET && old != PV::RELEASED {
                self.live[c] -= 1;
            }
            chunk[o] = PV::UNSET;
        }
    }

    #[inline(always)]
    fn get(&self, idx: u32) -> PV {
        let c = idx as usize / MEMO_CHUNK;
        match self.chunks.get(c) {
            Some(Some(chunk)) => chunk[idx as usize % MEMO_CHUNK],
            Some(None) => PV::RELEASED,
            None => PV::UNSET,
        }
    }
}

/// Per-file counters that say which parts of the schema were present.
#[derive(Default)]
struct Seen {
    time_us: bool,
    compile_context: bool,
    user_metadata: bool,
    history: bool,
    pending_name: Option<StrId>,
}

pub struct Builder {
    strings: Interner,
    frames: Vec<Frame>,
    frame_map: FxMap<Frame, FrameId>,
    stacks: Stacks,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    dict_pool: Vec<Vec<(PV, PV)>>,
    wide: Vec<i128>,
    floats: Vec<f64>,
    memo: Memo,
    max_events: usize,
    seen: Seen,
    action_of: Vec<Action>,
    /// Trace entries from the reader's fast path, until APPENDS moves them to a list.
    pending: Vec<Option<Event>>,
    pending_base: u64,
    pending_left: usize,
    /// A helper whose memo indices are not known yet (see `set_memo_len`).
    calibrate: bool,
    calibrated: Option<u64>,
}

fn as_u64(v: Value, what: &str) -> BResult<u64> {
    match v {
        Value::Int(i) if i >= 0 => Ok(i as u64),
        Value::Int(i) => err(format!("{what} is negative ({i})")),
        Value::UInt(u) => Ok(u),
        Value::Bool(b) => Ok(b as u64),
        Value::BigInt => err(format!("{what} does not fit in 64 bits")),
        other => err(format!("{what} is {}, expected int", other.type_name())),
    }
}

/// No single GPU allocation or segment is anywhere near this; larger values are
/// refused, which also keeps every sum of sizes far from overflowing.
const MAX_SIZE: u64 = 1 << 40;

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
            calibrate: false,
            calibrated: None,
        };
        b.refresh_actions();
        b
    }

    fn refresh_actions(&mut self) {
        // Map interned action names to actions; grown lazily as new strings appear.
        let n = self.strings.len();
        while self.action_of.len() < n {
            let id = self.action_of.len() as StrId;
            self.action_of.push(Action::from_name(self.strings.get(id)));
        }
    }

    pub fn str(&mut self, s: &str) -> PV {
        PV::str(self.strings.intern(s))
    }

    /// Pack a scalar decoded by a front end.
    #[inline]
    pub fn pack(&mut self, v: Value) -> PV {
        match v {
            Value::None => PV::NONE,
            Value::Bool(b) => PV::new(T_BOOL, b as u64),
            Value::Int(i) if (-(1i64 << 59)..(1i64 << 59)).contains(&i) => PV::new(T_INT, i as u64),
            Value::Int(i) => self.wide_pv(i as i128),
            Value::UInt(u) => self.wide_pv(u as i128),
            Value::BigInt => PV::new(T_BIGINT, 0),
            Value::Float(f) => {
                self.floats.push(f);
                PV::new(T_FLOAT, self.floats.len() as u64 - 1)
            }
            Value::Str(id) => PV::str(id),
            Value::Bytes => PV::new(T_BYTES, 0),
            Value::Obj(r) => PV::new(T_OBJ, ((r.generation as u64) << 32) | r.id as u64),
            Value::Frame(f) => PV::new(T_FRAME, f as u64),
            Value::Stack(s) => PV::new(T_STACK, s as u64),
            Value::Unset => PV::UNSET,
            Value::Released => PV::RELEASED,
        }
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
            T_OBJ => Value::Obj(ObjRef {
                id: x as u32,
                generation: (x >> 32) as u32,
            }),
            T_FRAME => Value::Frame(x as FrameId),
            T_STACK => Value::Stack(x as StackId),
            T_UNSET => Value::Unset,
            T_RELEASED | T_EVENT => Value::Released,
            _ => Value::BigInt,
        }
    }

    fn obj_pv(r: ObjRef) -> PV {
        PV::new(T_OBJ, ((r.generation as u64) << 32) | r.id as u64)
    }

    fn alloc_slot(&mut self, body: Body) -> PV {
        if let Some(id) = self.free_slots.pop() {
            let slot = &mut self.slots[id as usize];
            slot.body = body;
            slot.memo = NO_MEMO;
            Self::obj_pv(ObjRef {
                id,
                generation: slot.generation,
            })
        } else {
            let id = self.slots.len() as u32;
            self.slots.push(Slot {
                generation: 0,
                memo: NO_MEMO,
                body,
            });
            Self::obj_pv(ObjRef { id, generation: 0 })
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

    pub fn new_tuple(&mut self, items: Vec<PV>) -> PV {
        self.alloc_slot(Body::Tuple(items))
    }

    fn slot(&self, r: ObjRef) -> BResult<&Slot> {
        match self.slots.get(r.id as usize) {
            Some(s) if s.generation == r.generation && !matches!(s.body, Body::Free) => Ok(s),
            _ => err(
                "reference to an object that was already folded into a record (unsupported sharing)",
            ),
        }
    }

    fn slot_mut(&mut self, r: ObjRef) -> BResult<&mut Slot> {
        match self.slots.get_mut(r.id as usize) {
            Some(s) if s.generation == r.generation && !matches!(s.body, Body::Free) => Ok(s),
            _ => err(
                "reference to an object that was already folded into a record (unsupported sharing)",
            ),
        }
    }

    /// Release a slot; its memo entry (if any) becomes `replacement`.
    fn release(&mut self, r: ObjRef, replacement: PV) -> Body {
        let slot = &mut self.slots[r.id as usize];
        let body = std::mem::replace(&mut slot.body, Body::Free);
        slot.generation = slot.generation.wrapping_add(1) & GEN_MASK;
        let memo = std::mem::replace(&mut slot.memo, NO_MEMO);
        if memo != NO_MEMO {
            self.memo.set(memo, replacement);
        }
        self.free_slots.push(r.id);
        body
    }

    fn recycle_dict(&mut self, mut items: Vec<(PV, PV)>) {
        if items.capacity() <= 64 && self.dict_pool.len() < 4096 {
            items.clear();
            self.dict_pool.push(items);
        }
    }

    pub fn memo_put(&mut self, idx: u64, v: PV) -> BResult<()> {
        if idx >= NO_MEMO as u64 {
            return err(format!("memo index {idx} is too large"));
        }
        let idx = idx as u32;
        if let Some(r) = v.obj() {
            let slot = self.slot_mut(r)?;
            slot.memo = idx;
        }
        self.memo.set(idx, v);
        Ok(())
    }

    /// The index MEMOIZE uses: the number of memo entries set so far.
    pub fn memo_len(&self) -> u64 {
        self.memo.filled
    }

    #[inline]
    pub fn memo_get(&self, idx: u64) -> BResult<PV> {
        if idx >= NO_MEMO as u64 {
            return err(format!("memo index {idx} was never stored"));
        }
        match self.memo.get(idx as u32) {
            PV::UNSET => err(format!("memo index {idx} was never stored")),
            PV::RELEASED => err(format!(
                "memo index {idx} refers to a record that was already folded (unsupported sharing)"
            )),
            v => Ok(v),
        }
    }

    // --- the helper thread of a split read (see `split.rs`) ---

    /// The stable memo entries (strings, frames, stacks) a helper may rely on:
    /// `(index, the value here, the string when it is one)`.
    pub fn publishable_memo(&self) -> Vec<(u32, PV, Option<String>)> {
        let mut out = Vec::new();
        for (c, chunk) in self.memo.chunks.iter().enumerate() {
            let Some(chunk) = chunk else { continue };
            for (o, &v) in chunk.iter().enumerate() {
                let idx = (c * MEMO_CHUNK + o) as u32;
                match v.tag() {
                    T_STR => out.push((
                        idx,
                        v,
                        Some(self.strings.get(v.payload() as StrId).to_string()),
                    )),
                    T_FRAME | T_STACK => out.push((idx, v, None)),
                    _ => {}
                }
            }
        }
        out
    }

    /// Seed a helper's memo with a published entry (strings by text, into this
    /// builder's own interner).
    pub fn seed_memo(&mut self, idx: u32, v: PV, text: Option<&str>) {
        let v = match text {
            Some(t) => self.str(t),
            None => v,
        };
        self.memo.set(idx, v);
    }

    /// Make MEMOIZE use indices from `base` on (a helper does not know the real ones).
    /// Until `calibrated`, the first PUT with an explicit index (protocols 0-3) sets it.
    pub fn set_memo_len(&mut self, base: u64) {
        self.memo.filled = base;
        self.calibrate = true;
    }

    /// A PUT to `idx` where the next index was expected: a helper takes it as the
    /// real memo length (once, before it stored anything of its own).
    pub fn calibrate_memo(&mut self, idx: u64) -> bool {
        if self.calibrate && idx < NO_MEMO as u64 {
            self.calibrate = false;
            self.memo.filled = idx;
            self.calibrated = Some(idx);
            return true;
        }
        false
    }

    /// The memo index a helper found its first entry at (explicit PUT), if any.
    pub fn memo_calibration(&self) -> Option<u64> {
        self.calibrated
    }

    /// The helper's own memo entries `base..base + n`: the strings among them, by offset.
    pub fn memo_strings_from(&self, base: u64, n: u64) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        let (first, last) = (base as usize / MEMO_CHUNK, (base + n) as usize / MEMO_CHUNK);
        for c in first..=last.min(self.memo.chunks.len().saturating_sub(1)) {
            let Some(chunk) = &self.memo.chunks[c] else {
                continue;
            };
            for (o, v) in chunk.iter().enumerate() {
                let idx = (c * MEMO_CHUNK + o) as u64;
                if idx >= base && idx < base + n && v.tag() == T_STR {
                    out.push((
                        idx - base,
                        self.strings.get(v.payload() as StrId).to_string(),
                    ));
                }
            }
        }
        out
    }

    /// Append `n` memo entries from the next index: released records, except the
    /// given strings (offsets ascending).
    pub fn append_memo(&mut self, n: u64, strings: &[(u64, String)]) {
        let base = self.memo.filled;
        let mut rel = 0;
        for (r, text) in strings {
            // The released records before this string: no storage, just counted.
            while rel < *r {
                self.memo_release(base + rel);
                rel += 1;
            }
            let v = self.str(text);
            self.memo.set((base + rel) as u32, v);
            rel += 1;
        }
        while rel < n {
            let c = (base + rel) as usize / MEMO_CHUNK;
            let chunk_end = ((c + 1) * MEMO_CHUNK) as u64 - base;
            if matches!(self.memo.chunks.get(c), Some(None)) {
                // A whole stretch without a chunk: count it in one step.
                let k = chunk_end.min(n) - rel;
                self.memo.filled += k;
                rel += k;
            } else {
                self.memo_release(base + rel);
                rel += 1;
            }
        }
    }

    /// The list's trace entries and dropped count (a helper's result).
    pub fn take_events(&mut self, l: PV) -> (VecDeque<Event>, u64) {
        let Some(r) = l.obj() else {
            return (VecDeque::new(), 0);
        };
        match self.slots.get_mut(r.id as usize).map(|s| &mut s.body) {
            Some(Body::List(ListRepr::Events(ring))) => {
                let ring = std::mem::replace(
                    ring,
                    EventRing {
                        ring: VecDeque::new(),
                        dropped: 0,
                    },
                );
                (ring.ring, ring.dropped)
            }
            _ => (VecDeque::new(), 0),
        }
    }

    /// Is `l` a list of trace entries (or an empty list)?
    pub fn is_event_list(&self, l: PV) -> bool {
        let Some(r) = l.obj() else { return false };
        match self.slot(r).map(|s| &s.body) {
            Ok(Body::List(ListRepr::Events(_))) => true,
            Ok(Body::List(list)) => list.is_empty_generic(),
            _ => false,
        }
    }

    /// Append a helper's trace entries (newer than those already there).
    pub fn extend_events(&mut self, l: PV, events: VecDeque<Event>, dropped: u64) -> BResult<()> {
        let Some(lr) = l.obj() else {
            return err("not a list");
        };
        let max_events = self.max_events;
        let slot = self.slot_mut(lr)?;
        let Body::List(list) = &mut slot.body else {
            return err("not a list");
        };
        if list.is_empty_generic() {
            *list = ListRepr::Events(EventRing {
                ring: VecDeque::new(),
                dropped: 0,
            });
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
            ring.ring = events;
        } else {
            ring.ring.extend(events);
        }
        let excess = ring.ring.len().saturating_sub(max_events);
        ring.ring.drain(..excess);
        ring.dropped += excess as u64;
        Ok(())
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

    // --- the reader's fast path for trace entries ---

    /// The raw memo entry (UNSET / RELEASED included).
    #[inline(always)]
    pub fn memo_raw(&self, idx: u64) -> PV {
        if idx >= NO_MEMO as u64 {
            return PV::UNSET;
        }
        self.memo.get(idx as u32)
    }

    /// Mark a memo index as holding a folded record (the fast path's trace-entry dict).
    #[inline]
    pub fn memo_release(&mut self, idx: u64) {
        if idx >= NO_MEMO as u64 {
            return;
        }
        let c = idx as usize / MEMO_CHUNK;
        if matches!(self.memo.chunks.get(c), Some(None)) {
            // The common case: a run of folded records with no chunk to store into.
            self.memo.filled += 1;
            return;
        }
        self.memo.set(idx as u32, PV::RELEASED);
    }

    /// Undo a memo store made since the fast path began.
    pub fn memo_unset(&mut self, idx: u64) {
        if idx < NO_MEMO as u64 {
            self.memo.unset(idx as u32);
        }
    }

    #[inline(always)]
    pub fn int_pv(&mut self, i: i64) -> PV {
        if (-(1i64 << 59)..(1i64 << 59)).contains(&i) {
            PV::new(T_INT, i as u64)
        } else {
            self.pack(Value::Int(i))
        }
    }

    pub fn fresh_event() -> Event {
        Self::new_event()
    }

    /// Apply `key: value` to a trace entry being decoded; true when it set the action.
    #[inline]
    pub fn event_field(&mut self, ev: &mut Event, k: PV, v: PV) -> BResult<bool> {
        self.apply_event(ev, k, v)
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
            None => err("a trace entry is used twice (unsupported sharing)"),
        }
    }

    /// `d[k] = v`.
    pub fn dict_set(&mut self, d: PV, k: PV, v: PV) -> BResult<()> {
        let Some(dr) = d.obj() else {
            return err(format!(
                "SETITEM on {}, expected dict",
                self.val(d).type_name()
            ));
        };
        let v = match (k.str_id(), v.obj()) {
            (Some(K_FRAMES), Some(r)) if r != dr => self.fold_stack(r)?,
            _ => v,
        };
        match &mut self.slot_mut(dr)?.body {
            Body::Dict(items) => {
                items.push((k, v));
                Ok(())
            }
            Body::Event(ev) => {
                let mut e = *ev;
                self.apply_event(&mut e, k, v)?;
                if let Body::Event(ev) = &mut self.slots[dr.id as usize].body {
                    *ev = e;
                }
                Ok(())
            }
            _ => err("SETITEM on a list or tuple, expected dict"),
        }
    }

    /// `d.update(pairs)`: SETITEMS, with one check of the dict for the whole batch.
    pub fn dict_set_many(&mut self, d: PV, kv: &[PV]) -> BResult<()> {
        let Some(dr) = d.obj() else {
            return err(format!(
                "SETITEMS on {}, expected dict",
                self.val(d).type_name()
            ));
        };
        let slot = self.slot_mut(dr)?;
        match &mut slot.body {
            // Fast path: a fresh dict whose first key is `action` is a trace entry
            // (torch writes `action` first); build the event straight from the batch.
            Body::Dict(items) if items.is_empty() && kv.first() == Some(&PV::str(K_ACTION)) => {
                let items = std::mem::take(items);
                self.recycle_dict(items);
                let mut ev = Self::new_event();
                for pair in kv.chunks_exact(2) {
                    let (k, v) = (pair[0], pair[1]);
                    let v = match (k.str_id(), v.obj()) {
                        (Some(K_FRAMES), Some(r)) if r != dr => self.fold_stack(r)?,
                        _ => v,
                    };
                    self.apply_event(&mut ev, k, v)?;
                }
                self.slots[dr.id as usize].body = Body::Event(ev);
                return Ok(());
            }
            Body::Dict(_) | Body::Event(_) => {}
            _ => return err("SETITEMS on a list or tuple, expected dict"),
        }
        for pair in kv.chunks_exact(2) {
            let (k, v) = (pair[0], pair[1]);
            let v = match (k.str_id(), v.obj()) {
                (Some(K_FRAMES), Some(r)) if r != dr => self.fold_stack(r)?,
                _ => v,
            };
            let idx = dr.id as usize;
            if let Body::Event(ev) = &mut self.slots[idx].body {
                let mut e = *ev;
                self.apply_event(&mut e, k, v)?;
                if let Body::Event(ev) = &mut self.slots[idx].body {
                    *ev = e;
                }
                continue;
            }
            match &mut self.slots[idx].body {
                Body::Dict(items) => items.push((k, v)),
                _ => return err("SETITEMS on a list or tuple, expected dict"),
            }
        }
        Ok(())
    }

    /// `l.extend(values)`: APPENDS. Trace entries (already built in place by
    /// `dict_set_many`) go straight into the list's ring.
    pub fn list_extend(&mut self, l: PV, vs: &[PV]) -> BResult<()> {
        let max_events = self.max_events;
        let mut i = 0;
        while i < vs.len() {
            let v = vs[i];
            if v.tag() == T_EVENT
                && let Some(lr) = l.obj()
            {
                // A run of parked trace entries: into the ring with one lookup.
                let run = vs[i..].iter().take_while(|p| p.tag() == T_EVENT).count();
                self.push_parked(lr, &vs[i..i + run])?;
                i += run;
                continue;
            }
            i += 1;
            if let (Some(lr), Some(r)) = (l.obj(), v.obj())
                && let Some(Slot {
                    generation,
                    body: Body::Event(ev),
                    ..
                }) = self.slots.get(r.id as usize)
                && *generation == r.generation
            {
                let ev = *ev;
                let lslot = self.slot_mut(lr)?;
                match &mut lslot.body {
                    Body::List(ListRepr::Events(ring)) => {
                        if ring.ring.len() >= max_events {
                            ring.ring.pop_front();
                            ring.dropped += 1;
                        }
                        ring.ring.push_back(ev);
                        self.release(r, PV::RELEASED);
                        continue;
                    }
                    Body::List(list) if list.is_empty_generic() => {
                        *list = ListRepr::Events(EventRing {
                            ring: VecDeque::from([ev]),
                            dropped: 0,
                        });
                        self.release(r, PV::RELEASED);
                        continue;
                    }
                    _ => {}
                }
            }
            self.list_append(l, v)?;
        }
        Ok(())
    }

    fn push_parked(&mut self, lr: ObjRef, parked: &[PV]) -> BResult<()> {
        let first = self.take_parked(parked[0])?;
        self.push_event(lr, first)?;
        let max_events = self.max_events;
        let base = self.pending_base;
        let slot = &mut self.slots[lr.id as usize];
        let Body::List(ListRepr::Events(ring)) = &mut slot.body else {
            unreachable!("push_event made it a list of trace entries")
        };
        for p in &parked[1..] {
            let i = p.payload().wrapping_sub(base) as usize;
            let Some(ev) = self.pending.get_mut(i).and_then(Option::take) else {
                return err("a trace entry is used twice (unsupported sharing)");
            };
            self.pending_left -= 1;
            if ring.ring.len() >= max_events {
                ring.ring.pop_front();
                ring.dropped += 1;
            }
            ring.ring.push_back(ev);
        }
        Ok(())
    }

    fn push_event(&mut self, lr: ObjRef, ev: Event) -> BResult<()> {
        let max_events = self.max_events;
        let lslot = self.slot_mut(lr)?;
        match &mut lslot.body {
            Body::List(ListRepr::Events(ring)) => {
                if ring.ring.len() >= max_events {
                    ring.ring.pop_front();
                    ring.dropped += 1;
                }
                ring.ring.push_back(ev);
                Ok(())
            }
            Body::List(list) if list.is_empty_generic() => {
                *list = ListRepr::Events(EventRing {
                    ring: VecDeque::from([ev]),
                    dropped: 0,
                });
                Ok(())
            }
            Body::List(list) => err(format!(
                "a list of {} also holds trace entries",
                list.kind()
            )),
            _ => err("APPEND to a dict or tuple, expected list"),
        }
    }

    /// Fold a list of frames into an interned stack.
    fn fold_stack(&mut self, r: ObjRef) -> BResult<PV> {
        let slot = self.slot(r)?;
        let ok = match &slot.body {
            Body::List(ListRepr::Frames(_)) => true,
            Body::List(l) => l.is_empty_generic(),
            _ => false,
        };
        if !ok {
            return err("`frames` is not a list of frame dicts");
        }
        let frames = match &self.slots[r.id as usize].body {
            Body::List(ListRepr::Frames(f)) => self.stacks.intern(f),
            _ => 0,
        };
        let v = PV::new(T_STACK, frames as u64);
        self.release(r, v);
        Ok(v)
    }

    /// `l.append(v)`.
    pub fn list_append(&mut self, l: PV, v: PV) -> BResult<()> {
        let Some(lr) = l.obj() else {
            return err(format!(
                "APPEND to {}, expected list",
                self.val(l).type_name()
            ));
        };
        // Fold a completed dict into a record when its keys say what it is.
        let v = match self.val(v) {
            Value::Obj(r) => self.fold_item(r)?,
            Value::Frame(f) => Item::Frame(f),
            _ => Item::Value(v),
        };
        let max_events = self.max_events;
        let slot = self.slot_mut(lr)?;
        let Body::List(list) = &mut slot.body else {
            return err("APPEND to a dict or tuple, expected list");
        };
        if list.is_empty_generic() {
            match &v {
                Item::Frame(_) => *list = ListRepr::Frames(Vec::new()),
                Item::Block(_) => *list = ListRepr::Blocks(Vec::new()),
                Item::Segment(_) => *list = ListRepr::Segments(Vec::new()),
                Item::Event(_) => {
                    *list = ListRepr::Events(EventRing {
                        ring: VecDeque::new(),
                        dropped: 0,
                    })
                }
                Item::History(..) => *list = ListRepr::History(Vec::new()),
                Item::Value(_) => {}
            }
        }
        match (list, v) {
            (ListRepr::Generic(items), Item::Value(v)) => items.push(v),
            (ListRepr::Frames(f), Item::Frame(id)) => f.push(id),
            (ListRepr::Blocks(b), Item::Block(blk)) => b.push(blk),
            (ListRepr::Segments(s), Item::Segment(seg)) => s.push(*seg),
            (ListRepr::Events(ring), Item::Event(ev)) => {
                if ring.ring.len() >= max_events {
                    ring.ring.pop_front();
                    ring.dropped += 1;
                }
                ring.ring.push_back(ev);
            }
            (ListRepr::History(h), Item::History(sz, st)) => h.push((sz, st)),
            (list, item) => {
                return err(format!(
                    "a list of {} also holds {}",
                    list.kind(),
                    item.kind()
                ));
            }
        }
        Ok(())
    }

    fn dict_items(&self, r: ObjRef) -> Option<&Vec<(PV, PV)>> {
        match &self.slot(r).ok()?.body {
            Body::Dict(items) => Some(items),
            _ => None,
        }
    }

    fn fold_item(&mut self, r: ObjRef) -> BResult<Item> {
        if let Ok(Slot {
            body: Body::Event(ev),
            ..
        }) = self.slot(r)
        {
            let ev = *ev;
            self.release(r, PV::RELEASED);
            return Ok(Item::Event(ev));
        }
        let Some(items) = self.dict_items(r) else {
            return Ok(Item::Value(Self::obj_pv(r)));
        };
        // One pass over the keys: a bit per well-known key.
        let mut mask = 0u64;
        for (k, _) in items.iter() {
            if let Some(id) = k.str_id()
                && (id as usize) < 64
            {
                mask |= 1 << id;
            }
        }
        let has = |k: StrId| mask & (1 << k) != 0;
        let kind = if has(K_ACTION) {
            1
        } else if has(K_TOTAL_SIZE) {
            2
        } else if has(K_STATE) && has(K_SIZE) {
            3
        } else if has(K_REAL_SIZE) {
            4
        } else if has(K_FILENAME) && has(K_LINE) && has(K_NAME) {
            5
        } else {
            0
        };
        if kind == 0 {
            return Ok(Item::Value(Self::obj_pv(r)));
        }
        let items = match &mut self.slot_mut(r)?.body {
            Body::Dict(items) => std::mem::take(items),
            _ => unreachable!("checked above"),
        };
        let out = match kind {
            1 => self.make_event(&items).map(Item::Event),
            2 => self
                .make_segment(&items)
                .map(|s| Item::Segment(Box::new(s))),
            3 => self.make_block(&items).map(Item::Block),
            4 => self.make_history(&items),
            _ => self.make_frame(&items),
        };
        self.recycle_dict(items);
        // Frames are shared between stacks: later memo references resolve to the
        // interned frame. Every other record is used once, and released.
        let replacement = match out {
            Ok(Item::Frame(f)) => PV::new(T_FRAME, f as u64),
            _ => PV::RELEASED,
        };
        self.release(r, replacement);
        out
    }

    fn make_frame(&mut self, items: &[(PV, PV)]) -> BResult<Item> {
        let mut file = None;
        let mut line = 0i64;
        let mut name = None;
        for &(k, v) in items {
            let (k, v) = (self.val(k), self.val(v));
            match k {
                Value::Str(K_FILENAME) => match v {
                    Value::Str(s) => file = Some(s),
                    other => {
                        return err(format!(
                            "frame `filename` is {}, expected str",
                            other.type_name()
                        ));
                    }
                },
                Value::Str(K_NAME) => match v {
                    Value::Str(s) => name = Some(s),
                    other => {
                        return err(format!(
                            "frame `name` is {}, expected str",
                            other.type_name()
                        ));
                    }
                },
                Value::Str(K_LINE) => line = as_i64(v, "frame `line`")?,
                _ => {}
            }
        }
        let f = Frame {
            file: file.unwrap_or(0),
            line,
            name: name.unwrap_or(0),
        };
        let id = match self.frame_map.get(&f) {
            Some(&id) => id,
            None => {
                let id = self.frames.len() as FrameId;
                self.frames.push(f);
                self.frame_map.insert(f, id);
                id
            }
        };
        Ok(Item::Frame(id))
    }

    fn stack_of(v: Value, what: &str) -> BResult<StackId> {
        match v {
            Value::Stack(s) => Ok(s),
            Value::None => Ok(0),
            other => err(format!(
                "{what} `frames` is {}, expected a list of frames",
                other.type_name()
            )),
        }
    }

    fn new_event() -> Event {
        Event {
            action: Action::Other,
            addr: 0,
            size: 0,
            stream: 0,
            time_us: NO_TIME,
            stack: 0,
        }
    }

    /// A small non-negative integer's value, without unpacking (the common case).
    #[inline(always)]
    fn small_int(p: PV) -> Option<i64> {
        (p.tag() == T_INT).then(|| ((p.payload() << 4) as i64) >> 4)
    }

    /// Apply one `key: value` of a trace entry; true when it was the action.
    #[inline]
    fn apply_event(&mut self, ev: &mut Event, k: PV, v: PV) -> BResult<bool> {
        let Some(k) = k.str_id() else {
            return Ok(false);
        };
        if let Some(i) = Self::small_int(v) {
            match k {
                K_ADDR | K_DEVICE_FREE | K_SIZE
                    if i >= 0 && (k != K_SIZE || i as u64 <= MAX_SIZE) =>
                {
                    if k == K_SIZE {
                        ev.size = i as u64;
                    } else {
                        ev.addr = i as u64;
                    }
                    return Ok(false);
                }
                K_STREAM => {
                    ev.stream = i;
                    return Ok(false);
                }
                K_TIME_US => {
                    ev.time_us = i;
                    self.seen.time_us = true;
                    return Ok(false);
                }
                _ => {}
            }
        }
        let v = self.val(v);
        match k {
            K_ACTION => match v {
                Value::Str(s) => {
                    if s as usize >= self.action_of.len() {
                        self.refresh_actions();
                    }
                    ev.action = self.action_of[s as usize];
                    return Ok(true);
                }
                other => {
                    return err(format!(
                        "trace entry `action` is {}, expected str",
                        other.type_name()
                    ));
                }
            },
            K_ADDR | K_DEVICE_FREE => ev.addr = as_u64(v, "trace entry address")?,
            K_SIZE => ev.size = as_size(v, "trace entry `size`")?,
            K_STREAM => ev.stream = as_i64(v, "trace entry `stream`")?,
            K_TIME_US => {
                ev.time_us = as_i64(v, "trace entry `time_us`")?;
                self.seen.time_us = true;
            }
            K_FRAMES => ev.stack = Self::stack_of(v, "trace entry")?,
            K_COMPILE_CONTEXT => self.seen.compile_context = true,
            K_USER_METADATA => self.seen.user_metadata = true,
            _ => {}
        }
        Ok(false)
    }

    fn make_event(&mut self, items: &[(PV, PV)]) -> BResult<Event> {
        let mut ev = Self::new_event();
        let mut have_action = false;
        for &(k, v) in items {
            have_action |= self.apply_event(&mut ev, k, v)?;
        }
        if !have_action {
            return err("trace entry has no `action`");
        }
        Ok(ev)
    }

    fn make_block(&mut self, items: &[(PV, PV)]) -> BResult<Block> {
        let mut b = Block {
            address: None,
            size: 0,
            requested_size: u64::MAX,
            state: BlockState::Inactive,
            stack: 0,
        };
        let mut history: Option<ObjRef> = None;
        for &(k, v) in items {
            let (k, v) = (self.val(k), self.val(v));
            let Value::Str(k) = k else { continue };
            match k {
                K_SIZE => b.size = as_size(v, "block `size`")?,
                K_REQUESTED_SIZE => b.requested_size = as_size(v, "block `requested_size`")?,
                K_ADDRESS => b.address = Some(as_u64(v, "block `address`")?),
                K_FRAMES => b.stack = Self::stack_of(v, "block")?,
                K_STATE => {
                    b.state = match v {
                        Value::Str(K_ACTIVE_ALLOCATED) => BlockState::Allocated,
                        Value::Str(K_INACTIVE) => BlockState::Inactive,
                        Value::Str(s @ (K_ACTIVE_PENDING_FREE | K_ACTIVE_AWAITING_FREE)) => {
                            self.seen.pending_name = Some(s);
                            BlockState::PendingFree
                        }
                        Value::Str(s) => {
                            return err(format!("unknown block state '{}'", self.strings.get(s)));
                        }
                        other => {
                            return err(format!(
                                "block `state` is {}, expected str",
                                other.type_name()
                            ));
                        }
                    }
                }
                K_HISTORY => match v {
                    Value::Obj(r) => history = Some(r),
                    Value::None => {}
                    other => {
                        return err(format!(
                            "block `history` is {}, expected list",
                            other.type_name()
                        ));
                    }
                },
                _ => {}
            }
        }
        if let Some(r) = history {
            self.seen.history = true;
            let body = {
                self.slot(r)?;
                self.release(r, PV::RELEASED)
            };
            match body {
                Body::List(ListRepr::History(h)) => {
                    // As torch's own viewer does: the first history entry describes the block.
                    if let Some(&(real, stack)) = h.first() {
                        if b.requested_size == u64::MAX {
                            b.requested_size = real;
                        }
                        if b.stack == 0 {
                            b.stack = stack;
                        }
                    }
                }
                Body::List(l) if l.is_empty_generic() => {}
                _ => return err("block `history` is not a list of history entries"),
            }
        }
        if b.requested_size == u64::MAX {
            b.requested_size = b.size;
        }
        Ok(b)
    }

    fn make_history(&mut self, items: &[(PV, PV)]) -> BResult<Item> {
        let mut real = 0;
        let mut stack = 0;
        for &(k, v) in items {
            let (k, v) = (self.val(k), self.val(v));
            match k {
                Value::Str(K_REAL_SIZE) => real = as_size(v, "history `real_size`")?,
                Value::Str(K_FRAMES) => stack = Self::stack_of(v, "history entry")?,
                _ => {}
            }
        }
        Ok(Item::History(real, stack))
    }

    fn make_segment(&mut self, items: &[(PV, PV)]) -> BResult<Segment> {
        let mut s = Segment {
            device: 0,
            address: 0,
            total_size: 0,
            stream: 0,
            is_large: None,
            is_expandable: false,
            stack: 0,
            blocks: Vec::new(),
        };
        let mut blocks: Option<ObjRef> = None;
        for &(k, v) in items {
            let (k, v) = (self.val(k), self.val(v));
            let Value::Str(k) = k else { continue };
            match k {
                K_DEVICE => s.device = as_i64(v, "segment `device`")?,
                K_ADDRESS => s.address = as_u64(v, "segment `address`")?,
                K_TOTAL_SIZE => s.total_size = as_size(v, "segment `total_size`")?,
                K_STREAM => s.stream = as_i64(v, "segment `stream`")?,
                K_SEGMENT_TYPE => {
                    if let Value::Str(t) = v {
                        s.is_large = Some(t == K_LARGE);
                    }
                }
                K_IS_EXPANDABLE => s.is_expandable = matches!(v, Value::Bool(true)),
                K_FRAMES => s.stack = Self::stack_of(v, "segment")?,
                K_BLOCKS => match v {
                    Value::Obj(r) => blocks = Some(r),
                    other => {
                        return err(format!(
                            "segment `blocks` is {}, expected list",
                            other.type_name()
                        ));
                    }
                },
                _ => {}
            }
        }
        if let Some(r) = blocks {
            self.slot(r)?;
            match self.release(r, PV::RELEASED) {
                Body::List(ListRepr::Blocks(b)) => s.blocks = b,
                Body::List(l) if l.is_empty_generic() => {}
                _ => return err("segment `blocks` is not a list of block dicts"),
            }
        }
        let mut addr = s.address;
        for b in &mut s.blocks {
            if b.address.is_none() {
                b.address = Some(addr);
            }
            addr = addr.wrapping_add(b.size);
        }
        Ok(s)
    }

    /// Take a list's segments, or fail with a message naming what it holds.
    fn take_list(&mut self, v: PV, what: &str) -> BResult<ListRepr> {
        match self.val(v) {
            Value::Obj(r) => {
                let slot = self.slot(r)?;
                if !matches!(slot.body, Body::List(_)) {
                    return err(format!("`{what}` is a dict or tuple, expected list"));
                }
                match self.release(r, PV::RELEASED) {
                    Body::List(l) => Ok(l),
                    _ => unreachable!(),
                }
            }
            other => err(format!("`{what}` is {}, expected list", other.type_name())),
        }
    }

    fn display(&self, v: PV) -> String {
        match self.val(v) {
            Value::None => "None".into(),
            Value::Bool(b) => if b { "True" } else { "False" }.into(),
            Value::Int(i) => i.to_string(),
            Value::UInt(u) => u.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Str(s) => self.strings.get(s).to_string(),
            Value::Obj(r) => match self.slot(r).map(|s| &s.body) {
                Ok(Body::Dict(items)) => {
                    let parts: Vec<String> = items
                        .iter()
                        .map(|&(k, v)| format!("{}: {}", self.display(k), self.display(v)))
                        .collect();
                    format!("{{{}}}", parts.join(", "))
                }
                Ok(Body::Tuple(items)) | Ok(Body::List(ListRepr::Generic(items))) => {
                    let parts: Vec<String> = items.iter().map(|&v| self.display(v)).collect();
                    format!("[{}]", parts.join(", "))
                }
                _ => "…".into(),
            },
            other => other.type_name().into(),
        }
    }

    /// The top-level object is complete: assemble the snapshot.
    pub fn finish(mut self, top: PV, mut layout: Layout, file_bytes: u64) -> BResult<Snapshot> {
        let mut segments = Vec::new();
        let mut traces = Vec::new();
        let mut settings = Vec::new();
        let items = match self.val(top) {
            Value::Obj(r) => match &self.slot(r)?.body {
                Body::Dict(items) => items.clone(),
                Body::List(_) => {
                    // `torch.cuda.memory_snapshot()`: a bare list of segments.
                    layout.segments_only = true;
                    vec![(PV::str(K_SEGMENTS), top)]
                }
                Body::Tuple(_) => {
                    return err("the top-level object is a tuple, expected a snapshot dict");
                }
                Body::Event(_) => {
                    return err("the top-level object is a trace entry, expected a snapshot dict");
                }
                Body::Free => unreachable!(),
            },
            other => {
                return err(format!(
                    "the top-level object is {}, expected a snapshot dict",
                    other.type_name()
                ));
            }
        };
        let mut have_segments = false;
        for (k, v) in items {
            let Some(k) = k.str_id() else { continue };
            match k {
                K_SEGMENTS => {
                    have_segments = true;
                    match self.take_list(v, "segments")? {
                        ListRepr::Segments(s) => segments = s,
                        l if l.is_empty_generic() => {}
                        _ => return err("`segments` is not a list of segment dicts"),
                    }
                }
                K_DEVICE_TRACES => {
                    let outer = match self.take_list(v, "device_traces")? {
                        ListRepr::Generic(v) => v,
                        _ => return err("`device_traces` is not a list of per-device lists"),
                    };
                    for dev in outer {
                        match self.take_list(dev, "device_traces[i]")? {
                            ListRepr::Events(r) => traces.push(DeviceTrace {
                                events: r.ring.into(),
                                dropped: r.dropped,
                            }),
                            l if l.is_empty_generic() => traces.push(DeviceTrace::default()),
                            _ => return err("`device_traces[i]` is not a list of trace entries"),
                        }
                    }
                }
                K_ALLOCATOR_SETTINGS => {
                    layout.allocator_settings = true;
                    if let Some(r) = v.obj()
                        && let Ok(Body::Dict(items)) = self.slot(r).map(|s| &s.body)
                    {
                        for &(k, v) in items {
                            settings.push((self.display(k), self.display(v)));
                        }
                    }
                }
                K_EXTERNAL_ANNOTATIONS => layout.external_annotations = true,
                _ => {}
            }
        }
        if !have_segments {
            return err("not a PyTorch memory snapshot: the top-level dict has no `segments`");
        }
        layout.time_us = self.seen.time_us;
        layout.compile_context = self.seen.compile_context;
        layout.user_metadata = self.seen.user_metadata;
        layout.legacy_history = self.seen.history;
        layout.pending_free_state_name = self
            .seen
            .pending_name
            .map(|s| self.strings.get(s).to_string());
        Ok(Snapshot {
            strings: self.strings,
            frames: self.frames,
            stacks: self.stacks,
            segments,
            traces,
            allocator_settings: settings,
            layout,
            file_bytes,
            read_ahead_events: 0,
        })
    }
}

enum Item {
    Value(PV),
    Frame(FrameId),
    Block(Block),
    Segment(Box<Segment>),
    Event(Event),
    History(u64, StackId),
}

impl Item {
    fn kind(&self) -> &'static str {
        match self {
            Item::Value(_) => "other values",
            Item::Frame(_) => "frames",
            Item::Block(_) => "blocks",
            Item::Segment(_) => "segments",
            Item::Event(_) => "trace entries",
            Item::History(..) => "history entries",
        }
    }
}
