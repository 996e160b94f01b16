//! One run at a time on a checkout: `add` and `remove` hold an exclusive lock on the
//! checkout's root folder for the whole run (read, plan, write); `status`, `check` and dry
//! runs hold a shared one, so they never read a tree another run is half-way through
//! writing. The lock is flock(2) on the folder itself: nothing is left in the checkout,
//! and the kernel drops it when the process dies, however it dies.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use super::error::Error;

/// A held lock; released when dropped.
pub struct CheckoutLock {
    _dir: File,
    /// Set when the file system refused the lock (not because another run holds it): the
    /// run goes on unprotected, and the caller tells the user so.
    pub warning: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Shared,
    Exclusive,
}

/// How long to wait for another run before giving up (in test builds,
/// `INSTRUMENT_LOCK_TIMEOUT_MS` overrides it).
fn timeout() -> Duration {
    super::fault::test_var("INSTRUMENT_LOCK_TIMEOUT_MS")
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(30), Duration::from_millis)
}

/// The type of the file system `path` is on (`nfs4`, `ext4`), from the kernel's mount
/// table: the mount point that holds it closest.
fn file_system(path: &Path) -> Option<String> {
    let path = std::fs::canonicalize(path).ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let (_, point, kind) = (f.next()?, f.next()?, f.next()?);
            // Spaces in mount points are written \040.
            let point = point.replace("\\040", " ");
            path.starts_with(&point)
                .then(|| (point.len(), kind.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, kind)| kind)
}

/// What the user is told when the file system will not lock the checkout.
fn unlocked(root: &Path, mode: Mode, err: &std::io::Error) -> String {
    let fs = file_system(root).map_or_else(
        || "its file system".to_string(),
        |k| format!("its file system ({k})"),
    );
    let unprotected = match mode {
        Mode::Exclusive => {
            "another instrument run on this checkout at the same time is not kept out, and may read or write the files while this one writes them"
        }
        Mode::Shared => {
            "an instrument run writing this checkout at the same time is not waited for, so what this one reads may be half written"
        }
    };
    format!(
        "warning: {}: cannot lock the checkout ({err}; {fs} does not support flock, as NFS without a lock daemon does): going on without the lock: {unprotected}",
        root.display()
    )
}

/// Lock the checkout at `root`, waiting while another run holds it.
pub fn lock(root: &Path, mode: Mode) -> Result<CheckoutLock, Error> {
    let dir = File::open(root).map_err(|e| Error::io(root.display(), e))?;
    let op = match mode {
        Mode::Shared => libc::LOCK_SH,
        Mode::Exclusive => libc::LOCK_EX,
    } | libc::LOCK_NB;
    let started = Instant::now();
    let mut told = false;
    loop {
        // A test build can make flock fail as a file system without locks does.
        let refused = super::fault::test_var("INSTRUMENT_TEST_LOCK_ERRNO")
            .and_then(|e| e.parse::<i32>().ok());
        // SAFETY: flock on a file descriptor we own.
        if refused.is_none() && unsafe { libc::flock(dir.as_raw_fd(), op) } == 0 {
            return Ok(CheckoutLock {
                _dir: dir,
                warning: None,
            });
        }
        let err = refused.map_or_else(
            std::io::Error::last_os_error,
            std::io::Error::from_raw_os_error,
        );
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            // A file system without locks (ENOLCK on NFS): go on unlocked rather than
            // refuse to work, and say what that leaves unprotected.
            return Ok(CheckoutLock {
                _dir: dir,
                warning: Some(unlocked(root, mode, &err)),
            });
        }
        if started.elapsed() >= timeout() {
            // How long it waits (the time measured would be a little more, by chance).
            return Err(Error::Busy {
                root: root.display().to_string(),
                waited_ms: timeout().as_millis() as u64,
            });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_lock_names_the_file_system_and_what_is_not_protected() {
        let err = std::io::Error::from_raw_os_error(libc::ENOLCK);
        let w = unlocked(Path::new("/"), Mode::Exclusive, &err);
        assert!(
            w.starts_with("warning: /: cannot lock the checkout ("),
            "{w}"
        );
        assert!(
            w.contains("its file system ("),
            "the root's type is known: {w}"
        );
        assert!(
            w.contains("another instrument run on this checkout at the same time is not kept out"),
            "{w}"
        );
        let w = unlocked(Path::new("/nonexistent/x"), Mode::Shared, &err);
        assert!(w.contains("its file system does not support flock"), "{w}");
        assert!(w.contains("may be half written"), "{w}");
    }

    #[test]
    fn the_file_system_of_a_path_is_its_closest_mount() {
        assert!(file_system(Path::new("/")).is_some_and(|k| !k.is_empty()));
        if let Some(proc) = file_system(Path::new("/proc/self")) {
            assert_eq!(proc, "proc");
        }
    }
}
