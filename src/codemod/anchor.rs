//! Resolving a rule's scope and anchor in a parsed file: which statement the edit is
//! placed against, with the metavariables the patterns bound. When a pattern finds
//! nothing, the closest statements are collected so the error can show them.

use crate::python::KindOf;
use tree_sitter::Node;

use crate::python::pattern::{Bindings, Pattern};
use crate::python::{self, Source};
use crate::rules::{CompiledRule, Occurrence};

/// Where a rule lands.
pub struct Resolved<'t> {
    /// The innermost scope: the module root, a definition or a compound statement.
    pub scope: Node<'t>,
    /// The anchor statement (with its decorators, for a decorated definition).
    pub anchor: Option<Node<'t>>,
    pub bindings: Bindings,
}

/// Why a pattern did not resolve.
#[derive(Debug, Clone)]
pub struct AnchorFailure {
    /// The pattern, as written.
    pub pattern: String,
    /// `scope`, `anchor`, `following` or `capture`.
    pub role: &'static str,
    /// 1-based line where the search scope starts (None: the whole file).
    pub searched_from: Option<usize>,
    /// The scope's header, e.g. `def setup_model` (None: the whole file).
    pub scope_header: Option<String>,
    pub problem: Problem,
}

#[derive(Debug, Clone)]
pub enum Problem {
    /// Nothing matched; the closest statements, as (line, text).
    NotFound(Vec<(usize, String)>),
    /// More than one matched where one was meant; their lines.
    Ambiguous(Vec<usize>),
}

/// Statements reachable from `container` without entering another function: nested blocks
/// of compound statements and class bodies are searched, function bodies are not.
pub fn reachable_statements(container: Node) -> Vec<Node> {
    let mut out = Vec::new();
    for block in bodies(container) {
        walk_block(block, &mut out);
    }
    out
}

/// The blocks a scope holds: the module itself, a definition's body, or the blocks of a
/// compound statement.
fn bodies(container: Node) -> Vec<Node> {
    match container.kind_of() {
        "module" => vec![container],
        "decorated_definition" => bodies(python::undecorated(container)),
        "function_definition" | "class_definition" => container.field("body").into_iter().collect(),
        _ => python::nested_blocks(container),
    }
}

fn walk_block<'t>(block: Node<'t>, out: &mut Vec<Node<'t>>) {
    for stmt in python::statements_of(block) {
        out.push(stmt);
        let inner = python::undecorated(stmt);
        match inner.kind_of() {
            "class_definition" => {
                if let Some(body) = inner.field("body") {
                    walk_block(body, out);
                }
            }
            "function_definition" => {}
            k if python::is_compound(k) || k.ends_with("_statement") => {
                for b in python::nested_blocks(inner) {
                    walk_block(b, out);
                }
            }
            _ => {}
        }
    }
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The header line of a compound statement, or a simple statement squashed to one line.
fn summary(src: &Source, node: Node, header: bool) -> String {
    let node = python::undecorated(node);
    let text = src.text_of(node);
    let s = if header {
        match (node.kind_of(), python::definition_name(src, node)) {
            ("function_definition", Some(name)) => format!("def {name}"),
            ("class_definition", Some(name)) => format!("class {name}"),
            _ => text
                .lines()
                .next()
                .unwrap_or("")
                .trim_end_matches(':')
                .to_string(),
        }
    } else {
        squash(text)
    };
    s.chars().take(120).collect()
}

