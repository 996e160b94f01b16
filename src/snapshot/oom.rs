//! The allocator state at an OOM (filled in below).
