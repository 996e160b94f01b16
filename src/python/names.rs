//! Which names a piece of code reads, and whether each is bound where it is read.
//!
//! The codemod engine promises that inserted code never reads a name that does not exist
//! at its insertion point. This module answers that for inserted code parsed on its own
//! (`code_facts`: what it reads before binding it, and binds) against the file it goes into
//! (`python::host`: the original file's scopes at the insertion point, with what other
//! inserted code binds there), and for any byte range of a parsed file (`unbound_reads`), with Python's
//! scoping rules simplified to what static text can show: function scopes
//! (parameters, assignments, imports, loop and `with` targets, nested definitions),
//! enclosing functions, the module, and the builtins. Class bodies are skipped by methods,
//! as in Python.

use super::KindOf;
use std::collections::{HashMap, HashSet};
use std::ops::Range;

use tree_sitter::Node;

use super::Source;
use super::builtins::BUILTINS;

/// A name read in the examined range that is not bound where it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnboundRead {
    pub name: String,
    /// Byte offset of the read.
    pub at: usize,
    /// True when the name is bound in the enclosing function, but only after this read.
    pub bound_later: bool,
}

/// Names bound at module level (imports, assignments, definitions), in any order.
pub fn module_bindings(src: &Source) -> HashSet<String> {
    let analysis = Analysis::new(src, &[]);
    analysis
        .scopes
        .get(&MODULE_KEY)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Every name read in `range` that is not bound where it is read.
pub fn unbound_reads(src: &Source, range: Range<usize>) -> Vec<UnboundRead> {
    let ranges = [range];
    let analysis = Analysis::new(src, &ranges);
    reads_in(src, &analysis, ranges[0].clone())
}

fn reads_in(src: &Source, analysis: &Analysis, range: Range<usize>) -> Vec<UnboundRead> {
    let mut out = Vec::new();
    let root = src.root();
    // Start from the smallest node holding the whole range, not from the root.
    let top = root
        .descendant_for_byte_range(range.start, range.end.saturating_sub(1).max(range.start))
        .unwrap_or(root);
    // The ancestors of every node visited are kept on a path (root first), found once for
    // `top` and then by the walk itself: `Node::parent` walks down from the root each time.
    let mut path = ancestors(root, top);
    visit_reads(src, analysis, &range, top, &mut path, &mut out);
    out.sort_by_key(|r| r.at);
    out
}

/// The ancestors of `node` in its tree, the root first.
pub(super) fn ancestors<'a>(root: Node<'a>, node: Node<'a>) -> Vec<Node<'a>> {
    let mut path = Vec::new();
    if node.id() == root.id() {
        return path;
    }
    let mut cur = root;
    loop {
        path.push(cur);
        match cur.child_with_descendant(node) {
            Some(next) if next.id() == node.id() => return path,
            Some(next) => cur = next,
            None => break,
        }
    }
    // Not reached from the root (never expected): ask each node for its parent.
    let mut path = Vec::new();
    let mut cur = node.parent();
    while let Some(p) = cur {
        path.push(p);
        cur = p.parent();
    }
    path.reverse();
    path
}

/// Every read in `range` below `top` (whose ancestors, the root first, are `path`), in
/// source order. One cursor walks the whole subtree: a cursor per node would allocate
/// and free its stack at every node of inserted code and host alike.
fn visit_reads<'a>(
    src: &Source,
    analysis: &Analysis<'a>,
    range: &Range<usize>,
    top: Node<'a>,
    path: &mut Vec<Node<'a>>,
    out: &mut Vec<UnboundRead>,
) {
    let mut cursor = top.walk();
    loop {
        let node = cursor.node();
        let outside = node.end_byte() <= range.start || node.start_byte() >= range.end;
        let mut descend = !outside;
        if !outside && node.kind_of() == "identifier" && range.contains(&node.start_byte()) {
            descend = false;
            if analysis.is_read(node, path.last().copied()) {
                let name = src.text_of(node);
                let bound_later = match analysis.resolve(node, name, path) {
                    Resolution::Bound => None,
                    Resolution::BoundLater => Some(true),
                    Resolution::Unbound => Some(false),
                };
                if let Some(bound_later) = bound_later {
                    out.push(UnboundRead {
                        name: name.to_string(),
                        at: node.start_byte(),
                        bound_later,
                    });
                }
            }
        }
        if descend && cursor.goto_first_child() {
            path.push(node);
            continue;
        }
        // The next node: a sibling, or the sibling of the nearest ancestor that has one.
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return;
            }
            path.pop();
        }
    }
}

