//! Ranks side by side: one row each, the highest rank for each figure, and the rank that
//! stands out (furthest from the median, by more than the prints' resolution) with the
//! phases where it differs most from the others.

use std::collections::{BTreeMap, BTreeSet};

use super::model::*;

/// The resolution below which two figures are not told apart (0.01 GiB, the prints').
const DEFAULT_RESOLUTION: i64 = 10_737_418;

pub fn across(ranks: &[RankReport]) -> Option<Across> {
    if ranks.len() < 2 {
        return None;
    }
    let rows: Vec<AcrossRow> = ranks.iter().map(row).collect();
    let resolution = ranks
        .iter()
        .map(|r| r.resolution_bytes)
        .max()
        .filter(|&r| r > 0)
        .unwrap_or(DEFAULT_RESOLUTION);

    // Each figure: (name, values by rank).
    let mut figures: Vec<(String, Vec<(i64, i64)>)> = vec![(
        "peak allocated".into(),
        rows.iter()
            .filter_map(|r| r.peak_bytes.map(|b| (r.rank, b)))
            .collect(),
    )];
    figures.push((
        "setup costs, total".into(),
        rows.iter()
            .filter(|r| !r.setup_costs.is_empty())
            .map(|r| (r.rank, r.setup_total_bytes))
            .collect(),
    ));
    let cost_labels: BTreeSet<&String> = rows.iter().flat_map(|r| r.setup_costs.keys()).collect();
    for label in cost_labels {
        figures.push((
            label.clone(),
            rows.iter()
                .filter_map(|r| r.setup_costs.get(label).map(|b| (r.rank, *b)))
                .collect(),
        ));
    }
    figures.push((
        "non-PyTorch, max in the step".into(),
        rows.iter()
            .filter_map(|r| r.non_pytorch_max_bytes.map(|b| (r.rank, b)))
            .collect(),
    ));

    let mut highest = Vec::new();
    // (distance from the median, figure index, rank, value, median)
    let mut best: Option<(i64, usize, i64, i64, i64)> = None;
    for (fi, (name, values)) in figures.iter().enumerate() {
        if values.len() < 2 {
            continue;
        }
        let all: Vec<i64> = values.iter().map(|v| v.1).collect();
        let median = median(&all);
        let &(rank, top) = values
            .iter()
            .max_by_key(|(r, b)| (*b, std::cmp::Reverse(*r)))
            .unwrap();
        highest.push(Highest {
            figure: name.clone(),
            rank,
            bytes: top,
            median_bytes: median,
        });
        for &(rank, b) in values {
            // Against the others' median, so that with two ranks each is compared with
            // the other.
            let others: Vec<i64> = values.iter().filter(|v| v.0 != rank).map(|v| v.1).collect();
            let median = self::median(&others);
            let distance = (b - median).abs();
            // Ties go to the figure listed first (peak before costs) and to the rank above
            // the median: the one closer to running out of memory.
            let better = match best {
                None => true,
                Some((d, _, _, bv, bm)) => {
                    distance > d || (distance == d && b > median && bv <= bm)
                }
            };
            if distance > resolution * 3 / 2 && better {
                best = Some((distance, fi, rank, b, median));
            }
        }
    }
    let standout = best.map(|(_, fi, rank, b, median)| Standout {
        rank,
        figure: figures[fi].0.clone(),
        bytes: b,
        median_bytes: median,
        phases: phases_differing(ranks, rank, resolution),
    });
    Some(Across {
        ranks: rows,
        resolution_bytes: resolution,
        highest,
        standout,
    })
}

fn row(r: &RankReport) -> AcrossRow {
    let mut setup_costs = BTreeMap::new();
    for c in r.setup_breakdown.iter().filter(|c| c.source == "stated") {
        *setup_costs.entry(c.label.clone()).or_insert(0) += c.bytes;
    }
    AcrossRow {
        rank: r.rank,
        pp_rank: r.pp_rank,
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

/// The memory each phase reads, by phase name: setup phases (allocated, else non-PyTorch)
/// and the schedule's points.
fn phase_figures(r: &RankReport) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = r
        .setup
        .iter()
        .filter_map(|p| {
            p.allocated_bytes
                .or(p.non_pytorch_bytes)
                .map(|b| (format!("setup: {}", p.label), b))
        })
        .collect();
    if let Some(s) = &r.step {
        out.extend(
            s.points
                .iter()
                .map(|p| (p.label.clone(), p.allocated_bytes)),
        );
    }
    out
}

fn phases_differing(ranks: &[RankReport], rank: i64, resolution: i64) -> Vec<PhaseDiff> {
    let Some(me) = ranks.iter().find(|r| r.rank == rank) else {
        return Vec::new();
    };
    let others: Vec<Vec<(String, i64)>> = ranks
        .iter()
        .filter(|r| r.rank != rank)
        .map(phase_figures)
        .collect();
    let mut diffs: Vec<PhaseDiff> = phase_figures(me)
        .into_iter()
        .filter_map(|(phase, b)| {
            let theirs: Vec<i64> = others
                .iter()
                .filter_map(|o| o.iter().find(|(p, _)| *p == phase).map(|x| x.1))
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
    use super::median;

    #[test]
    fn medians() {
        assert_eq!(median(&[3, 1, 2]), 2);
        assert_eq!(median(&[4, 1, 3, 2]), 2);
        assert_eq!(median(&[]), 0);
    }
}
