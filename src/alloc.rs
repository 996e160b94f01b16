//! One allocator for the whole process: mimalloc, for Rust's allocations (the binary sets
//! it as the global allocator) and for tree-sitter's C code (installed here, before any
//! parse). A parse allocates tens of thousands of small nodes and `add` keeps every tree
//! until it ends: on mimalloc the same `add` runs 6% fewer instructions than on glibc's
//! malloc (docs/speed.md). Library users keep their own allocator unless they call
//! `install` themselves.

use std::sync::atomic::{AtomicBool, Ordering};

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Route tree-sitter's allocations to mimalloc. Call once, first thing in `main`, before
/// anything is parsed (tree-sitter frees with the allocator installed at the time).
pub fn install() {
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    // SAFETY: called before any tree-sitter object exists (first thing in `main`), once;
    // the four functions are one allocator's, never return null for a non-zero size
    // (mimalloc aborts on out-of-memory like the default), and align as malloc does.
    unsafe {
        tree_sitter::set_allocator(Some(tree_sitter::Allocator {
            malloc: libmimalloc_sys::mi_malloc,
            calloc: libmimalloc_sys::mi_calloc,
            realloc: libmimalloc_sys::mi_realloc,
            free: libmimalloc_sys::mi_free,
        }));
    }
}
