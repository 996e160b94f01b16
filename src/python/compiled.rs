//! Which functions of a module are compiled, whatever the spelling: a decorator whose
//! callee resolves (through imports, `import ... as`, and module-level aliases such as
//! `_compiled = torch.compile`) to one of the compiler callables asked about (the
//! compiled-code list, `rules/compilers.toml`), or a function wrapped by assignment
//! (`X.forward = torch.compile(X.forward)`, `self.experts = torch.compile(self.experts)`,
//! `f = torch._dynamo.optimize(...)(f)`).
//! Callees are compared by qualified name, so `torch.compiler.disable` is not
//! `torch.compile`.

use super::KindOf;
use std::collections::BTreeMap;

use tree_sitter::Node;

use super::{Source, statements_of, undecorated};

/// A compiled function: (class or None, function name), where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    pub class: Option<String>,
    pub function: String,
    /// 1-based line of the decorator or assignment that compiles it.
    pub line: usize,
    /// `@_tc` (torch.compile), `X.forward = torch.compile(X.forward)`.
    pub how: String,
    /// The compiler callable.
    pub by: String,
    /// Compiled by an assignment: a decorator added to it runs inside the graph too.
    pub wrapped: bool,
}

/// What a module says about compiling, before knowing which callables compile.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Local name -> qualified name, from imports and module-level aliases.
    pub aliases: BTreeMap<String, String>,
    /// (class, function, line, decorator text, the decorator's callee qualified).
    pub decorated: Vec<(Option<String>, String, usize, String, String)>,
    /// Functions passed to a call whose result is kept: (callee qualified, class,
    /// function, line, statement text).
    pub wrapped: Vec<(String, Option<String>, String, usize, String)>,
}

impl Facts {
    /// The functions compiled by one of `compilers` (qualified names).
    pub fn compiled(&self, compilers: &[String]) -> Vec<Compiled> {
        let is = |q: &str| compilers.iter().any(|c| c == q);
        let mut out = Vec::new();
        for (class, function, line, text, callee) in &self.decorated {
            if is(callee) {
                out.push(Compiled {
                    class: class.clone(),
                    function: function.clone(),
                    line: *line,
                    how: format!("decorated with `{text}` ({callee})"),
                    by: callee.clone(),
                    wrapped: false,
                });
            }
        }
        for (callee, class, function, line, text) in &self.wrapped {
            if is(callee) {
                out.push(Compiled {
                    class: class.clone(),
                    function: function.clone(),
                    line: *line,
                    how: format!("compiled by `{text}` at line {line}"),
                    by: callee.clone(),
                    wrapped: true,
                });
            }
        }
        out
    }
}

