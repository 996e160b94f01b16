//! The comparison as text: per rank the peak's change and where the timelines part, then
//! every change, the largest first; a rank without a change in one line.

use std::fmt::Write as _;

use super::model::*;
use crate::log::fmt::{gib, mib, say, signed_gib, table};

/// A figure in the unit its print gives it: saved tensors in MiB, the rest in GiB.
pub fn amount(kind: &str, b: i64) -> String {
    if kind.starts_with("saved") {
        mib(b)
    } else {
        gib(b)
    }
}

/// A change in its figure's unit, signed.
pub fn signed(kind: &str, b: i64) -> String {
    let s = amount(kind, b.abs());
    if b < 0 {
        format!("-{s}")
    } else {
        format!("+{s}")
    }
}

fn opt(kind: &str, b: Option<i64>) -> String {
    b.map(|b| amount(kind, b)).unwrap_or_else(|| "-".into())
}

pub use crate::log::fmt::rank_name as who;

pub fn parting_text(p: &Parting) -> String {
    let mut s = match (p.before_bytes, p.after_bytes) {
        (Some(b), Some(a)) => format!(
            "the timelines part at \"{}\": {} before, {} after ({} GiB)",
            p.point,
            gib(b),
            gib(a),
            signed_gib(a - b)
        ),
        (Some(_), None) => format!(
            "the timelines part at \"{}\", which only the run before printed",
            p.point
        ),
        _ => format!(
            "the timelines part at \"{}\", which only the run after printed",
            p.point
        ),
    };
    if let Some(u) = &p.agreed_until {
        let _ = write!(s, "; they agree up to \"{u}\"");
    }
    s
}

pub fn render(d: &DiffReport) -> String {
    let mut o = String::new();
    let list = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
    say(
        &mut o,
        &format!(
            "instrument log --diff: before {} file(s), {} prints from rank(s) {}; after {} file(s), {} prints from rank(s) {} (rules: {})",
            d.before.files.len(),
            d.before.prints,
            list(&d.before.ranks),
            d.after.files.len(),
            d.after.prints,
            list(&d.after.ranks),
            d.rules
        ),
    );
    if let Some(s) = &d.after.shape {
        say(&mut o, &format!("  run: {s}"));
    }
    for n in &d.notes {
        say(&mut o, &format!("  note: {n}"));
    }
    let _ = writeln!(
        o,
        "Changes are after minus before; a difference within the prints' rounding is no change."
    );
    for r in &d.ranks {
        let name = who(r.rank, &r.mesh, r.pp_rank);
        if !r.changed {
            let _ = writeln!(
                o,
                "\n{name}: no change (every figure within the prints' rounding)"
            );
            continue;
        }
        let _ = writeln!(o, "\n== {name}");
        if let Some(p) = &r.peak {
            say(
                &mut o,
                &format!(
                    "  peak {} -> {} ({}, {})",
                    opt(p.kind, p.before_bytes),
                    opt(p.kind, p.after_bytes),
                    signed(p.kind, p.change_bytes),
                    p.change
                ),
            );
        }
        match &r.parted_at {
            Some(p) => say(&mut o, &format!("  {}", parting_text(p))),
            None => {
                let _ = writeln!(o, "  the timelines agree at every schedule point");
            }
        }
        if !r.changes.is_empty() {
            let rows: Vec<Vec<String>> = r
                .changes
                .iter()
                .map(|c| {
                    vec![
                        c.figure.clone(),
                        opt(c.kind, c.before_bytes),
                        opt(c.kind, c.after_bytes),
                        signed(c.kind, c.change_bytes),
                        c.change.clone(),
                    ]
                })
                .collect();
            table(
                &mut o,
                "  ",
                &["change", "before", "after", "change", "per cent"],
                &rows,
            );
        }
    }
    for n in &d.not_compared {
        say(
            &mut o,
            &format!("\nrank {}: not compared, {}", n.rank, n.why),
        );
    }
    // The body fitted to 100 columns; the gate's verdict stays one line, however long.
    let mut o = crate::findings::text::fit(&o);
    if let Some(g) = &d.gate {
        o.push('\n');
        g.render(&mut o, 10);
    }
    o
}
