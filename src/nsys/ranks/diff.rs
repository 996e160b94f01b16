//! Before and after (`--diff`): two runs, process by process and stage by stage, the change of
//! exposed communication and of chunk time in each run's own window; with `--gate PCT`, the
//! figures handed to `crate::gate::judge` (the one gate every reader shares).
//!
//! Processes pair by the rank the setup range names; without one (an export without the
//! trainer's ranges) by the GPU they ran on and their order on it. What the gate compares
//! depends on what both runs have:
//! - DualPipeV chunk ranges: per rank, the exposed communication of each stage and the chunk time;
//! - none: per process, its exposed communication, communication and compute over the whole
//!   capture (the report's `overlap`), which every export has;
//! - one run with them, one without: nothing comparable, the gate is refused.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::findings::{Unit, Where};
use crate::gate::{Gate, Outcome, Paired, change_percent, judge};
use crate::mesh::Mesh;
use crate::nsys::ranks::RankView;
use crate::nsys::ranks::figures::StageRow;

/// One run as the comparison reads it.
pub struct Run<'a> {
    pub window: &'a str,
    pub files: Vec<String>,
    pub views: &'a [RankView],
}

pub const SCHEMA: &str = "instrument.nsys.diff/1";

#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub files: Vec<String>,
    pub processes: u64,
    /// Processes with DualPipeV chunk (window) ranges.
    pub with_chunk_ranges: u64,
}

/// A figure before and after; `change` as people read it (`+25.0%`, `new`).
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub before: f64,
    pub after: f64,
    pub delta: f64,
    pub change: String,
}

