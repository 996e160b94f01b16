//! How a rule's printed lines read: `[[rule.prints]]` tables, kept at the end of the rule
//! block. The rule set says what its prints mean (label, fields, units) so that
//! `instrument log` reads them without knowing the project they instrument; the reader
//! compiles these raw declarations (`crate::log::decl`) and `test-rules` checks each one
//! against what the rule's template really prints.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One line a rule prints, as the rule author declares it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrintDecl {
    /// What the line is for the report: `setup`, `timeline`, `layer`, `saved-header`,
    /// `saved-activation`, `saved-weight`, `saved-total`, `file` or `note`.
    pub kind: String,
    /// The line as printed, with `{name}` for each value (`{name=...}` names a span that
    /// holds literal text and further values, e.g. a path built from parts).
    pub line: String,
    /// How the report names the line; `{name}` fills in a value.
    #[serde(default)]
    pub label: Option<String>,
    /// Each value's type and, optionally, role and meaning: `"GiB"`, `"int: micro-batch"`,
    /// `"GiB cost: NCCL communicators"`. Values named after a role (`rank`, `allocated`, ...)
    /// take that role.
    #[serde(default)]
    pub fields: BTreeMap<String, String>,
    /// A part of a layer stage the line belongs to (`experts`), for `layer` lines.
    #[serde(default)]
    pub part: Option<String>,
    /// Roles taken from the rank's latest line that had them (`["layer", "stage"]`).
    #[serde(default)]
    pub inherit: Vec<String>,
    /// For `file` lines: the command that opens the file, `{name}` filled in.
    #[serde(default)]
    pub open: Option<String>,
    /// For `setup` lines: the costs the line states are the same whatever pipeline stage
    /// the rank is on (the CUDA context, the NCCL world, the device mesh), so `instrument
    /// log` compares them across all ranks; other figures only among ranks on one stage.
    #[serde(default)]
    pub same_on_every_stage: bool,
}
