//! What can stop `instrument log`, each said in one line naming the file, line or rule. Each
//! error knows its class (`exit::Classify`); the command line decides the exit code.

use crate::exit::{Class, Classify};

/// Why no report (or no comparison) can be made.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A print declaration of the rule set does not compile.
    #[error(transparent)]
    Declarations(#[from] super::decl::InvalidDeclaration),
    /// The rule set declares no prints.
    #[error(
        "rule set {set} ({origin}) declares no prints ([[rule.prints]] in its rules), so there is nothing to read"
    )]
    NoDeclarations { set: String, origin: String },
    /// A path given does not exist, a folder cannot be listed, a file cannot be opened.
    #[error(transparent)]
    Input(#[from] super::inputs::InputError),
    /// The files hold no print the declarations read: what each file was, `; `-separated.
    #[error(
        "no memory prints read ({files}); a run prints them on the ranks given to `instrument add --ranks` once it reaches the profiled step"
    )]
    NothingRead { files: String },
    /// The ranks asked for printed nothing.
    #[error(
        "rank {ranks} printed nothing in {files} file(s) ({prints} prints from other ranks); give the logs those ranks printed to, or leave out --rank"
    )]
    RanksPrintedNothing {
        ranks: String,
        files: usize,
        prints: u64,
    },
    /// Logs of different runs given as one run (different shapes), or a rank's shape that
    /// contradicts its prints.
    #[error(transparent)]
    DifferentRuns(#[from] super::shape::NotOneRun),
    /// The runs before and after a change have different shapes: not compared.
    #[error(transparent)]
    DifferentShapes(#[from] super::shape::DifferentShapes),
    /// One side of a comparison (`before: `, `after: `) and what went wrong reading it.
    #[error("{side}{source}")]
    OnSide {
        side: String,
        #[source]
        source: Box<LogError>,
    },
}

impl LogError {
    /// The same error, its line led by `side` (`before: `), for a comparison of two runs. The
    /// rule set's declarations and the comparison itself belong to neither side.
    pub fn on_side(self, side: &str) -> LogError {
        match self {
            _ if side.is_empty() => self,
            LogError::Declarations(_)
            | LogError::NoDeclarations { .. }
            | LogError::DifferentShapes(_)
            | LogError::OnSide { .. } => self,
            e => LogError::OnSide {
                side: side.to_string(),
                source: Box::new(e),
            },
        }
    }
}

/// The rule set and the logs given are the user's to fix (exit 2); a log the system would not
/// open or list keeps the class of its I/O error.
impl Classify for LogError {
    fn class(&self) -> Class {
        match self {
            LogError::Input(e) => e.class(),
            LogError::OnSide { source, .. } => source.class(),
            LogError::Declarations(_)
            | LogError::NoDeclarations { .. }
            | LogError::NothingRead { .. }
            | LogError::RanksPrintedNothing { .. }
            | LogError::DifferentRuns(_)
            | LogError::DifferentShapes(_) => Class::User,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::inputs::InputError;

    #[test]
    fn a_side_leads_the_line_and_keeps_the_class() {
        let full = || InputError::Open {
            name: "node0.log".into(),
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        };
        let e = LogError::from(full()).on_side("after: ");
        assert_eq!(e.to_string(), format!("after: {}", LogError::from(full())));
        assert!(e.to_string().starts_with("after: node0.log: cannot open: "));
        assert_eq!(e.class(), Class::Io);
        let missing = InputError::Open {
            name: "node0.log".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert_eq!(
            LogError::from(missing).on_side("before: ").class(),
            Class::User
        );
        // The rule set is the same on both sides: never led by one.
        let none = LogError::NoDeclarations {
            set: "s".into(),
            origin: "o".into(),
        };
        assert_eq!(
            none.on_side("before: ").to_string(),
            "rule set s (o) declares no prints ([[rule.prints]] in its rules), so there is nothing to read"
        );
    }
}
