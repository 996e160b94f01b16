//! One findings model for every reader (`log`, `snapshot`, `nsys report`, the run report): what
//! stands out, where, the figure and what it was compared with, the evidence, and what to do
//! next. Every text and HTML report opens with the ranked findings, then the detail; `--json`
//! carries the same list under `findings`.
//!
//! The gate of a before/after comparison (`crate::gate`) is a view of the same kind of figures.
//! This module knows no trainer: the readers fill in the words.

use std::cmp::Ordering;

use serde::Serialize;

pub mod html;
pub mod text;

/// How much a finding matters, most first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// The run failed or lost data here (an out-of-memory error, a file not written).
    Error,
    /// Something to act on (a rank far from its peers, an estimate far off).
    Warning,
    /// Worth knowing, nothing to fix (where the peak is, a capped history).
    Notice,
}

impl Severity {
    pub fn word(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Notice => "notice",
        }
    }
}

/// The unit a figure is in; the text shows it in the report's own unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// Bytes, shown in GiB (MiB below one GiB).
    Bytes,
    /// Nanoseconds, shown in ms.
    Ns,
    /// A share, 0 to 100.
    Percent,
    /// A count.
    Count,
}

impl Unit {
    /// `1.25 GiB`, `12.3 MiB`, `8.229 ms`, `74.0%`, `1,024`.
    pub fn show(self, v: f64) -> String {
        match self {
            Unit::Bytes => {
                let gib = v / 1073741824.0;
                if gib.abs() >= 1.0 {
                    format!("{gib:.2} GiB")
                } else {
                    format!("{:.1} MiB", v / 1048576.0)
                }
            }
            Unit::Ns => format!("{:.3} ms", v / 1e6),
            Unit::Percent => format!("{v:.1}%"),
            Unit::Count => thousands(v.round() as i64),
        }
    }
}

fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
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

/// Where a finding is: as many of these as the reader knows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Where {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    /// The rank's mesh coordinates as people read them (`pp 1, ep 6`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<String>,
    /// A schedule point, a stage or a site (`stage4_b`, `S3.i1 bwd(p1,zb=True) c1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub point: Option<String>,
    /// The file it was read from, and the line where one applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

impl Where {
    pub fn rank(rank: i64) -> Where {
        Where {
            rank: Some(rank),
            ..Where::default()
        }
    }

    pub fn with_mesh(mut self, mesh: impl Into<String>) -> Where {
        let m = mesh.into();
        self.mesh = (!m.is_empty()).then_some(m);
        self
    }

    pub fn at(mut self, point: impl Into<String>) -> Where {
        self.point = Some(point.into());
        self
    }

    pub fn in_file(mut self, file: impl Into<String>, line: Option<u64>) -> Where {
        self.file = Some(file.into());
        self.line = line;
        self
    }

    /// `rank 5 (pp 1, ep 1), stage4_b`; `node0.log:812`; empty when nothing is known.
    pub fn label(&self) -> String {
        let mut parts = Vec::new();
        match (self.rank, &self.mesh) {
            (Some(r), Some(m)) => parts.push(format!("rank {r} ({m})")),
            (Some(r), None) => parts.push(format!("rank {r}")),
            _ => {}
        }
        if let Some(p) = &self.point {
            parts.push(p.clone());
        }
        if let Some(f) = &self.file {
            parts.push(match self.line {
                Some(l) => format!("{f}:{l}"),
                None => f.clone(),
            });
        }
        parts.join(", ")
    }
}

/// What a figure is compared with: its peers' median, an estimate, the run before.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Compared {
    pub value: f64,
    /// `the median of 3 ranks on pp 1`, `the estimate`, `before`.
    pub what: String,
}

/// The figure a finding is about.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    pub value: f64,
    pub unit: Unit,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compared_with: Option<Compared>,
}

impl Figure {
    pub fn new(value: f64, unit: Unit) -> Figure {
        Figure {
            value,
            unit,
            compared_with: None,
        }
    }

    pub fn against(mut self, value: f64, what: impl Into<String>) -> Figure {
        self.compared_with = Some(Compared {
            value,
            what: what.into(),
        });
        self
    }

    /// How far the figure is from what it is compared with, relative to that (0.5: half again
    /// as much). Infinite from nothing to something; `None` without a comparison.
    pub fn departure(&self) -> Option<f64> {
        let c = self.compared_with.as_ref()?;
        if c.value == 0.0 {
            return Some(if self.value == 0.0 {
                0.0
            } else {
                f64::INFINITY
            });
        }
        Some(((self.value - c.value) / c.value).abs())
    }

    /// `23.753 ms against 8.229 ms before (+188.6%)`.
    pub fn show(&self) -> String {
        let v = self.unit.show(self.value);
        match &self.compared_with {
            None => v,
            Some(c) => format!(
                "{v} against {} {} ({})",
                self.unit.show(c.value),
                c.what,
                change_percent(c.value, self.value)
            ),
        }
    }
}

/// One thing a reader found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// A stable id for scripts: `out-of-memory`, `stands-out`, `exposed-communication`.
    pub kind: String,
    /// One line saying it, without the place (that is `where`).
    pub what: String,
    #[serde(rename = "where")]
    pub place: Where,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub figure: Option<Figure>,
    /// What it rests on, a line each (a print's line, an allocation, a stage's figures).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
    /// What to do next, where the reader knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

