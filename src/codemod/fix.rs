//! Planning one rule: where it lands (`target`: the scope and anchor resolved, the
//! functions around it), then the regions that put its code there (`build`: the template
//! rendered for that place, in its marked region, by the builder of its position). A
//! rule's plan is data, a `Fix`; whether it may go there (compiled code, other regions,
//! overlaps, syntax, names) is decided by the passes in `check`.

mod body;
mod statement;

use std::ops::Range;

use crate::python::KindOf;

use super::anchor::{self, AnchorFailure, Problem};
use super::context::FileContext;
use super::edit::{Region, Shape};
use super::failure::{Failure, FailureKind};
use super::imports;
use super::markers;
use super::signature;
use super::template::{self, Original, RenderError, Rendered};
use crate::python;
use crate::rules::{CompiledRule, Position};

/// Where a rule's code lands, as the checks of its place read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    /// 1-based line of the anchor (or of the scope, for body positions).
    pub(crate) line: usize,
    /// The functions around the target, innermost first (the target itself for body
    /// positions in a `def`), as (class, function).
    pub(crate) functions: Vec<(Option<String>, String)>,
}

/// A rule's plan for a file, as data: its place, and the regions that put its code in,
/// each an edit of the stripped text (`edit::Change`). A fix is planned in two steps: its
/// place (its regions still empty: `check::Stage::Place`), then its regions.
#[derive(Debug, Clone)]
pub(crate) struct Fix {
    /// The rule's index in the rule set.
    pub(crate) rule: usize,
    pub(crate) place: Place,
    pub(crate) regions: Vec<Region>,
}

/// Why a rule's regions cannot be built at its target.
#[derive(Debug, thiserror::Error)]
pub(super) enum BuildError {
    /// The place does not take code: why, and the line it names, if any.
    #[error("{why}")]
    Place { line: Option<usize>, why: Refusal },
    /// The template cannot be rendered there.
    #[error(transparent)]
    Template(#[from] RenderError),
}

/// Why a place does not take code.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refusal {
    #[error("the anchor shares its first line with other code")]
    SharesFirstLine,
    #[error("the anchor shares its last line with other code (`{0}`)")]
    SharesLastLine(String),
    #[error("the anchor is on the last line and the file does not end with a newline")]
    LastLineUnended,
    #[error("refusing to insert above a docstring or a `from __future__` import")]
    AboveDocstring,
    #[error("the scope has no body")]
    NoBody,
    #[error("the scope's body is empty")]
    EmptyBody,
    #[error("the body is on the same line as its header; put it on its own lines first")]
    BodyOnHeaderLine,
    /// Why the signature does not take the parameter.
    #[error(transparent)]
    Signature(#[from] signature::Unplaceable),
}

impl BuildError {
    /// A refusal of the place, naming line `line`.
    pub(super) fn place(line: Option<usize>, why: Refusal) -> BuildError {
        BuildError::Place { line, why }
    }

    fn kind(&self) -> FailureKind {
        match self {
            BuildError::Place { .. } => FailureKind::Placement,
            BuildError::Template(_) => FailureKind::Template,
        }
    }

