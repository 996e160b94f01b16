//! Exit codes shared by every command.
//!
//! 0: done; 1: `check` found instrumentation (or another "found something" verdict);
//! 2: user error (bad arguments, anchors not found, tree not pithtrain, unreadable input).

use std::fmt;

/// An error the user can fix: printed as one line on stderr, exit code 2.
#[derive(Debug)]
pub struct UserError(pub String);

impl fmt::Display for UserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UserError {}

/// Shorthand to build an `anyhow::Error` that exits with code 2.
pub fn user_error(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UserError(msg.into()))
}

pub const OK: u8 = 0;
pub const FOUND: u8 = 1;
pub const USER_ERROR: u8 = 2;
/// An internal failure (a bug or an I/O error we did not anticipate).
pub const INTERNAL: u8 = 3;
