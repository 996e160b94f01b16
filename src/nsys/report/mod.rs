//! The report `instrument nsys report` builds from its exports (one `Report` per export, the
//! ranks side by side in `Across`), and its renderings: `text` (the default), `json` (`--json`,
//! streamed; schema in docs/nsys.md) and `html` (`--html FILE`). Every table is bounded: the
//! `--top N` largest rows and one `rest` row summing the others (`--all` lists every row).

pub mod html;
pub mod json;
pub mod text;

use serde::Serialize;

use crate::mesh::Mesh;
use crate::nsys::ranks::SetupFields;
use crate::nsys::ranks::across::Across;
use crate::nsys::ranks::figures::{Figures, StageRow, StreamRow, WindowTotals};
use crate::nsys::stats::Summary;

pub const SCHEMA: &str = "instrument.nsys.report/3";

/// What `--json` prints: every export, then the ranks side by side.
#[derive(Debug, Serialize)]
pub struct Document {
    pub schema: &'static str,
    /// The conventions table read (`built-in` or the `--conventions` file).
    pub conventions: String,
    /// `--window`: `median`, `all` or `START:END`.
    pub window: String,
    /// What stands out, most important first (`crate::findings`; see `nsys::findings`).
    pub findings: Vec<crate::findings::Finding>,
    pub exports: Vec<Report>,
    pub across: Across,
}

/// Nanoseconds as milliseconds with three decimals (text and HTML).
pub(crate) fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// At most `n` characters, an ellipsis marking a cut.
pub(crate) fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// "kernels X ms in N launches[; CUDA graphs Y ms in M launches]".
pub(crate) fn work_line(kernel_ns: i64, kernels: u64, graph_ns: i64, graphs: u64) -> String {
    let mut line = format!("kernels {} ms in {kernels} launches", ms(kernel_ns));
    if graphs > 0 {
        line.push_str(&format!(
            "; CUDA graphs {} ms in {graphs} launches",
            ms(graph_ns)
        ));
    }
    line
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub file: String,
    pub export: ExportInfo,
    pub capture: CaptureInfo,
    pub grouping: GroupingInfo,
    pub gpus: Vec<Gpu>,
    /// Category names in report order: the kernel categories, then `cuda_graph`.
    pub categories: Vec<String>,
    pub totals: Totals,
    pub processes: Vec<Process>,
    /// Kernel names over the whole export, like `nsys stats --report cuda_gpu_kern_sum`.
    pub kernel_summary: Vec<KernelRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_summary_rest: Option<KernelRest>,
    /// Projected ranges over the whole export, like `nsys stats --report nvtx_gpu_proj_sum`,
    /// with names grouped (see `grouping`).
    pub nvtx_gpu_proj_sum: Vec<ProjRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvtx_gpu_proj_sum_rest: Option<ProjRest>,
    pub notes: Vec<Note>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
}

#[derive(Debug, Serialize, Default)]
pub struct ExportInfo {
    pub schema_version: Option<String>,
    pub nsys_version: Option<String>,
    /// `META_DATA_EXPORT` (nsys 2023.3+) or `EXPORT_META_DATA` (older).
    pub metadata_table: Option<&'static str>,
    /// When the nsys session started (`TARGET_INFO_SESSION_START_TIME`), UTC nanoseconds.
    pub session_start_utc_ns: Option<i64>,
}

#[derive(Debug, Serialize, Default)]
pub struct CaptureInfo {
    /// The `--trace` kinds the capture recorded (`META_DATA_CAPTURE`), when known.
    pub traced: Option<Vec<String>>,
    /// `graph` or `node` (`--cuda-graph-trace`), when recorded.
    pub cuda_graph_trace: Option<String>,
    /// What that means for this report.
    pub cuda_graphs: String,
}

#[derive(Debug, Serialize, Default)]
pub struct GroupingInfo {
    /// `name` (PyTorch's seq/op_id/sizes/input_op_ids suffixes taken off) or `name_and_shape`.
    pub by: &'static str,
    /// Range texts whose PyTorch suffix was taken off.
    pub stripped_suffixes: u64,
    /// Counter families (`step N`) folded into one row.
    pub folded_families: u64,
    /// Rows per table (`--top`), `null` with `--all`.
    pub top: Option<usize>,
}

#[derive(Debug, Serialize)]
pub struct Gpu {
    pub id: i64,
    pub name: String,
}

