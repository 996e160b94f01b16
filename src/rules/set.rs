//! A loaded rule set (raw: as the TOML says, checked) and the checks a set's rules must
//! pass on their own. Below both the loading (`load`) and the instantiation
//! (`instantiate`, `models`), which use it.

use std::collections::HashSet;

use super::error::Error;
pub use super::template::placeholders;
use super::{Manifest, Position, Rule, TargetKind};

/// A loaded, validated rule set: its rules as written (raw), not yet for any target.
#[derive(Debug, Clone)]
pub struct RuleSet {
    pub manifest: Manifest,
    pub rules: Vec<Rule>,
    /// Where it came from, for messages: `embedded:memory-prints` or a folder path.
    pub origin: String,
    /// Rule file of each rule (same order as `rules`), for messages.
    pub rule_files: Vec<String>,
}

/// `5B.flags` with tag `gpt-oss` -> `5B.gpt-oss.flags`: the tag after the group part.
pub fn tagged_id(id: &str, tag: &str) -> String {
    if tag.is_empty() {
        return id.to_string();
    }
    match id.split_once('.') {
        Some((group, rest)) => format!("{group}.{tag}.{rest}"),
        None => format!("{id}.{tag}"),
    }
}

impl RuleSet {
    /// The set with rule `index` alone (its examples are tested so).
    pub fn only(&self, index: usize) -> RuleSet {
        RuleSet {
            manifest: self.manifest.clone(),
            rules: vec![self.rules[index].clone()],
            origin: self.origin.clone(),
            rule_files: vec![self.rule_files[index].clone()],
        }
    }
    /// Static checks on the rules themselves, before any target is read.
    pub(super) fn validate(&self) -> Result<(), Error> {
        let mut seen = HashSet::new();
        for (rule, file) in self.rules.iter().zip(&self.rule_files) {
            let at = format!("{}/{file}: rule {}", self.origin, rule.id);
            if rule.id.is_empty() || rule.id.contains(char::is_whitespace) {
                return Err(Error::invalid(format!("{at}: a rule id must be one word")));
            }
            if !seen.insert(rule.id.clone()) {
                return Err(Error::invalid(format!("{at}: the id is used twice")));
            }
            if rule.position.needs_anchor() && rule.anchor.is_none() {
                return Err(Error::invalid(format!(
                    "{at}: position {:?} needs an anchor",
                    rule.position
                )));
            }
            if !rule.position.needs_anchor() && rule.anchor.is_some() {
                return Err(Error::invalid(format!(
                    "{at}: position {:?} works on the scope itself; drop the anchor or use before/after",
                    rule.position
                )));
            }
            if rule.position == Position::Wrap && !rule.template.contains("{ORIGINAL}") {
                return Err(Error::invalid(format!(
                    "{at}: a wrap template must contain {{ORIGINAL}}"
                )));
            }
            if rule.position != Position::Replace
                && rule.position != Position::Wrap
                && rule.template.trim().is_empty()
            {
                return Err(Error::invalid(format!("{at}: the template is empty")));
            }
            if rule.per.is_some() && self.manifest.targets != TargetKind::Functions {
                return Err(Error::invalid(format!(
                    "{at}: `per` is for rule sets whose targets are functions; drop it, or set targets = \"functions\" in ruleset.toml"
                )));
            }
            if !rule.position.needs_anchor()
                && rule.scope.is_empty()
                && rule.position == Position::AddParameter
            {
                return Err(Error::invalid(format!(
                    "{at}: add-parameter needs a `def` scope"
                )));
            }
        }
        Ok(())
    }
}
