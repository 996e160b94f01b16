//! A loaded rule set as the engine uses it: its rules, their compiled patterns, and the
//! checks a set's rules must pass on their own. Below both the loading (`load`) and the
//! per-model expansion (`models`), which use it.

use std::collections::HashSet;

use super::error::Error;
use super::{Manifest, Position, Rule};
use crate::python::pattern::Pattern;

/// A rule's patterns, compiled once when the rule set loads (for a rule written `per`
/// target, once it is expanded).
#[derive(Debug, Default)]
pub struct RulePatterns {
    pub scope: Vec<Pattern>,
    /// Alternatives; empty when the rule has no anchor.
    pub anchor: Vec<Pattern>,
    pub following: Option<Pattern>,
    pub contains: Option<Pattern>,
    pub capture: Vec<Pattern>,
}

/// A loaded, validated rule set.
#[derive(Debug)]
pub struct RuleSet {
    pub manifest: Manifest,
    pub rules: Vec<Rule>,
    /// Compiled patterns, one entry per rule (same order as `rules`).
    pub patterns: Vec<RulePatterns>,
    /// Where it came from, for messages: `embedded:memory-prints` or a folder path.
    pub origin: String,
    /// Rule file of each rule (same order as `rules`), for messages.
    pub rule_files: Vec<String>,
}

/// `{NAME}` placeholders in `text`, in order.
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                let name = &after[..close];
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                {
                    out.push(name);
                }
                rest = &after[close + 1..];
            }
            None => break,
        }
    }
    out
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

pub fn compile_patterns(rule: &Rule) -> Result<RulePatterns, Error> {
    if rule.per.is_some() {
        return Ok(RulePatterns::default());
    }
    // A role placeholder (`class {EXPERTS}`) stands for a class name: until the model's
    // classes are known, the pattern is checked with a name that matches no class.
    let compile = |p: &str| {
        let text = if p.contains('{') {
            placeholders(p).iter().fold(p.to_string(), |t, name| {
                t.replace(&format!("{{{name}}}"), &format!("_instrument_role_{name}"))
            })
        } else {
            p.to_string()
        };
        Pattern::compile(&text).map_err(|e| Error::invalid(format!("rule {}: {e}", rule.id)))
    };
    let one = |p: &String| compile(p);
    Ok(RulePatterns {
        scope: rule.scope.iter().map(one).collect::<Result<_, _>>()?,
        anchor: rule
            .anchor
            .iter()
            .flat_map(|a| a.patterns())
            .map(compile)
            .collect::<Result<_, _>>()?,
        following: rule.following.as_ref().map(one).transpose()?,
        contains: rule.contains.as_ref().map(one).transpose()?,
        capture: rule.capture.iter().map(one).collect::<Result<_, _>>()?,
    })
}

impl RuleSet {
    /// Keep the rules `keep` picks and compile their patterns.
    pub fn retain_and_compile(&mut self, keep: impl Fn(&Rule) -> bool) -> Result<(), Error> {
        let (rules, files): (Vec<Rule>, Vec<String>) = std::mem::take(&mut self.rules)
            .into_iter()
            .zip(std::mem::take(&mut self.rule_files))
            .filter(|(r, _)| keep(r))
            .unzip();
        self.patterns = rules
            .iter()
            .zip(&files)
            .map(|(r, file)| {
                compile_patterns(r)
                    .map_err(|e| Error::invalid(format!("{}/{file}: {e}", self.origin)))
            })
            .collect::<Result<_, _>>()?;
        self.rules = rules;
        self.rule_files = files;
        Ok(())
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

    /// The compiled patterns of `rule` (a rule of this set).
    pub fn patterns_of(&self, rule: &Rule) -> &RulePatterns {
        let i = self
            .rules
            .iter()
            .position(|r| std::ptr::eq(r, rule))
            .expect("a rule of this set");
        &self.patterns[i]
    }

    /// The rules that apply to `model` (a file stem), in application order.
    pub fn rules_for_model<'a>(&'a self, model: Option<&str>) -> Vec<&'a Rule> {
        self.rules.iter().filter(|r| r.applies_to(model)).collect()
    }
}
