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

/// `Classify` for error types that are always the user's to fix (exit 2): what the user
/// wrote (a rule's pattern, a flag's value) or gave (a model's code, a table).
macro_rules! user_errors {
    ($($t:ty),+ $(,)?) => {
        $(impl $crate::exit::Classify for $t {
            fn class(&self) -> $crate::exit::Class {
                $crate::exit::Class::User
            }
        })+
    };
}
pub(crate) use user_errors;

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

/// A failure of the system, as one line (a folder that cannot be made, a program that cannot
/// be started): exit 3.
#[derive(Debug)]
pub struct IoError(pub String);

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for IoError {}

impl Classify for IoError {
    fn class(&self) -> Class {
        Class::Io
    }
}

/// A bug of ours, as one line: exit 3.
#[derive(Debug)]
pub struct InternalError(pub String);

impl fmt::Display for InternalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "internal error: {}", self.0)
    }
}

impl std::error::Error for InternalError {}

impl Classify for InternalError {
    fn class(&self) -> Class {
        Class::Internal
    }
}

/// The class of an I/O error by what the system said, the same in every command: a path that
/// is not there, not a file, not a folder, not allowed or on a read-only file system is the
/// user's to fix (2); a full disk, a failing device or anything else is the system's (3).
pub fn io_class(e: &std::io::Error) -> Class {
    kind_class(e.kind())
}

/// `io_class` of an error known by its kind only (kept where the error itself is not).
pub fn kind_class(kind: std::io::ErrorKind) -> Class {
    use std::io::ErrorKind::*;
    match kind {
        NotFound | PermissionDenied | IsADirectory | NotADirectory | AlreadyExists
        | InvalidInput | InvalidFilename | ReadOnlyFilesystem | DirectoryNotEmpty => Class::User,
        _ => Class::Io,
    }
}

/// An I/O error as one line, with the class `io_class` gives it.
pub fn io_error(e: &std::io::Error, msg: impl Into<String>) -> Error {
    match io_class(e) {
        Class::User => Error::from(UserError(msg.into())),
        _ => Error::from(IoError(msg.into())),
    }
}

/// Shorthand for an error the user can fix, exit 2 (the command line's own checks of its
/// arguments).
pub fn user_error(msg: impl Into<String>) -> Error {
    Error::from(UserError(msg.into()))
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
    fn io_errors_are_classed_by_what_the_system_said() {
        use std::io::{Error as E, ErrorKind as K};
        for k in [
            K::NotFound,
            K::PermissionDenied,
            K::IsADirectory,
            K::NotADirectory,
        ] {
            assert_eq!(io_error(&E::from(k), "x").code(), USER_ERROR, "{k:?}");
        }
        for k in [K::StorageFull, K::QuotaExceeded, K::Other, K::UnexpectedEof] {
            assert_eq!(io_error(&E::from(k), "x").code(), INTERNAL, "{k:?}");
        }
        // A real one: a folder where a file is read.
        let e = std::fs::read_to_string("/").unwrap_err();
        assert_eq!(io_class(&e), Class::User);
    }

    #[test]
    fn every_error_maps_to_its_documented_code() {
        assert_eq!(Error::from(Sample::Bad).code(), 2);
        let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let read = Error::from(Sample::Read(io));
        assert_eq!(read.code(), 3);
        assert!(read.to_string().starts_with("cannot read x: "));
        assert_eq!(user_error("no").code(), 2);
        assert_eq!(user_error("no").class(), Class::User);
        assert_eq!(Error::from(IoError("creating x: denied".into())).code(), 3);
        assert_eq!(Error::from(IoError("x".into())).class(), Class::Io);
        let bug = Error::from(InternalError("a worker stopped".into()));
        assert_eq!((bug.code(), bug.class()), (3, Class::Internal));
        assert_eq!(bug.to_string(), "internal error: a worker stopped");
        let io = std::io::Error::from(std::io::ErrorKind::Other);
        assert_eq!(Error::from(io).code(), 3);
    }
}
