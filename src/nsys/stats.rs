//! The summary statistics `nsys stats` prints for a set of durations: total, count, mean,
//! median (mean of the two middle values for an even count), min, max and the sample standard
//! deviation (n - 1 in the denominator; 0 for a single value).

use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Summary {
    pub total_ns: i64,
    pub count: u64,
    pub avg_ns: f64,
    pub med_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
    pub stddev_ns: f64,
}

/// Summarise `values` (reordered in place to find the median).
pub fn summarize(values: &mut [i64]) -> Summary {
    let n = values.len();
    if n == 0 {
        return Summary::default();
    }
    let mut total: i64 = 0;
    let mut min = i64::MAX;
    let mut max = i64::MIN;
    for &v in values.iter() {
        total += v;
        min = min.min(v);
        max = max.max(v);
    }
    let avg = total as f64 / n as f64;
    let mut ss = 0.0;
    for &v in values.iter() {
        let d = v as f64 - avg;
        ss += d * d;
    }
    let stddev = if n > 1 {
        (ss / (n as f64 - 1.0)).sqrt()
    } else {
        0.0
    };
    let mid = n / 2;
    let (_, &mut hi, _) = values.select_nth_unstable(mid);
    let med = if n % 2 == 1 {
        hi as f64
    } else {
        let lo = *values[..mid].iter().max().expect("non-empty lower half");
        (lo as f64 + hi as f64) / 2.0
    };
    Summary {
        total_ns: total,
        count: n as u64,
        avg_ns: avg,
        med_ns: med,
        min_ns: min,
        max_ns: max,
        stddev_ns: stddev,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_single() {
        let s = summarize(&mut [5, 1, 3]);
        assert_eq!((s.total_ns, s.count, s.min_ns, s.max_ns), (9, 3, 1, 5));
        assert_eq!(s.med_ns, 3.0);
        assert!((s.stddev_ns - 2.0).abs() < 1e-12);
        let s = summarize(&mut [4, 1, 3, 10]);
        assert_eq!(s.med_ns, 3.5);
        assert_eq!(s.avg_ns, 4.5);
        let s = summarize(&mut [7]);
        assert_eq!((s.med_ns, s.stddev_ns), (7.0, 0.0));
    }
}
