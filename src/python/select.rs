//! Selecting functions and methods of a scanned tree by name: every `forward` of an
//! `nn.Module` subclass, and globs such as `*.forward`, `DualPipeV.step`, `layer_forward`.
//! Used by the functions-trace JSON and by the NVTX rule set, so both pick the same
//! functions and refuse the same ones (nested, not importable, run inside compiled code).

use std::collections::BTreeSet;

use super::scan::{Module, Tree};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

/// Something wrong with a selection or an existing JSON, with where it points.
#[derive(Debug, Clone)]
pub struct Problem {
    pub severity: Severity,
    /// `file:line` of the definition it concerns, or the JSON entry.
    pub location: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{level}: {}: {}", self.location, self.message)
    }
}

/// `*` (any run) and `?` (one character) globbing.
pub fn glob(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], t) || (!t.is_empty() && go(p, &t[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &t[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &t[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

/// A function a selection picked.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    /// The import path, or the file when the module is not importable.
    pub module: String,
    /// The file, as scanned.
    pub file: String,
    /// The file's path as given to the scan.
    pub path: std::path::PathBuf,
    pub class: Option<String>,
    pub function: String,
    pub line: usize,
}

impl Target {
    /// `Class.method` or `func`, as nsys names it.
    pub fn name(&self) -> String {
        match &self.class {
            Some(c) => format!("{c}.{}", self.function),
            None => self.function.clone(),
        }
    }
}

/// What to select.
pub struct Selection<'a> {
    /// Every `forward` of an `nn.Module` subclass.
    pub forwards: bool,
    pub matches: &'a [String],
    /// Functions that run inside compiled code (see `run_inside_compiled`): left out, since
    /// code wrapped around them (a range, a trace hook) would break the graph. Named exactly
    /// that is an error, picked by a glob a warning, picked by default (`forwards`) silent.
    pub compiled: Option<&'a BTreeSet<(String, String)>>,
}

/// What a selection picked.
pub struct Selected {
    pub targets: Vec<Target>,
    pub problems: Vec<Problem>,
    /// Default picks (`forwards`) left out without a word because they run inside
    /// compiled code.
    pub compiled_left_out: usize,
}

/// What runs inside a function compiled by one of `compilers` (qualified callables such as
/// `torch.compile`, found through aliases and wrapping assignments: see `compiled`):
/// the compiled function's `self.attr(...)` calls, resolved through `__init__`'s
/// `self.attr = Class(...)`, and its plain calls of functions in the tree, followed
/// transitively. As (class or "", function); the compiled functions themselves are not
/// included: code around them runs outside the graph.
pub fn run_inside_compiled(tree: &Tree, compilers: &[String]) -> BTreeSet<(String, String)> {
    // Compiled functions by (class or "", name), from every module: a class's method may
    // be compiled by an assignment in another file.
    let all: Vec<super::compiled::Compiled> = tree
        .modules
        .iter()
        .flat_map(|m| m.compile_facts.compiled(compilers))
        .collect();
    let compiled: BTreeSet<(String, String)> = all
        .iter()
        .map(|c| (c.class.clone().unwrap_or_default(), c.function.clone()))
        .collect();
    let is_compiled = |class: Option<&str>, f: &super::scan::Function| {
        compiled.contains(&(class.unwrap_or("").to_string(), f.name.clone()))
    };
    // A function compiled by assignment is compiled with whatever decorates it: it counts
    // as inside. One compiled by a decorator is wrapped from outside, above that decorator.
    let mut out: BTreeSet<(String, String)> = all
        .iter()
        .filter(|c| c.wrapped)
        .map(|c| (c.class.clone().unwrap_or_default(), c.function.clone()))
        .collect();
    let mut work: Vec<(&Module, Option<&super::scan::Class>, &super::scan::Function)> = Vec::new();
    for m in &tree.modules {
        for c in &m.classes {
            for f in c.methods.iter().filter(|f| is_compiled(Some(&c.name), f)) {
                work.push((m, Some(c), f));
            }
        }
        for f in m.functions.iter().filter(|f| is_compiled(None, f)) {
            work.push((m, None, f));
        }
    }
    while let Some((m, class, f)) = work.pop() {
        if let Some(c) = class {
            for chain in &f.self_calls {
                // Walk `self.a.b.c(...)`: attributes to the owner, then a method of it or a
                // submodule whose forward runs.
                let mut owners: Vec<(&Module, &super::scan::Class)> = vec![(m, c)];
                for (i, attr) in chain.iter().enumerate() {
                    let last = i + 1 == chain.len();
                    let mut next = Vec::new();
                    for (om, oc) in &owners {
                        if last && oc.methods.iter().any(|x| &x.name == attr) {
                            if out.insert((oc.name.clone(), attr.clone()))
                                && let Some(f2) = oc.methods.iter().find(|x| &x.name == attr)
                            {
                                work.push((om, Some(oc), f2));
                            }
                            continue;
                        }
                        if let Some(kind) = oc.attr_types.get(attr) {
                            next.extend(tree.resolve_class(om, kind));
                        }
                    }
                    if last {
                        for (m2, c2) in &next {
                            if out.insert((c2.name.clone(), "forward".to_string()))
                                && let Some(f2) = c2.methods.iter().find(|x| x.name == "forward")
                            {
                                work.push((m2, Some(c2), f2));
                            }
                        }
                    }
                    owners = next;
                }
            }
        }
        for name in &f.calls {
            let local = m
                .functions
                .iter()
                .find(|x| &x.name == name && !x.nested)
                .map(|x| (m, x));
            let imported = m.imports.get(name).and_then(|(from, orig)| {
                tree.modules
                    .iter()
                    .filter(|m2| m2.import_path.as_deref().is_ok_and(|p| p == from))
                    .find_map(|m2| {
                        m2.functions
                            .iter()
                            .find(|x| &x.name == orig && !x.nested)
                            .map(|x| (m2, x))
                    })
            });
            if let Some((m2, f2)) = local.or(imported)
                && out.insert((String::new(), f2.name.clone()))
            {
                work.push((m2, None, f2));
            }
        }
    }
    out
}

/// The one function selection both the functions-trace JSON and function-target rule
/// sets use: what runs inside code compiled by one of `compilers` is found first, then
/// the selection is resolved, leaving those functions out.
pub fn select_functions(
    tree: &Tree,
    forwards: bool,
    matches: &[String],
    compilers: &[String],
) -> Selected {
    let inside = run_inside_compiled(tree, compilers);
    select(
        tree,
        &Selection {
            forwards,
            matches,
            compiled: Some(&inside),
        },
    )
}

fn loc(m: &Module, line: usize) -> String {
    format!("{}:{line}", m.file)
}

/// Resolve a selection against the tree.
pub fn select(tree: &Tree, sel: &Selection) -> Selected {
    let mut targets: BTreeSet<Target> = BTreeSet::new();
    let mut problems = Vec::new();
    let mut compiled_left_out = 0;
    let mut matched = vec![false; sel.matches.len()];
    for m in &tree.modules {
        let module_name = m.import_path.clone().unwrap_or_else(|_| m.file.clone());
        let mut pick = |class: Option<&str>,
                        function: &str,
                        line: usize,
                        nested: bool,
                        how: Picked,
                        problems: &mut Vec<Problem>| {
            let explicit = how == Picked::Exactly;
            let name = class.map_or(function.to_string(), |c| format!("{c}.{function}"));
            if nested {
                problems.push(Problem {
                    severity: if explicit { Severity::Error } else { Severity::Warning },
                    location: loc(m, line),
                    message: format!("`{name}` is defined inside another function or class; nsys cannot reach it by module and name"),
                });
                return;
            }
            if let Some(inside) = sel.compiled
                && inside.contains(&(class.unwrap_or("").to_string(), function.to_string()))
            {
                match how {
                    Picked::ByDefault => compiled_left_out += 1,
                    Picked::Exactly | Picked::ByGlob => problems.push(Problem {
                        severity: if how == Picked::Exactly {
                            Severity::Error
                        } else {
                            Severity::Warning
                        },
                        location: loc(m, line),
                        message: format!(
                            "`{name}` runs inside a compiled function (torch.compile or the like): code added around it would break the graph, and its Python frame does not run there; left out"
                        ),
                    }),
                }
                return;
            }
            if let Err(why) = &m.import_path {
                problems.push(Problem {
                    severity: if explicit {
                        Severity::Error
                    } else {
                        Severity::Warning
                    },
                    location: loc(m, line),
                    message: format!("`{name}` is in a module nsys cannot import by name ({why})"),
                });
                return;
            }
            targets.insert(Target {
                module: module_name.clone(),
                file: m.file.clone(),
                path: m.path.clone(),
                class: class.map(str::to_string),
                function: function.to_string(),
                line,
            });
        };
        for c in &m.classes {
            let nn = sel.forwards && tree.is_nn_module(m, c);
            for f in &c.methods {
                let name = format!("{}.{}", c.name, f.name);
                let hits: Vec<usize> = sel
                    .matches
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| glob(p, &name))
                    .map(|(i, _)| i)
                    .collect();
                for &i in &hits {
                    matched[i] = true;
                }
                if !hits.is_empty() || (nn && f.name == "forward") {
                    // Named exactly (no wildcard): a refusal is an error, not a skip.
                    let how = Picked::of(&hits, sel.matches);
                    pick(
                        Some(&c.name),
                        &f.name,
                        f.line,
                        c.nested || f.nested,
                        how,
                        &mut problems,
                    );
                }
            }
            // `Class.method` named exactly, with the method inherited through the tree.
            for (i, p) in sel.matches.iter().enumerate() {
                if let Some((cls, meth)) = p.split_once('.') {
                    let defined = c.methods.iter().any(|f| f.name == meth);
                    if cls == c.name
                        && !defined
                        && !meth.contains(['*', '?'])
                        && tree.has_method(m, c, meth)
                    {
                        matched[i] = true;
                        let how = Picked::Exactly;
                        pick(Some(&c.name), meth, c.line, c.nested, how, &mut problems);
                    }
                }
            }
        }
        for f in &m.functions {
            let hits: Vec<usize> = sel
                .matches
                .iter()
                .enumerate()
                .filter(|(_, p)| glob(p, &f.name))
                .map(|(i, _)| i)
                .collect();
            for &i in &hits {
                matched[i] = true;
            }
            if !hits.is_empty() {
                let how = Picked::of(&hits, sel.matches);
                pick(None, &f.name, f.line, f.nested, how, &mut problems);
            }
        }
    }
    for (p, hit) in sel.matches.iter().zip(matched) {
        if !hit {
            let near = nearest_names(tree, p);
            let hint = if near.is_empty() {
                String::new()
            } else {
                format!(" (did you mean {}?)", near.join(", "))
            };
            problems.push(Problem {
                severity: Severity::Error,
                location: format!("--match {p}"),
                message: format!("matches no function or method in the scanned tree{hint}"),
            });
        }
    }
    Selected {
        targets: targets.into_iter().collect(),
        problems,
        compiled_left_out,
    }
}

/// How a function came to be picked: what a refusal of it is worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Picked {
    /// Named by a `--match` without a wildcard.
    Exactly,
    ByGlob,
    /// A `forward` picked because `forwards` is on.
    ByDefault,
}

impl Picked {
    fn of(hits: &[usize], matches: &[String]) -> Picked {
        if hits.iter().any(|&i| !is_glob(&matches[i])) {
            Picked::Exactly
        } else if hits.is_empty() {
            Picked::ByDefault
        } else {
            Picked::ByGlob
        }
    }
}

fn nearest_names(tree: &Tree, pattern: &str) -> Vec<String> {
    let mut names: Vec<(f32, String)> = Vec::new();
    for m in &tree.modules {
        for c in &m.classes {
            for f in &c.methods {
                let n = format!("{}.{}", c.name, f.name);
                names.push((
                    similar::TextDiff::from_chars(pattern, n.as_str()).ratio(),
                    n,
                ));
            }
        }
        for f in &m.functions {
            names.push((
                similar::TextDiff::from_chars(pattern, f.name.as_str()).ratio(),
                f.name.clone(),
            ));
        }
    }
    names.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal));
    names.dedup_by(|a, b| a.1 == b.1);
    names
        .into_iter()
        .filter(|(r, _)| *r > 0.6)
        .take(3)
        .map(|(_, n)| format!("`{n}`"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("*.forward", "Qwen3MoeExperts.forward"));
        assert!(!glob("*.forward", "Qwen3MoeExperts.forward_stage1"));
        assert!(glob("DualPipeV.step", "DualPipeV.step"));
        assert!(glob("layer_?orward", "layer_forward"));
        assert!(!glob("layer_forward", "layer_forward_dispatch"));
    }
}
