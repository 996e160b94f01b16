//! Edits of a file's text, as ruff's `Edit`: a byte range and what replaces it. A file's
//! edits are applied by one function, `apply`: in order, refusing any two that touch the
//! same bytes. A region the rules put in (`Region`) is such an edit; so is a plain `Edit`.

use std::ops::Range;

/// A byte range of a text and what replaces it (an empty range: an insertion).
pub trait Change {
    /// The bytes replaced.
    fn range(&self) -> Range<usize>;
    /// Append the replacement text to `out`.
    fn write_to(&self, out: &mut String);
}

impl<C: Change + ?Sized> Change for &C {
    fn range(&self) -> Range<usize> {
        (**self).range()
    }
    fn write_to(&self, out: &mut String) {
        (**self).write_to(out)
    }
}

/// An edit as plain data: the bytes it replaces and the text that replaces them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub range: Range<usize>,
    pub content: String,
}

impl Edit {
    /// Any change as plain data.
    pub fn of(change: &impl Change) -> Edit {
        let mut content = String::new();
        change.write_to(&mut content);
        Edit {
            range: change.range(),
            content,
        }
    }
}

impl Change for Edit {
    fn range(&self) -> Range<usize> {
        self.range.clone()
    }
    fn write_to(&self, out: &mut String) {
        out.push_str(&self.content)
    }
}

/// Where one applied edit went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Landed {
    /// The edit's index in the edits given.
    pub index: usize,
    /// The bytes it replaced, in the text given.
    pub replaced: Range<usize>,
    /// The length of its text in the new text (which starts at `replaced.start` shifted by
    /// the edits before it).
    pub new_len: usize,
    /// The 1-based line of the new text its text starts on.
    pub first_line: usize,
}

/// A text with its edits applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub text: String,
    /// Every edit, in the order applied (see `order`).
    pub landed: Vec<Landed>,
}

impl Applied {
    /// Each edit as `(start, old_end, new_len)`, in the order applied: what a reparse of
    /// the new text takes.
    pub fn spans(&self) -> Vec<(usize, usize, usize)> {
        self.landed
            .iter()
            .map(|l| (l.replaced.start, l.replaced.end, l.new_len))
            .collect()
    }
}

/// Why a text's edits cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// Two edits touch the same bytes (in the order applied: `first`, then `second`).
    #[error("the edit of bytes {second:?} overlaps the edit of bytes {first:?}")]
    Overlap {
        first: Range<usize>,
        second: Range<usize>,
    },
    /// An edit's range is backwards, past the end of the text, or splits a character.
    #[error("the edit of bytes {range:?} is not a range of the text ({len} bytes)")]
    OutOfRange { range: Range<usize>, len: usize },
}

/// The order edits apply in, as indices into `edits`: by start; at one byte, insertions
/// before the replacement that starts there; edits of one place keep the order given
/// (callers give them in the rules' order).
pub fn order<C: Change>(edits: &[C]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..edits.len()).collect();
    order.sort_by_key(|&i| {
        let r = edits[i].range();
        (r.start, r.end != r.start)
    });
    order
}

/// The edits (indices into `edits`, taken in `order`) that touch the bytes of the edit
/// applied just before them: (that one, the one that overlaps it). Two insertions at one
/// byte do not overlap; an insertion where a replacement starts or ends does not.
pub fn overlaps<C: Change>(edits: &[C], order: &[usize]) -> Vec<(usize, usize)> {
    order
        .windows(2)
        .filter(|w| edits[w[0]].range().end > edits[w[1]].range().start)
        .map(|w| (w[0], w[1]))
        .collect()
}

/// `text` with `edits` applied, in `order`'s order. Refuses (and applies nothing) when two
/// edits overlap or one is not a range of the text.
pub fn apply<C: Change>(text: &str, edits: &[C]) -> Result<Applied, ApplyError> {
    for e in edits {
        let range = e.range();
        let fits = range.start <= range.end
            && range.end <= text.len()
            && text.is_char_boundary(range.start)
            && text.is_char_boundary(range.end);
        if !fits {
            return Err(ApplyError::OutOfRange {
                range,
                len: text.len(),
            });
        }
    }
    let order = order(edits);
    if let Some(&(first, second)) = overlaps(edits, &order).first() {
        return Err(ApplyError::Overlap {
            first: edits[first].range(),
            second: edits[second].range(),
        });
    }
    let mut out = String::with_capacity(text.len() + edits.len() * 256);
    let mut landed = Vec::with_capacity(edits.len());
    let (mut cursor, mut line) = (0, 1);
    for index in order {
        let replaced = edits[index].range();
        let kept = &text[cursor..replaced.start];
        line += memchr::memchr_iter(b'\n', kept.as_bytes()).count();
        out.push_str(kept);
        let start = out.len();
        edits[index].write_to(&mut out);
        let new = &out.as_bytes()[start..];
        landed.push(Landed {
            index,
            new_len: new.len(),
            first_line: line,
            replaced: replaced.clone(),
        });
        line += memchr::memchr_iter(b'\n', new).count();
        cursor = replaced.end;
    }
    out.push_str(&text[cursor..]);
    Ok(Applied { text: out, landed })
}

