//! Rule examples in files of their own: `examples/<stem>.toml` beside rule file
//! `<stem>.toml` holds `[[example]]` tables, each naming its rule first (`rule = "5B.flags"`),
//! then the fields of an `Example`. Only `rules` and `test-rules` read them
//! (`load_with_examples`): `add`, `remove`, `status` and the readers load the rules alone,
//! so no run of theirs parses the examples' text (issue #27).
//!
//! An example attaches to the rule of its id, which for a rule that `extends` another is
//! the override's own (possibly derived, tagged) id. Examples written inline in a rule
//! (`[[rule.examples]]`) stay accepted; a rule's file examples follow its inline ones.

use super::error::Error;
use super::load::{EMBEDDED, Located, line_of_header, one_line, toml_texts};
use super::{Example, RuleSet};

// `EMBEDDED_EXAMPLES_JSON`: every embedded set's examples files, parsed by build.rs and
// written as JSON (sets and files by name), apart from the rules `add` reads.
include!(concat!(env!("OUT_DIR"), "/embedded_examples.rs"));

/// The folder, beside a set's rule files, that holds its examples files.
pub const FOLDER: &str = "examples";

/// `load_with_prints`, with every rule's examples: its inline ones, then those its examples
/// file gives. For `rules` and `test-rules`.
pub fn load_with_examples(spec: &str) -> Result<RuleSet, Error> {
    let mut set = super::load_with_prints(spec)?;
    for (rule, example) in read(&set, spec)? {
        set.rules[rule].examples.push(example);
    }
    Ok(set)
}

/// The examples of `set` (loaded from `spec`), each with the index of its rule, in file
/// order: nothing is attached until every file is read and checked.
fn read(set: &RuleSet, spec: &str) -> Result<Vec<(usize, Example)>, Error> {
    match super::load::locate(spec) {
        Some(Located::Folder(path)) => {
            let folder = path.join(FOLDER);
            let texts = if folder.is_dir() {
                toml_texts(&folder)?
            } else {
                Vec::new()
            };
            from_texts(set, spec, texts, &|name| path.join(name).is_file())
        }
        Some(Located::Embedded(dir)) => {
            let has_rule_file = |name: &str| dir.get_file(dir.path().join(name)).is_some();
            // The pre-parsed copy; should it fail, the TOML says why, with file and line.
            if let Ok(found) = from_json(set, spec, pre_parsed(spec), &has_rule_file) {
                return Ok(found);
            }
            from_texts(set, spec, embedded_texts(spec)?, &has_rule_file)
        }
        None => Ok(Vec::new()),
    }
}

/// The pre-parsed examples files of embedded set `name` (none: no such set).
pub(super) fn pre_parsed(name: &str) -> &'static [(&'static str, &'static str)] {
    EMBEDDED_EXAMPLES_JSON
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(&[], |(_, files)| files)
}

/// The examples files of embedded set `spec`, as text.
pub(super) fn embedded_texts(spec: &str) -> Result<Vec<(String, String)>, Error> {
    match EMBEDDED.get_dir(format!("{spec}/{FOLDER}")) {
        Some(dir) => super::load::embedded_texts(dir),
        None => Ok(Vec::new()),
    }
}

/// From the pre-parsed copy: its errors carry no line (the JSON has none).
pub(super) fn from_json(
    set: &RuleSet,
    spec: &str,
    files: &[(&str, &str)],
    has_rule_file: &dyn Fn(&str) -> bool,
) -> Result<Vec<(usize, Example)>, Error> {
    let mut found = Vec::new();
    for (name, json) in files {
        let doc: toml::Table = serde_json::from_str(json)
            .map_err(|e| Error::invalid(format!("{}/{FOLDER}/{name}: {e}", set.origin)))?;
        let file = ExamplesFile {
            name,
            text: None,
            at: format!("{}/{FOLDER}/{name}", set.origin),
        };
        file.collect(set, spec, doc, has_rule_file, &mut found)?;
    }
    Ok(found)
}

/// From the files' text (name, text), sorted by name: messages carry lines.
pub(super) fn from_texts(
    set: &RuleSet,
    spec: &str,
    mut texts: Vec<(String, String)>,
    has_rule_file: &dyn Fn(&str) -> bool,
) -> Result<Vec<(usize, Example)>, Error> {
    texts.sort_by(|a, b| a.0.cmp(&b.0));
    let mut found = Vec::new();
    for (name, text) in &texts {
        let file = ExamplesFile {
            name,
            text: Some(text),
            at: format!("{}/{FOLDER}/{name}", set.origin),
        };
        let doc: toml::Table = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_at(text, s.start));
            Error::invalid(format!(
                "{}: not valid TOML: {}",
                file.at_line(line),
                one_line(e.message())
            ))
        })?;
        file.collect(set, spec, doc, has_rule_file, &mut found)?;
    }
    Ok(found)
}

/// One examples file being read: its name, its text where there is one (for lines), and
/// how messages name it (`origin/examples/name`).
struct ExamplesFile<'a> {
    name: &'a str,
    text: Option<&'a str>,
    at: String,
}

