//! NVTX range names the way people read them.
//!
//! With `--pytorch=autograd-nvtx` / `autograd-shapes-nvtx` nsys wraps the run in
//! `torch.autograd.profiler.emit_nvtx`, and PyTorch names every range with
//! `torch/csrc/profiler/util.cpp` `getNvtxStr`:
//!
//! ```text
//! NAME[, seq = N][, op_id = M][, sizes = [[4, 8], []]][, input_op_ids = [(12,0), (-1,-1)]]
//! ```
//!
//! `seq` is the autograd sequence number (forward op and its backward share it), `op_id` the
//! record-function handle (unique per call), `sizes` the input shapes (only with shapes) and
//! `input_op_ids` the producers of the inputs (only with shapes). Every range is unique, so the
//! names are grouped on `NAME` (and on `NAME` + `sizes` with `--by-shape`). The suffix is only
//! taken off when what follows the name parses as exactly that grammar to the end.
//!
//! Other per-instance counters (`step 12`, `iteration 3`) are handled by counter families: the
//! name with every digit run replaced by `N`. `nvtx` folds a family of names that differ in one
//! number into one row when it has many distinct names with about one instance each (names with
//! several numbers, such as `layer05.stage1_f`, stay apart), and any family at all once it
//! reaches thousands of names, so memory stays bounded.

use std::collections::HashMap;

/// A range text split into the name and what PyTorch appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split<'a> {
    pub name: &'a str,
    /// The `sizes = ...` value, when present.
    pub sizes: Option<&'a str>,
    /// Whether a PyTorch suffix was taken off.
    pub stripped: bool,
}

const CLAUSES: [&str; 5] = ["seq", "stashed seq", "op_id", "sizes", "input_op_ids"];

/// An integer (possibly negative) at the start of `s`; returns the rest.
fn integer(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    let mut i = usize::from(b.first() == Some(&b'-'));
    let digits_from = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    (i > digits_from).then(|| &s[i..])
}

/// A bracketed list at the start of `s` made only of `allowed` characters (nesting allowed);
/// returns (the list, the rest).
fn bracketed(s: &str, allowed: impl Fn(u8) -> bool) -> Option<(&str, &str)> {
    let b = s.as_bytes();
    if b.first() != Some(&b'[') {
        return None;
    }
    let mut depth = 0usize;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[..=i], &s[i + 1..]));
                }
            }
            c if allowed(c) => {}
            _ => return None,
        }
    }
    None
}

/// Parse `, clause = value` clauses in getNvtxStr's order to the end of `s`; returns the
/// `sizes` value. `None` when `s` is not exactly such a suffix.
fn suffix(mut s: &str) -> Option<Option<&str>> {
    let mut sizes = None;
    let mut next = 0; // clauses come in order, each at most once
    let mut any = false;
    while !s.is_empty() {
        let rest = s.strip_prefix(", ")?;
        let (k, after) = CLAUSES.iter().enumerate().skip(next).find_map(|(k, c)| {
            rest.strip_prefix(c)
                .and_then(|r| r.strip_prefix(" = "))
                .map(|r| (k, r))
        })?;
        next = k + 1;
        s = match CLAUSES[k] {
            "seq" | "stashed seq" | "op_id" => integer(after)?,
            "sizes" => {
                let (v, r) = bracketed(after, |c| {
                    c.is_ascii_digit() || matches!(c, b',' | b' ' | b'-')
                })?;
                sizes = Some(v);
                r
            }
            _ => {
                let (_, r) = bracketed(after, |c| {
                    c.is_ascii_digit() || matches!(c, b',' | b' ' | b'-' | b'(' | b')')
                })?;
                r
            }
        };
        any = true;
    }
    any.then_some(sizes)
}

/// Split a range text into PyTorch's name and suffix.
pub fn split(text: &str) -> Split<'_> {
    let mut from = 0;
    while let Some(i) = memchr::memmem::find(&text.as_bytes()[from..], b", ") {
        let at = from + i;
        if let Some(sizes) = suffix(&text[at..]) {
            return Split {
                name: &text[..at],
                sizes,
                stripped: true,
            };
        }
        from = at + 2;
    }
    Split {
        name: text,
        sizes: None,
        stripped: false,
    }
}

/// The counter family of a name: every run of ASCII digits replaced by `N`; `None` when the
/// name has no digits.
pub fn family(name: &str) -> Option<String> {
    if !name.bytes().any(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut out = String::with_capacity(name.len());
    let mut in_digits = false;
    for ch in name.chars() {
        if ch.is_ascii_digit() {
            if !in_digits {
                out.push('N');
            }
            in_digits = true;
        } else {
            out.push(ch);
            in_digits = false;
        }
    }
    Some(out)
}

/// How many runs of ASCII digits a name has (`step 12`: one; `layer05.stage1_f`: two).
pub fn digit_runs(name: &str) -> usize {
    let b = name.as_bytes();
    (0..b.len())
        .filter(|&i| b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()))
        .count()
}

/// How range texts become grouping keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grouping {
    /// By name (PyTorch's suffixes taken off).
    #[default]
    Name,
    /// By name and input shapes (`--by-shape`).
    NameAndShape,
}

/// A grouped name: what the report prints.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Name {
    pub name: String,
    /// Input shapes, with `--by-shape`.
    pub shapes: Option<String>,
}

/// Interns grouped names as small integers.
#[derive(Debug, Default)]
pub struct Names {
    pub grouping: Grouping,
    /// Key: the name, or `name \x1f shapes` with `--by-shape`.
    by_key: HashMap<Box<str>, u32>,
    scratch: String,
    pub names: Vec<Name>,
    /// How many range texts had a PyTorch suffix taken off.
    pub stripped: u64,
}

