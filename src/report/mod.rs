//! `instrument report RUN_DIR...`: everything one run wrote, joined per rank and per schedule
//! event. The node logs say each rank's mesh coordinates and what its prints read at the
//! schedule's points; the rank's step snapshot (named as the recipe names it,
//! `memory_snapshot_rank{R}_step{S}.pickle`) says, when the run marked its schedule, the
//! memory live at each event's start and end and the peak inside it. At each event the report
//! sets the printed value beside the snapshot's, and says where they disagree beyond the
//! prints' rounding, and why that may be.
//!
//! - `join`   — the per-rank rows and their findings (which event each print reads is the
//!   estimator table's, `log/estimate/pithtrain.toml`: the print reads the state at the end of
//!   that event, as the estimator gives its state after each event);
//! - `stages` — per layer stage, nsys's exposed communication beside the snapshot's memory;
//! - `text`   — the text report; `html` — the page (a schedule strip per rank).
//!
//! A layer above the readers: it calls `log` and `snapshot`, never the other way.

pub mod diff;
pub mod html;
pub mod join;
pub mod stages;
pub mod text;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use join::{EventRow, RankRow};

pub const SCHEMA: &str = "instrument.report/1";

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A run folder (or file) given that is not there.
    #[error("{path}: no such file or folder")]
    NotThere { path: String },
    /// Folders that hold nothing a run writes.
    #[error(
        "{looked}: nothing a run writes: looked for node logs with the memory prints (*.log, \
         *.txt, *.out, *.err, stdout*, stderr*, also gzipped) and the recipe's snapshots \
         (memory_snapshot_rank{{R}}_step{{S}}.pickle, memory_snapshot_rank{{R}}.pickle)"
    )]
    NothingARunWrites { looked: String },
    /// A step snapshot of a rank none of the logs printed for.
    #[error(
        "{path}: a snapshot of rank {rank}, whose prints are in none of the logs (ranks {held}): \
         another run's? Give each run's folder on its own"
    )]
    OtherRunsRank {
        path: String,
        rank: i64,
        held: String,
    },
    /// A step snapshot of another step than the one its rank's prints profiled.
    #[error(
        "{path}: a snapshot of step {step}, but rank {rank}'s prints profiled step {printed}: \
         another run's, or a run with another --step"
    )]
    OtherStep {
        path: String,
        step: i64,
        rank: i64,
        printed: i64,
    },
    /// The logs could not be read; their reader's error keeps its class.
    #[error(
        "{source}; the report joins the snapshots found with the node logs: give the folder that holds them too"
    )]
    Logs {
        #[source]
        source: crate::log::LogError,
    },
    /// A snapshot the system would not read (a corrupt one is a finding instead).
    #[error(transparent)]
    Snapshot(#[from] crate::snapshot::SnapshotError),
}

impl crate::exit::Classify for ReportError {
    fn class(&self) -> crate::exit::Class {
        match self {
            ReportError::NotThere { .. }
            | ReportError::NothingARunWrites { .. }
            | ReportError::OtherRunsRank { .. }
            | ReportError::OtherStep { .. } => crate::exit::Class::User,
            ReportError::Logs { source } => source.class(),
            ReportError::Snapshot(e) => e.class(),
        }
    }
}

/// A snapshot the recipe wrote: `memory_snapshot_rank{R}_step{S}.pickle` (the profiled
/// step), `memory_snapshot_rank{R}.pickle` (at an out-of-memory error).
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotFile {
    pub path: String,
    pub rank: i64,
    /// The step of a step snapshot; `null` for the out-of-memory one.
    pub step: Option<i64>,
}

/// What the folders held.
#[derive(Debug, Default, Serialize)]
pub struct Inputs {
    pub logs: Vec<String>,
    pub snapshots: Vec<SnapshotFile>,
    /// Nsight Systems exports found (`instrument nsys report` reads them; this report lists
    /// them).
    pub nsys: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub findings: Vec<crate::findings::Finding>,
    pub inputs: Inputs,
    /// With `--estimate`: the estimator that ran and its inputs, or why there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimate: Option<EstimateSource>,
    pub ranks: Vec<RankRow>,
}

impl Report {
    /// What the report read, in one line (the text's first line, the page's subtitle).
    pub fn read_line(&self) -> String {
        format!(
            "{} log(s), {} snapshot(s), {} nsys export(s); {} rank(s)",
            self.inputs.logs.len(),
            self.inputs.snapshots.len(),
            self.inputs.nsys.len(),
            self.ranks.len()
        )
    }
}

