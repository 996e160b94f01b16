//! Fault injection for the tests of interrupted and concurrent runs, so they repeat
//! exactly instead of depending on timing luck. Inert unless the test variables are set:
//!
//! - `INSTRUMENT_TEST_KILL=<point>:<n>`: the process kills itself with SIGKILL the n-th
//!   time it reaches `point` (as `kill -9` would, mid-run);
//! - `INSTRUMENT_TEST_PAUSE=<point>:<dir>`: at `point` it creates `<dir>/paused` and waits
//!   (up to a minute) for `<dir>/go`, so a test can act while it is stopped there.

use std::sync::atomic::{AtomicUsize, Ordering};

static HITS: AtomicUsize = AtomicUsize::new(0);

/// A point where a test may stop or kill the process.
pub fn point(name: &str) {
    if let Ok(spec) = std::env::var("INSTRUMENT_TEST_PAUSE")
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
    if let Ok(spec) = std::env::var("INSTRUMENT_TEST_KILL")
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