/// What runs inside `compiled` functions of this one module: methods they call through
/// `self.method(...)`, the `forward` of submodules they call through `self.attr(...)`
/// (`self.attr = Class(...)` in `__init__`), and module functions they call, followed
/// transitively. Only the bodies reached are walked. As (class or "", function); the
/// compiled functions themselves are not included (code around them runs outside).
pub fn run_inside(
    src: &Source,
    compiled: &[Compiled],
) -> std::collections::BTreeSet<(String, String)> {
    use std::collections::BTreeSet;
    // Definitions by (class or "", name), and each class's submodule attributes.
    let mut defs: BTreeMap<(String, String), Node> = BTreeMap::new();
    let mut attrs: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for stmt in statements_of(src.root()) {
        let inner = undecorated(stmt);
        let name = |n: Node| {
            n.field("name")
                .map(|x| src.text_of(x).to_string())
                .unwrap_or_default()
        };
        match inner.kind_of() {
            "function_definition" => {
                defs.insert((String::new(), name(inner)), inner);
            }
            "class_definition" => {
                let class = name(inner);
                let Some(body) = inner.field("body") else {
                    continue;
                };
                for m in statements_of(body) {
                    let mi = undecorated(m);
                    if mi.kind_of() == "function_definition" {
                        let method = name(mi);
                        if method == "__init__"
                            && let Some(b) = mi.field("body")
                        {
                            let a = attrs.entry(class.clone()).or_default();
                            collect_self_attrs(src, b, a);
                        }
                        defs.insert((class.clone(), method), mi);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out: BTreeSet<(String, String)> = BTreeSet::new();
    let mut work: Vec<(String, String)> = compiled
        .iter()
        .map(|c| (c.class.clone().unwrap_or_default(), c.function.clone()))
        .collect();
    let mut seen: BTreeSet<(String, String)> = work.iter().cloned().collect();
    while let Some(key) = work.pop() {
        let Some(body) = defs.get(&key).and_then(|f| f.field("body")) else {
            continue;
        };
        let class = key.0.clone();
        let mut stack = vec![body];
        while let Some(n) = stack.pop() {
            if n.kind_of() == "call"
                && let Some(f) = n.field("function")
                && let Some(name) = dotted(src, f)
            {
                let parts: Vec<&str> = name.split('.').collect();
                let reached = match parts.as_slice() {
                    [one] => Some((String::new(), one.to_string())),
                    ["self", m] if defs.contains_key(&(class.clone(), m.to_string())) => {
                        Some((class.clone(), m.to_string()))
                    }
                    ["self", a, rest @ ..] => {
                        attrs
                            .get(&class)
                            .and_then(|x| x.get(*a))
                            .map(|k| match rest {
                                [] => (k.clone(), "forward".to_string()),
                                [.., m] => (k.clone(), m.to_string()),
                            })
                    }
                    _ => None,
                };
                if let Some(r) = reached
                    && (defs.contains_key(&r) || r.1 == "forward")
                {
                    out.insert(r.clone());
                    if seen.insert(r.clone()) {
                        work.push(r);
                    }
                }
            }
            if matches!(n.kind_of(), "function_definition" | "class_definition")
                && n.id() != body.id()
            {
                continue;
            }
            let mut c = n.walk();
            stack.extend(n.named_children(&mut c));
        }
    }
    out
}

/// `self.x = K(...)` in an `__init__` body (branches included): attribute -> class name.
fn collect_self_attrs(src: &Source, body: Node, out: &mut BTreeMap<String, String>) {
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        if n.kind_of() == "assignment"
            && let (Some(l), Some(r)) = (n.field("left"), n.field("right"))
            && let Some(target) = dotted(src, l)
            && let Some(attr) = target.strip_prefix("self.")
        {
            let mut values = vec![r];
            if r.kind_of() == "conditional_expression" {
                let mut c = r.walk();
                values = r.named_children(&mut c).collect();
            }
            for v in values {
                if v.kind_of() == "call"
                    && let Some(k) = v.field("function").and_then(|k| dotted(src, k))
                {
                    let k = k.rsplit('.').next().unwrap_or(&k).to_string();
                    out.entry(attr.to_string()).or_insert(k);
                }
            }
            continue;
        }
        if matches!(n.kind_of(), "function_definition" | "class_definition") {
            continue;
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c));
    }
}

fn dotted(src: &Source, node: Node) -> Option<String> {
    match node.kind_of() {
        "identifier" => Some(src.text_of(node).to_string()),
        "attribute" => Some(format!(
            "{}.{}",
            dotted(src, node.field("object")?)?,
            src.text_of(node.field("attribute")?)
        )),
        _ => None,
    }
}

/// `a.b.c` with `a` replaced by what it stands for.
pub fn qualify(aliases: &BTreeMap<String, String>, name: &str) -> String {
    let (head, rest) = name
        .split_once('.')
        .map_or((name, None), |(h, r)| (h, Some(r)));
    let head = aliases.get(head).map_or(head, String::as_str);
    match rest {
        Some(r) => format!("{head}.{r}"),
        None => head.to_string(),
    }
}

/// The callee of an expression used as a decorator or called: `X` of `X` and `X(...)`,
/// and `X` of `X(...)(...)` (a decorator factory called twice).
fn callee<'t>(node: Node<'t>) -> Node<'t> {
    let mut n = node;
    while n.kind_of() == "call" {
        match n.field("function") {
            Some(f) => n = f,
            None => break,
        }
    }
    n
}

fn collect_aliases(src: &Source, root: Node, out: &mut BTreeMap<String, String>) {
    for stmt in statements_of(root) {
        match stmt.kind_of() {
            "import_statement" => {
                let mut c = stmt.walk();
                for n in stmt.named_children(&mut c) {
                    match n.kind_of() {
                        "dotted_name" => {
                            let t = src.text_of(n);
                            let head = t.split('.').next().unwrap_or(t);
                            out.insert(head.to_string(), head.to_string());
                        }
                        "aliased_import" => {
                            if let (Some(name), Some(alias)) = (n.field("name"), n.field("alias")) {
                                out.insert(
                                    src.text_of(alias).to_string(),
                                    src.text_of(name).to_string(),
                                );
                            }
                        }
                        _ => {}
                    }
                }
            }
            "import_from_statement" => {
                let Some(module) = stmt.field("module_name") else {
                    continue;
                };
                let module = src.text_of(module).to_string();
                let mut c = stmt.walk();
                for n in stmt.children_by_field_name("name", &mut c) {
                    let (name, local) = match n.kind_of() {
                        "aliased_import" => (
                            n.field("name").map(|x| src.text_of(x)),
                            n.field("alias").map(|x| src.text_of(x)),
                        ),
                        _ => (Some(src.text_of(n)), Some(src.text_of(n))),
                    };
                    if let (Some(name), Some(local)) = (name, local) {
                        out.insert(local.to_string(), format!("{module}.{name}"));
                    }
                }
            }
            "expression_statement" => {
                // `_compiled = torch.compile` and `_c = torch.compile(fullgraph=True)`.
                let Some(a) = stmt.named_child(0).filter(|a| a.kind_of() == "assignment") else {
                    continue;
                };
                let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
                    continue;
                };
                if left.kind_of() != "identifier" {
                    continue;
                }
                let factory = right.kind_of() == "call" && first_function_arg(src, right).is_none();
                if (right.kind_of() == "attribute" || right.kind_of() == "identifier" || factory)
                    && let Some(name) = dotted(src, callee(right))
                {
                    let q = qualify(out, &name);
                    out.insert(src.text_of(left).to_string(), q);
                }
            }
            _ => {}
        }
    }
}

