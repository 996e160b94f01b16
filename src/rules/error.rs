//! What can go wrong loading a rule set.

use crate::exit::{Class, Classify};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--rules NAME` names neither a built-in set nor a folder.
    #[error("--rules {spec}: no such rule set or folder (built in: {builtin})")]
    NotFound { spec: String, builtin: String },
    /// A folder without `ruleset.toml`.
    #[error(
        "--rules {spec}: {path} has no ruleset.toml; a rule set folder needs one (see README, \"Rule format\")"
    )]
    NoManifest { spec: String, path: String },
    /// A rule file the system would not read.
    #[error("{path}: {source}{}", read_next(.source))]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The rule set is not valid: which file, rule and what (TOML that does not parse, a
    /// field that is wrong, a placement that does not hold).
    #[error("{0}")]
    Invalid(String),
    /// A placeholder nothing fills where it stands (`{RANK}` in a template of a set whose
    /// parameter is `RANKS`).
    #[error("{at}: `{{{name}}}` in {place} is not {known}; {next}")]
    Placeholder {
        /// Where the rule is written: `origin/file:line: rule id`.
        at: String,
        name: String,
        /// The field or pattern it stands in.
        place: String,
        /// What fills a placeholder there.
        known: String,
        /// What to do.
        next: String,
    },
    /// A metavariable the template uses that the rule's patterns do not bind.
    #[error("{at}: the template uses ${name}, {}", unbound(*.partly, .bound))]
    Unbound {
        at: String,
        name: String,
        /// Some alternatives of the anchor bind it, not all.
        partly: bool,
        /// What the patterns bind (`$X`), for the message.
        bound: Vec<String>,
    },
    /// An example (`examples/<stem>.toml`) naming a rule the set does not have.
    #[error("{at}: the example names rule {id}, which the rule set does not have; {}", near_or_list(.near, .spec))]
    ExampleRule {
        /// Where the example names it: `origin/examples/file:line`.
        at: String,
        id: String,
        /// The set's ids most like it, best first.
        near: Vec<String>,
        /// The `--rules` the set was loaded with, for the command that lists its rules.
        spec: String,
    },
    /// An examples file with no rule file of its name beside it.
    #[error(
        "{at}: there is no rule file {stem}.toml beside the examples folder; an examples file takes the name of the rule file whose rules it tests (the rule files: {files})"
    )]
    ExamplesWithoutRules {
        at: String,
        stem: String,
        files: String,
    },
    /// A pattern that does not compile: where the rule is (`origin/file: rule id`), and
    /// the pattern's error.
    #[error("{at}: {source}")]
    Pattern {
        at: String,
        #[source]
        source: crate::python::pattern::PatternError,
    },
}

/// The rest of `Error::Unbound`'s message: why, and what to do.
/// What to do about a rule file that could not be read, where the user can do something.
fn read_next(e: &std::io::Error) -> &'static str {
    match e.kind() {
        // Every `*.toml` of a rule set folder is read as rules.
        std::io::ErrorKind::IsADirectory => {
            "; a rule set's *.toml must be files: rename the folder, or move it out of the rule set"
        }
        std::io::ErrorKind::PermissionDenied => {
            "; make it readable, or run as a user who may read it"
        }
        _ => "",
    }
}

fn unbound(partly: bool, bound: &[String]) -> String {
    let bound = if bound.is_empty() {
        "they bind none".to_string()
    } else {
        format!("bound: {}", bound.join(", "))
    };
    if partly {
        format!(
            "which only some alternatives of the anchor bind ({bound}); bind it in every alternative or in a capture, or correct the name"
        )
    } else {
        format!(
            "which no pattern of the rule binds ({bound}); bind it in the scope, the anchor or a capture, or correct the name"
        )
    }
}

/// The rest of `Error::ExampleRule`'s message: the ids it may mean, else how to list them.
fn near_or_list(near: &[String], spec: &str) -> String {
    if near.is_empty() {
        format!("`instrument rules --rules {spec}` lists its rules")
    } else {
        format!("did you mean {}?", near.join(", "))
    }
}

impl Error {
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::Invalid(message.into())
    }
}

impl Classify for Error {
    fn class(&self) -> Class {
        match self {
            Error::Read { source, .. } => crate::exit::io_class(source),
            _ => Class::User,
        }
    }
}
