"""A CUDA caching allocator that does what c10/cuda/CUDACachingAllocator.cpp does.

Only the parts a snapshot can show are modelled, with torch's defaults
(``max_split_size`` unlimited, no ``roundup_power2_divisions``, no expandable
segments): sizes rounded to 512 bytes; a small pool (requests up to 1 MiB, 2 MiB
segments) and a large pool (20 MiB segments below 10 MiB, else rounded to 2 MiB);
best-fit search per stream; splitting when the rest is at least 512 bytes (small) or
more than 1 MiB (large); merging freed neighbours; cross-stream uses delaying the free
until the stream's work is done (``free_requested`` now, ``free_completed`` when the
next ``malloc`` processes the events); on a failed ``cudaMalloc`` the non-split cached
segments are freed and the malloc retried before an ``oom`` entry; ``empty_cache``;
the history ring buffer of ``max_entries``.

Which context (traceback) each trace entry carries follows torch too: ``malloc``
gathers one (the ``alloc``, the ``segment_alloc`` before it, the ``segment_free`` and
delayed ``free_completed`` entries it triggers, an ``oom``); ``free`` gathers one only
with ``context="all"`` (then ``free_requested`` and its ``free_completed`` share it),
else both use the block's allocation context; with ``context="state"`` no trace entry
has frames; the block keeps its allocation context for the snapshot.
"""

import itertools

from .frames import CallSite

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
kMinBlockSize = 512
kSmallSize = MiB
kSmallBuffer = 2 * MiB
kMinLargeAlloc = 10 * MiB
kRoundLarge = 2 * MiB
kLargeBuffer = 20 * MiB

LEVELS = {None: 0, "state": 1, "alloc": 2, "all": 3}
STATE, ALLOC, ALL = 1, 2, 3

_tb_ids = itertools.count(1)
FREE_IN_ENGINE = CallSite(thread="autograd")


class Traceback:
    """torch's CapturedTraceback: gathered once per allocator call."""

    __slots__ = ("id", "site", "kind")

    def __init__(self, site, kind):
        self.id = next(_tb_ids)
        self.site = site
        self.kind = kind


class TraceEntry:
    __slots__ = ("action", "addr", "size", "stream", "time_us", "ctx", "user_metadata", "live_before")

    def __init__(self, action, addr, size, stream, time_us, ctx, user_metadata="", live_before=0):
        self.action, self.addr, self.size, self.stream = action, addr, size, stream
        self.time_us, self.ctx, self.user_metadata = time_us, ctx, user_metadata
        # Requested bytes allocated and not yet requested free, before this entry
        # (the simulator's truth for the live-memory curve).
        self.live_before = live_before


class Block:
    __slots__ = ("ptr", "size", "req", "stream", "small", "allocated", "prev", "next", "ctx",
                 "seg_ctx", "event_count", "stream_uses", "pending_streams")

    def __init__(self, ptr, size, stream, small):
        self.ptr, self.size, self.stream, self.small = ptr, size, stream, small
        self.req = 0
        self.allocated = False
        self.prev = self.next = None
        self.ctx = None
        self.seg_ctx = None
        self.event_count = 0
        self.stream_uses = set()
        self.pending_streams = set()

    def free_for_reuse(self):
        return not self.allocated and self.event_count == 0 and not self.stream_uses


class OutOfMemory(Exception):
    pass


