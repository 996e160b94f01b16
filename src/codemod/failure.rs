//! What can go wrong when planning edits, as data: the engine collects failures for
//! every rule instead of stopping at the first, so a report can say, per group, what
//! applies and what does not.

use std::fmt;

use serde::Serialize;

use crate::rules::CompiledRule;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// A scope, anchor, `following` or `capture` pattern matched nothing or too much.
    Anchor,
    /// A role class (`class {EXPERTS}`) the rules scope into is not in the model file.
    Role,
    /// The target does not parse (before editing), or the edit broke it.
    Syntax,
    /// Inserted code reads a name that is not defined where it lands.
    Name,
    /// The edit would land somewhere it must never go (a compiled function, above a
    /// docstring, on a line shared with another statement, inside another region).
    Placement,
    /// Two rules edit the same lines.
    Overlap,
    /// The template cannot be rendered (e.g. a metavariable no pattern binds).
    Template,
    /// Markers already in the file are broken or were edited by hand.
    Markers,
    /// The target file is missing or unreadable.
    File,
    /// The target file is not UTF-8 text.
    Encoding,
}

/// One failure, tied to a file and, where it has one, a rule and a line.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub kind: FailureKind,
    /// Target file, relative to the root.
    pub file: String,
    /// 1-based line in the file as it is on disk (or as planned, for name failures).
    pub line: Option<usize>,
    pub rule: Option<String>,
    pub group: Option<String>,
    /// What was expected and what was found, one sentence.
    pub message: String,
    /// Closest candidates for a pattern that matched nothing: (line, text).
    pub candidates: Vec<(usize, String)>,
    /// For a `Name` failure, the name the inserted code reads.
    pub name: Option<String>,
}

impl Failure {
    /// A failure of `kind` in `file` (at `line`, when it has one), tied to no rule: what
    /// went wrong, and what to do next, in one sentence.
    pub fn new(
        kind: FailureKind,
        file: impl Into<String>,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Failure {
        Failure {
            kind,
            file: file.into(),
            line,
            rule: None,
            group: None,
            message: message.into(),
            candidates: Vec::new(),
            name: None,
        }
    }

    /// The same failure, as one of `rule` (and its group).
    pub fn for_rule(self, rule: &CompiledRule) -> Failure {
        self.for_rule_id(&rule.id, Some(&rule.group))
    }

    /// The same failure, as one of the rule with id `rule` (in `group`, when known: a
    /// region's marker names its rule, not its group).
    pub fn for_rule_id(self, rule: &str, group: Option<&str>) -> Failure {
        Failure {
            rule: Some(rule.to_string()),
            group: group.map(str::to_string),
            ..self
        }
    }

    /// The same failure, naming the name inserted code reads or binds.
    pub fn with_name(self, name: &str) -> Failure {
        Failure {
            name: Some(name.to_string()),
            ..self
        }
    }

    /// The same failure, with the closest candidates of a pattern that matched nothing.
    pub fn with_candidates(self, candidates: Vec<(usize, String)>) -> Failure {
        Failure { candidates, ..self }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: ", self.file)?,
            None => write!(f, "{}: ", self.file)?,
        }
        if let Some(rule) = &self.rule {
            write!(f, "rule {rule}: ")?;
        }
        f.write_str(&self.message)?;
        if !self.candidates.is_empty() {
            let c: Vec<String> = self
                .candidates
                .iter()
                .map(|(l, t)| format!("line {l} `{t}`"))
                .collect();
            write!(f, "; closest: {}", c.join(", "))?;
        }
        Ok(())
    }
}
