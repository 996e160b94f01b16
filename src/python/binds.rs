//! Which names inserted code binds in its host's scope, and whether the host uses them.
//!
//! Inserted code must bind only names of its own. Binding a name that the host function
//! (or module) binds or reads changes the host: a later read sees the inserted value, an
//! earlier read of a global becomes an unbound local, a loop variable is overwritten. A
//! binding inserted code (parsed on its own) makes at the level of the scope it lands in is
//! a `LevelBinding` (found by `names::code_facts`: assignment and loop targets,
//! `with`/`except` aliases, imports, `def`/`class` names, walrus targets, `global`s of its
//! own functions); this module says whether the host's own code uses a name anywhere in
//! that scope (`HostUses`,
//! nested functions and comprehensions included, so closures count). Names bound inside
//! scopes the inserted code opens itself (its functions, lambdas, comprehensions) are its
//! own. What a replaced statement bound (`bound_names`) it may bind again.

use super::KindOf;
use std::collections::{HashMap, HashSet};
use std::ops::Range;

use tree_sitter::Node;

use super::Source;

/// Names bound anywhere in `range` of `src` (any scope): what a replaced statement bound.
pub fn bound_names(src: &Source, range: Range<usize>) -> HashSet<String> {
    let mut out = HashSet::new();
    let spans = Spans::new(std::slice::from_ref(&range));
    walk_bindings(src.root(), &spans, &mut |ident, _| {
        out.insert(src.text_of(ident).to_string());
    });
    out
}

/// A binding inserted code makes at the level of the scope it lands in (not inside a
/// function, lambda or comprehension of its own), or, through a `global` in a function of
/// its own, at the module's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelBinding {
    pub name: String,
    /// Byte offset in the inserted code's own text.
    pub at: usize,
    pub module: bool,
}

/// The scope of `src` that code landing at byte `at` is in: the innermost function or
/// class whose body holds `at`, a lambda's body, a comprehension, or the module.
pub fn scope_at(src: &Source, at: usize) -> Node<'_> {
    let root = src.root();
    let mut node = root.descendant_for_byte_range(at, at).unwrap_or(root);
    loop {
        let inside = match node.kind_of() {
            "function_definition" | "class_definition" | "lambda" => node
                .field("body")
                .is_some_and(|b| b.start_byte() <= at && at < b.end_byte().max(b.start_byte() + 1)),
            k => is_comprehension(k) || k == "module",
        };
        if inside {
            return node;
        }
        match node.parent() {
            Some(p) => node = p,
            None => return root,
        }
    }
}

/// Whether the host's own code uses a name in a scope: what an inserted binding there
/// must not touch. Answers are kept (a function's `global`s are found once, each scope
/// and name looked up once).
pub struct HostUses<'a> {
    src: &'a Source,
    excluded: Spans,
    globals: HashMap<usize, HashSet<String>>,
    answers: HashMap<(usize, String), Option<String>>,
}

impl<'a> HostUses<'a> {
    /// The host `src`, whose code in `excluded` is not its own any more (taken out).
    pub fn new(src: &'a Source, excluded: &[Range<usize>]) -> Self {
        HostUses {
            src,
            excluded: Spans::new(excluded),
            globals: HashMap::new(),
            answers: HashMap::new(),
        }
    }

    /// Whether the host's own code in `scope` (nested scopes included) binds or reads
    /// `name`. A function that declares the name `global` hands it to the module.
    /// Returns the scope that uses it, described for the message.
    pub fn uses(&mut self, scope: Node<'a>, name: &str) -> Option<String> {
        let src = self.src;
        let scope = if scope.kind_of() == "function_definition"
            && self
                .globals
                .entry(scope.id())
                .or_insert_with(|| declared_global(src, scope))
                .contains(name)
        {
            src.root()
        } else {
            scope
        };
        let key = (scope.id(), name.to_string());
        if let Some(a) = self.answers.get(&key) {
            return a.clone();
        }
        let answer = host_uses(src, scope, name, &self.excluded).then(|| describe(src, scope));
        self.answers.insert(key, answer.clone());
        answer
    }
}

/// `HostUses::uses` once.
pub fn host_uses_name(
    src: &Source,
    scope: Node,
    name: &str,
    excluded: &[Range<usize>],
) -> Option<String> {
    HostUses::new(src, excluded).uses(scope, name)
}

/// Sorted, non-overlapping byte ranges, with their indices in the caller's list.
struct Spans {
    sorted: Vec<(Range<usize>, usize)>,
}

impl Spans {
    fn new(ranges: &[Range<usize>]) -> Spans {
        let mut sorted: Vec<(Range<usize>, usize)> = ranges.iter().cloned().zip(0..).collect();
        sorted.sort_by_key(|(r, _)| r.start);
        Spans { sorted }
    }

    /// The first range ending after `at`.
    fn first_ending_after(&self, at: usize) -> Option<&(Range<usize>, usize)> {
        let i = self.sorted.partition_point(|(r, _)| r.end <= at);
        self.sorted.get(i)
    }

