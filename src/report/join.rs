//! Per rank: its prints' schedule points beside its step snapshot's schedule events, and what
//! that shows (`crate::findings`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{ReportError, SnapshotFile, file_name};
use crate::exit::{Class, Classify};
use crate::findings::{Figure, Finding, Severity, Unit, Where};
use crate::log::estimate::table::Table;
use crate::log::model::{RankReport, Report as LogReport};
use crate::snapshot::SnapshotError;
use crate::snapshot::schedule::ScheduleMemory;
use crate::snapshot::schedule::memory::Amount;
use crate::snapshot::schedule::stages::StageMemory;

/// One schedule event of a rank.
#[derive(Debug, Clone, Serialize)]
pub struct EventRow {
    pub event: String,
    pub step: u8,
    /// What the print that reads this event's end read, where one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub printed_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub printed_label: Option<String>,
    pub snapshot_start_bytes: u64,
    pub snapshot_end_bytes: u64,
    pub snapshot_peak_bytes: u64,
    /// The snapshot's live memory at the event's end by category (the conventions table's,
    /// `snapshot/marks/conventions.toml`), largest first; sums to `snapshot_end_bytes`.
    pub snapshot_end_by_category: Vec<Amount>,
    pub open: bool,
    /// With `--estimate`: the estimator's model tensors after this event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_bytes: Option<i64>,
    /// Measured and estimated at the event's end, by the snapshot's categories that the
    /// conventions table maps onto the estimator's buckets (`[estimator]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<Component>,
}