/// Whether a name is bound where it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    Bound,
    /// Bound in the scope that reads it, but only after the read.
    BoundLater,
    Unbound,
}

/// A read in inserted code that the code itself does not bind before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenRead {
    pub name: String,
    /// Byte offset in the inserted code's own text.
    pub at: usize,
    /// The code binds it, but only after this read.
    pub bound_later: bool,
    /// The read is inside a function the inserted code defines (it runs later).
    pub in_own_function: bool,
}

/// What inserted code (parsed on its own, as a module) reads without binding it first,
/// and what it binds at its own top level: one analysis for both.
pub struct CodeFacts {
    /// Every read the code does not bind before it, in order.
    pub open: Vec<OpenRead>,
    /// Its top-level bindings: (name, offset, whether it binds at the module's level
    /// through a `global` of a function of its own).
    pub level: Vec<(String, usize, bool)>,
}

/// The facts of `code`.
pub fn code_facts(code: &Source) -> CodeFacts {
    let whole = std::slice::from_ref(&(0..code.text.len())).to_vec();
    let analysis = Analysis::new(code, &whole);
    let open = reads_of(code, &analysis, &whole);
    let mut level: Vec<(String, usize, bool)> = Vec::new();
    if let Some(top) = analysis.scopes.get(&MODULE_KEY) {
        for (name, offsets) in top {
            level.extend(offsets.iter().map(|o| (name.clone(), *o, false)));
        }
    }
    for (key, names) in &analysis.globals {
        if *key == MODULE_KEY {
            continue;
        }
        for name in names {
            if let Some(offsets) = analysis.scopes.get(key).and_then(|s| s.get(name)) {
                level.extend(offsets.iter().map(|o| (name.clone(), *o, true)));
            }
        }
    }
    level.sort_by_key(|(_, at, _)| *at);
    CodeFacts { open, level }
}

fn reads_of(code: &Source, analysis: &Analysis, ranges: &[Range<usize>]) -> Vec<OpenRead> {
    let mut out = Vec::new();
    for range in ranges {
        for r in reads_in(code, analysis, range.clone()) {
            // The scopes around the read, from its offset (no need to find its node).
            let in_own_function = analysis
                .scope_chain(r.at)
                .iter()
                .any(|(_, n)| n.kind_of() == "function_definition");
            out.push(OpenRead {
                name: r.name,
                at: r.at,
                bound_later: r.bound_later,
                in_own_function,
            });
        }
    }
    out
}

/// Per-file facts: which identifiers are binding occurrences, and for each scope the
/// offsets at which each name is bound.
struct Analysis<'a> {
    src: &'a Source,
    /// Start bytes of identifiers that bind (targets, parameters, imported names, ...)
    /// or that are not names at all (attribute names, keyword-argument names).
    not_reads: HashSet<usize>,
    /// Scope node start byte -> name -> offsets where bound. The module is keyed by 0
    /// under `module_key`.
    scopes: HashMap<usize, HashMap<String, Vec<usize>>>,
    /// Scope node start byte -> names declared `global` there.
    globals: HashMap<usize, HashSet<String>>,
    star_import: bool,
    /// Where each scope's own code lies: a function's or class's body, a lambda's body, a
    /// whole comprehension. Parameter defaults and decorators lie outside, as in Python.
    spans: Vec<ScopeSpan<'a>>,
    focus: &'a [Range<usize>],
    /// A comprehension's scope key -> the scope around it (where a walrus in it binds).
    comprehension_outer: HashMap<usize, usize>,
    /// Cursors free for the walk to reuse.
    cursors: Vec<tree_sitter::TreeCursor<'a>>,
}

