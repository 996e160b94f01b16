//! `instrument log BEFORE --diff AFTER`: one run against another, rank by rank (matched by
//! rank and mesh coordinates): the change of the step's peak and the first schedule point
//! where the two timelines part, each setup cost, and each detail layer's saved tensors per
//! stage and over its stages. A difference within the prints' rounding is no change.
//! `--gate PCT` fails the comparison when a rank's peak or a layer's saved activations grew
//! by more than PCT per cent, and is refused when a rank is on one side only (`crate::gate`).
//!
//! - `model`: the comparison as data; `text`, `html`: renderers.

use std::collections::{BTreeMap, BTreeSet};

use super::LogError;
use super::model::{RankReport, Report};
use super::shape;
use crate::findings::{Unit, Where};
use crate::gate::{Gate, Outcome, Paired, change_percent, judge_within};

pub mod html;
pub mod model;
pub mod text;

use model::*;

/// Compare `before` with `after` (reports of one run each). Runs of different shapes are
/// refused in one line.
pub fn compare(
    before: &Report,
    after: &Report,
    gate: Option<Gate>,
) -> Result<DiffReport, LogError> {
    let notes = shape::compare_runs(before, after)?;
    let b: BTreeMap<i64, &RankReport> = before.ranks.iter().map(|r| (r.rank, r)).collect();
    let a: BTreeMap<i64, &RankReport> = after.ranks.iter().map(|r| (r.rank, r)).collect();
    let all: BTreeSet<i64> = b.keys().chain(a.keys()).copied().collect();
    let mut ranks = Vec::new();
    let mut not_compared = Vec::new();
    for rank in all {
        match (b.get(&rank), a.get(&rank)) {
            (Some(x), Some(y)) => match (&x.mesh, &y.mesh) {
                (Some(mx), Some(my)) if mx != my => not_compared.push(NotCompared {
                    rank,
                    side: "both",
                    why: format!(
                        "at {} before and at {} after: not the same place in the mesh",
                        mx.full(),
                        my.full()
                    ),
                }),
                _ => ranks.push(rank_diff(x, y)),
            },
            (Some(_), None) => not_compared.push(NotCompared {
                rank,
                side: "before",
                why: "printed nothing after".into(),
            }),
            (None, Some(_)) => not_compared.push(NotCompared {
                rank,
                side: "after",
                why: "printed nothing before".into(),
            }),
            (None, None) => {}
        }
    }
    // Changed ranks first, the largest change first; then the ranks without a change.
    ranks.sort_by_key(|r| {
        (
            !r.changed,
            std::cmp::Reverse(r.changes.first().map(|c| c.change_bytes.abs()).unwrap_or(0)),
            r.rank,
        )
    });
    let gate = gate.map(|g| gate_result(g, &ranks, &not_compared));
    Ok(DiffReport {
        schema: SCHEMA,
        rules: after.rules.clone(),
        before: side(before),
        after: side(after),
        notes,
        ranks,
        not_compared,
        gate,
    })
}

fn side(r: &Report) -> Side {
    Side {
        files: r.inputs.iter().map(|i| i.file.name.clone()).collect(),
        prints: r.totals.prints,
        ranks: r.ranks.iter().map(|x| x.rank).collect(),
        shape: shape::describe(r),
    }
}

/// One figure before and after (either may be absent).
struct Figure {
    figure: String,
    kind: &'static str,
    layer: Option<i64>,
    stage: Option<String>,
    before: Option<i64>,
    after: Option<i64>,
    before_at: Option<String>,
    after_at: Option<String>,
}

impl Figure {
    fn new(figure: String, kind: &'static str, before: Option<i64>, after: Option<i64>) -> Figure {
        Figure {
            figure,
            kind,
            layer: None,
            stage: None,
            before,
            after,
            before_at: None,
            after_at: None,
        }
    }

