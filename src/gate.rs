//! `--gate PCT` for before/after comparisons: a figure that grew by more than PCT per cent fails
//! the comparison (exit 1), so a CI job can hold a change to its claim. Every reader with a
//! `--diff` uses this one definition of "grew by more than", and this one view of its figures
//! (`judge`): the largest relative change first, in the report's units, and a one-line verdict
//! as the last line. A gate with nothing comparable never passes: it is refused (exit 2),
//! saying why.

use std::fmt;
use std::fmt::Write as _;
use std::str::FromStr;

use serde::Serialize;

use crate::exit;
use crate::findings::{Unit, Where};

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

/// A `--gate` value that is not a per cent: the user's to fix (clap says it, exit 2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "--gate takes a per cent of growth allowed, a number 0 or more such as 5 or 2.5, not {given:?}"
)]
pub struct NotAPercent {
    pub given: String,
}

crate::exit::user_errors!(NotAPercent);

impl FromStr for Gate {
    type Err = NotAPercent;

    /// `5`, `5%` or `0.5`: a finite, non-negative per cent.
    fn from_str(s: &str) -> Result<Gate, NotAPercent> {
        let number = s.trim().strip_suffix('%').unwrap_or(s.trim());
        match number.parse::<f64>() {
            Ok(p) if p.is_finite() && p >= 0.0 => Ok(Gate { percent: p }),
            _ => Err(NotAPercent {
                given: s.to_string(),
            }),
        }
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.percent)
    }
}

pub use crate::findings::change_percent;

/// One figure of both runs, as a reader pairs them.
#[derive(Debug, Clone, PartialEq)]
pub struct Paired {
    pub place: Where,
    /// What the figure is: `exposed communication`, `peak allocated`.
    pub figure: String,
    pub unit: Unit,
    pub before: f64,
    pub after: f64,
}

/// A figure as the gate shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    #[serde(rename = "where")]
    pub place: Where,
    pub figure: String,
    pub unit: Unit,
    pub before: f64,
    pub after: f64,
    /// `+25.0%`, `-3.1%`, `new`.
    pub change: String,
    /// The relative growth, (after - before) / before; `null` for a figure new in the after run.
    pub growth: Option<f64>,
    /// Grew by more than the gate allows.
    pub exceeded: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Passed,
    Failed,
    /// Nothing comparable: the gate can vouch for nothing.
    Refused,
}

/// The gate's view of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub percent: f64,
    pub verdict: Verdict,
    /// Why the gate was refused; `null` otherwise.
    pub why: Option<String>,
    /// Figures compared (nonzero in at least one run).
    pub compared: usize,
    /// Figures that grew by more than the gate allows.
    pub failed: usize,
    /// Every compared figure, the largest relative growth first.
    pub rows: Vec<Row>,
}

/// Judges a comparison. `refusals` are what the reader found that makes the runs not
/// comparable as a whole (a rank on one side only, another run shape, no chunk ranges): any
/// one refuses the gate. Figures zero in both runs compare nothing and are left out; when none
/// is left the gate is refused too.
pub fn judge(gate: Gate, figures: Vec<Paired>, refusals: Vec<String>) -> Outcome {
    judge_within(
        gate,
        figures.into_iter().map(|p| (p, 0.0)).collect(),
        refusals,
    )
}

