//! What the report headlines (`crate::findings`), from the figures it already has: a rank whose
//! hidden share of a stage's communication is far from its peers' (same stage, same pipeline
//! coordinate), a pipeline coordinate or a rank slower than its peers, the stage and rank that
//! expose the most communication, the process that exposes the most where there are no chunk
//! ranges, and the processes without chunk ranges (nothing per stage can be said of them).

use std::collections::BTreeMap;

use crate::findings::{self, Figure, Finding, Severity, Unit, Where};
use crate::mesh::Mesh;
use crate::nsys::report::{Document, Process};

/// A hidden share stands out when it is further than this from its peers' median, relatively,
/// and further than `SHARE_FLOOR` percentage points (a few points are noise between ranks).
pub const SHARE_THRESHOLD: f64 = 0.25;
pub const SHARE_FLOOR: f64 = 5.0;

/// Where a process is: its rank and mesh, or its pid and file.
fn place(rank: Option<u64>, mesh: &Option<Mesh>, pid: i64, file: &str) -> Where {
    match rank {
        Some(r) => {
            Where::rank(r as i64).with_mesh(mesh.as_ref().map(Mesh::short).unwrap_or_default())
        }
        None => Where::default()
            .at(format!("pid {pid}"))
            .in_file(file_name(file), None),
    }
}

fn file_name(f: &str) -> String {
    std::path::Path::new(f)
        .file_name()
        .map_or(f.to_string(), |n| n.to_string_lossy().into_owned())
}

fn ms(ns: i64) -> String {
    Unit::Ns.show(ns as f64)
}

/// The findings of a report, ranked (`findings::rank`).
pub fn of(doc: &Document, axis: &str) -> Vec<Finding> {
    let procs: Vec<(&str, &Process)> = doc
        .exports
        .iter()
        .flat_map(|r| r.processes.iter().map(move |p| (r.file.as_str(), p)))
        .collect();
    let mut out = Vec::new();
    stands_out(&procs, axis, &mut out);
    slower(doc, &mut out);
    most_exposed(doc, &procs, &mut out);
    without_chunks(&procs, &mut out);
    findings::rank(&mut out);
    out
}

/// The ranks with one stage at one pipeline coordinate: (file, process, index of the stage).
type Peers<'a> = Vec<(&'a str, &'a Process, usize)>;

/// Per stage and pipeline coordinate, the ranks whose hidden share is far from their peers'.
fn stands_out(procs: &[(&str, &Process)], axis: &str, out: &mut Vec<Finding>) {
    let mut groups: BTreeMap<(String, Option<u32>), Peers> = BTreeMap::new();
    for (file, p) in procs {
        let coord = p.mesh.as_ref().and_then(|m| m.get(axis)).map(|(c, _)| c);
        for (i, s) in p.stages.iter().enumerate() {
            if s.comm_ns > 0 {
                groups
                    .entry((s.stage.clone(), coord))
                    .or_default()
                    .push((file, p, i));
            }
        }
    }
    for ((stage, coord), members) in groups {
        let shares: Vec<f64> = members
            .iter()
            .map(|(_, p, i)| p.stages[*i].overlap * 100.0)
            .collect();
        for (k, median) in findings::outliers(&shares, SHARE_THRESHOLD, SHARE_FLOOR) {
            let (file, p, i) = members[k];
            let s = &p.stages[i];
            let peers = match coord {
                Some(c) => format!("the median of its {} peers at {axis} {c}", members.len()),
                None => format!("the median of its {} peers", members.len()),
            };
            let lower = shares[k] < median;
            out.push(
                Finding::new(
                    if lower {
                        Severity::Warning
                    } else {
                        Severity::Notice
                    },
                    "hidden-share-stands-out",
                    format!(
                        "hides {} of its communication than its peers",
                        if lower { "less" } else { "more" }
                    ),
                )
                .at(place(p.rank, &p.mesh, p.pid, file).at(stage.clone()))
                .figure(Figure::new(shares[k], Unit::Percent).against(median, peers))
                .evidence(format!(
                    "{stage} exposes {} of {} of communication in the window {:?}",
                    ms(s.exposed_ns),
                    ms(s.comm_ns),
                    p.window.name
                ))
                .next(format!(
                    "compare its {stage} kernels with a peer's on the timeline (--html): what \
                     runs beside its communication"
                )),
            );
        }
    }
}

/// A pipeline coordinate or a rank whose chunk time is longer than its peers'.
fn slower(doc: &Document, out: &mut Vec<Finding>) {
    let Some(b) = &doc.across.balance else { return };
    for s in &b.slower {
        let (place, peers) = match s.kind {
            "coordinate" => (
                Where::default().at(format!("{} {}", b.axis, s.coordinate)),
                format!("the other {} coordinates", b.axis),
            ),
            _ => (
                Where::rank(s.rank.unwrap_or(0) as i64)
                    .with_mesh(s.mesh.as_ref().map(Mesh::short).unwrap_or_default()),
                format!("the other ranks at {} {}", b.axis, s.coordinate),
            ),
        };
        out.push(
            Finding::new(
                Severity::Warning,
                "slower-than-peers",
                "chunk time longer than its peers'",
            )
            .at(place)
            .figure(Figure::new(s.chunk_ns, Unit::Ns).against(s.peers_chunk_ns, peers)),
        );
    }
}

