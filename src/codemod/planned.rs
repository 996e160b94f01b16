//! The planned file: the stripped text with every fix applied (by `edit::apply`), and each
//! region where it landed, its code parsed on its own (`Block`) and read against the
//! original file's tree: the file is parsed once. The checks of the planned code (syntax,
//! names, bindings) read this.

use std::ops::Range;

use super::edit::{self, ApplyError, Region, Shape};
use super::markers;
use crate::kept::Kept;
use crate::python::Source;

/// The code of one edit as a module of its own: the region's lines without their base
/// indentation (a parameter list or a header wrapped so that it parses), and where each
/// of the region's lines starts in it.
pub(super) struct Block {
    pub(super) src: Source,
    /// Byte offset in `src` of each line of the region.
    pub(super) line_starts: Vec<usize>,
    /// What it reads and binds (found once, for the name and the binding checks).
    facts: std::cell::OnceCell<Facts>,
}

/// A block's reads and bindings.
pub(super) struct Facts {
    pub(super) open: Vec<crate::python::names::OpenRead>,
    pub(super) bindings: Vec<crate::python::binds::LevelBinding>,
}

impl Block {
    /// The block of `edit`, or None when a line of it does not start with the region's
    /// indentation (then only the whole file's parse can say what it is).
    pub(super) fn of(edit: &Region) -> Option<Block> {
        let (head, indent, tail) = match edit.shape {
            Shape::Statements | Shape::Import => ("", "", ""),
            // One parameter per line, in a list of its own.
            Shape::Parameters => ("def _(\n", "    ", "): pass\n"),
            // `def f(...):` with a body.
            Shape::Signature => ("", "", "    pass\n"),
        };
        let mut text = String::with_capacity(
            head.len() + tail.len() + edit.lines.iter().map(|l| l.len() + 1).sum::<usize>(),
        );
        text.push_str(head);
        let mut line_starts = Vec::with_capacity(edit.lines.len());
        for (i, line) in edit.lines.iter().enumerate() {
            line_starts.push(text.len());
            // The region's own comment lines (its markers, the originals it keeps after
            // `# |`) are comments wherever they stand: left out of the parse.
            let own_comment = edit.shape != Shape::Signature
                && (markers::is_marker_line(line) || i > 0 && line.trim_start().starts_with("# |"));
            if own_comment && !edit.original.contains(&i) {
                text.push('\n');
                continue;
            }
            let rest = match line.strip_prefix(edit.base.as_str()) {
                Some(rest) => rest,
                // A blank line, or a line of a string copied from the original: text,
                // whatever its indentation.
                None if line.trim().is_empty() || edit.original.contains(&i) => line.as_str(),
                None => return None,
            };
            if !rest.is_empty() {
                text.push_str(indent);
            }
            text.push_str(rest);
            text.push('\n');
        }
        text.push_str(tail);
        Some(Block {
            src: Source::parse(text),
            line_starts,
            facts: std::cell::OnceCell::new(),
        })
    }

    fn facts(&self) -> &Facts {
        self.facts.get_or_init(|| {
            let f = crate::python::names::code_facts(&self.src);
            Facts {
                open: f.open,
                bindings: f
                    .level
                    .into_iter()
                    .map(|(name, at, module)| crate::python::binds::LevelBinding {
                        name,
                        at,
                        module,
                    })
                    .collect(),
            }
        })
    }

    /// What the code binds at the level of the scope it lands in.
    pub(super) fn bindings(&self) -> &[crate::python::binds::LevelBinding] {
        &self.facts().bindings
    }

    /// The reads in `ranges` the code does not bind before them.
    pub(super) fn open_reads_in(
        &self,
        ranges: &[Range<usize>],
    ) -> impl Iterator<Item = &crate::python::names::OpenRead> {
        self.facts()
            .open
            .iter()
            .filter(move |r| ranges.iter().any(|g| g.contains(&r.at)))
    }

    /// The region's line (0-based) holding byte `at` of the block.
    pub(super) fn line_of(&self, at: usize) -> usize {
        self.line_starts
            .partition_point(|&s| s <= at)
            .saturating_sub(1)
    }

    /// The byte ranges in the block of the region's lines `lines`.
    pub(super) fn ranges_of(&self, lines: &[usize]) -> Vec<Range<usize>> {
        lines
            .iter()
            .filter_map(|&i| {
                let start = *self.line_starts.get(i)?;
                let end = self
                    .line_starts
                    .get(i + 1)
                    .copied()
                    .unwrap_or(self.src.text.len());
                Some(start..end)
            })
            .collect()
    }
}

/// A region as the checks see it, in the order the regions are applied.
pub(super) struct Placed<'a> {
    pub(super) edit: &'a Region,
    /// The index in the rule set of the rule it comes from.
    pub(super) rule: usize,
    /// Its place among the regions that go to the same byte (1-based).
    pub(super) seq: usize,
    /// 1-based line of the region's first line in the planned text.
    pub(super) first_line: usize,
    pub(super) block: Option<Block>,
}

impl Placed<'_> {
    /// Where the code goes, for the name checks.
    pub(super) fn point(&self) -> crate::python::host::Point {
        crate::python::host::Point {
            scope_at: self.edit.scope_at,
            order: (self.edit.start, self.seq),
        }
    }

    /// Whether the names and bindings of this region's code are checked: template code in
    /// a block of statements.
    pub(super) fn has_code(&self) -> bool {
        self.edit.shape == Shape::Statements && !self.edit.checked.is_empty()
    }
}

/// The stripped text with the fixes applied.
pub(super) struct Planned<'a> {
    /// The planned text.
    pub(super) text: String,
    /// Each region as `(start, old_end, new_len)`, for a reparse of the planned text.
    pub(super) spans: Vec<(usize, usize, usize)>,
    /// Every region, in the order applied. The parses of the regions' code are many small
    /// allocations: left to the system when the process ends next (see `kept::Kept`).
    pub(super) placed: Kept<Vec<Placed<'a>>>,
}

impl<'a> Planned<'a> {
    /// `stripped` with `regions` (each with the index of its rule, in the rules' order)
    /// applied.
    pub(super) fn new(
        stripped: &str,
        regions: &[(usize, &'a Region)],
    ) -> Result<Planned<'a>, ApplyError> {
        let edits: Vec<&Region> = regions.iter().map(|&(_, r)| r).collect();
        let applied = edit::apply(stripped, &edits)?;
        let spans = applied.spans();
        let mut seq = 0;
        let mut previous = None;
        let placed = applied
            .landed
            .iter()
            .map(|l| {
                let (rule, edit) = regions[l.index];
                seq = if previous == Some(l.replaced.start) {
                    seq + 1
                } else {
                    1
                };
                previous = Some(l.replaced.start);
                Placed {
                    edit,
                    rule,
                    seq,
                    first_line: l.first_line,
                    block: Block::of(edit),
                }
            })
            .collect();
        Ok(Planned {
            text: applied.text,
            spans,
            placed: Kept::new(placed),
        })
    }
}
