//! What planning works with: the rule set and the values it is planned with
//! (`PlanContext`, one for every file), and one file as the planner and its checks see it
//! (`FileContext`). The rule set is read here only, through a few accessors, so that the
//! rest of planning does not depend on how rules are stored.

use std::collections::BTreeMap;
use std::ops::Range;

use super::failure::{Failure, FailureKind};
use super::planned::Planned;
use crate::python::Source;
use crate::python::style::Style;
use crate::rules::{CompiledRule, CompiledSet, ForbiddenDecorator};

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

impl PlanContext<'_> {
    /// The rule set's rule `index`.
    pub(super) fn rule(&self, index: usize) -> &CompiledRule {
        &self.rule_set.rules[index]
    }

    /// The rule set's rule with id `id`, if it has one.
    pub(super) fn rule_by_id(&self, id: &str) -> Option<&CompiledRule> {
        self.rule_set.rules.iter().find(|r| r.id == id)
    }

    /// The rule set's name, as its markers carry it.
    pub(super) fn set_name(&self) -> &str {
        &self.rule_set.manifest.name
    }

    /// The callables whose functions no code may go into (`torch.compile`, say).
    pub(super) fn forbid_inside(&self) -> &[ForbiddenDecorator] {
        &self.rule_set.manifest.forbid_inside
    }
}

/// One file being planned: its text without this rule set's regions, parsed, and what the
/// checks know of it so far.
#[derive(Clone, Copy)]
pub(super) struct FileContext<'a> {
    /// The file, relative to the root.
    pub(super) file: &'a str,
    pub(super) plan: &'a PlanContext<'a>,
    /// The file without this rule set's regions (what the fixes edit), parsed.
    pub(super) src: &'a Source,
    /// Other rule sets' regions in it, as byte ranges of `src`.
    pub(super) foreign: &'a [Range<usize>],
    /// Its indentation unit (a tab, or some spaces).
    pub(super) unit: &'a str,
    /// Its line ending.
    pub(super) eol: &'static str,
    /// The text with the fixes applied, once they are (see `check::Stage::Parse`).
    pub(super) planned: Option<&'a Planned<'a>>,
}

impl<'a> FileContext<'a> {
    /// A failure in this file.
    pub(super) fn fail(
        &self,
        kind: FailureKind,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Failure {
        Failure::new(kind, self.file, line, message)
    }

    /// A failure of rule `index` in this file.
    pub(super) fn fail_rule(
        &self,
        index: usize,
        kind: FailureKind,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Failure {
        self.fail(kind, line, message)
            .for_rule(self.plan.rule(index))
    }

    /// The planned text: known from `check::Stage::Parse` on.
    pub(super) fn planned(&self) -> &'a Planned<'a> {
        self.planned
            .expect("the planned text is known to the passes from Stage::Parse on")
    }
}
