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
    #[error("{path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The rule set is not valid: which file, rule and what (TOML that does not parse, a
    /// field that is wrong, a pattern that is not Python, a placement that does not hold).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    pub(crate) fn invalid(message: impl Into<String>) -> Error {
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

/// For callers that report errors as text (one line each).
impl From<Error> for String {
    fn from(e: Error) -> String {
        e.to_string()
    }
}