impl Finding {
    pub fn new(severity: Severity, kind: impl Into<String>, what: impl Into<String>) -> Finding {
        Finding {
            severity,
            kind: kind.into(),
            what: what.into(),
            place: Where::default(),
            figure: None,
            evidence: Vec::new(),
            next: None,
        }
    }

    pub fn at(mut self, place: Where) -> Finding {
        self.place = place;
        self
    }

    pub fn figure(mut self, figure: Figure) -> Finding {
        self.figure = Some(figure);
        self
    }

    pub fn evidence(mut self, line: impl Into<String>) -> Finding {
        self.evidence.push(line.into());
        self
    }

    pub fn next(mut self, step: impl Into<String>) -> Finding {
        self.next = Some(step.into());
        self
    }
}

/// Ranks findings the same way in every reader: the most severe first, then the one furthest
/// from what it is compared with, then the largest figure in one unit, then where (rank, point)
/// for a stable order.
pub fn rank(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then_with(|| {
                let d = |f: &Finding| f.figure.as_ref().and_then(Figure::departure);
                cmp_desc(d(a), d(b))
            })
            .then_with(|| {
                let v = |f: &Finding| f.figure.as_ref().map(|x| (x.unit, x.value.abs()));
                match (v(a), v(b)) {
                    (Some((ua, va)), Some((ub, vb))) if ua == ub => {
                        vb.partial_cmp(&va).unwrap_or(Ordering::Equal)
                    }
                    _ => Ordering::Equal,
                }
            })
            .then_with(|| (a.place.rank, &a.place.point).cmp(&(b.place.rank, &b.place.point)))
    });
}

/// Larger first; `None` last.
fn cmp_desc(a: Option<f64>, b: Option<f64>) -> Ordering {
    match (a, b) {
        (Some(x), Some(y)) => y.partial_cmp(&x).unwrap_or(Ordering::Equal),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// The median of `values` (the mean of the middle two for an even count; 0 for none).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Of several values of peers (ranks of one stage and role), those that stand out: further from
/// the median than `threshold` (relative) and than `floor` (absolute, the figures' resolution).
/// Only among three or more peers: with two, neither is "the odd one". Returns (index, median).
pub fn outliers(values: &[f64], threshold: f64, floor: f64) -> Vec<(usize, f64)> {
    if values.len() < 3 {
        return Vec::new();
    }
    let median = median(values);
    values
        .iter()
        .enumerate()
        .filter(|(_, v)| {
            let d = (**v - median).abs();
            d > floor && (median == 0.0 || d / median.abs() > threshold)
        })
        .map(|(i, _)| (i, median))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_read_as_the_reports_do() {
        assert_eq!(Unit::Bytes.show(1.5 * 1073741824.0), "1.50 GiB");
        assert_eq!(Unit::Bytes.show(3.0 * 1048576.0), "3.0 MiB");
        assert_eq!(Unit::Ns.show(8_229_000.0), "8.229 ms");
        assert_eq!(Unit::Percent.show(74.04), "74.0%");
        assert_eq!(Unit::Count.show(1234567.0), "1,234,567");
        assert_eq!(Unit::Count.show(-1000.0), "-1,000");
    }

    #[test]
    fn ranked_by_severity_then_departure_then_size() {
        let f = |s, v: f64, c: Option<f64>, r| {
            let mut fig = Figure::new(v, Unit::Ns);
            if let Some(c) = c {
                fig = fig.against(c, "peers");
            }
            Finding::new(s, "k", "x").at(Where::rank(r)).figure(fig)
        };
        let mut all = vec![
            f(Severity::Notice, 100.0, Some(1.0), 0),
            f(Severity::Warning, 110.0, Some(100.0), 1),
            f(Severity::Warning, 10.0, Some(100.0), 2),
            f(Severity::Error, 1.0, None, 3),
            f(Severity::Warning, 5.0, Some(0.0), 4),
            f(Severity::Warning, 500.0, None, 5),
        ];
        rank(&mut all);
        let order: Vec<i64> = all.iter().map(|x| x.place.rank.unwrap()).collect();
        // error; then warnings by departure: new (inf), 0.9, 0.1, none; then the notice.
        assert_eq!(order, vec![3, 4, 2, 1, 5, 0]);
    }

    #[test]
    fn outliers_only_among_three_or_more() {
        assert!(outliers(&[1.0, 10.0], 0.1, 0.0).is_empty());
        let o = outliers(&[74.0, 73.0, 75.0, 10.0], 0.25, 1.0);
        assert_eq!(o, vec![(3, 73.5)]);
        // within the resolution: nothing, however large relatively
        assert!(outliers(&[0.001, 0.002, 0.0], 0.1, 0.01).is_empty());
    }

    #[test]
    fn where_labels() {
        let w = Where::rank(5).with_mesh("pp 1, ep 1").at("stage4_b");
        assert_eq!(w.label(), "rank 5 (pp 1, ep 1), stage4_b");
        assert_eq!(
            Where::default().in_file("node0.log", Some(12)).label(),
            "node0.log:12"
        );
        assert_eq!(Where::default().label(), "");
    }
}
