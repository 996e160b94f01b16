//! Independent pieces of work spread over the machine's cores: as many workers as there
//! are cores (the calling thread is one of them), the costliest pieces first so that the
//! last one to finish is a small one. One thread per piece would start more threads than
//! cores, and each thread that allocates gets an allocator arena of its own (glibc grows
//! those page by page: hundreds of system calls for a short command).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `f` of every item, in the items' order; `cost` estimates each item's work (only its
/// order matters). Panics in `f` are passed on.
pub fn map<T: Sync, R: Send>(
    items: &[T],
    cost: impl Fn(&T) -> usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(items.len());
    if workers <= 1 {
        return items.iter().map(f).collect();
    }
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(cost(&items[i])));
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let work = || {
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(&i) = order.get(k) else { break };
            let r = f(&items[i]);
            results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
        }
    };
    std::thread::scope(|s| {
        for _ in 1..workers {
            s.spawn(work);
        }
        work();
    });
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every item is mapped"))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_keep_the_items_order_whatever_the_cost_order() {
        let items: Vec<usize> = (0..50).collect();
        let out = super::map(&items, |&i| i % 7, |&i| i * 2);
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(super::map(&[] as &[u8], |_| 0, |&b| b).is_empty());
    }
}
