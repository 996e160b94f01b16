//! Template parameters: the text a user gave (`--ranks 3,14`), checked against the kind
//! the rule set declares in `[params]`, and written as the Python literal the templates
//! receive (`{3, 14}`), in the checkout's quote style. Which flag sets which parameter,
//! and what it is by default, is the rule set's; nothing here knows the names.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::python::{literal, style::Style};
use crate::rules::{Manifest, ParamDefault, ParamKind, ParamSpec};

/// A checked value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Ints(Vec<u64>),
    Int(u64),
    Text(String),
    None,
}

/// Where a parameter's value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    Flag,
    Default,
    /// Worked out by the engine (the detail layers), with why.
    Computed,
    /// Not given, so `None`: the inserted code decides at run time.
    Unset,
}

/// One parameter as `add` fills it in.
#[derive(Debug, Clone, Serialize)]
pub struct Param {
    pub name: String,
    /// The Python literal the templates receive.
    pub literal: String,
    pub origin: Origin,
}

/// How the user sets `spec`: `--ranks`, or `--param NAME=` for one without a flag.
pub fn shown(name: &str, spec: &ParamSpec) -> String {
    match &spec.flag {
        Some(f) => format!("--{f}"),
        None => format!("--param {name}="),
    }
}

/// Why a value given (or a rule set's default) does not fit its parameter's kind: each
/// says what to give instead. `flag` is how the user gives it (`--ranks`).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ValueError {
    #[error("{flag} is empty; give comma-separated non-negative integers, e.g. {flag} {example}")]
    NoIntegers { flag: String, example: &'static str },
    #[error("{flag} {}: `{part}` is too large (the largest is {})", .text.escape_debug(), u64::MAX)]
    ItemTooLarge {
        flag: String,
        text: String,
        part: String,
    },
    #[error(
        "{flag} {}: `{}` is not a non-negative integer (expected e.g. {flag} {example})",
        .text.escape_debug(),
        .part.escape_debug()
    )]
    ItemNotAnInteger {
        flag: String,
        text: String,
        part: String,
        example: &'static str,
    },
    #[error("{flag} {text}: too large (the largest is {})", u64::MAX)]
    TooLarge { flag: String, text: String },
    #[error("{flag} {}: not a non-negative integer", .text.escape_debug())]
    NotAnInteger { flag: String, text: String },
    #[error(
        "{flag} {text:?}: character {} is a control character ({}); a value ends up in Python source and must not hold one{}",
        .at + 1,
        .ch.escape_unicode(),
        if *.ch == '\r' { " (a CRLF line ending from a launcher script?)" } else { "" }
    )]
    Control {
        flag: String,
        text: String,
        /// Its index among the text's characters.
        at: usize,
        ch: char,
    },
    #[error("{flag} is empty; give a folder, e.g. {flag} /tmp")]
    NoFolder { flag: String },
    #[error("{flag} {text}: expected one of {}", .choices.join(", "))]
    NotAChoice {
        flag: String,
        text: String,
        choices: Vec<String>,
    },
}

/// Why the parameters cannot be filled in: a flag or parameter the rule set does not
/// have, a value that does not fit, one that is needed and not given.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Value(#[from] ValueError),
    #[error("--{flag}: rule set {set} has no parameter it sets (its parameters: {params})")]
    NoSuchFlag {
        flag: String,
        set: String,
        params: String,
    },
    #[error(
        "--param {name}={value}: rule set {set} has no parameter {name} (its parameters: {params})"
    )]
    NoSuchParam {
        name: String,
        value: String,
        set: String,
        params: String,
    },
    #[error("rule set {set}: the default of {name}: {error}")]
    BadDefault {
        set: String,
        name: String,
        error: ValueError,
    },
    #[error("rule set {set} needs {name} ({help}): pass {flag}")]
    Missing {
        set: String,
        name: String,
        help: String,
        flag: String,
    },
}

/// `fill`'s error: the parameters', or `E`, why a value given does not fit the checkout
/// (the caller's check).
#[derive(Debug, thiserror::Error)]
pub enum FillError<E: std::error::Error + 'static> {
    #[error(transparent)]
    Params(Box<Error>),
    #[error(transparent)]
    Given(E),
}

impl<E: std::error::Error + 'static> From<Error> for FillError<E> {
    fn from(e: Error) -> FillError<E> {
        FillError::Params(Box::new(e))
    }
}

