//! `report BEFORE --diff AFTER [--gate PCT]`: two runs, rank by rank and event by event: the
//! peak inside each schedule event and the live memory at its end, before and after, through
//! the one gate (`crate::gate`). Runs of different schedules are not compared: a rank on one
//! side only, or an event only one run has, refuses the gate.

use serde::Serialize;

use super::Report;
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
            for (figure, x, y) in [
                (
                    "peak inside",
                    eb.snapshot_peak_bytes,
                    ea.snapshot_peak_bytes,
                ),
                (
                    "live at its end",
                    eb.snapshot_end_bytes,
                    ea.snapshot_end_bytes,
                ),
            ] {
                figures.push(Paired {
                    place: place.clone().at(eb.event.clone()),
                    figure: figure.into(),
                    unit: Unit::Bytes,
                    before: x as f64,
                    after: y as f64,
                });
            }
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
    Diff {
        schema: SCHEMA,
        before: before.inputs.logs.clone(),
        after: after.inputs.logs.clone(),
        not_compared,
        gate: outcome,
        gated,
    }
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
