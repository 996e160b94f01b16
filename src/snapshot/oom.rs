//! The allocator's state when an OOM was recorded, and why the malloc failed.
//!
//! The snapshot's segments and blocks are the state at the end; the trace after the
//! OOM says what changed since (pithtrain's handler takes the snapshot in `except`,
//! after the step's tensors were freed). Undoing those events from the end back to
//! the OOM gives the segments and the active blocks at the OOM, from which follow the
//! cached free memory and its largest free range in the pool the request needed.
//!
//! torch frees every cached segment with no active block before it records an OOM,
//! so what is cached then is free space inside segments that also hold live blocks.
//! When that is larger than the request but no single free range is, the memory was
//! there in pieces: fragmentation.
//!
//! Expandable segments are mapped ranges (see `expandable`): undoing a `segment_map`
//! takes its range out of the segment that holds it (which may split it), undoing a
//! `segment_unmap` puts the range back next to its neighbours. Before the OOM torch
//! unmapped the whole free pages, so what stays cached there is the partial pages
//! at the ends of free blocks.

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::{Action, BlockState, DeviceTrace, Snapshot};

/// Requests above this go to the large pool (torch's kSmallSize).
const SMALL_SIZE: u64 = 1 << 20;
/// The small pool's segments are exactly this size (kSmallBuffer).
const SMALL_SEGMENT: u64 = 2 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Enough cached free memory, but no free range large enough.
    Fragmentation,
    /// Live memory, the cache and the device's free memory together were too little.
    OutOfMemory,
}

#[derive(Clone, Debug, Serialize)]
pub struct OomState {
    pub cause: Cause,
    /// Reserved in segments of the request's pool and stream.
    pub reserved_bytes: u64,
    /// Free inside those segments.
    pub cached_free_bytes: u64,
    /// The largest free range inside one of them.
    pub largest_free_block_bytes: u64,
    /// Segments in that pool and stream, and how many had free space.
    pub segments: u64,
    pub segments_with_free: u64,
    /// The request's pool and stream used expandable segments.
    pub expandable: bool,
}

fn round_size(n: u64) -> u64 {
    n.max(512).div_ceil(512) * 512
}

#[derive(Clone, Copy)]
struct Seg {
    size: u64,
    stream: i64,
    large: bool,
    expandable: bool,
}

/// Take `[addr, addr + size)` out of the expandable segment that maps it.
fn unmap_range(segs: &mut BTreeMap<u64, Seg>, addr: u64, size: u64) {
    let Some((&start, &seg)) = segs.range(..=addr).next_back() else {
        return;
    };
    let end = start.saturating_add(seg.size);
    if !seg.expandable || addr >= end {
        return;
    }
    segs.remove(&start);
    if addr > start {
        segs.insert(
            start,
            Seg {
                size: addr - start,
                ..seg
            },
        );
    }
    let cut = addr.saturating_add(size);
    if cut < end {
        segs.insert(
            cut,
            Seg {
                size: end - cut,
                ..seg
            },
        );
    }
}

/// Put `[addr, addr + size)` back as mapped, joined to the mapped ranges next to it; its
/// pool is theirs (else the nearest expandable segment's on the stream).
fn map_range(segs: &mut BTreeMap<u64, Seg>, addr: u64, size: u64, stream: i64) {
    let end = addr.saturating_add(size);
    let before = segs
        .range(..addr)
        .next_back()
        .filter(|(s, g)| g.expandable && g.stream == stream && s.saturating_add(g.size) == addr)
        .map(|(s, g)| (*s, *g));
    let after = segs
        .get(&end)
        .filter(|g| g.expandable && g.stream == stream)
        .copied();
    let nearest = || {
        segs.iter()
            .filter(|(_, g)| g.expandable && g.stream == stream)
            .min_by_key(|(s, _)| s.abs_diff(addr))
            .map(|(_, g)| g.large)
    };
    let large = before
        .map(|(_, g)| g.large)
        .or(after.map(|g| g.large))
        .or_else(nearest)
        .unwrap_or(size > SMALL_SEGMENT);
    let mut start = addr;
    let mut total = size;
    if let Some((s, g)) = before {
        segs.remove(&s);
        start = s;
        total = total.saturating_add(g.size);
    }
    if let Some(g) = after {
        segs.remove(&end);
        total = total.saturating_add(g.size);
    }
    segs.insert(
        start,
        Seg {
            size: total,
            stream,
            large,
            expandable: true,
        },
    );
}

/// The state just after trace entry `idx` (an `oom`) of `t`, device `device`.
pub fn state_at(snap: &Snapshot, device: i64, t: &DeviceTrace, idx: usize) -> OomState {
    let mut segs: BTreeMap<u64, Seg> = BTreeMap::new();
    let mut active: BTreeMap<u64, u64> = BTreeMap::new();
    for s in snap.segments.iter().filter(|s| s.device == device) {
        segs.insert(
            s.address,
            Seg {
                size: s.total_size,
                stream: s.stream,
                large: s.is_large.unwrap_or(s.total_size != SMALL_SEGMENT),
                expandable: s.is_expandable,
            },
        );
        for b in s.blocks.iter().filter(|b| b.state != BlockState::Inactive) {
            active.insert(b.address.unwrap_or(s.address), b.size);
        }
    }
    for e in t.events[idx + 1..].iter().rev() {
        match e.action {
            Action::Alloc => {
                active.remove(&e.addr);
            }
            Action::FreeCompleted => {
                active.entry(e.addr).or_insert_with(|| round_size(e.size));
            }
            Action::SegmentAlloc => {
                segs.remove(&e.addr);
            }
            Action::SegmentFree => {
                segs.insert(
                    e.addr,
                    Seg {
                        size: e.size,
                        stream: e.stream,
                        large: e.size != SMALL_SEGMENT,
                        expandable: false,
                    },
                );
            }
            Action::SegmentMap => unmap_range(&mut segs, e.addr, e.size),
            Action::SegmentUnmap => map_range(&mut segs, e.addr, e.size, e.stream),
            _ => {}
        }
    }
    let oom = &t.events[idx];
    let large = oom.size > SMALL_SIZE;
    let (mut reserved, mut free, mut largest, mut n, mut with_free) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut expandable = false;
    for (&addr, seg) in &segs {
        if seg.stream != oom.stream || seg.large != large {
            continue;
        }
        n += 1;
        expandable |= seg.expandable;
        reserved = reserved.saturating_add(seg.size);
        let end = addr.saturating_add(seg.size);
        let mut at = addr;
        let mut seg_free = 0u64;
        for (&a, &sz) in active.range(addr..end) {
            let gap = a.saturating_sub(at);
            seg_free += gap;
            largest = largest.max(gap);
            at = at.max(a.saturating_add(sz));
        }
        let tail = end.saturating_sub(at);
        seg_free += tail;
        largest = largest.max(tail);
        free = free.saturating_add(seg_free);
        with_free += (seg_free > 0) as u64;
    }
    let cause = if free >= oom.size && largest < oom.size {
        Cause::Fragmentation
    } else {
        Cause::OutOfMemory
    };
    OomState {
        cause,
        reserved_bytes: reserved,
        cached_free_bytes: free,
        largest_free_block_bytes: largest,
        segments: n,
        segments_with_free: with_free,
        expandable,
    }
}
