//! Whose prints are compared with whose: the run's shape each rank printed (its mesh
//! coordinates and the run's sizes, read by `crate::mesh`). The ranks of one report must be
//! of one run; two reports compared before and after a change must have the same shape.
//! Which fields are the rank's own is the label's business: the coordinates' ranks and the
//! field named as the print's rank value (`rank=`); every other field is the run's.

use super::model::{RankReport, Report, RunShape};
use crate::mesh::{Label, Value};

/// The run's own fields of a rank's label, in order: each mesh axis as `*/SIZE`, the other
/// fields as printed, the rank's own left out.
fn run_fields(run: &RunShape) -> Option<Vec<(String, String)>> {
    let label = Label::parse(&run.label)?;
    Some(
        label
            .fields
            .iter()
            .filter(|f| f.key != run.rank_key)
            .map(|f| {
                let v = match &f.value {
                    Value::Coord { size, .. } => format!("*/{size}"),
                    other => other.to_string(),
                };
                (f.key.clone(), v)
            })
            .collect(),
    )
}

/// A field as people read it: `pp size 2`, `gbs=32`.
fn show(key: &str, value: &str) -> String {
    match value.strip_prefix("*/") {
        Some(size) => format!("{key} size {size}"),
        None => format!("{key}={value}"),
    }
}

/// The differences between two lists of run fields: (key, this, that), a missing field as `-`.
fn differences(a: &[(String, String)], b: &[(String, String)]) -> Vec<(String, String, String)> {
    let mut keys: Vec<&String> = a.iter().map(|x| &x.0).collect();
    for (k, _) in b {
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let get = |l: &[(String, String)], k: &str| {
        l.iter()
            .find(|x| x.0 == k)
            .map(|x| x.1.clone())
            .unwrap_or_else(|| "-".into())
    };
    keys.into_iter()
        .filter_map(|k| {
            let (x, y) = (get(a, k), get(b, k));
            (x != y).then(|| (k.clone(), x, y))
        })
        .collect()
}

fn listed(d: &[(String, String, String)], a: &str, b: &str) -> String {
    d.iter()
        .map(|(k, x, y)| format!("{} {a}, {} {b}", show(k, x), show(k, y)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Logs read as one run that are not one run's: the user gives each run on its own.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotOneRun {
    #[error("{at}: rank {rank} printed a run shape that is not `key=value` fields: {label:?}")]
    NotFields {
        at: String,
        rank: i64,
        label: String,
    },
    #[error("{at}: rank {rank} printed the run shape of rank {own}; are two logs mixed up?")]
    OthersShape { at: String, rank: i64, own: u64 },
    #[error(
        "logs of different runs read as one: rank {first} ({first_at}) and rank {rank} ({at}) differ in {differences}; read each run on its own"
    )]
    Mixed {
        first: i64,
        first_at: String,
        rank: i64,
        at: String,
        differences: String,
    },
}

/// Two runs of different shapes given to be compared: not compared (the user's to fix).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "the runs before ({before_at}) and after ({after_at}) have different shapes: {differences}; their prints are not compared"
)]
pub struct DifferentShapes {
    pub before_at: String,
    pub after_at: String,
    pub differences: String,
}

/// Every rank's shape must be its own (the label's rank is the rank that printed it) and of
/// one run (the same run fields on every rank).
pub fn check_one_run(report: &Report) -> Result<(), NotOneRun> {
    let mut first: Option<(&RankReport, Vec<(String, String)>)> = None;
    for r in &report.ranks {
        let Some(run) = &r.run else { continue };
        let Some(label) = Label::parse(&run.label) else {
            return Err(NotOneRun::NotFields {
                at: run.at.clone(),
                rank: r.rank,
                label: run.label.clone(),
            });
        };
        if let Some(own) = label.int(&run.rank_key)
            && own != r.rank as u64
        {
            return Err(NotOneRun::OthersShape {
                at: run.at.clone(),
                rank: r.rank,
                own,
            });
        }
        let Some(fields) = run_fields(run) else {
            continue;
        };
        match &first {
            None => first = Some((r, fields)),
            Some((f, theirs)) => {
                let d = differences(theirs, &fields);
                if !d.is_empty() {
                    let fa = f.run.as_ref().map(|x| x.at.as_str()).unwrap_or("?");
                    return Err(NotOneRun::Mixed {
                        first: f.rank,
                        first_at: fa.to_string(),
                        rank: r.rank,
                        at: run.at.clone(),
                        differences: listed(
                            &d,
                            &format!("on rank {}", f.rank),
                            &format!("on rank {}", r.rank),
                        ),
                    });
                }
            }
        }
    }
    Ok(())
}

