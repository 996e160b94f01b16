//! Fault injection for the tests of interrupted and concurrent runs, so they repeat
//! exactly instead of depending on timing luck. Only in test builds (the `test-hooks`
//! feature, which the tests turn on through the crate's dev-dependency on itself): a
//! release or plain build compiles these out and ignores the variables. There, inert
//! unless the test variables are set:
//!
//! - `INSTRUMENT_TEST_KILL=<point>:<n>`: the process kills itself with SIGKILL the n-th
//!   time it reaches `point` (as `kill -9` would, mid-run);
//! - `INSTRUMENT_TEST_PAUSE=<point>:<dir>`: at `point` it creates `<dir>/paused` and waits
//!   (up to a minute) for `<dir>/go`, so a test can act while it is stopped there;
//! - `INSTRUMENT_TEST_LOCK_ERRNO=<errno>`: locking the checkout fails with that error, as
//!   on a file system without locks (37, ENOLCK, on NFS without a lock daemon).

#[cfg(feature = "test-hooks")]
use std::sync::atomic::{AtomicUsize, Ordering};

#[cfg(feature = "test-hooks")]
static HITS: AtomicUsize = AtomicUsize::new(0);

/// A test variable: its value in a test build, never in any other.
pub fn test_var(name: &str) -> Option<String> {
    if cfg!(feature = "test-hooks") {
        std::env::var(name).ok()
    } else {
        None
    }
}

/// A point where a test may stop or kill the process.
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn point(_name: &str) {}

/// A point where a test may stop or kill the process.
#[cfg(feature = "test-hooks")]
pub fn point(name: &str) {
    if let Some(spec) = test_var("INSTRUMENT_TEST_PAUSE")
        && let Some((p, dir)) = spec.split_once(':')
        && p == name
    {
        let dir = std::path::Path::new(dir);
        let _ = std::fs::write(dir.join("paused"), std::process::id().to_string());
        for _ in 0..6000 {
            if dir.join("go").exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    if let Some(spec) = test_var("INSTRUMENT_TEST_KILL")
        && let Some((p, n)) = spec.split_once(':')
        && p == name
    {
        let hit = HITS.fetch_add(1, Ordering::SeqCst) + 1;
        if n.parse::<usize>().is_ok_and(|n| n == hit) {
            // SAFETY: kill(2) on our own pid with a constant signal has no memory effects.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }
}