/// One category at an event's end, measured (live in the snapshot) beside estimated (the
/// estimator's buckets the table maps it to).
#[derive(Debug, Clone, Serialize)]
pub struct Component {
    pub category: String,
    pub measured_bytes: u64,
    pub estimated_bytes: i64,
    /// The estimator's buckets summed.
    pub buckets: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RankRow {
    pub rank: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mesh: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pp_rank: Option<i64>,
    /// The step snapshot joined with the rank's prints (none: listed as a finding).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_snapshot: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oom_snapshot: Option<String>,
    /// The highest the prints read in the profiled step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub printed_peak_bytes: Option<i64>,
    /// The highest the snapshot's schedule reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_peak_bytes: Option<u64>,
    /// The snapshot's schedule, event by event; empty without marks.
    pub events: Vec<EventRow>,
    /// From the run's Nsight Systems exports: the rank's communication per DualPipeV stage in
    /// its steady-state window (empty without exports).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageComm>,
    /// From the step snapshot's trace: the memory allocated inside each layer stage, by the
    /// stage functions on the allocations' Python frames (`stages` is joined by stage name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage_memory: Option<StageMemory>,
}

/// A stage's communication as `nsys report` reads it (pithtrain's own definitions).
#[derive(Debug, Clone, Serialize)]
pub struct StageComm {
    pub stage: String,
    pub comm_ns: i64,
    pub exposed_ns: i64,
    /// The hidden share of its communication (0..1).
    pub hidden: f64,
}

fn mesh_of(r: &RankReport) -> Option<String> {
    crate::log::fmt::place(&r.mesh, r.pp_rank)
}

fn place(rank: i64, mesh: &Option<String>) -> Where {
    let w = Where::rank(rank);
    match mesh {
        Some(m) => w.with_mesh(m.clone()),
        None => w,
    }
}

/// What one read of a step snapshot gives: its schedule (with marks) and its memory per stage.
type StepRead = (Option<ScheduleMemory>, Option<StageMemory>);

/// The schedule of a step snapshot and its memory per layer stage, read on the workers
/// (`crate::par`) in one read of each file: only the per-event and per-stage figures are kept,
/// so memory is bounded by the workers, not the number of files.
fn schedules(files: &[&SnapshotFile]) -> Vec<Result<StepRead, SnapshotError>> {
    crate::par::map(
        files,
        |f| std::fs::metadata(&f.path).map_or(0, |m| m.len() as usize),
        |f| {
            let opts = crate::snapshot::Options::default();
            let snap = crate::snapshot::read::load(std::path::Path::new(&f.path), usize::MAX)?;
            let mut a = crate::snapshot::analysis::Analysis::new(&snap, &opts).map_err(|e| {
                SnapshotError::UnknownDevice {
                    path: f.path.clone(),
                    device: e.device,
                    available: e.available,
                }
            })?;
            let device = a.device;
            let conv = crate::snapshot::marks::Conventions::builtin();
            let s = match &a.trace {
                Some(t) => (
                    crate::snapshot::schedule::read(&snap, device, t, &mut a.attr),
                    Some(crate::snapshot::schedule::stages::read(
                        conv,
                        &snap,
                        device,
                        t,
                        &mut a.attr,
                    )),
                ),
                None => (None, None),
            };
            Ok(s)
        },
    )
}

pub fn join(
    logs: &LogReport,
    snapshots: &[SnapshotFile],
) -> Result<(Vec<RankRow>, Vec<Finding>), ReportError> {
    let table = Table::embedded();
    let mut findings = Vec::new();
    // The step each rank's prints say it profiled: the step in the file name it wrote.
    let printed_step = |r: &RankReport| -> Option<i64> {
        r.files_written
            .iter()
            .filter_map(|f| super::recipe_name(&file_name(&f.path)))
            .find_map(|(_, s)| s)
    };
    // Snapshots of ranks the logs do not hold, or of another step than the logs': refused.
    for s in snapshots.iter().filter(|s| s.step.is_some()) {
        match logs.ranks.iter().find(|r| r.rank == s.rank) {
            None if !logs.ranks.is_empty() => {
                let held: Vec<String> = logs.ranks.iter().map(|r| r.rank.to_string()).collect();
                return Err(ReportError::OtherRunsRank {
                    path: s.path.clone(),
                    rank: s.rank,
                    held: held.join(", "),
                });
            }
            Some(r) => {
                if let (Some(want), Some(got)) = (printed_step(r), s.step)
                    && want != got
                {
                    return Err(ReportError::OtherStep {
                        path: s.path.clone(),
                        step: got,
                        rank: s.rank,
                        printed: want,
                    });
                }
            }
            None => {}
        }
    }
    let steps: Vec<&SnapshotFile> = snapshots.iter().filter(|s| s.step.is_some()).collect();
    let mut read = schedules(&steps);
    // A snapshot the system would not read fails the report (exit 3); one that is not what a
    // snapshot should be is a finding of its rank, and the other ranks are reported.
    if let Some(k) = read
        .iter()
        .position(|r| matches!(r, Err(e) if e.class() != Class::User))
        && let Err(e) = read.swap_remove(k)
    {
        return Err(e.into());
    }
    let mut rows = Vec::new();
    let mut ranks: Vec<i64> = logs.ranks.iter().map(|r| r.rank).collect();
    for s in &steps {
        if !ranks.contains(&s.rank) {
            ranks.push(s.rank);
        }
    }
    ranks.sort_unstable();
    for rank in ranks {
        let log = logs.ranks.iter().find(|r| r.rank == rank);
        let mesh = log.and_then(mesh_of);
        let step_file = steps.iter().position(|s| s.rank == rank);
        let oom_file = snapshots
            .iter()
            .find(|s| s.rank == rank && s.step.is_none())
            .map(|s| s.path.clone());
        let stage_memory = step_file.and_then(|i| read[i].as_ref().ok()?.1.clone());
        let schedule = match step_file {
            Some(i) => match &read[i] {
                Ok(s) => s.0.clone(),
                Err(e) => {
                    findings.push(
                        Finding::new(Severity::Error, "snapshot-unreadable", e.to_string())
                            .at(place(rank, &mesh).in_file(steps[i].path.clone(), None)),
                    );
                    None
                }
            },
            None => None,
        };
        if log.is_some() && step_file.is_none() {
            findings.push(
                Finding::new(
                    Severity::Warning,
                    "no-step-snapshot",
                    "printed, but its step snapshot is in none of the folders",
                )
                .at(place(rank, &mesh))
                .next(
                    "copy memory_snapshot_rank{R}_step{S}.pickle from the host the rank ran on \
                     (the log names it) into the run's folder",
                ),
            );
        }
        if let (Some(i), None) = (step_file, &schedule)
            && read[i].is_ok()
        {
            findings.push(
                Finding::new(
                    Severity::Notice,
                    "no-schedule-marks",
                    "its step snapshot has no schedule marks: memory per event needs them",
                )
                .at(place(rank, &mesh).in_file(steps[i].path.clone(), None))
                .next("add the prints again with this version (the schedule marks are a group)"),
            );
        }
        let mut events: Vec<EventRow> = Vec::new();
        if let Some(s) = &schedule {
            let chunk: Vec<&crate::snapshot::schedule::EventMemory> =
                s.events.iter().filter(|e| e.op != "stage").collect();
            events = chunk
                .iter()
                .map(|e| EventRow {
                    event: e.name.clone(),
                    step: e.step,
                    printed_bytes: None,
                    printed_label: None,
                    snapshot_start_bytes: e.live_start_bytes,
                    snapshot_end_bytes: e.live_end_bytes,
                    snapshot_peak_bytes: e.peak_bytes,
                    snapshot_end_by_category: e.live_end.clone(),
                    open: e.open,
                    estimated_bytes: None,
                    components: Vec::new(),
                })
                .collect();
            if let Some(est) = estimate_of(logs, rank) {
                beside_estimate(&chunk, est, &mut events);
                leaves_estimate(rank, &mesh, est.tolerance_bytes, &events, &mut findings);
            }
            // The estimator table says which event's end state each print reads (the
            // estimator's state is after each event); two prints at one state keep the first.
            let names: Vec<(String, i64)> = chunk.iter().map(|e| (e.name.clone(), 0)).collect();
            if let Some(step) = log.and_then(|l| l.step.as_ref()) {
                for p in &step.points {
                    let Some(i) = table
                        .locate(&p.label)
                        .and_then(|w| Table::index(&w, &names))
                    else {
                        continue;
                    };
                    let row = &mut events[i];
                    if row.printed_bytes.is_none() {
                        row.printed_bytes = Some(p.allocated_bytes);
                        row.printed_label = Some(p.label.clone());
                    }
                }
            }
            if let Some(l) = log {
                disagreements(rank, &mesh, l.resolution_bytes, &events, &mut findings);
                let path = step_file.map_or("", |i| steps[i].path.as_str());
                peak_between_prints(rank, &mesh, l, s, path, &mut findings);
            }
        }
        rows.push(RankRow {
            rank,
            pp_rank: log.and_then(|l| l.pp_rank),
            mesh,
            step_snapshot: step_file.map(|i| steps[i].path.clone()),
            oom_snapshot: oom_file,
            printed_peak_bytes: log
                .and_then(|l| l.step.as_ref())
                .map(|s| s.peak.allocated_bytes),
            snapshot_peak_bytes: schedule
                .as_ref()
                .and_then(|s| s.peak_event.map(|i| s.events[i].peak_bytes)),
            events,
            stages: Vec::new(),
            stage_memory,
        });
    }
    crate::findings::rank(&mut findings);
    Ok((rows, findings))
}

/// The first event where the print and the snapshot disagree beyond the prints' rounding (and
/// the allocator's: the prints read block sizes, the trace requested sizes), as a finding.
fn disagreements(
    rank: i64,
    mesh: &Option<String>,
    resolution: i64,
    events: &[EventRow],
    out: &mut Vec<Finding>,
) {
    let mut compared = 0;
    for e in events {
        let Some(p) = e.printed_bytes else {
            continue;
        };
        compared += 1;
        let s = e.snapshot_end_bytes as f64;
        let tolerance = 1.5 * resolution.max(1) as f64 + 0.02 * s.max(p as f64);
        if (p as f64 - s).abs() > tolerance {
            let cause = if (p as f64) > s {
                "the snapshot holds less than the prints read: its history started after memory \
                 was allocated that the trace does not see, or it is of another step or run"
            } else {
                "the snapshot holds more than the prints read: it is of another step or run, or \
                 the prints were rounded down"
            };
            out.push(
                Finding::new(
                    Severity::Warning,
                    "prints-and-snapshot-disagree",
                    format!(
                        "the print and the snapshot disagree at the end of {}",
                        e.event
                    ),
                )
                .at(place(rank, mesh).at(e.event.clone()))
                .figure(Figure::new(s, Unit::Bytes).against(p as f64, "printed"))
                .evidence(format!(
                    "`{}` printed {}",
                    e.printed_label.as_deref().unwrap_or(""),
                    Unit::Bytes.show(p as f64)
                ))
                .evidence(cause.to_string())
                .next("check that the snapshot is this run's and this step's (its name and time)"),
            );
            return;
        }
    }
    if compared == 0 && !events.is_empty() {
        out.push(
            Finding::new(
                Severity::Notice,
                "no-print-at-any-event",
                "none of its prints reads a schedule event the snapshot marks",
            )
            .at(place(rank, mesh)),
        );
    }
}

/// The schedule's peak inside an event, above every print of the step by more than their
/// rounding: the prints read the edges of the events, the snapshot what happens inside.
fn peak_between_prints(
    rank: i64,
    mesh: &Option<String>,
    log: &RankReport,
    s: &ScheduleMemory,
    path: &str,
    out: &mut Vec<Finding>,
) {
    let (Some(step), Some(i)) = (&log.step, s.peak_event) else {
        return;
    };
    let e = &s.events[i];
    let printed = step.peak.allocated_bytes as f64;
    let inside = e.peak_bytes as f64;
    if inside - printed > 1.5 * log.resolution_bytes.max(1) as f64 + 0.02 * inside {
        let mut f = Finding::new(
            Severity::Warning,
            "peak-between-prints",
            format!("the step's peak is inside {}, above every print", e.name),
        )
        .at(place(rank, mesh).at(e.name.clone()))
        .figure(Figure::new(inside, Unit::Bytes).against(printed, "the highest print"));
        if let Some(p) = &e.peak_by {
            f = f.evidence(format!(
                "made by a {} allocation ({}){}",
                Unit::Bytes.show(p.bytes as f64),
                p.category,
                p.site
                    .as_ref()
                    .map(|x| format!(" at {x}"))
                    .unwrap_or_default()
            ));
        }
        out.push(f.next(format!(
            "size the memory for the snapshot's peak, not the prints': `instrument snapshot \
             {path}` shows what was allocated inside the event"
        )));
    }
}

fn estimate_of(logs: &LogReport, rank: i64) -> Option<&crate::log::estimate::model::RankEstimate> {
    logs.estimate
        .as_ref()
        .and_then(|e| e.ranks.iter().find(|r| r.rank == rank))
}

/// The estimator's state after each marked event (by its exact name) and its buckets beside
/// the snapshot's categories, mapped by the conventions table.
fn beside_estimate(
    chunk: &[&crate::snapshot::schedule::EventMemory],
    est: &crate::log::estimate::model::RankEstimate,
    rows: &mut [EventRow],
) {
    let map = &crate::snapshot::marks::Conventions::builtin().estimator;
    for (row, e) in rows.iter_mut().zip(chunk) {
        let Some(ev) = est.events.iter().find(|x| x.name == e.name) else {
            continue;
        };
        row.estimated_bytes = Some(ev.model_bytes);
        // Categories that map onto the same buckets are one figure (what was there before
        // the history and what the step set up before its schedule are both static memory).
        let mut by_buckets: BTreeMap<Vec<String>, (Vec<String>, u64)> = BTreeMap::new();
        for (category, buckets) in map {
            let mut key = buckets.clone();
            key.sort();
            let measured = e
                .live_end
                .iter()
                .find(|a| &a.name == category)
                .map_or(0, |a| a.bytes);
            let slot = by_buckets.entry(key).or_default();
            slot.0.push(category.clone());
            slot.1 += measured;
        }
        for (buckets, (categories, measured)) in by_buckets {
            let present: Vec<&String> = buckets
                .iter()
                .filter(|b| ev.components.contains_key(*b))
                .collect();
            if present.is_empty() && measured == 0 {
                continue;
            }
            row.components.push(Component {
                category: categories.join(" + "),
                measured_bytes: measured,
                estimated_bytes: present.iter().map(|b| ev.components[*b]).sum(),
                buckets: present.iter().map(|b| b.to_string()).collect(),
            });
        }
    }
}

/// The first event where the measured memory leaves the estimate by more than its tolerance
/// (`log --estimate`'s), and the category that departs most there.
fn leaves_estimate(
    rank: i64,
    mesh: &Option<String>,
    tolerance: i64,
    rows: &[EventRow],
    out: &mut Vec<Finding>,
) {
    for e in rows {
        let Some(est) = e.estimated_bytes else {
            continue;
        };
        let measured = e.snapshot_end_bytes as i64;
        if (measured - est).abs() <= tolerance {
            continue;
        }
        let mut f = Finding::new(
            Severity::Warning,
            "leaves-estimate",
            format!(
                "the measurement leaves the estimate at the end of {}",
                e.event
            ),
        )
        .at(place(rank, mesh).at(e.event.clone()))
        .figure(Figure::new(measured as f64, Unit::Bytes).against(est as f64, "estimated"));
        if let Some(c) = e
            .components
            .iter()
            .max_by_key(|c| (c.measured_bytes as i64 - c.estimated_bytes).abs())
        {
            f = f.evidence(format!(
                "most in {}: {} measured, {} estimated ({})",
                c.category,
                Unit::Bytes.show(c.measured_bytes as f64),
                Unit::Bytes.show(c.estimated_bytes as f64),
                if c.buckets.is_empty() {
                    "no bucket of the estimator".to_string()
                } else {
                    c.buckets.join(" + ")
                }
            ));
        }
        out.push(f.evidence(format!(
            "tolerance {} (5% of the estimated peak, as `log --estimate`)",
            Unit::Bytes.show(tolerance as f64)
        )));
        return;
    }
}
