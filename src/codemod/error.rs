//! What stops the engine before it can report: the rule set, the checkout, the values
//! given, another run, the file system. What the rules find in the files (an anchor
//! missing, a name not there) is not an error but the report's content (`Failure`).
//!
//! Each variant is a class of failure with what it concerns as fields; its message says
//! what to do next. The command line maps the class to the exit code (`exit`).

use crate::exit::{Class, Classify};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Rules(#[from] crate::rules::Error),
    #[error(transparent)]
    Scan(#[from] crate::python::scan::Error),
    /// What the user asked for does not fit the rule set or the checkout.
    #[error(transparent)]
    Usage(Box<Usage>),
    /// A parameter the rule set does not have, a value that does not fit its kind, one
    /// that is needed and not given.
    #[error(transparent)]
    Params(Box<super::params::Error>),
    /// A value given for a worked-out parameter that does not fit the checkout, or the
    /// model config given (`--config`) that cannot be read.
    #[error(transparent)]
    Computed(Box<super::computed::Error>),
    /// The folder is not a checkout the rule set is for, or does not say which.
    #[error(transparent)]
    Checkout(#[from] Checkout),
    /// Another run holds the checkout.
    #[error(
        "{root}: another instrument run is working on this checkout (waited {}); let it finish, then run the command again",
        seconds(*.waited_ms)
    )]
    Busy { root: String, waited_ms: u64 },
    /// A file changed between reading and writing it, or the journal of an interrupted
    /// run needs a look: nothing was written.
    #[error(transparent)]
    Changed(#[from] Changed),
    /// The system refused a read or a write: what failed (naming the file and the
    /// system's reason) and what that left.
    #[error("{message}")]
    Io {
        message: String,
        #[source]
        source: std::io::Error,
    },
}

/// What the user asked for, and why it does not fit.
#[derive(Debug, thiserror::Error)]
pub enum Usage {
    #[error(
        "name the functions to wrap: rule set {set} works on functions (Class.method, a function name, or a glob such as '*.forward'){}",
        .example.as_deref().map_or(String::new(), |e| format!(", e.g. instrument add --rules {set} {e}"))
    )]
    NoFunctions {
        set: String,
        /// The rule set's `example_targets`.
        example: Option<String>,
    },
    #[error(
        "rule set {set} works on the checkout as a whole (it has no [models]); omit {}",
        .given.join(" ")
    )]
    WholeCheckout { set: String, given: Vec<String> },
    #[error(
        "name the model: instrument add MODEL (rule set {set} works per model; models in this checkout: {})",
        listed(.models)
    )]
    NoModel { set: String, models: Vec<String> },
    #[error(
        "rule set {set} takes one model, got {} arguments ({})",
        .given.len(),
        .given.join(" ")
    )]
    OneModel { set: String, given: Vec<String> },
    #[error(
        "rule set {set} has no rules for model {model} yet (it has rules for: {})",
        .supported.join(", ")
    )]
    NoRulesFor {
        set: String,
        model: String,
        supported: Vec<String>,
    },
    #[error("this rule set does not work per model; omit the model name")]
    NotPerModel,
    #[error(
        "`{typed}` is not a model: {file} exists, but it holds no decoder layer or model class the rules recognise (rule set {set} does not count it as a model); models in this checkout: {models}"
    )]
    NotAModel {
        typed: String,
        file: String,
        set: String,
        /// The models, listed (`none` when there are none).
        models: String,
    },
    #[error("unknown model `{typed}`: no {file} (models in this checkout: {models})")]
    UnknownModel {
        typed: String,
        file: String,
        models: String,
    },
    /// Files `add` would write that are read-only, each with its mode.
    #[error("{}", read_only(.files))]
    ReadOnly { files: Vec<(String, u32)> },
}

/// A wait in seconds as a person writes it: `30s`, `0.2s`.
fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{}s", ms as f64 / 1000.0)
    }
}

/// `a, b`, or `none`.
fn listed(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

fn read_only(files: &[(String, u32)]) -> String {
    let named: Vec<String> = files
        .iter()
        .map(|(f, mode)| format!("{f} (mode {mode:04o})"))
        .collect();
    let (what, it, keeps) = if files.len() == 1 {
        ("is read-only", "it", "it keeps its mode")
    } else {
        ("are read-only", "them", "they keep their modes")
    };
    format!(
        "{} {what}: pass --force to write {it} anyway ({keeps}); nothing was changed",
        named.join(", ")
    )
}

/// Where the engine looked for a checkout, and why it is not one.
#[derive(Debug, thiserror::Error)]
pub enum Checkout {
    #[error("--root {root}: no such folder")]
    NoSuchRoot { root: String },
    #[error("{path}: no such file or folder")]
    NoSuchPath { path: String },
    #[error(
        "{start} is not inside a checkout this rule set applies to (no {marker} here or above); run from the checkout or pass --root DIR"
    )]
    NotInside { start: String, marker: String },
    #[error(
        "{cwd} is not inside a checkout (no {} here or above); pass --root DIR, or the files and folders to look at",
        .markers.join(" or ")
    )]
    NoneHere { cwd: String, markers: Vec<String> },
}

/// What changed under a run, or what an interrupted one left.
#[derive(Debug, thiserror::Error)]
pub enum Changed {
    #[error(
        "{file}: the file changed while instrument was working on it (an editor saved it?); nothing was written, run the command again"
    )]
    File { file: String },
    #[error("{path}: unreadable journal ({source})")]
    Journal {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "an interrupted `{command}` left {journal}, and since then {} changed; nothing was done: check those files (each should be as before or after that command), then delete {journal}",
        .changed.join(", ")
    )]
    SinceInterrupted {
        command: String,
        journal: &'static str,
        changed: Vec<String>,
    },
    #[error(
        "an interrupted `{command}` left {journal}, but neither its new text nor the original of {file} is there any more; restore that file from version control, then delete {journal}"
    )]
    OriginalLost {
        command: String,
        journal: &'static str,
        file: String,
    },
}

impl From<Usage> for Error {
    fn from(e: Usage) -> Error {
        Error::Usage(Box::new(e))
    }
}

impl From<super::params::Error> for Error {
    fn from(e: super::params::Error) -> Error {
        Error::Params(Box::new(e))
    }
}

impl From<super::params::FillError<super::computed::Error>> for Error {
    fn from(e: super::params::FillError<super::computed::Error>) -> Error {
        match e {
            super::params::FillError::Params(e) => Error::Params(e),
            super::params::FillError::Given(e) => e.into(),
        }
    }
}

impl From<super::computed::Error> for Error {
    fn from(e: super::computed::Error) -> Error {
        Error::Computed(Box::new(e))
    }
}

impl Error {
    /// `what: the system's reason`.
    pub(crate) fn io(what: impl std::fmt::Display, source: std::io::Error) -> Error {
        Error::Io {
            message: format!("{what}: {source}"),
            source,
        }
    }
}

impl Classify for Error {
    fn class(&self) -> Class {
        match self {
            Error::Rules(e) => e.class(),
            Error::Scan(e) => e.class(),
            Error::Computed(e) => e.class(),
            Error::Io { .. } => Class::Io,
            Error::Usage(_)
            | Error::Params(_)
            | Error::Checkout(_)
            | Error::Busy { .. }
            | Error::Changed(_) => Class::User,
        }
    }
}
