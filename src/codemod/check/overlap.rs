//! Where edits may go among each other and among other rule sets' regions: an insertion
//! may sit right before or after another set's region, never inside it, and a
//! replacement may not touch one (`Foreign`); two rules may not edit the same lines
//! (`Overlap`, by `edit::overlaps`, the test `edit::apply` refuses overlaps by).

use std::ops::Range;

use super::{Pass, Stage};
use crate::codemod::context::FileContext;
use crate::codemod::edit::{self, Region};
use crate::codemod::failure::{Failure, FailureKind};
use crate::codemod::fix::Fix;

/// The pass: a fix with a region inside another rule set's region is refused.
pub(in crate::codemod) struct Foreign;

impl Pass for Foreign {
    fn stage(&self) -> Stage {
        Stage::Edits
    }

    fn check(&self, cx: &FileContext, fixes: &[Fix]) -> Vec<Failure> {
        fixes
            .iter()
            .filter_map(|f| {
                let hit = inside_foreign(&f.regions, cx.foreign)?;
                Some(cx.fail_rule(
                    f.rule,
                    FailureKind::Placement,
                    Some(cx.src.line_of(hit.start)),
                    "the edit would land inside a region of another rule set; remove that first",
                ))
            })
            .collect()
    }
}

/// The pass: of two fixes that edit the same lines, the second (in the order they apply)
/// is refused, naming the first.
pub(in crate::codemod) struct Overlap;

impl Pass for Overlap {
    fn stage(&self) -> Stage {
        Stage::Together
    }

    fn check(&self, cx: &FileContext, fixes: &[Fix]) -> Vec<Failure> {
        let regions: Vec<(usize, &Region)> = fixes
            .iter()
            .flat_map(|f| f.regions.iter().map(move |r| (f.rule, r)))
            .collect();
        let edits: Vec<&Region> = regions.iter().map(|&(_, r)| r).collect();
        edit::overlaps(&edits, &edit::order(&edits))
            .into_iter()
            .map(|(a, b)| {
                let first = &cx.plan.rule(regions[a].0).id;
                cx.fail_rule(
                    regions[b].0,
                    FailureKind::Overlap,
                    Some(cx.src.line_of(edits[b].start)),
                    format!("edits the same lines as rule {first}"),
                )
            })
            .collect()
    }
}

/// The first of `regions` that lands inside one of the `foreign` regions.
fn inside_foreign<'e>(regions: &'e [Region], foreign: &[Range<usize>]) -> Option<&'e Region> {
    let inside = |e: &Region, f: &Range<usize>| {
        if e.start == e.end {
            f.start < e.start && e.start < f.end
        } else {
            e.start < f.end && f.start < e.end
        }
    };
    regions
        .iter()
        .find(|e| foreign.iter().any(|f| inside(e, f)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codemod::edit::{Change, Shape};
    use crate::codemod::fix::tests::region;

    #[test]
    fn insertions_may_touch_a_foreign_region_replacements_may_not() {
        let edit = |start, end| region(start..end, "", &[], Shape::Statements);
        let foreign = vec![10..20, 40..50];
        assert!(inside_foreign(&[edit(10, 10), edit(20, 20)], &foreign).is_none());
        let inside = [edit(20, 20), edit(15, 15)];
        assert_eq!(inside_foreign(&inside, &foreign).map(|r| r.start), Some(15));
        assert_eq!(
            inside_foreign(&[edit(5, 11)], &foreign).map(|r| r.range()),
            Some(5..11)
        );
    }
}