/// Check `text` as given for a parameter of `spec`'s kind.
pub fn parse(spec: &ParamSpec, flag: &str, text: &str) -> Result<Value, ValueError> {
    let flag_ = || flag.to_string();
    // The example a message gives, by kind: a set of ids (ranks) or indices in order (layers).
    let example = match spec.kind {
        ParamKind::IntTuple => "0,1",
        _ => "3,14",
    };
    let ints = |text: &str| -> Result<Vec<u64>, ValueError> {
        if text.trim().is_empty() {
            return Err(ValueError::NoIntegers {
                flag: flag_(),
                example,
            });
        }
        let mut out = Vec::new();
        for part in text.split(',') {
            let p = part.trim();
            let n: u64 = p.parse().map_err(|_| {
                let (flag, text, part) = (flag_(), text.to_string(), p.to_string());
                if too_large(p) {
                    ValueError::ItemTooLarge { flag, text, part }
                } else {
                    ValueError::ItemNotAnInteger {
                        flag,
                        text,
                        part,
                        example,
                    }
                }
            })?;
            if !out.contains(&n) {
                out.push(n);
            }
        }
        out.sort_unstable();
        Ok(out)
    };
    match spec.kind {
        ParamKind::IntSet | ParamKind::IntTuple => ints(text).map(Value::Ints),
        ParamKind::Int => {
            let t = text.trim();
            t.parse::<u64>().map(Value::Int).map_err(|_| {
                if too_large(t) {
                    ValueError::TooLarge {
                        flag: flag_(),
                        text: t.to_string(),
                    }
                } else {
                    ValueError::NotAnInteger {
                        flag: flag_(),
                        text: text.to_string(),
                    }
                }
            })
        }
        ParamKind::Path | ParamKind::String | ParamKind::Choice => {
            if let Some((at, ch)) = literal::first_control(text) {
                return Err(ValueError::Control {
                    flag: flag_(),
                    text: text.to_string(),
                    at,
                    ch,
                });
            }
            if spec.kind == ParamKind::Path && text.is_empty() {
                return Err(ValueError::NoFolder { flag: flag_() });
            }
            if spec.kind == ParamKind::Choice && !spec.choices.iter().any(|c| c == text) {
                return Err(ValueError::NotAChoice {
                    flag: flag_(),
                    text: text.to_string(),
                    choices: spec.choices.clone(),
                });
            }
            Ok(Value::Text(text.to_string()))
        }
    }
}

/// Whether `text` is a non-negative integer too large for a u64 (all digits, after an
/// optional `+`).
fn too_large(text: &str) -> bool {
    let digits = text.strip_prefix('+').unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The Python literal for `value`.
pub fn render(spec: &ParamSpec, value: &Value, style: &Style) -> String {
    match (spec.kind, value) {
        (_, Value::None) => "None".to_string(),
        (ParamKind::IntSet, Value::Ints(v)) => literal::int_set(v),
        (_, Value::Ints(v)) => literal::int_tuple(v),
        (_, Value::Int(n)) => n.to_string(),
        (_, Value::Text(t)) => literal::string(t, style.double_quotes),
    }
}

/// What the caller supplies: the flags given, `--param NAME=VALUE` pairs, and how to
/// work out a computed default (`Err` with the reason when it cannot).
pub struct Given<'a> {
    pub flags: &'a BTreeMap<String, String>,
    pub params: &'a [(String, String)],
}

/// The result of filling in every parameter.
pub struct Filled {
    pub params: Vec<Param>,
    /// Why computed values are what they are (printed for the user to check).
    pub notes: Vec<String>,
    /// Computed defaults that could not be worked out, by parameter name: reported after
    /// the groups.
    pub problems: Vec<(String, String)>,
}

impl Filled {
    /// Name -> literal, as the templates take them.
    pub fn literals(&self) -> BTreeMap<String, String> {
        self.params
            .iter()
            .map(|p| (p.name.clone(), p.literal.clone()))
            .collect()
    }
}

/// Outcome of a computed default: the value and why, or why it could not be chosen.
pub type Computed<E> = Result<(Value, String), E>;

