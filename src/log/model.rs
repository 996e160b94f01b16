//! The report `instrument log` makes, as data: what `--json` prints (schema in
//! docs/log.md) and what the text and HTML renderers lay out. Memory is in bytes here;
//! the prints round (to 0.01 GiB, for most), which `resolution_bytes` states.

use std::collections::BTreeMap;

use serde::Serialize;

use super::inputs::InputFile;
use super::scan::FileStats;
use crate::mesh::Mesh;

pub const SCHEMA: &str = "instrument.log/1";

#[derive(Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    /// Where the print declarations came from (`embedded:memory-prints` or a folder).
    pub rules: String,
    pub inputs: Vec<InputReport>,
    /// Files in the folders given that were not read (not named like logs).
    pub skipped_files: Vec<String>,
    pub totals: Totals,
    pub ranks: Vec<RankReport>,
    /// What went wrong or leaves the report short, every rank's, in rank order: out of
    /// memory, files not written, warnings.
    /// What to see first, ranked (`crate::findings`).
    pub findings: Vec<crate::findings::Finding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub across: Option<Across>,
    /// Ranks asked for with `--rank` that printed nothing.
    pub missing_ranks: Vec<i64>,
    /// With `--estimate`: the checkout's own memory estimate beside the measured figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimate: Option<super::estimate::model::EstimateReport>,
}

#[derive(Debug, Serialize)]
pub struct InputReport {
    #[serde(flatten)]
    pub file: InputFile,
    #[serde(flatten)]
    pub stats: FileStats,
}

#[derive(Debug, Default, Serialize)]
pub struct Totals {
    pub files: usize,
    pub bytes: u64,
    pub lines: u64,
    pub prints: u64,
    pub cut: u64,
    pub unreadable: u64,
}

/// Where a print was read: `file:line`.
pub type At = String;

#[derive(Debug, Serialize)]
pub struct RankReport {
    pub rank: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pp_rank: Option<i64>,
    /// The rank's coordinates on the parallelism mesh, from its run shape print:
    /// `{"pp": [rank, size], "dp": [rank, size], ...}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<Mesh>,
    /// The run's shape as the rank printed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunShape>,
    /// The files this rank's prints were read from.
    pub files: Vec<String>,
    /// Runs this rank printed (a restarted run prints its setup again); the report is of
    /// the last one, which begins at `run_from`.
    pub runs: usize,
    pub run_from: At,
    /// The coarsest resolution of the memory figures read (0.01 GiB printed: 10737418).
    pub resolution_bytes: i64,
    /// The same for the saved-tensor figures (0.1 MiB printed: 104858).
    pub saved_resolution_bytes: i64,
    pub setup: Vec<SetupPhase>,
    /// What setup cost: the costs the prints state, and the allocation each setup phase added.
    pub setup_breakdown: Vec<Cost>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<Step>,
    pub layers: Vec<LayerReport>,
    /// Probes inside the step that name no layer (embedding, head).
    pub outside_layers: Vec<Probe>,
    /// Which layers the rank gives layer detail, as it said (the last time it said).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail_layers: Option<DetailLayers>,
    pub files_written: Vec<FileWritten>,
    pub files_not_written: Vec<FileNotWritten>,
    pub out_of_memory: Vec<OutOfMemory>,
    pub warnings: Vec<Note>,
    pub notes: Vec<Note>,
    /// Prints after the profiled step's schedule began again (a second profiled step), not
    /// in the report.
    pub prints_after_step: u64,
    /// Prints beyond what is kept for one rank, counted only.
    pub prints_not_kept: u64,
}

/// The run's shape a rank printed (`rank=3; pp=0/2 dp=0/1 cp=0/1 ep=3/4; mbs=1 seq=2048; ...`).
#[derive(Debug, Clone, Serialize)]
pub struct RunShape {
    /// As printed.
    pub label: String,
    /// Its fields that are not mesh coordinates, as printed (`mbs`, `seq`, `model`, ...).
    pub fields: BTreeMap<String, String>,
    pub at: At,
    /// The label's field that is the rank itself (named as the print's own rank value), which
    /// differs from rank to rank of one run.
    #[serde(skip)]
    pub rank_key: String,
}

