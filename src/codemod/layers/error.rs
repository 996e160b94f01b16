//! Why the detail layers cannot be chosen, or a choice given does not fit: one variant
//! per reason, each saying what to pass instead.

/// Why the detail layers cannot be chosen, or a choice given does not fit: each says
/// what to pass instead (`flag` is how the user gives the layers).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--config` names no file.
    #[error("--config {path}: no such file")]
    ConfigMissing { path: String },
    /// The system would not read the config.
    #[error("--config {path}: {source}")]
    ConfigRead {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not JSON ({source})")]
    ConfigNotJson {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    /// The model file the decision is in, unreadable.
    #[error("{file}: {source}")]
    ModelRead {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file} is not UTF-8 (see the error above)")]
    ModelNotUtf8 { file: String },
    /// A pattern of the rule set's `[computed]` table that does not compile.
    #[error(transparent)]
    Pattern(#[from] crate::python::pattern::PatternError),
    #[error(
        "cannot tell which layers have experts: `{index}` occurs {count} times in {file} (expected once, in the decoder layer); pass {flag}"
    )]
    IndexCount {
        index: String,
        count: usize,
        file: String,
        flag: String,
    },
    #[error("the index pattern must bind $LAYER")]
    IndexBindsNoLayer,
    #[error("`{index}` is not inside a function in {file}; pass {flag}")]
    IndexOutsideFunction {
        index: String,
        file: String,
        flag: String,
    },
    #[error("a condition pattern must bind $COND")]
    ConditionBindsNothing,
    #[error(
        "cannot find the MoE-vs-dense decision in {file} (looked in the function around line {line} for {looked}); pass {flag}"
    )]
    NoDecision {
        file: String,
        line: usize,
        /// The patterns, each in backticks, joined by ` or `.
        looked: String,
        flag: String,
    },
    #[error("{config} has no num_hidden_layers; pass {flag}")]
    NoLayerCount { config: String, flag: String },
    #[error(transparent)]
    TooFewMoe(Box<TooFewMoe>),
    /// The decoder's source lost between finding and evaluating (a bug).
    #[error("{0}")]
    Lost(&'static str),
    /// The evaluator stopped before the decision (`python::eval` says why).
    #[error(transparent)]
    Run(crate::python::eval::EvalError),
    #[error("cannot evaluate `{shown}` with {config}: {why}")]
    Evaluate {
        shown: String,
        config: String,
        why: crate::python::eval::EvalError,
    },
    /// The example configs do not settle it.
    #[error("{what}; {}", ask_config(.configs.as_deref(), .flag))]
    Unsettled {
        what: Box<Unsettled>,
        /// The example configs, when there are several.
        configs: Option<String>,
        flag: String,
    },
    #[error(
        "the layer condition `{shown}` ({at}) needs the model config: pass --config config.json, or {flag}"
    )]
    NeedsConfig {
        shown: String,
        at: String,
        flag: String,
    },
    #[error(
        "{flag} {bad}: the model has {n} layers (0..{}) per {config}{others}; pass layers below {n}, or --config FILE with the config you train",
        .n - 1
    )]
    OutOfRange {
        flag: String,
        bad: u64,
        n: u64,
        config: String,
        /// ` (the largest of ...)` with several configs.
        others: String,
    },
    #[error(transparent)]
    Dense(Box<Dense>),
}

/// The decision selects fewer MoE layers than the rule set asks for.
#[derive(Debug, thiserror::Error)]
#[error(
    "`{shown}` ({at}) selects {found} MoE layer(s) among {among} with {config}, fewer than {count}; pass {flag}"
)]
pub struct TooFewMoe {
    pub(super) shown: String,
    pub(super) at: String,
    pub(super) found: usize,
    /// `its 24 layers`, `the first 10000 of 20000 layers`.
    pub(super) among: String,
    pub(super) config: String,
    pub(super) count: usize,
    pub(super) flag: String,
}

/// A detail layer given that is dense by the decoder's decision.
#[derive(Debug, thiserror::Error)]
#[error(
    "{flag} {bad}: layer {bad} is dense, not MoE, by `{shown}` ({at}) with {config}; its MoE layers are {moe}: pass MoE layers{example}"
)]
pub struct Dense {
    pub(super) flag: String,
    pub(super) bad: u64,
    pub(super) shown: String,
    pub(super) at: String,
    pub(super) config: String,
    /// `1..=26`, or `none`.
    pub(super) moe: String,
    /// ` (e.g. --detail-layers 1,2)`, or nothing.
    pub(super) example: String,
}

/// What the example configs leave open.
#[derive(Debug, thiserror::Error)]
pub enum Unsettled {
    #[error("{config} has only {n} layers, fewer than {count}")]
    FewLayers {
        config: String,
        n: u64,
        count: usize,
    },
    #[error(
        "the example configs disagree ({first} gives {layers:?}, {other} gives {other_layers:?})"
    )]
    Disagree {
        first: String,
        layers: Vec<u64>,
        other: String,
        other_layers: Vec<u64>,
    },
}

/// What to pass when the example configs do not settle the layers.
fn ask_config(configs: Option<&str>, flag: &str) -> String {
    match configs {
        Some(listed) => format!(
            "the example configs for this model are {listed}: pass --config FILE with the one you train, or {flag}"
        ),
        None => format!("pass --config FILE or {flag}"),
    }
}

impl crate::exit::Classify for Error {
    fn class(&self) -> crate::exit::Class {
        match self {
            Error::ConfigRead { source, .. } | Error::ModelRead { source, .. } => {
                crate::exit::io_class(source)
            }
            Error::Lost(_) => crate::exit::Class::Internal,
            _ => crate::exit::Class::User,
        }
    }
}
