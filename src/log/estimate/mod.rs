//! `instrument log --estimate`: the checkout's own memory estimator beside what the run
//! printed. The estimator (pithtrain's `tools/memory_estimator`) simulates the pipeline
//! schedule for the run's shape and each profiled pipeline rank; each rank's measured
//! figures are put against its estimate (static memory, the peak of model tensors,
//! non-PyTorch memory, the device total), with the first schedule point where the measured
//! timeline leaves the estimated one.
//!
//! - `table`: where the estimator is, what it takes, which event each print reads (data);
//! - `run`: finding the checkout and Python, running the driver;
//! - `model`: the estimate as data (in the report's JSON); `render`: as text and HTML.
//!
//! An estimate that cannot be made (no run shape printed, no estimator, no Python, a model
//! config it cannot read) is one line in the report, which is otherwise the same.

use std::collections::BTreeMap;
use std::path::Path;

use super::model::{RankReport, Report};
use crate::mesh::Label;

/// Where measured and estimated differ by more than this per cent of the estimated peak, the
/// timeline leaves the estimate: `log --estimate-tolerance`'s default, and `report
/// --estimate`'s.
pub const DEFAULT_TOLERANCE_PERCENT: f64 = 5.0;

pub mod model;
pub mod render;
pub mod run;
pub mod table;

pub use model::*;
use run::Simulated;
use table::Table;

/// Why there is no estimate; each says it in one line.
#[derive(Debug, thiserror::Error)]
pub enum EstimateError {
    #[error(
        "no rank printed the run's shape (the `run |` line of rule 7.run-shape), which the estimate is made for: these prints come from an instrumentation without it; `instrument add` again"
    )]
    NoShape,
    #[error("the run's shape lacks {0}, which the estimator needs")]
    ShapeLacks(String),
    #[error(
        "{checkout} has no memory estimator ({marker} is not there){}",
        since.as_ref().map(|s| format!(": it came with {s}")).unwrap_or_default()
    )]
    NoEstimator {
        checkout: String,
        marker: String,
        since: Option<String>,
    },
    #[error(
        "no memory estimator found ({marker}): not in a folder above the model path {model}, nor in {cwd} or above it; pass --root CHECKOUT"
    )]
    NotFound {
        model: String,
        cwd: String,
        marker: String,
    },
    #[error(
        "the run's model {model} is not a config file in {checkout} (nor a folder with {in_folder}): the estimator reads the model's config.json"
    )]
    NoModelConfig {
        model: String,
        checkout: String,
        in_folder: String,
    },
    #[error("no Python (python3 or python on PATH) to run the estimator")]
    NoPython,
    #[error("the estimator gave no estimate: {0}")]
    Driver(String),
}

/// The estimate for `report`'s ranks. `root`: the checkout (`--root`), else found from the
/// run's model path or the current folder.
pub fn estimate(report: &Report, root: Option<&Path>, tolerance_percent: f64) -> EstimateReport {
    let table = Table::embedded();
    let mut out = EstimateReport {
        estimator: format!("{} ({})", table.name, table.package),
        unavailable: None,
        checkout: None,
        found_by: None,
        model_config: None,
        inputs: None,
        tolerance_percent,
        ranks: Vec::new(),
    };
    if let Err(e) = fill(&mut out, &table, report, root) {
        out.unavailable = Some(e.to_string());
        out.ranks.clear();
    }
    out
}

fn fill(
    out: &mut EstimateReport,
    table: &Table,
    report: &Report,
    root: Option<&Path>,
) -> Result<(), EstimateError> {
    let label = run_shape(report)?;
    let keys = &table.shape;
    let model = label
        .text(&keys.model)
        .ok_or_else(|| EstimateError::ShapeLacks(format!("`{}=`", keys.model)))?;
    let mesh = label.mesh();
    let size = |axis: &str| {
        mesh.get(axis)
            .map(|(_, s)| u64::from(s))
            .ok_or_else(|| EstimateError::ShapeLacks(format!("the mesh axis `{axis}`")))
    };
    let int = |key: &str| {
        label
            .int(key)
            .ok_or_else(|| EstimateError::ShapeLacks(format!("`{key}=`")))
    };
    let parallel = Parallel {
        pp_size: size(&keys.pp)?,
        ep_size: size(&keys.ep)?,
        dp_size: size(&keys.dp)?,
        cp_size: size(&keys.cp)?,
        micro_batch_size: int(&keys.micro_batch_size)?,
        global_batch_size: int(&keys.global_batch_size)?,
        sequence_length: int(&keys.sequence_length)?,
    };
    let world = int(&keys.world)?;
    let (checkout, found_by) =
        run::find_checkout(root, &model, &table.marker, table.since.as_deref())?;
    out.checkout = Some(checkout.display().to_string());
    out.found_by = Some(found_by);
    let config = run::model_config(&checkout, &model, &table.config_in_folder)?;
    out.model_config = Some(config.display().to_string());
    out.inputs = Some(Inputs {
        parallel: parallel.clone(),
        world,
        fragmentation: table.fragmentation,
    });
    // One simulation per pipeline rank among the profiled ranks.
    let pp_of = |r: &RankReport| {
        r.mesh
            .as_ref()
            .and_then(|m| m.get(&keys.pp))
            .map(|(p, _)| i64::from(p))
            .or(r.pp_rank)
    };
    let mut pp_ranks: Vec<i64> = report.ranks.iter().filter_map(pp_of).collect();
    pp_ranks.sort();
    pp_ranks.dedup();
    let python = run::python()?;
    let checkout_text = checkout.display().to_string();
    let config_text = config.display().to_string();
    let simulated = run::simulate(
        &python,
        &run::Request {
            root: &checkout_text,
            package: &table.package,
            model: &config_text,
            fragmentation: table.fragmentation,
            parallel,
            pp_ranks,
        },
    )?;
    let by_pp: BTreeMap<i64, &Simulated> = simulated.iter().map(|s| (s.pp_rank, s)).collect();
    for r in &report.ranks {
        let Some(pp) = pp_of(r) else { continue };
        let Some(sim) = by_pp.get(&pp) else { continue };
        out.ranks.push(compare(
            table,
            r,
            pp,
            sim,
            out.tolerance_percent,
            table.fragmentation,
        ));
    }
    Ok(())
}