/// What a region's lines are, for the check that they parse on their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// Whole statements of a block (or of the module), at the block's indentation.
    Statements,
    /// Parameters inserted into a parameter list laid out one per line.
    Parameters,
    /// A function's header, from `def` to its colon, rewritten.
    Signature,
    /// One import line, its marker at its end.
    Import,
}

impl Shape {
    /// Whether the region adds parameters to a function (bound in its body).
    pub(super) fn adds_parameters(self) -> bool {
        matches!(self, Shape::Parameters | Shape::Signature)
    }
}

/// One marked region to put in, as an edit of the stripped text: its lines, and what they
/// are (for the checks).
#[derive(Debug, Clone)]
pub(crate) struct Region {
    pub(super) start: usize,
    pub(super) end: usize,
    /// The region's lines, markers included, without line endings.
    pub(super) lines: Vec<String>,
    /// Indices of `lines` whose reads must be checked (template code, not markers,
    /// kept originals or code copied from the original statement).
    pub(super) checked: Vec<usize>,
    /// The line ending of each kept original (`lines[1..]`): each `# |` line keeps the
    /// ending its original had, so a CRLF line in an LF file comes back as it was.
    pub(super) stash_eols: Vec<&'static str>,
    /// The line ending of every other line: the file's (see `FileContext::eol`).
    pub(super) eol: &'static str,
    /// The indentation every line of the region starts with (markers included).
    pub(super) base: String,
    pub(super) shape: Shape,
    /// Indices of `lines` copied from the statement it replaces (`{ORIGINAL}`): the
    /// host's own code, still there.
    pub(super) original: Vec<usize>,
    /// A byte of the stripped text in the scope the code lands in (the anchor statement's
    /// start, a statement of the body), for the name checks.
    pub(super) scope_at: usize,
}

impl Region {
    /// Whether the region takes a statement of the host out without putting it back
    /// (`replace` without `{ORIGINAL}`): the host's own code there is gone.
    pub(super) fn drops_host_code(&self) -> bool {
        self.end > self.start && self.shape == Shape::Statements && self.original.is_empty()
    }
}

/// A region's text is its lines, each ended: a kept original as it was, any other line
/// as the file's lines end.
impl Change for Region {
    fn range(&self) -> Range<usize> {
        self.start..self.end
    }
    fn write_to(&self, out: &mut String) {
        for (i, l) in self.lines.iter().enumerate() {
            out.push_str(l);
            let stashed = i.checked_sub(1).and_then(|k| self.stash_eols.get(k));
            out.push_str(stashed.copied().unwrap_or(self.eol));
        }
    }
}

/// The line ending of `text`, as ruff's `line-ending = "auto"`: its first line's.
pub(super) fn eol_of(text: &str) -> &'static str {
    match text.find('\n') {
        Some(i) if i > 0 && text.as_bytes()[i - 1] == b'\r' => "\r\n",
        _ => "\n",
    }
}

/// The ending of each line of `text` (its last line's too, which must have one).
pub(super) fn eols_of(text: &str) -> Vec<&'static str> {
    text.split_inclusive('\n')
        .map(|l| if l.ends_with("\r\n") { "\r\n" } else { "\n" })
        .collect()
}

pub(super) fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

