//! The snapshot model: what a PyTorch memory snapshot says, in compact typed form.
//!
//! Strings, frames and stacks are interned: torch shares each frame dict and each
//! stack list between every block and trace entry that has it, and so does this
//! model (a `StackId` is 4 bytes). Nothing here keeps a generic value tree.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A small, fast, non-cryptographic hasher (FxHash) for interning tables.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let v = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            self.add(v);
        }
        for &b in chunks.remainder() {
            self.add(b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        // The product's low bits depend only on the input's low bits, and hashbrown
        // picks buckets by the low bits: frame lines or indices that are multiples
        // of 4096 (a file's choice) would share a handful of buckets. Bring the
        // well-mixed high bits down (as rustc-hash 2 does).
        self.0.rotate_left(26)
    }
}

impl FxHasher {
    #[inline]
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(SEED);
    }
}

pub type FxBuild = BuildHasherDefault<FxHasher>;
pub type FxMap<K, V> = HashMap<K, V, FxBuild>;

pub type StrId = u32;
pub type FrameId = u32;
pub type StackId = u32;

/// Interned strings. Id 0 is the empty string.
#[derive(Default)]
pub struct Interner {
    map: FxMap<Box<str>, StrId>,
    strs: Vec<Box<str>>,
}

impl Interner {
    pub fn new() -> Self {
        let mut i = Interner::default();
        i.intern("");
        i
    }
    pub fn intern(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.map.get(s) {
            return id;
        }
        let id = self.strs.len() as StrId;
        let b: Box<str> = s.into();
        self.strs.push(b.clone());
        self.map.insert(b, id);
        id
    }
    pub fn get(&self, id: StrId) -> &str {
        &self.strs[id as usize]
    }
    pub fn lookup(&self, s: &str) -> Option<StrId> {
        self.map.get(s).copied()
    }
    pub fn len(&self) -> usize {
        self.strs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.strs.is_empty()
    }
}

/// One stack frame: `filename:line` in function `name`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Frame {
    pub file: StrId,
    pub line: i64,
    pub name: StrId,
}

/// Interned stacks: each a slice of frame ids, innermost (the allocation point) first,
/// as torch writes them. Stack 0 is the empty stack.
pub struct Stacks {
    data: Vec<FrameId>,
    offsets: Vec<(u32, u32)>,
    map: FxMap<Box<[FrameId]>, StackId>,
}

impl Default for Stacks {
    fn default() -> Self {
        let mut s = Stacks {
            data: Vec::new(),
            offsets: Vec::new(),
            map: FxMap::default(),
        };
        s.intern(&[]);
        s
    }
}

