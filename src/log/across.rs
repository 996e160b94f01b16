//! Ranks side by side: one row each, the highest rank for each figure, and the rank that
//! stands out (furthest from the median, by more than the prints' resolution) with the
//! phases where it differs most from the others. Like is compared with like: ranks on
//! different pipeline stages hold different layers and run different schedule points, so
//! the step's figures are compared only among ranks on one stage; the setup costs a rule
//! declares alike on every stage (`same_on_every_stage`) across all ranks.

use std::collections::{BTreeMap, BTreeSet};

use super::model::*;

/// The resolution below which two figures are not told apart (0.01 GiB, the prints').
const DEFAULT_RESOLUTION: i64 = 10_737_418;

/// A figure's values: (rank, bytes).
type ByRank = Vec<(i64, i64)>;

/// What one phase reads: (phase name, bytes, alike on every stage).
type PhaseFigure = (String, i64, bool);

pub fn across(ranks: &[RankReport]) -> Option<Across> {
    if ranks.len() < 2 {
        return None;
    }
    let mut rows: Vec<AcrossRow> = ranks.iter().map(row).collect();
    // Keyed by mesh coordinates (stage by stage), where the ranks printed them.
    rows.sort_by(|a, b| {
        (a.mesh.is_none(), &a.mesh, a.rank).cmp(&(b.mesh.is_none(), &b.mesh, b.rank))
    });
    let mesh_of: BTreeMap<i64, Option<crate::mesh::Mesh>> =
        rows.iter().map(|r| (r.rank, r.mesh.clone())).collect();
    let resolution = ranks
        .iter()
        .map(|r| r.resolution_bytes)
        .max()
        .filter(|&r| r > 0)
        .unwrap_or(DEFAULT_RESOLUTION);
    let stages = stage_groups(&rows);
    let stage_of: BTreeMap<i64, Option<i64>> = rows.iter().map(|r| (r.rank, r.pp_rank)).collect();

    // The stated costs whose rules declare them alike on every pipeline stage.
    let every_stage: BTreeSet<&str> = ranks
        .iter()
        .flat_map(|r| &r.setup_breakdown)
        .filter(|c| c.source == "stated" && c.same_on_every_stage)
        .map(|c| c.label.as_str())
        .collect();
    let cost_labels: BTreeSet<&String> = rows.iter().flat_map(|r| r.setup_costs.keys()).collect();

    // Each figure: (name, compared across all ranks, values by rank).
    let mut figures: Vec<(String, bool, ByRank)> = vec![(
        "peak allocated".into(),
        false,
        rows.iter()
            .filter_map(|r| r.peak_bytes.map(|b| (r.rank, b)))
            .collect(),
    )];
    // Each cost before their total, so that a tie names the cost that makes the difference.
    for label in &cost_labels {
        figures.push((
            label.to_string(),
            every_stage.contains(label.as_str()),
            rows.iter()
                .filter_map(|r| r.setup_costs.get(*label).map(|b| (r.rank, *b)))
                .collect(),
        ));
    }
    figures.push((
        "setup costs, total".into(),
        cost_labels.iter().all(|l| every_stage.contains(l.as_str())),
        rows.iter()
            .filter(|r| !r.setup_costs.is_empty())
            .map(|r| (r.rank, r.setup_total_bytes))
            .collect(),
    ));
    figures.push((
        "non-PyTorch, max in the step".into(),
        false,
        rows.iter()
            .filter_map(|r| r.non_pytorch_max_bytes.map(|b| (r.rank, b)))
            .collect(),
    ));

    let mut highest = Vec::new();
    let mut best: Option<Candidate> = None;
    for (fi, (name, all_ranks, values)) in figures.iter().enumerate() {
        // The groups this figure is compared within: every rank, or each stage.
        let groups: Vec<(Option<i64>, ByRank)> = if *all_ranks {
            vec![(None, values.clone())]
        } else {
            stages
                .iter()
                .map(|g| {
                    let in_group = values
                        .iter()
                        .filter(|(r, _)| stage_of.get(r) == Some(&g.pp_rank))
                        .copied()
                        .collect();
                    (g.pp_rank, in_group)
                })
                .collect()
        };
        for (pp_rank, values) in groups {
            if values.len() < 2 {
                continue;
            }
            // The highest of two is worth a line; "the odd one out" needs three peers or more.
            let peers_enough = values.len() >= 3;
            let all: Vec<i64> = values.iter().map(|v| v.1).collect();
            let &(rank, top) = values
                .iter()
                .max_by_key(|(r, b)| (*b, std::cmp::Reverse(*r)))
                .unwrap();
            highest.push(Highest {
                figure: name.clone(),
                pp_rank: if *all_ranks { None } else { pp_rank },
                rank,
                mesh: mesh_of.get(&rank).cloned().flatten(),
                bytes: top,
                median_bytes: median(&all),
            });
            for &(rank, b) in &values {
                // Against the others' median, so that with two ranks each is compared
                // with the other.
                let others: Vec<i64> = values.iter().filter(|v| v.0 != rank).map(|v| v.1).collect();
                let median = self::median(&others);
                let distance = (b - median).abs();
                // Ties go to the figure listed first (peak, then each cost, then their
                // total) and to the rank above the median: the one closer to running out
                // of memory.
                let better = match &best {
                    None => true,
                    Some(c) => {
                        distance > c.distance
                            || (distance == c.distance && b > median && c.bytes <= c.median)
                    }
                };
                if peers_enough && distance > resolution * 3 / 2 && better {
                    best = Some(Candidate {
                        distance,
                        figure: fi,
                        rank,
                        bytes: b,
                        median,
                        all_ranks: *all_ranks,
                        pp_rank,
                        compared_with: values.iter().map(|v| v.0).filter(|r| *r != rank).collect(),
                    });
                }
            }
        }
    }
    let standout = best.map(|c| Standout {
        rank: c.rank,
        mesh: mesh_of.get(&c.rank).cloned().flatten(),
        figure: figures[c.figure].0.clone(),
        bytes: c.bytes,
        median_bytes: c.median,
        among: if c.all_ranks {
            "all-ranks"
        } else {
            "same-stage"
        },
        pp_rank: if c.all_ranks { None } else { c.pp_rank },
        compared_with: c.compared_with,
        phases: phases_differing(ranks, c.rank, resolution),
    });
    Some(Across {
        not_compared: not_compared(
            &stages,
            &every_stage
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>(),
        ),
        ranks: rows,
        resolution_bytes: resolution,
        stages,
        highest,
        standout,
    })
}

