//! Many exports, one report: the files and folders given (a folder means every `.sqlite` in it —
//! a pithtrain capture writes one export per node, `pithtrain_node<N>.sqlite`), read in
//! parallel, each with the memory bound of one export, and checked to be one run before their
//! ranks are put side by side.

use std::path::{Path, PathBuf};

use crate::gate::Gate;
use crate::nsys::analyze::{self, Options};
use crate::nsys::error::{Error, Result};
use crate::nsys::ops;
use crate::nsys::ranks::diff::{self, Diff};
use crate::nsys::ranks::{RankView, WholeProcess, across};
use crate::nsys::report::{Document, Process, Report, SCHEMA};
use crate::nsys::sqlite;

/// Two captures of one run start within this of each other (the nodes' nsys sessions start
/// together); further apart, they are two runs.
pub const SAME_RUN_NS: i64 = 10 * 60 * 1_000_000_000;

/// The exports named by `paths`: files as given, folders as every `.sqlite` in them, by name.
pub fn files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| Error::input(p, format!("cannot read the folder: {e}")))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "sqlite"))
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(Error::input(
                    p,
                    "no .sqlite export in this folder (convert a report with nsys export --type sqlite FILE.nsys-rep)",
                ));
            }
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    // The same export twice would count its ranks twice.
    let mut seen: Vec<(PathBuf, &Path)> = Vec::new();
    for f in &out {
        let canon = f.canonicalize().unwrap_or_else(|_| f.clone());
        if let Some((_, first)) = seen.iter().find(|(c, _)| *c == canon) {
            return Err(Error::Request(format!(
                "{} and {} are the same export, given twice",
                first.display(),
                f.display()
            )));
        }
        seen.push((canon, f));
    }
    Ok(out)
}

/// What reading one export holds at its peak, per GPU operation: the ops array (56 bytes) and
/// what the analyses add (the per-rank figures, the NVTX projection's per-instance spans).
pub const BYTES_PER_GPU_OP: u64 = 80;
/// The memory the exports read at once may hold together, with SQLite's memory maps: exports
/// run in parallel (one per core) while their estimates fit, one by one when they do not.
pub const MEMORY_BUDGET: u64 = 1 << 30;

/// The estimated peak of reading an export (0 when it cannot be opened: reading it will say why).
fn estimate(path: &Path) -> u64 {
    match sqlite::open_export(path, 0) {
        Ok(db) => ops::rows(&db).saturating_mul(BYTES_PER_GPU_OP),
        Err(_) => 0,
    }
}

/// Read every export, in parallel within the memory budget (`par::map_within`: the largest
/// first, as many at once as fit in the budget together, one at least), into its report (in
/// the order given). The first export (in that order) that fails decides the error; nothing is
/// reported then.
pub fn analyze_all(files: &[PathBuf], opts: &Options) -> Result<Vec<Report>> {
    crate::par::map_within(
        files,
        |f| estimate(f),
        MEMORY_BUDGET,
        |file, lease| {
            // SQLite's memory map: `sqlite::MMAP_BYTES` shared by the exports in flight, and no
            // more than the budget has left (mapped pages count in the resident memory).
            let mmap_bytes = lease
                .spare
                .min(sqlite::MMAP_BYTES as u64 / lease.in_flight as u64)
                .min(opts.mmap_bytes.max(0) as u64) as i64;
            let mine = Options {
                mmap_bytes,
                ..opts.clone()
            };
            let r = analyze::analyze(file, &mine);
            release_freed_memory();
            r
        },
    )
    .into_iter()
    .collect()
}

/// Give the memory an export freed back to the system (glibc keeps freed heap memory for
/// reuse; the next export may run on another thread and allocate from another arena).
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn describe(p: &Process) -> String {
    let mut s = p.mesh.as_ref().map(|m| m.full()).unwrap_or_default();
    for (k, v) in &p.setup_fields.0 {
        if let Some(v) = v {
            s.push_str(&format!(" {k}={v}"));
        }
    }
    s
}

