//! `instrument`: the command line. All logic lives in the library; this file only
//! hands over to `cli::run` and turns its outcome into an exit code.

// mimalloc for Rust's allocations and (`alloc::install`) tree-sitter's: a parse makes tens
// of thousands of small nodes, and `add` runs 6% fewer instructions than on glibc's malloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    instrument::alloc::install();
    // Behave like other Unix tools when the reader goes away (`instrument rules | head`):
    // end quietly instead of panicking on a broken pipe.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    instrument::cli::run()
}
