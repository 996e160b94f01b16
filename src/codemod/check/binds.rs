//! Inserted code binds only names of its own: a name it binds at the level of the host's
//! scope (assignments, loop and `with` targets, imports, `def`s, `global`s of its own
//! functions at the module's) must not be one the host's own code binds or reads in that
//! scope. Each region's bindings come from its own parse (`Block`); the host's uses from
//! the original file. A replacement may bind again what the statement it replaced bound.

use std::collections::HashSet;
use std::ops::Range;

use super::{Pass, Stage};
use crate::codemod::context::FileContext;
use crate::codemod::failure::{Failure, FailureKind};
use crate::codemod::fix::Fix;
use crate::codemod::planned::Placed;
use crate::python::Source;
use crate::python::binds::{HostUses, bound_names, scope_at};

/// The pass: inserted code that binds a name the host uses.
pub(in crate::codemod) struct Binds;

impl Pass for Binds {
    fn stage(&self) -> Stage {
        Stage::Names
    }

    fn check(&self, cx: &FileContext, _: &[Fix]) -> Vec<Failure> {
        let placed = &cx.planned().placed;
        let gone: Vec<Range<usize>> = placed
            .iter()
            .map(|p| p.edit)
            .filter(|e| e.drops_host_code())
            .map(|e| e.start..e.end)
            .collect();
        check(cx.src, placed, &gone)
            .into_iter()
            .map(|c| {
                cx.fail_rule(c.rule, FailureKind::Name, Some(c.line), c.message())
                    .with_name(&c.name)
            })
            .collect()
    }
}

/// An inserted binding of a name the host uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::codemod) struct Clash {
    /// The rule's index in the rule set.
    pub(in crate::codemod) rule: usize,
    pub(in crate::codemod) name: String,
    /// 1-based line in the planned text.
    pub(in crate::codemod) line: usize,
    /// The scope that uses it: "`train_step`", "class `A`", "the module".
    pub(in crate::codemod) scope: String,
}

impl Clash {
    pub(in crate::codemod) fn message(&self) -> String {
        format!(
            "the inserted code binds `{}`, which {} uses too; inserted code must bind only names of its own (prefix it with `_`)",
            self.name, self.scope
        )
    }
}

/// The clashes of `placed` with `original`; `gone` are the ranges of the original the
/// edits take out without keeping (their code is no longer the host's). One per rule and
/// name, in the order of the planned text.
pub(in crate::codemod) fn check(
    original: &Source,
    placed: &[Placed],
    gone: &[Range<usize>],
) -> Vec<Clash> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut uses = HostUses::new(original, gone);
    for p in placed.iter().filter(|p| p.has_code()) {
        let Some(block) = &p.block else { continue };
        // Only template code: lines a wrap copies from the original are the host's.
        let template: Vec<Range<usize>> = block.ranges_of(&p.edit.checked);
        let bindings: Vec<_> = block
            .bindings()
            .iter()
            .filter(|b| template.iter().any(|r| r.contains(&b.at)))
            .collect();
        if bindings.is_empty() {
            continue;
        }
        let rebinds = if p.edit.end > p.edit.start {
            bound_names(original, p.edit.start..p.edit.end)
        } else {
            HashSet::new()
        };
        let scope = scope_at(original, p.edit.scope_at);
        for b in bindings {
            if rebinds.contains(&b.name) {
                continue;
            }
            let host = if b.module { original.root() } else { scope };
            if let Some(by) = uses.uses(host, &b.name)
                && seen.insert((p.rule, b.name.clone()))
            {
                out.push(Clash {
                    rule: p.rule,
                    line: p.first_line + block.line_of(b.at),
                    name: b.name.clone(),
                    scope: by,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codemod::edit::Shape;
    use crate::codemod::fix::tests::region;
    use crate::codemod::planned::Block;

    /// Clashes of `inserted` (at `base`), placed before the line of `host` that starts
    /// with `before`.
    fn clashes(host: &str, before: &str, base: &str, inserted: &[&str]) -> Vec<(String, String)> {
        let src = Source::parse(host.to_string());
        let at = host.find(before).expect("the line");
        let e = region(at..at, base, inserted, Shape::Statements);
        let p = Placed {
            edit: &e,
            rule: 0,
            seq: 1,
            first_line: 1,
            block: Block::of(&e),
        };
        check(&src, &[p], &[])
            .into_iter()
            .map(|c| (c.name, c.scope))
            .collect()
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn a_name_the_host_binds_later_is_a_clash() {
        let host = "def train_step(cfg):\n    pass\n    rank = cfg.rank\n";
        let c = clashes(host, "    pass", "    ", &["    rank = 0", "    _ok = 1"]);
        assert_eq!(c, pairs(&[("rank", "`train_step`")]));
    }

    #[test]
    fn a_global_the_host_reads_is_a_clash() {
        // Binding `G` locally would make the host's read of the module's `G` fail.
        let host = "G = 1\n\ndef f():\n    return G\n";
        assert_eq!(
            clashes(host, "    return", "    ", &["    G = 2"]),
            pairs(&[("G", "`f`")])
        );
    }

    #[test]
    fn own_scopes_loops_imports_and_aliases() {
        let host = "import os\n\ndef f(x):\n    y = [t for t in x]\n    return y\n";
        let inserted = [
            "    def _helper(t):",
            "        y = t",
            "        return y",
            "    _s = sum(y for y in range(3))",
            "    for x in range(2):",
            "        pass",
            "    import os.path",
            "    from m import y as _y, os",
            "    with open('f') as t:",
            "        pass",
        ];
        // `y` and `t` inside the helper and the generator are its own, and the host's
        // function does not use `os` or `_y`; the loop rebinds the parameter `x`, and the
        // with target `t` is a name the host's comprehension uses (counted, to be safe).
        assert_eq!(
            clashes(host, "    return", "    ", &inserted),
            pairs(&[("x", "`f`"), ("t", "`f`")])
        );
    }

    #[test]
    fn attributes_and_keywords_are_not_names() {
        let host = "def f(a):\n    a.rank = 1\n    g(step=2)\n    pass\n";
        assert!(clashes(host, "    pass", "    ", &["    rank, step = 1, 2"]).is_empty());
    }

    #[test]
    fn module_level_definitions_and_globals() {
        let host = "from torch import nn\n\n\nx = 1\n\n\ndef g():\n    return nn\n";
        let inserted = [
            "def nn():",
            "    pass",
            "",
            "_state = None",
            "def _set():",
            "    global _state, nn",
            "    _state = 1",
            "    nn = 2",
        ];
        assert_eq!(
            clashes(host, "x = 1", "", &inserted),
            pairs(&[("nn", "the module")])
        );
    }

    #[test]
    fn a_replacement_may_bind_what_it_replaced() {
        let host = "def f(x):\n    outs = g(x)\n    return outs\n";
        let src = Source::parse(host.to_string());
        let start = host.find("    outs").unwrap();
        let end = host.find("    return").unwrap();
        let e = region(
            start..end,
            "    ",
            &["    outs = g(x, flag=1)"],
            Shape::Statements,
        );
        let p = Placed {
            edit: &e,
            rule: 0,
            seq: 1,
            first_line: 1,
            block: Block::of(&e),
        };
        let gone = start..end;
        assert!(check(&src, &[p], std::slice::from_ref(&gone)).is_empty());
    }
}