    /// The index of the range holding byte `at`.
    fn holding(&self, at: usize) -> Option<usize> {
        self.first_ending_after(at)
            .filter(|(r, _)| r.start <= at)
            .map(|(_, i)| *i)
    }

    fn overlaps(&self, n: Node) -> bool {
        self.first_ending_after(n.start_byte())
            .is_some_and(|(r, _)| r.start < n.end_byte())
    }
}

fn describe(src: &Source, scope: Node) -> String {
    let name = scope.field("name").map(|n| src.text_of(n).to_string());
    match (scope.kind_of(), name) {
        ("function_definition", Some(n)) => format!("`{n}`"),
        ("class_definition", Some(n)) => format!("class `{n}`"),
        ("module", _) => "the module".to_string(),
        (kind, _) => format!("the enclosing {}", kind.replace('_', " ")),
    }
}

pub(crate) fn is_scope(kind: &str) -> bool {
    matches!(
        kind,
        "module"
            | "function_definition"
            | "class_definition"
            | "lambda"
            | "list_comprehension"
            | "set_comprehension"
            | "dictionary_comprehension"
            | "generator_expression"
    )
}

pub(crate) fn is_comprehension(kind: &str) -> bool {
    matches!(
        kind,
        "list_comprehension"
            | "set_comprehension"
            | "dictionary_comprehension"
            | "generator_expression"
    )
}

/// The names a function declares `global` (not in functions nested in it).
pub(crate) fn declared_global(src: &Source, func: Node) -> HashSet<String> {
    let mut out = HashSet::new();
    let Some(body) = func.field("body") else {
        return out;
    };
    // Most functions declare nothing global: their text says so (`global_rank` is
    // not `global x`). Where it says `global`, only the nodes around those words are
    // walked (a docstring's "global batch size" is not a statement).
    let words: Vec<usize> =
        super::word_occurrences(&src.text, body.byte_range(), "global").collect();
    let declares = words.iter().any(|&i| {
        matches!(
            src.text[i + "global".len()..].chars().next(),
            Some(' ' | '\t')
        )
    });
    if !declares {
        return out;
    }
    let holds_word = |n: &Node| words.iter().any(|w| n.byte_range().contains(w));
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        if n.kind_of() == "global_statement" {
            let mut c = n.walk();
            out.extend(
                n.named_children(&mut c)
                    .filter(|id| id.kind_of() == "identifier")
                    .map(|id| src.text_of(id).to_string()),
            );
            continue;
        }
        if matches!(
            n.kind_of(),
            "function_definition" | "class_definition" | "lambda"
        ) {
            continue;
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c).filter(holds_word));
    }
    out
}

/// Whether the code of `scope` outside `inserted` binds or reads `name`, nested scopes
/// included. Found as text first (few names, one pass each), then confirmed on the tree:
/// an identifier, and a name (not an attribute, a keyword argument or a module path).
fn host_uses(src: &Source, scope: Node, name: &str, inserted: &Spans) -> bool {
    for at in super::word_occurrences(&src.text, scope.byte_range(), name) {
        if inserted.holding(at).is_some() {
            continue;
        }
        let Some(node) = src.root().descendant_for_byte_range(at, at + name.len()) else {
            continue;
        };
        if node.kind_of() == "identifier" && node.start_byte() == at && is_name(node) {
            return true;
        }
    }
    false
}

/// Whether an identifier stands for a name (and not for an attribute, a keyword
/// argument or a piece of a module path).
fn is_name(ident: Node) -> bool {
    let Some(parent) = ident.parent() else {
        return true;
    };
    let is_field =
        |node: Node, field: &str| node.field(field).is_some_and(|c| c.id() == ident.id());
    match parent.kind_of() {
        "attribute" => !is_field(parent, "attribute"),
        "keyword_argument" => !is_field(parent, "name"),
        "dotted_name" => {
            // `import a.b` binds `a`; `from m import a` binds `a`; the rest, and the module
            // path of `from m import x` or `import m as n`, are not names.
            let Some(holder) = parent.parent() else {
                return false;
            };
            let first = parent.named_child(0).is_some_and(|c| c.id() == ident.id());
            match holder.kind_of() {
                "import_statement" => first,
                "import_from_statement" => holder
                    .field("module_name")
                    .is_none_or(|m| m.id() != parent.id()),
                "aliased_import" => false,
                _ => true,
            }
        }
        _ => true,
    }
}

/// Call `f(identifier, construct)` for every identifier bound by a binding construct
/// that starts inside one of `ranges`. Parameters are not reported: inserted code only
/// has parameters in functions of its own.
fn walk_bindings<'a>(root: Node<'a>, ranges: &Spans, f: &mut impl FnMut(Node<'a>, Node<'a>)) {
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if !ranges.overlaps(node) {
            continue;
        }
        if ranges.holding(node.start_byte()).is_some() {
            for_each_bound(node, &mut |ident| f(ident, node));
        }
        let mut c = node.walk();
        stack.extend(node.children(&mut c).filter(|c| ranges.overlaps(*c)));
    }
}

