//! Before and after (`--diff`): two runs, rank by rank (by the rank the setup range names; by
//! position where the mesh is unknown) and stage by stage, the change of exposed communication
//! and of chunk time in each run's own window; with `--gate PCT` (`crate::gate`), every figure
//! that grew by more than PCT per cent, named.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::gate::{Gate, change_percent};
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
    /// `rank 5 (pp 1, ep 1)`, or `process 2 of node1.sqlite` where the mesh is unknown.
    pub label: String,
    pub rank: Option<u64>,
    pub mesh: Option<Mesh>,
    /// Median chunk length.
    pub chunk_ns: Change,
    pub exposed_ns: Change,
    pub comm_ns: Change,
    pub compute_ns: Change,
    pub stages: Vec<StageDiff>,
}

/// A figure that grew by more than the gate allows.
#[derive(Debug, Clone, Serialize)]
pub struct Growth {
    pub label: String,
    pub rank: Option<u64>,
    /// `exposed_ns` (of `stage`) or `chunk_ns`.
    pub figure: &'static str,
    pub stage: Option<String>,
    pub before: f64,
    pub after: f64,
    pub change: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    pub schema: &'static str,
    pub window: String,
    pub before: Side,
    pub after: Side,
    /// `--gate` in per cent, `null` without one.
    pub gate: Option<f64>,
    pub ranks: Vec<RankDiff>,
    /// Processes of one run that the other has not.
    pub only_before: Vec<String>,
    pub only_after: Vec<String>,
    /// With `--gate`: what grew by more than it allows (the run fails the gate when not empty).
    pub grew: Vec<Growth>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Rank(u64),
    /// Export index and process index where the mesh is unknown.
    Position(usize, usize),
}

fn keyed(views: &[RankView]) -> Vec<(Key, String, &RankView)> {
    let mut out = Vec::new();
    for p in views {
        let (key, label) = match (p.rank, &p.mesh) {
            (Some(rank), Some(m)) if !m.is_empty() => {
                (Key::Rank(rank), format!("rank {rank} ({})", m.short()))
            }
            (Some(rank), _) => (Key::Rank(rank), format!("rank {rank}")),
            _ => (
                Key::Position(p.export, p.index),
                format!(
                    "process {} of {} (pid {})",
                    p.index + 1,
                    file_name(&p.file),
                    p.pid
                ),
            ),
        };
        out.push((key, label, p));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn file_name(f: &str) -> String {
    std::path::Path::new(f)
        .file_name()
        .map_or(f.to_string(), |n| n.to_string_lossy().into_owned())
}

fn side(run: &Run) -> Side {
    Side {
        files: run.files.clone(),
        processes: run.views.len() as u64,
    }
}

pub fn diff(before: &Run, after: &Run, gate: Option<Gate>) -> Diff {
    let b = keyed(before.views);
    let a = keyed(after.views);
    let mut ranks = Vec::new();
    let mut grew = Vec::new();
    let find = |v: &[(Key, String, &RankView)], k: &Key| v.iter().position(|x| &x.0 == k);
    for (key, label, pb) in &b {
        let Some(j) = find(&a, key) else { continue };
        let pa = a[j].2;
        let chunk = Change::new(pb.chunks.median_ns, pa.chunks.median_ns);
        let names: BTreeSet<&str> = pb
            .stages
            .iter()
            .chain(&pa.stages)
            .map(|s| s.stage.as_str())
            .collect();
        let stages: Vec<StageDiff> = names
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
                    comm_ns: Change::new(
                        f(&sb, |s| s.comm_ns as f64),
                        f(&sa, |s| s.comm_ns as f64),
                    ),
                    overlap: Change::new(f(&sb, |s| s.overlap), f(&sa, |s| s.overlap)),
                }
            })
            .collect();
        if let Some(g) = gate {
            for s in &stages {
                if g.exceeded(s.exposed_ns.before, s.exposed_ns.after) {
                    grew.push(Growth {
                        label: label.clone(),
                        rank: pb.rank,
                        figure: "exposed_ns",
                        stage: Some(s.stage.clone()),
                        before: s.exposed_ns.before,
                        after: s.exposed_ns.after,
                        change: s.exposed_ns.change.clone(),
                    });
                }
            }
            if g.exceeded(chunk.before, chunk.after) {
                grew.push(Growth {
                    label: label.clone(),
                    rank: pb.rank,
                    figure: "chunk_ns",
                    stage: None,
                    before: chunk.before,
                    after: chunk.after,
                    change: chunk.change.clone(),
                });
            }
        }
        let (tb, ta) = (&pb.totals, &pa.totals);
        let ch = |b: i64, a: i64| Change::new(b as f64, a as f64);
        ranks.push(RankDiff {
            label: label.clone(),
            rank: pb.rank,
            mesh: pb.mesh.clone(),
            chunk_ns: chunk,
            exposed_ns: ch(tb.exposed_ns, ta.exposed_ns),
            comm_ns: ch(tb.comm_ns, ta.comm_ns),
            compute_ns: ch(tb.compute_ns, ta.compute_ns),
            stages,
        });
    }
    let only = |x: &[(Key, String, &RankView)], y: &[(Key, String, &RankView)]| -> Vec<String> {
        x.iter()
            .filter(|e| find(y, &e.0).is_none())
            .map(|e| e.1.clone())
            .collect()
    };
    Diff {
        schema: SCHEMA,
        window: before.window.to_string(),
        before: side(before),
        after: side(after),
        gate: gate.map(|g| g.percent()),
        only_before: only(&b, &a),
        only_after: only(&a, &b),
        ranks,
        grew,
    }
}
