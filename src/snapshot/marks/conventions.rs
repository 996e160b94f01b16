//! The schedule conventions as data (`conventions.toml`, embedded): which annotations are
//! schedule events and detail-layer stages, and the categories of memory in the trainer's own
//! words. The Rust knows no trainer: it reads the table.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;
use serde::Deserialize;

pub const BUILTIN: &str = include_str!("conventions.toml");

#[derive(Deserialize)]
struct Raw {
    schedule: RawSchedule,
    #[serde(default)]
    category: Vec<RawCategory>,
    structural: Structural,
    #[serde(default)]
    estimator: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    stage_frame: Vec<super::stage_frames::RawStageFrame>,
}

#[derive(Deserialize)]
struct RawSchedule {
    event: String,
    stage: String,
    #[serde(default)]
    steps: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct RawCategory {
    name: String,
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    functions: Vec<String>,
}

/// The names of the categories given by where an allocation lives in the schedule.
#[derive(Deserialize, Clone, Debug)]
pub struct Structural {
    /// Allocated before the history began (the recipe starts it at the profiled step).
    pub before: String,
    /// Allocated after the history began but before the schedule's first event (the step's
    /// inputs, what the step sets up before `DualPipeV.step`).
    pub before_schedule: String,
    pub temporary: String,
    pub saved: String,
    pub deferred: String,
    pub gradient: String,
    pub other: String,
}

/// A category named by an allocation's frames.
#[derive(Clone, Debug)]
pub struct FrameRule {
    pub name: String,
    pub files: Vec<String>,
    pub functions: Vec<String>,
}

impl FrameRule {
    pub fn matches(&self, file: &str, function: &str) -> bool {
        self.files.iter().any(|f| file.contains(f.as_str()))
            || self.functions.iter().any(|f| f == function)
    }
}

/// Why a schedule table does not parse: its author's to fix (the embedded one is checked by a
/// unit test).
#[derive(Debug, thiserror::Error)]
pub enum ConventionsError {
    #[error("{0}")]
    Toml(toml::de::Error),
    #[error("[schedule] {what}: {source}")]
    Regex {
        what: &'static str,
        #[source]
        source: regex::Error,
    },
    #[error("[schedule] {what}: no group `(?P<{group}>...)`")]
    NoGroup {
        what: &'static str,
        group: &'static str,
    },
    #[error("[schedule.steps] {key:?} is not a step number")]
    StepNumber { key: String },
    #[error(transparent)]
    StageFrame(#[from] super::stage_frames::StageFrameError),
}

crate::exit::user_errors!(ConventionsError);

pub struct Conventions {
    /// A schedule event's name: groups `step`, `iter`, `op`.
    pub event: Regex,
    /// A detail layer's stage: groups `layer`, `stage`.
    pub stage: Regex,
    /// What each step of the schedule does, by its number.
    pub steps: BTreeMap<u8, String>,
    pub frames: Vec<FrameRule>,
    pub structural: Structural,
    /// A category's estimator buckets (`[estimator]`), for comparing per event.
    pub estimator: BTreeMap<String, Vec<String>>,
    /// Which layer stage an allocation's frames name (`[[stage_frame]]`).
    pub stage_frames: super::stage_frames::StageFrames,
}

impl Conventions {
    pub fn parse(text: &str) -> Result<Conventions, ConventionsError> {
        let raw: Raw = toml::from_str(text).map_err(ConventionsError::Toml)?;
        let re = |what: &'static str, p: &str, groups: &[&'static str]| {
            let r = Regex::new(p).map_err(|source| ConventionsError::Regex { what, source })?;
            for &group in groups {
                if !r.capture_names().any(|n| n == Some(group)) {
                    return Err(ConventionsError::NoGroup { what, group });
                }
            }
            Ok(r)
        };
        let mut steps = BTreeMap::new();
        for (k, v) in raw.schedule.steps {
            let n: u8 = k
                .parse()
                .map_err(|_| ConventionsError::StepNumber { key: k.clone() })?;
            steps.insert(n, v);
        }
        Ok(Conventions {
            event: re("event", &raw.schedule.event, &["step", "iter", "op"])?,
            stage: re("stage", &raw.schedule.stage, &["layer", "stage"])?,
            steps,
            frames: raw
                .category
                .into_iter()
                .map(|c| FrameRule {
                    name: c.name,
                    files: c.files,
                    functions: c.functions,
                })
                .collect(),
            structural: raw.structural,
            estimator: raw.estimator,
            stage_frames: super::stage_frames::StageFrames::new(raw.stage_frame, text)?,
        })
    }

    /// Every category name in one order, the memory that stays the longest first: what was
    /// there before the history and before the schedule, the frame rules' categories, then
    /// the structural ones of the step (a page stacks and colours the categories by it).
    pub fn categories(&self) -> Vec<&str> {
        let s = &self.structural;
        let mut out: Vec<&str> = vec![&s.before, &s.before_schedule];
        for n in self.frames.iter().map(|r| &r.name).chain([
            &s.saved,
            &s.deferred,
            &s.gradient,
            &s.temporary,
            &s.other,
        ]) {
            if !out.contains(&n.as_str()) {
                out.push(n);
            }
        }
        out
    }

    /// The embedded table (checked by a unit test, so it always parses).
    pub fn builtin() -> &'static Conventions {
        static C: OnceLock<Conventions> = OnceLock::new();
        C.get_or_init(|| Conventions::parse(BUILTIN).expect("the embedded schedule table parses"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_table_reads_the_estimators_names() {
        let c = Conventions::builtin();
        for (name, step, op) in [
            ("S1.i0 fwd(p0) c0", "1", "fwd"),
            ("S3.i1 bwd(p1,zb=True) c1", "3", "bwd"),
            ("S4.i5 fwd_bwd(p1,p0) fc7/bc5", "4", "fwd_bwd"),
            ("S4.i0.last_rank bwd(p1,zb=False) c0", "4", "bwd"),
            ("S8.i0 weight_chunk", "8", "weight_chunk"),
        ] {
            let m = c.event.captures(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!((&m["step"], &m["op"]), (step, op), "{name}");
        }
        for not in [
            "static_baseline",
            "Optimizer.step#AdamW.step",
            "S9.i0 fwd(p0) c0",
        ] {
            assert!(c.event.captures(not).is_none(), "{not}");
        }
        let m = c.stage.captures("layer25.stage3_f").unwrap();
        assert_eq!((&m["layer"], &m["stage"]), ("25", "stage3_f"));
        assert_eq!(c.steps.len(), 8);
        assert!(c.frames.iter().any(|r| r.name == "communication buffers"));
    }

    #[test]
    fn a_table_without_the_groups_is_refused() {
        let bad = BUILTIN.replace("(?P<op>", "(?P<operation>");
        let e = Conventions::parse(&bad).err().unwrap();
        assert!(
            matches!(
                e,
                ConventionsError::NoGroup {
                    what: "event",
                    group: "op"
                }
            ),
            "{e}"
        );
        assert_eq!(e.to_string(), "[schedule] event: no group `(?P<op>...)`");
    }
}
