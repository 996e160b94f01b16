//! Never inside compiled code: a rule whose target is in a function a compiler wraps (in
//! any spelling: `python::compiled`), or in one that runs inside a compiled function of
//! the file, is refused: a print or a synchronize there breaks the graph.

use std::collections::BTreeSet;

use super::{Pass, Stage};
use crate::codemod::context::FileContext;
use crate::codemod::failure::{Failure, FailureKind};
use crate::codemod::fix::Fix;
use crate::python::{self, Source};
use crate::rules::ForbiddenDecorator;

/// The pass: a fix whose place is in compiled code is refused, before its regions are
/// built (a rule there fails for that, whatever else it would fail for).
pub(in crate::codemod) struct Compiled;

impl Pass for Compiled {
    fn stage(&self) -> Stage {
        Stage::Place
    }

    fn check(&self, cx: &FileContext, fixes: &[Fix]) -> Vec<Failure> {
        if fixes.is_empty() {
            return Vec::new();
        }
        let forbid = cx.plan.forbid_inside();
        let here = CompiledHere::of(cx.src, forbid);
        fixes
            .iter()
            .filter_map(|f| {
                let why = here.refusal(&f.place.functions, forbid)?;
                Some(cx.fail_rule(f.rule, FailureKind::Placement, Some(f.place.line), why))
            })
            .collect()
    }
}

/// What in a file is compiled.
pub(in crate::codemod) struct CompiledHere {
    direct: Vec<python::compiled::Compiled>,
    /// (class or "", function) run inside a compiled function of the file.
    inside: BTreeSet<(String, String)>,
}

impl CompiledHere {
    /// The compiled functions of `src`, by the callables `forbid` names.
    pub(in crate::codemod) fn of(src: &Source, forbid: &[ForbiddenDecorator]) -> CompiledHere {
        let compilers: Vec<String> = forbid.iter().map(|f| f.decorator.clone()).collect();
        // Most files never mention a compiler: skip the scan for them.
        let mentioned = compilers
            .iter()
            .any(|c| src.text.contains(c.rsplit('.').next().unwrap_or(c)));
        if !mentioned {
            return CompiledHere {
                direct: Vec::new(),
                inside: Default::default(),
            };
        }
        let direct = python::compiled::facts_for(src, &compilers).compiled(&compilers);
        let mut inside = python::compiled::run_inside(src, &direct);
        // A function compiled by assignment is compiled with what is inserted into it.
        inside.extend(
            direct
                .iter()
                .filter(|c| c.wrapped)
                .map(|c| (c.class.clone().unwrap_or_default(), c.function.clone())),
        );
        CompiledHere { direct, inside }
    }

    /// Why code may not go into the functions around a target (`functions`, innermost
    /// first, as (class, function)), if it may not.
    pub(in crate::codemod) fn refusal(
        &self,
        functions: &[(Option<String>, String)],
        forbid: &[ForbiddenDecorator],
    ) -> Option<String> {
        for (class, name) in functions {
            if let Some(c) = self
                .direct
                .iter()
                .find(|c| &c.class == class && &c.function == name)
            {
                let reason = forbid
                    .iter()
                    .find(|f| f.decorator == c.by)
                    .map_or("code there is traced into a graph", |f| f.reason.as_str());
                return Some(format!(
                    "refusing to insert into `{name}`, which is {}: {reason}",
                    c.how
                ));
            }
            if self
                .inside
                .contains(&(class.clone().unwrap_or_default(), name.clone()))
            {
                return Some(format!(
                    "refusing to insert into `{name}`, which is called from compiled code in this file: code there is traced into the compiled graph, where a print or synchronize breaks it"
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forbid() -> Vec<ForbiddenDecorator> {
        vec![ForbiddenDecorator {
            decorator: "torch.compile".into(),
            reason: "it is compiled".into(),
        }]
    }

    #[test]
    fn compiled_functions_and_what_they_call_are_refused() {
        let src = Source::parse(
            "import torch\n\n\nclass A:\n    @torch.compile(fullgraph=True)\n    def hot(self):\n        return self.helper()\n\n    def helper(self):\n        return 1\n\n    def cold(self):\n        return 2\n".into(),
        );
        let here = CompiledHere::of(&src, &forbid());
        let a = |f: &str| vec![(Some("A".to_string()), f.to_string())];
        let hot = here.refusal(&a("hot"), &forbid()).unwrap();
        assert!(hot.contains("refusing to insert into `hot`, which is decorated with `@torch.compile(fullgraph=True)`"), "{hot}");
        assert!(hot.ends_with(": it is compiled"), "{hot}");
        let helper = here.refusal(&a("helper"), &forbid()).unwrap();
        assert!(
            helper.contains("called from compiled code in this file"),
            "{helper}"
        );
        assert!(here.refusal(&a("cold"), &forbid()).is_none());
        // Nested in a compiled function: the outer one decides.
        let nested = vec![
            (None, "inner".to_string()),
            (Some("A".into()), "hot".into()),
        ];
        assert!(here.refusal(&nested, &forbid()).is_some());
    }

    #[test]
    fn a_file_that_never_names_a_compiler_is_not_scanned() {
        let src = Source::parse("def f():\n    return 1\n".into());
        let here = CompiledHere::of(&src, &forbid());
        assert!(here.direct.is_empty() && here.inside.is_empty());
    }
}