struct ScopeSpan<'a> {
    range: Range<usize>,
    node: Node<'a>,
}

pub(super) const MODULE_KEY: usize = usize::MAX;

impl<'a> Analysis<'a> {
    /// Analyse the module level, and the functions that hold one of `focus` (only their
    /// names can matter to reads there; other bodies are skipped).
    fn new(src: &'a Source, focus: &'a [Range<usize>]) -> Self {
        let mut a = Analysis {
            src,
            focus,
            not_reads: HashSet::new(),
            scopes: HashMap::new(),
            globals: HashMap::new(),
            star_import: false,
            spans: Vec::new(),
            comprehension_outer: HashMap::new(),
            cursors: Vec::new(),
        };
        a.collect(src.root(), MODULE_KEY);
        a
    }

    fn bind(&mut self, scope: usize, ident: Node) {
        let name = self.src.text_of(ident).to_string();
        self.not_reads.insert(ident.start_byte());
        self.scopes
            .entry(scope)
            .or_default()
            .entry(name)
            .or_default()
            .push(ident.start_byte());
    }

    /// Mark every identifier bound by an assignment-like target.
    fn bind_target(&mut self, scope: usize, target: Node) {
        match target.kind_of() {
            "identifier" => self.bind(scope, target),
            // `a.b = x` and `a[i] = x` read `a`; they bind nothing.
            "attribute" => {
                if let Some(attr) = target.field("attribute") {
                    self.not_reads.insert(attr.start_byte());
                }
            }
            "subscript" => {}
            _ => {
                let mut cursor = target.walk();
                let children: Vec<Node> = target.named_children(&mut cursor).collect();
                for c in children {
                    self.bind_target(scope, c);
                }
            }
        }
    }

    fn bind_parameters(&mut self, scope: usize, params: Node) {
        let mut cursor = params.walk();
        let children: Vec<Node> = params.named_children(&mut cursor).collect();
        for p in children {
            match p.kind_of() {
                "identifier" => self.bind(scope, p),
                "typed_parameter" | "list_splat_pattern" | "dictionary_splat_pattern" => {
                    let mut c2 = p.walk();
                    let first = p
                        .named_children(&mut c2)
                        .find(|c| c.kind_of() == "identifier");
                    if let Some(id) = first {
                        self.bind(scope, id);
                    } else {
                        // `*args: T` nests the splat inside the typed parameter.
                        let mut c3 = p.walk();
                        let inner: Vec<Node> = p.named_children(&mut c3).collect();
                        for i in inner {
                            if matches!(
                                i.kind_of(),
                                "list_splat_pattern" | "dictionary_splat_pattern"
                            ) {
                                self.bind_parameters_one(scope, i);
                            }
                        }
                    }
                }
                "default_parameter" | "typed_default_parameter" => {
                    if let Some(name) = p.field("name") {
                        self.bind(scope, name);
                    }
                }
                _ => {}
            }
        }
    }

    fn bind_parameters_one(&mut self, scope: usize, splat: Node) {
        let mut cursor = splat.walk();
        let first = splat
            .named_children(&mut cursor)
            .find(|c| c.kind_of() == "identifier");
        if let Some(id) = first {
            self.bind(scope, id);
        }
    }