impl Names {
    pub fn new(grouping: Grouping) -> Names {
        Names {
            grouping,
            ..Default::default()
        }
    }

    /// The id of the grouped name of a range text.
    pub fn intern(&mut self, text: &str) -> u32 {
        let s = split(text);
        if s.stripped {
            self.stripped += 1;
        }
        let shapes = match self.grouping {
            Grouping::NameAndShape => s.sizes,
            Grouping::Name => None,
        };
        self.lookup(s.name, shapes)
    }

    /// The id of an already grouped name (a counter family's row).
    pub fn intern_name(&mut self, name: &Name) -> u32 {
        self.lookup(&name.name, name.shapes.as_deref())
    }

    fn lookup(&mut self, name: &str, shapes: Option<&str>) -> u32 {
        let key: &str = match shapes {
            None => name,
            Some(sh) => {
                self.scratch.clear();
                self.scratch.push_str(name);
                self.scratch.push('\x1f');
                self.scratch.push_str(sh);
                &self.scratch
            }
        };
        if let Some(&id) = self.by_key.get(key) {
            return id;
        }
        let id = self.names.len() as u32;
        self.by_key.insert(key.into(), id);
        self.names.push(Name {
            name: name.to_string(),
            shapes: shapes.map(str::to_string),
        });
        id
    }

    pub fn get(&self, id: u32) -> &Name {
        &self.names[id as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytorch_suffixes_come_off() {
        // Forward op with shapes (autograd-shapes-nvtx).
        let s = split(
            "aten::mm, seq = 1204, op_id = 88231, sizes = [[4096, 2048], [2048, 768]], input_op_ids = [(88230,0), (-1,-1)]",
        );
        assert_eq!(s.name, "aten::mm");
        assert_eq!(s.sizes, Some("[[4096, 2048], [2048, 768]]"));
        // Without shapes (autograd-nvtx): op_id only, or seq and op_id.
        assert_eq!(split("aten::view, op_id = 314290").name, "aten::view");
        assert_eq!(
            split("aten::linear, seq = 7, op_id = 12").name,
            "aten::linear"
        );
        // Backward functions carry the forward's sequence number.
        assert_eq!(
            split("autograd::engine::evaluate_function: MmBackward0, seq = 1204, op_id = 90001, sizes = [], input_op_ids = []").name,
            "autograd::engine::evaluate_function: MmBackward0"
        );
        // Empty inputs and empty tensors.
        let s = split(
            "aten::empty, op_id = 5, sizes = [[], [], [], [], [], []], input_op_ids = [(-1,-1), (-1,-1)]",
        );
        assert_eq!(
            (s.name, s.sizes),
            ("aten::empty", Some("[[], [], [], [], [], []]"))
        );
        // A name with a comma of its own keeps it.
        assert_eq!(split("my, range, op_id = 3").name, "my, range");
        // The legacy form (older PyTorch) and the documented `stashed seq`.
        assert_eq!(split("MulBackward0, stashed seq = 12").name, "MulBackward0");
    }

    #[test]
    fn only_the_exact_grammar_is_taken_off() {
        for text in [
            "step, seq = x",
            "a, sizes = [[1, 2]] trailing",
            "a, op_id = 1x",          // not a number
            "a, op_id = 1, trailing", // text after the clauses
            "a, sizes = [[1, 2]",     // unbalanced
            "a, sizes = [[x]]",       // not a shape
            "layer05.stage2_f",
            "forward chunk 0 (phase0) backward chunk 1 (phase1)",
            "rank=3; pp=0/2 dp=0/1 cp=0/1 ep=3/4; mbs=1 seq=2048",
        ] {
            let s = split(text);
            assert_eq!((s.name, s.stripped), (text, false), "{text}");
        }
    }

    #[test]
    fn families_replace_digit_runs() {
        assert_eq!(family("step 12").as_deref(), Some("step N"));
        assert_eq!(
            family("layer05.stage2_f").as_deref(),
            Some("layerN.stageN_f")
        );
        assert_eq!(family("aten::mm"), None);
        assert_eq!(digit_runs("step 12"), 1);
        assert_eq!(digit_runs("layer05.stage1_f"), 2);
        assert_eq!(digit_runs("aten::mm"), 0);
    }

    #[test]
    fn grouping_by_name_or_shape() {
        let mut n = Names::new(Grouping::Name);
        let a = n.intern("aten::mm, seq = 1, op_id = 2, sizes = [[1, 2], [2, 3]], input_op_ids = [(1,0), (-1,-1)]");
        let b = n.intern("aten::mm, seq = 9, op_id = 10, sizes = [[5, 2], [2, 3]], input_op_ids = [(4,0), (-1,-1)]");
        assert_eq!(a, b);
        let mut n = Names::new(Grouping::NameAndShape);
        let a =
            n.intern("aten::mm, seq = 1, op_id = 2, sizes = [[1, 2], [2, 3]], input_op_ids = []");
        let b =
            n.intern("aten::mm, seq = 9, op_id = 10, sizes = [[5, 2], [2, 3]], input_op_ids = []");
        let c =
            n.intern("aten::mm, seq = 11, op_id = 12, sizes = [[1, 2], [2, 3]], input_op_ids = []");
        assert!(a != b && a == c);
        assert_eq!(n.get(b).shapes.as_deref(), Some("[[5, 2], [2, 3]]"));
    }
}