/// The best candidate for the rank that stands out, so far.
struct Candidate {
    distance: i64,
    figure: usize,
    rank: i64,
    bytes: i64,
    median: i64,
    all_ranks: bool,
    pp_rank: Option<i64>,
    compared_with: Vec<i64>,
}

/// The ranks by pipeline stage, in stage order (ranks whose prints named no stage last).
fn stage_groups(rows: &[AcrossRow]) -> Vec<StageGroup> {
    let mut by: BTreeMap<(bool, i64), Vec<i64>> = BTreeMap::new();
    for r in rows {
        by.entry((r.pp_rank.is_none(), r.pp_rank.unwrap_or(0)))
            .or_default()
            .push(r.rank);
    }
    by.into_iter()
        .map(|((unknown, pp), mut ranks)| {
            ranks.sort();
            StageGroup {
                pp_rank: (!unknown).then_some(pp),
                ranks,
            }
        })
        .collect()
}

/// Which ranks are alone on their stage (so their stage figures are compared with none),
/// said plainly; `every_stage` names the costs still compared across all ranks.
fn not_compared(stages: &[StageGroup], every_stage: &[String]) -> Option<String> {
    let alone: Vec<&StageGroup> = stages.iter().filter(|g| g.ranks.len() == 1).collect();
    if alone.is_empty() {
        return None;
    }
    let spots: Vec<String> = alone
        .iter()
        .map(|g| match g.pp_rank {
            Some(p) => format!("{} on pp={p}", g.ranks[0]),
            None => format!("{} on a stage its prints do not name", g.ranks[0]),
        })
        .collect();
    let names = and_list(
        &alone
            .iter()
            .map(|g| g.ranks[0].to_string())
            .collect::<Vec<_>>(),
    );
    let mut line = if alone.len() == stages.len() {
        format!(
            "ranks {names} are on different pipeline stages ({}), which hold other layers and \
             run other points of the schedule: their peaks, non-PyTorch memory and \
             stage-dependent setup costs are not compared for standing out",
            spots.join(", ")
        )
    } else if alone.len() == 1 {
        format!(
            "rank {names} is alone on its pipeline stage ({}), which holds other layers and \
             runs other points of the schedule: its peak, non-PyTorch memory and \
             stage-dependent setup costs are compared with no other rank",
            spots[0]
        )
    } else {
        format!(
            "ranks {names} are each alone on their pipeline stage ({}), which hold other \
             layers and run other points of the schedule: their peaks, non-PyTorch memory and \
             stage-dependent setup costs are compared with no other rank",
            spots.join(", ")
        )
    };
    if !every_stage.is_empty() {
        let _ = std::fmt::Write::write_fmt(
            &mut line,
            format_args!(
                "; {}, alike on every stage, {} across all ranks",
                and_list(every_stage),
                if every_stage.len() == 1 {
                    "is compared"
                } else {
                    "are compared"
                }
            ),
        );
    }
    Some(line)
}

