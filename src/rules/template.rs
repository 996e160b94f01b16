//! A rule's template as `instantiate` leaves it: dedented into lines, each line literal
//! text, parameter values and metavariables, or the statement a `replace`/`wrap` rule
//! stands in for (`{ORIGINAL}` on a line of its own). Rendering it for a place
//! (`codemod::template`) only fills in what a match bound: nothing is parsed or
//! substituted there again.
//!
//! The lexing of placeholders (`{NAME}`) and metavariables (`$X`, `$$$X`) lives here, once:
//! the load-time checks (`names`), `instantiate` and the template's pieces all read text
//! through it.

use std::collections::BTreeMap;

/// One piece of a template line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    /// A parameter's value, as a Python literal (`RANKS` -> `{3, 14}`).
    Param {
        name: String,
        value: String,
    },
    /// A metavariable (`$X` or `$$$X`): the text the rule's patterns bound to `X`.
    Meta(String),
}

/// One line of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// Code, indented as written below the template's common indentation (empty: a
    /// blank line).
    Code(Vec<Piece>),
    /// `{ORIGINAL}`: the replaced statement's lines, shifted by `indent`.
    Original { indent: String },
}

/// A compiled template.
#[derive(Debug, Clone, Default)]
pub struct Template {
    pub lines: Vec<Line>,
    /// The template as instantiated, before its parameters were filled in: for what reads
    /// its code as text (which names it defines).
    pub written: String,
}

impl Template {
    /// `text` (a template whose other placeholders are filled in) with the parameters of
    /// `params` filled in. A `{NAME}` that is no parameter stays as written.
    pub fn compile(text: &str, params: &BTreeMap<String, String>) -> Template {
        let lines = if text.trim().is_empty() {
            Vec::new()
        } else {
            dedent(text)
                .into_iter()
                .map(|line| {
                    if line.trim() == "{ORIGINAL}" {
                        let indent = line[..line.len() - line.trim_start().len()].to_string();
                        Line::Original { indent }
                    } else {
                        Line::Code(pieces(&line, params))
                    }
                })
                .collect()
        };
        Template {
            lines,
            written: text.to_string(),
        }
    }

    /// Whether the template writes parameter `name`.
    pub fn uses_param(&self, name: &str) -> bool {
        self.lines.iter().any(|l| match l {
            Line::Code(pieces) => pieces
                .iter()
                .any(|p| matches!(p, Piece::Param { name: n, .. } if n == name)),
            Line::Original { .. } => false,
        })
    }
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

/// The pieces of one line: the parameters of `params` found first, then the
/// metavariables in the text between them.
fn pieces(line: &str, params: &BTreeMap<String, String>) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('{') {
        let name = placeholder_at(&rest[open..]);
        match name.and_then(|n| params.get_key_value(n)) {
            Some((name, value)) => {
                text.push_str(&rest[..open]);
                metas(&std::mem::take(&mut text), &mut out);
                out.push(Piece::Param {
                    name: name.clone(),
                    value: value.clone(),
                });
                rest = &rest[open + name.len() + 2..];
            }
            None => {
                text.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    text.push_str(rest);
    metas(&text, &mut out);
    out
}

/// `text` as literal pieces and metavariables, appended to `out`.
fn metas(text: &str, out: &mut Vec<Piece>) {
    let mut literal = String::new();
    for token in lex_metavariables(text) {
        match token {
            Token::Text(t) => literal.push_str(t),
            Token::Meta(name) => {
                if !literal.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut literal)));
                }
                out.push(Piece::Meta(name.to_string()));
            }
        }
    }
    if !literal.is_empty() {
        out.push(Piece::Text(literal));
    }
}

/// The name of the placeholder `text` starts with (`{RANKS}...` -> `RANKS`): uppercase
/// letters, digits and underscores between braces.
pub fn placeholder_at(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('{')?;
    let close = inner.find('}')?;
    let name = &inner[..close];
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    ok.then_some(name)
}

