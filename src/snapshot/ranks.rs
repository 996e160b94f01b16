//! A directory of rank-local snapshots: which file is which rank, one row per rank,
//! and (only among ranks known to be peers: one stage and role) the ranks that stand out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::analysis::{Options, Totals};
use super::error::SnapshotError;
use super::report::{NoStack, Oom, Pattern, RankFile, RankRow, Report, Site, SiteRef, Trace};

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

/// The step the recipe writes into a step snapshot's name (`memory_snapshot_rank3_step40.pickle`).
pub fn step_from_name(name: &str) -> Option<u64> {
    let lower = name.to_ascii_lowercase();
    let at = lower.rfind("_step")? + "_step".len();
    let digits: String = lower[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
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
    // Ranks of different steps are not one moment of one run: never compared as if they were.
    let mut stepped = taken
        .values()
        .filter_map(|(n, _)| step_from_name(n).map(|s| (n.clone(), s)));
    if let Some((first, first_step)) = stepped.next()
        && let Some((second, second_step)) = stepped.find(|(_, s)| *s != first_step)
    {
        return Err(SnapshotError::DifferentSteps {
            dir: dir.display().to_string(),
            first,
            first_step,
            second,
            second_step,
        });
    }
    Ok((files, taken.into_iter().map(|(r, (_, p))| (r, p)).collect()))
}

pub struct RankResult {
    report: Report,
    peak: u64,
    ooms: u64,
}

/// Rank snapshots analysed at once: each holds its whole file's worth of memory, so the peak is
/// bounded by this, not by the number of ranks.
const RANKS_AT_ONCE: usize = 2;

/// Analyse every rank's file with `analyse` (`RANKS_AT_ONCE` at a time, the largest first),
/// in rank order. The first rank (in that order) that fails decides the error.
pub fn analyse_all(
    ranks: &[(u32, PathBuf)],
    analyse: impl Fn(&Path) -> Result<(Report, u64), SnapshotError> + Sync,
) -> Result<Vec<RankResult>, SnapshotError> {
    let size = |(_, p): &(u32, PathBuf)| std::fs::metadata(p).map_or(0, |m| m.len() as usize);
    crate::par::map_bounded(ranks, size, RANKS_AT_ONCE, |(_, path)| {
        analyse(path).map(|(report, peak)| {
            let ooms = report.oom.len() as u64;
            RankResult { report, peak, ooms }
        })
    })
    .into_iter()
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

    for (rank, path, r) in &res {
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
            reserved_bytes: r.report.totals.reserved_bytes,
            ooms: r.ooms,
            // A snapshot does not say which pipeline stage and role its rank has.
            peers: None,
            stands_out: false,
            peers_median_peak_bytes: None,
        });
    }
    mark_standouts(&mut rows);

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
            e.history_started_during_run |= n.history_started_during_run;
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
        findings: Vec::new(),
        gate: None,
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
        schedule: None,
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

/// Like with like: a rank stands out only against ranks of its own stage and role (`peers`),
/// and only among three or more of them; ranks whose peers are unknown are compared with none.
pub fn mark_standouts(rows: &mut [RankRow]) {
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if let Some(p) = &r.peers {
            groups.entry(p.clone()).or_default().push(i);
        }
    }
    for members in groups.values() {
        let peaks: Vec<f64> = members.iter().map(|&i| rows[i].peak_bytes as f64).collect();
        // 10% of the median, and at least 64 MiB: below that, allocator rounding.
        for (j, median) in crate::findings::outliers(&peaks, 0.10, 64.0 * 1048576.0) {
            let row = &mut rows[members[j]];
            row.stands_out = true;
            row.peers_median_peak_bytes = Some(median as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rank: u32, peers: Option<&str>, gib: f64) -> RankRow {
        RankRow {
            rank,
            file: String::new(),
            device: 0,
            peak_bytes: (gib * 1073741824.0) as u64,
            allocated_bytes: 0,
            reserved_bytes: 0,
            ooms: 0,
            peers: peers.map(str::to_string),
            stands_out: false,
            peers_median_peak_bytes: None,
        }
    }

    #[test]
    fn stands_out_only_among_three_peers_of_one_stage() {
        // Unknown stages: no claim, however different.
        let mut rows = vec![row(0, None, 10.0), row(1, None, 10.0), row(3, None, 17.0)];
        mark_standouts(&mut rows);
        assert!(rows.iter().all(|r| !r.stands_out));
        // Two peers: neither is the odd one; the other stage is not compared with them.
        let mut rows = vec![
            row(0, Some("pp 0"), 10.0),
            row(1, Some("pp 0"), 17.0),
            row(2, Some("pp 1"), 10.0),
            row(3, Some("pp 1"), 10.2),
            row(4, Some("pp 1"), 14.0),
        ];
        mark_standouts(&mut rows);
        let out: Vec<u32> = rows
            .iter()
            .filter(|r| r.stands_out)
            .map(|r| r.rank)
            .collect();
        assert_eq!(out, vec![4]);
        assert_eq!(
            rows[4].peers_median_peak_bytes,
            Some((10.2 * 1073741824.0) as u64)
        );
    }
}