def round_size(size):
    if size < kMinBlockSize:
        return kMinBlockSize
    return kMinBlockSize * ((size + kMinBlockSize - 1) // kMinBlockSize)


def allocation_size(size):
    if size <= kSmallSize:
        return kSmallBuffer
    if size < kMinLargeAlloc:
        return kLargeBuffer
    return kRoundLarge * ((size + kRoundLarge - 1) // kRoundLarge)


class Allocator:
    """One device's DeviceCachingAllocator."""

    def __init__(self, device=0, capacity=80 * GiB, base=0x7F3A00000000, clock=None):
        self.device = device
        self.capacity = capacity
        self.next_va = base + device * (1 << 40)
        self.free_va = []  # (addr, size) ranges cudaFree'd, reused first-fit
        self.pool = []  # free blocks of both pools
        self.heads = []  # first block of every segment
        self.reserved = 0
        self.events = []  # blocks freed while used on another stream
        self.done_streams = set()
        self.record_history = False
        self.level = 0
        self.stacks = "all"
        self.max_entries = 1 << 62
        self.ring = []
        self.ring_next = 0
        self.clock = clock if clock is not None else Clock()
        self.user_metadata = ""
        self.live_req = 0
        # external_annotations (torch >= 2.6): record_function ranges, on this clock
        self.annotations = []

    # --- torch.cuda.memory._record_memory_history ---
    def record_memory_history(self, enabled="all", context="all", stacks="all", max_entries=None):
        self.record_history = enabled is not None
        self.level = LEVELS[context] if enabled is not None else 0
        self.stacks = stacks
        self.max_entries = max(1, max_entries) if max_entries else 1 << 62
        if enabled == "state":
            self.max_entries = 1
        if enabled is None:
            self.ring, self.ring_next = [], 0

    def gather(self, site, level, kind):
        if self.level < level or site is None:
            return None
        return Traceback(site, kind)

    def record(self, action, addr, size, stream, ctx):
        self.peak_reserved = max(getattr(self, "peak_reserved", 0), self.reserved)
        live = self.live_req
        if action == "alloc":
            self.live_req += size
        elif action == "free_requested":
            self.live_req -= size
        if not self.record_history:
            return
        te = TraceEntry(action, addr, size, stream, self.clock.tick(),
                        ctx if self.level >= ALLOC else None, self.user_metadata, live)
        if len(self.ring) < self.max_entries:
            self.ring.append(te)
        else:
            self.ring[self.ring_next] = te
            self.ring_next = (self.ring_next + 1) % self.max_entries

    def trace(self):
        return self.ring[self.ring_next:] + self.ring[:self.ring_next]

    def annotate(self, name, stage):
        """A record_function range starts or ends (torch's annotation callback records
        it on the current device while history is recorded)."""
        if self.record_history:
            self.annotations.append((name, stage, self.clock.tick(1)))
            del self.annotations[:-self.max_entries]

    # --- allocation ---
    def malloc(self, orig_size, site: CallSite, stream=0):
        ctx = self.gather(site, STATE, "malloc")
        self.process_events(ctx)
        size = round_size(orig_size)
        small = size <= kSmallSize
        block = self.get_free_block(size, stream, small)
        if block is None:
            block = (self.alloc_block(size, stream, small, ctx)
                     or (self.release_cached_blocks(ctx) and self.alloc_block(size, stream, small, ctx)))
        if block is None:
            device_free = self.capacity - self.reserved
            self.record("oom", device_free, size, stream, ctx)
            raise OutOfMemory(f"tried to allocate {size}, {device_free} free")
        remaining = block.size - size
        split = remaining >= kMinBlockSize if small else remaining > kSmallSize
        if split:
            rest = Block(block.ptr + size, remaining, stream, small)
            rest.prev, rest.next = block, block.next
            if block.next:
                block.next.prev = rest
            block.next = rest
            block.size = size
            self.pool.append(rest)
        block.allocated = True
        block.req = orig_size
        block.ctx = ctx
        self.record("alloc", block.ptr, orig_size, stream, ctx)
        return block

    def get_free_block(self, size, stream, small):
        best = None
        for b in self.pool:
            if b.stream == stream and b.small == small and b.size >= size:
                if best is None or (b.size, b.ptr) < (best.size, best.ptr):
                    best = b
        if best is not None:
            self.pool.remove(best)
        return best

    def alloc_block(self, size, stream, small, ctx):
        total = allocation_size(size)
        if self.reserved + total > self.capacity:
            return None
        ptr = self.cuda_malloc(total)
        self.reserved += total
        b = Block(ptr, total, stream, small)
        b.seg_ctx = ctx
        self.heads.append(b)
        self.record("segment_alloc", ptr, total, stream, ctx)
        return b

    def cuda_malloc(self, total):
        for i, (a, s) in enumerate(self.free_va):
            if s >= total:
                if s == total:
                    self.free_va.pop(i)
                else:
                    self.free_va[i] = (a + total, s - total)
                return a
        ptr = self.next_va
        self.next_va += total + 2 * MiB
        return ptr

    # --- freeing ---
    def free(self, block, site=None):
        # torch gathers the free's own context with context="all": by default the
        # freeing thread is the engine's (a backward temporary dying in C++).
        ctx = self.gather(site or FREE_IN_ENGINE, ALL, "free")
        block.allocated = False
        self.record("free_requested", block.ptr, block.req, block.stream, ctx or block.ctx)
        if block.stream_uses:
            block.event_count = len(block.stream_uses)
            block.pending_streams = set(block.stream_uses)
            block.stream_uses = set()
            self.events.append(block)
        else:
            self.free_block(block, ctx)

    def record_stream(self, block, stream):
        if stream != block.stream:
            block.stream_uses.add(stream)

    def stream_done(self, stream):
        """The work queued on `stream` so far has finished (its events complete)."""
        self.done_streams.add(stream)

    def process_events(self, ctx):
        keep = []
        for b in self.events:
            b.pending_streams -= self.done_streams
            b.event_count = len(b.pending_streams)
            if b.event_count == 0:
                self.free_block(b, ctx)
            else:
                keep.append(b)
        self.events = keep
        self.done_streams = set()

    def free_block(self, block, ctx):
        self.record("free_completed", block.ptr, block.req, block.stream, ctx or block.ctx)
        block.ctx = None
        block.req = 0
        for other in (block.prev, block.next):
            if other is not None and other.free_for_reuse():
                self.pool.remove(other)
                if other is block.prev:
                    block.ptr = other.ptr
                    block.prev = other.prev
                    if block.prev:
                        block.prev.next = block
                    block.seg_ctx = other.seg_ctx
                    if other in self.heads:
                        self.heads[self.heads.index(other)] = block
                else:
                    block.next = other.next
                    if block.next:
                        block.next.prev = block
                block.size += other.size
        self.pool.append(block)

    def release_cached_blocks(self, ctx):
        events, self.events = self.events, []
        for b in events:  # synchronize_and_free_events: one block at a time
            b.event_count = 0
            b.pending_streams = set()
            self.free_block(b, ctx)
        released = False
        for b in sorted(self.pool, key=lambda b: (b.small, b.stream, b.size, b.ptr)):
            if b.prev is None and b.next is None:
                self.pool.remove(b)
                self.heads.remove(b)
                self.reserved -= b.size
                self.free_va.append((b.ptr, b.size))
                self.record("segment_free", b.ptr, b.size, b.stream, ctx or b.seg_ctx)
                released = True
        return True

    def empty_cache(self, site=None):
        self.release_cached_blocks(self.gather(site, ALL, "empty_cache"))

    # --- what _snapshot() reads ---
    def segments(self):
        """Segments in address order, each (head, [blocks in address order])."""
        out = []
        for h in sorted(self.heads, key=lambda b: b.ptr):
            blocks, b = [], h
            while b is not None:
                blocks.append(b)
                b = b.next
            out.append((h, blocks))
        return out

    def snapshot_taken(self):
        """torch records a `snapshot` entry after reading the segments (it shows up
        in the next snapshot's trace)."""
        total_active = sum(b.size for _, bl in self.segments() for b in bl
                           if b.allocated or b.event_count > 0)
        self.record("snapshot", 0, total_active, 0, None)

    @staticmethod
    def state(b):
        if b.allocated:
            return "active_allocated"
        if b.event_count > 0 or b.stream_uses:
            return "active_pending_free"
        return "inactive"

    def totals(self):
        t = dict(reserved_bytes=0, allocated_bytes=0, pending_free_bytes=0, inactive_bytes=0,
                 requested_bytes=0, segments=0, allocated_blocks=0, pending_free_blocks=0,
                 inactive_blocks=0, largest_inactive_block_bytes=0, free_segments=0,
                 free_segment_bytes=0, expandable_segments=0, expandable_inactive_bytes=0,
                 fragmented_bytes=0, reclaimable_bytes=0)
        for h, blocks in self.segments():
            total = sum(b.size for b in blocks)
            t["segments"] += 1
            t["reserved_bytes"] += total
            all_free = all(self.state(b) == "inactive" for b in blocks)
            free = sum(b.size for b in blocks if self.state(b) == "inactive")
            if all_free:
                t["free_segments"] += 1
                t["free_segment_bytes"] += total
            if hasattr(h, "mapped"):
                # an expandable segment's mapped range: what empty_cache would unmap
                t["expandable_segments"] += 1
                t["expandable_inactive_bytes"] += free
                page = h.seg.page
                for b in blocks:
                    if self.state(b) == "inactive":
                        lo = -(-(b.ptr - h.ptr) // page) * page
                        hi = (b.ptr + b.size - h.ptr) // page * page
                        t["reclaimable_bytes"] += max(0, hi - lo)
            elif all_free:
                t["reclaimable_bytes"] += total
            else:
                t["fragmented_bytes"] += free
            for b in blocks:
                s = self.state(b)
                if s == "active_allocated":
                    t["allocated_bytes"] += b.size
                    t["requested_bytes"] += b.req
                    t["allocated_blocks"] += 1
                elif s == "active_pending_free":
                    t["pending_free_bytes"] += b.size
                    t["pending_free_blocks"] += 1
                else:
                    t["inactive_bytes"] += b.size
                    t["inactive_blocks"] += 1
                    t["largest_inactive_block_bytes"] = max(t["largest_inactive_block_bytes"], b.size)
        t["rounding_waste_bytes"] = t["allocated_bytes"] - t["requested_bytes"]
        return t


class Clock:
    """Microseconds since the epoch, moving a few microseconds per allocator call."""

    def __init__(self, start=1_748_330_000_000_000):
        self.t = start

    def tick(self, us=3):
        self.t += us
        return self.t

    def advance(self, us):
        self.t += us


class Process:
    """One training process: an allocator per visible device (torch makes one for
    every device, so `device_traces` has a list per device)."""

    def __init__(self, devices=1, capacity=80 * GiB):
        self.clock = Clock()
        self.devices = [Allocator(d, capacity, clock=self.clock) for d in range(devices)]

    def record_memory_history(self, *a, **k):
        for d in self.devices:
            d.record_memory_history(*a, **k)
