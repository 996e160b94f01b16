//! The process's allocators. tree-sitter's allocations go to mimalloc, installed before
//! anything is parsed (`install`): a parse allocates tens of thousands of small nodes and
//! `add` keeps every tree until it ends; on mimalloc the same `add` runs 3% fewer
//! instructions than on glibc's malloc (docs/speed.md). Rust's own allocations go through
//! `RustAllocator`, the binary's global allocator: the system's, until a command that
//! plans code changes says `mimalloc_from_now` (for `add`, 3 to 4 M fewer instructions and
//! 0.95x the wall time). The readers never say it: with mimalloc for every command,
//! `snapshot` took 8% longer and nearly twice the memory (136 MiB against 72 MiB on a 145 MB
//! snapshot). A library user gets neither unless it calls `install` and makes
//! `RustAllocator` its global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

use libmimalloc_sys as mi;

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Route tree-sitter's allocations to mimalloc. Call once, first thing in `main`, before
/// anything is parsed (tree-sitter frees with the allocator installed at the time).
pub fn install() {
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    // SAFETY: called before any tree-sitter object exists (first thing in `main`), once;
    // the four functions are one allocator's, never return null for a non-zero size (they
    // abort, as tree-sitter's own default does), and align as malloc does.
    unsafe {
        tree_sitter::set_allocator(Some(tree_sitter::Allocator {
            malloc: ts_malloc,
            calloc: ts_calloc,
            realloc: ts_realloc,
            free: mi::mi_free,
        }));
    }
}

/// `p`, or the end of the process when an allocation of `size` bytes failed: tree-sitter
/// does not check for null (its default allocator aborts too).
fn or_abort(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() && size != 0 {
        eprintln!("error: out of memory (tree-sitter asked for {size} bytes)");
        std::process::abort();
    }
    p
}

unsafe extern "C" fn ts_malloc(size: usize) -> *mut c_void {
    // SAFETY: mimalloc's malloc, for any size.
    or_abort(unsafe { mi::mi_malloc(size) }, size)
}

unsafe extern "C" fn ts_calloc(count: usize, size: usize) -> *mut c_void {
    // SAFETY: mimalloc's calloc, for any sizes (it checks the product for overflow).
    or_abort(
        unsafe { mi::mi_calloc(count, size) },
        count.saturating_mul(size),
    )
}

unsafe extern "C" fn ts_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: `p` is null or came from these functions (tree-sitter's contract).
    or_abort(unsafe { mi::mi_realloc(p, size) }, size)
}

/// Rust's allocations: the system allocator, or mimalloc once `mimalloc_from_now` was
/// said. What was allocated before goes back to the system allocator: each pointer is
/// freed by the allocator that owns it (mimalloc's page map knows its own pages), so the
/// switch is safe at any moment, on any thread.
pub struct RustAllocator;

/// Set once a command that plans code changes starts (`mimalloc_from_now`).
static MIMALLOC_FROM_NOW: AtomicBool = AtomicBool::new(false);

/// From now on, Rust's allocations of this process go to mimalloc (see `RustAllocator`):
/// for the commands that parse and plan code, whose many small allocations it serves
/// faster than glibc's malloc. Without `RustAllocator` as the global allocator (library
/// users, tests) this changes nothing.
pub fn mimalloc_from_now() {
    MIMALLOC_FROM_NOW.store(true, Ordering::Release);
}

/// Whether `p` came from mimalloc: only possible once the switch was made.
fn from_mimalloc(p: *mut u8) -> bool {
    // SAFETY: a lookup in mimalloc's page map, for any address.
    MIMALLOC_FROM_NOW.load(Ordering::Acquire) && unsafe { mi::mi_is_in_heap_region(p as _) }
}

