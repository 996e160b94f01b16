//! The report `instrument nsys report` builds from one export, and its renderings:
//! `text` (the default), `json` (`--json`; schema in docs/nsys.md) and `html` (`--html FILE`).

pub mod html;
pub mod json;
pub mod text;

use serde::Serialize;

use crate::nsys::stats::Summary;

pub const SCHEMA: &str = "instrument.nsys.report/1";

#[derive(Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub file: String,
    pub export_schema_version: Option<String>,
    pub gpus: Vec<Gpu>,
    pub totals: Totals,
    pub processes: Vec<Process>,
    /// Every kernel name over the whole export, like `nsys stats --report cuda_gpu_kern_sum`.
    pub kernel_summary: Vec<KernelRow>,
    /// Every projected range over the whole export, like `nsys stats --report nvtx_gpu_proj_sum`.
    pub nvtx_gpu_proj_sum: Vec<ProjRow>,
    pub notes: Vec<Note>,
}

#[derive(Debug, Serialize)]
pub struct Gpu {
    pub id: i64,
    pub name: String,
}

#[derive(Debug, Serialize, Default)]
pub struct Totals {
    pub kernel_ns: i64,
    pub kernel_count: u64,
    pub memcpy_ns: i64,
    pub memcpy_count: u64,
    pub memset_ns: i64,
    pub memset_count: u64,
    pub categories: Vec<CategoryTime>,
    pub communication_share: f64,
}

#[derive(Debug, Serialize, Clone)]
pub struct CategoryTime {
    pub category: &'static str,
    pub time_ns: i64,
    pub count: u64,
    /// Share of the kernel time of the process (or of the export, in `totals`).
    pub share: f64,
}

#[derive(Debug, Serialize)]
pub struct Process {
    pub global_pid: i64,
    pub pid: i64,
    pub name: Option<String>,
    /// Devices the process ran GPU work on.
    pub devices: Vec<i64>,
    /// First GPU operation start and last GPU operation end.
    pub first_ns: i64,
    pub last_ns: i64,
    pub kernel_ns: i64,
    pub kernel_count: u64,
    pub memcpy_ns: i64,
    pub memcpy_count: u64,
    pub memset_ns: i64,
    pub memset_count: u64,
    pub categories: Vec<CategoryTime>,
    pub communication: Communication,
    pub overlap: Overlap,
    /// The process's kernels by total time (the `--top` largest).
    pub kernels: Vec<KernelRow>,
    /// NVTX ranges of this process that launched GPU work or were open at all, by inclusive time.
    pub nvtx: Vec<RangeRow>,
    /// GPU operation time launched outside every projected NVTX range.
    pub unattributed_ns: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
}

#[derive(Debug, Serialize)]
pub struct Communication {
    pub time_ns: i64,
    pub count: u64,
    /// Communication kernel time over all kernel time of the process.
    pub share_of_kernel_time: f64,
    pub by_op: Vec<CommRow>,
}

#[derive(Debug, Serialize)]
pub struct CommRow {
    pub op: &'static str,
    pub time_ns: i64,
    pub count: u64,
}

/// How much communication runs while compute runs, per process (summed over its devices).
#[derive(Debug, Serialize, Default)]
pub struct Overlap {
    /// Length of the union of communication kernel intervals.
    pub communication_ns: i64,
    /// Length of the union of all other kernel intervals.
    pub compute_ns: i64,
    /// Communication time during which some compute kernel ran on the same device.
    pub hidden_ns: i64,
    /// Communication time with no compute running: `communication_ns - hidden_ns`.
    pub exposed_ns: i64,
    /// `hidden_ns / communication_ns` (0 when there is no communication).
    pub hidden_share: f64,
}

#[derive(Debug, Serialize, Clone)]
pub struct KernelRow {
    pub name: String,
    pub category: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm_op: Option<&'static str>,
    #[serde(flatten)]
    pub stats: Summary,
    /// Share of the kernel time of the scope (process, or export for `kernel_summary`).
    pub share: f64,
}

#[derive(Debug, Serialize)]
pub struct RangeRow {
    /// The range text (`textId` string or `text`).
    pub name: String,
    /// The NVTX domain name ("" for the default domain).
    pub domain: String,
    /// The name as `nsys stats` prints it: `domain:text`.
    pub nsys_name: String,
    pub style: &'static str,
    pub instances: u64,
    pub cpu_ns: i64,
    pub inclusive_ns: i64,
    pub exclusive_ns: i64,
    /// Inclusive GPU time per category (kernel categories, then `memcpy` and `memset`).
    pub inclusive_by_category: Vec<ClassTime>,
    pub proj: ProjStats,
}

#[derive(Debug, Serialize)]
pub struct ClassTime {
    pub category: &'static str,
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
    pub style: &'static str,
    #[serde(flatten)]
    pub proj: ProjStats,
}

#[derive(Debug, Serialize)]
pub struct Note {
    pub kind: &'static str,
    pub count: u64,
    pub message: String,
}

/// Per-category busy time in equal buckets over `[start_ns, end_ns)`, for the HTML timeline.
#[derive(Debug, Serialize)]
pub struct Timeline {
    pub start_ns: i64,
    pub end_ns: i64,
    pub buckets: usize,
    /// One row per category: (category, busy ns per bucket).
    pub rows: Vec<(String, Vec<i64>)>,
}
