//! The checks a file's fixes pass before anything is written, as ruff's rules are passes
//! over the code, each behind one interface (`Pass`). The planner (`plan`) runs the list
//! (`PASSES`) stage by stage: never inside compiled code (`compiled`), never inside
//! another rule set's region nor on the same lines as another rule (`overlap`), the
//! inserted code parses (`syntax`), every name it reads exists where it lands (`names`),
//! it binds only names of its own (`binds`). Adding a check is adding a pass to the list.

pub(super) mod binds;
pub(super) mod compiled;
pub(super) mod names;
pub(super) mod overlap;
pub(super) mod syntax;

use super::context::FileContext;
use super::failure::Failure;
use super::fix::Fix;

/// When a pass runs, by what it reads. At the first two stages a failure drops only the
/// fix of the rule it names (the other rules are still checked, so that a report names
/// every rule that does not fit); from `Together` on, the fixes are checked as one plan,
/// and a failure at one stage stops the file before the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Each fix's place (`Fix::place`), before its regions are built.
    Place,
    /// Each fix's regions, alone.
    Edits,
    /// The fixes together, imports included.
    Together,
    /// The planned text (`FileContext::planned`) as a whole.
    Parse,
    /// The planned code: what it reads and binds.
    Names,
}

/// One check of a file's fixes.
pub(super) trait Pass: Sync {
    /// When it runs.
    fn stage(&self) -> Stage;

    /// The failures of `fixes`: those that passed the stages before, in the rules' order.
    /// Each failure of a per-fix stage names its rule.
    fn check(&self, cx: &FileContext, fixes: &[Fix]) -> Vec<Failure>;
}

/// Every check, in the order they run (and, within a stage, report).
pub(super) const PASSES: &[&dyn Pass] = &[
    &compiled::Compiled,
    &overlap::Foreign,
    &overlap::Overlap,
    &syntax::Syntax,
    &names::Names,
    &binds::Binds,
];

/// The failures the passes of `stage` find in `fixes`, pass after pass.
pub(super) fn run(
    passes: &[&dyn Pass],
    stage: Stage,
    cx: &FileContext,
    fixes: &[Fix],
) -> Vec<Failure> {
    passes
        .iter()
        .filter(|p| p.stage() == stage)
        .flat_map(|p| p.check(cx, fixes))
        .collect()
}