/// `3`, `3 and 14`, `3, 5 and 14`.
pub fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn row(r: &RankReport) -> AcrossRow {
    let mut setup_costs = BTreeMap::new();
    for c in r.setup_breakdown.iter().filter(|c| c.source == "stated") {
        *setup_costs.entry(c.label.clone()).or_insert(0) += c.bytes;
    }
    AcrossRow {
        rank: r.rank,
        pp_rank: r.pp_rank,
        mesh: r.mesh.clone(),
        peak_bytes: r.step.as_ref().map(|s| s.peak.allocated_bytes),
        peak_label: r.step.as_ref().map(|s| s.peak.label.clone()),
        schedule_end_bytes: r
            .step
            .as_ref()
            .and_then(|s| s.points.last())
            .map(|p| p.allocated_bytes),
        non_pytorch_max_bytes: r
            .step
            .as_ref()
            .and_then(|s| s.non_pytorch.as_ref())
            .map(|n| n.max_bytes),
        setup_total_bytes: setup_costs.values().sum(),
        setup_costs,
        detail_layers: r.detail_layers.as_ref().map(|d| {
            if d.layers.is_empty() {
                "none".to_string()
            } else {
                d.layers
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        }),
        files: r.files_written.clone(),
    }
}

pub fn median(values: &[i64]) -> i64 {
    let mut v = values.to_vec();
    v.sort();
    let n = v.len();
    if n == 0 {
        0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

/// The memory each phase reads, by phase name, and whether it is alike on every stage:
/// setup phases (allocated, else non-PyTorch) and the schedule's points.
fn phase_figures(r: &RankReport) -> Vec<PhaseFigure> {
    let mut out: Vec<PhaseFigure> = r
        .setup
        .iter()
        .filter_map(|p| {
            p.allocated_bytes
                .or(p.non_pytorch_bytes)
                .map(|b| (format!("setup: {}", p.label), b, p.same_on_every_stage))
        })
        .collect();
    if let Some(s) = &r.step {
        out.extend(
            s.points
                .iter()
                .map(|p| (p.label.clone(), p.allocated_bytes, false)),
        );
    }
    out
}

/// Where `rank` differs most from the others: each phase alike on every stage against all
/// other ranks, the others against the ranks on its own stage.
fn phases_differing(ranks: &[RankReport], rank: i64, resolution: i64) -> Vec<PhaseDiff> {
    let Some(me) = ranks.iter().find(|r| r.rank == rank) else {
        return Vec::new();
    };
    let others: Vec<(bool, Vec<PhaseFigure>)> = ranks
        .iter()
        .filter(|r| r.rank != rank)
        .map(|r| (r.pp_rank == me.pp_rank, phase_figures(r)))
        .collect();
    let mut diffs: Vec<PhaseDiff> = phase_figures(me)
        .into_iter()
        .filter_map(|(phase, b, every_stage)| {
            let theirs: Vec<i64> = others
                .iter()
                .filter(|(same_stage, _)| every_stage || *same_stage)
                .filter_map(|(_, o)| o.iter().find(|(p, _, _)| *p == phase).map(|x| x.1))
                .collect();
            if theirs.is_empty() {
                return None;
            }
            let m = median(&theirs);
            Some(PhaseDiff {
                phase,
                bytes: b,
                median_bytes: m,
                diff_bytes: b - m,
            })
        })
        .filter(|d| d.diff_bytes.abs() > resolution * 3 / 2)
        .collect();
    diffs.sort_by_key(|d| std::cmp::Reverse(d.diff_bytes.abs()));
    diffs.truncate(3);
    diffs
}

#[cfg(test)]
mod tests {
    use super::{StageGroup, and_list, median, not_compared};

    #[test]
    fn lists_and_ranks_alone() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(and_list(&s(&["3"])), "3");
        assert_eq!(and_list(&s(&["3", "5", "14"])), "3, 5 and 14");
        let g = |pp, ranks: &[i64]| StageGroup {
            pp_rank: Some(pp),
            ranks: ranks.to_vec(),
        };
        assert_eq!(not_compared(&[g(0, &[3, 5]), g(1, &[11, 14])], &[]), None);
        let one = not_compared(&[g(0, &[3, 5]), g(1, &[14])], &s(&["NCCL world"])).unwrap();
        assert!(
            one.starts_with("rank 14 is alone on its pipeline stage (14 on pp=1)"),
            "{one}"
        );
        assert!(one.ends_with("; NCCL world, alike on every stage, is compared across all ranks"));
        let all = not_compared(&[g(0, &[3]), g(1, &[14])], &[]).unwrap();
        assert!(
            all.starts_with(
                "ranks 3 and 14 are on different pipeline stages (3 on pp=0, 14 on pp=1)"
            ),
            "{all}"
        );
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3, 1, 2]), 2);
        assert_eq!(median(&[4, 1, 3, 2]), 2);
        assert_eq!(median(&[]), 0);
    }
}
