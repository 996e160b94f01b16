//! Code patterns: Python with metavariables, matched structurally against a tree.
//!
//! A pattern is written as the code it should find. `$NAME` stands for any single node
//! and binds its text (the same name twice must bind equal text; `$_` binds nothing);
//! `$$$NAME` stands for any run of items in a list (arguments, statements, elements).
//! Matching compares syntax, not text: formatting, comments and trailing commas do not
//! matter, and keyword arguments match in any order.
//!
//! Compound statements are written as their header only (`def step`, `class DualPipeV`,
//! `for $I in range(step_1)`, `if self.is_first_pp_rank`); only the header is compared,
//! so a loop with an extra statement in its body still matches.

use super::KindOf;
use std::collections::BTreeMap;

use tree_sitter::Node;

use crate::python::{self, Source};

/// Metavariable name -> the source text it matched.
pub type Bindings = BTreeMap<String, String>;

const SINGLE: &str = "__mv_";
const SEQUENCE: &str = "__mvs_";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderKind {
    Def,
    Class,
    For,
    While,
    If,
    With,
    Try,
}

impl HeaderKind {
    fn node_kind(self) -> &'static str {
        match self {
            HeaderKind::Def => "function_definition",
            HeaderKind::Class => "class_definition",
            HeaderKind::For => "for_statement",
            HeaderKind::While => "while_statement",
            HeaderKind::If => "if_statement",
            HeaderKind::With => "with_statement",
            HeaderKind::Try => "try_statement",
        }
    }
}

/// A compiled pattern.
#[derive(Clone)]
pub struct Pattern {
    /// As written in the rule.
    pub text: String,
    source: Source,
    pub header: Option<HeaderKind>,
    /// The longest name the pattern spells out: a statement whose text lacks it cannot
    /// match, so most statements are passed over without a structural comparison.
    needle: Option<String>,
    /// The kind of statement it is (None: a lone metavariable, which matches any).
    kind: Option<&'static str>,
}

/// The longest identifier of a pattern's code that is not a metavariable or a keyword.
fn needle(source: &Source) -> Option<String> {
    let mut best: Option<&str> = None;
    let mut stack = vec![source.root()];
    while let Some(n) = stack.pop() {
        if n.kind_of() == "identifier" {
            let t = source.text_of(n);
            if !t.starts_with(SINGLE)
                && !t.starts_with(SEQUENCE)
                && best.is_none_or(|b| t.len() > b.len())
            {
                best = Some(t);
            }
        }
        let mut c = n.walk();
        stack.extend(n.children(&mut c));
    }
    // The stand-in body of a header pattern is not part of what it matches.
    best.filter(|b| *b != "pass").map(str::to_string)
}

impl std::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pattern({:?})", self.text)
    }
}

/// Replace `$$$NAME` / `$NAME` by identifiers tree-sitter can parse.
fn expand_metavariables(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' {
            let (prefix, skip) = if text[i..].starts_with("$$$") {
                (SEQUENCE, 3)
            } else {
                (SINGLE, 1)
            };
            let start = i + skip;
            let mut end = start;
            while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
                end += 1;
            }
            out.push_str(prefix);
            out.push_str(&text[start..end]);
            i = end;
        } else {
            let ch = text[i..].chars().next().expect("in bounds");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn header_kind(text: &str) -> Option<HeaderKind> {
    let first = text.split_whitespace().next().unwrap_or("");
    let second = text.split_whitespace().nth(1).unwrap_or("");
    let word = if first == "async" { second } else { first };
    Some(match word {
        "def" => HeaderKind::Def,
        "class" => HeaderKind::Class,
        "for" => HeaderKind::For,
        "while" => HeaderKind::While,
        "if" => HeaderKind::If,
        "with" => HeaderKind::With,
        "try" | "try:" => HeaderKind::Try,
        _ => return None,
    })
}

/// Why a rule's pattern does not compile: the rule set is the user's to fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatternError {
    #[error("empty pattern")]
    Empty,
    #[error("pattern `{pattern}` is not valid Python (column {column})")]
    NotPython { pattern: String, column: usize },
    #[error("pattern `{pattern}` must be one statement, found {found}")]
    NotOneStatement { pattern: String, found: usize },
}

