//! The comparison of two runs as data: what `--diff --json` prints (schema in docs/log.md).
//! Every change in bytes, after minus before.

use serde::Serialize;

use crate::mesh::Mesh;

pub const SCHEMA: &str = "instrument.log.diff/1";

#[derive(Debug, Serialize)]
pub struct DiffReport {
    pub schema: &'static str,
    pub rules: String,
    pub before: Side,
    pub after: Side,
    /// What the two runs' shapes differ in that does not stop the comparison (a model path
    /// under another checkout), or that they print no shape.
    pub notes: Vec<String>,
    /// The ranks on both sides at the same mesh coordinates: changed ones first, the largest
    /// change first.
    pub ranks: Vec<RankDiff>,
    /// Ranks on one side only, or at other coordinates on the other side.
    pub not_compared: Vec<NotCompared>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// With `--gate`: the gate's view of the figures, its verdict last (`crate::gate`).
    pub gate: Option<crate::gate::Outcome>,
}

#[derive(Debug, Serialize)]
pub struct Side {
    pub files: Vec<String>,
    pub prints: u64,
    pub ranks: Vec<i64>,
    /// The run's shape, the rank's own fields left out (`pp size 2, ..., mbs=1, ...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct RankDiff {
    pub rank: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<Mesh>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pp_rank: Option<i64>,
    /// Anything changed beyond the prints' rounding.
    pub changed: bool,
    /// The step's peak allocated (probes inside the layers included), before and after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak: Option<Change>,
    /// The first schedule point where the two timelines differ beyond the rounding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parted_at: Option<Parting>,
    /// Every figure that changed, the largest change first.
    pub changes: Vec<Change>,
    /// Differences up to these are the prints' rounding, not changes.
    pub resolution_bytes: i64,
    pub saved_resolution_bytes: i64,
    /// The schedule's points on each side (label, allocated), for the page.
    #[serde(skip)]
    pub before_points: Vec<(String, i64)>,
    #[serde(skip)]
    pub after_points: Vec<(String, i64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// What changed, for people: `peak allocated`, `setup: NCCL world`,
    /// `layer 3 stage1 saved activations`, `layer 3 saved activations, all stages`.
    pub figure: String,
    /// `peak`, `schedule`, `setup`, `saved-activations`, `saved-weights`.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<i64>,
    /// The layer's stage; absent for a layer's total over its stages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_bytes: Option<i64>,
    pub change_bytes: i64,
    /// `+25.0%`, `-3.1%`, or `new` (nothing before).
    pub change: String,
    /// Where the figure was read on each side (a schedule point, a setup phase).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_at: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Parting {
    pub point: String,
    /// Absent when the point is on one side only (the schedules differ).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_bytes: Option<i64>,
    /// The schedule point before it, where the two still agreed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agreed_until: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct NotCompared {
    pub rank: i64,
    /// `before`, `after` (the only side it is on), or `both` (at other coordinates).
    pub side: &'static str,
    pub why: String,
}