pub(super) fn next_line_start(text: &str, at: usize) -> usize {
    text[at..].find('\n').map_or(text.len(), |i| at + i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(range: Range<usize>, content: &str) -> Edit {
        Edit {
            range,
            content: content.to_string(),
        }
    }

    fn landed(index: usize, replaced: Range<usize>, new_len: usize, first_line: usize) -> Landed {
        Landed {
            index,
            replaced,
            new_len,
            first_line,
        }
    }

    #[test]
    fn edits_apply_by_start_whatever_order_they_come_in() {
        let text = "a = 1\nb = 2\nc = 3\n";
        // Given back to front: a replacement of line 3, an insertion before line 1, an
        // insertion before line 2.
        let edits = [
            edit(12..18, "c = 30\n"),
            edit(0..0, "# top\n"),
            edit(6..6, "x = 0\ny = 0\n"),
        ];
        let got = apply(text, &edits).unwrap();
        assert_eq!(
            got,
            Applied {
                text: "# top\na = 1\nx = 0\ny = 0\nb = 2\nc = 30\n".into(),
                landed: vec![
                    landed(1, 0..0, 6, 1),
                    landed(2, 6..6, 12, 3),
                    landed(0, 12..18, 7, 6),
                ],
            }
        );
        assert_eq!(got.spans(), vec![(0, 0, 6), (6, 6, 12), (12, 18, 7)]);
    }

    #[test]
    fn at_one_byte_insertions_keep_their_order_and_come_before_a_replacement() {
        let text = "x\ny\n";
        let edits = [
            edit(2..4, "Y\n"),
            edit(2..2, "first\n"),
            edit(2..2, "second\n"),
            // An insertion where the replacement ends touches none of its bytes.
            edit(4..4, "end\n"),
        ];
        let got = apply(text, &edits).unwrap();
        assert_eq!(got.text, "x\nfirst\nsecond\nY\nend\n");
        assert_eq!(
            got.landed,
            vec![
                landed(1, 2..2, 6, 2),
                landed(2, 2..2, 7, 3),
                landed(0, 2..4, 2, 4),
                landed(3, 4..4, 4, 5),
            ]
        );
    }

    #[test]
    fn overlapping_edits_are_refused_whole() {
        let text = "0123456789\n";
        // A replacement and an insertion inside it.
        assert_eq!(
            apply(text, &[edit(5..5, "i"), edit(2..8, "r")]),
            Err(ApplyError::Overlap {
                first: 2..8,
                second: 5..5
            })
        );
        // Two replacements of the same bytes, and two that share one byte.
        assert_eq!(
            apply(text, &[edit(3..6, "a"), edit(3..6, "b")]),
            Err(ApplyError::Overlap {
                first: 3..6,
                second: 3..6
            })
        );
        assert_eq!(
            apply(text, &[edit(5..9, "b"), edit(1..6, "a")]),
            Err(ApplyError::Overlap {
                first: 1..6,
                second: 5..9
            })
        );
        // Every overlapping neighbour is named, in the order applied.
        let edits = [
            edit(5..5, ""),
            edit(3..6, ""),
            edit(0..4, ""),
            edit(6..7, ""),
        ];
        assert_eq!(overlaps(&edits, &order(&edits)), vec![(2, 1), (1, 0)]);
        let apart = [
            edit(5..5, ""),
            edit(0..4, ""),
            edit(6..7, ""),
            edit(4..4, ""),
        ];
        assert_eq!(
            overlaps(&apart, &order(&apart)),
            Vec::<(usize, usize)>::new()
        );
    }

    #[test]
    fn a_range_outside_the_text_or_inside_a_character_is_refused() {
        let text = "é = 1\n";
        // Past the end, backwards, inside the two bytes of `é`.
        #[allow(clippy::reversed_empty_ranges)]
        let ranges = [0..9, 4..3, 1..1];
        for range in ranges {
            assert_eq!(
                apply(text, &[edit(range.clone(), "x")]),
                Err(ApplyError::OutOfRange { range, len: 7 })
            );
        }
    }

    #[test]
    fn line_endings_and_a_last_line_without_one_are_kept_byte_for_byte() {
        // CRLF text, no line end at the end: the edits' own bytes and the text's stay.
        let text = "a = 1\r\nb = 2";
        let edits = [edit(7..7, "x = 0\r\n"), edit(12..12, "\r\n# end")];
        let got = apply(text, &edits).unwrap();
        assert_eq!(got.text, "a = 1\r\nx = 0\r\nb = 2\r\n# end");
        assert_eq!(
            got.landed,
            vec![landed(0, 7..7, 7, 2), landed(1, 12..12, 7, 3)]
        );
        // Nothing to apply: the text as it was.
        let none: [Edit; 0] = [];
        assert_eq!(apply(text, &none).unwrap().text, text);
    }

    #[test]
    fn a_region_ends_its_lines_as_the_file_does_and_its_kept_lines_as_they_were() {
        let region = Region {
            start: 4,
            end: 10,
            lines: vec![
                "# >>> open".into(),
                "# | kept crlf".into(),
                "# | kept lf".into(),
                "new()".into(),
                "# <<< close".into(),
            ],
            checked: vec![3],
            stash_eols: vec!["\r\n", "\n"],
            eol: "\n",
            base: String::new(),
            shape: Shape::Statements,
            original: Vec::new(),
            scope_at: 4,
        };
        assert_eq!(
            Edit::of(&region),
            edit(
                4..10,
                "# >>> open\n# | kept crlf\r\n# | kept lf\nnew()\n# <<< close\n"
            )
        );
        assert_eq!(eol_of("a\r\nb\n"), "\r\n");
        assert_eq!(eol_of("\nb\r\n"), "\n");
        assert_eq!(eols_of("a\r\nb\nc\r\n"), vec!["\r\n", "\n", "\r\n"]);
    }
}
