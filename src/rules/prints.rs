//! How a rule's printed lines read: `[[rule.prints]]` tables, kept at the end of the rule
//! block. The rule set says what its prints mean (label, fields, units) so that
//! `instrument log` reads them without knowing the project they instrument; the reader
//! compiles these raw declarations (`crate::log::decl`) and `test-rules` checks each one
//! against what the rule's template really prints.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One line a rule prints, as the rule author declares it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrintDecl {
    /// What the line is for the report: `setup`, `timeline`, `layer`, `saved-header`,
    /// `saved-activation`, `saved-weight`, `saved-total`, `file` or `note`.
    pub kind: String,
    /// The line as printed, with `{name}` for each value (`{name=...}` names a span that
    /// holds literal text and further values, e.g. a path built from parts). Not written:
    /// derived from what the template prints when the rule set loads (see `Naming`).
    #[serde(default)]
    pub line: String,
    /// How the report names the line; `{name}` fills in a value.
    #[serde(default)]
    pub label: Option<String>,
    /// Each value's type and, optionally, role and meaning: `"GiB"`, `"int: micro-batch"`,
    /// `"GiB cost: NCCL communicators"`. Values named after a role (`rank`, `allocated`, ...)
    /// take that role.
    #[serde(default)]
    pub fields: BTreeMap<String, String>,
    /// A part of a layer stage the line belongs to (`experts`), for `layer` lines.
    #[serde(default)]
    pub part: Option<String>,
    /// Roles taken from the rank's latest line that had them (`["layer", "stage"]`).
    #[serde(default)]
    pub inherit: Vec<String>,
    /// For `file` lines: the command that opens the file, `{name}` filled in.
    #[serde(default)]
    pub open: Option<String>,
    /// For `setup` lines: the costs the line states are the same whatever pipeline stage
    /// the rank is on (the CUDA context, the NCCL world, the device mesh), so `instrument
    /// log` compares them across all ranks; other figures only among ranks on one stage.
    #[serde(default)]
    pub same_on_every_stage: bool,
}

/// How a print's `line` is derived from what its template prints, where a declaration
/// does not write it (`[prints]` in `ruleset.toml`). Each value the line prints is
/// named by the expression that prints it (`values`), else by the `name=` written right
/// before it (`dispatch={tuple(tokens.shape)}` is `{dispatch}`), else by the expression
/// itself when it is a plain name (`({held})` is `{held}`); literal words that stand for
/// a value (`stage1` for `{stage}`) are named in `words`.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Naming {
    /// Expression as written -> the value's name (`alloc` -> `allocated`).
    #[serde(default)]
    pub values: BTreeMap<String, String>,
    /// A value's name -> the literal words that are it (`stage` -> `stage1`, ...).
    #[serde(default)]
    pub words: BTreeMap<String, Vec<String>>,
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `text` is a plain name.
fn is_name(text: &str) -> bool {
    !text.is_empty()
        && !text.starts_with(|c: char| c.is_ascii_digit())
        && text.chars().all(ident_char)
}

/// `text` as literal text of a declared line: braces doubled, the `words` of `naming`
/// (whole words only) replaced by their value.
fn literal(text: &str, naming: &Naming) -> String {
    let escaped = text.replace('{', "{{").replace('}', "}}");
    let mut out = String::with_capacity(escaped.len());
    let mut rest = escaped.as_str();
    'scan: while !rest.is_empty() {
        let at_word_start = out.chars().next_back().is_none_or(|c| !ident_char(c));
        if at_word_start {
            for (name, words) in &naming.words {
                for w in words {
                    if let Some(after) = rest.strip_prefix(w.as_str())
                        && after.chars().next().is_none_or(|c| !ident_char(c))
                    {
                        out.push_str(&format!("{{{name}}}"));
                        rest = after;
                        continue 'scan;
                    }
                }
            }
        }
        let c = rest.chars().next().expect("not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A printed value the naming rules give no name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the value `{expr}` has no name (not in [prints.values], not after `name=`, not a plain name)"
)]
pub struct Unnamed {
    /// The expression as printed.
    pub expr: String,
}

