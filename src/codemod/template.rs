//! Turning a compiled template (`rules::template`) into the lines that go into the file:
//! the text a match bound put in for each metavariable, `{ORIGINAL}` expanded to the
//! statement being replaced, everything indented for its place and in the file's own
//! indentation style. The parameters' values are in the template already.

use crate::python::layout;
use crate::python::pattern::Bindings;
use crate::rules::template::{Line, Piece, Template};

/// The statement a `replace` / `wrap` rule stands in for, as whole lines.
pub struct Original<'a> {
    /// The lines, without line endings, with their indentation.
    pub lines: Vec<&'a str>,
    /// For each line, whether it starts inside a multi-line string (never re-indented).
    pub in_string: Vec<bool>,
}

/// A rendered template.
#[derive(Debug, Default)]
pub struct Rendered {
    pub lines: Vec<String>,
    /// Indices of `lines` copied from the original statement (already valid code there).
    pub from_original: Vec<usize>,
    /// Parameters the template used, in order of first use (on one line, by name).
    pub used_params: Vec<String>,
}

/// Why a template cannot be rendered at a place.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A metavariable the match did not bind (the rule set's check at load catches those
    /// no pattern binds; an anchor alternative that binds it may not be the one matched).
    #[error("the template uses ${0}, which no pattern of the rule binds")]
    Unbound(String),
    /// `{ORIGINAL}` in a rule that replaces nothing.
    #[error("the template uses {{ORIGINAL}}, which only replace/wrap rules have")]
    NoOriginal,
    /// A parameter value made a line too long, and it does not end the line.
    #[error(
        "with these parameter values the line `{line}` is longer than the checkout's line length {width}; the engine lays out a value that ends its line, so put the parameter last on its template line"
    )]
    TooLong { line: String, width: usize },
    /// A value that ends its line, but cannot be laid out as ruff format would.
    #[error(transparent)]
    Layout(#[from] layout::TooLong),
}

/// Re-express leading indentation written in 4-space steps in the file's unit.
fn convert_indent(line: &str, unit: &str) -> String {
    if unit == "    " {
        return line.to_string();
    }
    let spaces = line.len() - line.trim_start_matches(' ').len();
    format!(
        "{}{}{}",
        unit.repeat(spaces / 4),
        " ".repeat(spaces % 4),
        &line[spaces..]
    )
}

/// Render `template` for a place indented by `base`. A line a parameter value made longer
/// than `width` columns is laid out as ruff format would (see `python::layout`).
pub fn render(
    template: &Template,
    bindings: &Bindings,
    original: Option<&Original>,
    base: &str,
    unit: &str,
    width: usize,
) -> Result<Rendered, RenderError> {
    let mut r = Rendered::default();
    for line in &template.lines {
        let pieces = match line {
            Line::Original { indent } => {
                let orig = original.ok_or(RenderError::NoOriginal)?;
                let extra = convert_indent(indent, unit);
                for (text, &in_string) in orig.lines.iter().zip(&orig.in_string) {
                    r.from_original.push(r.lines.len());
                    let shifted = match text.strip_prefix(base) {
                        _ if in_string || text.is_empty() => text.to_string(),
                        Some(rest) => format!("{base}{extra}{rest}"),
                        None => text.to_string(),
                    };
                    r.lines.push(shifted);
                }
                continue;
            }
            Line::Code(pieces) => pieces,
        };
        // The parameters of this line, by name, each with its value.
        let mut here: Vec<(&str, &str)> = Vec::new();
        let mut line = String::new();
        for piece in pieces {
            match piece {
                Piece::Text(t) => line.push_str(t),
                Piece::Param { name, value } => {
                    line.push_str(value);
                    here.push((name, value));
                }
                Piece::Meta(name) => line.push_str(
                    bindings
                        .get(name)
                        .ok_or_else(|| RenderError::Unbound(name.clone()))?,
                ),
            }
        }
        here.sort_unstable();
        here.dedup();
        if line.is_empty() {
            r.lines.push(String::new());
            continue;
        }
        let line = format!("{base}{}", convert_indent(&line, unit));
        let ending = here.iter().map(|(_, value)| *value).find(|lit| {
            line.ends_with(lit) || line.strip_suffix(':').is_some_and(|l| l.ends_with(lit))
        });
        match ending {
            Some(lit) => r
                .lines
                .extend(layout::fit(&line, lit, width, unit).map_err(RenderError::Layout)?),
            None if !here.is_empty() && line.chars().count() > width => {
                return Err(RenderError::TooLong {
                    line: line.trim().to_string(),
                    width,
                });
            }
            None => r.lines.push(line),
        }
        for (p, _) in here {
            if !r.used_params.iter().any(|u| u == p) {
                r.used_params.push(p.to_string());
            }
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn compiled(t: &str) -> Template {
        Template::compile(t, &params())
    }

    fn params() -> BTreeMap<String, String> {
        BTreeMap::from([("RANKS".to_string(), "{3, 14}".to_string())])
    }

    #[test]
    fn indents_substitutes_and_keeps_fstring_braces() {
        let t = "if _p and $I == 1:\n    print(f\"{x} {RANKS}\", {RANKS})\n\nx = 1\n";
        let b = Bindings::from([("I".to_string(), "j".to_string())]);
        let r = render(&compiled(t), &b, None, "        ", "    ", 100).unwrap();
        assert_eq!(
            r.lines,
            vec![
                "        if _p and j == 1:",
                "            print(f\"{x} {3, 14}\", {3, 14})",
                "",
                "        x = 1"
            ]
        );
        assert_eq!(r.used_params, vec!["RANKS"]);
    }

    #[test]
    fn original_is_reindented_except_inside_strings() {
        let orig = Original {
            lines: vec!["    x = f(", "\"\"\"doc", "    )"],
            in_string: vec![false, true, false],
        };
        let r = render(
            &compiled("try:\n    {ORIGINAL}\nfinally:\n    pass"),
            &Bindings::new(),
            Some(&orig),
            "    ",
            "    ",
            100,
        )
        .unwrap();
        assert_eq!(
            r.lines,
            vec![
                "    try:",
                "        x = f(",
                "\"\"\"doc",
                "        )",
                "    finally:",
                "        pass"
            ]
        );
        assert_eq!(r.from_original, vec![1, 2, 3]);
    }

    #[test]
    fn tabs_files_get_tabs() {
        let r = render(
            &compiled("if a:\n    b()"),
            &Bindings::new(),
            None,
            "\t",
            "\t",
            100,
        )
        .unwrap();
        assert_eq!(r.lines, vec!["\tif a:", "\t\tb()"]);
    }

    #[test]
    fn unbound_metavariable_is_an_error() {
        assert!(render(&compiled("x = $Y"), &Bindings::new(), None, "", "    ", 100).is_err());
    }
}