impl Stacks {
    pub fn intern(&mut self, frames: &[FrameId]) -> StackId {
        if let Some(&id) = self.map.get(frames) {
            return id;
        }
        let id = self.offsets.len() as StackId;
        let start = self.data.len() as u32;
        self.data.extend_from_slice(frames);
        self.offsets.push((start, frames.len() as u32));
        self.map.insert(frames.into(), id);
        id
    }
    pub fn get(&self, id: StackId) -> &[FrameId] {
        let (s, n) = self.offsets[id as usize];
        &self.data[s as usize..(s + n) as usize]
    }
    pub fn len(&self) -> usize {
        self.offsets.len()
    }
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum BlockState {
    /// `active_allocated`: used by a tensor.
    Allocated,
    /// `active_pending_free` (torch) or `active_awaiting_free` (docs): freed, waiting on a stream.
    PendingFree,
    /// `inactive`: cached, reusable.
    Inactive,
}

#[derive(Clone, Debug)]
pub struct Block {
    pub address: Option<u64>,
    pub size: u64,
    pub requested_size: u64,
    pub state: BlockState,
    pub stack: StackId,
}

#[derive(Clone, Debug)]
pub struct Segment {
    pub device: i64,
    pub address: u64,
    pub total_size: u64,
    pub stream: i64,
    pub is_large: Option<bool>,
    pub is_expandable: bool,
    pub stack: StackId,
    pub blocks: Vec<Block>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Oom,
    Snapshot,
    Other,
}

impl Action {
    pub const ALL: [Action; 10] = [
        Action::Alloc,
        Action::FreeRequested,
        Action::FreeCompleted,
        Action::SegmentAlloc,
        Action::SegmentFree,
        Action::SegmentMap,
        Action::SegmentUnmap,
        Action::Oom,
        Action::Snapshot,
        Action::Other,
    ];
    pub fn from_name(s: &str) -> Action {
        match s {
            "alloc" => Action::Alloc,
            "free_requested" => Action::FreeRequested,
            "free_completed" => Action::FreeCompleted,
            "segment_alloc" => Action::SegmentAlloc,
            "segment_free" => Action::SegmentFree,
            "segment_map" => Action::SegmentMap,
            "segment_unmap" => Action::SegmentUnmap,
            "oom" => Action::Oom,
            "snapshot" => Action::Snapshot,
            _ => Action::Other,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Oom => "oom",
            Action::Snapshot => "snapshot",
            Action::Other => "other",
        }
    }
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Marker for "no time_us in this entry" (old layouts).
pub const NO_TIME: i64 = i64::MIN;

/// One `device_traces` entry. For `oom`, `addr` holds `device_free`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub action: Action,
    pub addr: u64,
    pub size: u64,
    pub stream: i64,
    pub time_us: i64,
    pub stack: StackId,
}

/// One device's trace: the newest `events` (oldest first) and how many older ones were dropped.
#[derive(Default, Debug)]
pub struct DeviceTrace {
    pub events: Vec<Event>,
    pub dropped: u64,
}

/// What the file looked like: which optional parts of the schema it had.
#[derive(Default, Debug, Clone, serde::Serialize)]
pub struct Layout {
    pub format: String,
    pub pickle_protocol: Option<u8>,
    pub time_us: bool,
    pub allocator_settings: bool,
    pub compile_context: bool,
    pub user_metadata: bool,
    pub external_annotations: bool,
    /// Blocks carry the old `history` list instead of `frames`/`requested_size`.
    pub legacy_history: bool,
    /// The name used for the delayed-free state, when one was seen.
    pub pending_free_state_name: Option<String>,
    /// The file's top level was a bare list of segments (`torch.cuda.memory_snapshot()`).
    pub segments_only: bool,
    /// The file shares records (a trace entry, block or segment referenced twice),
    /// which torch never writes: it was read a second time keeping every memoized object.
    pub shared_records: bool,
}

/// One `external_annotations` entry (torch >= 2.6): a `record_function` range the run
/// passed through while history was recorded (`Optimizer.step#AdamW.step`, `START` and
/// `END`), on the clock of the trace entries' `time_us`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Annotation {
    pub name: String,
    /// `START` or `END` as torch writes them (other values are kept as written).
    pub stage: String,
    pub device: Option<i64>,
    pub time_us: Option<i64>,
}

pub struct Snapshot {
    pub strings: Interner,
    pub frames: Vec<Frame>,
    pub stacks: Stacks,
    pub segments: Vec<Segment>,
    pub traces: Vec<DeviceTrace>,
    pub allocator_settings: Vec<(String, String)>,
    /// `external_annotations`, in file order.
    pub annotations: Vec<Annotation>,
    pub layout: Layout,
    pub file_bytes: u64,
    /// Trace entries read by the helper thread of a split read (0: read in one pass).
    pub read_ahead_events: u64,
}

impl Snapshot {
    pub fn frame_file(&self, f: FrameId) -> &str {
        self.strings.get(self.frames[f as usize].file)
    }
    pub fn frame_name(&self, f: FrameId) -> &str {
        self.strings.get(self.frames[f as usize].name)
    }
    pub fn frame_line(&self, f: FrameId) -> i64 {
        self.frames[f as usize].line
    }
    pub fn stack(&self, s: StackId) -> &[FrameId] {
        self.stacks.get(s)
    }
}

#[cfg(test)]
mod hasher_tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Keys a file chooses (memo indices, frame lines) spaced 4096 apart still spread
    /// over the buckets a table indexes by its hashes' low bits.
    #[test]
    fn multiples_of_4096_spread_over_the_low_bits() {
        let low_bits = |h: u64| h & 0xfff;
        let b = FxBuild::default();
        let ints: std::collections::HashSet<u64> = (0..4096u32)
            .map(|i| low_bits(b.hash_one(i * 4096)))
            .collect();
        let frames: std::collections::HashSet<u64> = (0..4096i64)
            .map(|i| {
                low_bits(b.hash_one(Frame {
                    file: 1,
                    line: i * 4096,
                    name: 2,
                }))
            })
            .collect();
        assert!(ints.len() > 2000, "{} buckets", ints.len());
        assert!(frames.len() > 2000, "{} buckets", frames.len());
    }
}