/// The first positional argument of a call, when it can name a function: a name, an
/// attribute chain, or a constructor call.
fn first_function_arg<'t>(src: &Source, call: Node<'t>) -> Option<Node<'t>> {
    let args = call.field("arguments")?;
    let mut c = args.walk();
    let first = args
        .named_children(&mut c)
        .find(|n| n.kind_of() != "keyword_argument" && n.kind_of() != "comment")?;
    let named = match first.kind_of() {
        "identifier" | "attribute" => dotted(src, first).is_some(),
        "call" => first
            .field("function")
            .and_then(|f| dotted(src, f))
            .is_some_and(|f| {
                f.rsplit('.')
                    .next()
                    .is_some_and(|l| l.starts_with(|c: char| c.is_uppercase()))
            }),
        _ => false,
    };
    named.then_some(first)
}

/// The facts of one parsed module.
pub fn facts(src: &Source) -> Facts {
    facts_where(src, None)
}

/// `facts` for a caller that knows the compilers it asks about (qualified names): the
/// bodies of functions that cannot compile anything (they name no compiler, no alias of
/// one and hold no decorator) are not walked. `__init__` bodies always are: the classes
/// of the attributes they set are what a wrapped attribute runs.
pub fn facts_for(src: &Source, compilers: &[String]) -> Facts {
    facts_where(src, Some(compilers))
}