impl ExamplesFile<'_> {
    /// `at`, with `:line` when known.
    fn at_line(&self, line: Option<usize>) -> String {
        match line {
            Some(l) => format!("{}:{l}", self.at),
            None => self.at.clone(),
        }
    }

    /// Each `[[example]]` of `doc`, checked and read, appended to `found` with its rule.
    fn collect(
        &self,
        set: &RuleSet,
        spec: &str,
        mut doc: toml::Table,
        has_rule_file: &dyn Fn(&str) -> bool,
        found: &mut Vec<(usize, Example)>,
    ) -> Result<(), Error> {
        let stem = self.name.strip_suffix(".toml").unwrap_or(self.name);
        if !has_rule_file(self.name) {
            let mut files: Vec<&str> = set.rule_files.iter().map(String::as_str).collect();
            files.dedup();
            return Err(Error::ExamplesWithoutRules {
                at: self.at.clone(),
                stem: stem.to_string(),
                files: files.join(", "),
            });
        }
        let items = match doc.remove("example") {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => items,
            Some(_) => return Err(self.not_tables(self.line_of_key("example"))),
        };
        if let Some(key) = doc.keys().next() {
            return Err(Error::invalid(format!(
                "{}: unknown key `{key}` (an examples file holds [[example]] tables)",
                self.at_line(self.line_of_key(key))
            )));
        }
        for (nth, item) in items.into_iter().enumerate() {
            let header = self
                .text
                .and_then(|t| line_of_header(t, "[[example]]", nth));
            let toml::Value::Table(mut table) = item else {
                return Err(self.not_tables(header));
            };
            let rule_line = self
                .text
                .zip(header)
                .and_then(|(t, h)| line_of_rule(t, h))
                .or(header);
            let id = match table.remove("rule") {
                Some(toml::Value::String(id)) => id,
                Some(_) => {
                    return Err(Error::invalid(format!(
                        "{}: `rule` is the id of the rule the example tests, a string (rule = \"5B.flags\")",
                        self.at_line(rule_line)
                    )));
                }
                None => {
                    return Err(Error::invalid(format!(
                        "{}: [[example]] names no rule; write rule = \"ID\" first (`instrument rules --rules {spec}` lists the ids)",
                        self.at_line(header)
                    )));
                }
            };
            let Some(rule) = set.rules.iter().position(|r| r.id == id) else {
                return Err(Error::ExampleRule {
                    at: self.at_line(rule_line),
                    id: id.clone(),
                    near: near_ids(set, &id),
                    spec: spec.to_string(),
                });
            };
            if set.rule_files[rule] != self.name {
                return Err(Error::invalid(format!(
                    "{}: rule {id} is written in {}, so its examples go in {FOLDER}/{}",
                    self.at_line(rule_line),
                    set.rule_files[rule],
                    set.rule_files[rule]
                )));
            }
            let example: Example =
                toml::Value::Table(table)
                    .try_into()
                    .map_err(|e: toml::de::Error| {
                        Error::invalid(format!(
                            "{}: example of rule {id}: {}",
                            self.at_line(header),
                            one_line(e.message())
                        ))
                    })?;
            found.push((rule, example));
        }
        Ok(())
    }

    fn not_tables(&self, line: Option<usize>) -> Error {
        Error::invalid(format!(
            "{}: `example` must be written [[example]]",
            self.at_line(line)
        ))
    }

    /// The 1-based line where top-level key `key` is written (`key = ...`, `[key]`,
    /// `[[key]]`), for messages.
    fn line_of_key(&self, key: &str) -> Option<usize> {
        self.text?
            .lines()
            .position(|l| {
                let l = l.trim_start().trim_start_matches('[');
                l.strip_prefix(key)
                    .is_some_and(|rest| rest.trim_start().starts_with(['=', ']', '.']))
            })
            .map(|i| i + 1)
    }
}

/// The 1-based line of byte `offset` of `text`.
fn line_at(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The 1-based line of the `rule = ...` of the example whose header is on line `header`:
/// the first one below it, before the next table.
fn line_of_rule(text: &str, header: usize) -> Option<usize> {
    text.lines()
        .enumerate()
        .skip(header)
        .take_while(|(_, l)| !l.trim_start().starts_with('['))
        .find(|(_, l)| {
            l.trim_start()
                .strip_prefix("rule")
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|(i, _)| i + 1)
}

/// The rule ids most like `id`, best first, for the message when no rule has it.
fn near_ids(set: &RuleSet, id: &str) -> Vec<String> {
    let mut scored: Vec<(f32, &str)> = set
        .rules
        .iter()
        .map(|r| {
            let ratio = similar::TextDiff::from_chars(id, r.id.as_str()).ratio();
            (ratio, r.id.as_str())
        })
        .filter(|(ratio, _)| *ratio > 0.6)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored
        .into_iter()
        .take(3)
        .map(|(_, id)| id.to_string())
        .collect()
}