/// Fill in every parameter `manifest` declares. `compute` works out a computed default
/// (by its `[computed]` name, for the parameter set by the flag given), or says why it
/// cannot; `check_given` checks a given value that has one (against the model, say).
pub fn fill<E: std::error::Error + 'static>(
    manifest: &Manifest,
    given: &Given,
    style: &Style,
    mut compute: impl FnMut(&str, &str) -> Computed<E>,
    mut check_given: impl FnMut(&str, &str, &Value) -> Result<Option<String>, E>,
) -> Result<Filled, FillError<E>> {
    let set = &manifest.name;
    for flag in given.flags.keys() {
        if !manifest
            .params
            .values()
            .any(|p| p.flag.as_deref() == Some(flag.as_str()))
        {
            return Err(Error::NoSuchFlag {
                flag: flag.clone(),
                set: set.clone(),
                params: names(manifest),
            }
            .into());
        }
    }
    for (name, value) in given.params {
        if !manifest.params.contains_key(name) {
            return Err(Error::NoSuchParam {
                name: name.clone(),
                value: value.clone(),
                set: set.clone(),
                params: names(manifest),
            }
            .into());
        }
    }
    let mut filled = Filled {
        params: Vec::new(),
        notes: Vec::new(),
        problems: Vec::new(),
    };
    for (name, spec) in &manifest.params {
        let flag = shown(name, spec);
        let text = given
            .params
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .or_else(|| spec.flag.as_ref().and_then(|f| given.flags.get(f)));
        let (value, origin) = match (text, &spec.default) {
            (Some(t), default) => {
                let v = parse(spec, &flag, t).map_err(Error::from)?;
                let checked = default.as_ref().and_then(ParamDefault::computed);
                if let Some(c) = checked
                    && let Some(note) = check_given(c, &flag, &v).map_err(FillError::Given)?
                {
                    filled.notes.push(note);
                }
                (v, Origin::Flag)
            }
            (None, Some(ParamDefault::Text(t))) => (
                parse(spec, &flag, t).map_err(|error| Error::BadDefault {
                    set: set.clone(),
                    name: name.clone(),
                    error,
                })?,
                Origin::Default,
            ),
            (None, Some(ParamDefault::Computed { computed })) => match compute(computed, &flag) {
                Ok((v, why)) => {
                    filled.notes.push(format!(
                        "{} {}: {why}",
                        name_of(name),
                        render(spec, &v, style)
                    ));
                    (v, Origin::Computed)
                }
                Err(why) if spec.optional => {
                    filled
                        .notes
                        .push(format!("{} chosen at run time: {why}", name_of(name)));
                    (Value::None, Origin::Unset)
                }
                Err(why) => {
                    filled
                        .problems
                        .push((name.clone(), format!("{}: {why}", name_of(name))));
                    // A stand-in, so every group can still be planned and reported.
                    (placeholder(spec), Origin::Computed)
                }
            },
            (None, Some(ParamDefault::RunTime { run_time, preview })) => {
                let mut note = format!("{} chosen at run time: {run_time}", name_of(name));
                // The preview is for the user to check; when it cannot be worked out the
                // code still decides at run time, so that is no problem, only said.
                match preview.as_deref().map(|p| compute(p, &flag)) {
                    Some(Ok((v, why))) => {
                        let v = render(spec, &v, style);
                        note.push_str(&format!("; a rank holding every layer takes {v}: {why}"));
                    }
                    Some(Err(why)) => note.push_str(&format!(" (no preview here: {why})")),
                    None => {}
                }
                filled.notes.push(note);
                (Value::None, Origin::Unset)
            }
            (None, None) if spec.optional => (Value::None, Origin::Unset),
            (None, None) => {
                return Err(Error::Missing {
                    set: set.clone(),
                    name: name.clone(),
                    help: spec.help.clone(),
                    flag,
                }
                .into());
            }
        };
        filled.params.push(Param {
            name: name.clone(),
            literal: render(spec, &value, style),
            origin,
        });
    }
    Ok(filled)
}

/// `DETAIL_LAYERS` -> `detail layers`, for messages.
fn name_of(name: &str) -> String {
    name.to_lowercase().replace('_', " ")
}