    /// Walk `node`, recording bindings into `scope`; nested scopes get their own key.
    fn collect(&mut self, node: Node<'a>, scope: usize) {
        if node.child_count() == 0 {
            return;
        }
        let body_span = |n: Node<'a>| {
            n.field("body").map(|b| ScopeSpan {
                range: b.byte_range(),
                node: n,
            })
        };
        match node.kind_of() {
            "function_definition" | "class_definition" | "lambda" => {
                self.spans.extend(body_span(node))
            }
            "list_comprehension"
            | "set_comprehension"
            | "dictionary_comprehension"
            | "generator_expression" => self.spans.push(ScopeSpan {
                range: node.byte_range(),
                node,
            }),
            _ => {}
        }
        match node.kind_of() {
            "function_definition" => {
                if let Some(name) = node.field("name") {
                    self.bind(scope, name);
                }
                let inner = node.start_byte();
                self.scopes.entry(inner).or_default();
                // Defaults, annotations and decorators belong to the outer scope; the
                // parameter names to the inner one.
                if let Some(params) = node.field("parameters") {
                    self.bind_parameters(inner, params);
                    self.collect_children(params, scope);
                }
                if let Some(ret) = node.field("return_type") {
                    self.collect(ret, scope);
                }
                if let Some(body) = node.field("body") {
                    let r = body.byte_range();
                    if self
                        .focus
                        .iter()
                        .any(|f| f.start < r.end && r.start < f.end)
                    {
                        self.collect(body, inner);
                    }
                }
                return;
            }
            "class_definition" => {
                if let Some(name) = node.field("name") {
                    self.bind(scope, name);
                }
                if let Some(sup) = node.field("superclasses") {
                    self.collect(sup, scope);
                }
                // A class body is its own scope, invisible to the methods inside it.
                if let Some(body) = node.field("body") {
                    self.collect(body, node.start_byte());
                }
                return;
            }
            "lambda" => {
                let inner = node.start_byte();
                if let Some(params) = node.field("parameters") {
                    self.bind_parameters(inner, params);
                }
                if let Some(body) = node.field("body") {
                    self.collect(body, inner);
                }
                return;
            }
            "list_comprehension"
            | "set_comprehension"
            | "dictionary_comprehension"
            | "generator_expression" => {
                let inner = node.start_byte();
                self.comprehension_outer.insert(inner, scope);
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for c in &children {
                    if c.kind_of() == "for_in_clause"
                        && let Some(left) = c.field("left")
                    {
                        self.bind_target(inner, left);
                    }
                }
                for c in children {
                    self.collect(c, inner);
                }
                return;
            }
            "assignment" | "augmented_assignment" => {
                if let Some(left) = node.field("left") {
                    self.bind_target(scope, left);
                }
            }
            "for_statement" | "for_in_clause" => {
                if let Some(left) = node.field("left") {
                    self.bind_target(scope, left);
                }
            }
            "as_pattern_target" => self.bind_target(scope, node),
            "named_expression" => {
                // A walrus in a comprehension binds in the scope around it.
                let mut target = scope;
                while let Some(outer) = self.comprehension_outer.get(&target) {
                    target = *outer;
                }
                if let Some(name) = node.field("name") {
                    self.bind(target, name);
                }
            }
            "except_clause" => {
                // Older grammars put the alias directly on the clause.
                if let Some(alias) = node.field("alias") {
                    self.bind_target(scope, alias);
                }
            }
            "import_statement" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for c in children {
                    self.bind_import_name(scope, c, true);
                }
                return;
            }
            "import_from_statement" | "future_import_statement" => {
                let module = node.field("module_name").map(|m| m.start_byte());
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for c in children {
                    if Some(c.start_byte()) == module && c.kind_of() != "aliased_import" {
                        self.mark_all_not_reads(c);
                        continue;
                    }
                    match c.kind_of() {
                        "wildcard_import" => self.star_import = true,
                        "dotted_name" | "aliased_import" => self.bind_import_name(scope, c, false),
                        _ => self.mark_all_not_reads(c),
                    }
                }
                return;
            }
            "global_statement" | "nonlocal_statement" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for c in children {
                    if c.kind_of() == "identifier" {
                        self.not_reads.insert(c.start_byte());
                        if node.kind_of() == "global_statement" {
                            let name = self.src.text_of(c).to_string();
                            self.globals.entry(scope).or_default().insert(name);
                        }
                    }
                }
                return;
            }
            "attribute" => {
                if let Some(attr) = node.field("attribute") {
                    self.not_reads.insert(attr.start_byte());
                }
            }
            "keyword_argument" => {
                if let Some(name) = node.field("name") {
                    self.not_reads.insert(name.start_byte());
                }
            }
            _ => {}
        }
        self.collect_children(node, scope);
    }

    fn collect_children(&mut self, node: Node<'a>, scope: usize) {
        // Cursors are reused (a new one allocates its stack): one per level of the walk.
        let mut cursor = match self.cursors.pop() {
            Some(mut c) => {
                c.reset(node);
                c
            }
            None => node.walk(),
        };
        if cursor.goto_first_child() {
            loop {
                self.collect(cursor.node(), scope);
                if !cursor.goto_next_sibling() {
                    break;
                }
            }
        }
        self.cursors.push(cursor);
    }

    fn mark_all_not_reads(&mut self, node: Node) {
        if node.kind_of() == "identifier" {
            self.not_reads.insert(node.start_byte());
        }
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        for c in children {
            self.mark_all_not_reads(c);
        }
    }

    /// `import a.b` binds `a`; `import a.b as c` and `from m import b as c` bind `c`;
    /// `from m import b` binds `b`.
    fn bind_import_name(&mut self, scope: usize, node: Node, plain_import: bool) {
        match node.kind_of() {
            "aliased_import" => {
                if let Some(name) = node.field("name") {
                    self.mark_all_not_reads(name);
                }
                if let Some(alias) = node.field("alias") {
                    self.bind(scope, alias);
                }
            }
            "dotted_name" => {
                self.mark_all_not_reads(node);
                let mut cursor = node.walk();
                let parts: Vec<Node> = node.named_children(&mut cursor).collect();
                let bound = if plain_import {
                    parts.first()
                } else {
                    parts.last()
                };
                if let Some(id) = bound {
                    self.bind(scope, *id);
                }
            }
            _ => self.mark_all_not_reads(node),
        }
    }

    /// `parent` is the identifier's parent node.
    fn is_read(&self, ident: Node, parent: Option<Node>) -> bool {
        if self.not_reads.contains(&ident.start_byte()) {
            return false;
        }
        // Identifiers in a format spec (`{x:>{width}}` aside) or a keyword are not names.
        !matches!(parent.map(|p| p.kind_of()), Some("format_specifier"))
    }

    /// Scope chain of the node starting at `at`, innermost first: function, lambda and
    /// comprehension scopes, with class bodies included only when the node sits directly
    /// in them.
    fn scope_chain(&self, at: usize) -> Vec<(usize, Node<'a>)> {
        let mut inside: Vec<&ScopeSpan<'a>> = self
            .spans
            .iter()
            .filter(|s| s.range.contains(&at))
            .collect();
        inside.sort_by_key(|s| std::cmp::Reverse(s.range.start));
        let mut chain = Vec::with_capacity(inside.len());
        let mut function_seen = false;
        for span in inside {
            match span.node.kind_of() {
                "function_definition" => {
                    function_seen = true;
                    chain.push((span.node.start_byte(), span.node));
                }
                // A class body is visible only to code directly in it, not to its methods.
                "class_definition" if function_seen => {}
                _ => chain.push((span.node.start_byte(), span.node)),
            }
        }
        chain
    }

    /// `ancestors` are the read's ancestors, the root first.
    fn resolve(&self, read: Node<'a>, name: &str, ancestors: &[Node<'a>]) -> Resolution {
        let at = read.start_byte();
        let chain = self.scope_chain(at);
        for &(key, scope_node) in &chain {
            if self.globals.get(&key).is_some_and(|g| g.contains(name)) {
                break;
            }
            let Some(offsets) = self.scopes.get(&key).and_then(|s| s.get(name)) else {
                continue;
            };
            if matches!(
                scope_node.kind_of(),
                "function_definition" | "class_definition"
            ) {
                let earlier = offsets.iter().any(|&o| o < at);
                let in_shared_loop = offsets
                    .iter()
                    .any(|&o| shares_loop(ancestors, o, scope_node));
                return if earlier || in_shared_loop {
                    Resolution::Bound
                } else if scope_node.kind_of() == "class_definition" {
                    continue;
                } else {
                    Resolution::BoundLater
                };
            }
            return Resolution::Bound;
        }
        let in_function = chain
            .iter()
            .any(|(_, n)| n.kind_of() == "function_definition");
        if let Some(offsets) = self.scopes.get(&MODULE_KEY).and_then(|s| s.get(name)) {
            // Function bodies run after the module is loaded; module-level code runs in order.
            if in_function || offsets.iter().any(|&o| o < at) {
                return Resolution::Bound;
            }
            return Resolution::BoundLater;
        }
        if BUILTINS.contains(&name) || self.star_import {
            return Resolution::Bound;
        }
        Resolution::Unbound
    }
}