/// `{NAME}` placeholders in `text`, in order: what `fill` would fill (`{{B}}` holds `B`).
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        match placeholder_at(&rest[open..]) {
            Some(name) => {
                out.push(name);
                rest = &rest[open + name.len() + 2..];
            }
            None => rest = &rest[open + 1..],
        }
    }
    out
}

/// `text` with each placeholder `value` knows replaced by its value; the others stay as
/// written. The one substitution of placeholders, for every field of a rule.
pub fn fill(text: &str, value: &dyn Fn(&str) -> Option<String>) -> String {
    if !text.contains('{') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let at = &rest[open..];
        match placeholder_at(at).and_then(|n| value(n).map(|v| (n.len(), v))) {
            Some((len, v)) => {
                out.push_str(&v);
                rest = &at[len + 2..];
            }
            None => {
                out.push('{');
                rest = &at[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// A template's text, as literal text and metavariables.
pub enum Token<'a> {
    Text(&'a str),
    /// `$X` or `$$$X`: the name.
    Meta(&'a str),
}

/// Lex `$$$NAME` and `$NAME` (letters, digits, underscores) out of `text`; a `$` that no
/// name follows is text.
pub fn lex_metavariables(text: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        let after = &rest[pos..];
        let skip = if after.starts_with("$$$") { 3 } else { 1 };
        let len = after[skip..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len() - skip);
        if len == 0 {
            out.push(Token::Text(&rest[..=pos]));
            rest = &after[1..];
            continue;
        }
        if pos > 0 {
            out.push(Token::Text(&rest[..pos]));
        }
        out.push(Token::Meta(&after[skip..skip + len]));
        rest = &after[skip + len..];
    }
    if !rest.is_empty() {
        out.push(Token::Text(rest));
    }
    out
}

/// The metavariables `text` names, in order (`$_` and a bare `$$$` included as written:
/// `_` and nothing).
pub fn metavariables(text: &str) -> Vec<&str> {
    lex_metavariables(text)
        .into_iter()
        .filter_map(|t| match t {
            Token::Meta(name) => Some(name),
            Token::Text(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> BTreeMap<String, String> {
        BTreeMap::from([("RANKS".to_string(), "{3, 14}".to_string())])
    }

    #[test]
    fn lines_are_pieces_of_text_parameters_and_metavariables() {
        let t = Template::compile(
            "    if $I == 1:\n        print(f\"{x} {RANKS}\", $$$ARGS, {{RANKS}})\n\n    {ORIGINAL}\n",
            &params(),
        );
        let param = || Piece::Param {
            name: "RANKS".into(),
            value: "{3, 14}".into(),
        };
        assert_eq!(
            t.lines,
            vec![
                Line::Code(vec![
                    Piece::Text("if ".into()),
                    Piece::Meta("I".into()),
                    Piece::Text(" == 1:".into()),
                ]),
                Line::Code(vec![
                    Piece::Text("    print(f\"{x} ".into()),
                    param(),
                    Piece::Text("\", ".into()),
                    Piece::Meta("ARGS".into()),
                    Piece::Text(", {".into()),
                    param(),
                    Piece::Text("})".into()),
                ]),
                Line::Code(vec![]),
                Line::Original {
                    indent: String::new()
                },
            ]
        );
        assert!(t.uses_param("RANKS") && !t.uses_param("STEP"));
        assert!(Template::compile("  \n", &params()).lines.is_empty());
    }

    #[test]
    fn a_dollar_no_name_follows_is_text() {
        assert_eq!(metavariables("a $ b $$$ c $X $$$Y $_"), vec!["X", "Y", "_"]);
        let t = Template::compile("x = '$' + $$$", &params());
        assert_eq!(
            t.lines,
            vec![Line::Code(vec![Piece::Text("x = '$' + $$$".into())])]
        );
    }

    #[test]
    fn fill_replaces_only_what_it_knows() {
        let v = |n: &str| (n == "EXPERTS").then(|| "E".to_string());
        assert_eq!(
            fill("class {EXPERTS}; {{EXPERTS}} {OTHER} {x}", &v),
            "class E; {E} {OTHER} {x}"
        );
        assert_eq!(placeholders("a {B} {c} {D_1}{{E}}{"), vec!["B", "D_1", "E"]);
    }
}
