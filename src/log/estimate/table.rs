//! The estimator table (`pithtrain.toml` beside this file, built in): where a checkout keeps
//! its memory estimator, which run-shape fields it takes, and which state of its simulated
//! schedule each schedule print reads. Compiled once into matchers.

use serde::Deserialize;

const EMBEDDED: &str = include_str!("pithtrain.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    pub name: String,
    pub package: String,
    pub marker: String,
    /// Where the estimator came from, for a checkout without it (`since`).
    #[serde(default)]
    pub since: Option<String>,
    pub config_in_folder: String,
    pub fragmentation: f64,
    pub shape: ShapeKeys,
    pub points: Vec<PointSpec>,
}

/// The run-shape fields the estimator takes, by the label's key.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeKeys {
    pub pp: String,
    pub dp: String,
    pub cp: String,
    pub ep: String,
    pub world: String,
    pub micro_batch_size: String,
    pub global_batch_size: String,
    pub sequence_length: String,
    pub model: String,
}

/// One print of the schedule and the estimator state it reads (exactly one of `event`,
/// `before`, `last`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointSpec {
    pub print: String,
    #[serde(default)]
    pub event: Option<String>,
    #[serde(default)]
    pub before: Vec<String>,
    #[serde(default)]
    pub last: bool,
}

/// Where a print's estimated state is: an index into the estimator's events.
#[derive(Debug, Clone, PartialEq)]
pub enum Where {
    /// At the first event beginning so.
    At(String),
    /// Just before the first event beginning with any of these.
    Before(Vec<String>),
    /// After the last event.
    Last,
}

impl Table {
    pub fn embedded() -> Table {
        // The table is part of the binary; the unit tests parse it.
        toml::from_str(EMBEDDED).expect("src/log/estimate/pithtrain.toml parses")
    }

    /// Which state of the estimator's events a print labelled `label` reads, if the table
    /// maps it.
    pub fn locate(&self, label: &str) -> Option<Where> {
        for p in &self.points {
            let Some(i) = matches(&p.print, label) else {
                continue;
            };
            let fill = |s: &str| match &i {
                Some(i) => s.replace("{i}", i),
                None => s.to_string(),
            };
            return Some(if p.last {
                Where::Last
            } else if let Some(e) = &p.event {
                Where::At(fill(e))
            } else {
                Where::Before(p.before.iter().map(|b| fill(b)).collect())
            });
        }
        None
    }

    /// The index of the event whose state `w` reads.
    pub fn index(w: &Where, events: &[(String, i64)]) -> Option<usize> {
        match w {
            Where::At(prefix) => events
                .iter()
                .position(|(n, _)| n.starts_with(prefix.as_str())),
            Where::Before(prefixes) => events
                .iter()
                .position(|(n, _)| prefixes.iter().any(|p| n.starts_with(p.as_str())))
                .and_then(|i| i.checked_sub(1)),
            Where::Last => events.len().checked_sub(1),
        }
    }
}

/// Whether `label` is the template `print` (`Step1 F0 i={i}`): `Some(None)` for a template
/// without `{i}`, `Some(Some(digits))` with the loop index.
fn matches(print: &str, label: &str) -> Option<Option<String>> {
    match print.split_once("{i}") {
        None => (print == label).then_some(None),
        Some((head, tail)) => {
            let middle = label.strip_prefix(head)?.strip_suffix(tail)?;
            (!middle.is_empty() && middle.bytes().all(|b| b.is_ascii_digit()))
                .then(|| Some(middle.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_says_one_place() {
        let t = Table::embedded();
        assert!(t.points.len() >= 10);
        for p in &t.points {
            let ways = p.event.is_some() as u8 + (!p.before.is_empty()) as u8 + p.last as u8;
            assert_eq!(ways, 1, "{}: exactly one of event, before, last", p.print);
        }
    }

    /// The events of pithtrain's simulator for pp=2, 4 micro-batches, pipeline rank 0, as its
    /// ScheduleSimulator names them (tools/memory_estimator/schedule_simulator.py, 889a408).
    fn events() -> Vec<(String, i64)> {
        [
            "static_baseline",
            "S1.i0 fwd(p0) c0",
            "S1.i1 fwd(p0) c1",
            "S2.i0 fwd(p0) c2",
            "S2.i0 fwd(p1) c0",
            "S3.i0 bwd(p1,zb=True) c0",
            "S3.i0 weight_chunk",
            "S3.i0 fwd(p1) c1",
            "S4.i0 fwd_bwd(p0,p1) fc3/bc1",
            "S4.i0 fwd_bwd(p1,p0) fc2/bc0",
            "S5.i0 bwd(p1,zb=False) c2",
            "S5.i0 fwd_bwd(p1,p0) fc3/bc1",
            "S6.i0 bwd(p1,zb=False) c3",
            "S6.i0 bwd(p0,zb=True) c2",
            "S7.i0 weight_chunk",
            "S7.i0 bwd(p0,zb=True) c3",
            "S8.i0 weight_chunk",
        ]
        .iter()
        .enumerate()
        .map(|(i, n)| (n.to_string(), i as i64))
        .collect()
    }

    #[test]
    fn prints_read_the_state_of_their_event() {
        let t = Table::embedded();
        let ev = events();
        let at = |label: &str| Table::index(&t.locate(label).unwrap(), &ev).map(|i| &*ev[i].0);
        assert_eq!(at("Before pipeline"), Some("static_baseline"));
        assert_eq!(at("Step1 F0 i=1"), Some("S1.i1 fwd(p0) c1"));
        assert_eq!(at("After Step1"), Some("S1.i1 fwd(p0) c1"));
        assert_eq!(at("Step2 i=0 forward_chunk(1)"), Some("S2.i0 fwd(p1) c0"));
        assert_eq!(at("After Step2"), Some("S2.i0 fwd(p1) c0"));
        assert_eq!(at("Step3 i=0 before B1"), Some("S2.i0 fwd(p1) c0"));
        assert_eq!(at("Step3 i=0 after B1"), Some("S3.i0 bwd(p1,zb=True) c0"));
        assert_eq!(at("Step3 i=0 after W1"), Some("S3.i0 weight_chunk"));
        assert_eq!(at("Step3 i=0 after F1"), Some("S3.i0 fwd(p1) c1"));
        assert_eq!(at("Step4 i=0"), Some("S4.i0 fwd_bwd(p1,p0) fc2/bc0"));
        assert_eq!(at("After Step4"), Some("S4.i0 fwd_bwd(p1,p0) fc2/bc0"));
        assert_eq!(
            at("After Step8 (end of pipeline)"),
            Some("S8.i0 weight_chunk")
        );
        // A loop index the schedule never reached, and a print the table does not know.
        assert_eq!(at("Step4 i=7"), None);
        assert_eq!(t.locate("Step4 i=x"), None);
        assert_eq!(t.locate("a print of my own"), None);
    }

    #[test]
    fn a_step_that_runs_no_iteration_reads_the_state_before_the_next() {
        // Pipeline rank 1 of 2: no Step 1 iteration, Step 3 none either.
        let ev: Vec<(String, i64)> = ["static_baseline", "S2.i0 fwd(p0) c0", "S4.i0 x"]
            .iter()
            .map(|n| (n.to_string(), 0))
            .collect();
        let t = Table::embedded();
        let at = |label: &str| Table::index(&t.locate(label).unwrap(), &ev).map(|i| &*ev[i].0);
        assert_eq!(at("After Step1"), Some("static_baseline"));
        assert_eq!(at("After Step3"), Some("S2.i0 fwd(p0) c0"));
    }
}