#[derive(Debug, Serialize, Default)]
pub struct Totals {
    /// Kernel and CUDA graph time: what category shares are measured over.
    pub gpu_ns: i64,
    pub kernel_ns: i64,
    pub kernel_count: u64,
    pub graph_ns: i64,
    pub graph_count: u64,
    pub memcpy_ns: i64,
    pub memcpy_count: u64,
    pub memset_ns: i64,
    pub memset_count: u64,
    pub categories: Vec<CategoryTime>,
    pub communication_share: f64,
}

#[derive(Debug, Serialize, Clone)]
pub struct CategoryTime {
    pub category: String,
    pub time_ns: i64,
    pub count: u64,
    /// Share of the GPU time (kernels and graphs) of the process, or of the export in `totals`.
    pub share: f64,
}

#[derive(Debug, Serialize)]
pub struct Process {
    pub global_pid: i64,
    pub pid: i64,
    pub name: Option<String>,
    /// From the setup range (`conventions`): the global rank and the mesh coordinates
    /// (`{"pp": [rank, size], ...}`), `null` when unknown (`mesh_unknown` says why).
    pub rank: Option<u64>,
    pub mesh: Option<Mesh>,
    /// The setup fields the conventions name (`"mbs": 1, "seq": 4096`).
    #[serde(flatten)]
    pub setup_fields: SetupFields,
    /// The setup range as written (never listed as work in `nvtx`).
    pub setup: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh_unknown: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup_note: Option<String>,
    /// The window the streams and stages are for, and its sums.
    pub window: WindowInfo,
    /// The streams with kernels in the window, and what each is for.
    pub streams: Vec<StreamRow>,
    /// Per pipeline stage, the communication in the window.
    pub stages: Vec<StageRow>,
    /// The window ranges (chunks) of the process: count and lengths.
    pub chunks: crate::nsys::ranks::Chunks,
    /// The same figures over the whole capture.
    pub whole_capture: Figures,
    /// GPUs the process ran work on (GPU ids, after `TARGET_INFO_CUDA_DEVICE`).
    pub devices: Vec<i64>,
    /// First GPU operation start and last GPU operation end.
    pub first_ns: i64,
    pub last_ns: i64,
    pub gpu_ns: i64,
    pub kernel_ns: i64,
    pub kernel_count: u64,
    pub graph_ns: i64,
    pub graph_count: u64,
    pub memcpy_ns: i64,
    pub memcpy_count: u64,
    pub memset_ns: i64,
    pub memset_count: u64,
    pub categories: Vec<CategoryTime>,
    pub communication: Communication,
    pub overlap: Overlap,
    /// The process's kernels by total time.
    pub kernels: Vec<KernelRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernels_rest: Option<KernelRest>,
    /// NVTX ranges of this process by inclusive GPU time.
    pub nvtx: Vec<RangeRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvtx_rest: Option<RangeRest>,
    /// GPU operation time launched outside every projected NVTX range.
    pub unattributed_ns: i64,
}

#[derive(Debug, Serialize)]
pub struct Communication {
    pub time_ns: i64,
    pub count: u64,
    /// Communication kernel time over the GPU time (kernels and graphs) of the process.
    pub share_of_gpu_time: f64,
    pub by_op: Vec<CommRow>,
    /// SendRecv kernels counted as the collective their enclosing range names.
    pub from_sendrecv: Vec<CommRow>,
}

#[derive(Debug, Serialize, Clone)]
pub struct CommRow {
    pub op: &'static str,
    pub time_ns: i64,
    pub count: u64,
}

