//! `report BEFORE --diff AFTER [--gate PCT]`: two runs, rank by rank and event by event: the
//! peak inside each schedule event, the live memory at its end and that memory by component
//! (the snapshot's categories), and, when both runs were reported with `--estimate`, the
//! estimator's state after the event and its components, before and after, through the one
//! gate (`crate::gate`). Runs of different schedules are not compared: a rank on one side
//! only, or an event only one run has, refuses the gate.

use serde::Serialize;

use super::{EventRow, Report};
use crate::findings::{Unit, Where};
use crate::gate::{Gate, Outcome, Paired, judge};

pub const SCHEMA: &str = "instrument.report.diff/1";

#[derive(Debug, Serialize)]
pub struct Diff {
    pub schema: &'static str,
    pub before: Vec<String>,
    pub after: Vec<String>,
    /// What does not pair: a rank on one side only, an event one run has and the other not.
    pub not_compared: Vec<String>,
    /// Every paired figure (the gate's rows, with or without `--gate`).
    pub gate: Outcome,
    /// Whether `--gate` was given (without it the verdict is shown, never acted on).
    pub gated: bool,
    /// With `--estimate`: a run whose estimate is unavailable, so that the estimator's
    /// figures are not compared (the measured ones still are).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_estimated: Vec<String>,
}

/// Pair `before` and `after` rank by rank and event by event.
pub fn compare(before: &Report, after: &Report, gate: Option<Gate>) -> Diff {
    let mut figures = Vec::new();
    let mut not_compared = Vec::new();
    for b in &before.ranks {
        let Some(a) = after.ranks.iter().find(|a| a.rank == b.rank) else {
            not_compared.push(format!("rank {} is in the run before only", b.rank));
            continue;
        };
        let mut place = Where::rank(b.rank);
        if let Some(m) = &b.mesh {
            place = place.with_mesh(m.clone());
        }
        for eb in &b.events {
            let Some(ea) = a.events.iter().find(|e| e.event == eb.event) else {
                not_compared.push(format!(
                    "rank {}: {} is in the run before only (another schedule)",
                    b.rank, eb.event
                ));
                continue;
            };
            figures.extend(event_figures(&place.clone().at(eb.event.clone()), eb, ea));
        }
        for ea in a
            .events
            .iter()
            .filter(|e| !b.events.iter().any(|x| x.event == e.event))
        {
            not_compared.push(format!(
                "rank {}: {} is in the run after only (another schedule)",
                b.rank, ea.event
            ));
        }
    }
    for a in after
        .ranks
        .iter()
        .filter(|a| !before.ranks.iter().any(|b| b.rank == a.rank))
    {
        not_compared.push(format!("rank {} is in the run after only", a.rank));
    }
    let gated = gate.is_some();
    let gate = gate.unwrap_or_else(|| "0".parse().expect("0 is a gate"));
    let outcome = judge(gate, figures, not_compared.clone());
    let not_estimated = [("before", before), ("after", after)]
        .iter()
        .filter_map(|(side, r)| {
            let e = r.estimate.as_ref()?;
            let why = e.unavailable.as_ref()?;
            Some(format!(
                "the run {side}: the estimate is unavailable ({why}); its figures are not compared"
            ))
        })
        .collect();
    Diff {
        schema: SCHEMA,
        before: before.inputs.logs.clone(),
        after: after.inputs.logs.clone(),
        not_compared,
        gate: outcome,
        gated,
        not_estimated,
    }
}

/// One event's figures, before and after: its peak inside and live memory at its end; that
/// memory by category (a category on one side only is zero on the other: memory that came or
/// went is a change, not another schedule); and, where both runs have the estimator's state
/// after the event, its total and its components (by the estimator's buckets).
fn event_figures(place: &Where, b: &EventRow, a: &EventRow) -> Vec<Paired> {
    let pair = |figure: String, before: f64, after: f64| Paired {
        place: place.clone(),
        figure,
        unit: Unit::Bytes,
        before,
        after,
    };
    let mut out = vec![
        pair(
            "peak inside".into(),
            b.snapshot_peak_bytes as f64,
            a.snapshot_peak_bytes as f64,
        ),
        pair(
            "live at its end".into(),
            b.snapshot_end_bytes as f64,
            a.snapshot_end_bytes as f64,
        ),
    ];
    let mut categories: Vec<&str> = Vec::new();
    for c in b
        .snapshot_end_by_category
        .iter()
        .chain(&a.snapshot_end_by_category)
    {
        if !categories.contains(&c.name.as_str()) {
            categories.push(&c.name);
        }
    }
    let bytes = |e: &EventRow, name: &str| {
        e.snapshot_end_by_category
            .iter()
            .find(|c| c.name == name)
            .map_or(0.0, |c| c.bytes as f64)
    };
    for c in categories {
        out.push(pair(
            format!("live at its end: {c}"),
            bytes(b, c),
            bytes(a, c),
        ));
    }
    if let (Some(x), Some(y)) = (b.estimated_bytes, a.estimated_bytes) {
        out.push(pair("estimated".into(), x as f64, y as f64));
        let mut buckets: Vec<String> = Vec::new();
        for c in b.components.iter().chain(&a.components) {
            let key = c.buckets.join(" + ");
            if !c.buckets.is_empty() && !buckets.contains(&key) {
                buckets.push(key);
            }
        }
        let est = |e: &EventRow, key: &str| {
            e.components
                .iter()
                .filter(|c| c.buckets.join(" + ") == key)
                .map(|c| c.estimated_bytes as f64)
                .sum::<f64>()
        };
        for k in buckets {
            out.push(pair(format!("estimated: {k}"), est(b, &k), est(a, &k)));
        }
    }
    out
}

/// The text: what does not pair, then the figures, the largest growth first; with `--gate`
/// the verdict is the last line.
pub fn render(d: &Diff) -> String {
    let mut o = String::new();
    let _ = std::fmt::Write::write_fmt(
        &mut o,
        format_args!(
            "instrument report --diff: {} -> {}\n",
            d.before.join(", "),
            d.after.join(", ")
        ),
    );
    for n in &d.not_compared {
        crate::findings::text::wrap(&mut o, &format!("  not compared: {n}"));
    }
    for n in &d.not_estimated {
        crate::findings::text::wrap(&mut o, &format!("  not estimated: {n}"));
    }
    let mut o = crate::findings::text::fit(&o);
    o.push('\n');
    if d.gated {
        d.gate.render(&mut o, 10);
    } else {
        // Without a gate: the figures, largest growth first, and no verdict.
        d.gate.render_rows(&mut o, 10);
    }
    o
}
