//! Values left to the system when the process ends: a command-line process that is about to
//! exit need not free its parse trees piece by piece (many small allocations); the system takes
//! the memory back at once. Library callers, which go on, free as usual.

use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once the command line knows the process ends when its command returns.
static ENDS_AFTER_COMMAND: AtomicBool = AtomicBool::new(false);

/// Say that this process ends when its command returns (the command line does): large
/// values kept in `Kept` are then left to the system, which takes the memory back at
/// once, instead of being freed piece by piece (parse trees are many small pieces).
pub fn process_ends_after_command() {
    ENDS_AFTER_COMMAND.store(true, Ordering::Relaxed);
}

/// A value that is freed when it goes out of scope unless the process is about to end
/// (see `process_ends_after_command`); it reads as the value itself.
pub struct Kept<T>(ManuallyDrop<T>);

impl<T> Kept<T> {
    pub fn new(value: T) -> Kept<T> {
        Kept(ManuallyDrop::new(value))
    }
}

impl<T> Deref for Kept<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> Drop for Kept<T> {
    fn drop(&mut self) {
        if !ENDS_AFTER_COMMAND.load(Ordering::Relaxed) {
            // SAFETY: the value is dropped here once, and never read again.
            unsafe { ManuallyDrop::drop(&mut self.0) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_kept_value_is_freed_unless_the_process_ends() {
        // Not set in test builds: the value is dropped like any other.
        let shared = Rc::new(());
        drop(Kept::new(Rc::clone(&shared)));
        assert_eq!(Rc::strong_count(&shared), 1);
        let k = Kept::new(vec![1, 2, 3]);
        assert_eq!(k.len(), 3, "reads as the value");
    }
}
