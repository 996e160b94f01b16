//! What can stop `instrument log`, each said in one line naming the file, line or rule. The
//! command line decides the exit code; nothing here does.

/// Why no report (or no comparison) can be made.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The rule set's print declarations do not compile, or it declares none.
    #[error("{0}")]
    Declarations(String),
    /// A path given does not exist, a folder cannot be listed, a file cannot be opened.
    #[error("{0}")]
    Input(String),
    /// The files hold no print the declarations read (what each file was, in one line).
    #[error("{0}")]
    NothingRead(String),
    /// The ranks asked for printed nothing.
    #[error("{0}")]
    RanksPrintedNothing(String),
    /// Logs of different runs given as one run (different shapes), or a rank's shape that
    /// contradicts its prints.
    #[error("{0}")]
    DifferentRuns(String),
    /// The runs before and after a change have different shapes: not compared.
    #[error("{0}")]
    DifferentShapes(String),
}

impl LogError {
    /// The same error, its line led by `side` (`before: `), for a comparison of two runs.
    pub fn on_side(self, side: &str) -> LogError {
        if side.is_empty() {
            return self;
        }
        let lead = |m: String| format!("{side}{m}");
        match self {
            LogError::Declarations(m) => LogError::Declarations(m),
            LogError::Input(m) => LogError::Input(lead(m)),
            LogError::NothingRead(m) => LogError::NothingRead(lead(m)),
            LogError::RanksPrintedNothing(m) => LogError::RanksPrintedNothing(lead(m)),
            LogError::DifferentRuns(m) => LogError::DifferentRuns(lead(m)),
            LogError::DifferentShapes(m) => LogError::DifferentShapes(m),
        }
    }
}

/// Every one is the user's to fix (a path, a rule set, the logs given): exit 2.
impl crate::exit::Classify for LogError {
    fn class(&self) -> crate::exit::Class {
        crate::exit::Class::User
    }
}
