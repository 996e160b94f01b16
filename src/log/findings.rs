//! What the prints say that a reader must see first, every rank's in one ranked list
//! (`crate::findings`): a rank that ran out of memory (and whether its snapshot was written),
//! a file it could not write, a warning it printed (nothing will be profiled, no
//! out-of-memory snapshot), the rank that stands out among its peers.

use super::fmt::place;
use super::model::{Across, RankReport};
use crate::findings::{Figure, Finding, Severity, Unit, Where};

fn gib(b: i64) -> String {
    format!("{:.2} GiB", b as f64 / 1073741824.0)
}

fn where_rank(r: &RankReport) -> Where {
    let w = Where::rank(r.rank);
    match place(&r.mesh, r.pp_rank) {
        Some(p) => w.with_mesh(p),
        None => w,
    }
}

pub fn findings(ranks: &[RankReport], across: Option<&Across>) -> Vec<Finding> {
    let mut out = Vec::new();
    for r in ranks {
        for o in &r.out_of_memory {
            let mut f = Finding::new(Severity::Error, "out-of-memory", o.label.clone())
                .at(where_rank(r))
                .figure(Figure::new(o.requested_bytes as f64, Unit::Bytes))
                .evidence(format!("printed at {}", o.at));
            match (o.free_bytes, o.total_bytes) {
                (Some(fr), Some(t)) => f = f.evidence(format!("{} free of {}", gib(fr), gib(t))),
                (Some(fr), None) => f = f.evidence(format!("{} free", gib(fr))),
                _ => {}
            }
            let snapshot = r.files_written.iter().find(|w| w.at_out_of_memory);
            f = match snapshot {
                Some(s) => f.next(match &s.host {
                    Some(h) => format!(
                        "read the snapshot written at the error (on {h}): instrument snapshot {}",
                        s.path
                    ),
                    None => format!(
                        "read the snapshot written at the error: instrument snapshot {}",
                        s.path
                    ),
                }),
                None => f.next(
                    "the profiled step's schedule points above show where memory rose; \
                     rerun with the out-of-memory snapshot group applied to see what held it",
                ),
            };
            out.push(f);
        }
        for w in &r.files_not_written {
            let mut what = format!("{} not written to {}", w.label, w.path);
            if let Some(reason) = &w.reason {
                what.push_str(&format!(": {reason}"));
            }
            if w.at_out_of_memory {
                what.push_str(" (at the out-of-memory error)");
            }
            out.push(
                Finding::new(Severity::Error, "file-not-written", what)
                    .at(where_rank(r))
                    .evidence(format!("printed at {}", w.at))
                    .next(
                        "check that the folder exists and has room on that host (--snapshot-dir)",
                    ),
            );
        }
        for w in &r.warnings {
            out.push(
                Finding::new(Severity::Warning, "warning", w.label.clone())
                    .at(where_rank(r))
                    .evidence(format!("printed at {}", w.at)),
            );
        }
    }
    if let Some(s) = across.and_then(|a| a.standout.as_ref()) {
        let among = match (s.among, s.pp_rank) {
            ("same-stage", Some(p)) => format!(
                "the median of its {} peers on pp {p}",
                s.compared_with.len()
            ),
            _ => format!("the median of the {} other ranks", s.compared_with.len()),
        };
        let mut place_ = Where::rank(s.rank);
        if let Some(m) = &s.mesh {
            place_ = place_.with_mesh(m.short());
        }
        let mut f = Finding::new(
            Severity::Warning,
            "stands-out",
            format!("{} stands out", s.figure),
        )
        .at(place_)
        .figure(Figure::new(s.bytes as f64, Unit::Bytes).against(s.median_bytes as f64, among));
        for p in s.phases.iter().take(3) {
            f = f.evidence(format!(
                "{}: {} against {} ({:+.2} GiB)",
                p.phase,
                gib(p.bytes),
                gib(p.median_bytes),
                p.diff_bytes as f64 / 1073741824.0
            ));
        }
        out.push(f.next("compare the phases above with a rank of the same stage: instrument log --rank R for each"));
    }
    crate::findings::rank(&mut out);
    out
}
