//! `explain`: where each rule's scope and anchor resolve in a tree, before anything is
//! written, so a rule author or reviewer can check the rules against a checkout.

use std::path::Path;

use super::anchor;
use super::markers;
use crate::python::{self, Source};
use crate::rules::CompiledSet;

/// Where one rule lands, or why it does not.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Landing {
    pub rule: String,
    pub group: String,
    pub file: String,
    /// 1-based line of the anchor (or of the scope, for body positions) in the file as it
    /// is now: on an instrumented tree, where the anchor stands among the regions (a
    /// statement a region replaced: its `# |` line).
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

/// Resolve every rule of `set` (instantiated for one model) under `root`.
pub fn explain(root: &Path, set: &CompiledSet) -> Vec<Landing> {
    let mut out = Vec::new();
    // Each file without this set's regions, and for each of its lines the line it is now.
    let mut cache: std::collections::BTreeMap<String, Option<(Source, Vec<usize>)>> =
        Default::default();
    for rule in &set.rules {
        let file = rule.file.clone();
        let src = cache.entry(file.clone()).or_insert_with(|| {
            let bytes = std::fs::read(root.join(&file)).ok()?;
            // Resolve on the tree as it is without this set's regions, then map back.
            let (clean, origin) =
                match markers::strip_bytes(&bytes, |r| r.rule_set == set.manifest.name) {
                    Ok(s) => (s.text, s.origin),
                    Err(_) => {
                        let n = bytes.iter().filter(|b| **b == b'\n').count() + 1;
                        (bytes, (0..n).collect())
                    }
                };
            let text = String::from_utf8(clean).ok()?;
            Some((Source::parse(text), origin))
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
            None => {
                landing.error =
                    Some("the file does not exist in this checkout (or is not UTF-8 text)".into())
            }
            Some((src, origin)) => {
                match anchor::resolve(src, rule, &mut anchor::PoolCache::new()) {
                    Ok(r) => {
                        let node = r.anchor.unwrap_or(r.scope);
                        let clean_line = node.start_position().row + 1;
                        landing.line =
                            Some(origin.get(clean_line - 1).map_or(clean_line, |l| l + 1));
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
                }
            }
        }
        out.push(landing);
    }
    out
}
