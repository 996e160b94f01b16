//! Two snapshots of one run: which allocation sites grew. Sites whose live bytes and
//! block count both grew come first (leaking or retaining), then one-time growth,
//! then shrinkage.

use std::collections::BTreeMap;

use super::analysis::Analysis;
use super::ranks::rank_from_name;
use super::report::{Diff, DiffSite, SiteRef, Source};
use super::sites::Category;
use crate::findings::{Unit, Where};
use crate::gate::{self, Gate, Outcome, Paired};

#[derive(Default, Clone, Copy)]
struct Side {
    bytes: u64,
    blocks: u64,
}

pub fn diff(before: &Analysis, after: &Analysis, before_src: Source, after_src: Source) -> Diff {
    let mut by: BTreeMap<SiteRef, (Category, Side, Side)> = BTreeMap::new();
    for s in &before.sites {
        let k = SiteRef::of(before.snap, s.site);
        let e = by
            .entry(k)
            .or_insert((s.category, Side::default(), Side::default()));
        e.1.bytes = e.1.bytes.saturating_add(s.bytes);
        e.1.blocks += s.blocks;
    }
    for s in &after.sites {
        let k = SiteRef::of(after.snap, s.site);
        let e = by
            .entry(k)
            .or_insert((s.category, Side::default(), Side::default()));
        e.0 = s.category;
        e.2.bytes = e.2.bytes.saturating_add(s.bytes);
        e.2.blocks += s.blocks;
    }
    // Sites the later trace shows retaining allocations over several steps.
    let retaining: Vec<SiteRef> = after
        .trace
        .as_ref()
        .map(|t| {
            t.retained
                .iter()
                .filter(|r| r.steps.len() >= 2)
                .map(|r| SiteRef::of(after.snap, r.site))
                .collect()
        })
        .unwrap_or_default();

    let mut growing = Vec::new();
    let mut one_time = Vec::new();
    let mut shrinking = Vec::new();
    let mut unchanged = 0;
    for (k, (category, b, a)) in by {
        let verdict =
            if a.bytes > b.bytes && a.blocks > b.blocks && (b.blocks > 0 || retaining.contains(&k))
            {
                "growing"
            } else if a.bytes > b.bytes {
                "one_time"
            } else if a.bytes < b.bytes {
                "shrinking"
            } else {
                unchanged += 1;
                continue;
            };
        let d = DiffSite {
            file: k.file,
            line: k.line,
            function: k.function,
            category,
            bytes_before: b.bytes,
            bytes_after: a.bytes,
            blocks_before: b.blocks,
            blocks_after: a.blocks,
            delta_bytes: (a.bytes as i128 - b.bytes as i128)
                .clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            verdict: verdict.into(),
        };
        match verdict {
            "growing" => growing.push(d),
            "one_time" => one_time.push(d),
            _ => shrinking.push(d),
        }
    }
    growing.sort_by_key(|x| std::cmp::Reverse(x.delta_bytes));
    one_time.sort_by_key(|x| std::cmp::Reverse(x.delta_bytes));
    shrinking.sort_by_key(|x| x.delta_bytes);
    let mut sites = growing;
    sites.extend(one_time);
    sites.extend(shrinking);
    Diff {
        device: after.device,
        rank_before: rank_of(&before_src.path),
        rank_after: rank_of(&after_src.path),
        peak_before: before.peak_bytes(),
        peak_after: after.peak_bytes(),
        peak_reserved_before: peak_reserved(before),
        peak_reserved_after: peak_reserved(after),
        categories_before: with_stack(before),
        categories_after: with_stack(after),
        before: before_src,
        after: after_src,
        totals_before: before.totals.clone(),
        totals_after: after.totals.clone(),
        sites,
        unchanged_sites: unchanged,
    }
}

fn rank_of(path: &str) -> Option<u32> {
    let name = std::path::Path::new(path).file_name()?.to_str()?;
    rank_from_name(name)
}

/// Reserved at the snapshot or, higher, at the trace's peak.
fn peak_reserved(a: &Analysis) -> u64 {
    let now = a.totals.reserved_bytes;
    a.trace.as_ref().map_or(now, |t| t.reserved_peak.max(now))
}

fn with_stack(a: &Analysis) -> BTreeMap<Category, u64> {
    a.category_bytes
        .iter()
        .filter(|(c, _)| **c != Category::NoStack)
        .map(|(c, b)| (*c, *b))
        .collect()
}

/// `--gate PCT`: the rank's peak allocated and reserved, live and reserved at the snapshot, and
/// live bytes per category, each paired before and after. Two files of different ranks are not
/// one figure measured twice: the gate is refused.
pub fn gate(d: &Diff, g: Gate) -> Outcome {
    let mut refusals = Vec::new();
    if let (Some(b), Some(a)) = (d.rank_before, d.rank_after)
        && a != b
    {
        refusals.push(format!(
            "rank {b} only in the before snapshot and rank {a} only in the after one"
        ));
    }
    let place = d.rank_after.or(d.rank_before).map_or_else(
        || Where::default().at(format!("device {}", d.device)),
        |r| Where::rank(i64::from(r)),
    );
    let pair = |figure: &str, before: u64, after: u64| Paired {
        place: place.clone(),
        figure: figure.into(),
        unit: Unit::Bytes,
        before: before as f64,
        after: after as f64,
    };
    let mut figures = vec![
        pair("peak allocated", d.peak_before, d.peak_after),
        pair(
            "peak reserved",
            d.peak_reserved_before,
            d.peak_reserved_after,
        ),
        pair(
            "allocated at the snapshot",
            d.totals_before.allocated_bytes,
            d.totals_after.allocated_bytes,
        ),
        pair(
            "reserved at the snapshot",
            d.totals_before.reserved_bytes,
            d.totals_after.reserved_bytes,
        ),
    ];
    let cats: std::collections::BTreeSet<Category> = d
        .categories_before
        .keys()
        .chain(d.categories_after.keys())
        .copied()
        .collect();
    for c in cats {
        let get = |m: &BTreeMap<Category, u64>| m.get(&c).copied().unwrap_or(0);
        figures.push(pair(
            &format!("allocated, {}", c.name()),
            get(&d.categories_before),
            get(&d.categories_after),
        ));
    }
    gate::judge(g, figures, refusals)
}