/// The run's shape: the first rank's that printed one (the ranks of a report are of one run).
fn run_shape(report: &Report) -> Result<Label, EstimateError> {
    report
        .ranks
        .iter()
        .find_map(|r| r.run.as_ref().and_then(|s| Label::parse(&s.label)))
        .ok_or(EstimateError::NoShape)
}

fn percent(diff: i64, of: i64) -> Option<f64> {
    (of != 0).then(|| (diff as f64 / of as f64 * 1000.0).round() / 10.0)
}

fn figure(figure: &'static str, compares: String, measured: Option<i64>, estimated: i64) -> Figure {
    Figure {
        figure,
        compares,
        measured_bytes: measured,
        estimated_bytes: estimated,
        diff_bytes: measured.map(|m| m - estimated),
        diff_percent: measured.and_then(|m| percent(m - estimated, estimated)),
    }
}

fn compare(
    table: &Table,
    r: &RankReport,
    pp: i64,
    sim: &Simulated,
    tolerance_percent: f64,
    fragmentation: f64,
) -> RankEstimate {
    let step = r.step.as_ref();
    let points = step.map(|s| s.points.as_slice()).unwrap_or(&[]);
    let mut timeline = Vec::new();
    let mut without = 0;
    // Each print's event index, for naming the print at the estimated peak.
    let mut indices: Vec<(usize, &str)> = Vec::new();
    for p in points {
        let Some(i) = table
            .locate(&p.label)
            .and_then(|w| Table::index(&w, &sim.events))
        else {
            without += 1;
            continue;
        };
        let (event, estimated) = &sim.events[i];
        indices.push((i, &p.label));
        timeline.push(TimelinePoint {
            point: p.label.clone(),
            event: event.clone(),
            measured_bytes: p.allocated_bytes,
            estimated_bytes: *estimated,
            diff_bytes: p.allocated_bytes - estimated,
        });
    }
    let tolerance_bytes = ((sim.peak_model_bytes as f64 * tolerance_percent / 100.0) as i64)
        .max(r.resolution_bytes * 3 / 2);
    let leaves_at = timeline
        .iter()
        .find(|t| t.diff_bytes.abs() > tolerance_bytes)
        .cloned();
    let largest_difference = timeline.iter().max_by_key(|t| t.diff_bytes.abs()).cloned();
    let first_point = points.first();
    let schedule_peak = step.map(|s| &s.schedule_peak);
    let figures = vec![
        figure(
            "static",
            format!(
                "static memory (parameters, sharded copies, optimizer state) against \"{}\"",
                first_point.map(|p| p.label.as_str()).unwrap_or("the first point")
            ),
            first_point.map(|p| p.allocated_bytes),
            sim.static_bytes,
        ),
        figure(
            "peak",
            "the peak of model tensors (static + dynamic at the peak event) against the step's peak allocated"
                .into(),
            step.map(|s| s.peak.allocated_bytes),
            sim.peak_model_bytes,
        ),
        figure(
            "non_pytorch",
            format!(
                "non-PyTorch memory against the measured at {}",
                schedule_peak
                    .map(|p| format!("\"{}\"", p.label))
                    .unwrap_or_else(|| "the schedule's peak".into())
            ),
            step.and_then(|s| s.non_pytorch.as_ref())
                .and_then(|n| n.at_schedule_peak_bytes.or(Some(n.max_bytes))),
            sim.non_pytorch_bytes,
        ),
        figure(
            "device_total",
            format!(
                "the device total ({:.0}% fragmentation included) against the device memory in use at the schedule's peak",
                fragmentation * 100.0
            ),
            step.and_then(|s| s.device_in_use_at_schedule_peak_bytes),
            sim.peak_total_bytes,
        ),
    ];
    let estimated_peak_point = indices
        .iter()
        .find(|(i, _)| *i >= sim.peak_index)
        .map(|(_, l)| l.to_string());
    RankEstimate {
        rank: r.rank,
        pp_rank: pp,
        mesh: r.mesh.clone(),
        figures,
        estimated_peak_event: sim.peak_event.clone(),
        estimated_peak_point,
        timeline,
        points_without_estimate: without,
        leaves_at,
        tolerance_bytes,
        largest_difference,
        events: sim
            .events
            .iter()
            .enumerate()
            .map(
                |(i, (name, bytes))| super::estimate::model::EstimatedEvent {
                    name: name.clone(),
                    model_bytes: *bytes,
                    components: sim.components.get(i).cloned().unwrap_or_default(),
                },
            )
            .collect(),
    }
}