crate::exit::user_errors!(PatternError);

impl Pattern {
    /// Compile `text`. Rules share many patterns (`def forward`, a scope's class): each
    /// text is parsed once per thread.
    pub fn compile(text: &str) -> Result<Pattern, PatternError> {
        thread_local! {
            static COMPILED: std::cell::RefCell<std::collections::HashMap<String, Pattern>> =
                Default::default();
        }
        if let Some(p) = COMPILED.with(|c| c.borrow().get(text).cloned()) {
            return Ok(p);
        }
        let p = Self::compile_new(text)?;
        COMPILED.with(|c| c.borrow_mut().insert(text.to_string(), p.clone()));
        Ok(p)
    }

    fn compile_new(text: &str) -> Result<Pattern, PatternError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(PatternError::Empty);
        }
        let header = header_kind(trimmed);
        let expanded = expand_metavariables(trimmed.trim_end_matches(':'));
        let code = match header {
            Some(HeaderKind::Def) if !expanded.contains('(') => {
                format!("{expanded}():\n    pass\n")
            }
            Some(HeaderKind::Try) => "try:\n    pass\nfinally:\n    pass\n".to_string(),
            Some(_) => format!("{expanded}:\n    pass\n"),
            None => format!("{expanded}\n"),
        };
        let source = Source::parse(code);
        if let Some(err) = source.first_error() {
            return Err(PatternError::NotPython {
                pattern: trimmed.to_string(),
                column: err.column,
            });
        }
        let statements = python::statements_of(source.root());
        if statements.len() != 1 {
            return Err(PatternError::NotOneStatement {
                pattern: trimmed.to_string(),
                found: statements.len(),
            });
        }
        let needle = match header {
            // Only the header is compared: its name or condition, not the stand-in body.
            Some(HeaderKind::Try) => None,
            _ => needle(&source),
        };
        let first = statements[0];
        let lone_meta = first.kind_of() == "expression_statement"
            && first.named_child_count() == 1
            && first.named_child(0).is_some_and(|e| {
                e.kind_of() == "identifier" && source.text_of(e).starts_with(SINGLE)
                    || e.kind_of() == "identifier" && source.text_of(e).starts_with(SEQUENCE)
            });
        let kind = (!lone_meta).then(|| python::undecorated(first).kind_of());
        Ok(Pattern {
            text: trimmed.to_string(),
            source,
            header,
            needle,
            kind,
        })
    }

    fn root_statement(&self) -> Node<'_> {
        // Compiled patterns hold exactly one statement (checked in `compile`).
        let root = self.source.root();
        let mut cursor = root.walk();
        let first = root
            .named_children(&mut cursor)
            .find(|c| c.kind_of() != "comment")
            .expect("a compiled pattern holds one statement");
        python::undecorated(first)
    }

    /// Whether this pattern describes a compound statement by its header.
    pub fn is_header(&self) -> bool {
        self.header.is_some()
    }

    /// The tree-sitter node kind this pattern can match (after undecorating).
    pub fn node_kind(&self) -> &str {
        match self.header {
            Some(h) => h.node_kind(),
            None => self.root_statement().kind_of(),
        }
    }

    /// Match a statement of `src`. Decorated definitions are matched by their definition.
    pub fn match_statement(&self, src: &Source, stmt: Node) -> Option<Bindings> {
        let stmt = python::undecorated(stmt);
        // Kinds first (cheap): a header matches its kind of compound statement, a bare
        // expression an expression statement or a `return`, anything else its own kind.
        // Then the needle, in the statement's text (long for a compound statement).
        let kind = stmt.kind_of();
        let fits = match (self.header, self.kind) {
            (Some(h), _) => kind == h.node_kind(),
            (None, None) => true,
            (None, Some(own)) => {
                kind == own || (own == "expression_statement" && kind == "return_statement")
            }
        };
        if !fits {
            return None;
        }
        if let Some(n) = &self.needle
            && !src.text_of(stmt).contains(n.as_str())
        {
            return None;
        }
        let p = self.root_statement();
        let mut b = Bindings::new();
        let m = Matcher {
            p_src: &self.source,
            t_src: src,
        };
        if let Some(h) = self.header {
            if stmt.kind_of() != h.node_kind() {
                return None;
            }
            let fields: &[&str] = match h {
                HeaderKind::Def | HeaderKind::Class => &["name"],
                HeaderKind::For => &["left", "right"],
                HeaderKind::While | HeaderKind::If => &["condition"],
                HeaderKind::With | HeaderKind::Try => &[],
            };
            for field in fields {
                let (pf, tf) = (p.field(field)?, stmt.field(field)?);
                if !m.node(pf, tf, &mut b) {
                    return None;
                }
            }
            if h == HeaderKind::With {
                let pc = first_child_of_kind(p, "with_clause")?;
                let tc = first_child_of_kind(stmt, "with_clause")?;
                if !m.node(pc, tc, &mut b) {
                    return None;
                }
            }
            if h == HeaderKind::Class
                && let Some(ps) = p.field("superclasses")
            {
                let ts = stmt.field("superclasses")?;
                if !m.node(ps, ts, &mut b) {
                    return None;
                }
            }
            return Some(b);
        }
        if m.node(p, stmt, &mut b) {
            return Some(b);
        }
        // A bare expression also matches the statement whose value it is:
        // `prepare_dispatch($$$)` finds `tokens, routing = prepare_dispatch(...)` and
        // `return prepare_dispatch(...)`.
        let expr = bare_expression(p)?;
        let value = statement_value(stmt)?;
        let mut b = Bindings::new();
        m.node(expr, value, &mut b).then_some(b)
    }
}

