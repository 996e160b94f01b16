//! Two snapshots of one run: which allocation sites grew. Sites whose live bytes and
//! block count both grew come first (leaking or retaining), then one-time growth,
//! then shrinkage.

use std::collections::BTreeMap;

use super::analysis::Analysis;
use super::report::{Diff, DiffSite, SiteRef, Source};
use super::sites::Category;

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
        before: before_src,
        after: after_src,
        totals_before: before.totals.clone(),
        totals_after: after.totals.clone(),
        sites,
        unchanged_sites: unchanged,
    }
}
