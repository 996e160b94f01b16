//! Expandable segments (`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`) as torch's
//! allocator (c10/cuda/CUDACachingAllocator.cpp) keeps them.
//!
//! An expandable segment reserves address space (1 1/8 of the GPU's memory) and maps
//! physical memory into it in pages (`segment_size`: `kSmallBuffer`, 2 MiB, in the small
//! pool; `kLargeBuffer`, 20 MiB, in the large one), recording `segment_map` /
//! `segment_unmap` trace entries for the ranges it maps and unmaps. `snapshot()`
//! reports "one segment for each contiguous mapped range of memory": it walks the
//! blocks while `block->mapped`, so unmapped address space is in no segment and a
//! segment's `total_size` is mapped memory only. Freed blocks stay mapped (cached);
//! `release_cached_blocks` (on `torch.cuda.empty_cache()`, and before the allocator
//! reports an OOM) unmaps the whole pages inside every free block (`unmap_block`:
//! `segmentRight(ptr)` to `segmentLeft(ptr + size)`), leaving the partial pages at
//! their ends mapped. So cached free memory in an expandable segment is not
//! fragmentation: its pages go back to the device whenever an allocation needs them.

use super::model::{BlockState, Segment};

/// `kSmallBuffer`: the page size of small-pool expandable segments.
pub const SMALL_PAGE: u64 = 2 << 20;
/// `kLargeBuffer`: the page size of large-pool expandable segments.
pub const LARGE_PAGE: u64 = 20 << 20;

/// The page size a segment was mapped in: the small pool's 2 MiB, else 20 MiB when the
/// segment is made of whole 20 MiB pages (a configured page size can differ; 2 MiB,
/// the granularity of CUDA's mappings, is assumed then).
pub fn page_size(seg: &Segment) -> u64 {
    if seg.is_large == Some(false) || !seg.total_size.is_multiple_of(LARGE_PAGE) {
        SMALL_PAGE
    } else {
        LARGE_PAGE
    }
}

/// The whole pages inside the segment's free blocks: what `release_cached_blocks`
/// unmaps (pages are counted from the mapped range's start, a page boundary).
pub fn free_pages(seg: &Segment) -> u64 {
    let page = page_size(seg);
    let mut at = seg.address;
    let mut total = 0u64;
    for b in &seg.blocks {
        let start = b.address.unwrap_or(at);
        let end = start.saturating_add(b.size);
        at = end;
        if b.state != BlockState::Inactive || start < seg.address {
            continue;
        }
        let lo = (start - seg.address).div_ceil(page).saturating_mul(page);
        let hi = (end - seg.address) / page * page;
        total = total.saturating_add(hi.saturating_sub(lo));
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::model::Block;

    fn block(address: u64, size: u64, state: BlockState) -> Block {
        Block {
            address: Some(address),
            size,
            requested_size: size,
            state,
            stack: 0,
        }
    }

    #[test]
    fn whole_free_pages_only() {
        const MIB: u64 = 1 << 20;
        let base = 0x3288000000;
        // 100 MiB mapped: 30 MiB live, 50 MiB free from 30 to 80 MiB, 20 MiB live.
        let seg = Segment {
            device: 0,
            address: base,
            total_size: 100 * MIB,
            stream: 0,
            is_large: Some(true),
            is_expandable: true,
            stack: 0,
            blocks: vec![
                block(base, 30 * MIB, BlockState::Allocated),
                block(base + 30 * MIB, 50 * MIB, BlockState::Inactive),
                block(base + 80 * MIB, 20 * MIB, BlockState::Allocated),
            ],
        };
        // pages [40, 60) and [60, 80) are whole inside the free block
        assert_eq!(free_pages(&seg), 40 * MIB);
        let small = Segment {
            is_large: Some(false),
            total_size: 4 * MIB,
            blocks: vec![
                block(base, MIB / 2, BlockState::Allocated),
                block(base + MIB / 2, 3 * MIB + MIB / 2, BlockState::Inactive),
            ],
            ..seg
        };
        assert_eq!(free_pages(&small), 2 * MIB);
    }
}
