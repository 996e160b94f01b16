//! `explain`: where each rule's scope and anchor resolve in a tree, before anything is
//! written, so a rule author or reviewer can check the rules against a checkout.

use std::path::Path;

use super::anchor;
use super::markers;
use crate::python::{self, Source};
use crate::rules::{Rule, RuleSet};

/// Where one rule lands, or why it does not.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Landing {
    pub rule: String,
    pub group: String,
    pub file: String,
    /// 1-based line of the anchor (or of the scope, for body positions).
    pub line: Option<usize>,
    /// The first line of the matched statement.
    pub matched: Option<String>,
    /// Metavariables the patterns bound.
    pub bindings: std::collections::BTreeMap<String, String>,
    pub error: Option<String>,
}

fn first_line(src: &Source, node: tree_sitter::Node) -> String {
    let node = python::undecorated(node);
    src.text_of(node)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Resolve `rules` (already filtered for the model) under `root`.
pub fn explain(root: &Path, set: &RuleSet, rules: &[&Rule], model: Option<&str>) -> Vec<Landing> {
    let mut out = Vec::new();
    let mut cache: std::collections::BTreeMap<String, Option<Source>> = Default::default();
    for rule in rules {
        let file = rule.file.replace("{MODEL}", model.unwrap_or("{MODEL}"));
        let src = cache.entry(file.clone()).or_insert_with(|| {
            let text = std::fs::read_to_string(root.join(&file)).ok()?;
            // Explain the tree as it is without instrumentation.
            let clean = markers::strip(&text, |r| r.rule_set == set.manifest.name)
                .map(|(t, _)| t)
                .unwrap_or(text);
            Some(Source::parse(clean))
        });
        let mut landing = Landing {
            rule: rule.id.clone(),
            group: rule.group.clone(),
            file: file.clone(),
            line: None,
            matched: None,
            bindings: Default::default(),
            error: None,
        };
        match src {
            None => landing.error = Some("the file does not exist in this checkout".into()),
            Some(src) => match anchor::resolve(
                src,
                rule,
                set.patterns_of(rule),
                &mut anchor::PoolCache::new(),
            ) {
                Ok(r) => {
                    let node = r.anchor.unwrap_or(r.scope);
                    landing.line = Some(src.line_of(node.start_byte()));
                    landing.matched = Some(first_line(src, node));
                    landing.bindings = r.bindings;
                }
                Err(f) => {
                    let (msg, candidates) = super::plan::describe_anchor_failure(&f);
                    let c: Vec<String> = candidates
                        .iter()
                        .map(|(l, t)| format!("line {l} `{t}`"))
                        .collect();
                    landing.error = Some(if c.is_empty() {
                        msg
                    } else {
                        format!("{msg}; closest: {}", c.join(", "))
                    });
                }
            },
        }
        out.push(landing);
    }
    out
}