/// The run fields of a report (its first rank with a shape), for comparing two reports.
pub fn of_report(report: &Report) -> Option<(Vec<(String, String)>, &RunShape)> {
    report
        .ranks
        .iter()
        .filter_map(|r| r.run.as_ref())
        .find_map(|run| run_fields(run).map(|f| (f, run)))
}

/// The run's shape for people, the rank's own fields left out: `pp size 2, dp size 4, ...,
/// mbs=1, seq=4, ...`.
pub fn describe(report: &Report) -> Option<String> {
    of_report(report).map(|(f, _)| {
        f.iter()
            .map(|(k, v)| show(k, v))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// Two runs compared before and after a change: the same mesh sizes and numbers (micro-batch
/// size, sequence length, ...), or not compared. A text field that differs (a model path
/// under another checkout) is said in a note when its last two path components agree, and
/// refused otherwise (another model).
pub fn compare_runs(before: &Report, after: &Report) -> Result<Vec<String>, DifferentShapes> {
    let (bo, ao) = (of_report(before), of_report(after));
    let (Some((b, bs)), Some((a, as_))) = (&bo, &ao) else {
        let who = match (bo.is_some(), ao.is_some()) {
            (false, false) => "neither side's logs print a",
            (false, true) => "the logs before print no",
            _ => "the logs after print no",
        };
        return Ok(vec![format!(
            "{who} run shape (`run |`, rule 7.run-shape): ranks are matched by rank alone, and the shapes are not checked"
        )]);
    };
    let d = differences(b, a);
    let mut refused = Vec::new();
    let mut notes = Vec::new();
    for (k, x, y) in d {
        let numeric = |v: &str| v.starts_with("*/") || v.parse::<u64>().is_ok() || v == "-";
        if !numeric(&x) && !numeric(&y) && tail(&x, 2) == tail(&y, 2) {
            notes.push(format!(
                "{k} is {x} before and {y} after (the same {}): compared",
                tail(&x, 2)
            ));
        } else {
            refused.push((k, x, y));
        }
    }
    if !refused.is_empty() {
        return Err(DifferentShapes {
            before_at: bs.at.clone(),
            after_at: as_.at.clone(),
            differences: listed(&refused, "before", "after"),
        });
    }
    Ok(notes)
}

/// The last `n` components of a path.
fn tail(p: &str, n: usize) -> String {
    let parts: Vec<&str> = p.trim_end_matches('/').rsplit('/').take(n).collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(label: &str) -> RunShape {
        RunShape {
            label: label.into(),
            fields: Default::default(),
            at: "log:1".into(),
            rank_key: "rank".into(),
        }
    }

    #[test]
    fn the_runs_fields_leave_the_ranks_own_out() {
        let a = run_fields(&run("rank=3; pp=0/2 ep=1/2; mbs=1 seq=4; model=m")).unwrap();
        let b = run_fields(&run("rank=14; pp=1/2 ep=0/2; mbs=1 seq=4; model=m")).unwrap();
        assert_eq!(a, b);
        let c = run_fields(&run("rank=3; pp=0/4 ep=1/2; mbs=1 seq=8; model=m")).unwrap();
        let d = differences(&a, &c);
        assert_eq!(
            listed(&d, "before", "after"),
            "pp size 2 before, pp size 4 after; seq=4 before, seq=8 after"
        );
    }

    #[test]
    fn paths_agree_by_their_last_components() {
        assert_eq!(
            tail("/a/b/examples/pretrain_lm/qwen3/config.json", 2),
            "qwen3/config.json"
        );
        assert_eq!(tail("qwen3/", 2), "qwen3");
    }
}