/// `judge` for figures read with a resolution (a print rounded to 0.01 GiB): growth up to each
/// figure's resolution is rounding, never a failure.
pub fn judge_within(gate: Gate, figures: Vec<(Paired, f64)>, refusals: Vec<String>) -> Outcome {
    let mut rows: Vec<Row> = figures
        .into_iter()
        .filter(|(p, _)| p.before != 0.0 || p.after != 0.0)
        .map(|(p, resolution)| Row {
            change: change_percent(p.before, p.after),
            growth: (p.before > 0.0).then(|| (p.after - p.before) / p.before),
            exceeded: p.after - p.before > resolution && gate.exceeded(p.before, p.after),
            place: p.place,
            figure: p.figure,
            unit: p.unit,
            before: p.before,
            after: p.after,
        })
        .collect();
    rows.sort_by(|a, b| {
        let g = |r: &Row| r.growth.unwrap_or(f64::INFINITY);
        g(b).partial_cmp(&g(a))
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| {
                (b.after - b.before)
                    .abs()
                    .partial_cmp(&(a.after - a.before).abs())
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
    });
    let failed = rows.iter().filter(|r| r.exceeded).count();
    let (verdict, why) = if !refusals.is_empty() {
        (Verdict::Refused, Some(refusals.join("; ")))
    } else if rows.is_empty() {
        (
            Verdict::Refused,
            Some("no figure to compare: every figure is missing or zero in both runs".into()),
        )
    } else if failed > 0 {
        (Verdict::Failed, None)
    } else {
        (Verdict::Passed, None)
    };
    Outcome {
        percent: gate.percent(),
        verdict,
        why,
        compared: rows.len(),
        failed,
        rows,
    }
}

impl Outcome {
    /// 0 passed, 1 failed, 2 refused.
    pub fn code(&self) -> u8 {
        match self.verdict {
            Verdict::Passed => exit::OK,
            Verdict::Failed => exit::FOUND,
            Verdict::Refused => exit::USER_ERROR,
        }
    }

    /// The verdict in one line, for the tail of a CI log.
    pub fn verdict_line(&self) -> String {
        let largest = self.rows.first().map(|r| {
            let place = r.place.label();
            let what = if place.is_empty() {
                r.figure.clone()
            } else {
                format!("{place} {}", r.figure)
            };
            format!(
                "{what} {} ({} -> {})",
                r.change,
                r.unit.show(r.before),
                r.unit.show(r.after)
            )
        });
        let p = self.percent;
        match self.verdict {
            Verdict::Refused => format!(
                "gate {p}%: REFUSED, nothing comparable: {}",
                self.why.as_deref().unwrap_or("")
            ),
            Verdict::Failed => format!(
                "gate {p}%: FAILED, {} of {} figures grew by more than {p}%; the largest: {}",
                self.failed,
                self.compared,
                largest.unwrap_or_default()
            ),
            Verdict::Passed => format!(
                "gate {p}%: passed, none of {} figures grew by more than {p}%; the largest change: {}",
                self.compared,
                largest.unwrap_or_default()
            ),
        }
    }

    /// The gate on an HTML page: the verdict first (a page has no tail), then every figure,
    /// largest growth first, the failed ones marked.
    pub fn render_html(&self, out: &mut String) {
        use crate::page::esc;
        let class = match self.verdict {
            Verdict::Passed => "passed",
            Verdict::Failed => "failed",
            Verdict::Refused => "refused",
        };
        let _ = write!(
            out,
            "<section class=\"gate {class}\"><h2>Gate</h2><p><b>{}</b></p>",
            esc(&self.verdict_line())
        );
        if !self.rows.is_empty() {
            let mut t = crate::page::table::Table::new(
                out,
                "",
                &[
                    ("", false),
                    ("where", false),
                    ("figure", false),
                    ("before", true),
                    ("after", true),
                    ("change", true),
                ],
            );
            for r in &self.rows {
                t.row_with(
                    if r.exceeded {
                        " class=\"exceeded\""
                    } else {
                        ""
                    },
                    [
                        if r.exceeded { "&#10007;" } else { "" }.to_string(),
                        esc(&r.place.label()),
                        esc(&r.figure),
                        esc(&r.unit.show(r.before)),
                        esc(&r.unit.show(r.after)),
                        esc(&r.change),
                    ],
                );
            }
            t.end();
        }
        out.push_str("</section>");
    }

    /// The figures, largest growth first: every one that failed and up to `shown` more, then
    /// the verdict as the last line.
    pub fn render(&self, out: &mut String, shown: usize) {
        self.render_rows(out, shown);
        // One line, however long: a CI log's tail shows it whole.
        let _ = writeln!(out, "{}", self.verdict_line());
    }

    /// The figures alone, as `render` lists them (a comparison shown without a gate).
    pub fn render_rows(&self, out: &mut String, shown: usize) {
        if !self.rows.is_empty() {
            let _ = writeln!(
                out,
                "Gate {}%: {} figures, the largest growth first",
                self.percent, self.compared
            );
            let take = self.failed.max(shown).min(self.rows.len());
            let width = self.rows[..take]
                .iter()
                .map(|r| r.place.label().chars().count() + r.figure.chars().count() + 1)
                .max()
                .unwrap_or(0)
                .min(56);
            for r in &self.rows[..take] {
                let what = format!("{} {}", r.place.label(), r.figure);
                let what = what.trim_start();
                let mark = if r.exceeded { "x" } else { " " };
                let figures = format!(
                    "{:>12} -> {:>12}  {:>8}",
                    r.unit.show(r.before),
                    r.unit.show(r.after),
                    r.change,
                );
                let line = format!("  {mark} {what:<width$}  {figures}");
                if line.chars().count() <= crate::findings::text::WIDTH {
                    out.push_str(&line);
                    out.push('\n');
                } else {
                    // A long place (a schedule event with mesh coordinates and a component):
                    // the place on its own lines, the figures below it in their columns.
                    crate::findings::text::wrap(out, &format!("  {mark} {what}"));
                    let _ = writeln!(out, "    {:<width$}{figures}", "");
                }
            }
            if self.rows.len() > take {
                let _ = writeln!(
                    out,
                    "    and {} more within the gate (--json lists them all)",
                    self.rows.len() - take
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paired(rank: i64, figure: &str, before: f64, after: f64) -> Paired {
        Paired {
            place: Where::rank(rank),
            figure: figure.into(),
            unit: Unit::Ns,
            before,
            after,
        }
    }

    #[test]
    fn largest_growth_first_and_the_verdict_last() {
        let g: Gate = "5".parse().unwrap();
        let o = judge(
            g,
            vec![
                paired(0, "a", 100.0, 108.0),
                paired(5, "stage4_b exposed", 1.0e6, 6.2e6),
                paired(1, "b", 100.0, 90.0),
                paired(2, "c", 0.0, 0.0),
                paired(3, "d", 0.0, 2.0e6),
            ],
            vec![],
        );
        let order: Vec<i64> = o.rows.iter().map(|r| r.place.rank.unwrap()).collect();
        assert_eq!(
            order,
            vec![3, 5, 0, 1],
            "new first, then +520%, +8%, -10%; zeros left out"
        );
        assert_eq!(o.verdict, Verdict::Failed);
        assert_eq!((o.compared, o.failed), (4, 3));
        assert_eq!(o.code(), exit::FOUND);
        let mut text = String::new();
        o.render(&mut text, 10);
        assert_eq!(
            text.lines().last().unwrap(),
            "gate 5%: FAILED, 3 of 4 figures grew by more than 5%; the largest: rank 3 d new \
             (0.000 ms -> 2.000 ms)"
        );
    }

    #[test]
    fn never_passes_on_nothing() {
        let g: Gate = "5".parse().unwrap();
        let none = judge(g, vec![], vec![]);
        assert_eq!(
            (none.verdict, none.code()),
            (Verdict::Refused, exit::USER_ERROR)
        );
        let zeros = judge(g, vec![paired(0, "a", 0.0, 0.0)], vec![]);
        assert_eq!(zeros.verdict, Verdict::Refused);
        let refused = judge(
            g,
            vec![paired(0, "a", 1.0, 1.0)],
            vec!["rank 7 only in the after run".into()],
        );
        assert_eq!(refused.verdict, Verdict::Refused);
        assert_eq!(refused.why.as_deref(), Some("rank 7 only in the after run"));
        let ok = judge(g, vec![paired(0, "a", 100.0, 104.0)], vec![]);
        assert_eq!((ok.verdict, ok.code()), (Verdict::Passed, exit::OK));
        // +50%, but within the figure's resolution: rounding, not growth.
        let rounding = judge_within(g, vec![(paired(0, "a", 2.0, 3.0), 1.5)], vec![]);
        assert_eq!((rounding.verdict, rounding.failed), (Verdict::Passed, 0));
    }

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