fn facts_where(src: &Source, compilers: Option<&[String]>) -> Facts {
    let mut f = Facts::default();
    collect_aliases(src, src.root(), &mut f.aliases);
    // What a body must hold to compile anything: a compiler's last name (`compile`), a
    // module-level alias of one (`_tc`), a decorator.
    let needles: Option<Vec<String>> = compilers.map(|cs| {
        let mut n: Vec<String> = cs
            .iter()
            .map(|c| c.rsplit('.').next().unwrap_or(c).to_string())
            .collect();
        n.extend(
            f.aliases
                .iter()
                .filter(|(_, q)| {
                    cs.iter()
                        .any(|c| c == *q || c.starts_with(&format!("{q}.")))
                })
                .map(|(k, _)| k.clone()),
        );
        n.push("@".to_string());
        n
    });
    let worth_walking = |func: Node, body: Node| {
        let Some(needles) = &needles else {
            return true;
        };
        let name = func
            .field("name")
            .map(|x| src.text_of(x))
            .unwrap_or_default();
        let text = src.text_of(body);
        name == "__init__" || needles.iter().any(|n| text.contains(n.as_str()))
    };
    // Classes of this module, with each one's `self.x = K(...)` attributes and methods.
    let mut classes: BTreeMap<String, (Vec<String>, BTreeMap<String, String>)> = BTreeMap::new();
    let mut stack = vec![(src.root(), None::<String>)];
    while let Some((node, class)) = stack.pop() {
        let mut c = node.walk();
        let kids: Vec<Node> = node.named_children(&mut c).collect();
        for n in kids {
            let inner = undecorated(n);
            match inner.kind_of() {
                "class_definition" => {
                    let name = inner
                        .field("name")
                        .map(|x| src.text_of(x).to_string())
                        .unwrap_or_default();
                    let entry = classes.entry(name.clone()).or_default();
                    if let Some(body) = inner.field("body") {
                        for s in statements_of(body) {
                            let si = undecorated(s);
                            if si.kind_of() == "function_definition"
                                && let Some(m) = si.field("name")
                            {
                                entry.0.push(src.text_of(m).to_string());
                            }
                        }
                        stack.push((body, Some(name)));
                    }
                }
                "function_definition" => {
                    let name = inner
                        .field("name")
                        .map(|x| src.text_of(x).to_string())
                        .unwrap_or_default();
                    if n.kind_of() == "decorated_definition" {
                        let mut dc = n.walk();
                        for d in n
                            .named_children(&mut dc)
                            .filter(|d| d.kind_of() == "decorator")
                        {
                            let Some(expr) = d.named_child(0) else {
                                continue;
                            };
                            if let Some(q) = dotted(src, callee(expr)) {
                                f.decorated.push((
                                    class.clone(),
                                    name.clone(),
                                    (d.start_position().row + 1),
                                    src.text_of(d).to_string(),
                                    qualify(&f.aliases, &q),
                                ));
                            }
                        }
                    }
                    if let Some(body) = inner.field("body")
                        && worth_walking(inner, body)
                    {
                        stack.push((body, class.clone()));
                    }
                }
                "expression_statement" => {
                    wrapped_in(src, n, class.as_deref(), &mut f, &mut classes);
                }
                // Definitions and assignments are statements: only what holds statements
                // is walked further, never an expression.
                k if holds_statements(k) => stack.push((n, class.clone())),
                _ => {}
            }
        }
    }
    // `self.experts = torch.compile(self.experts)`: the attribute's class, from
    // `self.experts = Experts(...)`, runs its forward compiled.
    for w in &mut f.wrapped {
        if let Some(cls) = &w.1
            && let Some((methods, attrs)) = classes.get(cls)
            && !methods.contains(&w.2)
            && let Some(k) = attrs.get(&w.2)
        {
            w.1 = Some(k.clone());
            w.2 = "forward".to_string();
        }
    }
    f
}

/// Whether a node of this kind can hold statements: a block, a compound statement or
/// one of its clauses (an error node too: it may hold anything).
fn holds_statements(kind: &str) -> bool {
    matches!(kind, "block" | "module" | "ERROR") || super::is_compound(kind)
}

