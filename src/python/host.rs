//! The file inserted code goes into, as the name checks see it: where the host binds a
//! name in the scopes around the place the code lands, found only for the names the code
//! asks about (by their occurrences in those scopes' text, each one's construct read from
//! its place in the tree), together with what other inserted code binds there and the
//! statements the edits take out. `names` reads the inserted code itself.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use tree_sitter::Node;

use super::builtins::BUILTINS;
use super::names::{MODULE_KEY, Resolution, ancestors, shares_loop};
use super::{KindOf, Source};

/// Where inserted code lands in a file, as the name checks see it: the file is read as
/// it is, and the inserted code on its own (see `Host`).
#[derive(Debug, Clone)]
pub struct Point {
    /// A byte of the original text inside the scope the code lands in (the anchor
    /// statement's start, a statement of the body it goes into).
    pub scope_at: usize,
    /// Where the code goes in the original text, then its place among the inserted code
    /// that goes to the same byte: bindings of the host before `order.0` are earlier.
    pub order: (usize, usize),
}

/// A file as the name checks of inserted code see it: the original text's scopes, read
/// only where inserted code asks (a name is looked up in the scopes around the place
/// the code goes, by its occurrences in their text), the names the inserted code binds
/// at the level of those scopes, and the statements it replaces (whose bindings are gone).
pub struct Host<'a> {
    src: &'a Source,
    /// Scope key (the scope node's start byte, or `MODULE_KEY`) -> name -> the order keys
    /// of inserted bindings.
    inserted: HashMap<usize, HashMap<String, Vec<(usize, usize)>>>,
    replaced: Vec<Range<usize>>,
    /// Module-level bindings (imports, assignments, definitions at the top level).
    module: HashMap<String, Vec<usize>>,
    star_import: bool,
    /// (scope key, name) -> where the host binds it in that scope, found on first ask.
    found: std::cell::RefCell<HashMap<(usize, String), Vec<usize>>>,
    globals: std::cell::RefCell<HashMap<usize, HashSet<String>>>,
    /// Byte -> the scopes around it and its path from the root (every read of one piece
    /// of inserted code asks for the same place).
    chains: std::cell::RefCell<HashMap<usize, std::rc::Rc<Chain<'a>>>>,
}

/// The scopes around a place, innermost first, and the path from the root to it.
type Chain<'a> = (Vec<ScopeRef<'a>>, Vec<Node<'a>>);

/// One scope around a place: its key and its node.
type ScopeRef<'a> = (usize, Node<'a>);

impl<'a> Host<'a> {
    /// The host `src`, whose statements in `replaced` inserted code takes out.
    pub fn new(src: &'a Source, replaced: Vec<Range<usize>>) -> Self {
        let mut module: HashMap<String, Vec<usize>> = HashMap::new();
        let mut star_import = false;
        // The module's own level: its statements and the blocks of its compound
        // statements, not the bodies of definitions (their names bind here).
        let mut stack: Vec<Node> = vec![src.root()];
        while let Some(n) = stack.pop() {
            super::binds::for_each_bound(n, &mut |ident| {
                module
                    .entry(src.text_of(ident).to_string())
                    .or_default()
                    .push(ident.start_byte());
            });
            match n.kind_of() {
                "function_definition" | "class_definition" | "lambda" => continue,
                k if super::binds::is_comprehension(k) => continue,
                "import_from_statement" => {
                    let mut c = n.walk();
                    star_import |= n
                        .named_children(&mut c)
                        .any(|x| x.kind_of() == "wildcard_import");
                    continue;
                }
                _ => {}
            }
            let mut c = n.walk();
            stack.extend(n.named_children(&mut c));
        }
        Host {
            src,
            inserted: HashMap::new(),
            replaced,
            module,
            star_import,
            found: Default::default(),
            globals: Default::default(),
            chains: Default::default(),
        }
    }

