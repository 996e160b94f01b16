//! Which names inserted code binds in its host's scope, and whether the host uses them.
//!
//! Inserted code must bind only names of its own. Binding a name that the host function
//! (or module) binds or reads changes the host: a later read sees the inserted value, an
//! earlier read of a global becomes an unbound local, a loop variable is overwritten. This
//! module finds every binding made by inserted code at the level of an existing scope —
//! assignment and loop targets, `with`/`except` aliases, imports, `def`/`class` names,
//! walrus targets — and reports those whose name the host's own code also uses anywhere
//! in that scope (nested functions and comprehensions included, so closures count).
//! Names bound inside scopes the inserted code opens itself (its own functions, lambdas,
//! comprehensions) are its own. A replacement may bind again what the statement it
//! replaced bound: that binding is the host's.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use tree_sitter::Node;

use super::Source;

/// An inserted binding of a name the host scope uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clash {
    pub name: String,
    /// Byte offset of the binding in the planned text.
    pub at: usize,
    /// The index of the inserted range it is in (or, from `check`, its rule's index).
    pub index: usize,
    /// The host scope, for messages: "`train_step`", "class `A`", "the module".
    pub scope: String,
}

/// A clash found by `check`, with the rule it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleClash {
    pub rule: usize,
    pub name: String,
    pub at: usize,
    pub scope: String,
}

impl RuleClash {
    pub fn message(&self) -> String {
        format!(
            "the inserted code binds `{}`, which {} uses too; inserted code must bind only names of its own (prefix it with `_`)",
            self.name, self.scope
        )
    }
}

/// The check the planner runs on a file: `inserted` are the planned text's ranges of
/// template code, each with its rule; `replaced` the ranges of the original text each
/// rule replaced (what those bound, the rule may bind again). One clash per rule and name.
pub fn check(
    original: &Source,
    planned: &Source,
    inserted: &[(Range<usize>, usize)],
    replaced: &[(usize, Range<usize>)],
) -> Vec<RuleClash> {
    // One range per run of a rule's lines (the planner gives one per line): lines of one
    // rule separated only by blank lines or line ends are one piece of inserted code.
    let mut merged: Vec<(Range<usize>, usize)> = Vec::new();
    let mut sorted = inserted.to_vec();
    sorted.sort_by_key(|(r, _)| r.start);
    for (range, rule) in sorted {
        match merged.last_mut() {
            Some((last, last_rule))
                if *last_rule == rule && planned.text[last.end..range.start].trim().is_empty() =>
            {
                last.end = range.end
            }
            _ => merged.push((range, rule)),
        }
    }
    let mut by_rule: HashMap<usize, HashSet<String>> = HashMap::new();
    for (rule, range) in replaced {
        by_rule
            .entry(*rule)
            .or_default()
            .extend(bound_names(original, range.clone()));
    }
    let ranges: Vec<Range<usize>> = merged.iter().map(|(r, _)| r.clone()).collect();
    let rebinds: Vec<HashSet<String>> = merged
        .iter()
        .map(|(_, rule)| by_rule.get(rule).cloned().unwrap_or_default())
        .collect();
    let mut seen = HashSet::new();
    clashes(planned, &ranges, &rebinds)
        .into_iter()
        .map(|c| RuleClash {
            rule: merged[c.index].1,
            name: c.name,
            at: c.at,
            scope: c.scope,
        })
        .filter(|c| seen.insert((c.rule, c.name.clone())))
        .collect()
}

/// Names bound anywhere in `range` of `src` (any scope): what a replaced statement bound.
pub fn bound_names(src: &Source, range: Range<usize>) -> HashSet<String> {
    let mut out = HashSet::new();
    let spans = Spans::new(std::slice::from_ref(&range));
    walk_bindings(src.root(), &spans, &mut |ident, _| {
        out.insert(src.text_of(ident).to_string());
    });
    out
}