/// The stage (with chunk ranges) or the process (without) that exposes the most communication.
fn most_exposed(doc: &Document, procs: &[(&str, &Process)], out: &mut Vec<Finding>) {
    if let Some(s) = doc.across.stages.iter().max_by_key(|s| s.exposed_ns)
        && s.exposed_ns > 0
    {
        let mut f = Finding::new(
            Severity::Notice,
            "most-exposed-stage",
            "exposes the most communication of any stage and rank",
        )
        .at(place(s.rank, &s.mesh, s.pid, &s.file).at(s.stage.clone()))
        .figure(Figure::new(s.exposed_ns as f64, Unit::Ns))
        .evidence(format!(
            "{} of {} of communication exposed (hidden {:.1}%)",
            ms(s.exposed_ns),
            ms(s.comm_ns),
            s.overlap * 100.0
        ));
        if s.others > 0 {
            f = f.evidence(format!(
                "the other {} rank(s) with {}: {}..{}",
                s.others,
                s.stage,
                ms(s.others_min_exposed_ns),
                ms(s.others_max_exposed_ns)
            ));
        }
        out.push(f);
    }
    // Without chunk ranges, the processes' own unions are what there is.
    let unstaged: Vec<&(&str, &Process)> = procs
        .iter()
        .filter(|(_, p)| p.chunks.count == 0 && p.overlap.communication_ns > 0)
        .collect();
    if let Some((file, p)) = unstaged.iter().max_by_key(|(_, p)| p.overlap.exposed_ns) {
        let others: Vec<i64> = unstaged
            .iter()
            .filter(|(_, q)| q.global_pid != p.global_pid || q.pid != p.pid)
            .map(|(_, q)| q.overlap.exposed_ns)
            .collect();
        let gpus: Vec<String> = p.devices.iter().map(|d| d.to_string()).collect();
        let mut figure = Figure::new(p.overlap.exposed_ns as f64, Unit::Ns);
        if !others.is_empty() {
            let o: Vec<f64> = others.iter().map(|&ns| ns as f64).collect();
            figure = figure.against(findings::median(&o), "the other processes' median");
        }
        let mut f = Finding::new(
            Severity::Notice,
            "most-exposed-process",
            format!(
                "exposes the most communication of any process (GPU {}, whole capture)",
                gpus.join(",")
            ),
        )
        .at(place(p.rank, &p.mesh, p.pid, file))
        .figure(figure)
        .evidence(format!(
            "{} of {} of communication exposed (hidden {:.1}%); compute {}",
            ms(p.overlap.exposed_ns),
            ms(p.overlap.communication_ns),
            p.overlap.hidden_share * 100.0,
            ms(p.overlap.compute_ns)
        ));
        if let (Some(lo), Some(hi)) = (others.iter().min(), others.iter().max()) {
            let range = if lo == hi {
                ms(*lo)
            } else {
                format!("{}..{}", ms(*lo), ms(*hi))
            };
            f = f.evidence(format!(
                "the other {} process(es): {range} exposed",
                others.len()
            ));
        }
        out.push(f);
    }
}

/// Processes without DualPipeV chunk ranges: their window is the whole capture, no stage is
/// measured, and a gate compares their whole-capture figures only.
fn without_chunks(procs: &[(&str, &Process)], out: &mut Vec<Finding>) {
    let none: Vec<&(&str, &Process)> = procs.iter().filter(|(_, p)| p.chunks.count == 0).collect();
    if none.is_empty() {
        return;
    }
    let mut f = Finding::new(
        Severity::Notice,
        "no-chunk-ranges",
        format!(
            "{} of {} process(es) have no DualPipeV chunk ranges: their window is the whole \
             capture and no stage is measured",
            none.len(),
            procs.len()
        ),
    );
    for (file, p) in none.iter().take(4) {
        let setup = if p.rank.is_some() {
            "its setup range names its rank"
        } else {
            "no setup range either"
        };
        let why = p.window.note.as_deref().unwrap_or("no chunk ranges");
        f = f.evidence(format!(
            "{}: {why}; {setup}",
            place(p.rank, &p.mesh, p.pid, file).label()
        ));
    }
    if none.len() > 4 {
        f = f.evidence(format!("and {} more", none.len() - 4));
    }
    out.push(f.next(
        "capture a pithtrain run (DualPipeV's chunk and stage ranges) for per-stage figures; \
         --diff compares these processes' whole-capture figures",
    ));
}
