//! The estimate beside a rank's measured figures: a table of the four figures, where the
//! estimator puts the peak, and where the measured timeline leaves the estimated one. Text
//! and HTML.

use std::fmt::Write as _;

use super::{EstimateReport, Figure, RankEstimate, TimelinePoint};
use crate::log::fmt::{esc, gib, say, signed_gib, table};

/// `pp=2 ep=2 cp=1 dp=4, world 16, mbs 1, gbs 32, seq 4`.
fn inputs(e: &EstimateReport) -> String {
    match &e.inputs {
        Some(i) => {
            let p = &i.parallel;
            format!(
                "pp={} ep={} cp={} dp={}, world {}, micro-batch {}, global batch {}, sequence {}",
                p.pp_size,
                p.ep_size,
                p.cp_size,
                p.dp_size,
                i.world,
                p.micro_batch_size,
                p.global_batch_size,
                p.sequence_length
            )
        }
        None => "-".into(),
    }
}

fn opt(b: Option<i64>) -> String {
    b.map(gib).unwrap_or_else(|| "-".into())
}

fn difference(f: &Figure) -> String {
    match (f.diff_bytes, f.diff_percent) {
        (Some(d), Some(p)) => format!("{} GiB ({p:+.1}%)", signed_gib(d)),
        (Some(d), None) => format!("{} GiB", signed_gib(d)),
        _ => "-".into(),
    }
}

fn short(figure: &str) -> &'static str {
    match figure {
        "static" => "static memory / first point",
        "peak" => "peak of model tensors / step peak",
        "non_pytorch" => "non-PyTorch memory",
        "device_total" => "device total / memory in use",
        _ => "?",
    }
}

/// Where the measured timeline leaves the estimate, or that it never does.
pub fn leaves_text(x: &RankEstimate) -> String {
    let at = |t: &TimelinePoint| {
        format!(
            "\"{}\" (estimator event {}): {} measured, {} estimated ({} GiB)",
            t.point,
            t.event,
            gib(t.measured_bytes),
            gib(t.estimated_bytes),
            signed_gib(t.diff_bytes)
        )
    };
    match &x.leaves_at {
        Some(t) => format!(
            "the measured timeline leaves the estimate at {}, more than the tolerance of {}",
            at(t),
            gib(x.tolerance_bytes)
        ),
        None if x.timeline.is_empty() => "no schedule point has an estimated counterpart".into(),
        None => format!(
            "the measured timeline follows the estimate within {} at all {} points{}",
            gib(x.tolerance_bytes),
            x.timeline.len(),
            x.largest_difference
                .as_ref()
                .map(|t| format!("; the largest difference is at {}", at(t)))
                .unwrap_or_default()
        ),
    }
}

fn peak_text(x: &RankEstimate) -> String {
    let mut s = format!(
        "the estimator's peak is its event {}",
        x.estimated_peak_event
    );
    if let Some(p) = &x.estimated_peak_point {
        let _ = write!(s, " (the print at or after it: \"{p}\")");
    }
    s
}

pub fn text(o: &mut String, e: &EstimateReport, x: &RankEstimate) {
    say(
        o,
        &format!(
            "Estimate: {} in {}, for {}; pipeline rank {}",
            e.estimator,
            e.checkout.as_deref().unwrap_or("-"),
            inputs(e),
            x.pp_rank
        ),
    );
    let rows: Vec<Vec<String>> = x
        .figures
        .iter()
        .map(|f| {
            vec![
                short(f.figure).to_string(),
                opt(f.measured_bytes),
                gib(f.estimated_bytes),
                difference(f),
            ]
        })
        .collect();
    table(
        o,
        "  ",
        &[
            "measured / estimated",
            "measured",
            "estimated",
            "difference",
        ],
        &rows,
    );
    say(o, &format!("  {}", peak_text(x)));
    say(o, &format!("  {}", leaves_text(x)));
    if x.points_without_estimate > 0 {
        say(
            o,
            &format!(
                "  {} schedule point(s) have no estimated counterpart",
                x.points_without_estimate
            ),
        );
    }
}

pub fn html(o: &mut String, e: &EstimateReport, x: &RankEstimate) {
    let _ = write!(
        o,
        "<h3>Estimate</h3><p class=\"muted\">{} in <code>{}</code>, for {}; pipeline rank {}.</p>",
        esc(&e.estimator),
        esc(e.checkout.as_deref().unwrap_or("-")),
        esc(&inputs(e)),
        x.pp_rank
    );
    let mut t = crate::page::table::Table::new(
        o,
        "estimate",
        &[
            ("figure", false),
            ("measured", true),
            ("estimated", true),
            ("difference", true),
        ],
    );
    for f in &x.figures {
        t.row(&[
            f.compares.clone(),
            opt(f.measured_bytes),
            gib(f.estimated_bytes),
            difference(f),
        ]);
    }
    t.end();
    let _ = write!(
        o,
        "<p>{}.</p><p class=\"leaves\">{}.</p>",
        esc(&capital(&peak_text(x))),
        esc(&capital(&leaves_text(x)))
    );
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
