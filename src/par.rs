//! The one worker pool: independent pieces of work spread over the machine's cores. As many
//! workers as there are cores (the calling thread is one of them), fewer when the pieces are
//! few or each holds much memory, the costliest pieces first so that the last one to finish is
//! a small one. One thread per piece would start more threads than cores, and each thread that
//! allocates gets an allocator arena of its own (glibc grows those page by page: hundreds of
//! system calls for a short command).
//!
//! - `map`: every core;
//! - `map_bounded`: at most N workers (pieces that each hold a whole file's worth of memory);
//! - `map_within`: pieces that say what memory they need start while what the pieces in flight
//!   need together fits a budget (always one at least).
//!
//! Results come back in the items' order. A panic in a piece is passed on once every worker
//! has stopped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// `f` of every item, in the items' order; `cost` estimates each item's work (only its
/// order matters).
pub fn map<T: Sync, R: Send>(
    items: &[T],
    cost: impl Fn(&T) -> usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    map_bounded(items, cost, usize::MAX, f)
}

/// `map` with at most `max_workers` pieces at once: for pieces whose memory grows with their
/// input, so that the peak is bounded by the workers, not by the number of items.
pub fn map_bounded<T: Sync, R: Send>(
    items: &[T],
    cost: impl Fn(&T) -> usize,
    max_workers: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let order = costliest_first(items, cost);
    let workers = cores().min(max_workers).min(items.len()).max(1);
    run(items.len(), &order, workers, |i| f(&items[i]))
}

/// What a piece of `map_within` is lent when it starts: the budget left, shared among the
/// pieces in flight (this one included), and how many they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// What the budget has left beyond what the pieces in flight need, per piece in flight.
    pub spare: u64,
    /// Pieces in flight, this one included.
    pub in_flight: usize,
}

/// `f` of every item, in the items' order; each item needs `need(item)` bytes while it is
/// worked on, and starts only while what the items in flight need together fits `budget`
/// (one starts whatever it needs). The largest first; as many workers as the largest items
/// fit together (at least one, at most the cores): a worker that would wait for memory is
/// not started.
pub fn map_within<T: Sync, R: Send>(
    items: &[T],
    need: impl Fn(&T) -> u64,
    budget: u64,
    f: impl Fn(&T, Lease) -> R + Sync,
) -> Vec<R> {
    let needs: Vec<u64> = items.iter().map(&need).collect();
    let order = costliest_first(&needs, |&n| n);
    let mut fit = 0;
    let mut sum = 0u64;
    for &i in &order {
        sum = sum.saturating_add(needs[i]);
        if fit > 0 && sum > budget {
            break;
        }
        fit += 1;
    }
    let workers = fit.min(cores()).max(1);
    let admission = Admission {
        budget,
        held: Mutex::new((0, 0)),
        freed: Condvar::new(),
    };
    run(items.len(), &order, workers, |i| {
        let lease = admission.enter(needs[i]);
        f(&items[i], lease.lease)
    })
}

/// The cores this process may use.
fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Item indices, the costliest first (equal costs in the items' order).
fn costliest_first<T, K: Ord>(items: &[T], cost: impl Fn(&T) -> K) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(cost(&items[i])));
    order
}

/// `work(i)` for every index of `order` on `workers` threads (the caller's among them),
/// results in index order.
fn run<R: Send>(
    n: usize,
    order: &[usize],
    workers: usize,
    work: impl Fn(usize) -> R + Sync,
) -> Vec<R> {
    if workers <= 1 || n <= 1 {
        let mut out: Vec<Option<R>> = (0..n).map(|_| None).collect();
        for &i in order {
            out[i] = Some(work(i));
        }
        return out
            .into_iter()
            .map(|r| r.expect("every item is mapped"))
            .collect();
    }
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..n).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let worker = || {
        while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            let r = work(i);
            lock(&results)[i] = Some(r);
        }
    };
    std::thread::scope(|s| {
        for _ in 1..workers {
            s.spawn(worker);
        }
        worker();
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every item is mapped"))
        .collect()
}

/// A lock that a panicking piece cannot poison for the others (the panic is passed on when
/// the scope ends).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Admits pieces while what they need fits the budget (always one at least). With the largest
/// first and as many workers as the largest fit together, the next item is never larger than
/// the one whose slot it takes, so the wait is a guard of the budget, rarely taken.
struct Admission {
    budget: u64,
    /// Bytes held and pieces in flight.
    held: Mutex<(u64, usize)>,
    freed: Condvar,
}

/// A piece's admission, given back when it ends, also by a panic (so that no worker waits
/// for memory a failed piece still holds).
struct Admitted<'a> {
    admission: &'a Admission,
    need: u64,
    lease: Lease,
}

