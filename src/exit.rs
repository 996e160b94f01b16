//! Exit codes, and how the command line maps any error to one. Engine modules return
//! typed errors (a `thiserror` enum per module) that say what kind of failure they are
//! (`Classify`); only the command line turns them into a code:
//!
//! - 0: done;
//! - 1: found something (`check` found instrumentation, `explain` an anchor that does not
//!   resolve, `test-rules` a failing example, a gate that failed);
//! - 2: a user error: bad arguments, anchors not found, a tree that is not pithtrain, a
//!   rule set that is not valid, an input that is not what it should be;
//! - 3: an I/O failure the user did not cause (a read or write the system refused) or an
//!   internal error (a bug).

use std::fmt;

pub const OK: u8 = 0;
pub const FOUND: u8 = 1;
pub const USER_ERROR: u8 = 2;
/// An I/O failure or an internal one.
pub const INTERNAL: u8 = 3;

/// What kind of failure an error is, which decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The user can fix it: arguments, the tree, the rules, an input file's content.
    User,
    /// The system refused a read or a write.
    Io,
    /// A bug.
    Internal,
}

impl Class {
    pub fn code(self) -> u8 {
        match self {
            Class::User => USER_ERROR,
            Class::Io | Class::Internal => INTERNAL,
        }
    }
}

/// An error that knows its class: every module's error type implements it.
pub trait Classify: std::error::Error + Send + Sync + 'static {
    fn class(&self) -> Class;
}

/// Any error, as the command line receives it: the error and its class.
pub struct Error {
    class: Class,
    inner: Box<dyn std::error::Error + Send + Sync>,
}

impl Error {
    pub fn class(&self) -> Class {
        self.class
    }

    /// The exit code for it.
    pub fn code(&self) -> u8 {
        self.class.code()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} error: {:?}", self.class, self.inner)
    }
}

impl<E: Classify> From<E> for Error {
    fn from(e: E) -> Error {
        Error {
            class: e.class(),
            inner: Box::new(e),
        }
    }
}

/// An I/O error that reached the command line unexplained: the system's doing.
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error {
            class: Class::Io,
            inner: Box::new(e),
        }
    }
}

/// Writing JSON to stdout failed: the output went away, or a bug.
impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        let class = if e.is_io() {
            Class::Io
        } else {
            Class::Internal
        };
        Error {
            class,
            inner: Box::new(e),
        }
    }
}

/// Errors of modules not yet on typed errors: a `UserError` inside is a user error, an
/// I/O error an I/O one, anything else internal.
impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Error {
        let class = if e.downcast_ref::<UserError>().is_some() {
            Class::User
        } else if e.downcast_ref::<std::io::Error>().is_some() {
            Class::Io
        } else {
            Class::Internal
        };
        // As anyhow shows it: the message and its causes, `: `-separated.
        Error {
            class,
            inner: Box::new(UserError(format!("{e:#}"))),
        }
    }
}

/// An error the user can fix, as one line (for modules without an error type of their
/// own; new code returns typed errors).
#[derive(Debug)]
pub struct UserError(pub String);

impl fmt::Display for UserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UserError {}

impl Classify for UserError {
    fn class(&self) -> Class {
        Class::User
    }
}

/// Shorthand to build an `anyhow::Error` that exits with code 2.
pub fn user_error(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UserError(msg.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Sample {
        #[error("bad value")]
        Bad,
        #[error("cannot read x: {0}")]
        Read(#[source] std::io::Error),
    }

    impl Classify for Sample {
        fn class(&self) -> Class {
            match self {
                Sample::Bad => Class::User,
                Sample::Read(_) => Class::Io,
            }
        }
    }

    #[test]
    fn every_error_maps_to_its_documented_code() {
        assert_eq!(Error::from(Sample::Bad).code(), 2);
        let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let read = Error::from(Sample::Read(io));
        assert_eq!(read.code(), 3);
        assert!(read.to_string().starts_with("cannot read x: "));
        assert_eq!(Error::from(user_error("no")).code(), 2);
        assert_eq!(Error::from(anyhow::anyhow!("a bug")).code(), 3);
        let io = std::io::Error::from(std::io::ErrorKind::Other);
        assert_eq!(Error::from(anyhow::Error::new(io)).code(), 3);
        let chained = anyhow::Error::new(UserError("inner".into())).context("outer");
        assert_eq!(Error::from(chained).to_string(), "outer: inner");
    }
}