/// Bindings made by the code in `inserted` (byte ranges of `result`) at the level of a
/// scope that is not their own, whose name that scope's other code uses. `rebinds[i]` are
/// names range `i` may bind anyway (what the statement it replaced bound).
pub fn clashes(
    result: &Source,
    inserted: &[Range<usize>],
    rebinds: &[HashSet<String>],
) -> Vec<Clash> {
    let spans = Spans::new(inserted);
    let mut bindings: Vec<(Node, usize, Node)> = Vec::new();
    walk_bindings(result.root(), &spans, &mut |ident, construct| {
        if let Some(index) = spans.holding(ident.start_byte()) {
            bindings.push((ident, index, construct));
        }
    });
    let mut globals: HashMap<usize, HashSet<String>> = HashMap::new();
    let mut found: Vec<(Node, usize, Node)> = Vec::new();
    for (ident, index, construct) in bindings {
        let scope = binding_scope(result, construct, ident, &mut globals);
        // A scope the inserted code opened itself is its own.
        if scope.kind() != "module" && spans.holding(scope.start_byte()).is_some() {
            continue;
        }
        found.push((ident, index, scope));
    }
    let mut used: HashMap<(usize, &str), bool> = HashMap::new();
    let mut out = Vec::new();
    for (ident, index, scope) in found {
        let name = result.text_of(ident);
        if rebinds.get(index).is_some_and(|r| r.contains(name)) {
            continue;
        }
        let uses = *used
            .entry((scope.id(), name))
            .or_insert_with(|| host_uses(result, scope, name, &spans));
        if uses {
            out.push(Clash {
                name: name.to_string(),
                at: ident.start_byte(),
                index,
                scope: describe(result, scope),
            });
        }
    }
    out.sort_by_key(|c| c.at);
    out
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
    let name = scope
        .child_by_field_name("name")
        .map(|n| src.text_of(n).to_string());
    match (scope.kind(), name) {
        ("function_definition", Some(n)) => format!("`{n}`"),
        ("class_definition", Some(n)) => format!("class `{n}`"),
        ("module", _) => "the module".to_string(),
        (kind, _) => format!("the enclosing {}", kind.replace('_', " ")),
    }
}

fn is_scope(kind: &str) -> bool {
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

fn is_comprehension(kind: &str) -> bool {
    matches!(
        kind,
        "list_comprehension"
            | "set_comprehension"
            | "dictionary_comprehension"
            | "generator_expression"
    )
}

/// The scope a binding lands in: the innermost scope around its construct (a `def` or
/// `class` name binds outside the definition; a walrus skips comprehensions), or the
/// module when that function declares the name `global`.
fn binding_scope<'a>(
    src: &Source,
    construct: Node<'a>,
    ident: Node<'a>,
    globals: &mut HashMap<usize, HashSet<String>>,
) -> Node<'a> {
    let walrus = construct.kind() == "named_expression";
    let mut cur = construct.parent();
    let mut scope = construct;
    while let Some(n) = cur {
        if is_scope(n.kind()) && !(walrus && is_comprehension(n.kind())) {
            scope = n;
            break;
        }
        cur = n.parent();
    }
    if scope.kind() == "function_definition"
        && globals
            .entry(scope.id())
            .or_insert_with(|| declared_global(src, scope))
            .contains(src.text_of(ident))
    {
        let mut root = scope;
        while let Some(p) = root.parent() {
            root = p;
        }
        return root;
    }
    scope
}

/// The names a function declares `global` (not in functions nested in it).
fn declared_global(src: &Source, func: Node) -> HashSet<String> {
    let mut out = HashSet::new();
    let Some(body) = func.child_by_field_name("body") else {
        return out;
    };
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        if n.kind() == "global_statement" {
            let mut c = n.walk();
            out.extend(
                n.named_children(&mut c)
                    .filter(|id| id.kind() == "identifier")
                    .map(|id| src.text_of(id).to_string()),
            );
            continue;
        }
        if matches!(
            n.kind(),
            "function_definition" | "class_definition" | "lambda"
        ) {
            continue;
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c));
    }
    out
}