/// Refuse exports of different runs in one report (exit 2), naming both files and what differs:
/// an export without the trainer's ranks among exports with them, a different mesh shape or
/// setup fields, more ranks than the mesh holds, a rank in two exports, captures started far
/// apart. Refused rather than reported as separate runs: a report's cross-rank figures and its
/// gate assume one run, and the user knows which files belong together better than we can guess.
pub fn check_one_run(reports: &[Report]) -> Result<()> {
    let ranked = |r: &Report| r.processes.iter().any(|p| p.rank.is_some());
    if let (Some(with), Some(without)) = (
        reports.iter().find(|r| ranked(r)),
        reports.iter().find(|r| !ranked(r)),
    ) {
        return Err(Error::Request(format!(
            "{} and {} are exports of different runs: {} has the trainer's setup ranges (ranks), {} has none",
            with.file, without.file, with.file, without.file
        )));
    }
    let mut first: Option<(&Report, &Process)> = None;
    for r in reports {
        if let Some(p) = r.processes.iter().find(|p| p.mesh.is_some()) {
            match first {
                None => first = Some((r, p)),
                Some((fr, fp)) => {
                    let same_shape = fp
                        .mesh
                        .as_ref()
                        .zip(p.mesh.as_ref())
                        .is_some_and(|(a, b)| a.same_shape(b));
                    if !same_shape || fp.setup_fields.0 != p.setup_fields.0 {
                        return Err(Error::Request(format!(
                            "{} and {} are exports of different runs: rank {} of {} is {}, rank {} of {} is {}",
                            fr.file,
                            r.file,
                            fp.rank.unwrap_or(0),
                            fr.file,
                            describe(fp),
                            p.rank.unwrap_or(0),
                            r.file,
                            describe(p)
                        )));
                    }
                }
            }
        }
    }
    let mut seen: Vec<(u64, &str)> = Vec::new();
    for r in reports {
        for p in &r.processes {
            let Some(rank) = p.rank else { continue };
            if let Some((_, f)) = seen.iter().find(|(k, _)| *k == rank) {
                return Err(Error::Request(format!(
                    "rank {rank} is in both {f} and {}: exports of different runs (or the same node twice)",
                    r.file
                )));
            }
            seen.push((rank, &r.file));
        }
    }
    // More ranks than the mesh holds: another run's node among this run's (same shape).
    if let Some((r, p, m)) = reports.iter().find_map(|r| {
        r.processes
            .iter()
            .find_map(|p| p.mesh.as_ref().map(|m| (r, p, m)))
    }) {
        let world: u64 = m.axes.iter().map(|a| a.size as u64).product();
        if world > 0 && seen.len() as u64 > world {
            let files: Vec<&str> = reports.iter().map(|r| r.file.as_str()).collect();
            return Err(Error::Request(format!(
                "{} are exports of different runs: {} ranks, but the mesh of rank {} in {} ({}) holds {world}",
                files.join(", "),
                seen.len(),
                p.rank.unwrap_or(0),
                r.file,
                m.full()
            )));
        }
    }
    let starts: Vec<(i64, &str)> = reports
        .iter()
        .filter_map(|r| r.export.session_start_utc_ns.map(|t| (t, r.file.as_str())))
        .collect();
    if let (Some(lo), Some(hi)) = (
        starts.iter().min_by_key(|s| s.0),
        starts.iter().max_by_key(|s| s.0),
    ) && hi.0 - lo.0 > SAME_RUN_NS
    {
        return Err(Error::Request(format!(
            "{} and {} are exports of different runs: their captures started {:.1} minutes apart",
            lo.1,
            hi.1,
            (hi.0 - lo.0) as f64 / 60e9
        )));
    }
    Ok(())
}

/// Every process of the exports as the comparisons see it.
pub fn views(exports: &[Report]) -> Vec<RankView> {
    exports
        .iter()
        .enumerate()
        .flat_map(|(e, r)| {
            r.processes.iter().enumerate().map(move |(i, p)| RankView {
                file: r.file.clone(),
                export: e,
                index: i,
                pid: p.pid,
                rank: p.rank,
                mesh: p.mesh.clone(),
                window: p.window.name.clone(),
                totals: p.window.totals.clone(),
                stages: p.stages.clone(),
                chunks: p.chunks.clone(),
                devices: p.devices.clone(),
                whole: WholeProcess {
                    exposed_ns: p.overlap.exposed_ns,
                    comm_ns: p.overlap.communication_ns,
                    compute_ns: p.overlap.compute_ns,
                },
            })
        })
        .collect()
}

/// Two runs' documents compared (`--diff`), with the gate.
pub fn compare(before: &Document, after: &Document, gate: Option<Gate>) -> Diff {
    let (vb, va) = (views(&before.exports), views(&after.exports));
    let run = |d: &'_ Document, v| diff::Run {
        window: &before.window,
        files: d.exports.iter().map(|r| r.file.clone()).collect(),
        views: v,
    };
    diff::diff(&run(before, &vb), &run(after, &va), gate)
}

/// Read the exports of one run into the document the renderings print.
/// `--rank N...`: only those ranks' processes stay (the export-wide summaries stay whole). A
/// rank asked for that no export holds is refused, naming the ranks there are, as `log --rank`
/// refuses a rank that printed nothing.
fn keep_ranks(exports: &mut [Report], ranks: &[u64]) -> Result<()> {
    if ranks.is_empty() {
        return Ok(());
    }
    let held: std::collections::BTreeSet<u64> = exports
        .iter()
        .flat_map(|r| r.processes.iter().filter_map(|p| p.rank))
        .collect();
    if let Some(missing) = ranks.iter().find(|r| !held.contains(r)) {
        let list: Vec<String> = held.iter().map(u64::to_string).collect();
        return Err(Error::Request(format!(
            "--rank {missing}: no export holds that rank ({})",
            if list.is_empty() {
                "no process names its rank: pithtrain's setup range is missing".to_string()
            } else {
                format!("the ranks there: {}", list.join(", "))
            }
        )));
    }
    for r in exports.iter_mut() {
        r.processes
            .retain(|p| p.rank.is_some_and(|x| ranks.contains(&x)));
    }
    Ok(())
}

pub fn report(paths: &[PathBuf], opts: &Options, window: &str) -> Result<Document> {
    let files = files(paths)?;
    let mut exports = analyze_all(&files, opts)?;
    check_one_run(&exports)?;
    keep_ranks(&mut exports, &opts.ranks)?;
    let across = across::across(&views(&exports), &opts.conventions.balance_axis);
    let mut doc = Document {
        schema: SCHEMA,
        conventions: opts.conventions.origin.clone(),
        window: window.to_string(),
        findings: Vec::new(),
        exports,
        across,
    };
    doc.findings = crate::nsys::findings::of(&doc, &opts.conventions.balance_axis);
    Ok(doc)
}
