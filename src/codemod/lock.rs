//! One run at a time on a checkout: `add` and `remove` hold an exclusive lock on the
//! checkout's root folder for the whole run (read, plan, write); `status`, `check` and dry
//! runs hold a shared one, so they never read a tree another run is half-way through
//! writing. The lock is flock(2) on the folder itself: nothing is left in the checkout,
//! and the kernel drops it when the process dies, however it dies.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// A held lock; released when dropped.
pub struct CheckoutLock {
    _dir: File,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Shared,
    Exclusive,
}

/// How long to wait for another run before giving up (`INSTRUMENT_LOCK_TIMEOUT_MS`
/// overrides it, for tests).
fn timeout() -> Duration {
    std::env::var("INSTRUMENT_LOCK_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(30), Duration::from_millis)
}

/// Lock the checkout at `root`, waiting while another run holds it.
pub fn lock(root: &Path, mode: Mode) -> Result<CheckoutLock, String> {
    let dir = File::open(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let op = match mode {
        Mode::Shared => libc::LOCK_SH,
        Mode::Exclusive => libc::LOCK_EX,
    } | libc::LOCK_NB;
    let started = Instant::now();
    let mut told = false;
    loop {
        // SAFETY: flock on a file descriptor we own.
        if unsafe { libc::flock(dir.as_raw_fd(), op) } == 0 {
            return Ok(CheckoutLock { _dir: dir });
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            // A file system without locks: go on unlocked rather than refuse to work.
            return Ok(CheckoutLock { _dir: dir });
        }
        if started.elapsed() >= timeout() {
            return Err(format!(
                "{}: another instrument run is working on this checkout (waited {}s); let it finish, then run the command again",
                root.display(),
                started.elapsed().as_secs()
            ));
        }
        if !told && started.elapsed() > Duration::from_millis(500) {
            eprintln!(
                "waiting for another instrument run on {} to finish...",
                root.display()
            );
            told = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