/// Words and punctuation of a line of code, for a similarity that ignores spacing.
fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for ch in s.chars() {
        if ch.is_alphanumeric() || ch == '_' {
            word.push(ch);
        } else {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if !ch.is_whitespace() {
                out.push(ch.to_string());
            }
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// How alike two lines of code are, 0 to 1: the better of a character-level and a
/// token-level comparison (one catches renamed words, the other a renamed call with the
/// same argument shape).
fn similarity(a: &str, b: &str) -> f32 {
    let chars = similar::TextDiff::from_chars(a, b).ratio();
    let (ta, tb) = (tokens(a), tokens(b));
    let (ra, rb): (Vec<&str>, Vec<&str>) = (
        ta.iter().map(|s| s.as_str()).collect(),
        tb.iter().map(|s| s.as_str()).collect(),
    );
    let words = similar::TextDiff::from_slices(&ra, &rb).ratio();
    chars.max(words)
}

/// The statements most like `pattern`, best first, for an error message.
fn closest(src: &Source, pool: &[Node], pattern: &Pattern) -> Vec<(usize, String)> {
    let wanted = squash(&pattern.text).replace('$', "");
    let same_kind: Vec<&Node> = pool
        .iter()
        .filter(|n| python::undecorated(**n).kind_of() == pattern.node_kind())
        .collect();
    let pool: Vec<&Node> = if same_kind.is_empty() {
        pool.iter().collect()
    } else {
        same_kind
    };
    let mut scored: Vec<(f32, usize, String)> = pool
        .iter()
        .map(|n| {
            let s = summary(src, **n, pattern.is_header());
            let ratio = similarity(&wanted, &s);
            (ratio, n.start_position().row + 1, s)
        })
        .filter(|(r, _, _)| *r > 0.3)
        .collect();
    scored.sort_by(|a, b| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.1.cmp(&b.1))
    });
    scored.into_iter().take(3).map(|(_, l, s)| (l, s)).collect()
}

/// Every function and class definition in the file, for "did you mean" on scope headers.
fn all_definitions(root: Node) -> Vec<Node> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        if matches!(n.kind_of(), "function_definition" | "class_definition") {
            out.push(n);
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c));
    }
    out.sort_by_key(|n| n.start_byte());
    out
}

/// Find the matches of `pattern` among `pool`, in source order.
fn matches<'t>(
    src: &Source,
    pool: &[Node<'t>],
    pattern: &Pattern,
    bindings: &Bindings,
) -> Vec<(Node<'t>, Bindings)> {
    pool.iter()
        .filter_map(|n| {
            let b = pattern.match_statement(src, *n)?;
            // Metavariables bound by an outer pattern must agree with this one.
            let agrees = b
                .iter()
                .all(|(k, v)| bindings.get(k).is_none_or(|prev| squash(prev) == squash(v)));
            agrees.then_some((*n, b))
        })
        .collect()
}

fn merge(into: &mut Bindings, from: Bindings) {
    for (k, v) in from {
        into.entry(k).or_insert(v);
    }
}

fn failure(
    src: &Source,
    role: &'static str,
    pattern: &Pattern,
    scope: Node,
    problem: Problem,
) -> AnchorFailure {
    let is_module = scope.kind_of() == "module";
    AnchorFailure {
        pattern: pattern.text.clone(),
        role,
        searched_from: (!is_module).then(|| scope.start_position().row + 1),
        scope_header: (!is_module).then(|| {
            let header = summary(src, scope, true);
            header
                .split('(')
                .next()
                .unwrap_or(&header)
                .trim()
                .to_string()
        }),
        problem,
    }
}

/// The one statement of `pool` that `pattern` matches, or why there is not exactly one.
fn unique<'t>(
    src: &'t Source,
    role: &'static str,
    pool: &[Node<'t>],
    pattern: &Pattern,
    bindings: &Bindings,
    scope: Node<'t>,
) -> Result<(Node<'t>, Bindings), AnchorFailure> {
    let mut found = matches(src, pool, pattern, bindings);
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => {
            // A missing definition may have moved anywhere in the file: look there too.
            let candidates = if role == "scope"
                && matches!(
                    pattern.node_kind(),
                    "function_definition" | "class_definition"
                ) {
                closest(src, &all_definitions(src.root()), pattern)
            } else {
                closest(src, pool, pattern)
            };
            Err(failure(
                src,
                role,
                pattern,
                scope,
                Problem::NotFound(candidates),
            ))
        }
        _ => {
            let lines = found
                .iter()
                .map(|(n, _)| n.start_position().row + 1)
                .collect();
            Err(failure(
                src,
                role,
                pattern,
                scope,
                Problem::Ambiguous(lines),
            ))
        }
    }
}

/// The statements of each scope already walked in a file, by scope node id (many rules
/// search the same scopes), leaving out code inside other rule sets' regions: that code is
/// not the program's own, and an anchor there would put an edit inside the region.
#[derive(Default)]
pub struct PoolCache<'t> {
    pools: std::collections::HashMap<usize, Vec<Node<'t>>>,
    exclude: Vec<std::ops::Range<usize>>,
}

