//! Adding a parameter to a function's signature (`position = "add-parameter"`), laid out
//! as ruff format lays it out, whatever layout the signature had.

use crate::python::KindOf;
use tree_sitter::Node;

use super::anchor;
use super::context::PlanContext;
use super::edit::{Region, Shape, eols_of, line_start, next_line_start};
use super::markers;
use super::template;
use crate::python::Source;
use crate::rules::CompiledRule;

/// Why a parameter cannot be added to a function: each says what to change first.
#[derive(Debug, thiserror::Error)]
pub enum Unplaceable {
    #[error("add-parameter needs a `def` scope")]
    NotAFunction,
    #[error("the function has no parameter list")]
    NoParameters,
    #[error("the function has no colon")]
    NoColon,
    #[error("the function has no body")]
    NoBody,
    #[error("the body is on the same line as the `def`; put it on its own lines first")]
    BodyOnDefLine,
    #[error(
        "the parameter list holds comments; put the parameters one per line with a trailing comma first (the layout ruff keeps)"
    )]
    Comments,
    #[error("the `def` shares its line with other code")]
    SharedLine,
    #[error(
        "the signature's name or return annotation spans lines; lay it out with ruff format first"
    )]
    HeaderSpansLines,
    #[error("code follows the `def` line's colon")]
    CodeAfterColon,
    #[error("a parameter spans several lines; lay the signature out with ruff format first")]
    ParameterSpansLines,
    /// The parameter's template does not render here.
    #[error(transparent)]
    Render(#[from] template::RenderError),
}