impl Admission {
    /// Wait until `need` fits, then hold it.
    fn enter(&self, need: u64) -> Admitted<'_> {
        let mut held = lock(&self.held);
        while held.1 > 0 && held.0.saturating_add(need) > self.budget {
            held = self.freed.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        held.0 = held.0.saturating_add(need);
        held.1 += 1;
        let in_flight = held.1;
        let spare = self.budget.saturating_sub(held.0) / in_flight as u64;
        Admitted {
            admission: self,
            need,
            lease: Lease { spare, in_flight },
        }
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        let mut held = lock(&self.admission.held);
        held.0 -= self.need;
        held.1 -= 1;
        self.admission.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn results_keep_the_items_order_whatever_the_cost_order() {
        let items: Vec<usize> = (0..50).collect();
        let out = map(&items, |&i| i % 7, |&i| i * 2);
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(map(&[] as &[u8], |_| 0, |&b| b).is_empty());
        let bounded = map_bounded(&items, |&i| i, 2, |&i| i + 1);
        assert_eq!(bounded, items.iter().map(|i| i + 1).collect::<Vec<_>>());
    }

    /// The most pieces in flight at once, counted by the pieces themselves.
    fn peak_in_flight(run: impl FnOnce(&(dyn Fn() + Sync))) -> usize {
        let now = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        run(&|| {
            let n = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(n, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(5));
            now.fetch_sub(1, Ordering::SeqCst);
        });
        peak.into_inner()
    }

    #[test]
    fn a_bound_on_workers_bounds_the_pieces_in_flight() {
        let items: Vec<usize> = (0..12).collect();
        let one = peak_in_flight(|piece| {
            map_bounded(&items, |_| 1, 1, |_| piece());
        });
        assert_eq!(one, 1);
        let two = peak_in_flight(|piece| {
            map_bounded(&items, |_| 1, 2, |_| piece());
        });
        assert!(two <= 2 && two <= cores(), "{two}");
    }

    #[test]
    fn what_the_pieces_in_flight_need_never_passes_the_budget() {
        // Needs of 40, 30, 30, 20, 10 and 10 in a budget of 60: never more than 60 at once,
        // and the 70 that needs more than the budget alone still runs, alone.
        let needs = [40u64, 30, 70, 30, 20, 10, 10];
        let held = AtomicU64::new(0);
        let most = AtomicU64::new(0);
        let alone = AtomicUsize::new(0);
        let out = map_within(
            &needs,
            |&n| n,
            60,
            |&n, lease| {
                let h = held.fetch_add(n, Ordering::SeqCst) + n;
                most.fetch_max(if n > 60 { 0 } else { h }, Ordering::SeqCst);
                if n > 60 && lease.in_flight == 1 {
                    alone.fetch_add(1, Ordering::SeqCst);
                }
                assert!(lease.in_flight >= 1);
                assert!(lease.spare * lease.in_flight as u64 <= 60);
                std::thread::sleep(std::time::Duration::from_millis(5));
                held.fetch_sub(n, Ordering::SeqCst);
                n * 2
            },
        );
        assert_eq!(out, needs.iter().map(|n| n * 2).collect::<Vec<_>>());
        assert!(most.into_inner() <= 60);
        assert_eq!(alone.into_inner(), 1, "the piece over the budget ran alone");
    }

    #[test]
    fn a_panicking_piece_gives_its_memory_back_and_the_panic_is_passed_on() {
        let needs = [50u64, 50, 50, 50];
        let r = std::panic::catch_unwind(|| {
            map_within(
                &needs,
                |&n| n,
                60,
                |_, _| -> u64 { panic!("a piece failed") },
            )
        });
        assert!(r.is_err());
    }
}
