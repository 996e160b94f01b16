//! The planned text must parse. Each inserted region is parsed on its own: whole lines
//! at the indentation of the statements around them (the planner only places code
//! there), so when every region parses as a module of its own, the file does. Only where
//! a region's own parse cannot decide (a line less indented than the region, or an error
//! in it) is the whole planned file parsed again, as the one that decides.

use super::{Pass, Stage};
use crate::codemod::context::FileContext;
use crate::codemod::failure::{Failure, FailureKind};
use crate::codemod::fix::Fix;
use crate::codemod::planned::Placed;
use crate::python::{Source, SyntaxErrorAt};

/// The pass: the planned text parses; where it does not, nothing is written.
pub(in crate::codemod) struct Syntax;

impl Pass for Syntax {
    fn stage(&self) -> Stage {
        Stage::Parse
    }

    fn check(&self, cx: &FileContext, _: &[Fix]) -> Vec<Failure> {
        let planned = cx.planned();
        let whole = match blocks(&planned.placed) {
            Verdict::Parses => {
                // Debug builds (the tests) check the decision against the whole file.
                if cfg!(debug_assertions) {
                    let err = whole_file(cx.src, planned.text.clone(), &planned.spans);
                    assert!(
                        err.is_none(),
                        "{}: the regions parse on their own, the file does not: {err:?}",
                        cx.file
                    );
                }
                None
            }
            Verdict::Undecided => whole_file(cx.src, planned.text.clone(), &planned.spans),
        };
        let Some(err) = whole else {
            return Vec::new();
        };
        let rules = planned
            .placed
            .iter()
            .map(|p| cx.plan.rule(p.rule).id.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        vec![cx.fail(
            FailureKind::Syntax,
            Some(err.line),
            format!(
                "the planned edits would not parse at column {} (rules {rules}); nothing was written",
                err.column
            ),
        )]
    }
}

/// What the regions' own parses say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::codemod) enum Verdict {
    /// Every region parses on its own: so does the file.
    Parses,
    /// A region's own parse cannot decide: the whole file must be parsed.
    Undecided,
}

/// The regions' verdict.
pub(in crate::codemod) fn blocks(placed: &[Placed]) -> Verdict {
    let decided = placed.iter().all(|p| {
        p.block
            .as_ref()
            .is_some_and(|b| b.src.first_error().is_none())
    });
    if decided {
        Verdict::Parses
    } else {
        Verdict::Undecided
    }
}

/// Where the planned text (`original` with `edits` applied, each `(start, old_end,
/// new_len)`) fails to parse, reusing the original's tree for what did not change.
pub(in crate::codemod) fn whole_file(
    original: &Source,
    planned: String,
    edits: &[(usize, usize, usize)],
) -> Option<SyntaxErrorAt> {
    original.reparse(planned, edits).first_error()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codemod::edit::{Region, Shape};
    use crate::codemod::fix::tests::region;
    use crate::codemod::planned::Block;

    fn edit(base: &str, lines: &[&str], shape: Shape) -> Region {
        region(0..0, base, lines, shape)
    }

    fn verdict(e: &Region) -> Verdict {
        blocks(&[Placed {
            edit: e,
            rule: 0,
            seq: 1,
            first_line: 1,
            block: Block::of(e),
        }])
    }

    #[test]
    fn statements_at_their_indentation_decide_on_their_own() {
        let ok = edit(
            "        ",
            &[
                "        # >>> instrument x 1.a (take out: instrument remove) h=00000000",
                "        if _do:",
                "            _lmem(f\"{x}\")",
                "",
                "        # <<< instrument x 1.a",
            ],
            Shape::Statements,
        );
        assert_eq!(verdict(&ok), Verdict::Parses);
        // Broken code is left to the whole file's parse, which names the line.
        let broken = edit("    ", &["    if _do", "        pass"], Shape::Statements);
        assert_eq!(verdict(&broken), Verdict::Undecided);
        // A line less indented than the region: only the whole file can say.
        let out = edit("    ", &["    x = 1", "y = 2"], Shape::Statements);
        assert!(Block::of(&out).is_none());
        assert_eq!(verdict(&out), Verdict::Undecided);
    }

    #[test]
    fn parameters_and_headers_parse_in_a_frame_of_their_own() {
        let param = edit(
            "        ",
            &[
                "        # >>> instrument x 5D.param (take out: instrument remove) h=00000000",
                "        _do_mem: bool = False,",
                "        # <<< instrument x 5D.param",
            ],
            Shape::Parameters,
        );
        assert_eq!(verdict(&param), Verdict::Parses);
        let header = edit(
            "    ",
            &[
                "    # >>> instrument x 5D.param (take out: instrument remove) h=00000000",
                "    # | def forward(self, x):",
                "    def forward(",
                "        self,",
                "        x,",
                "        _do_mem: bool = False,",
                "    ):  # <<< instrument x 5D.param",
            ],
            Shape::Signature,
        );
        assert_eq!(verdict(&header), Verdict::Parses);
        let bad = edit(
            "        ",
            &["        _do_mem: = False,"],
            Shape::Parameters,
        );
        assert_eq!(verdict(&bad), Verdict::Undecided);
    }

    #[test]
    fn the_whole_file_decides_where_the_blocks_do_not() {
        let original = Source::parse("def f():\n    x = 1\n".to_string());
        let planned = "def f():\n    x = 1\n    if x\n".to_string();
        let err = whole_file(&original, planned, &[(19, 19, 9)]).expect("an error");
        assert_eq!(err.line, 3);
        let planned = "def f():\n    x = 1\n    y = x\n".to_string();
        assert!(whole_file(&original, planned, &[(19, 19, 10)]).is_none());
    }
}
