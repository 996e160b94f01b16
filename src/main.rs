//! `instrument`: the command line. All logic lives in the library; this file only
//! hands over to `cli::run` and turns its outcome into an exit code.

/// The system's allocator, or mimalloc for the commands that plan code (see `alloc`).
#[global_allocator]
static RUST_ALLOCATOR: instrument::alloc::RustAllocator = instrument::alloc::RustAllocator;

fn main() -> std::process::ExitCode {
    // tree-sitter's parse trees on mimalloc (see `alloc`).
    instrument::alloc::install();
    // Behave like other Unix tools when the reader goes away (`instrument rules | head`):
    // end quietly instead of panicking on a broken pipe.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    instrument::cli::run()
}