fn first_child_of_kind<'t>(node: Node<'t>, kind: &str) -> Option<Node<'t>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor)
        .find(|c| c.kind_of() == kind)
}

/// The expression of an expression statement that is not an assignment.
fn bare_expression(stmt: Node) -> Option<Node> {
    if stmt.kind_of() != "expression_statement" || stmt.named_child_count() != 1 {
        return None;
    }
    let e = stmt.named_child(0)?;
    (!matches!(e.kind_of(), "assignment" | "augmented_assignment")).then_some(e)
}

/// The value a simple statement computes: an assignment's right side, a return value.
fn statement_value(stmt: Node) -> Option<Node> {
    match stmt.kind_of() {
        "expression_statement" => {
            let e = stmt.named_child(0)?;
            match e.kind_of() {
                "assignment" | "augmented_assignment" => e.field("right"),
                _ => None,
            }
        }
        "return_statement" => stmt.named_child(0),
        _ => None,
    }
}

struct Matcher<'a> {
    p_src: &'a Source,
    t_src: &'a Source,
}

#[derive(Clone, Copy)]
enum Meta<'a> {
    Single(&'a str),
    Sequence(&'a str),
}

/// The expression inside redundant parentheses (`(x)`; not a tuple or a generator).
fn unparenthesized(mut node: Node) -> Node {
    while node.kind_of() == "parenthesized_expression" {
        let mut cursor = node.walk();
        let inner: Vec<Node> = node
            .named_children(&mut cursor)
            .filter(|c| !c.is_extra())
            .collect();
        match inner.as_slice() {
            [one] => node = *one,
            _ => break,
        }
    }
    node
}

/// Whitespace-insensitive text, for comparing bound texts.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl<'a> Matcher<'a> {
    fn meta(&self, p: Node<'a>) -> Option<Meta<'a>> {
        let ident = if p.kind_of() == "expression_statement" && p.named_child_count() == 1 {
            p.named_child(0)?
        } else {
            p
        };
        if ident.kind_of() != "identifier" {
            return None;
        }
        let text = self.p_src.text_of(ident);
        if let Some(name) = text.strip_prefix(SEQUENCE) {
            Some(Meta::Sequence(name))
        } else {
            text.strip_prefix(SINGLE).map(Meta::Single)
        }
    }

    fn bind(&self, b: &mut Bindings, name: &str, text: &str) -> bool {
        if name.is_empty() || name == "_" {
            return true;
        }
        match b.get(name) {
            Some(prev) => squash(prev) == squash(text),
            None => {
                b.insert(name.to_string(), text.to_string());
                true
            }
        }
    }

    /// Children that carry meaning: comments, line continuations and commas dropped.
    fn significant(node: Node<'a>) -> Vec<Node<'a>> {
        let mut cursor = node.walk();
        node.children(&mut cursor)
            .filter(|c| !c.is_extra() && c.kind_of() != "," && c.kind_of() != "line_continuation")
            .collect()
    }

    fn node(&self, p: Node<'a>, t: Node<'a>, b: &mut Bindings) -> bool {
        if let Some(meta) = self.meta(p) {
            let name = match meta {
                Meta::Single(n) | Meta::Sequence(n) => n,
            };
            // In a block, `$X` as a statement matches one whole statement.
            return self.bind(b, name, self.t_src.text_of(t));
        }
        // Parentheses around one expression are layout (ruff format adds them to split
        // a long right-hand side): `x = (f(y))` is `x = f(y)`.
        let (p, t) = (unparenthesized(p), unparenthesized(t));
        if let Some(meta) = self.meta(p) {
            let name = match meta {
                Meta::Single(n) | Meta::Sequence(n) => n,
            };
            return self.bind(b, name, self.t_src.text_of(t));
        }
        if p.kind_of() != t.kind_of() {
            return false;
        }
        if p.child_count() == 0 || matches!(p.kind_of(), "string" | "concatenated_string") {
            return self.p_src.text_of(p) == self.t_src.text_of(t);
        }
        let pc = Self::significant(p);
        let tc = Self::significant(t);
        if p.kind_of() == "argument_list" {
            return self.arguments(t, &pc, &tc, b);
        }
        self.sequence(&pc, &tc, b)
    }

    fn sequence(&self, ps: &[Node<'a>], ts: &[Node<'a>], b: &mut Bindings) -> bool {
        let Some((&first, rest)) = ps.split_first() else {
            return ts.is_empty();
        };
        if let Some(Meta::Sequence(name)) = self.meta(first) {
            for k in 0..=ts.len() {
                let mut trial = b.clone();
                let text = if k == 0 {
                    ""
                } else {
                    &self.t_src.text[ts[0].start_byte()..ts[k - 1].end_byte()]
                };
                if self.bind(&mut trial, name, text) && self.sequence(rest, &ts[k..], &mut trial) {
                    *b = trial;
                    return true;
                }
            }
            return false;
        }
        let Some((&t0, t_rest)) = ts.split_first() else {
            return false;
        };
        let mut trial = b.clone();
        if self.node(first, t0, &mut trial) && self.sequence(rest, t_rest, &mut trial) {
            *b = trial;
            return true;
        }
        false
    }

    /// Arguments: positional ones in order, keyword ones in any order. A `$$$` among the
    /// positional ones also admits keyword arguments the pattern does not name.
    fn arguments(
        &self,
        t_list: Node<'a>,
        ps: &[Node<'a>],
        ts: &[Node<'a>],
        b: &mut Bindings,
    ) -> bool {
        let inner = |v: &[Node<'a>]| -> Vec<Node<'a>> {
            v.iter()
                .copied()
                .filter(|n| n.kind_of() != "(" && n.kind_of() != ")")
                .collect()
        };
        let (ps, ts) = (inner(ps), inner(ts));
        let is_kw = |n: &Node| n.kind_of() == "keyword_argument";
        let (p_kw, p_pos): (Vec<Node>, Vec<Node>) = ps.iter().partition(|n| is_kw(n));
        let (t_kw, t_pos): (Vec<Node>, Vec<Node>) = ts.iter().partition(|n| is_kw(n));
        let open = p_pos
            .iter()
            .any(|n| matches!(self.meta(*n), Some(Meta::Sequence(_))));
        let mut trial = b.clone();
        if !self.sequence(&p_pos, &t_pos, &mut trial) {
            return false;
        }
        let mut used = vec![false; t_kw.len()];
        for pk in &p_kw {
            let pname = pk.field("name").map(|n| self.p_src.text_of(n));
            let found = t_kw.iter().enumerate().find(|(i, tk)| {
                !used[*i] && tk.field("name").map(|n| self.t_src.text_of(n)) == pname
            });
            let Some((i, tk)) = found else { return false };
            let (Some(pv), Some(tv)) = (pk.field("value"), tk.field("value")) else {
                return false;
            };
            if !self.node(pv, tv, &mut trial) {
                return false;
            }
            used[i] = true;
        }
        if !open && used.iter().any(|u| !u) {
            return false;
        }
        // `f($$$ARGS)` binds ARGS to the whole argument text, keywords included.
        if let ([only], true) = (ps.as_slice(), !ts.is_empty())
            && let Some(Meta::Sequence(name)) = self.meta(*only)
            && !name.is_empty()
            && name != "_"
        {
            let first = ts.first().expect("non-empty");
            let last = ts.last().expect("non-empty");
            trial.insert(
                name.to_string(),
                self.t_src.text[first.start_byte()..last.end_byte()].to_string(),
            );
        }
        let _ = t_list;
        *b = trial;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(pattern: &str, code: &str) -> Vec<(usize, Bindings)> {
        let p = Pattern::compile(pattern).unwrap();
        let src = Source::parse(code.to_string());
        let mut out = Vec::new();
        let mut stack = vec![src.root()];
        while let Some(n) = stack.pop() {
            if python::is_statement(n)
                && let Some(b) = p.match_statement(&src, n)
            {
                out.push((n.start_position().row + 1, b));
            }
            let mut c = n.walk();
            stack.extend(n.named_children(&mut c));
        }
        out.sort_by_key(|x| x.0);
        out
    }

    #[test]
    fn statement_with_metavariables_binds_text() {
        let code = "for i in range(3):\n    self._forward_chunk(0)\n    self._forward_chunk(0, recv=False)\n";
        let hits = find("self._forward_chunk($X)", code);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, 2);
        assert_eq!(hits[0].1["X"], "0");
    }

    #[test]
    fn keyword_order_formatting_and_comments_do_not_matter() {
        let code = "f(\n    1,  # one\n    b=2,\n    a=3,\n)\n";
        assert_eq!(find("f(1, a=3, b=2)", code).len(), 1);
        assert_eq!(
            find("f(1, a=3)", code).len(),
            0,
            "an unnamed keyword needs $$$"
        );
        assert_eq!(find("f($$$, a=3)", code).len(), 1);
        assert_eq!(find("f(2, a=3, b=2)", code).len(), 0);
    }

    #[test]
    fn sequence_metavariable_binds_whole_argument_text() {
        let hits = find(
            "$OUT = self.mlp.experts($$$ARGS)",
            "outs = self.mlp.experts(x, offs, ks=ks)\n",
        );
        assert_eq!(hits[0].1["ARGS"], "x, offs, ks=ks");
        assert_eq!(hits[0].1["OUT"], "outs");
    }

    #[test]
    fn bare_expression_matches_assignment_and_return_values() {
        let code = "a, b = prepare_dispatch(x, y)\nreturn prepare_dispatch(z)\nprint(prepare_dispatch(w))\n";
        let rows: Vec<usize> = find("prepare_dispatch($$$)", code)
            .into_iter()
            .map(|h| h.0)
            .collect();
        assert_eq!(rows, vec![1, 2]);
    }

    #[test]
    fn headers_compare_only_the_header() {
        let code = "class A:\n    def step(self):\n        for j in range(step_1):\n            pass\n            extra()\n        for j in range(step_2):\n            pass\n";
        let hits = find("for $I in range(step_1)", code);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].1["I"], "j");
        assert_eq!(find("def step", code).len(), 1);
        assert_eq!(find("class A", code).len(), 1);
        assert_eq!(find("class B", code).len(), 0);
    }

    #[test]
    fn parentheses_around_an_expression_are_layout() {
        let code = "a, b = (\n    scatter(x, y)\n)\nc = (d)\n";
        let hits = find("$A, $$$ = scatter($$$)", code);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].1["A"], "a");
        assert_eq!(find("c = d", code).len(), 1);
        assert_eq!(find("($X, $Y) = $_", "(a, b) = 1\n").len(), 1);
    }

    #[test]
    fn same_metavariable_must_bind_equal_text() {
        assert_eq!(find("$A = $A + 1", "x = x + 1\nx = y + 1\n").len(), 1);
    }

    #[test]
    fn rejects_invalid_patterns() {
        assert!(Pattern::compile("f(").is_err());
        assert!(Pattern::compile("a = 1\nb = 2").is_err());
    }
}
