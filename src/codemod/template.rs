//! Turning a rule's template into the lines that go into the file: parameters and
//! metavariables substituted, `{ORIGINAL}` expanded to the statement being replaced,
//! everything indented for its place and in the file's own indentation style.

use std::collections::BTreeMap;

use crate::python::layout;
use crate::python::pattern::Bindings;

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
    /// Parameters the template used, in order of first use.
    pub used_params: Vec<String>,
}

/// Split a template into lines, dropping the common indentation and one trailing newline.
fn dedent(template: &str) -> Vec<String> {
    let text = template.strip_suffix('\n').unwrap_or(template);
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let common = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| {
            if l.trim().is_empty() {
                String::new()
            } else {
                l[common..].to_string()
            }
        })
        .collect()
}

/// Replace `$$$NAME` and `$NAME` with bound text. Unknown names are an error.
fn substitute_metavariables(line: &str, bindings: &Bindings) -> Result<String, String> {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos..];
        let skip = if after.starts_with("$$$") { 3 } else { 1 };
        let name: String = after[skip..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            out.push('$');
            rest = &after[1..];
            continue;
        }
        let value = bindings.get(&name).ok_or_else(|| {
            format!("the template uses ${name}, which no pattern of the rule binds")
        })?;
        out.push_str(value);
        rest = &after[skip + name.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Replace `{NAME}` for each known parameter, recording which were used.
fn substitute_params(
    line: &str,
    params: &BTreeMap<String, String>,
    used: &mut Vec<String>,
) -> String {
    let mut out = line.to_string();
    for (name, value) in params {
        let key = format!("{{{name}}}");
        if out.contains(&key) {
            out = out.replace(&key, value);
            if !used.contains(name) {
                used.push(name.clone());
            }
        }
    }
    out
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
    template: &str,
    params: &BTreeMap<String, String>,
    bindings: &Bindings,
    original: Option<&Original>,
    base: &str,
    unit: &str,
    width: usize,
) -> Result<Rendered, String> {
    let mut r = Rendered::default();
    if template.trim().is_empty() {
        return Ok(r);
    }
    for line in dedent(template) {
        if line.trim() == "{ORIGINAL}" {
            let orig = original
                .ok_or("the template uses {ORIGINAL}, which only replace/wrap rules have")?;
            let extra = convert_indent(&line[..line.len() - line.trim_start().len()], unit);
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
        let mut here = Vec::new();
        let line = substitute_params(&line, params, &mut here);
        let line = substitute_metavariables(&line, bindings)?;
        if line.is_empty() {
            r.lines.push(String::new());
            continue;
        }
        let line = format!("{base}{}", convert_indent(&line, unit));
        let ending = here.iter().map(|p| params[p].as_str()).find(|lit| {
            line.ends_with(lit) || line.strip_suffix(':').is_some_and(|l| l.ends_with(lit))
        });
        match ending {
            Some(lit) => r.lines.extend(layout::fit(&line, lit, width, unit)?),
            None if !here.is_empty() && line.chars().count() > width => {
                return Err(format!(
                    "with these parameter values the line `{}` is longer than the checkout's line length {width}; the engine lays out a value that ends its line, so put the parameter last on its template line",
                    line.trim()
                ));
            }
            None => r.lines.push(line),
        }
        for p in here {
            if !r.used_params.contains(&p) {
                r.used_params.push(p);
            }
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> BTreeMap<String, String> {
        BTreeMap::from([("RANKS".to_string(), "{3, 14}".to_string())])
    }

    #[test]
    fn indents_substitutes_and_keeps_fstring_braces() {
        let t = "if _p and $I == 1:\n    print(f\"{x} {RANKS}\", {RANKS})\n\nx = 1\n";
        let b = Bindings::from([("I".to_string(), "j".to_string())]);
        let r = render(t, &params(), &b, None, "        ", "    ", 100).unwrap();
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
            "try:\n    {ORIGINAL}\nfinally:\n    pass",
            &BTreeMap::new(),
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
            "if a:\n    b()",
            &BTreeMap::new(),
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
        assert!(
            render(
                "x = $Y",
                &BTreeMap::new(),
                &Bindings::new(),
                None,
                "",
                "    ",
                100
            )
            .is_err()
        );
    }
}
