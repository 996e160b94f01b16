//! The snapshot's findings (`crate::findings`): what the text, the page and `--json` open with.
//! An OOM is the error the run died of, so it comes first; the patterns, a history that began
//! during the run and a capped trace follow, ranked the one way every reader ranks.

use crate::findings::{self, Figure, Finding, Severity, Unit, Where};
use crate::snapshot::oom::Cause;

use super::{Oom, Report, human, notes::RECIPE_CALL};

/// Every finding of a report, ranked. Call once the report is complete (patterns, diff, ranks).
pub fn of(r: &Report) -> Vec<Finding> {
    let mut out: Vec<Finding> = r.oom.iter().map(oom).collect();
    // A marked pipeline step: the event it died inside, and the schedule's peak and its cause.
    if let Some(s) = &r.schedule {
        let place = Where::default().in_file(r.source.path.clone(), None);
        out.extend(crate::snapshot::schedule::findings::findings(s, &place));
    }
    history(r, &mut out);
    for p in &r.patterns {
        // First-step optimizer state is expected retention, never a leak (the spec).
        let severity = if p.name == "first_step_optimizer_state" {
            Severity::Notice
        } else {
            Severity::Warning
        };
        let mut f = Finding::new(severity, p.name.replace('_', "-"), &p.title).next(&p.fix);
        if let Some(b) = p.bytes {
            f = f.figure(Figure::new(b as f64, Unit::Bytes));
        }
        if let Some(s) = p.sites.first() {
            f.place = Where::default().at(s.label());
        }
        f.evidence = p.evidence.clone();
        out.push(f);
    }
    if let Some(d) = &r.diff {
        for s in d.sites.iter().filter(|s| s.verdict == "growing").take(5) {
            let site = super::SiteRef {
                file: s.file.clone(),
                line: s.line,
                function: s.function.clone(),
            };
            out.push(
                Finding::new(
                    Severity::Warning,
                    "growing-site",
                    "live bytes and blocks both grew between the snapshots (leaking or retaining)",
                )
                .at(Where::default().at(site.label()))
                .figure(
                    Figure::new(s.bytes_after as f64, Unit::Bytes)
                        .against(s.bytes_before as f64, "before"),
                )
                .evidence(format!(
                    "blocks {} -> {} [{}]",
                    s.blocks_before,
                    s.blocks_after,
                    s.category.name()
                )),
            );
        }
    }
    for x in r.ranks.iter().filter(|x| x.stands_out) {
        let (Some(p), Some(m)) = (&x.peers, x.peers_median_peak_bytes) else {
            continue;
        };
        out.push(
            Finding::new(Severity::Warning, "stands-out", "peak far from its peers'")
                .at(Where::rank(i64::from(x.rank)).with_mesh(p.clone()))
                .figure(
                    Figure::new(x.peak_bytes as f64, Unit::Bytes)
                        .against(m as f64, format!("the median of its peers ({p})")),
                ),
        );
    }
    if r.mode == "ranks" && r.ranks.len() >= 2 && r.ranks.iter().all(|x| x.peers.is_none()) {
        out.push(
            Finding::new(
                Severity::Notice,
                "ranks-not-compared",
                "ranks not compared with each other: snapshots alone do not say which pipeline \
                 stage and role each rank has, and ranks of different stages hold different memory",
            )
            .evidence(format!(
                "{} ranks, peaks {} to {}",
                r.ranks.len(),
                human(r.ranks.iter().map(|x| x.peak_bytes).min().unwrap_or(0)),
                human(r.ranks.iter().map(|x| x.peak_bytes).max().unwrap_or(0))
            ))
            .next(
                "compare like with like from the run's logs: `instrument log` on them puts each \
                 rank beside the ranks of its own stage and role",
            ),
        );
    }
    let t = &r.trace;
    if t.dropped > 0 {
        out.push(
            Finding::new(
                Severity::Notice,
                "trace-capped",
                "only the newest trace entries were analysed (--max-trace-events)",
            )
            .figure(
                Figure::new(t.kept_events as f64, Unit::Count)
                    .against(t.total_events as f64, "in the file"),
            )
            .next("drop --max-trace-events to read the trace whole (the default)"),
        );
    }
    findings::rank(&mut out);
    out
}

fn oom(o: &Oom) -> Finding {
    let mut place = Where::default().at(o.site.label());
    place.rank = o.rank.map(i64::from);
    let next = match o.state.cause {
        Cause::Fragmentation => {
            "the free memory was in pieces: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, \
             or free the long-lived blocks allocated between short-lived ones"
        }
        Cause::OutOfMemory => {
            "hold less at this point (the holders listed were live just before); the run's memory prints \
             (`instrument log`) say which stage and phase peaks"
        }
    };
    let mut f = Finding::new(
        Severity::Error,
        "out-of-memory",
        format!("out of memory: tried to allocate {}", human(o.size_bytes)),
    )
    .at(place)
    .figure(
        Figure::new(o.size_bytes as f64, Unit::Bytes)
            .against(o.device_free_bytes as f64, "free on the device"),
    )
    .evidence(format!("trace entry {}: {}", o.event_index, o.why))
    .next(next);
    for h in o.holders.iter().take(3) {
        f = f.evidence(format!(
            "held {} in {} block(s) [{}]: {}",
            human(h.bytes),
            h.blocks,
            h.category.name(),
            super::SiteRef {
                file: h.file.clone(),
                line: h.line,
                function: h.function.clone(),
            }
            .label()
        ));
    }
    f
}

/// Blocks without a stack: a history that began during the run is named as such (the recipe
/// starts it at the profiled step on purpose); a file with no stacks at all is a warning.
fn history(r: &Report, out: &mut Vec<Finding>) {
    let Some(n) = &r.no_stack else { return };
    if n.history_started_during_run {
        let f = Finding::new(
            Severity::Notice,
            "history-started-during-run",
            "memory history began during the run (the recipe starts it at the profiled step): \
             the state from before it has no stack",
        )
        .figure(Figure::new(n.before_history_bytes as f64, Unit::Bytes))
        .evidence(format!(
            "{} live block(s), {}, have no stack and no trace entry allocating them{}",
            n.blocks,
            human(n.before_history_bytes),
            if r.trace.present {
                format!(
                    "; the trace's {} entries begin after them",
                    r.trace.total_events
                )
            } else {
                String::new()
            }
        ))
        .next(
            "none needed: the run's memory prints (`instrument log`) account for the state \
             before the step",
        );
        out.push(f);
    } else if n.before_history_bytes > 0 {
        out.push(
            Finding::new(
                Severity::Warning,
                "no-history",
                "nothing in this snapshot has a stack: live memory cannot be attributed",
            )
            .figure(Figure::new(n.before_history_bytes as f64, Unit::Bytes))
            .next(format!(
                "record with `{RECIPE_CALL}` (the recipe's call) from the step to profile until \
                 the snapshot is taken"
            )),
        );
    }
    if n.no_python_frame_bytes > 0 {
        out.push(
            Finding::new(
                Severity::Notice,
                "no-python-frame",
                "allocated on a thread with no Python frame, recorded with stacks=\"python\"",
            )
            .figure(Figure::new(n.no_python_frame_bytes as f64, Unit::Bytes))
            .next("record with `stacks=\"all\"` to keep the C++ frames that name those"),
        );
    }
}
