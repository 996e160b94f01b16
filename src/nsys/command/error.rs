//! Why no command could be built: the typed errors of `instrument nsys command`'s engine (the
//! CLI maps them to exit codes).

/// Why no command could be built.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// nsys cannot be placed in this launch safely: why, and what to write instead.
    #[error("{why}; {instead}")]
    Unplaceable { why: String, instead: String },
    /// The `--out` pattern would not give each nsys its own file.
    #[error("--out {pattern}: {why}")]
    Output { pattern: String, why: String },
    /// A built-in table does not parse (a bug in this build).
    #[error("{0}")]
    Table(String),
}

impl CommandError {
    pub fn unplaceable(why: impl Into<String>, instead: impl Into<String>) -> CommandError {
        CommandError::Unplaceable {
            why: why.into(),
            instead: instead.into(),
        }
    }
}

impl crate::exit::Classify for CommandError {
    fn class(&self) -> crate::exit::Class {
        match self {
            // A built-in table that does not parse is this build's bug.
            CommandError::Table(_) => crate::exit::Class::Internal,
            CommandError::Unplaceable { .. } | CommandError::Output { .. } => {
                crate::exit::Class::User
            }
        }
    }
}
