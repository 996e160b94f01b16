//! Where edits may go among each other and among other rule sets' regions: an insertion
//! may sit right before or after another set's region, never inside it, and a
//! replacement may not touch one; two rules may not edit the same lines.

use std::ops::Range;

use crate::codemod::edit::Edit;

/// The first edit of `edits` that lands inside one of the `foreign` regions.
pub(in crate::codemod) fn inside_foreign<'e>(
    edits: &'e [Edit],
    foreign: &[Range<usize>],
) -> Option<&'e Edit> {
    let inside = |e: &Edit, f: &Range<usize>| {
        if e.start == e.end {
            f.start < e.start && e.start < f.end
        } else {
            e.start < f.end && f.start < e.end
        }
    };
    edits.iter().find(|e| foreign.iter().any(|f| inside(e, f)))
}

/// Pairs of edits (in `edits`, sorted by start) that edit the same lines: (the first, the
/// one that overlaps it).
pub(in crate::codemod) fn overlapping(edits: &[Edit]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, pair) in edits.windows(2).enumerate() {
        let (a, b) = (&pair[0], &pair[1]);
        if a.end > b.start || (a.start == b.start && a.end != a.start && b.end != b.start) {
            out.push((i, i + 1));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codemod::edit::Shape;

    fn edit(start: usize, end: usize) -> Edit {
        Edit {
            start,
            end,
            lines: Vec::new(),
            checked: Vec::new(),
            rule_index: 0,
            stash_eols: Vec::new(),
            base: String::new(),
            shape: Shape::Statements,
            original: Vec::new(),
        }
    }

    #[test]
    fn insertions_may_touch_a_foreign_region_replacements_may_not() {
        let foreign = vec![10..20, 40..50];
        assert!(inside_foreign(&[edit(10, 10), edit(20, 20)], &foreign).is_none());
        assert!(inside_foreign(&[edit(15, 15)], &foreign).is_some());
        assert!(inside_foreign(&[edit(5, 11)], &foreign).is_some());
    }

    #[test]
    fn two_replacements_of_the_same_lines_overlap_two_insertions_do_not() {
        assert!(overlapping(&[edit(5, 5), edit(5, 5)]).is_empty());
        assert_eq!(overlapping(&[edit(5, 9), edit(5, 9)]), vec![(0, 1)]);
        assert_eq!(overlapping(&[edit(5, 9), edit(7, 7)]), vec![(0, 1)]);
        assert!(overlapping(&[edit(5, 9), edit(9, 9)]).is_empty());
    }
}
