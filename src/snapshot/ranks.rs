//! A directory of rank-local snapshots: which file is which rank, one row per rank,
//! and the ranks that stand out with the sites that make the difference.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::analysis::{Options, Totals};
use super::error::SnapshotError;
use super::report::{
    NoStack, Oom, Pattern, RankFile, RankRow, RankSiteDelta, Report, Site, SiteRef, Trace, human,
};

/// The rank in a file name: `snapshot-rank00003.pickle`, `memory_snapshot_rank3_step0.pickle`,
/// `rank3_memory_snapshot.pickle` (the digits after the first "rank", separators allowed).
pub fn rank_from_name(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut from = 0;
    while let Some(pos) = lower[from..].find("rank") {
        let mut i = from + pos + 4;
        while i < b.len() && matches!(b[i], b'-' | b'_' | b'.' | b' ') {
            i += 1;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i > start
            && let Ok(r) = lower[start..i].parse::<u32>()
        {
            return Some(r);
        }
        from = from + pos + 4;
    }
    None
}

fn is_snapshot_name(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.ends_with(".pickle") || l.ends_with(".pkl") || l.ends_with(".json")
}

/// List the directory: which files are taken as which rank, and why others are not.
/// The files listed, and the (rank, path) pairs taken.
pub type Scan = (Vec<RankFile>, Vec<(u32, PathBuf)>);

pub fn scan(dir: &Path) -> Result<Scan, SnapshotError> {
    let list_err = |source| SnapshotError::ListDir {
        dir: dir.display().to_string(),
        source,
    };
    let rd = std::fs::read_dir(dir).map_err(list_err)?;
    let mut names: Vec<(String, PathBuf)> = Vec::new();
    for ent in rd {
        let ent = ent.map_err(list_err)?;
        let p = ent.path();
        if p.is_file()
            && let Some(n) = p.file_name().and_then(|n| n.to_str())
        {
            names.push((n.to_string(), p));
        }
    }
    names.sort();
    let mut files = Vec::new();
    let mut taken: BTreeMap<u32, (String, PathBuf)> = BTreeMap::new();
    for (name, p) in names {
        if !is_snapshot_name(&name) {
            continue;
        }
        match rank_from_name(&name) {
            None => files.push(RankFile {
                file: name,
                rank: None,
                taken: false,
                note: "no rank in the file name; skipped".into(),
            }),
            Some(r) => {
                if let Some((first, _)) = taken.get(&r) {
                    files.push(RankFile {
                        note: format!(
                            "rank {r} is already taken from {first}; compare them with --diff"
                        ),
                        file: name,
                        rank: Some(r),
                        taken: false,
                    });
                } else {
                    taken.insert(r, (name.clone(), p));
                    files.push(RankFile {
                        file: name,
                        rank: Some(r),
                        taken: true,
                        note: format!("taken as rank {r}"),
                    });
                }
            }
        }
    }
    if taken.is_empty() {
        return Err(SnapshotError::NoRanks {
            dir: dir.display().to_string(),
        });
    }
    Ok((files, taken.into_iter().map(|(r, (_, p))| (r, p)).collect()))
}

pub struct RankResult {
    report: Report,
    peak: u64,
    ooms: u64,
}

fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

fn deviation(v: u64, m: u64) -> Option<f64> {
    if m == 0 {
        return None;
    }
    let d = (v as f64 - m as f64) / m as f64 * 100.0;
    (d.abs() > 10.0).then_some(d)
}

/// Analyse every rank's file with `analyse` (two at a time), in rank order.
pub fn analyse_all(
    ranks: &[(u32, PathBuf)],
    analyse: impl Fn(&Path) -> Result<(Report, u64), SnapshotError> + Sync,
) -> Result<Vec<RankResult>, SnapshotError> {
    let results: Mutex<Vec<Option<Result<RankResult, SnapshotError>>>> =
        Mutex::new((0..ranks.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 2);
    std::thread::scope(|s| {
        for _ in 0..workers.min(ranks.len()) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= ranks.len() {
                        break;
                    }
                    let r = analyse(&ranks[i].1).map(|(report, peak)| {
                        let ooms = report.oom.len() as u64;
                        RankResult { report, peak, ooms }
                    });
                    results.lock().expect("no poisoned lock")[i] = Some(r);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("no poisoned lock")
        .into_iter()
        .map(|r| r.expect("every rank analysed"))
        .collect()
}

/// The directory report from every rank's report.
pub fn report(
    dir: &Path,
    files: Vec<RankFile>,
    ranks: &[(u32, PathBuf)],
    results: Vec<RankResult>,
    opts: &Options,
) -> Report {
    let mut rows = Vec::new();
    let res: Vec<(u32, PathBuf, RankResult)> = ranks
        .iter()
        .cloned()
        .zip(results)
        .map(|((r, p), x)| (r, p, x))
        .collect();

    let med_peak = median(res.iter().map(|(_, _, r)| r.peak).collect());
    let med_reserved = median(
        res.iter()
            .map(|(_, _, r)| r.report.totals.reserved_bytes)
            .collect(),
    );
    let med_ooms = median(res.iter().map(|(_, _, r)| r.ooms).collect());
    for (i, (rank, path, r)) in res.iter().enumerate() {
        let mut reasons = Vec::new();
        let mut sign = 0f64;
        if let Some(d) = deviation(r.peak, med_peak) {
            reasons.push(format!(
                "peak {} is {:+.0}% vs the median {}",
                human(r.peak),
                d,
                human(med_peak)
            ));
            sign = d;
        }
        let reserved = r.report.totals.reserved_bytes;
        if let Some(d) = deviation(reserved, med_reserved) {
            reasons.push(format!(
                "reserved {} is {:+.0}% vs the median {}",
                human(reserved),
                d,
                human(med_reserved)
            ));
            if sign == 0.0 {
                sign = d;
            }
        }
        if r.ooms > 0 && med_ooms == 0 {
            reasons.push(format!(
                "{} OOM event(s) where most ranks have none",
                r.ooms
            ));
            if sign == 0.0 {
                sign = 1.0;
            }
        }
        let stands_out = res.len() >= 2 && !reasons.is_empty();
        let differing_sites = if stands_out {
            differing(&res, i, sign)
        } else {
            Vec::new()
        };
        rows.push(RankRow {
            rank: *rank,
            file: path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("")
                .to_string(),
            device: r.report.device.unwrap_or(0),
            peak_bytes: r.peak,
            allocated_bytes: r.report.totals.allocated_bytes,
            reserved_bytes: reserved,
            ooms: r.ooms,
            stands_out,
            reasons,
            differing_sites,
        });
    }

    // Aggregate the per-rank reports.
    let mut totals = Totals::default();
    let mut sites: BTreeMap<(SiteRef, Option<String>), Site> = BTreeMap::new();
    let mut no_stack: Option<NoStack> = None;
    let mut ooms: Vec<Oom> = Vec::new();
    let mut patterns: Vec<Pattern> = Vec::new();
    let mut trace = Trace::default();
    let mut file_bytes = 0;
    let mut rank_timelines = Vec::new();
    for (rank, _, r) in &res {
        let rep = &r.report;
        totals.merge(&rep.totals);
        file_bytes += rep.source.file_bytes;
        for s in &rep.sites {
            let key = (s.site_ref(), s.library.as_ref().map(|l| l.label()));
            let e = sites.entry(key).or_insert_with(|| Site {
                bytes: 0,
                blocks: 0,
                ..s.clone()
            });
            e.bytes = e.bytes.saturating_add(s.bytes);
            e.blocks += s.blocks;
        }
        if let Some(n) = &rep.no_stack {
            let e = no_stack.get_or_insert_with(|| NoStack {
                bytes: 0,
                blocks: 0,
                no_python_frame_bytes: 0,
                before_history_bytes: 0,
                ..n.clone()
            });
            e.bytes = e.bytes.saturating_add(n.bytes);
            e.blocks += n.blocks;
            e.stacks_recorded |= n.stacks_recorded;
            e.no_python_frame_bytes = e
                .no_python_frame_bytes
                .saturating_add(n.no_python_frame_bytes);
            e.before_history_bytes = e
                .before_history_bytes
                .saturating_add(n.before_history_bytes);
        }
        for o in &rep.oom {
            let mut o = o.clone();
            o.rank = Some(*rank);
            ooms.push(o);
        }
        for p in &rep.patterns {
            if let Some(q) = patterns.iter_mut().find(|q| q.name == p.name) {
                q.ranks.push(*rank);
            } else {
                let mut p = p.clone();
                p.evidence = p
                    .evidence
                    .iter()
                    .map(|e| format!("rank {rank}: {e}"))
                    .collect();
                p.ranks = vec![*rank];
                patterns.push(p);
            }
        }
        trace.present |= rep.trace.present;
        trace.kept_events += rep.trace.kept_events;
        trace.dropped += rep.trace.dropped;
        trace.total_events += rep.trace.total_events;
        trace.max_trace_events = rep.trace.max_trace_events;
        for (k, v) in &rep.trace.counts {
            *trace.counts.entry(k.clone()).or_default() += v;
        }
        trace.peak_live_bytes = trace.peak_live_bytes.max(rep.trace.peak_live_bytes);
        if let Some(tl) = &rep.timeline {
            rank_timelines.push((*rank, tl.clone()));
        }
    }
    for p in &mut patterns {
        if p.ranks.len() > 1 {
            let list: Vec<String> = p.ranks.iter().map(|r| r.to_string()).collect();
            p.evidence
                .push(format!("seen on ranks {}", list.join(", ")));
        }
    }
    let live = totals.allocated_bytes;
    if let Some(n) = &mut no_stack {
        n.percent = super::report::pct(n.bytes, live);
    }
    let mut sites: Vec<Site> = sites.into_values().collect();
    for s in &mut sites {
        s.percent = super::report::pct(s.bytes, live);
    }
    sites.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.site_ref().cmp(&b.site_ref())));
    let sites_total = sites.len();
    sites.truncate(opts.top);
    let first = &res[0].2.report;
    let mut categories = BTreeMap::new();
    for (_, _, r) in &res {
        for (c, b) in &r.report.categories {
            *categories.entry(*c).or_default() += b;
        }
    }
    Report {
        schema: super::report::SCHEMA,
        mode: "ranks".into(),
        source: super::report::Source {
            path: dir.display().to_string(),
            file_bytes,
            layout: first.source.layout.clone(),
        },
        device: None,
        device_note: "each rank's file analysed on the device its segments are on".into(),
        devices: Vec::new(),
        totals,
        streams: Vec::new(),
        categories,
        no_stack,
        sites,
        sites_total,
        trace,
        oom: ooms,
        patterns,
        diff: None,
        ranks: rows,
        rank_files: files,
        allocator_settings: first.allocator_settings.clone(),
        internal_patterns: first.internal_patterns.clone(),
        timeline: None,
        segment_map: Vec::new(),
        history: Vec::new(),
        peak_step: None,
        rank_timelines,
    }
}

/// The sites that make rank `i` differ from the median of the other ranks.
fn differing(res: &[(u32, PathBuf, RankResult)], i: usize, sign: f64) -> Vec<RankSiteDelta> {
    let mine: BTreeMap<SiteRef, u64> = res[i]
        .2
        .report
        .sites
        .iter()
        .map(|s| (s.site_ref(), s.bytes))
        .collect();
    let mut keys: Vec<SiteRef> = mine.keys().cloned().collect();
    for (j, (_, _, r)) in res.iter().enumerate() {
        if j != i {
            keys.extend(r.report.sites.iter().map(|s| s.site_ref()));
        }
    }
    keys.sort();
    keys.dedup();
    let mut out: Vec<RankSiteDelta> = keys
        .into_iter()
        .map(|k| {
            let others: Vec<u64> = res
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, (_, _, r))| {
                    r.report
                        .sites
                        .iter()
                        .filter(|s| s.site_ref() == k)
                        .fold(0u64, |a, s| a.saturating_add(s.bytes))
                })
                .collect();
            let m = median(others);
            let b = mine.get(&k).copied().unwrap_or(0);
            RankSiteDelta {
                file: k.file,
                line: k.line,
                function: k.function,
                bytes: b,
                median_bytes: m,
                delta_bytes: (b as i128 - m as i128).clamp(i64::MIN as i128, i64::MAX as i128)
                    as i64,
            }
        })
        .filter(|d| d.delta_bytes != 0 && (sign == 0.0 || (d.delta_bytes > 0) == (sign > 0.0)))
        .collect();
    out.sort_by(|a, b| {
        b.delta_bytes
            .abs()
            .cmp(&a.delta_bytes.abs())
            .then(a.file.cmp(&b.file))
    });
    out.truncate(5);
    out
}