    fn node_at(&self, at: usize) -> Node<'a> {
        let root = self.src.root();
        root.descendant_for_byte_range(at, at).unwrap_or(root)
    }

    /// The scopes around byte `at` of the original, innermost first (functions, lambdas
    /// and comprehensions; a class body only for code directly in it), and the path of
    /// nodes from the root to it.
    fn chain(&self, at: usize) -> std::rc::Rc<Chain<'a>> {
        if let Some(c) = self.chains.borrow().get(&at) {
            return std::rc::Rc::clone(c);
        }
        let c = std::rc::Rc::new(self.chain_uncached(at));
        self.chains.borrow_mut().insert(at, std::rc::Rc::clone(&c));
        c
    }

    fn chain_uncached(&self, at: usize) -> Chain<'a> {
        let node = self.node_at(at);
        let mut path = ancestors(self.src.root(), node);
        path.push(node);
        let mut chain = Vec::new();
        let mut function_seen = false;
        for n in path.iter().rev() {
            let kind = n.kind_of();
            let in_body = || {
                n.field("body")
                    .is_some_and(|b| b.start_byte() <= at && at < b.end_byte())
            };
            match kind {
                "function_definition" if in_body() => {
                    function_seen = true;
                    chain.push((n.start_byte(), *n));
                }
                "lambda" if in_body() => chain.push((n.start_byte(), *n)),
                "class_definition" if in_body() && !function_seen => {
                    chain.push((n.start_byte(), *n))
                }
                k if super::binds::is_comprehension(k) => chain.push((n.start_byte(), *n)),
                _ => {}
            }
        }
        (chain, path)
    }

    /// Inserted code at `point` binds `name` at the level of the scope it lands in (or,
    /// with `module`, at the module's: a `global` in a function of its own).
    pub fn bind(&mut self, point: &Point, name: &str, module: bool) {
        let key = if module {
            MODULE_KEY
        } else {
            self.chain(point.scope_at)
                .0
                .first()
                .map_or(MODULE_KEY, |(k, _)| *k)
        };
        self.inserted
            .entry(key)
            .or_default()
            .entry(name.to_string())
            .or_default()
            .push(point.order);
    }

    /// Where the host's own code binds `name` in `scope` itself (not in scopes inside
    /// it): found by the name's occurrences in the scope's text, each one's construct
    /// read from its place in the tree.
    fn binds_in(&self, scope: Node<'a>, name: &str) -> Vec<usize> {
        let key = (scope.start_byte(), name.to_string());
        if let Some(v) = self.found.borrow().get(&key) {
            return v.clone();
        }
        let src = self.src;
        let mut out = Vec::new();
        for at in super::word_occurrences(&src.text, scope.byte_range(), name) {
            let Some(ident) = scope.descendant_for_byte_range(at, at + name.len()) else {
                continue;
            };
            if ident.kind_of() != "identifier" || ident.start_byte() != at {
                continue;
            }
            // The path from the scope down to the occurrence, the scope first.
            let mut path = ancestors(scope, ident);
            if path.first().is_none_or(|n| n.id() != scope.id()) {
                path.insert(0, scope);
            }
            if self.binds_here(scope, &path, ident) {
                out.push(at);
            }
        }
        self.found.borrow_mut().insert(key, out.clone());
        out
    }

    /// Whether the identifier `ident` (below `path`, which starts at `scope`) is a
    /// binding the host makes in `scope` itself.
    fn binds_here(&self, scope: Node<'a>, path: &[Node<'a>], ident: Node<'a>) -> bool {
        // A parameter of the scope's own function or lambda.
        if matches!(scope.kind_of(), "function_definition" | "lambda")
            && let Some(params) = scope.field("parameters")
            && params.byte_range().contains(&ident.start_byte())
        {
            let is_name = |p: Node| {
                p.id() == ident.id()
                    || p.field("name").is_some_and(|n| n.id() == ident.id())
                    || p.named_child(0).is_some_and(|n| {
                        n.id() == ident.id()
                            || n.named_child(0).is_some_and(|m| m.id() == ident.id())
                    })
            };
            let mut c = params.walk();
            return params.named_children(&mut c).any(is_name);
        }
        // The construct that binds it: the innermost node along the path that names it.
        for (depth, c) in path.iter().enumerate().rev() {
            let mut names_it = false;
            super::binds::for_each_bound(*c, &mut |b| names_it |= b.id() == ident.id());
            if !names_it {
                continue;
            }
            // Where the binding lands: the innermost scope above the construct (a `def`
            // or `class` name binds outside its definition; a walrus skips
            // comprehensions), which must be `scope` itself.
            let walrus = c.kind_of() == "named_expression";
            let landing = path[..depth].iter().rev().find(|n| {
                let k = n.kind_of();
                super::binds::is_scope(k) && !(walrus && super::binds::is_comprehension(k))
            });
            return landing.is_some_and(|l| l.id() == scope.id());
        }
        false
    }

    fn declares_global(&self, scope: Node<'a>, name: &str) -> bool {
        if scope.kind_of() != "function_definition" {
            return false;
        }
        let key = scope.start_byte();
        if let Some(g) = self.globals.borrow().get(&key) {
            return g.contains(name);
        }
        let g = super::binds::declared_global(self.src, scope);
        let has = g.contains(name);
        self.globals.borrow_mut().insert(key, g);
        has
    }

    fn host_offsets(&self, scope: Option<Node<'a>>, name: &str) -> Vec<usize> {
        let all = match scope {
            Some(s) => self.binds_in(s, name),
            None => self.module.get(name).cloned().unwrap_or_default(),
        };
        all.into_iter()
            .filter(|o| !self.replaced.iter().any(|r| r.contains(o)))
            .collect()
    }

    fn inserted_orders(&self, key: usize, name: &str) -> &[(usize, usize)] {
        self.inserted
            .get(&key)
            .and_then(|s| s.get(name))
            .map_or(&[], |v| v.as_slice())
    }

    /// Whether `name`, read by inserted code at `point`, is bound there: by the host's
    /// code, by inserted code before it, as a builtin. `in_own_function`: the read runs
    /// later, in a function the inserted code defines.
    pub fn resolve(&self, name: &str, point: &Point, in_own_function: bool) -> Resolution {
        let chain_and_path = self.chain(point.scope_at);
        let (chain, ancestors) = &*chain_and_path;
        for (key, scope_node) in chain {
            if self.declares_global(*scope_node, name) {
                break;
            }
            let inserted = self.inserted_orders(*key, name);
            let host = self.host_offsets(Some(*scope_node), name);
            if host.is_empty() && inserted.is_empty() {
                continue;
            }
            if matches!(
                scope_node.kind_of(),
                "function_definition" | "class_definition"
            ) {
                let earlier = host.iter().any(|&o| o < point.order.0)
                    || inserted.iter().any(|&o| o < point.order);
                let in_shared_loop = host
                    .iter()
                    .copied()
                    .chain(inserted.iter().map(|o| o.0))
                    .any(|o| shares_loop(ancestors, o, *scope_node));
                if earlier || in_shared_loop {
                    return Resolution::Bound;
                }
                if scope_node.kind_of() == "class_definition" {
                    continue;
                }
                return Resolution::BoundLater;
            }
            return Resolution::Bound;
        }
        let in_function = in_own_function
            || chain
                .iter()
                .any(|(_, n)| n.kind_of() == "function_definition");
        let host = self.host_offsets(None, name);
        let inserted = self.inserted_orders(MODULE_KEY, name);
        if !host.is_empty() || !inserted.is_empty() {
            // Function bodies run after the module is loaded; module-level code runs in order.
            let earlier = host.iter().any(|&o| o < point.order.0)
                || inserted.iter().any(|&o| o < point.order);
            return if in_function || earlier {
                Resolution::Bound
            } else {
                Resolution::BoundLater
            };
        }
        if BUILTINS.contains(&name) || self.star_import {
            return Resolution::Bound;
        }
        Resolution::Unbound
    }
}