fn wrapped_in(
    src: &Source,
    stmt: Node,
    class: Option<&str>,
    f: &mut Facts,
    classes: &mut BTreeMap<String, (Vec<String>, BTreeMap<String, String>)>,
) {
    let Some(a) = stmt.named_child(0).filter(|a| a.kind_of() == "assignment") else {
        return;
    };
    let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
        return;
    };
    // Remember `self.x = K(...)` for the class.
    if let (Some(cls), Some(target)) = (class, dotted(src, left))
        && let Some(attr) = target.strip_prefix("self.")
        && right.kind_of() == "call"
        && let Some(k) = right.field("function").and_then(|k| dotted(src, k))
    {
        let k = k.rsplit('.').next().unwrap_or(&k).to_string();
        classes
            .entry(cls.to_string())
            .or_default()
            .1
            .entry(attr.to_string())
            .or_insert(k);
    }
    if right.kind_of() != "call" {
        return;
    }
    // `torch.compile(x)` and `torch._dynamo.optimize("inductor")(x)`: the outer call's
    // argument is what is compiled, the innermost callee what compiles it.
    let Some(arg) = first_function_arg(src, right) else {
        return;
    };
    let Some(callee_name) = dotted(src, callee(right)) else {
        return;
    };
    let q = qualify(&f.aliases, &callee_name);
    let (target_class, function) = match arg.kind_of() {
        "call" => {
            let k = arg
                .field("function")
                .and_then(|k| dotted(src, k))
                .unwrap_or_default();
            (
                Some(k.rsplit('.').next().unwrap_or(&k).to_string()),
                "forward".to_string(),
            )
        }
        _ => {
            let name = dotted(src, arg).unwrap_or_default();
            match name.rsplit_once('.') {
                Some(("self", m)) => (class.map(str::to_string), m.to_string()),
                Some((owner, m)) => (
                    Some(owner.rsplit('.').next().unwrap_or(owner).to_string()),
                    m.to_string(),
                ),
                None => (None, name),
            }
        }
    };
    let text = src
        .text_of(a)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    f.wrapped.push((
        q,
        target_class,
        function,
        (a.start_position().row + 1),
        text,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    type Names = std::collections::BTreeSet<(Option<String>, String)>;

    fn compiled(code: &str) -> Names {
        let src = Source::parse(code.to_string());
        let compilers = [
            "torch.compile".to_string(),
            "torch._dynamo.optimize".to_string(),
        ];
        let all: Names = facts(&src)
            .compiled(&compilers)
            .into_iter()
            .map(|c| (c.class, c.function))
            .collect();
        // The walk that skips bodies which cannot compile anything finds the same.
        let pruned: Names = facts_for(&src, &compilers)
            .compiled(&compilers)
            .into_iter()
            .map(|c| (c.class, c.function))
            .collect();
        assert_eq!(all, pruned, "{code}");
        all
    }

    fn names(v: &[(Option<&str>, &str)]) -> Names {
        v.iter()
            .map(|(c, f)| (c.map(str::to_string), f.to_string()))
            .collect()
    }

    #[test]
    fn every_spelling_of_compile_is_found() {
        let code = r#"
import torch
import torch._dynamo as dyn
from torch import compile as _tc

_compiled = torch.compile
_full = torch.compile(fullgraph=True)


class A:
    def __init__(self):
        self.experts = Experts()
        self.experts = torch.compile(self.experts)

    @_tc
    def a(self):
        pass

    @_compiled(fullgraph=True)
    def b(self):
        pass

    @_full
    def c(self):
        pass

    @dyn.optimize("inductor")
    def d(self):
        pass

    @torch.compiler.disable
    def e(self):
        pass


class Experts:
    def forward(self, x):
        return x


def f(x):
    return x


A.g = torch.compile(A.g)
f = torch._dynamo.optimize("inductor")(f)
"#;
        assert_eq!(
            compiled(code),
            names(&[
                (Some("A"), "a"),
                (Some("A"), "b"),
                (Some("A"), "c"),
                (Some("A"), "d"),
                (Some("Experts"), "forward"),
                (Some("A"), "g"),
                (None, "f"),
            ])
        );
    }
}
