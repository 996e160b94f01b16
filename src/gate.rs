//! `--gate PCT` for before/after comparisons: a figure that grew by more than PCT per cent fails
//! the comparison (exit 1), so a CI job can hold a change to its claim. Every reader with a
//! `--diff` uses this one definition of "grew by more than".

use std::fmt;
use std::str::FromStr;

/// The largest growth allowed, in per cent of the before figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gate {
    percent: f64,
}

impl Gate {
    pub fn percent(self) -> f64 {
        self.percent
    }

    /// Whether `after` grew from `before` by more than the gate allows. A figure that was zero
    /// and is not any more grew without bound; one that shrank or stayed never fails.
    pub fn exceeded(self, before: f64, after: f64) -> bool {
        if after <= before {
            return false;
        }
        if before <= 0.0 {
            return true;
        }
        (after - before) / before * 100.0 > self.percent
    }
}

impl FromStr for Gate {
    type Err = String;

    /// `5`, `5%` or `0.5`: a finite, non-negative per cent.
    fn from_str(s: &str) -> Result<Gate, String> {
        let number = s.trim().strip_suffix('%').unwrap_or(s.trim());
        match number.parse::<f64>() {
            Ok(p) if p.is_finite() && p >= 0.0 => Ok(Gate { percent: p }),
            _ => Err(format!(
                "--gate takes a per cent of growth allowed, a number 0 or more such as 5 or 2.5, not {s:?}"
            )),
        }
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.percent)
    }
}

/// The change from `before` to `after` as people read it: `+25.0%`, `-3.1%`, `+0.0%`, or `new`
/// when there was nothing before.
pub fn change_percent(before: f64, after: f64) -> String {
    if before <= 0.0 {
        return if after > 0.0 {
            "new".into()
        } else {
            "+0.0%".into()
        };
    }
    format!("{:+.1}%", (after - before) / before * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_by_more_than() {
        let g: Gate = "5".parse().unwrap();
        assert!(!g.exceeded(100.0, 105.0), "exactly 5% is allowed");
        assert!(g.exceeded(100.0, 105.1));
        assert!(!g.exceeded(100.0, 50.0));
        assert!(g.exceeded(0.0, 1.0), "from nothing to something is growth");
        assert!(!g.exceeded(0.0, 0.0));
        let zero: Gate = "0%".parse().unwrap();
        assert!(zero.exceeded(100.0, 100.5));
        assert!(!zero.exceeded(100.0, 100.0));
    }

    #[test]
    fn refuses_what_is_not_a_per_cent() {
        for bad in ["", "-1", "nan", "inf", "five", "5%%"] {
            assert!(bad.parse::<Gate>().is_err(), "{bad:?}");
        }
        assert_eq!("2.5%".parse::<Gate>().unwrap().percent(), 2.5);
    }

    #[test]
    fn change_as_people_read_it() {
        assert_eq!(change_percent(100.0, 125.0), "+25.0%");
        assert_eq!(change_percent(100.0, 90.0), "-10.0%");
        assert_eq!(change_percent(0.0, 3.0), "new");
    }
}