    fn line(&self) -> Option<usize> {
        match self {
            BuildError::Place { line, .. } => *line,
            BuildError::Template(_) => None,
        }
    }
}

/// A position's builder: the regions of a rule at its target.
type Builder = fn(&Build) -> Result<Vec<Region>, BuildError>;

/// The builder of each position.
fn builder(position: Position) -> Builder {
    match position {
        Position::Before => statement::before,
        Position::After => statement::after,
        Position::Replace | Position::Wrap => statement::replace,
        Position::BodyStart => body::start,
        Position::BodyEnd => body::end,
        Position::AddParameter => add_parameter,
    }
}

/// What a pattern that did not resolve says: the message, and the closest candidates.
pub(crate) fn describe_anchor_failure(f: &AnchorFailure) -> (String, Vec<(usize, String)>) {
    let place = match (&f.scope_header, f.searched_from) {
        (Some(h), Some(line)) => format!(" in `{h}` (line {line})"),
        _ => String::new(),
    };
    match &f.problem {
        Problem::NotFound(c) => (
            format!("{} `{}` not found{place}", f.role, f.pattern),
            c.clone(),
        ),
        Problem::Ambiguous(lines) => {
            let l: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            (
                format!(
                    "{} `{}` matches {} statements{place}, at lines {}; the rule must name one (narrow the scope, or set occurrence/following)",
                    f.role,
                    f.pattern,
                    lines.len(),
                    l.join(", ")
                ),
                Vec::new(),
            )
        }
    }
}

/// Where rule `index` lands (the first step of planning it): its fix with its place (no
/// regions yet), and the scope and anchor it was resolved from. A rule the model's roles
/// block, or whose patterns do not resolve, fails here.
pub(super) fn target<'t>(
    cx: &FileContext<'t>,
    index: usize,
    cache: &mut anchor::PoolCache<'t>,
) -> Result<(Fix, anchor::Resolved<'t>), Box<Failure>> {
    if let Some(b) = cx.plan.blocked.get(&index) {
        let failure = cx.fail_rule(index, FailureKind::Role, b.line, b.message.clone());
        return Err(Box::new(failure));
    }
    let (src, rule) = (cx.src, cx.plan.rule(index));
    let resolved = anchor::resolve(src, rule, cache).map_err(|f| {
        let (message, candidates) = describe_anchor_failure(&f);
        let failure = cx.fail_rule(index, FailureKind::Anchor, f.searched_from, message);
        Box::new(failure.with_candidates(candidates))
    })?;
    let node = resolved.anchor.unwrap_or(resolved.scope);
    let mut functions = python::enclosing_functions(node);
    if node.kind_of() == "function_definition" && !rule.position.needs_anchor() {
        functions.insert(0, node);
    }
    let functions = functions
        .into_iter()
        .map(|func| {
            let name = python::definition_name(src, func)
                .unwrap_or("?")
                .to_string();
            let class = python::enclosing_class(func)
                .and_then(|c| python::definition_name(src, c))
                .map(str::to_string);
            (class, name)
        })
        .collect();
    let place = Place {
        line: node.start_position().row + 1,
        functions,
    };
    let fix = Fix {
        rule: index,
        place,
        regions: Vec::new(),
    };
    Ok((fix, resolved))
}

/// The regions of `fix`'s rule at its target (the second step): the template rendered for
/// its place, in its marked region, by the builder of its position.
pub(super) fn build<'t>(
    cx: &FileContext<'t>,
    fix: &Fix,
    resolved: &anchor::Resolved<'t>,
    cache: &anchor::PoolCache<'t>,
) -> Result<Vec<Region>, Box<Failure>> {
    let rule = cx.plan.rule(fix.rule);
    let b = Build {
        cx,
        rule,
        resolved,
        cache,
    };
    builder(rule.position)(&b)
        .map_err(|e| Box::new(cx.fail_rule(fix.rule, e.kind(), e.line(), e.to_string())))
}

/// The imports the templates of `rules` (indices in the rule set, in order) need, each
/// added once, as one-line regions (see `markers::render_inline`): a fix per import, and a
/// failure per import that is not one.
pub(super) fn imports(cx: &FileContext, rules: &[usize]) -> (Vec<Fix>, Vec<Failure>) {
    let (mut fixes, mut failures) = (Vec::new(), Vec::new());
    let mut lines: Vec<String> = Vec::new();
    for &index in rules {
        let rule = cx.plan.rule(index);
        for import in &rule.imports {
            let (at, line, blank) = match imports::plan_import(cx.src, import, cx.plan.first_party)
            {
                Ok(None) => continue,
                Ok(Some(planned)) => planned,
                Err(why) => {
                    failures.push(cx.fail_rule(
                        index,
                        FailureKind::Template,
                        None,
                        why.to_string(),
                    ));
                    continue;
                }
            };
            if lines.contains(&line) {
                continue;
            }
            let region = Region {
                start: at,
                end: at,
                lines: markers::render_inline(&line, cx.plan.set_name(), &rule.id, blank),
                // An import binds names; it reads none worth checking.
                checked: Vec::new(),
                stash_eols: Vec::new(),
                eol: cx.eol,
                base: String::new(),
                shape: Shape::Import,
                original: Vec::new(),
                scope_at: at,
            };
            lines.push(line);
            fixes.push(Fix {
                rule: index,
                place: Place {
                    line: cx.src.line_of(at),
                    functions: Vec::new(),
                },
                regions: vec![region],
            });
        }
    }
    (fixes, failures)
}

