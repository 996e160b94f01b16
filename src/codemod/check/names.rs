//! Every name inserted code reads must exist where it lands: a parameter, an earlier
//! local, an import, a builtin, or a name inserted code before it binds (another rule's
//! helper, the flag a rule computes at the top of the function). Each region's code is
//! read on its own (`Block`); what it does not bind itself is looked up in the original
//! file's scopes at the place it goes, together with the names the other regions bind.

use crate::python::KindOf;
use std::collections::HashSet;
use std::ops::Range;

use super::{Pass, Stage};
use crate::codemod::context::FileContext;
use crate::codemod::edit::Shape;
use crate::codemod::failure::{Failure, FailureKind};
use crate::codemod::fix::Fix;
use crate::codemod::planned::Placed;
use crate::python::Source;
use crate::python::host::Host;
use crate::python::names::Resolution;

/// The pass: a name the inserted code reads that is not there where it lands.
pub(in crate::codemod) struct Names;

impl Pass for Names {
    fn stage(&self) -> Stage {
        Stage::Names
    }

    fn check(&self, cx: &FileContext, _: &[Fix]) -> Vec<Failure> {
        let placed = &cx.planned().placed;
        // What the replaced statements bound is gone.
        let replaced: Vec<Range<usize>> = placed
            .iter()
            .map(|p| p.edit)
            .filter(|e| e.end > e.start && e.shape == Shape::Statements)
            .map(|e| e.start..e.end)
            .collect();
        check(cx.src, placed, replaced)
            .into_iter()
            .map(|m| {
                let why = if m.later {
                    "which is only assigned after this point"
                } else {
                    "which is not defined there (not a parameter, local, import, builtin or a name the rules define)"
                };
                let message = format!(
                    "the inserted code reads `{}`, {why}; the rule does not fit this revision",
                    m.name
                );
                cx.fail_rule(m.rule, FailureKind::Name, Some(m.line), message)
                    .with_name(&m.name)
            })
            .collect()
    }
}

/// A name inserted code reads that is not there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::codemod) struct Missing {
    /// The rule's index in the rule set.
    pub(in crate::codemod) rule: usize,
    pub(in crate::codemod) name: String,
    /// 1-based line in the planned text.
    pub(in crate::codemod) line: usize,
    /// Bound where it is read, but only after the read.
    pub(in crate::codemod) later: bool,
}

