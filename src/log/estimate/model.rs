//! The estimate as data: what `--estimate` adds to the report (`estimate` in its JSON,
//! schema in docs/log.md). Memory in bytes.

use serde::Serialize;

use crate::mesh::Mesh;

/// How the checkout was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FoundBy {
    /// `--root`.
    Root,
    /// A folder above the run's (absolute) model path.
    ModelPath,
    /// The current folder or one above it.
    CurrentFolder,
}

/// The estimator's ParallelismConfig, field for field.
#[derive(Debug, Clone, Serialize)]
pub struct Parallel {
    pub pp_size: u64,
    pub ep_size: u64,
    pub dp_size: u64,
    pub cp_size: u64,
    pub micro_batch_size: u64,
    pub global_batch_size: u64,
    pub sequence_length: u64,
}

/// What `--estimate` adds to the report.
#[derive(Debug, Serialize)]
pub struct EstimateReport {
    pub estimator: String,
    /// Why there is no estimate (the rest is then absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_by: Option<FoundBy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_config: Option<String>,
    /// What the estimator was given (its ParallelismConfig, and the fragmentation factor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Inputs>,
    /// The measured timeline leaves the estimate where the two differ by more than this per
    /// cent of the estimated peak of model tensors (and by more than the prints' rounding).
    pub tolerance_percent: f64,
    pub ranks: Vec<RankEstimate>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Inputs {
    #[serde(flatten)]
    pub parallel: Parallel,
    pub world: u64,
    pub fragmentation: f64,
}

#[derive(Debug, Serialize)]
pub struct RankEstimate {
    pub rank: i64,
    pub pp_rank: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<Mesh>,
    /// Static memory, peak of model tensors, non-PyTorch memory, device total: measured
    /// against estimated.
    pub figures: Vec<Figure>,
    /// The estimator's peak event, and the first print at or after it.
    pub estimated_peak_event: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_peak_point: Option<String>,
    /// Every schedule print with its estimated state.
    pub timeline: Vec<TimelinePoint>,
    /// Prints of the step the estimate has no state for (not in the table, or a loop index
    /// the simulated schedule does not reach).
    pub points_without_estimate: usize,
    /// The first point where measured and estimated differ by more than `tolerance_bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaves_at: Option<TimelinePoint>,
    pub tolerance_bytes: i64,
    /// The largest difference along the timeline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_difference: Option<TimelinePoint>,
    /// Every event the estimator simulated, with its buckets: what `instrument report` sets
    /// beside each marked event (not in `log`'s JSON, which compares the prints only).
    #[serde(skip)]
    pub events: Vec<EstimatedEvent>,
}

/// One event of the estimator's simulated schedule.
#[derive(Debug, Clone, Serialize)]
pub struct EstimatedEvent {
    pub name: String,
    /// Static + dynamic memory: the model tensors PyTorch's allocator holds.
    pub model_bytes: i64,
    pub components: std::collections::BTreeMap<String, i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// `static`, `peak`, `non_pytorch`, `device_total`.
    pub figure: &'static str,
    /// What is compared with what, for people.
    pub compares: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_bytes: Option<i64>,
    pub estimated_bytes: i64,
    /// measured - estimated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff_bytes: Option<i64>,
    /// Of the estimate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff_percent: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TimelinePoint {
    pub point: String,
    pub event: String,
    pub measured_bytes: i64,
    pub estimated_bytes: i64,
    pub diff_bytes: i64,
}