/// What a position's builder works with: one rule at its target in one file.
pub(super) struct Build<'a, 't> {
    pub(super) cx: &'a FileContext<'t>,
    pub(super) rule: &'a CompiledRule,
    pub(super) resolved: &'a anchor::Resolved<'t>,
    pub(super) cache: &'a anchor::PoolCache<'t>,
}

impl Build<'_, '_> {
    /// The rule's template rendered for a place indented by `base` (replacing `original`).
    pub(super) fn render(
        &self,
        original: Option<&Original>,
        base: &str,
    ) -> Result<Rendered, BuildError> {
        template::render(
            &self.rule.template,
            &self.resolved.bindings,
            original,
            base,
            self.cx.unit,
            self.cx.plan.style.line_length,
        )
        .map_err(BuildError::Template)
    }

    /// The parameters `rendered` used, with their values, as its markers record them.
    pub(super) fn used_params(&self, rendered: &Rendered) -> Vec<(String, String)> {
        rendered
            .used_params
            .iter()
            .map(|k| (k.clone(), self.cx.plan.params[k].clone()))
            .collect()
    }

    /// The template inserted at byte `at` (a line start) as statements at indentation
    /// `base`; `scope_at` a byte of the scope it lands in.
    pub(super) fn insert(
        &self,
        at: usize,
        base: &str,
        scope_at: usize,
    ) -> Result<Vec<Region>, BuildError> {
        let r = self.render(None, base)?;
        let no_stash = (&[][..], Vec::new());
        Ok(vec![self.statements(at..at, base, no_stash, &r, scope_at)])
    }

    /// A region of statements at indentation `base`: `rendered` in its markers, which keep
    /// `stash` (the lines it replaces, each ending as `stash_eols` says), replacing
    /// `range`; `scope_at` a byte of the scope it lands in.
    pub(super) fn statements(
        &self,
        range: Range<usize>,
        base: &str,
        (stash, stash_eols): (&[&str], Vec<&'static str>),
        rendered: &Rendered,
        scope_at: usize,
    ) -> Region {
        let lines = markers::render(
            base,
            self.cx.plan.set_name(),
            &self.rule.id,
            &self.used_params(rendered),
            stash,
            &rendered.lines,
        );
        let offset = 1 + stash.len();
        let checked = (0..rendered.lines.len())
            .filter(|i| {
                !rendered.from_original.contains(i) && !rendered.lines[*i].trim().is_empty()
            })
            .map(|i| i + offset)
            .collect();
        let original = rendered.from_original.iter().map(|i| i + offset).collect();
        Region {
            start: range.start,
            end: range.end,
            lines,
            checked,
            stash_eols,
            eol: self.cx.eol,
            base: base.to_string(),
            shape: Shape::Statements,
            original,
            scope_at,
        }
    }
}

/// `add-parameter`: the parameter in the scope's signature, as ruff format lays it out
/// (see `signature`).
fn add_parameter(b: &Build) -> Result<Vec<Region>, BuildError> {
    let (src, scope) = (b.cx.src, b.resolved.scope);
    signature::plan_add_parameter(src, b.rule, b.resolved, b.cx.plan, b.cx.unit, b.cx.eol).map_err(
        |why| {
            BuildError::place(
                Some(src.line_of(scope.start_byte())),
                Refusal::Signature(why),
            )
        },
    )
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A region of statements as the checks' tests lay it out: `lines` at `base`, all of
    /// them template code, replacing `range`.
    pub(in crate::codemod) fn region(
        range: Range<usize>,
        base: &str,
        lines: &[&str],
        shape: Shape,
    ) -> Region {
        Region {
            start: range.start,
            end: range.end,
            lines: lines.iter().map(|l| l.to_string()).collect(),
            checked: (0..lines.len()).collect(),
            stash_eols: Vec::new(),
            eol: "\n",
            base: base.to_string(),
            shape,
            original: Vec::new(),
            scope_at: range.start + base.len(),
        }
    }
}
