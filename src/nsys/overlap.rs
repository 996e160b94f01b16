//! Interval arithmetic on half-open `[start, end)` nanosecond intervals: unions, the length of
//! an intersection, and per-bucket busy time for the timeline.

/// Merge intervals (sorted here) into disjoint, sorted intervals, in place. Empty intervals
/// vanish.
pub fn union(mut iv: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    iv.retain(|&(s, e)| e > s);
    if !iv.is_sorted() {
        iv.sort_unstable();
    }
    let mut w = 0;
    for r in 0..iv.len() {
        let (s, e) = iv[r];
        if w > 0 && s <= iv[w - 1].1 {
            iv[w - 1].1 = iv[w - 1].1.max(e);
        } else {
            iv[w] = (s, e);
            w += 1;
        }
    }
    iv.truncate(w);
    iv.shrink_to_fit();
    iv
}

/// Add `[s, e)` to a union being built from intervals that arrive sorted by start.
pub fn push_sorted(u: &mut Vec<(i64, i64)>, s: i64, e: i64) {
    if e <= s {
        return;
    }
    match u.last_mut() {
        Some(last) if s <= last.1 => last.1 = last.1.max(e),
        _ => u.push((s, e)),
    }
}

/// Add the busy time of disjoint sorted intervals to `buckets` equal buckets over `[t0, t1)`.
pub fn add_buckets(buckets: &mut [i64], iv: &[(i64, i64)], t0: i64, t1: i64) {
    let b = bucketize(iv, t0, t1, buckets.len());
    for (x, y) in buckets.iter_mut().zip(b) {
        *x += y;
    }
}

/// Total length of disjoint sorted intervals.
pub fn length(iv: &[(i64, i64)]) -> i64 {
    iv.iter().map(|&(s, e)| e - s).sum()
}

/// Length of the intersection of two disjoint sorted interval lists.
pub fn intersection_length(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let s = a[i].0.max(b[j].0);
        let e = a[i].1.min(b[j].1);
        if e > s {
            total += e - s;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// Busy nanoseconds of disjoint sorted intervals in each of `n` equal buckets over `[t0, t1)`.
pub fn bucketize(iv: &[(i64, i64)], t0: i64, t1: i64, n: usize) -> Vec<i64> {
    let mut out = vec![0i64; n];
    if t1 <= t0 || n == 0 {
        return out;
    }
    let span = (t1 - t0) as f64;
    let width = span / n as f64;
    for &(s, e) in iv {
        let s = s.max(t0);
        let e = e.min(t1);
        if e <= s {
            continue;
        }
        let first = (((s - t0) as f64) / width) as usize;
        let last = ((((e - t0) as f64) / width) as usize).min(n - 1);
        for (b, slot) in out
            .iter_mut()
            .enumerate()
            .take(last + 1)
            .skip(first.min(n - 1))
        {
            let bs = t0 + (b as f64 * width) as i64;
            let be = if b + 1 == n {
                t1
            } else {
                t0 + ((b + 1) as f64 * width) as i64
            };
            let ov = e.min(be) - s.max(bs);
            if ov > 0 {
                *slot += ov;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_and_intersection() {
        let a = union(vec![(10, 20), (0, 5), (15, 30), (30, 31), (40, 40)]);
        assert_eq!(a, vec![(0, 5), (10, 31)]);
        assert_eq!(length(&a), 26);
        let b = union(vec![(3, 12), (25, 50)]);
        assert_eq!(intersection_length(&a, &b), 2 + 2 + 6);
        assert_eq!(intersection_length(&a, &[]), 0);
    }

    #[test]
    fn sorted_pushes_build_the_union() {
        let mut u = Vec::new();
        for (s, e) in [(0, 5), (3, 8), (8, 9), (12, 12), (20, 30), (21, 25)] {
            push_sorted(&mut u, s, e);
        }
        assert_eq!(u, union(vec![(0, 5), (3, 8), (8, 9), (20, 30), (21, 25)]));
    }

    #[test]
    fn buckets_sum_to_length() {
        let a = union(vec![(-50, 10), (20, 95)]);
        let b = bucketize(&a, -50, 100, 7);
        assert_eq!(b.iter().sum::<i64>(), length(&a));
    }
}