// SAFETY: each block is allocated by one of two allocators, both meeting `GlobalAlloc`'s
// contract for any layout (mimalloc through its aligned calls), and is resized and freed
// by the allocator that owns it, which `from_mimalloc` tells exactly.
unsafe impl GlobalAlloc for RustAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if MIMALLOC_FROM_NOW.load(Ordering::Relaxed) {
            // SAFETY: any size and power-of-two alignment.
            unsafe { mi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8 }
        } else {
            // SAFETY: the caller's layout, passed on.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if MIMALLOC_FROM_NOW.load(Ordering::Relaxed) {
            // SAFETY: as in `alloc`.
            unsafe { mi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8 }
        } else {
            // SAFETY: the caller's layout, passed on.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if from_mimalloc(p) {
            // SAFETY: mimalloc's block, freed once (the caller's contract).
            unsafe { mi::mi_free(p as _) }
        } else {
            // SAFETY: the system allocator's block with its layout.
            unsafe { System.dealloc(p, layout) }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if from_mimalloc(p) {
            // SAFETY: mimalloc's block, resized with its alignment.
            return unsafe { mi::mi_realloc_aligned(p as _, new_size, layout.align()) as *mut u8 };
        }
        if !MIMALLOC_FROM_NOW.load(Ordering::Relaxed) {
            // SAFETY: the system allocator's block with its layout.
            return unsafe { System.realloc(p, layout, new_size) };
        }
        // A block from before the switch that grows after it: moved to mimalloc, so that
        // what is allocated after the switch is mimalloc's.
        // SAFETY: `new_size` with the block's alignment is a valid layout (the caller's
        // contract); the old block is the system's, copied up to the smaller size, freed once.
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let q = self.alloc(new_layout);
            if !q.is_null() {
                std::ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                System.dealloc(p, layout);
            }
            q
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrappers_allocate_zero_resize_and_free_with_mimalloc() {
        // SAFETY: every pointer comes from these functions and is freed once.
        unsafe {
            let z = ts_calloc(16, 8) as *mut u8;
            assert!((0..128).all(|i| *z.add(i) == 0), "calloc zeroes");
            let p = ts_malloc(24) as *mut u8;
            p.write_bytes(7, 24);
            let q = ts_realloc(p as *mut c_void, 4096) as *mut u8;
            assert!((0..24).all(|i| *q.add(i) == 7), "realloc keeps the bytes");
            assert_eq!(q as usize % 16, 0, "aligned as malloc");
            mi::mi_free(q as *mut c_void);
            mi::mi_free(z as *mut c_void);
        }
    }

    /// The switch, in one test (it is for the whole process, and no other test uses
    /// `RustAllocator`: the test binary's own global allocator is the system's).
    #[test]
    fn each_block_goes_back_to_the_allocator_that_made_it_across_the_switch() {
        let a = RustAllocator;
        let small = Layout::from_size_align(40, 8).unwrap();
        let wide = Layout::from_size_align(100, 64).unwrap();
        // SAFETY: every block is written within its layout, resized or freed once, with the
        // layout it has at that time.
        unsafe {
            // Before the switch: the system's blocks, which mimalloc does not own.
            let before = a.alloc(small);
            before.write_bytes(1, 40);
            let grown_before = a.alloc(small);
            grown_before.write_bytes(2, 40);
            let zeroed_before = a.alloc_zeroed(wide);
            assert!(!from_mimalloc(before) && !from_mimalloc(zeroed_before));
            assert!((0..100).all(|i| *zeroed_before.add(i) == 0));
            assert!(!mi::mi_is_in_heap_region(before as _), "the system's block");

            mimalloc_from_now();

            // After: mimalloc's blocks, aligned as asked, zeroed when asked.
            let after = a.alloc(wide);
            assert!(from_mimalloc(after));
            assert!((after as usize).is_multiple_of(64));
            after.write_bytes(3, 100);
            let zeroed = a.alloc_zeroed(wide);
            assert!(from_mimalloc(zeroed) && (0..100).all(|i| *zeroed.add(i) == 0));
            // A block of either allocator keeps its bytes when it grows; one from before
            // the switch moves to mimalloc.
            let moved = a.realloc(grown_before, small, 4000);
            assert!(from_mimalloc(moved));
            assert!((0..40).all(|i| *moved.add(i) == 2));
            let regrown = a.realloc(after, wide, 5000);
            assert!(from_mimalloc(regrown) && (regrown as usize).is_multiple_of(64));
            assert!((0..100).all(|i| *regrown.add(i) == 3));
            // And each is freed by its own: the system's block by the system.
            assert!(!from_mimalloc(before) && (0..40).all(|i| *before.add(i) == 1));
            a.dealloc(before, small);
            a.dealloc(zeroed_before, wide);
            a.dealloc(zeroed, wide);
            a.dealloc(moved, Layout::from_size_align(4000, 8).unwrap());
            a.dealloc(regrown, Layout::from_size_align(5000, 64).unwrap());
        }
    }
}