/// The window of a process's figures.
#[derive(Debug, Serialize)]
pub struct WindowInfo {
    /// `median`, `all` or `range`.
    pub pick: &'static str,
    pub name: String,
    #[serde(flatten)]
    pub totals: WindowTotals,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How much communication runs while compute runs, per process (summed over its devices).
#[derive(Debug, Serialize, Default)]
pub struct Overlap {
    /// Length of the union of communication kernel intervals.
    pub communication_ns: i64,
    /// Length of the union of all other kernel and graph intervals.
    pub compute_ns: i64,
    /// Communication time during which some compute ran on the same device.
    pub hidden_ns: i64,
    /// Communication time with no compute running: `communication_ns - hidden_ns`.
    pub exposed_ns: i64,
    /// `hidden_ns / communication_ns` (0 when there is no communication).
    pub hidden_share: f64,
}

#[derive(Debug, Serialize, Clone)]
pub struct KernelRow {
    pub name: String,
    /// The kernel-classes rule that decided, `null` when none matched.
    pub family: Option<String>,
    pub category: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm_op: Option<&'static str>,
    #[serde(flatten)]
    pub stats: Summary,
    /// Share of the GPU time of the scope (process, or export for `kernel_summary`).
    pub share: f64,
}

/// The rows a kernel table leaves out, summed.
#[derive(Debug, Serialize, Clone, Default)]
pub struct KernelRest {
    pub rows: u64,
    pub total_ns: i64,
    pub count: u64,
    pub share: f64,
}

#[derive(Debug, Serialize)]
pub struct RangeRow {
    /// The grouped range name (PyTorch's suffixes taken off; a family name such as `step N`).
    pub name: String,
    /// Input shapes (`sizes = ...`), with `--by-shape`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shapes: Option<String>,
    /// The NVTX domain name ("" for the default domain).
    pub domain: String,
    /// The name as `nsys stats` prints it: `domain:name`.
    pub nsys_name: String,
    pub style: &'static str,
    pub instances: u64,
    pub cpu_ns: i64,
    pub inclusive_ns: i64,
    pub exclusive_ns: i64,
    /// Inclusive GPU time per category (kernel categories, `cuda_graph`, `memcpy`, `memset`);
    /// only the categories with time.
    pub inclusive_by_category: Vec<ClassTime>,
    /// The collective this range names, when it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collective: Option<&'static str>,
    /// Distinct names folded into this row (counter families such as `step N`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folded_names: Option<u32>,
    pub proj: ProjStats,
}

/// The ranges a per-process table leaves out, summed.
#[derive(Debug, Serialize, Default)]
pub struct RangeRest {
    pub rows: u64,
    pub instances: u64,
    pub cpu_ns: i64,
    /// Sum of the rows' inclusive times (ops nested in several of them count in each).
    pub inclusive_ns: i64,
    pub exclusive_ns: i64,
    pub proj_total_ns: i64,
}

#[derive(Debug, Serialize, Clone)]
pub struct ClassTime {
    pub category: String,
    pub time_ns: i64,
}

/// nsys's projection figures for one range name.
#[derive(Debug, Serialize, Clone, Default)]
pub struct ProjStats {
    /// Instances that launched at least one GPU operation.
    pub instances: u64,
    /// Sum of projected spans (nsys "Total Proj Time").
    pub total_ns: i64,
    /// CPU time of those instances (nsys "Total Range Time").
    pub range_ns: i64,
    pub avg_ns: f64,
    pub med_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
    pub stddev_ns: f64,
    /// Distinct launches inside those instances (nsys "Total GPU Ops").
    pub gpu_ops: u64,
}

#[derive(Debug, Serialize)]
pub struct ProjRow {
    pub nsys_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shapes: Option<String>,
    pub style: &'static str,
    #[serde(flatten)]
    pub proj: ProjStats,
}

#[derive(Debug, Serialize, Default)]
pub struct ProjRest {
    pub rows: u64,
    pub instances: u64,
    pub total_ns: i64,
    pub range_ns: i64,
    pub gpu_ops: u64,
}

#[derive(Debug, Serialize)]
pub struct Note {
    pub kind: &'static str,
    pub count: u64,
    pub message: String,
}

/// All processes on one time axis, for the HTML page.
#[derive(Debug, Serialize)]
pub struct Timeline {
    pub start_ns: i64,
    pub end_ns: i64,
    pub buckets: usize,
    pub processes: Vec<ProcessTimeline>,
}

#[derive(Debug, Serialize)]
pub struct ProcessTimeline {
    pub pid: i64,
    /// `rank 5 (pp 1, ep 1)`, or `pid 4242` when the mesh is unknown.
    pub label: String,
    /// The process's window (`--window`), to mark on the axis.
    pub window: (i64, i64),
    /// Busy ns per bucket of the union of compute (kernels that are not communication, graphs).
    pub compute: Vec<i64>,
    /// Busy ns per bucket of the union of communication kernels.
    pub communication: Vec<i64>,
    /// The longest NVTX ranges at nesting depth 0..=2.
    pub ranges: Vec<TimelineRange>,
}

#[derive(Debug, Serialize)]
pub struct TimelineRange {
    pub start_ns: i64,
    pub end_ns: i64,
    pub depth: u8,
    pub name: String,
}
