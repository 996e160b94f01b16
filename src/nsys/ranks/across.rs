//! The ranks of every export side by side: one row per process keyed by its mesh coordinates,
//! per stage the process whose window exposes the most communication (and the others' range),
//! and pipeline balance — chunk time per coordinate of the pipeline axis, and a coordinate or a
//! rank slower than its peers.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::mesh::Mesh;
use crate::nsys::ranks::RankView;

/// Slower than its peers: a chunk time more than this share above the peers' median.
pub const SLOWER_THAN_PEERS: f64 = 0.05;

#[derive(Debug, Clone, Serialize)]
pub struct RankRow {
    pub rank: Option<u64>,
    pub mesh: Option<Mesh>,
    pub file: String,
    pub pid: i64,
    /// The window's name (the median chunk), its communication and the part exposed.
    pub window: String,
    pub compute_ns: i64,
    pub comm_ns: i64,
    pub exposed_ns: i64,
    /// Hidden share of the staged communication (0..1).
    pub overlap: f64,
    /// Median chunk length.
    pub chunk_ns: f64,
    /// The stage with the most exposed communication.
    pub worst_stage: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorstStage {
    pub stage: String,
    pub rank: Option<u64>,
    pub mesh: Option<Mesh>,
    pub file: String,
    pub pid: i64,
    pub exposed_ns: i64,
    pub comm_ns: i64,
    pub overlap: f64,
    /// The other processes with this stage, and the range of their exposed time.
    pub others: u64,
    pub others_min_exposed_ns: i64,
    pub others_max_exposed_ns: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BalanceGroup {
    /// The coordinate on the pipeline axis.
    pub coordinate: u32,
    pub ranks: u64,
    /// Median over its ranks of their median chunk length, and the extremes.
    pub chunk_ns: f64,
    pub min_chunk_ns: f64,
    pub max_chunk_ns: f64,
    /// Median over its ranks of the window's compute time.
    pub compute_ns: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Slower {
    /// `coordinate` (a pipeline stage slower than the others) or `rank` (a rank slower than the
    /// others at its coordinate).
    pub kind: &'static str,
    pub coordinate: u32,
    pub rank: Option<u64>,
    pub mesh: Option<Mesh>,
    pub chunk_ns: f64,
    /// The peers' median chunk length, and how much longer this one is (0.12: 12 %).
    pub peers_chunk_ns: f64,
    pub excess: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Balance {
    pub axis: String,
    pub groups: Vec<BalanceGroup>,
    pub slower: Vec<Slower>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Across {
    pub ranks: Vec<RankRow>,
    pub stages: Vec<WorstStage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balance: Option<Balance>,
}

fn median(v: Vec<f64>) -> f64 {
    crate::findings::median(&v)
}

fn overlap(p: &RankView) -> f64 {
    let comm: i64 = p.stages.iter().map(|s| s.comm_ns).sum();
    let exposed: i64 = p.stages.iter().map(|s| s.exposed_ns).sum();
    if comm > 0 {
        (comm - exposed) as f64 / comm as f64
    } else {
        0.0
    }
}

pub fn across(views: &[RankView], balance_axis: &str) -> Across {
    let mut procs: Vec<&RankView> = views.iter().collect();
    // By mesh coordinates; processes without one after, by file and pid.
    procs.sort_by(|a, b| {
        (a.mesh.is_none(), &a.mesh, a.rank, &a.file, a.pid).cmp(&(
            b.mesh.is_none(),
            &b.mesh,
            b.rank,
            &b.file,
            b.pid,
        ))
    });
    let ranks = procs
        .iter()
        .map(|p| RankRow {
            rank: p.rank,
            mesh: p.mesh.clone(),
            file: p.file.clone(),
            pid: p.pid,
            window: p.window.clone(),
            compute_ns: p.totals.compute_ns,
            comm_ns: p.totals.comm_ns,
            exposed_ns: p.totals.exposed_ns,
            overlap: overlap(p),
            chunk_ns: p.chunks.median_ns,
            worst_stage: p
                .stages
                .iter()
                .filter(|s| s.exposed_ns > 0)
                .max_by_key(|s| s.exposed_ns)
                .map(|s| s.stage.clone()),
        })
        .collect();

    let mut by_stage: BTreeMap<&str, Vec<(&RankView, usize)>> = BTreeMap::new();
    for p in &procs {
        for (i, s) in p.stages.iter().enumerate() {
            by_stage.entry(s.stage.as_str()).or_default().push((p, i));
        }
    }
    let stages = by_stage
        .into_iter()
        .filter_map(|(stage, v)| {
            // The first in mesh order wins a tie.
            let (wi, &(p, i)) = v
                .iter()
                .enumerate()
                .rev()
                .max_by_key(|(_, (p, i))| p.stages[*i].exposed_ns)?;
            let s = &p.stages[i];
            let others: Vec<i64> = v
                .iter()
                .enumerate()
                .filter(|(k, _)| *k != wi)
                .map(|(_, (p, i))| p.stages[*i].exposed_ns)
                .collect();
            Some(WorstStage {
                stage: stage.to_string(),
                rank: p.rank,
                mesh: p.mesh.clone(),
                file: p.file.clone(),
                pid: p.pid,
                exposed_ns: s.exposed_ns,
                comm_ns: s.comm_ns,
                overlap: s.overlap,
                others: others.len() as u64,
                others_min_exposed_ns: others.iter().copied().min().unwrap_or(0),
                others_max_exposed_ns: others.iter().copied().max().unwrap_or(0),
            })
        })
        .collect();
    Across {
        ranks,
        stages,
        balance: balance(&procs, balance_axis),
    }
}

fn balance(procs: &[&RankView], axis: &str) -> Option<Balance> {
    let mut groups: BTreeMap<u32, Vec<&RankView>> = BTreeMap::new();
    for p in procs {
        if let Some((c, _)) = p.mesh.as_ref().and_then(|m| m.get(axis))
            && p.chunks.count > 0
        {
            groups.entry(c).or_default().push(p);
        }
    }
    if groups.is_empty() {
        return None;
    }
    let rows: Vec<BalanceGroup> = groups
        .iter()
        .map(|(&c, ps)| {
            let chunk: Vec<f64> = ps.iter().map(|p| p.chunks.median_ns).collect();
            BalanceGroup {
                coordinate: c,
                ranks: ps.len() as u64,
                chunk_ns: median(chunk.clone()),
                min_chunk_ns: chunk.iter().copied().fold(f64::INFINITY, f64::min),
                max_chunk_ns: chunk.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                compute_ns: median(ps.iter().map(|p| p.totals.compute_ns as f64).collect()),
            }
        })
        .collect();
    let mut slower = Vec::new();
    if rows.len() > 1 {
        for g in &rows {
            let peers = median(
                rows.iter()
                    .filter(|o| o.coordinate != g.coordinate)
                    .map(|o| o.chunk_ns)
                    .collect(),
            );
            if peers > 0.0 && g.chunk_ns > peers * (1.0 + SLOWER_THAN_PEERS) {
                slower.push(Slower {
                    kind: "coordinate",
                    coordinate: g.coordinate,
                    rank: None,
                    mesh: None,
                    chunk_ns: g.chunk_ns,
                    peers_chunk_ns: peers,
                    excess: g.chunk_ns / peers - 1.0,
                });
            }
        }
    }
    for (&c, ps) in &groups {
        if ps.len() < 2 {
            continue;
        }
        for (i, p) in ps.iter().enumerate() {
            let peers = median(
                ps.iter()
                    .enumerate()
                    .filter(|(k, _)| *k != i)
                    .map(|(_, q)| q.chunks.median_ns)
                    .collect(),
            );
            let own = p.chunks.median_ns;
            if peers > 0.0 && own > peers * (1.0 + SLOWER_THAN_PEERS) {
                slower.push(Slower {
                    kind: "rank",
                    coordinate: c,
                    rank: p.rank,
                    mesh: p.mesh.clone(),
                    chunk_ns: own,
                    peers_chunk_ns: peers,
                    excess: own / peers - 1.0,
                });
            }
        }
    }
    Some(Balance {
        axis: axis.to_string(),
        groups: rows,
        slower,
    })
}