#[derive(Debug, Serialize)]
pub struct EstimateSource {
    pub estimator: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// `memory_snapshot_rank3_step0.pickle` -> (3, Some(0)); `memory_snapshot_rank3.pickle` ->
/// (3, None).
pub fn recipe_name(name: &str) -> Option<(i64, Option<i64>)> {
    let rest = name
        .strip_prefix("memory_snapshot_rank")?
        .strip_suffix(".pickle")?;
    match rest.split_once("_step") {
        Some((r, s)) => Some((r.parse().ok()?, Some(s.parse().ok()?))),
        None => Some((rest.parse().ok()?, None)),
    }
}

/// The snapshots and exports under `dirs` (two levels down: a node's folder in the run's).
fn discover(dirs: &[PathBuf]) -> Result<Inputs, ReportError> {
    let mut inputs = Inputs::default();
    for d in dirs {
        if !d.exists() {
            return Err(ReportError::NotThere {
                path: d.display().to_string(),
            });
        }
        let walk = walkdir::WalkDir::new(d).max_depth(3).sort_by_file_name();
        for e in walk.into_iter().filter_map(Result::ok) {
            if !e.file_type().is_file() {
                continue;
            }
            let name = e.file_name().to_string_lossy();
            let path = e.path().display().to_string();
            if let Some((rank, step)) = recipe_name(&name) {
                inputs.snapshots.push(SnapshotFile { path, rank, step });
            } else if name.ends_with(".sqlite") {
                inputs.nsys.push(path);
            }
        }
    }
    Ok(inputs)
}

/// Read every run folder (or file) in `paths` and join what it holds per rank.
/// `estimate`: run the checkout's estimator (`root`, else found from the run) and set its state
/// at each event beside the measured one.
pub fn report(
    set: &crate::rules::RuleSet,
    paths: &[PathBuf],
    estimate: bool,
    root: Option<&Path>,
) -> Result<Report, ReportError> {
    let mut inputs = discover(paths)?;
    let looked = paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let nothing = || ReportError::NothingARunWrites {
        looked: looked.clone(),
    };
    let mut logs = match crate::log::read_all(set, paths, &crate::log::Options::default()) {
        Ok(l) => l,
        // Logs that are not there are nothing a run wrote; logs the system would not read
        // keep their class.
        Err(e)
            if inputs.snapshots.is_empty()
                && crate::exit::Classify::class(&e) == crate::exit::Class::User =>
        {
            return Err(nothing());
        }
        Err(source) => return Err(ReportError::Logs { source }),
    };
    inputs.logs = logs.inputs.iter().map(|i| i.file.name.clone()).collect();
    if logs.ranks.is_empty() && inputs.snapshots.is_empty() {
        return Err(nothing());
    }
    if estimate {
        crate::log::add_estimate(
            &mut logs,
            root,
            crate::log::estimate::DEFAULT_TOLERANCE_PERCENT,
        );
    }
    let (mut ranks, mut findings) = join::join(&logs, &inputs.snapshots)?;
    nsys_stages(&inputs.nsys, &mut ranks, &mut findings);
    crate::findings::rank(&mut findings);
    let estimate = logs.estimate.as_ref().map(|e| EstimateSource {
        estimator: e.estimator.clone(),
        checkout: e.checkout.clone(),
        unavailable: e.unavailable.clone(),
    });
    Ok(Report {
        schema: SCHEMA,
        findings,
        inputs,
        estimate,
        ranks,
    })
}

/// Each rank's exposed communication per DualPipeV stage, from the run's Nsight Systems
/// exports (the `nsys report` reading, its median steady-state window), beside its memory. An
/// export that cannot be read is a finding, not a failure of the report.
fn nsys_stages(
    exports: &[String],
    ranks: &mut [RankRow],
    findings: &mut Vec<crate::findings::Finding>,
) {
    if exports.is_empty() {
        return;
    }
    let paths: Vec<PathBuf> = exports.iter().map(PathBuf::from).collect();
    let opts = crate::nsys::analyze::Options::default();
    let doc = match crate::nsys::exports::report(&paths, &opts, "median") {
        Ok(d) => d,
        Err(e) => {
            findings.push(crate::findings::Finding::new(
                crate::findings::Severity::Notice,
                "nsys-not-read",
                format!("the Nsight Systems exports were not read: {e}"),
            ));
            return;
        }
    };
    for view in crate::nsys::exports::views(&doc.exports) {
        let Some(rank) = view.rank else { continue };
        if let Some(row) = ranks.iter_mut().find(|r| r.rank as u64 == rank) {
            // The same rank at another place in the mesh: another run's export, never joined.
            if let (Some(at), Some(m)) = (&row.mesh, &view.mesh)
                && *at != m.short()
            {
                findings.push(
                    crate::findings::Finding::new(
                        crate::findings::Severity::Warning,
                        "nsys-other-run",
                        format!(
                            "{} puts rank {rank} at {}, its prints at {at}: another run's \
                             export, not set beside this run",
                            file_name(&view.file),
                            m.short()
                        ),
                    )
                    .at(crate::findings::Where::rank(row.rank).with_mesh(at.clone())),
                );
                continue;
            }
            row.stages = view
                .stages
                .iter()
                .map(|s| join::StageComm {
                    stage: s.stage.clone(),
                    comm_ns: s.comm_ns,
                    exposed_ns: s.exposed_ns,
                    hidden: s.overlap,
                })
                .collect();
        }
    }
}

/// A path as the report shows it: its file name.
pub fn file_name(p: &str) -> String {
    Path::new(p)
        .file_name()
        .map_or(p.to_string(), |n| n.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_recipes_names() {
        use super::recipe_name;
        assert_eq!(
            recipe_name("memory_snapshot_rank14_step0.pickle"),
            Some((14, Some(0)))
        );
        assert_eq!(recipe_name("memory_snapshot_rank3.pickle"), Some((3, None)));
        assert_eq!(recipe_name("memory_snapshot_rankX.pickle"), None);
        assert_eq!(recipe_name("snapshot.pickle"), None);
    }
}
