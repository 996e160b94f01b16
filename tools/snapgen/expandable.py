"""The caching allocator with ``expandable_segments:True``, as c10/cuda/CUDACachingAllocator.cpp
runs it.

Each (stream, pool) gets one ``ExpandableSegment``: address space for 1 1/8 of the
device's memory, mapped in pages (``segment_size``: ``kSmallBuffer``, 2 MiB, for the
small pool, ``kLargeBuffer``, 20 MiB, for the large one). Its blocks are mapped or
not; a malloc that no free mapped block fits goes to ``try_allocate_expandable_block``:
the lowest unmapped block with room (with the free mapped block before it, if any),
mapped page by page (``map_block``: a ``segment_map`` entry for the range, merged with
free mapped neighbours). Requests are rounded to 512 bytes only (no segment sizes) and
split whenever 512 bytes or more remain, in both pools (``should_split``). Freed blocks
stay mapped. ``release_cached_blocks`` (``empty_cache``, and before an ``oom`` entry)
unmaps the whole pages inside each free block (``unmap_block``: a ``segment_unmap``
entry, the partial pages at both ends stay mapped). ``_snapshot()`` reports each
contiguous mapped range as one segment (``is_expandable: True``, no frames), so a
segment's ``total_size`` is mapped memory.
"""

from .allocator import (Allocator, Block, OutOfMemory, STATE, kMinBlockSize, kLargeBuffer, kSmallBuffer,
                        kSmallSize, round_size)


class XBlock(Block):
    __slots__ = ("mapped", "seg")

    def __init__(self, ptr, size, stream, small, seg, mapped):
        super().__init__(ptr, size, stream, small)
        self.seg = seg
        self.mapped = mapped


class ExpandableSegment:
    def __init__(self, base, size, page, stream, small):
        self.base, self.size, self.page, self.stream, self.small = base, size, page, stream, small
        self.first = XBlock(base, size, stream, small, self, False)

    def blocks(self):
        out, b = [], self.first
        while b is not None:
            out.append(b)
            b = b.next
        return out


class ExpandableAllocator(Allocator):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.xsegs = {}  # (stream, small) -> ExpandableSegment

    def segment_for(self, stream, small):
        key = (stream, small)
        if key not in self.xsegs:
            page = kSmallBuffer if small else kLargeBuffer
            size = (self.capacity * 9 // 8 + page - 1) // page * page
            self.xsegs[key] = ExpandableSegment(self.next_va, size, page, stream, small)
            self.next_va += size + 2 * 1024 * 1024 * 1024
        return self.xsegs[key]

    def malloc(self, orig_size, site, stream=0):
        ctx = self.gather(site, STATE, "malloc")
        self.process_events(ctx)
        size = round_size(orig_size)
        small = size <= kSmallSize
        block = self.get_free_block(size, stream, small)
        if block is None:
            block = (self.try_allocate_expandable(size, stream, small, ctx)
                     or (self.release_cached_blocks(ctx)
                         and self.try_allocate_expandable(size, stream, small, ctx)))
        if block is None:
            device_free = self.capacity - self.reserved
            self.record("oom", device_free, size, stream, ctx)
            raise OutOfMemory(f"tried to allocate {size}, {device_free} free")
        remaining = block.size - size
        if remaining >= kMinBlockSize:
            rest = XBlock(block.ptr + size, remaining, stream, small, block.seg, True)
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

    def try_allocate_expandable(self, size, stream, small, ctx):
        seg = self.segment_for(stream, small)
        cand = None
        for b in seg.blocks():
            if b.mapped:
                continue
            c = b.prev if (b.prev is not None and b.prev.mapped and b.prev.free_for_reuse()) else b
            room = b.size + (c.size if c is not b else 0)
            if room >= size:
                cand = c
                break
        if cand is None:
            return None
        if not cand.mapped:
            cand = self.map_block(cand, min(cand.size, size), ctx)
            if cand is None:
                return None
        while cand.size < size:
            nxt = cand.next
            merged = self.map_block(nxt, min(size - cand.size, nxt.size), ctx)
            if merged is None:
                return None
            cand = merged
        self.pool.remove(cand)
        return cand

    def map_block(self, b, size, ctx):
        """Map the pages covering [b.ptr, b.ptr + size) of unmapped block `b`; the
        mapped block, merged with its free mapped neighbours (None: the device is full)."""
        page = b.seg.page
        nbytes = min(b.size, (size + page - 1) // page * page)
        if self.reserved + nbytes > self.capacity:
            return None
        if nbytes < b.size:
            rest = XBlock(b.ptr + nbytes, b.size - nbytes, b.stream, b.small, b.seg, False)
            rest.prev, rest.next = b, b.next
            if b.next:
                b.next.prev = rest
            b.next = rest
            b.size = nbytes
        b.mapped = True
        self.reserved += nbytes
        self.record("segment_map", b.ptr, nbytes, b.stream, ctx)
        b = self.merge(b)
        self.pool.append(b)
        return b

    def merge(self, block):
        """Join `block` with the free neighbours of the same mapped state."""
        for other in (block.prev, block.next):
            if other is None or not other.free_for_reuse() or other.mapped != block.mapped:
                continue
            if other in self.pool:
                self.pool.remove(other)
            if other is block.prev:
                block.ptr = other.ptr
                block.prev = other.prev
                if block.prev:
                    block.prev.next = block
                else:
                    block.seg.first = block
            else:
                block.next = other.next
                if block.next:
                    block.next.prev = block
            block.size += other.size
        return block

    def free_block(self, block, ctx):
        self.record("free_completed", block.ptr, block.req, block.stream, ctx or block.ctx)
        block.ctx = None
        block.req = 0
        self.pool.append(self.merge(block))

    def release_cached_blocks(self, ctx):
        events, self.events = self.events, []
        for b in events:
            b.event_count = 0
            b.pending_streams = set()
            self.free_block(b, ctx)
        for b in sorted(self.pool, key=lambda b: (b.small, b.stream, b.ptr)):
            self.unmap_block(b, ctx)
        return True

    def unmap_block(self, b, ctx):
        seg, page = b.seg, b.seg.page
        lo = seg.base + (b.ptr - seg.base + page - 1) // page * page
        hi = seg.base + (b.ptr + b.size - seg.base) // page * page
        if hi <= lo:
            return
        self.pool.remove(b)
        end = b.ptr + b.size
        if lo > b.ptr:  # the partial page before stays mapped and free
            before = XBlock(b.ptr, lo - b.ptr, b.stream, b.small, seg, True)
            before.prev, before.next = b.prev, b
            if b.prev:
                b.prev.next = before
            else:
                seg.first = before
            b.prev = before
            self.pool.append(before)
        if hi < end:
            after = XBlock(hi, end - hi, b.stream, b.small, seg, True)
            after.prev, after.next = b, b.next
            if b.next:
                b.next.prev = after
            b.next = after
            self.pool.append(after)
        b.ptr, b.size, b.mapped = lo, hi - lo, False
        self.reserved -= hi - lo
        self.record("segment_unmap", lo, hi - lo, b.stream, ctx)
        self.merge(b)

    def segments(self):
        """One segment per contiguous mapped range, in address order (torch's snapshot)."""
        out = []
        for seg in sorted(self.xsegs.values(), key=lambda s: s.base):
            run = []
            for b in seg.blocks():
                if b.mapped:
                    run.append(b)
                elif run:
                    out.append((run[0], run))
                    run = []
            if run:
                out.append((run[0], run))
        return out
