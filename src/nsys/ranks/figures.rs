//! The figures of one process in one window, with the definitions of pithtrain's skill
//! (scripts/common.py `streams_in_window` / `kernels_in_window`, classify_streams.py,
//! compute_overlap.py), so they equal what its scripts print for the same window:
//!
//! - a kernel is in the window when it runs entirely inside it (`start >= window start` and
//!   `end <= window end`); kernels without a known short name are not read at all;
//! - per stream: kernels whose short name is like the communication pattern and the others, with
//!   their GPU time; a stream with any other kernel is a compute stream, else a communication
//!   stream;
//! - compute = the kernels of compute streams not starting with the not-compute prefix;
//! - per communication-stream kernel: its hidden time is the part of it during which some
//!   compute kernel of the process runs, exposed = its length minus that (never below zero);
//!   kernels whose innermost range has no stage are not in any stage row;
//! - per stage: communication time, exposed time, overlap = hidden / communication time, and the
//!   smallest and largest per-kernel hidden share (kernels with a positive length);
//! - a communication stream's purpose: its kernels' innermost ranges' purposes if they all
//!   agree, `mixed` if not.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::nsys::conventions::Conventions;
use crate::nsys::overlap;
use crate::nsys::ranks::scan::Tag;

/// What the figures read of a kernel.
#[derive(Debug, Clone, Copy)]
pub struct Kernel {
    pub start: i64,
    pub end: i64,
    /// Index into the export's stream ids.
    pub stream: u16,
    /// Its short name is like the communication pattern.
    pub comm_like: bool,
    /// Its short name starts with the not-compute prefix.
    pub not_compute: bool,
    pub tag: Tag,
}

