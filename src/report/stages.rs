//! Each rank's layer stages: the exposed communication Nsight Systems measured in a stage
//! (`RankRow::stages`) beside the memory allocated inside it in the profiled step
//! (`RankRow::stage_memory`, from the snapshot's frames), joined by stage name; a stage with
//! memory and no export, or an export and no memory, is still a row. Text and page alike.

use std::fmt::Write as _;

use super::join::{RankRow, StageComm};
use crate::findings::Unit;
use crate::page::esc;
use crate::snapshot::schedule::stages::StageBytes;

/// One stage's row: its communication and its memory, either may be absent.
pub struct Row<'a> {
    pub stage: &'a str,
    pub comm: Option<&'a StageComm>,
    pub memory: Option<&'a StageBytes>,
}

/// The rank's stages: nsys's order first, then the stages only the snapshot has.
pub fn rows(rank: &RankRow) -> Vec<Row<'_>> {
    let memory: &[StageBytes] = rank.stage_memory.as_ref().map_or(&[], |m| &m.stages);
    let mut out: Vec<Row> = rank
        .stages
        .iter()
        .map(|c| Row {
            stage: &c.stage,
            comm: Some(c),
            memory: memory.iter().find(|m| m.stage == c.stage),
        })
        .collect();
    for m in memory {
        if !rank.stages.iter().any(|c| c.stage == m.stage) {
            out.push(Row {
                stage: &m.stage,
                comm: None,
                memory: Some(m),
            });
        }
    }
    out
}

fn bytes(b: u64) -> String {
    Unit::Bytes.show(b as f64)
}

fn cells(r: &Row) -> [String; 5] {
    let (exposed, hidden) = match r.comm {
        Some(c) => (
            Unit::Ns.show(c.exposed_ns as f64),
            format!("{:.0}%", c.hidden * 100.0),
        ),
        None => ("-".into(), "-".into()),
    };
    let (allocated, kept, count) = match r.memory {
        Some(m) => (
            bytes(m.allocated_bytes),
            bytes(m.kept_bytes),
            m.allocations.to_string(),
        ),
        None => ("-".into(), "-".into(), "-".into()),
    };
    [exposed, hidden, allocated, kept, count]
}

/// The stage's largest site: `file:line in function`, its bytes and allocations; `short`
/// keeps the file's last two path components (the text report's width).
fn site(r: &Row, short: bool) -> Option<String> {
    let s = r.memory?.largest_site.as_ref()?;
    let label = if short {
        match s.site.split_once(' ') {
            Some((place, rest)) => {
                let parts: Vec<&str> = place.rsplitn(3, '/').collect();
                let tail: Vec<&str> = parts.iter().take(2).rev().copied().collect();
                format!("{} {rest}", tail.join("/"))
            }
            None => s.site.clone(),
        }
    } else {
        s.site.clone()
    };
    Some(format!(
        "{label}: {} in {} allocation(s)",
        bytes(s.bytes),
        s.allocations
    ))
}

/// What the memory columns cover: how much of the step's allocations the frames named.
fn coverage(rank: &RankRow) -> Option<String> {
    let m = rank.stage_memory.as_ref()?;
    Some(format!(
        "memory by the stage functions on the allocations' Python frames, in the {}: {} of {} \
         allocated named no stage ({} with no Python frame)",
        if m.window == "schedule" {
            "marked schedule"
        } else {
            "whole trace"
        },
        bytes(m.unattributed_bytes),
        bytes(m.allocated_bytes),
        bytes(m.without_python_frames_bytes)
    ))
}

/// The text section: a table of the stages, then what the memory covers.
pub fn text(o: &mut String, rank: &RankRow) {
    let rows = rows(rank);
    if rows.is_empty() && rank.stage_memory.is_none() {
        return;
    }
    if !rows.is_empty() {
        let _ = writeln!(
            o,
            "  {:<10} {:>12} {:>7} {:>11} {:>11} {:>11}",
            "stage", "exposed comm", "hidden", "allocated", "kept at end", "allocations"
        );
        for r in &rows {
            let [e, h, a, k, n] = cells(r);
            let _ = writeln!(
                o,
                "  {:<10} {e:>12} {h:>7} {a:>11} {k:>11} {n:>11}",
                r.stage
            );
            if let Some(s) = site(r, true) {
                crate::findings::text::wrap(o, &format!("      most at {s}"));
            }
        }
    }
    if let Some(c) = coverage(rank) {
        crate::findings::text::wrap(
            o,
            &format!("  (exposed comm: Nsight Systems' per stage; allocated and kept at end: {c})"),
        );
    }
}

/// The page's section: the same table.
pub fn html(o: &mut String, rank: &RankRow) {
    let rows = rows(rank);
    if rows.is_empty() {
        return;
    }
    o.push_str(
        "<table class=\"stages\"><tr><th>stage</th><th>exposed comm</th><th>hidden</th>\
         <th>allocated</th><th>kept at end</th><th>allocations</th><th>largest site</th></tr>",
    );
    for r in &rows {
        let _ = write!(
            o,
            "<tr data-stage=\"{}\"><td>{}</td>",
            esc(r.stage),
            esc(r.stage)
        );
        for c in cells(r) {
            let _ = write!(o, "<td>{}</td>", esc(&c));
        }
        let _ = write!(
            o,
            "<td>{}</td></tr>",
            esc(&site(r, false).unwrap_or_default())
        );
    }
    o.push_str("</table>");
    if let Some(c) = coverage(rank) {
        let _ = write!(o, "<p class=\"muted\">{}</p>", esc(&c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::schedule::stages::StageMemory;

    fn memory(stage: &str, allocated: u64) -> StageBytes {
        StageBytes {
            stage: stage.into(),
            allocated_bytes: allocated,
            allocations: 1,
            kept_bytes: 0,
            largest_site: None,
        }
    }

    /// nsys's stages in its order, each with the memory of the same name; a stage with memory
    /// and no export row after them; one with an export row and no memory keeps its row.
    #[test]
    fn communication_and_memory_are_joined_by_stage_name() {
        let comm = |stage: &str| StageComm {
            stage: stage.into(),
            comm_ns: 10,
            exposed_ns: 4,
            hidden: 0.6,
        };
        let row = RankRow {
            rank: 1,
            mesh: None,
            pp_rank: None,
            step_snapshot: None,
            oom_snapshot: None,
            printed_peak_bytes: None,
            snapshot_peak_bytes: None,
            events: Vec::new(),
            stages: vec![comm("stage3_f"), comm("stage2_b")],
            stage_memory: Some(StageMemory {
                window: "schedule",
                allocated_bytes: 30,
                unattributed_bytes: 0,
                without_python_frames_bytes: 0,
                stages: vec![memory("stage1_f", 20), memory("stage3_f", 10)],
            }),
        };
        let got: Vec<(&str, Option<i64>, Option<u64>)> = rows(&row)
            .iter()
            .map(|r| {
                (
                    r.stage,
                    r.comm.map(|c| c.exposed_ns),
                    r.memory.map(|m| m.allocated_bytes),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("stage3_f", Some(4), Some(10)),
                ("stage2_b", Some(4), None),
                ("stage1_f", None, Some(20)),
            ]
        );
    }
}
