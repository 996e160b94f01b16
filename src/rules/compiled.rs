//! A rule as the engine applies it to one target: made only by `instantiate`, every
//! placeholder filled in, its patterns compiled and its template split into pieces. What
//! holds one never substitutes again.

use std::collections::BTreeMap;

use super::template::Template;
use super::{Manifest, Occurrence, Position};
use crate::python::pattern::Pattern;

/// A rule's patterns, compiled.
#[derive(Debug, Default)]
pub struct RulePatterns {
    pub scope: Vec<Pattern>,
    /// Alternatives; empty when the rule has no anchor.
    pub anchor: Vec<Pattern>,
    pub following: Option<Pattern>,
    pub contains: Option<Pattern>,
    pub capture: Vec<Pattern>,
}

/// One rule, instantiated for a target and compiled.
#[derive(Debug)]
pub struct CompiledRule {
    /// As the markers write it: a model's tag (`5B.qwen35-moe.flags`), a function's name
    /// (`nvtx.range.Block.forward`).
    pub id: String,
    pub group: String,
    /// The file it edits, relative to the root.
    pub file: String,
    pub position: Position,
    /// Which match of the anchor is meant (with `following`: the first after it).
    pub occurrence: Occurrence,
    /// The anchor as written (alternatives joined by ` or `), for messages.
    pub anchor: Option<String>,
    pub patterns: RulePatterns,
    pub template: Template,
    /// Module-level imports the template needs.
    pub imports: Vec<String>,
    /// The rule file it is written in (`5-model.toml`), for messages.
    pub rule_file: String,
}

/// A rule set instantiated for one target: its rules in application order.
#[derive(Debug)]
pub struct CompiledSet {
    pub manifest: Manifest,
    /// Where it came from, for messages: `embedded:memory-prints` or a folder path.
    pub origin: String,
    pub rules: Vec<CompiledRule>,
    /// Rules (by index in `rules`) that scope into a role no class was given for: the
    /// role. Their patterns name a class that matches nothing; they are not planned.
    pub unplaced: BTreeMap<usize, String>,
}