fn names(manifest: &Manifest) -> String {
    if manifest.params.is_empty() {
        return "none".into();
    }
    manifest
        .params
        .iter()
        .map(|(n, p)| format!("{n} ({})", shown(n, p)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn placeholder(spec: &ParamSpec) -> Value {
    match spec.kind {
        ParamKind::IntSet | ParamKind::IntTuple => Value::Ints(vec![0]),
        ParamKind::Int => Value::Int(0),
        _ => Value::Text(String::new()),
    }
}

/// The values rule examples get for what they do not set: each parameter's default, a
/// stand-in of its kind for a computed one, `None` for an optional one.
pub fn example_defaults(manifest: &Manifest) -> BTreeMap<String, String> {
    let style = Style::default();
    manifest
        .params
        .iter()
        .map(|(name, spec)| {
            let value = match &spec.default {
                Some(ParamDefault::Text(t)) => {
                    parse(spec, name, t).unwrap_or_else(|_| placeholder(spec))
                }
                Some(ParamDefault::Computed { .. }) => placeholder(spec),
                Some(ParamDefault::RunTime { .. }) => Value::None,
                None if spec.optional => Value::None,
                None => placeholder(spec),
            };
            (name.clone(), render(spec, &value, &style))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: ParamKind) -> ParamSpec {
        ParamSpec {
            kind,
            flag: Some("x".into()),
            default: None,
            optional: false,
            choices: vec!["python".into(), "all".into()],
            help: String::new(),
        }
    }

    #[test]
    fn values_are_checked_and_rendered() {
        let style = Style::default();
        let set = spec(ParamKind::IntSet);
        let v = parse(&set, "--ranks", " 14, 3,3").unwrap();
        assert_eq!(render(&set, &v, &style), "{3, 14}");
        assert!(parse(&set, "--ranks", "3,,4").is_err());
        assert!(parse(&set, "--ranks", "99999999999999999999999").is_err());
        let path = spec(ParamKind::Path);
        let e = parse(&path, "--snapshot-dir", "/tmp/x\r")
            .unwrap_err()
            .to_string();
        assert!(e.contains("control character") && e.contains("CRLF"), "{e}");
        let v = parse(&path, "--snapshot-dir", "/tmp/x\"; STEP=5").unwrap();
        assert_eq!(render(&path, &v, &style), "'/tmp/x\"; STEP=5'");
        let choice = spec(ParamKind::Choice);
        assert!(parse(&choice, "--stacks", "cpp").is_err());
        assert_eq!(
            render(&choice, &parse(&choice, "--stacks", "all").unwrap(), &style),
            "\"all\""
        );
    }

    /// Why a computed value is not there, as the caller's computation says it.
    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Why(&'static str);

    #[test]
    fn defaults_flow_from_the_rule_set() {
        let manifest: Manifest = toml::from_str(
            r#"
name = "t"
description = "t"
source_dir = "."
[params.DETAIL_LAYERS]
kind = "int-tuple"
flag = "detail-layers"
default = { computed = "detail-layers" }
optional = true
help = "layers"
[computed.detail-layers]
method = "layer-condition"
count = 2
index = "self.idx = $LAYER"
[params.STACKS]
kind = "choice"
choices = ["python", "all"]
flag = "stacks"
default = "python"
help = "stacks"
"#,
        )
        .unwrap();
        let style = Style::default();
        let flags = BTreeMap::new();
        let given = Given {
            flags: &flags,
            params: &[],
        };
        // A computed default that cannot be worked out, on an optional parameter: None,
        // decided at run time, with the reason.
        let filled = fill(
            &manifest,
            &given,
            &style,
            |_, _| Err(Why("no config")),
            |_, _, _| Ok(None),
        )
        .unwrap();
        let lits = filled.literals();
        assert_eq!(lits["DETAIL_LAYERS"], "None");
        assert_eq!(lits["STACKS"], "\"python\"");
        assert_eq!(
            filled.notes[0],
            "detail layers chosen at run time: no config"
        );
        assert!(filled.problems.is_empty());
        let flags = BTreeMap::from([("stacks".to_string(), "all".to_string())]);
        let given = Given {
            flags: &flags,
            params: &[("DETAIL_LAYERS".into(), "5,6".into())],
        };
        let filled = fill(
            &manifest,
            &given,
            &style,
            |_, _| Ok((Value::Ints(vec![0, 1]), "why".into())),
            |_, _, _| Ok::<_, Why>(None),
        )
        .unwrap();
        assert_eq!(filled.literals()["DETAIL_LAYERS"], "(5, 6)");
        assert_eq!(filled.literals()["STACKS"], "\"all\"");
    }
}
