//! What can go wrong reading exports, as values. The engine never picks an exit code: the CLI
//! maps `Error::is_user_error` to 2 (something the user can fix: the wrong file, a table that
//! does not check, arguments that do not fit together) and everything else to 3 (I/O, SQLite
//! failing on a readable file, a bug).

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input that is not what the report reads: missing, a folder, not SQLite, not an nsys
    /// export, a needed column missing, no GPU work.
    #[error("{}: {why}", path.display())]
    Input { path: PathBuf, why: String },
    /// A rules table (`--kernel-classes`, `--conventions`) that does not parse or check.
    #[error("{0}")]
    Table(String),
    /// Arguments that do not fit together: two runs in one call, a window that is not one.
    #[error("{0}")]
    Request(String),
    /// SQLite failed while reading an export.
    #[error("{}: reading the export: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// A failure of ours (a worker thread that stopped): exit 3.
    #[error("internal error: {0}")]
    Internal(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn input(path: &Path, why: impl Into<String>) -> Error {
        Error::Input {
            path: path.to_path_buf(),
            why: why.into(),
        }
    }

    /// Whether the user can fix it (exit 2); otherwise it is an I/O or internal failure (3).
    pub fn is_user_error(&self) -> bool {
        match self {
            Error::Input { .. } | Error::Table(_) | Error::Request(_) => true,
            // A file that SQLite finds corrupt is a bad input, not a failure of ours.
            Error::Sqlite { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
            ),
            // A path that is not there or not a file is the user's, as in every command.
            Error::Io { source, .. } => crate::exit::io_class(source) == crate::exit::Class::User,
            Error::Internal(_) => false,
        }
    }

    /// Name the export a SQLite error came from (the `?` conversion cannot know it).
    pub fn in_file(self, file: &Path) -> Error {
        match self {
            Error::Sqlite { path, source } if path.as_os_str().is_empty() => Error::Sqlite {
                path: file.to_path_buf(),
                source,
            },
            e => e,
        }
    }
}

impl From<rusqlite::Error> for Error {
    fn from(source: rusqlite::Error) -> Error {
        Error::Sqlite {
            path: PathBuf::new(),
            source,
        }
    }
}

impl crate::exit::Classify for Error {
    fn class(&self) -> crate::exit::Class {
        use crate::exit::Class;
        if self.is_user_error() {
            return Class::User;
        }
        match self {
            Error::Io { .. } | Error::Sqlite { .. } => Class::Io,
            _ => Class::Internal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_errors_and_failures() {
        assert!(Error::input(Path::new("a.sqlite"), "no such file").is_user_error());
        assert_eq!(
            Error::input(Path::new("a.sqlite"), "no such file").to_string(),
            "a.sqlite: no such file"
        );
        let corrupt = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
            None,
        );
        let e = Error::from(corrupt).in_file(Path::new("b.sqlite"));
        assert!(e.is_user_error());
        assert!(e.to_string().starts_with("b.sqlite: reading the export"));
        let full = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            None,
        );
        assert!(!Error::from(full).is_user_error());
        let io = Error::Io {
            path: "c".into(),
            source: std::io::Error::other("disk"),
        };
        assert!(!io.is_user_error());
    }

    #[test]
    fn each_error_has_its_exit_code() {
        use crate::exit::{Class, Classify};
        let code = |e: Error| (e.class(), crate::exit::Error::from(e).code());
        assert_eq!(code(Error::input(Path::new("a"), "x")), (Class::User, 2));
        assert_eq!(code(Error::Table("t".into())), (Class::User, 2));
        assert_eq!(code(Error::Request("r".into())), (Class::User, 2));
        let failure = |c| rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(c), None);
        let corrupt = Error::from(failure(rusqlite::ffi::SQLITE_CORRUPT));
        assert_eq!(code(corrupt), (Class::User, 2));
        assert_eq!(
            code(Error::from(failure(rusqlite::ffi::SQLITE_FULL))),
            (Class::Io, 3)
        );
        let io = Error::Io {
            path: "c".into(),
            source: std::io::Error::other("disk"),
        };
        assert_eq!(code(io), (Class::Io, 3));
        assert_eq!(code(Error::Internal("w".into())), (Class::Internal, 3));
    }
}