/// Add one parameter to a function's signature, as ruff format lays it out. Parameters
/// already one per line with a trailing comma (the layout ruff keeps) get a new line,
/// before `**kwargs` or after the last one. Any other layout (one line, or the parameters
/// hugged on one indented line) is rewritten whole as that layout, with the magic
/// trailing comma that makes ruff keep it: a region from the `def` to its colon, closed
/// at the end of the colon's line (a close marker of its own line would be re-indented).
/// The region's lines end with `eol`, the file's.
pub(super) fn plan_add_parameter(
    src: &Source,
    rule: &CompiledRule,
    resolved: &anchor::Resolved,
    ctx: &PlanContext,
    unit: &str,
    eol: &'static str,
) -> Result<Vec<Region>, Unplaceable> {
    let func = resolved.scope;
    if func.kind_of() != "function_definition" {
        return Err(Unplaceable::NotAFunction);
    }
    // The parameter is bound in the function's body: the name checks look there.
    let scope_at = func
        .field("body")
        .map_or(func.start_byte(), |b| b.start_byte());
    let params = func.field("parameters").ok_or(Unplaceable::NoParameters)?;
    let mut cursor = params.walk();
    let items: Vec<Node> = params
        .named_children(&mut cursor)
        .filter(|c| c.kind_of() != "comment")
        .collect();
    let text = &src.text;
    let one_per_line = items
        .windows(2)
        .all(|w| w[0].end_position().row < w[1].start_position().row)
        && items
            .first()
            .is_some_and(|f| f.start_position().row > params.start_position().row);
    let trailing_comma = items.last().is_some_and(|last| {
        text[last.end_byte()..params.end_byte()]
            .trim_start()
            .starts_with(',')
    });
    let closing_own_line = items
        .last()
        .is_some_and(|last| last.end_position().row < params.end_position().row);
    let splat = items
        .iter()
        .find(|n| n.kind_of() == "dictionary_splat_pattern");
    let base_of = |n: Node| text[line_start(text, n.start_byte())..n.start_byte()].to_string();
    type Param = (template::Rendered, Vec<(String, String)>);
    let render_param = |base: &str| -> Result<Param, Unplaceable> {
        let r = template::render(
            &rule.template,
            &resolved.bindings,
            None,
            base,
            unit,
            ctx.style.line_length,
        )?;
        let used = r
            .used_params
            .iter()
            .map(|k| (k.clone(), ctx.params[k].clone()))
            .collect();
        Ok((r, used))
    };
    if one_per_line && trailing_comma && closing_own_line {
        let last = *items.last().expect("non-empty");
        let anchor_item = splat.copied().unwrap_or(last);
        let base = base_of(anchor_item);
        let at = match splat {
            Some(n) => line_start(text, n.start_byte()),
            None => next_line_start(text, last.end_byte()),
        };
        let (mut r, used) = render_param(&base)?;
        if let Some(l) = r.lines.last_mut()
            && !l.trim_end().ends_with(',')
        {
            l.push(',');
        }
        let lines = markers::render(&base, ctx.set_name(), &rule.id, &used, &[], &r.lines);
        // A parameter's default is read where the function is defined, not inside it.
        return Ok(vec![Region {
            start: at,
            end: at,
            lines,
            checked: Vec::new(),
            stash_eols: Vec::new(),
            eol,
            base,
            shape: Shape::Parameters,
            original: Vec::new(),
            scope_at,
        }]);
    }
    // Rewrite the header from `def` to its colon.
    let mut cursor = func.walk();
    let colon = func
        .children(&mut cursor)
        .find(|c| c.kind_of() == ":")
        .ok_or(Unplaceable::NoColon)?;
    let body = func.field("body").ok_or(Unplaceable::NoBody)?;
    if body.start_position().row == colon.start_position().row {
        return Err(Unplaceable::BodyOnDefLine);
    }
    let mut pc = params.walk();
    if params
        .named_children(&mut pc)
        .any(|c| c.kind_of() == "comment")
    {
        return Err(Unplaceable::Comments);
    }
    let start = line_start(text, func.start_byte());
    let base = text[start..func.start_byte()].to_string();
    if !base.trim().is_empty() {
        return Err(Unplaceable::SharedLine);
    }
    let head = &text[func.start_byte()..params.start_byte()];
    let tail = text[params.end_byte()..colon.start_byte()].trim();
    if head.contains('\n') || tail.contains('\n') {
        return Err(Unplaceable::HeaderSpansLines);
    }
    let line_end = text[colon.end_byte()..]
        .find('\n')
        .map_or(text.len(), |i| colon.end_byte() + i);
    let after_colon = text[colon.end_byte()..line_end]
        .trim_end_matches('\r')
        .trim();
    if !after_colon.is_empty() && !after_colon.starts_with('#') {
        return Err(Unplaceable::CodeAfterColon);
    }
    let inner = format!("{base}{unit}");
    let (r, used) = render_param(&inner)?;
    let new_param = r
        .lines
        .iter()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(',')
        .to_string();
    let mut lines = vec![format!("{base}{}(", head.trim_end())];
    for item in &items {
        if splat.is_some_and(|s| s.id() == item.id()) {
            lines.push(format!("{inner}{new_param},"));
        }
        let t = src.text_of(*item);
        if t.contains('\n') {
            return Err(Unplaceable::ParameterSpansLines);
        }
        lines.push(format!("{inner}{t},"));
    }
    if splat.is_none() {
        lines.push(format!("{inner}{new_param},"));
    }
    let comment = if after_colon.is_empty() {
        String::new()
    } else {
        format!("  {after_colon}")
    };
    let tail = if tail.is_empty() {
        String::new()
    } else {
        format!(" {tail}")
    };
    lines.push(format!("{base}){tail}:{comment}"));
    let end = next_line_start(text, line_end);
    let original = &text[start..end];
    let stash: Vec<&str> = original
        .strip_suffix('\n')
        .unwrap_or(original)
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .collect();
    let stash_eols = eols_of(original);
    let region = markers::render_with(&base, ctx.set_name(), &rule.id, &used, &stash, &lines, true);
    Ok(vec![Region {
        start,
        end,
        lines: region,
        checked: Vec::new(),
        stash_eols,
        eol,
        base,
        shape: Shape::Signature,
        original: Vec::new(),
        scope_at,
    }])
}