/// The names the regions of `placed` read that are not bound where they land in
/// `original`; `replaced` are the ranges of the original the edits take out (what the
/// host bound there is gone). One per rule and name, in the order of the planned text.
pub(in crate::codemod) fn check(
    original: &Source,
    placed: &[Placed],
    replaced: Vec<Range<usize>>,
) -> Vec<Missing> {
    let with_code: Vec<&Placed> = placed
        .iter()
        .filter(|p| p.has_code() && p.block.is_some())
        .collect();
    if with_code.is_empty() {
        return Vec::new();
    }
    let points: Vec<_> = with_code.iter().map(|p| p.point()).collect();
    let mut host = Host::new(original, replaced);
    // Parameters the edits add to a signature are bound in the function's body.
    for p in placed.iter().filter(|p| p.edit.shape.adds_parameters()) {
        let Some(block) = &p.block else { continue };
        let root = block.src.root();
        let mut cursor = root.walk();
        let def = root
            .named_children(&mut cursor)
            .map(crate::python::undecorated)
            .find(|n| n.kind_of() == "function_definition");
        for name in def
            .map(|d| crate::python::parameter_names(&block.src, d))
            .unwrap_or_default()
        {
            host.bind(&p.point(), name, false);
        }
    }
    // What every region binds at the level of the scope it lands in (the original lines
    // a wrap keeps included, the imports the rules add): names the regions after it may
    // read.
    for p in placed
        .iter()
        .filter(|p| matches!(p.edit.shape, Shape::Statements | Shape::Import))
    {
        let Some(block) = &p.block else { continue };
        for b in block.bindings() {
            host.bind(&p.point(), &b.name, b.module);
        }
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (p, point) in with_code.iter().zip(&points) {
        let block = p.block.as_ref().expect("filtered");
        let ranges = block.ranges_of(&p.edit.checked);
        for read in block.open_reads_in(&ranges) {
            let later = match host.resolve(&read.name, point, read.in_own_function) {
                Resolution::Bound => continue,
                Resolution::BoundLater => true,
                Resolution::Unbound => read.bound_later,
            };
            if !seen.insert((p.rule, read.name.clone())) {
                continue;
            }
            out.push(Missing {
                rule: p.rule,
                name: read.name.clone(),
                line: p.first_line + block.line_of(read.at),
                later,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codemod::edit::Region;
    use crate::codemod::fix::tests::region;
    use crate::codemod::planned::Block;

    /// Place `lines` (at `base`) at byte `at` of `host`, as rule `rule`, in the scope of
    /// the statement they land next to.
    fn edit(at: usize, base: &str, lines: &[&str], rule: usize) -> (usize, Region) {
        (rule, region(at..at, base, lines, Shape::Statements))
    }

    fn placed(e: &(usize, Region), seq: usize) -> Placed<'_> {
        Placed {
            edit: &e.1,
            rule: e.0,
            seq,
            first_line: 10,
            block: Block::of(&e.1),
        }
    }

    fn names(m: Vec<Missing>) -> Vec<String> {
        m.into_iter()
            .map(|m| {
                if m.later {
                    format!("{}(later)", m.name)
                } else {
                    m.name
                }
            })
            .collect()
    }

    const HOST: &str = "import torch\n\n\ndef f(x):\n    y = x\n    return y\n\n\nz = 1\n";

    #[test]
    fn reads_resolve_against_the_host_where_the_code_lands() {
        let src = Source::parse(HOST.to_string());
        let at = HOST.find("    return").unwrap();
        let e = edit(
            at,
            "    ",
            &["    print(x, y, torch.cuda, len, z, nope)"],
            0,
        );
        let m = check(&src, &[placed(&e, 1)], Vec::new());
        // `z` is bound at module level: a function body runs after the module is loaded.
        assert_eq!(names(m), vec!["nope"]);
        // Before `y = x`, `y` is bound only later.
        let at = HOST.find("    y = x").unwrap();
        let e = edit(at, "    ", &["    print(y)"], 0);
        assert_eq!(
            names(check(&src, &[placed(&e, 1)], Vec::new())),
            vec!["y(later)"]
        );
    }

    #[test]
    fn names_other_regions_bind_before_are_bound() {
        let src = Source::parse(HOST.to_string());
        let top = HOST.find("    y = x").unwrap();
        let flags = edit(top, "    ", &["    from m import _lmem", "    _do = x"], 0);
        let at = HOST.find("    return").unwrap();
        let user = edit(at, "    ", &["    if _do:", "        _lmem(y)"], 1);
        let both = [placed(&flags, 1), placed(&user, 1)];
        assert!(check(&src, &both, Vec::new()).is_empty());
        // Alone, the user's reads are missing; in the other order, bound only later.
        assert_eq!(
            names(check(&src, &[placed(&user, 1)], Vec::new())),
            vec!["_do", "_lmem"]
        );
        let flags_late = edit(at, "    ", &["    _do = x"], 0);
        let user_early = edit(top, "    ", &["    print(_do)"], 1);
        let swapped = [placed(&user_early, 1), placed(&flags_late, 1)];
        assert_eq!(names(check(&src, &swapped, Vec::new())), vec!["_do(later)"]);
    }

    #[test]
    fn a_replaced_statements_bindings_are_gone() {
        let src = Source::parse(HOST.to_string());
        let start = HOST.find("    y = x").unwrap();
        let end = HOST.find("    return").unwrap();
        let mut replace = edit(start, "    ", &["    _y = x"], 0);
        replace.1.end = end;
        let after = edit(end, "    ", &["    print(y)"], 1);
        let m = check(
            &src,
            &[placed(&replace, 1), placed(&after, 1)],
            std::slice::from_ref(&(start..end)).to_vec(),
        );
        assert_eq!(names(m), vec!["y"]);
    }

    #[test]
    fn the_codes_own_functions_and_comprehensions_bind_their_names() {
        let src = Source::parse(HOST.to_string());
        let at = HOST.find("z = 1").unwrap();
        let e = edit(
            at,
            "",
            &[
                "def _helper(a):",
                "    return [t * a for t in range(3)], torch, later",
                "",
                "_v = _helper(1)",
            ],
            0,
        );
        // `later` is read in a function of the code's own: bound anywhere at module level
        // would do; it is bound nowhere.
        assert_eq!(
            names(check(&src, &[placed(&e, 1)], Vec::new())),
            vec!["later"]
        );
    }
}
