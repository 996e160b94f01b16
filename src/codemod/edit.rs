//! What planning works with: the context rules are planned in, one edit of a file (a
//! region to put in), and the line arithmetic edits are placed by.

use std::collections::BTreeMap;

use crate::python::style::Style;
use crate::rules::CompiledSet;

/// What planning needs besides the file: the rule set and the parameter values.
pub struct PlanContext<'a> {
    pub rule_set: &'a CompiledSet,
    /// Template parameters (`RANKS` -> `{3, 14}`).
    pub params: &'a BTreeMap<String, String>,
    /// Top-level packages isort treats as first party (the rule set's and the checkout's own).
    pub first_party: &'a [String],
    /// The checkout's formatting settings.
    pub style: &'a Style,
    /// Rules that cannot be planned (by index in the rule set), and why.
    pub blocked: &'a BTreeMap<usize, super::roles::Blocked>,
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

/// One region to put in, as an edit of the stripped text.
pub(super) struct Edit {
    pub(super) start: usize,
    pub(super) end: usize,
    /// The region's lines, markers included, without line endings.
    pub(super) lines: Vec<String>,
    /// Indices of `lines` whose reads must be checked (template code, not markers,
    /// kept originals or code copied from the original statement).
    pub(super) checked: Vec<usize>,
    pub(super) rule_index: usize,
    /// The line ending of each kept original (`lines[1..]`): each `# |` line keeps the
    /// ending its original had, so a CRLF line in an LF file comes back as it was.
    pub(super) stash_eols: Vec<&'static str>,
    /// The indentation every line of the region starts with (markers included).
    pub(super) base: String,
    pub(super) shape: Shape,
    /// Indices of `lines` copied from the statement it replaces (`{ORIGINAL}`): the
    /// host's own code, still there.
    pub(super) original: Vec<usize>,
}

impl Edit {
    /// Whether the region takes a statement of the host out without putting it back
    /// (`replace` without `{ORIGINAL}`): the host's own code there is gone.
    pub(super) fn drops_host_code(&self) -> bool {
        self.end > self.start && self.shape == Shape::Statements && self.original.is_empty()
    }
}

pub(super) fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

pub(super) fn next_line_start(text: &str, at: usize) -> usize {
    text[at..].find('\n').map_or(text.len(), |i| at + i + 1)
}