#[derive(Debug, Clone, Serialize)]
pub struct StreamRow {
    pub stream: i64,
    /// `compute`, a purpose of the conventions, `mixed` or `unknown`.
    pub purpose: String,
    /// Kernels like the communication pattern, and the others.
    pub n_comm: u64,
    pub n_comp: u64,
    pub comm_ns: i64,
    pub comp_ns: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageRow {
    pub stage: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub describe: Option<String>,
    pub kernels: u64,
    pub comm_ns: i64,
    pub exposed_ns: i64,
    /// Hidden share of the stage's communication time (0..1).
    pub overlap: f64,
    /// The smallest and largest hidden share of one kernel (0 when no kernel has a length).
    pub overlap_min: f64,
    pub overlap_max: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Figures {
    #[serde(flatten)]
    pub totals: WindowTotals,
    pub streams: Vec<StreamRow>,
    pub stages: Vec<StageRow>,
}

/// A window's bounds and sums.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WindowTotals {
    pub start_ns: i64,
    pub end_ns: i64,
    /// GPU time of the compute streams' kernels that are compute.
    pub compute_ns: i64,
    /// Communication kernels on compute streams (in-order barriers, never hidden).
    pub barrier_ns: i64,
    /// Kernels on communication streams, and the part of them exposed.
    pub comm_ns: i64,
    pub exposed_ns: i64,
    /// Of `comm_ns`, kernels whose innermost range marks no stage (not in any stage row).
    pub unstaged_ns: i64,
}

#[derive(Default)]
struct StreamAcc {
    n_comm: u64,
    n_comp: u64,
    comm_ns: i64,
    comp_ns: i64,
    /// Purpose label of the first communication kernel, and whether all agreed.
    first: Option<u8>,
    mixed: bool,
}

#[derive(Default)]
struct StageAcc {
    kernels: u64,
    comm_ns: i64,
    exposed_ns: i64,
    min: Option<f64>,
    max: Option<f64>,
}

/// Where the kernels of the figures come from: item `i` of a process's work, `None` when it is
/// not a kernel the figures read (read on demand, so no copy of a process's kernels is held).
pub trait Kernels {
    fn kernel(&self, i: u32) -> Option<Kernel>;
}

impl Kernels for [Kernel] {
    fn kernel(&self, i: u32) -> Option<Kernel> {
        self.get(i as usize).copied()
    }
}

/// The figures of the kernels among `which` (one process's, by their index in `source`) in
/// `[start, end]`; `streams` maps stream indexes to ids, `stages` stage indexes to names.
pub fn figures(
    source: &(impl Kernels + ?Sized),
    which: std::ops::Range<u32>,
    start: i64,
    end: i64,
    streams: &[i64],
    stages: &[String],
    conv: &Conventions,
) -> Figures {
    let inside: Vec<u32> = which
        .filter(|&i| {
            source
                .kernel(i)
                .is_some_and(|k| k.start >= start && k.end <= end)
        })
        .collect();
    let kernels = || inside.iter().filter_map(|&i| source.kernel(i));
    let mut acc: BTreeMap<i64, StreamAcc> = BTreeMap::new();
    for k in kernels() {
        let a = acc.entry(stream_id(streams, k.stream)).or_default();
        if k.comm_like {
            a.n_comm += 1;
            a.comm_ns += k.end - k.start;
        } else {
            a.n_comp += 1;
            a.comp_ns += k.end - k.start;
        }
    }
    let compute: Vec<(i64, i64)> = kernels()
        .filter(|k| acc[&stream_id(streams, k.stream)].n_comp > 0 && !k.not_compute)
        .map(|k| (k.start, k.end))
        .collect();
    let compute = overlap::union(compute);
    let mut fig = Figures {
        totals: WindowTotals {
            start_ns: start,
            end_ns: end,
            ..Default::default()
        },
        ..Default::default()
    };
    let t = &mut fig.totals;
    let mut by_stage: BTreeMap<&str, StageAcc> = BTreeMap::new();
    for k in kernels() {
        let a = acc.get_mut(&stream_id(streams, k.stream)).expect("counted");
        if a.n_comp > 0 {
            continue;
        }
        // A communication stream: every kernel on it is like the pattern.
        match a.first {
            None => a.first = Some(k.tag.purpose),
            Some(p) if p != k.tag.purpose => a.mixed = true,
            _ => {}
        }
        let d = k.end - k.start;
        t.comm_ns += d;
        if k.tag.stage == 0 {
            t.unstaged_ns += d;
            continue;
        }
        let hidden = hidden_under(&compute, k.start, k.end);
        let s = by_stage
            .entry(stages[k.tag.stage as usize - 1].as_str())
            .or_default();
        s.kernels += 1;
        s.comm_ns += d;
        s.exposed_ns += (d - hidden).max(0);
        if d > 0 {
            let share = hidden as f64 / d as f64;
            s.min = Some(s.min.map_or(share, |m| m.min(share)));
            s.max = Some(s.max.map_or(share, |m| m.max(share)));
        }
    }
    for (&id, a) in &acc {
        let purpose = if a.n_comp > 0 {
            t.compute_ns += a.comp_ns;
            t.barrier_ns += a.comm_ns;
            "compute".to_string()
        } else if a.mixed {
            "mixed".to_string()
        } else {
            match a.first {
                Some(p) if p > 0 => conv.purposes[p as usize - 1].name.clone(),
                _ => "unknown".to_string(),
            }
        };
        fig.streams.push(StreamRow {
            stream: id,
            purpose,
            n_comm: a.n_comm,
            n_comp: a.n_comp,
            comm_ns: a.comm_ns,
            comp_ns: a.comp_ns,
        });
    }
    for (stage, s) in by_stage {
        t.exposed_ns += s.exposed_ns;
        fig.stages.push(StageRow {
            stage: stage.to_string(),
            describe: conv.describe.get(stage).cloned(),
            kernels: s.kernels,
            comm_ns: s.comm_ns,
            exposed_ns: s.exposed_ns,
            overlap: if s.comm_ns > 0 {
                (s.comm_ns - s.exposed_ns) as f64 / s.comm_ns as f64
            } else {
                0.0
            },
            overlap_min: s.min.unwrap_or(0.0),
            overlap_max: s.max.unwrap_or(0.0),
        });
    }
    fig
}

fn stream_id(streams: &[i64], i: u16) -> i64 {
    streams.get(i as usize).copied().unwrap_or(i64::MIN)
}

/// How much of `[s, e]` the sorted disjoint `union` covers.
fn hidden_under(union: &[(i64, i64)], s: i64, e: i64) -> i64 {
    let mut k = union.partition_point(|&(_, ue)| ue <= s);
    let mut total = 0;
    while k < union.len() && union[k].0 < e {
        total += union[k].1.min(e) - union[k].0.max(s);
        k += 1;
    }
    total.max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(start: i64, end: i64, stream: u16, comm: bool, stage: u16, purpose: u8) -> Kernel {
        Kernel {
            start,
            end,
            stream,
            comm_like: comm,
            not_compute: comm,
            tag: Tag { stage, purpose },
        }
    }

    /// Worked by hand: compute 0..100 on stream 7; an all-to-all 80..120 (20 hidden), another
    /// 150..170 (none), a barrier on the compute stream, a kernel outside the window.
    #[test]
    fn a_window_worked_by_hand() {
        let conv = Conventions::builtin();
        let stages = vec!["stage2_f".to_string()];
        let streams = vec![7, 20];
        let ks = [
            k(0, 100, 0, false, 0, 0),
            k(100, 104, 0, true, 0, 0),
            k(80, 120, 1, true, 1, 1),
            k(150, 170, 1, true, 1, 1),
            k(190, 230, 1, true, 1, 1),
        ];
        let all = 0..ks.len() as u32;
        let f = figures(&ks[..], all.clone(), 0, 200, &streams, &stages, &conv);
        let t = &f.totals;
        assert_eq!((t.compute_ns, t.barrier_ns, t.comm_ns), (100, 4, 60));
        assert_eq!(f.streams[0].purpose, "compute");
        assert_eq!(f.streams[1].purpose, "ep_a2a");
        let s = &f.stages[0];
        assert_eq!((s.kernels, s.comm_ns, s.exposed_ns), (2, 60, 40));
        assert!((s.overlap - 20.0 / 60.0).abs() < 1e-12);
        assert_eq!((s.overlap_min, s.overlap_max), (0.0, 0.5));
        // One kernel without a purpose makes the stream mixed.
        let mut ks2 = ks.to_vec();
        ks2[3].tag.purpose = 0;
        let f = figures(&ks2[..], all, 0, 200, &streams, &stages, &conv);
        assert_eq!(f.streams[1].purpose, "mixed");
    }

    #[test]
    fn hidden_time_under_a_union() {
        let u = [(0, 10), (20, 30), (40, 50)];
        assert_eq!(hidden_under(&u, 5, 45), 5 + 10 + 5);
        assert_eq!(hidden_under(&u, 10, 20), 0);
        assert_eq!(hidden_under(&u, 60, 70), 0);
        assert_eq!(hidden_under(&[], 0, 5), 0);
    }
}