/// The `line` declaration for a printed line (`parts`: literal text and the expressions
/// printed), or why it cannot be derived.
pub fn derive_line(
    parts: &[crate::python::printed::Part],
    naming: &Naming,
) -> Result<String, Unnamed> {
    use crate::python::printed::Part;
    let mut out = String::new();
    let mut last_literal = "";
    for part in parts {
        match part {
            Part::Lit(text) => {
                out.push_str(&literal(text, naming));
                last_literal = text;
            }
            Part::Field { expr, .. } => {
                let cue = last_literal
                    .strip_suffix('=')
                    .map(|l| {
                        let start = l.rfind(|c: char| !ident_char(c)).map_or(0, |i| i + 1);
                        &l[start..]
                    })
                    .filter(|n| is_name(n));
                let name = naming
                    .values
                    .get(expr)
                    .map(String::as_str)
                    .or(cue)
                    .or_else(|| is_name(expr).then_some(expr.as_str()))
                    .ok_or_else(|| Unnamed { expr: expr.clone() })?;
                out.push_str(&format!("{{{name}}}"));
                last_literal = "";
            }
        }
    }
    Ok(out)
}

/// The lines each rule of `set` prints (by rule index), in template order, read off its
/// template's f-strings (`python::printed`). Rules written `per` target are not followed.
pub fn printed_lines(
    set: &super::RuleSet,
) -> std::collections::BTreeMap<usize, Vec<crate::python::printed::Line>> {
    let templates: Vec<(usize, String)> = set
        .rules
        .iter()
        .enumerate()
        .filter(|(_, r)| r.per.is_none())
        .map(|(i, r)| (i, template_as_python(&r.template, &set.manifest)))
        .collect();
    crate::python::printed::printed_lines(&templates)
}

/// A rule's template as Python that parses without a target: split into lines and
/// pieces as `instantiate` splits it (`Template`), each parameter's value `None` (what
/// it prints is a value known at `add` time), each metavariable a name `python::printed`
/// reads back as the field `$X`, the statement a `replace`/`wrap` rule stands in for
/// (`{ORIGINAL}`) a `pass`.
fn template_as_python(template: &str, manifest: &super::Manifest) -> String {
    use super::template::{Line, Piece, Template};
    let params: std::collections::BTreeMap<String, String> = manifest
        .params
        .keys()
        .map(|name| (name.clone(), "None".to_string()))
        .collect();
    let mut out = String::new();
    for line in Template::compile(template, &params).lines {
        match line {
            Line::Original { indent } => {
                out.push_str(&indent);
                out.push_str("pass");
            }
            Line::Code(pieces) => {
                for piece in pieces {
                    match piece {
                        Piece::Text(t) => out.push_str(&t),
                        Piece::Param { value, .. } => out.push_str(&value),
                        Piece::Meta(name) => {
                            out.push_str(&crate::python::printed::metavariable_name(&name))
                        }
                    }
                }
            }
        }
        out.push('\n');
    }
    out
}

/// A line with every value unnamed: `{}` for each value, span bounds (`{name=`, its `}`)
/// dropped, doubled braces kept. Two lines with the same shape print the same literal
/// text around the same number of values.
fn shape_of_declared(line: &str) -> String {
    let mut out = String::new();
    let mut spans = 0usize;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' | '}' if chars.peek() == Some(&c) => {
                chars.next();
                out.push(c);
                out.push(c);
            }
            '{' => {
                let mut name = String::new();
                while let Some(&n) = chars.peek() {
                    if n == '}' || n == '=' {
                        break;
                    }
                    name.push(n);
                    chars.next();
                }
                if chars.next() == Some('=') {
                    spans += 1;
                } else {
                    out.push_str("{}");
                }
            }
            '}' if spans > 0 => spans -= 1,
            _ => out.push(c),
        }
    }
    out
}

/// The shape (`shape_of_declared`) of a printed line, its literal words named as `naming`
/// says.
fn shape_of_printed(parts: &[crate::python::printed::Part], naming: &Naming) -> String {
    use crate::python::printed::Part;
    let mut line = String::new();
    for part in parts {
        match part {
            Part::Lit(text) => line.push_str(&literal(text, naming)),
            Part::Field { .. } => line.push_str("{}"),
        }
    }
    shape_of_declared(&line)
}

