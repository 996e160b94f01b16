//! What stops the engine before it can report: the rule set, the checkout, the values
//! given, another run, the file system. What the rules find in the files (an anchor
//! missing, a name not there) is not an error but the report's content (`Failure`).

use crate::exit::{Class, Classify};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Rules(#[from] crate::rules::Error),
    #[error(transparent)]
    Scan(#[from] crate::python::scan::Error),
    /// What the user asked for does not fit: a value, the number of arguments, a model
    /// that is not there, a parameter the rule set does not have.
    #[error("{0}")]
    Usage(String),
    /// The folder is not a checkout the rule set is for, or does not say which.
    #[error("{0}")]
    Checkout(String),
    /// Another run holds the checkout.
    #[error("{0}")]
    Busy(String),
    /// A file changed between reading and writing it (an editor saved it), or the journal
    /// of an interrupted run needs a look: nothing was written.
    #[error("{0}")]
    Changed(String),
    /// The system refused a read or a write: what failed (naming the file and the
    /// system's reason) and what that left.
    #[error("{message}")]
    Io {
        message: String,
        #[source]
        source: std::io::Error,
    },
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
            Error::Io { .. } => Class::Io,
            Error::Usage(_) | Error::Checkout(_) | Error::Busy(_) | Error::Changed(_) => {
                Class::User
            }
        }
    }
}

/// For callers that report errors as text (one line each).
impl From<Error> for String {
    fn from(e: Error) -> String {
        e.to_string()
    }
}
