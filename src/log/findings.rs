//! What went wrong or leaves the report short, every rank's in one list: a rank that ran
//! out of memory (and whether its snapshot was written), a file it could not write, a
//! warning it printed (nothing will be profiled, no out-of-memory snapshot). Said first,
//! because each one changes how the rest of the report reads.

use super::model::{Finding, RankReport};

fn gib(b: i64) -> String {
    format!("{:.2} GiB", b as f64 / 1073741824.0)
}

pub fn findings(ranks: &[RankReport]) -> Vec<Finding> {
    let mut out = Vec::new();
    for r in ranks {
        for o in &r.out_of_memory {
            let mut text = format!("{}: {} requested", o.label, gib(o.requested_bytes));
            match (o.free_bytes, o.total_bytes) {
                (Some(f), Some(t)) => text.push_str(&format!(", {} free of {}", gib(f), gib(t))),
                (Some(f), None) => text.push_str(&format!(", {} free", gib(f))),
                _ => {}
            }
            out.push(Finding {
                rank: r.rank,
                kind: "out-of-memory",
                text,
                at: o.at.clone(),
            });
        }
        for f in &r.files_not_written {
            let mut text = format!("{} to {}", f.label, f.path);
            if let Some(reason) = &f.reason {
                text.push_str(&format!(": {reason}"));
            }
            if f.at_out_of_memory {
                text.push_str(" (at the out-of-memory error)");
            }
            out.push(Finding {
                rank: r.rank,
                kind: "file-not-written",
                text,
                at: f.at.clone(),
            });
        }
        for w in &r.warnings {
            out.push(Finding {
                rank: r.rank,
                kind: "warning",
                text: w.label.clone(),
                at: w.at.clone(),
            });
        }
    }
    out
}
