//! Many exports, one report: the files and folders given (a folder means every `.sqlite` in it —
//! a pithtrain capture writes one export per node, `pithtrain_node<N>.sqlite`), read in
//! parallel, each with the memory bound of one export, and checked to be one run before their
//! ranks are put side by side.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::nsys::analyze::{self, Options};
use crate::nsys::error::{Error, Result};
use crate::nsys::ranks::across;
use crate::nsys::report::{Document, Process, Report, SCHEMA};

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

/// How many exports are read at once: one per core, the memory map shared between them.
pub fn concurrency(files: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    files.clamp(1, cores.max(1))
}

/// Read every export, in parallel, into its report (in the order given). The first export (in
/// that order) that fails decides the error; nothing is reported then.
pub fn analyze_all(files: &[PathBuf], opts: &Options) -> Result<Vec<Report>> {
    let workers = concurrency(files.len());
    let opts = Options {
        mmap_bytes: opts.mmap_bytes / workers as i64,
        ..opts.clone()
    };
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<Option<Result<Report>>>> =
        Mutex::new((0..files.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().expect("no worker panics holding it");
                        let i = *n;
                        *n += 1;
                        i
                    };
                    if i >= files.len() {
                        break;
                    }
                    let r = analyze::analyze(&files[i], &opts);
                    results.lock().expect("no worker panics holding it")[i] = Some(r);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("workers are done")
        .into_iter()
        .map(|r| r.expect("every export was read"))
        .collect()
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

/// Refuse exports of different runs in one report, naming both: a different mesh shape or setup
/// fields, a rank in two exports, captures started far apart.
pub fn check_one_run(reports: &[Report]) -> Result<()> {
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

/// Read the exports of one run into the document the renderings print.
pub fn report(paths: &[PathBuf], opts: &Options, window: &str) -> Result<Document> {
    let files = files(paths)?;
    let exports = analyze_all(&files, opts)?;
    check_one_run(&exports)?;
    let across = across::across(&exports, &opts.conventions.balance_axis);
    Ok(Document {
        schema: SCHEMA,
        conventions: opts.conventions.origin.clone(),
        window: window.to_string(),
        exports,
        across,
    })
}