impl PoolCache<'_> {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache that leaves out statements lying wholly inside `regions` (byte ranges).
    pub fn excluding(regions: Vec<std::ops::Range<usize>>) -> Self {
        PoolCache {
            pools: Default::default(),
            exclude: regions,
        }
    }

    /// An insertion point moved out of another set's region: to that region's start, so
    /// the new code goes above it (a decorator region above a `def`, say).
    pub fn outside(&self, at: usize) -> usize {
        self.exclude
            .iter()
            .find(|r| r.start < at && at < r.end)
            .map_or(at, |r| r.start)
    }
}

fn pool<'t>(cache: &mut PoolCache<'t>, scope: Node<'t>) -> Vec<Node<'t>> {
    let exclude = &cache.exclude;
    cache
        .pools
        .entry(scope.id())
        .or_insert_with(|| {
            reachable_statements(scope)
                .into_iter()
                .filter(|n| {
                    !exclude
                        .iter()
                        .any(|r| r.start <= n.start_byte() && n.end_byte() <= r.end)
                })
                .collect()
        })
        .clone()
}

/// Resolve `rule` in `src`.
pub fn resolve<'t>(
    src: &'t Source,
    rule: &CompiledRule,
    cache: &mut PoolCache<'t>,
) -> Result<Resolved<'t>, AnchorFailure> {
    let patterns = &rule.patterns;
    let mut scope = src.root();
    let mut bindings = Bindings::new();
    for pattern in &patterns.scope {
        let pool = pool(cache, scope);
        let (node, b) = unique(src, "scope", &pool, pattern, &bindings, scope)?;
        merge(&mut bindings, b);
        scope = python::undecorated(node);
    }
    let pool = pool(cache, scope);
    for pattern in &patterns.capture {
        let (_, b) = unique(src, "capture", &pool, pattern, &bindings, scope)?;
        merge(&mut bindings, b);
    }
    if patterns.anchor.is_empty() {
        return Ok(Resolved {
            scope,
            anchor: None,
            bindings,
        });
    }
    let mut after_byte = 0;
    if let Some(pattern) = &patterns.following {
        let (node, b) = unique(src, "following", &pool, pattern, &bindings, scope)?;
        after_byte = node.end_byte();
        merge(&mut bindings, b);
    }
    let pattern = patterns
        .anchor
        .first()
        .expect("a rule with an anchor has its pattern");
    let described = rule.anchor.clone().unwrap_or_default();
    let with_description = |mut f: AnchorFailure| {
        f.pattern = described.clone();
        f
    };
    let contains = patterns.contains.as_ref();
    // Alternatives: every statement any of them matches, in source order.
    let mut candidates: Vec<(Node, Bindings)> = patterns
        .anchor
        .iter()
        .flat_map(|p| matches(src, &pool, p, &bindings))
        .collect();
    candidates.sort_by_key(|(n, _)| n.start_byte());
    candidates.dedup_by_key(|(n, _)| n.id());
    let found: Vec<(Node, Bindings)> = candidates
        .into_iter()
        .filter(|(n, _)| n.start_byte() >= after_byte)
        .filter(|(n, _)| {
            contains.as_ref().is_none_or(|c| {
                reachable_statements(python::undecorated(*n))
                    .iter()
                    .any(|s| c.match_statement(src, *s).is_some())
            })
        })
        .collect();
    let chosen = match (rule.occurrence, found.len()) {
        (_, 0) => {
            return Err(with_description(failure(
                src,
                "anchor",
                pattern,
                scope,
                Problem::NotFound(closest(src, &pool, pattern)),
            )));
        }
        (Occurrence::Only, 1) | (Occurrence::First, _) => found.into_iter().next(),
        (Occurrence::Last, _) => found.into_iter().last(),
        (Occurrence::Only, _) => {
            let lines = found
                .iter()
                .map(|(n, _)| n.start_position().row + 1)
                .collect();
            return Err(with_description(failure(
                src,
                "anchor",
                pattern,
                scope,
                Problem::Ambiguous(lines),
            )));
        }
    };
    let (node, b) = chosen.expect("non-empty");
    merge(&mut bindings, b);
    Ok(Resolved {
        scope,
        anchor: Some(python::with_decorators(python::undecorated(node))),
        bindings,
    })
}