impl Change {
    fn new(before: f64, after: f64) -> Change {
        Change {
            before,
            after,
            delta: after - before,
            change: change_percent(before, after),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct StageDiff {
    pub stage: String,
    pub exposed_ns: Change,
    pub comm_ns: Change,
    pub overlap: Change,
}

#[derive(Debug, Clone, Serialize)]
pub struct RankDiff {
    /// `rank 5 (pp 1, ep 1)`, or `process on GPU 1` where the mesh is unknown.
    pub label: String,
    pub rank: Option<u64>,
    pub mesh: Option<Mesh>,
    /// Median chunk length.
    pub chunk_ns: Change,
    /// The window's figures (communication streams).
    pub exposed_ns: Change,
    pub comm_ns: Change,
    pub compute_ns: Change,
    /// The whole capture's (the report's `overlap` of the process).
    pub process_exposed_ns: Change,
    pub process_comm_ns: Change,
    pub process_compute_ns: Change,
    pub stages: Vec<StageDiff>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    pub schema: &'static str,
    pub window: String,
    pub before: Side,
    pub after: Side,
    /// `chunk-ranges` (both runs have them: stages and chunk time compared) or `processes`
    /// (neither: the whole-capture figures of each process compared) or `mixed` (refused).
    pub compared_by: &'static str,
    pub ranks: Vec<RankDiff>,
    /// Processes of one run that the other has not.
    pub only_before: Vec<String>,
    pub only_after: Vec<String>,
    /// With `--gate`: the gate's verdict and its figures, largest growth first.
    pub gate: Option<Outcome>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Rank(u64),
    /// Export index, the first GPU the process ran on (`i64::MAX` for none) and its order
    /// among that export's processes on that GPU, where no rank is known.
    Gpu(usize, i64, usize),
}

struct Keyed<'a> {
    key: Key,
    label: String,
    place: Where,
    view: &'a RankView,
}

fn keyed(views: &[RankView]) -> Vec<Keyed<'_>> {
    let many_exports = views.iter().any(|v| v.export > 0);
    let mut out: Vec<Keyed> = Vec::new();
    for p in views {
        let (key, label, place) = match (p.rank, &p.mesh) {
            (Some(rank), m) => {
                let mesh = m.as_ref().map(Mesh::short).unwrap_or_default();
                let label = if mesh.is_empty() {
                    format!("rank {rank}")
                } else {
                    format!("rank {rank} ({mesh})")
                };
                (
                    Key::Rank(rank),
                    label,
                    Where::rank(rank as i64).with_mesh(mesh),
                )
            }
            _ => {
                let gpu = p.devices.first().copied().unwrap_or(i64::MAX);
                let order = out
                    .iter()
                    .filter(|k| matches!(k.key, Key::Gpu(e, g, _) if e == p.export && g == gpu))
                    .count();
                let mut label = match p.devices.first() {
                    Some(g) => format!("process on GPU {g}"),
                    None => "process without GPU work".to_string(),
                };
                if order > 0 {
                    label.push_str(&format!(" #{}", order + 1));
                }
                if many_exports {
                    label.push_str(&format!(" of export {}", p.export + 1));
                }
                let place = Where::default().at(label.clone());
                (Key::Gpu(p.export, gpu, order), label, place)
            }
        };
        out.push(Keyed {
            key,
            label,
            place,
            view: p,
        });
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

fn side(run: &Run) -> Side {
    Side {
        files: run.files.clone(),
        processes: run.views.len() as u64,
        with_chunk_ranges: run.views.iter().filter(|v| v.chunks.count > 0).count() as u64,
    }
}

fn stage_diffs(pb: &RankView, pa: &RankView) -> Vec<StageDiff> {
    let names: BTreeSet<&str> = pb
        .stages
        .iter()
        .chain(&pa.stages)
        .map(|s| s.stage.as_str())
        .collect();
    names
        .into_iter()
        .map(|n| {
            let get = |p: &RankView| p.stages.iter().find(|s| s.stage == n).cloned();
            let (sb, sa) = (get(pb), get(pa));
            let f = |s: &Option<StageRow>, g: fn(&StageRow) -> f64| s.as_ref().map_or(0.0, g);
            StageDiff {
                stage: n.to_string(),
                exposed_ns: Change::new(
                    f(&sb, |s| s.exposed_ns as f64),
                    f(&sa, |s| s.exposed_ns as f64),
                ),
                comm_ns: Change::new(f(&sb, |s| s.comm_ns as f64), f(&sa, |s| s.comm_ns as f64)),
                overlap: Change::new(f(&sb, |s| s.overlap), f(&sa, |s| s.overlap)),
            }
        })
        .collect()
}

/// `pp=2 dp=1 cp=2 ep=2`: the sizes of a run's mesh (its first rank's).
fn shape(views: &[RankView]) -> Option<String> {
    let m = views.iter().find_map(|v| v.mesh.as_ref())?;
    Some(
        m.axes
            .iter()
            .map(|a| format!("{}={}", a.name, a.size))
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// `rank 7, rank 8 and 2 more`.
fn some_of(v: &[String]) -> String {
    match v.len() {
        0..=3 => v.join(", "),
        n => format!("{} and {} more", v[..3].join(", "), n - 3),
    }
}

/// What makes the two runs not comparable as a whole (each refuses the gate).
fn refusals(before: &Run, after: &Run, only_b: &[String], only_a: &[String]) -> Vec<String> {
    let mut why = Vec::new();
    let (sb, sa) = (side(before), side(after));
    match (sb.with_chunk_ranges > 0, sa.with_chunk_ranges > 0) {
        (true, false) | (false, true) => {
            let (with, without) = if sb.with_chunk_ranges > 0 {
                ("before", "after")
            } else {
                ("after", "before")
            };
            why.push(format!(
                "the {with} run has DualPipeV chunk ranges, the {without} run has none: \
                 runs of different kinds"
            ));
        }
        _ => {}
    }
    if let (Some(b), Some(a)) = (shape(before.views), shape(after.views))
        && b != a
    {
        why.push(format!("different run shapes: before {b}, after {a}"));
    }
    if !only_b.is_empty() {
        why.push(format!("only in the before run: {}", some_of(only_b)));
    }
    if !only_a.is_empty() {
        why.push(format!("only in the after run: {}", some_of(only_a)));
    }
    if before.views.is_empty() || after.views.is_empty() {
        why.push("a run without any process".into());
    }
    why
}

pub fn diff(before: &Run, after: &Run, gate: Option<Gate>) -> Diff {
    let b = keyed(before.views);
    let a = keyed(after.views);
    let chunked = side(before).with_chunk_ranges > 0 && side(after).with_chunk_ranges > 0;
    let mixed = (side(before).with_chunk_ranges > 0) != (side(after).with_chunk_ranges > 0);
    let mut ranks = Vec::new();
    let mut figures: Vec<Paired> = Vec::new();
    let find = |v: &[Keyed], k: &Key| v.iter().position(|x| &x.key == k);
    for kb in &b {
        let Some(j) = find(&a, &kb.key) else { continue };
        let (pb, pa) = (kb.view, a[j].view);
        let stages = stage_diffs(pb, pa);
        let chunk = Change::new(pb.chunks.median_ns, pa.chunks.median_ns);
        let ch = |b: i64, a: i64| Change::new(b as f64, a as f64);
        let (wb, wa) = (&pb.whole, &pa.whole);
        let pair = |place: Where, figure: &str, c: &Change| Paired {
            place,
            figure: figure.into(),
            unit: Unit::Ns,
            before: c.before,
            after: c.after,
        };
        let row = RankDiff {
            label: kb.label.clone(),
            rank: pb.rank,
            mesh: pb.mesh.clone(),
            chunk_ns: chunk,
            exposed_ns: ch(pb.totals.exposed_ns, pa.totals.exposed_ns),
            comm_ns: ch(pb.totals.comm_ns, pa.totals.comm_ns),
            compute_ns: ch(pb.totals.compute_ns, pa.totals.compute_ns),
            process_exposed_ns: ch(wb.exposed_ns, wa.exposed_ns),
            process_comm_ns: ch(wb.comm_ns, wa.comm_ns),
            process_compute_ns: ch(wb.compute_ns, wa.compute_ns),
            stages,
        };
        if chunked {
            for s in &row.stages {
                let at = kb.place.clone().at(s.stage.clone());
                figures.push(pair(at, "exposed communication", &s.exposed_ns));
            }
            figures.push(pair(kb.place.clone(), "chunk time", &row.chunk_ns));
        } else if !mixed {
            // Without the trainer's ranges, what every export has: the process's own unions.
            let p = &kb.place;
            figures.push(pair(
                p.clone(),
                "exposed communication",
                &row.process_exposed_ns,
            ));
            figures.push(pair(p.clone(), "communication", &row.process_comm_ns));
            figures.push(pair(p.clone(), "compute", &row.process_compute_ns));
        }
        ranks.push(row);
    }
    let only = |x: &[Keyed], y: &[Keyed]| -> Vec<String> {
        x.iter()
            .filter(|e| find(y, &e.key).is_none())
            .map(|e| e.label.clone())
            .collect()
    };
    let (only_before, only_after) = (only(&b, &a), only(&a, &b));
    let gate = gate.map(|g| {
        judge(
            g,
            figures,
            refusals(before, after, &only_before, &only_after),
        )
    });
    Diff {
        schema: SCHEMA,
        window: before.window.to_string(),
        before: side(before),
        after: side(after),
        compared_by: if chunked {
            "chunk-ranges"
        } else if mixed {
            "mixed"
        } else {
            "processes"
        },
        only_before,
        only_after,
        ranks,
        gate,
    }
}