/// Fill in the `line` of every declaration of `set` that does not write one: from the
/// lines its rule's template prints (`python::printed`), named as `naming` says. A rule's
/// lines that its written declarations read (the same literal text around the same
/// number of values, whatever the values are called) are taken out first; what is left
/// must be one line for each declaration without one, in order.
pub fn derive_lines(set: &mut super::RuleSet) -> Result<(), super::Error> {
    if !set
        .rules
        .iter()
        .any(|r| r.prints.iter().any(|d| d.line.is_empty()))
    {
        return Ok(());
    }
    let printed = printed_lines(set);
    let naming = set.manifest.prints.clone();
    for (i, rule) in set.rules.iter_mut().enumerate() {
        let open: Vec<usize> = (0..rule.prints.len())
            .filter(|k| rule.prints[*k].line.is_empty())
            .collect();
        if open.is_empty() {
            continue;
        }
        let at = |k: usize| {
            format!(
                "{}/{}: rule {} print {}",
                set.origin,
                set.rule_files[i],
                rule.id,
                k + 1
            )
        };
        let written: Vec<String> = rule
            .prints
            .iter()
            .filter(|d| !d.line.is_empty())
            .map(|d| shape_of_declared(&d.line))
            .collect();
        let mut candidates = Vec::new();
        for line in printed.get(&i).into_iter().flatten() {
            if !written.contains(&shape_of_printed(line, &naming)) {
                candidates.push((line, derive_line(line, &naming)));
            }
        }
        if candidates.len() != open.len() {
            return Err(super::Error::invalid(format!(
                "{}: its `line` cannot be derived: the template prints {} line(s) no written declaration reads, for {} declaration(s) without a line; write `line`",
                at(open[0]),
                candidates.len(),
                open.len()
            )));
        }
        for (k, (line, derived)) in open.into_iter().zip(candidates) {
            rule.prints[k].line = derived.map_err(|why| {
                super::Error::invalid(format!(
                    "{}: its `line` cannot be derived from `{}`: {why}; write `line`",
                    at(k),
                    crate::python::printed::show(line)
                ))
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::printed::Part;

    fn lit(s: &str) -> Part {
        Part::Lit(s.into())
    }

    fn field(e: &str) -> Part {
        Part::Field {
            expr: e.into(),
            conv: None,
            spec: String::new(),
        }
    }

    #[test]
    fn values_are_named_by_the_table_their_name_or_the_name_before_them() {
        let naming: Naming = toml::from_str(
            "values = { alloc = \"allocated\", \"self.idx\" = \"layer\" }\nwords = { stage = [\"stage1\", \"stage3\"] }\n",
        )
        .unwrap();
        let line = [
            lit("[rank="),
            field("rank"),
            lit("]     layer"),
            field("self.idx"),
            lit(" stage1: after forward_stage1_compute  dispatch="),
            field("tuple($TOKENS.shape)"),
            lit(": alloc="),
            field("alloc"),
        ];
        assert_eq!(
            derive_line(&line, &naming).unwrap(),
            "[rank={rank}]     layer{layer} {stage}: after forward_stage1_compute  dispatch={dispatch}: alloc={allocated}"
        );
        // A word inside another is not it; braces are literal text.
        let line = [lit("{x} forward_stage1 stage3"), field("n")];
        assert_eq!(
            derive_line(&line, &naming).unwrap(),
            "{{x}} forward_stage1 {stage}{n}"
        );
        let unnamed = [lit("shape "), field("tuple(x.shape)")];
        assert_eq!(
            derive_line(&unnamed, &naming),
            Err(Unnamed {
                expr: "tuple(x.shape)".into()
            })
        );
    }

    /// The shipped rules write a print's `line` by hand only where it cannot be derived:
    /// with any one written line left out, derivation fails or gives another line.
    #[test]
    fn shipped_lines_are_written_only_where_they_cannot_be_derived() {
        let set = crate::rules::load::load("memory-prints").unwrap();
        let (mut written, mut total) = (0, 0);
        for (i, rule) in set.rules.iter().enumerate() {
            for (k, decl) in rule.prints.iter().enumerate() {
                total += 1;
                if decl.line.is_empty() {
                    continue;
                }
                written += 1;
                let mut without = crate::rules::load::load("memory-prints").unwrap();
                without.rules[i].prints[k].line.clear();
                let derived =
                    derive_lines(&mut without).map(|()| without.rules[i].prints[k].line.clone());
                assert!(
                    derived.as_ref().ok() != Some(&decl.line),
                    "{} print {} writes `{}`, which derivation gives: leave `line` out",
                    rule.id,
                    k + 1,
                    decl.line
                );
            }
        }
        assert!(
            written > 0 && total - written >= 68,
            "{written} of {total} written"
        );
    }

    /// A written line claims the printed line of its shape whatever it names the values,
    /// spans included; braces written doubled stay literal.
    #[test]
    fn shapes_ignore_names_and_spans() {
        assert_eq!(
            shape_of_declared("[rank={rank}] run | {run=rank={r}; pp={a}/{b}} {{x}}"),
            "[rank={}] run | rank={}; pp={}/{} {{x}}"
        );
        let naming: Naming = toml::from_str("words = { stage = [\"stage1\"] }\n").unwrap();
        let printed = [
            lit("[rank="),
            field("rank"),
            lit("] stage1 {x}: "),
            field("a / G"),
        ];
        assert_eq!(
            shape_of_printed(&printed, &naming),
            shape_of_declared("[rank={rank}] {stage} {{x}}: {allocated}")
        );
    }
}