    fn change(self) -> Change {
        let (b, a) = (self.before.unwrap_or(0), self.after.unwrap_or(0));
        Change {
            figure: self.figure,
            kind: self.kind,
            layer: self.layer,
            stage: self.stage,
            before_bytes: self.before,
            after_bytes: self.after,
            change_bytes: a - b,
            change: change_percent(b as f64, a as f64),
            before_at: self.before_at,
            after_at: self.after_at,
        }
    }
}

fn rank_diff(b: &RankReport, a: &RankReport) -> RankDiff {
    let res = b.resolution_bytes.max(a.resolution_bytes).max(1);
    let saved_res = b.saved_resolution_bytes.max(a.saved_resolution_bytes);
    // A change beyond the rounding of the figures compared (one printed unit apart, or a
    // half on each side, is rounding).
    let beyond = |kind: &str, c: i64| {
        let r = if kind.starts_with("saved") {
            saved_res
        } else {
            res
        };
        c.abs() > r * 3 / 2
    };
    let mut figures = Vec::new();
    let (bs, as_) = (b.step.as_ref(), a.step.as_ref());
    let mut peak = Figure::new(
        "peak allocated".into(),
        "peak",
        bs.map(|s| s.peak.allocated_bytes),
        as_.map(|s| s.peak.allocated_bytes),
    );
    peak.before_at = bs.map(|s| s.peak.label.clone());
    peak.after_at = as_.map(|s| s.peak.label.clone());
    let peak = peak.change();
    figures.push(Figure::new(
        "end of the step".into(),
        "schedule",
        bs.and_then(|s| s.points.last()).map(|p| p.allocated_bytes),
        as_.and_then(|s| s.points.last()).map(|p| p.allocated_bytes),
    ));
    figures.push(Figure::new(
        "non-PyTorch, max in the step".into(),
        "schedule",
        bs.and_then(|s| s.non_pytorch.as_ref()).map(|n| n.max_bytes),
        as_.and_then(|s| s.non_pytorch.as_ref())
            .map(|n| n.max_bytes),
    ));
    figures.push(Figure::new(
        "device memory in use at the schedule's peak".into(),
        "schedule",
        bs.and_then(|s| s.device_in_use_at_schedule_peak_bytes),
        as_.and_then(|s| s.device_in_use_at_schedule_peak_bytes),
    ));
    // Setup: each stated cost by its name, and what each phase added to the allocation.
    let costs = |r: &RankReport| {
        let mut m: BTreeMap<(String, &'static str), i64> = BTreeMap::new();
        for c in &r.setup_breakdown {
            *m.entry((c.label.clone(), c.source)).or_insert(0) += c.bytes;
        }
        m
    };
    let (bc, ac) = (costs(b), costs(a));
    let keys: BTreeSet<&(String, &'static str)> = bc.keys().chain(ac.keys()).collect();
    for k in keys {
        let name = if k.1 == "stated" {
            format!("setup: {}", k.0)
        } else {
            format!("setup: {} (allocated)", k.0)
        };
        figures.push(Figure::new(
            name,
            "setup",
            bc.get(k).copied(),
            ac.get(k).copied(),
        ));
    }
    // Detail layers: saved tensors per stage, then over the layer's stages.
    let layers: BTreeSet<i64> = b.layers.iter().chain(&a.layers).map(|l| l.layer).collect();
    for layer in layers {
        let lb = b.layers.iter().find(|l| l.layer == layer);
        let la = a.layers.iter().find(|l| l.layer == layer);
        let mut stages: Vec<String> = Vec::new();
        for l in lb.iter().chain(la.iter()) {
            for s in &l.stages {
                if s.saved.is_some() && !stages.contains(&s.stage) {
                    stages.push(s.stage.clone());
                }
            }
        }
        let saved = |l: Option<&super::model::LayerReport>, stage: &str| {
            l.and_then(|l| l.stages.iter().find(|s| s.stage == stage))
                .and_then(|s| s.saved.as_ref())
                .map(|x| (x.activation_bytes(), x.weight_bytes()))
        };
        let name = if layer < 0 {
            "layer ?".to_string()
        } else {
            format!("layer {layer}")
        };
        for stage in &stages {
            let (sb, sa) = (saved(lb, stage), saved(la, stage));
            for (what, kind, pick) in [
                ("activations", "saved-activations", 0usize),
                ("weights", "saved-weights", 1),
            ] {
                let get = |x: Option<(i64, i64)>| x.map(|v| if pick == 0 { v.0 } else { v.1 });
                let mut f = Figure::new(
                    format!("{name} {stage} saved {what}"),
                    kind,
                    get(sb),
                    get(sa),
                );
                f.layer = Some(layer);
                f.stage = Some(stage.clone());
                figures.push(f);
            }
        }
        let (tb, ta) = (lb.and_then(|l| l.saved_all), la.and_then(|l| l.saved_all));
        for (what, kind, pick) in [
            ("activations", "saved-activations", 0usize),
            ("weights", "saved-weights", 1),
        ] {
            let get = |x: Option<super::model::SavedAll>| {
                x.map(|v| {
                    if pick == 0 {
                        v.activations_bytes
                    } else {
                        v.weights_bytes
                    }
                })
            };
            let mut f = Figure::new(
                format!("{name} saved {what}, all stages"),
                kind,
                get(tb),
                get(ta),
            );
            f.layer = Some(layer);
            figures.push(f);
        }
    }
    let mut changes: Vec<Change> = figures
        .into_iter()
        .map(Figure::change)
        .filter(|c| beyond(c.kind, c.change_bytes))
        .collect();
    if beyond(peak.kind, peak.change_bytes) {
        changes.push(peak.clone());
    }
    // The largest first; equal changes keep their order (the peak after what makes it).
    changes.sort_by_key(|c| std::cmp::Reverse(c.change_bytes.abs()));
    let points = |r: &RankReport| -> Vec<(String, i64)> {
        r.step
            .as_ref()
            .map(|s| {
                s.points
                    .iter()
                    .map(|p| (p.label.clone(), p.allocated_bytes))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (before_points, after_points) = (points(b), points(a));
    let parted_at = parting(&before_points, &after_points, res);
    RankDiff {
        rank: b.rank,
        mesh: b.mesh.clone().or_else(|| a.mesh.clone()),
        pp_rank: b.pp_rank.or(a.pp_rank),
        changed: !changes.is_empty() || parted_at.is_some(),
        peak: (bs.is_some() || as_.is_some()).then_some(peak),
        parted_at,
        changes,
        resolution_bytes: res,
        saved_resolution_bytes: saved_res,
        before_points,
        after_points,
    }
}

/// The first point, in the order the schedule ran, where the timelines differ beyond the
/// rounding, or where a point is on one side only.
fn parting(b: &[(String, i64)], a: &[(String, i64)], res: i64) -> Option<Parting> {
    let after: BTreeMap<&str, i64> = a.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    let before: BTreeMap<&str, i64> = b.iter().map(|(l, v)| (l.as_str(), *v)).collect();
    let mut agreed: Option<&str> = None;
    for (i, (label, vb)) in b.iter().enumerate() {
        let at = |va: Option<i64>| Parting {
            point: label.clone(),
            before_bytes: Some(*vb),
            after_bytes: va,
            change_bytes: va.map(|v| v - vb),
            agreed_until: agreed.map(str::to_string),
        };
        match after.get(label.as_str()) {
            None => return Some(at(None)),
            Some(va) if (va - vb).abs() > res * 3 / 2 => return Some(at(Some(*va))),
            Some(_) => {}
        }
        // A point after runs that before did not, between this one and the next.
        if let Some(next) = b.get(i + 1)
            && let (Some(pa), Some(na)) = (
                a.iter().position(|x| x.0 == *label),
                a.iter().position(|x| x.0 == next.0),
            )
            && na > pa + 1
        {
            let (l, v) = &a[pa + 1];
            return Some(Parting {
                point: l.clone(),
                before_bytes: None,
                after_bytes: Some(*v),
                change_bytes: None,
                agreed_until: Some(label.clone()),
            });
        }
        agreed = Some(label);
    }
    // Points after runs past the end of before's schedule.
    a.iter()
        .find(|(l, _)| !before.contains_key(l.as_str()))
        .map(|(l, v)| Parting {
            point: l.clone(),
            before_bytes: None,
            after_bytes: Some(*v),
            change_bytes: None,
            agreed_until: agreed.map(str::to_string),
        })
}

/// The gate's view (`crate::gate::judge_within`) of every rank's peak and every layer's saved
/// activations over its stages. Growth within the prints' rounding is no growth (1.5 printed
/// units, as the timelines' parting). A rank on one side only, or at other coordinates, makes
/// the runs not comparable as a whole: the gate is refused.
fn gate_result(g: Gate, ranks: &[RankDiff], not_compared: &[NotCompared]) -> Outcome {
    let mut figures = Vec::new();
    for r in ranks {
        let mut place = Where::rank(r.rank);
        if let Some(p) = crate::log::fmt::place(&r.mesh, r.pp_rank) {
            place = place.with_mesh(p);
        }
        let candidates = r.peak.iter().chain(
            r.changes
                .iter()
                .filter(|c| c.kind == "saved-activations" && c.stage.is_none()),
        );
        for c in candidates {
            let res = if c.kind == "peak" {
                r.resolution_bytes
            } else {
                r.saved_resolution_bytes
            };
            figures.push((
                Paired {
                    place: place.clone(),
                    figure: c.figure.clone(),
                    unit: Unit::Bytes,
                    before: c.before_bytes.unwrap_or(0) as f64,
                    after: c.after_bytes.unwrap_or(0) as f64,
                },
                (res * 3 / 2) as f64,
            ));
        }
    }
    let refusals = not_compared
        .iter()
        .map(|n| format!("rank {} {}", n.rank, n.why))
        .collect();
    judge_within(g, figures, refusals)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(v: &[(&str, i64)]) -> Vec<(String, i64)> {
        v.iter().map(|(l, b)| (l.to_string(), *b)).collect()
    }

    #[test]
    fn timelines_part_at_the_first_difference_beyond_rounding() {
        let b = pts(&[("a", 100), ("b", 200), ("c", 300), ("d", 100)]);
        let a = pts(&[("a", 101), ("b", 200), ("c", 500), ("d", 100)]);
        let p = parting(&b, &a, 10).unwrap();
        assert_eq!(p.point, "c");
        assert_eq!(p.change_bytes, Some(200));
        assert_eq!(p.agreed_until.as_deref(), Some("b"));
        assert!(parting(&b, &b, 10).is_none());
        // One printed unit apart is rounding.
        assert!(
            parting(
                &b,
                &pts(&[("a", 110), ("b", 190), ("c", 300), ("d", 100)]),
                10
            )
            .is_none()
        );
    }

    #[test]
    fn a_point_on_one_side_only_parts_the_timelines() {
        let b = pts(&[("a", 1), ("b", 2), ("c", 3)]);
        let a = pts(&[("a", 1), ("b", 2), ("x", 9), ("c", 3)]);
        let p = parting(&b, &a, 0).unwrap();
        assert_eq!((p.point.as_str(), p.before_bytes), ("x", None));
        let p = parting(&a, &b, 0).unwrap();
        assert_eq!((p.point.as_str(), p.after_bytes), ("x", None));
        let longer = pts(&[("a", 1), ("b", 2), ("c", 3), ("d", 4)]);
        assert_eq!(parting(&b, &longer, 0).unwrap().point, "d");
    }
}