/// Whether the code of `scope` outside `inserted` binds or reads `name`, nested scopes
/// included. Found as text first (few names, one pass each), then confirmed on the tree:
/// an identifier, and a name (not an attribute, a keyword argument or a module path).
fn host_uses(src: &Source, scope: Node, name: &str, inserted: &Spans) -> bool {
    let text = &src.text;
    let range = scope.byte_range();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut from = range.start;
    while let Some(i) = text[from..range.end].find(name) {
        let at = from + i;
        from = at + name.len();
        if word(text[..at].chars().next_back()) || word(text[from..].chars().next()) {
            continue;
        }
        if inserted.holding(at).is_some() {
            continue;
        }
        let Some(node) = src.root().descendant_for_byte_range(at, from) else {
            continue;
        };
        if node.kind() == "identifier" && node.start_byte() == at && is_name(node) {
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
    let is_field = |node: Node, field: &str| {
        node.child_by_field_name(field)
            .is_some_and(|c| c.id() == ident.id())
    };
    match parent.kind() {
        "attribute" => !is_field(parent, "attribute"),
        "keyword_argument" => !is_field(parent, "name"),
        "dotted_name" => {
            // `import a.b` binds `a`; `from m import a` binds `a`; the rest, and the module
            // path of `from m import x` or `import m as n`, are not names.
            let Some(holder) = parent.parent() else {
                return false;
            };
            let first = parent.named_child(0).is_some_and(|c| c.id() == ident.id());
            match holder.kind() {
                "import_statement" => first,
                "import_from_statement" => holder
                    .child_by_field_name("module_name")
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
fn for_each_bound<'a>(node: Node<'a>, f: &mut impl FnMut(Node<'a>)) {
    let field = |name: &str| node.child_by_field_name(name);
    match node.kind() {
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
                match item.kind() {
                    "aliased_import" => {
                        if let Some(alias) = item.child_by_field_name("alias") {
                            f(alias);
                        }
                    }
                    "dotted_name" => {
                        let mut c2 = item.walk();
                        let parts: Vec<Node> = item.named_children(&mut c2).collect();
                        let bound = if node.kind() == "import_statement" {
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
    match target.kind() {
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

    /// Clashes of the code between `#>` and `#<` lines (the "inserted" part) with the rest.
    fn clash_names(code: &str) -> Vec<(String, String)> {
        let start = code.find("#>\n").expect("#>") + 3;
        let end = code.find("#<\n").expect("#<");
        let src = Source::parse(code.to_string());
        clashes(&src, std::slice::from_ref(&(start..end)), &[HashSet::new()])
            .into_iter()
            .map(|c| (c.name, c.scope))
            .collect()
    }

    fn names(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn a_name_the_host_binds_later_is_a_clash() {
        let code = "def train_step(cfg):\n    #>\n    rank = 0\n    _ok = 1\n    #<\n    rank = cfg.rank\n";
        assert_eq!(clash_names(code), names(&[("rank", "`train_step`")]));
    }

    #[test]
    fn a_global_the_host_reads_is_a_clash() {
        // Binding `G` locally would make the host's read of the module's `G` fail.
        let code = "G = 1\n\ndef f():\n    #>\n    G = 2\n    #<\n    return G\n";
        assert_eq!(clash_names(code), names(&[("G", "`f`")]));
    }

    #[test]
    fn own_scopes_loops_imports_and_aliases() {
        let code = concat!(
            "import os\n\ndef f(x):\n    y = [t for t in x]\n    #>\n",
            "    def _helper(t):\n        y = t\n        return y\n",
            "    _s = sum(y for y in range(3))\n",
            "    for x in range(2):\n        pass\n",
            "    import os.path\n",
            "    from m import y as _y, os\n",
            "    with open('f') as t:\n        pass\n",
            "    #<\n    return y\n",
        );
        // `y` and `t` inside the helper and the generator are their own, and the host's
        // function does not use `os` or `_y`; the loop rebinds the parameter `x`, and the
        // with target `t` is a name the host's comprehension uses (counted, to be safe).
        assert_eq!(clash_names(code), names(&[("x", "`f`"), ("t", "`f`")]));
    }

    #[test]
    fn attributes_and_keywords_are_not_names() {
        let code =
            "def f(a):\n    a.rank = 1\n    g(step=2)\n    #>\n    rank, step = 1, 2\n    #<\n";
        assert!(clash_names(code).is_empty());
    }

    #[test]
    fn module_level_definitions_and_globals() {
        let code = concat!(
            "from torch import nn\n\n#>\n",
            "def nn():\n    pass\n\n_state = None\n",
            "def _set():\n    global _state, nn\n    _state = 1\n    nn = 2\n",
            "#<\n\ndef g():\n    return nn\n",
        );
        assert_eq!(
            clash_names(code),
            names(&[("nn", "the module"), ("nn", "the module")])
        );
    }

    #[test]
    fn a_replacement_may_bind_what_it_replaced() {
        let before = "def f(x):\n    outs = g(x)\n    return outs\n";
        let src = Source::parse(before.to_string());
        let start = before.find("    outs").unwrap();
        let end = before.find("    return").unwrap();
        let allowed = bound_names(&src, start..end);
        assert_eq!(allowed, HashSet::from(["outs".to_string()]));
        let after = "def f(x):\n    outs = g(x, flag=1)\n    return outs\n";
        let src = Source::parse(after.to_string());
        let range = start..after.find("    return").unwrap();
        assert!(clashes(&src, std::slice::from_ref(&range), &[allowed]).is_empty());
        assert_eq!(clashes(&src, &[range], &[HashSet::new()]).len(), 1);
    }
}