/// The identifiers `node` binds itself (not those of nested constructs).
pub(crate) fn for_each_bound<'a>(node: Node<'a>, f: &mut impl FnMut(Node<'a>)) {
    let field = |name: &str| node.field(name);
    match node.kind_of() {
        "assignment" | "augmented_assignment" | "for_statement" | "for_in_clause" => {
            if let Some(left) = field("left") {
                targets(left, f);
            }
        }
        "as_pattern_target" => targets(node, f),
        "except_clause" => {
            if let Some(alias) = field("alias") {
                targets(alias, f);
            }
        }
        "named_expression" | "function_definition" | "class_definition" => {
            if let Some(name) = field("name") {
                f(name);
            }
        }
        "import_statement" | "import_from_statement" => {
            let module = field("module_name").map(|m| m.id());
            let mut c = node.walk();
            for item in node.named_children(&mut c) {
                if Some(item.id()) == module {
                    continue;
                }
                match item.kind_of() {
                    "aliased_import" => {
                        if let Some(alias) = item.field("alias") {
                            f(alias);
                        }
                    }
                    "dotted_name" => {
                        let mut c2 = item.walk();
                        let parts: Vec<Node> = item.named_children(&mut c2).collect();
                        let bound = if node.kind_of() == "import_statement" {
                            parts.first()
                        } else {
                            parts.last()
                        };
                        if let Some(id) = bound {
                            f(*id);
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The identifiers an assignment-like target binds: names, through tuples, lists and
/// starred parts; `a.b` and `a[i]` bind nothing.
fn targets<'a>(target: Node<'a>, f: &mut impl FnMut(Node<'a>)) {
    match target.kind_of() {
        "identifier" => f(target),
        "attribute" | "subscript" => {}
        _ => {
            let mut c = target.walk();
            let children: Vec<Node> = target.named_children(&mut c).collect();
            for child in children {
                targets(child, f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_function_declares_global_what_its_own_global_statements_name() {
        let text = "def f():\n    \"\"\"The global batch size; global_rank.\"\"\"\n    if x:\n        global A, B\n    def g():\n        global C\n    global\\\n        D\n    return [E for E in global_rank]\n\n\ndef h():\n    \"\"\"global state\"\"\"\n    return 1\n";
        let src = Source::parse(text.into());
        let funcs: Vec<Node> = {
            let mut c = src.root().walk();
            src.root().named_children(&mut c).collect()
        };
        let names = |f: Node| {
            let mut v: Vec<String> = declared_global(&src, f).into_iter().collect();
            v.sort();
            v
        };
        // `g`'s own `global C` is not `f`'s; a docstring saying "global" declares nothing.
        assert_eq!(names(funcs[0]), ["A", "B", "D"]);
        assert!(names(funcs[1]).is_empty());
    }

    #[test]
    fn level_bindings_leave_out_the_codes_own_scopes() {
        let code = Source::parse(
            "def _h(t):\n    y = t\n    global G\n    G = y\n_s = [u for u in range(3)]\nimport os.path\nfrom m import a as _a\n".into(),
        );
        let got: Vec<(String, bool)> = super::super::names::code_facts(&code)
            .level
            .into_iter()
            .map(|(name, _, module)| (name, module))
            .collect();
        let want = [
            ("_h", false),
            ("G", true),
            ("_s", false),
            ("os", false),
            ("_a", false),
        ];
        assert_eq!(
            got,
            want.iter()
                .map(|(n, m)| (n.to_string(), *m))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_scope_at_a_byte_is_the_body_holding_it() {
        let text = "class A:\n    def m(self):\n        x = 1\n\n\ndef f():\n    pass\n";
        let src = Source::parse(text.into());
        let at = |s: &str| scope_at(&src, text.find(s).unwrap()).kind_of();
        assert_eq!(at("x = 1"), "function_definition");
        // A `def` line is in the scope around the definition, not in its own.
        assert_eq!(at("def m"), "class_definition");
        assert_eq!(at("def f"), "module");
    }

    #[test]
    fn host_uses_skip_attributes_keywords_and_what_is_taken_out() {
        let text = "def f(a):\n    a.rank = 1\n    g(step=2)\n    n = 3\n    return n\n";
        let src = Source::parse(text.into());
        let f = scope_at(&src, text.find("a.rank").unwrap());
        assert_eq!(host_uses_name(&src, f, "rank", &[]), None);
        assert_eq!(host_uses_name(&src, f, "step", &[]), None);
        assert_eq!(host_uses_name(&src, f, "a", &[]).as_deref(), Some("`f`"));
        let n = text.find("    n = 3").unwrap();
        let end = text.len();
        let taken_out = n..end;
        assert_eq!(
            host_uses_name(&src, f, "n", std::slice::from_ref(&taken_out)),
            None
        );
    }
}