/// Whether the binding at `offset` and the read (whose ancestors, the root first, are
/// `ancestors`) share a loop inside `scope`, so that a later binding in the loop body is
/// visible on the next iteration.
pub(super) fn shares_loop(ancestors: &[Node], offset: usize, scope: Node) -> bool {
    for n in ancestors.iter().rev() {
        if n.id() == scope.id() {
            return false;
        }
        if matches!(n.kind_of(), "for_statement" | "while_statement")
            && n.byte_range().contains(&offset)
        {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unbound(code: &str, marker: &str) -> Vec<String> {
        let start = code.find(marker).expect("marker in code");
        let src = Source::parse(code.to_string());
        unbound_reads(&src, start..code.len())
            .into_iter()
            .map(|r| {
                if r.bound_later {
                    format!("{}(later)", r.name)
                } else {
                    r.name
                }
            })
            .collect()
    }

    #[test]
    fn parameters_locals_imports_and_builtins_are_bound() {
        let code = "import torch\nfrom a import b as c\n\ndef f(x, *args, y: int = 1, **kw):\n    z = 1\n    #HERE\n    print(x, args, y, kw, z, c, torch.cuda, len)\n";
        assert!(unbound(code, "#HERE").is_empty());
    }

    #[test]
    fn reports_missing_and_later_names() {
        let code = "def f():\n    #HERE\n    print(ctx.rank, w)\n    w = 2\n";
        assert_eq!(unbound(code, "#HERE"), vec!["ctx", "w(later)"]);
    }

    #[test]
    fn loop_carried_and_comprehension_names() {
        let code = "def f(n):\n    for i in range(n):\n        #HERE\n        if i:\n            print(_mod)\n        import os as _mod\n    s = sum(t * 2 for t in range(n))\n    g = lambda u: u\n";
        assert!(unbound(code, "#HERE").is_empty());
    }

    #[test]
    fn attribute_and_keyword_names_are_not_reads() {
        let code = "def f(a):\n    #HERE\n    a.missing(flush=True)\n";
        assert!(unbound(code, "#HERE").is_empty());
    }

    #[test]
    fn methods_do_not_see_class_scope() {
        let code = "class A:\n    k = 1\n\n    def m(self):\n        #HERE\n        return k\n";
        assert_eq!(unbound(code, "#HERE"), vec!["k"]);
    }

    #[test]
    fn fstring_interpolations_are_reads() {
        let code = "def f(a):\n    #HERE\n    print(f\"{a:.2f} {missing}\")\n";
        assert_eq!(unbound(code, "#HERE"), vec!["missing"]);
    }
}