#[derive(Debug, Serialize)]
pub struct SetupPhase {
    pub label: String,
    pub rule: String,
    pub at: At,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_pytorch_bytes: Option<i64>,
    pub costs: Vec<Cost>,
    /// Every value as printed, by name.
    pub values: BTreeMap<String, String>,
    /// What this phase reads is alike on every pipeline stage (its rule says so): compared
    /// across all ranks, not only among ranks on one stage.
    pub same_on_every_stage: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Cost {
    pub label: String,
    pub bytes: i64,
    /// `stated` (the print says what it cost) or `allocated` (the rise in allocated memory
    /// since the previous setup phase).
    pub source: &'static str,
    /// The setup phase it belongs to.
    pub phase: String,
    /// Alike on every pipeline stage (compared across all ranks).
    pub same_on_every_stage: bool,
}

#[derive(Debug, Serialize)]
pub struct Step {
    pub points: Vec<Point>,
    /// The allocation every print of the step read, in order (points and layer probes).
    pub trace: Vec<TraceItem>,
    /// The highest allocation read during the step, the layer probes included.
    pub peak: Peak,
    /// The highest of the schedule's own points.
    pub schedule_peak: Peak,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_increase: Option<Increase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_pytorch: Option<Range>,
    /// allocated + cached + non-PyTorch at the schedule's peak: the device memory in use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_in_use_at_schedule_peak_bytes: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TraceItem {
    pub label: String,
    pub allocated_bytes: i64,
    /// A point of the schedule (else a probe inside or around a layer).
    pub point: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub label: String,
    pub rule: String,
    pub at: At,
    pub allocated_bytes: i64,
    /// Change since the previous point of the schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_bytes: Option<i64>,
    /// A change the print states itself, and what it is measured from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub printed_delta_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub printed_delta_meaning: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_pytorch_bytes: Option<i64>,
    /// Layer probes read since the previous point.
    pub probes_before: usize,
    pub values: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Peak {
    pub allocated_bytes: i64,
    pub label: String,
    pub at: At,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The schedule points around it (the last one before, the first one after).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_point: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_point: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Increase {
    pub bytes: i64,
    pub from: String,
    pub to: String,
    pub at: At,
}

#[derive(Debug, Serialize)]
pub struct Range {
    pub min_bytes: i64,
    pub max_bytes: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_schedule_peak_bytes: Option<i64>,
}

#[derive(Debug, Serialize)]
pub struct LayerReport {
    pub layer: i64,
    pub stages: Vec<StageReport>,
    /// The tensors its stages saved for backward, summed over the stages that printed them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved_all: Option<SavedAll>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct SavedAll {
    pub activations_bytes: i64,
    pub weights_bytes: i64,
    /// How many stages printed their saved tensors.
    pub stages: usize,
}

#[derive(Debug, Serialize)]
pub struct StageReport {
    pub stage: String,
    /// The allocation at the stage's last probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocated_after_bytes: Option<i64>,
    /// Versus the allocation read just before the stage's first probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_bytes: Option<i64>,
    pub probes: Vec<Probe>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved: Option<Saved>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    pub rule: String,
    pub at: At,
    pub allocated_bytes: i64,
    /// Versus the allocation read just before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_bytes: Option<i64>,
    pub values: BTreeMap<String, String>,
}

#[derive(Debug, Default, Serialize)]
pub struct Saved {
    /// The totals the print states.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activations_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weights_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensors: Option<i64>,
    /// The tensors listed one by one, and their sums.
    pub list: Vec<SavedTensor>,
    pub list_activation_bytes: i64,
    pub list_weight_bytes: i64,
    pub at: At,
}

impl Saved {
    /// The activations the print states, else the sum of those it listed.
    pub fn activation_bytes(&self) -> i64 {
        self.activations_bytes.unwrap_or(self.list_activation_bytes)
    }

    /// The weights the print states, else the sum of those it listed.
    pub fn weight_bytes(&self) -> i64 {
        self.weights_bytes.unwrap_or(self.list_weight_bytes)
    }
}

#[derive(Debug, Serialize)]
pub struct SavedTensor {
    /// `activation` or `weight`.
    pub kind: &'static str,
    pub bytes: i64,
    pub values: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileWritten {
    pub label: String,
    pub path: String,
    /// The machine the file is on, when the print names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub at: At,
    /// The command that opens it, as the rule declares.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Written right after the rank said it ran out of memory (the print before it).
    pub at_out_of_memory: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileNotWritten {
    pub label: String,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub at: At,
    pub at_out_of_memory: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct OutOfMemory {
    pub label: String,
    /// The allocation that failed, and the memory free (of the total) when it did.
    pub requested_bytes: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<i64>,
    pub at: At,
}

#[derive(Debug, Clone, Serialize)]
pub struct DetailLayers {
    /// The rank's own words, as the declaration labels them.
    pub label: String,
    /// The layers given detail (empty: none).
    pub layers: Vec<i64>,
    /// The layers the rank holds, as printed (`0-1, 6-7`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    pub at: At,
}

#[derive(Debug, Serialize)]
pub struct Note {
    pub label: String,
    pub at: At,
}

#[derive(Debug, Serialize)]
pub struct Across {
    pub ranks: Vec<AcrossRow>,
    /// Differences up to this are within the prints' rounding.
    pub resolution_bytes: i64,
    /// The ranks grouped by pipeline stage (the `pp_rank` of their prints). Ranks on
    /// different stages hold different layers and run different schedule points: their
    /// step figures (peak, non-PyTorch memory, the schedule's points) and the setup costs
    /// that depend on the stage are compared only within a stage of two ranks or more.
    /// The costs declared alike on every stage (CUDA context, NCCL world, device mesh) are
    /// compared across all ranks.
    pub stages: Vec<StageGroup>,
    /// Which ranks were not compared for standing out on the stage figures and why (each
    /// alone on its stage), as a sentence; absent when every rank has a stage peer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_compared: Option<String>,
    /// For each compared figure, the rank with the highest value: over all ranks for the
    /// costs alike on every stage, per stage (of two ranks or more) for the others.
    pub highest: Vec<Highest>,
    /// The rank furthest from the median of the ranks it is compared with, if any is (by
    /// more than 1.5 times the prints' resolution: one printed unit apart is within
    /// rounding).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standout: Option<Standout>,
}

#[derive(Debug, Serialize)]
pub struct StageGroup {
    /// The pipeline stage (absent: the prints did not say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pp_rank: Option<i64>,
    pub ranks: Vec<i64>,
}

#[derive(Debug, Serialize)]
pub struct AcrossRow {
    pub rank: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pp_rank: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<Mesh>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_end_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_pytorch_max_bytes: Option<i64>,
    /// The stated setup costs, by label.
    pub setup_costs: BTreeMap<String, i64>,
    pub setup_total_bytes: i64,
    /// The detail layers (`0, 1`, or `none`), when the rank said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail_layers: Option<String>,
    /// The snapshots (or other files) the rank wrote: where, on which host, the command
    /// that opens each.
    pub files: Vec<FileWritten>,
}

#[derive(Debug, Serialize)]
pub struct Highest {
    pub figure: String,
    /// The stage it is the highest of (absent: of all ranks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pp_rank: Option<i64>,
    pub rank: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<Mesh>,
    pub bytes: i64,
    pub median_bytes: i64,
}

#[derive(Debug, Serialize)]
pub struct Standout {
    pub rank: i64,
    /// Its coordinates on the mesh, when it printed its run shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<Mesh>,
    pub figure: String,
    pub bytes: i64,
    /// The median of the ranks it is compared with.
    pub median_bytes: i64,
    /// `all-ranks` (a cost alike on every stage) or `same-stage`.
    pub among: &'static str,
    /// The stage it was compared within (`among` = `same-stage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pp_rank: Option<i64>,
    /// The ranks it was compared with.
    pub compared_with: Vec<i64>,
    /// The setup phases and schedule points where this rank differs most from the median of
    /// the ranks they compare with (by the allocated memory each reads): the phases alike on
    /// every stage against all other ranks, the others against the ranks on its stage.
    pub phases: Vec<PhaseDiff>,
}

#[derive(Debug, Serialize)]
pub struct PhaseDiff {
    pub phase: String,
    pub bytes: i64,
    pub median_bytes: i64,
    pub diff_bytes: i64,
}
