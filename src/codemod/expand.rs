//! Rule sets whose targets are functions (the NVTX ranges): their rules are templates,
//! written once per file or once per selected function, and expanded here into ordinary
//! rules the engine plans like any other.

use std::collections::BTreeSet;

use crate::rules::set::compile_patterns;
use crate::rules::{Anchor, Per, Rule, RuleSet};

/// A selected function, as the expansion needs it.
#[derive(Debug, Clone)]
pub struct FunctionTarget {
    /// The file, relative to the root.
    pub file: String,
    pub class: Option<String>,
    pub function: String,
}

impl FunctionTarget {
    /// `Class.method` or `func`.
    pub fn name(&self) -> String {
        match &self.class {
            Some(c) => format!("{c}.{}", self.function),
            None => self.function.clone(),
        }
    }
}

fn fill(text: &str, file: &str, target: Option<&FunctionTarget>) -> String {
    let mut out = text.replace("{FILE}", file);
    if let Some(t) = target {
        out = out
            .replace("{FUNCTION}", &t.function)
            .replace("{NAME}", &t.name());
    }
    out
}

fn instantiate(rule: &Rule, file: &str, target: Option<&FunctionTarget>) -> Rule {
    let mut r = rule.clone();
    r.per = None;
    r.file = fill(&rule.file, file, target);
    r.id = match target {
        Some(t) => format!("{}.{}", rule.id, t.name()),
        None => rule.id.clone(),
    };
    r.scope = rule
        .scope
        .iter()
        .flat_map(
            |s| match (s.as_str(), target.and_then(|t| t.class.as_ref())) {
                ("{CLASS_SCOPE}", Some(c)) => vec![format!("class {c}")],
                ("{CLASS_SCOPE}", None) => vec![],
                _ => vec![fill(s, file, target)],
            },
        )
        .collect();
    r.anchor = rule.anchor.as_ref().map(|a| match a {
        Anchor::One(p) => Anchor::One(fill(p, file, target)),
        Anchor::Any(ps) => Anchor::Any(ps.iter().map(|p| fill(p, file, target)).collect()),
    });
    r.template = fill(&rule.template, file, target);
    r.summary = fill(&rule.summary, file, target);
    r
}

/// The concrete rule set for `targets`: per-file rules once for each file holding a
/// target (first), then per-function rules for each target, in order.
pub fn for_functions(
    set: &RuleSet,
    targets: &[FunctionTarget],
) -> Result<RuleSet, crate::rules::Error> {
    let files: BTreeSet<&str> = targets.iter().map(|t| t.file.as_str()).collect();
    let mut rules = Vec::new();
    let mut rule_files = Vec::new();
    for (rule, from) in set.rules.iter().zip(&set.rule_files) {
        match rule.per {
            Some(Per::File) => {
                for f in &files {
                    rules.push(instantiate(rule, f, None));
                    rule_files.push(from.clone());
                }
            }
            Some(Per::Function) => {
                for t in targets {
                    rules.push(instantiate(rule, &t.file, Some(t)));
                    rule_files.push(from.clone());
                }
            }
            None => {
                rules.push(rule.clone());
                rule_files.push(from.clone());
            }
        }
    }
    let patterns = rules
        .iter()
        .map(|r| {
            compile_patterns(r)
                .map_err(|e| crate::rules::Error::invalid(format!("{}: {e}", set.origin)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RuleSet {
        manifest: set.manifest.clone(),
        rules,
        patterns,
        origin: set.origin.clone(),
        rule_files,
    })
}
