//! The `--python-functions-trace` JSON nsys reads, built from a static scan of the
//! sources (nothing is imported), and checked against the tree.
//!
//! Format: a JSON array of `{"domain": D, "module": M, "functions": [F, ...]}`, where M is
//! the import path of the module defining F, and F is `"Class.method"` or `"func"`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::python::scan::{Module, Tree};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Group {
    pub domain: String,
    pub module: String,
    pub functions: Vec<String>,
}

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

/// A function a selection picked.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    /// The import path, or the file when the module is not importable.
    pub module: String,
    /// The file, as scanned.
    pub file: String,
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
}

fn loc(m: &Module, line: usize) -> String {
    format!("{}:{line}", m.file)
}

/// Resolve a selection against the tree.
pub fn select(tree: &Tree, sel: &Selection) -> (Vec<Target>, Vec<Problem>) {
    let mut targets: BTreeSet<Target> = BTreeSet::new();
    let mut problems = Vec::new();
    let mut matched = vec![false; sel.matches.len()];
    for m in &tree.modules {
        let module_name = m.import_path.clone().unwrap_or_else(|_| m.file.clone());
        let mut pick = |class: Option<&str>,
                        function: &str,
                        line: usize,
                        nested: bool,
                        explicit: bool,
                        problems: &mut Vec<Problem>| {
            let name = class.map_or(function.to_string(), |c| format!("{c}.{function}"));
            if nested {
                problems.push(Problem {
                    severity: if explicit { Severity::Error } else { Severity::Warning },
                    location: loc(m, line),
                    message: format!("`{name}` is defined inside another function or class; nsys cannot reach it by module and name"),
                });
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
                    pick(
                        Some(&c.name),
                        &f.name,
                        f.line,
                        c.nested || f.nested,
                        !hits.is_empty(),
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
                        pick(Some(&c.name), meth, c.line, c.nested, true, &mut problems);
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
                pick(None, &f.name, f.line, f.nested, true, &mut problems);
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
    (targets.into_iter().collect(), problems)
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

/// One group per module, functions sorted and distinct.
pub fn groups(targets: &[Target], domain: Option<&str>) -> Vec<Group> {
    let mut by_module: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for t in targets {
        by_module
            .entry(t.module.clone())
            .or_default()
            .insert(t.name());
    }
    by_module
        .into_iter()
        .map(|(module, functions)| Group {
            domain: domain
                .map(str::to_string)
                .unwrap_or_else(|| module.split('.').next().unwrap_or(&module).to_string()),
            module,
            functions: functions.into_iter().collect(),
        })
        .collect()
}

/// `base` (the shipped pytorch.json) followed by ours; a module in both gets the union.
pub fn merge(base: Vec<Group>, ours: Vec<Group>) -> Vec<Group> {
    let mut out = base;
    for g in ours {
        match out
            .iter_mut()
            .find(|b| b.module == g.module && b.domain == g.domain)
        {
            Some(b) => {
                for f in g.functions {
                    if !b.functions.contains(&f) {
                        b.functions.push(f);
                    }
                }
            }
            None => out.push(g),
        }
    }
    out
}

/// The shipped `pytorch.json` beside the `nsys` on PATH, if there is one.
pub fn shipped_base() -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    let nsys = std::env::split_paths(&paths)
        .map(|p| p.join("nsys"))
        .find(|p| p.is_file())?;
    let real = nsys.canonicalize().unwrap_or(nsys);
    let candidate = real
        .parent()?
        .join("PythonFunctionsTrace")
        .join("pytorch.json");
    candidate.is_file().then_some(candidate)
}

pub fn read_groups(path: &Path) -> Result<Vec<Group>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}: not a functions-trace JSON (an array of {{domain, module, functions}}): {e}",
            path.display()
        )
    })
}

/// Check an existing functions-trace JSON against the tree: names listed twice, classes
/// without `.method`, missing classes or methods, nested definitions.
pub fn check(tree: &Tree, json_name: &str, groups: &[Group]) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (gi, g) in groups.iter().enumerate() {
        let module = tree
            .modules
            .iter()
            .find(|m| m.import_path.as_deref() == Ok(g.module.as_str()));
        for (fi, f) in g.functions.iter().enumerate() {
            let at = format!(
                "{json_name}: group {} (module {}), function {}",
                gi + 1,
                g.module,
                fi + 1
            );
            if let Some(first) = seen.insert((g.module.clone(), f.clone()), gi) {
                problems.push(Problem {
                    severity: Severity::Error,
                    location: at.clone(),
                    message: format!(
                        "`{f}` is listed twice for {} (also in group {})",
                        g.module,
                        first + 1
                    ),
                });
                continue;
            }
            let Some(m) = module else {
                // Not in the scanned tree: only the slips we can see from the name.
                if !f.contains('.') && f.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
                    problems.push(Problem {
                        severity: Severity::Warning,
                        location: at.clone(),
                        message: format!("`{f}` looks like a class without `.method`; nsys traces functions (e.g. `{f}.forward`)"),
                    });
                }
                continue;
            };
            match f.split_once('.') {
                Some((cls, meth)) => match m.classes.iter().find(|c| c.name == cls) {
                    None => problems.push(Problem {
                        severity: Severity::Error,
                        location: at.clone(),
                        message: format!("no class `{cls}` in {} ({})", g.module, m.file),
                    }),
                    Some(c) if c.nested => problems.push(Problem {
                        severity: Severity::Error,
                        location: loc(m, c.line),
                        message: format!("`{cls}` is nested in another definition; nsys cannot reach it ({at})"),
                    }),
                    Some(c) if !tree.has_method(m, c, meth) => problems.push(Problem {
                        severity: Severity::Error,
                        location: loc(m, c.line),
                        message: format!("`{cls}` has no method `{meth}`, defined or inherited in the scanned tree ({at})"),
                    }),
                    Some(_) => {}
                },
                None => {
                    if let Some(c) = m.classes.iter().find(|c| c.name == *f) {
                        problems.push(Problem {
                            severity: Severity::Error,
                            location: loc(m, c.line),
                            message: format!("`{f}` is a class without `.method`; name the method, e.g. `{f}.forward` ({at})"),
                        });
                    } else if let Some(func) = m.functions.iter().find(|x| x.name == *f) {
                        if func.nested {
                            problems.push(Problem {
                                severity: Severity::Error,
                                location: loc(m, func.line),
                                message: format!("`{f}` is nested in another function; nsys cannot reach it ({at})"),
                            });
                        }
                    } else {
                        problems.push(Problem {
                            severity: Severity::Error,
                            location: at.clone(),
                            message: format!("no top-level function `{f}` in {} ({})", g.module, m.file),
                        });
                    }
                }
            }
        }
    }
    problems
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

    #[test]
    fn merge_keeps_base_first_and_unions_modules() {
        let base = vec![Group {
            domain: "pytorch".into(),
            module: "torch.nn".into(),
            functions: vec!["Linear.forward".into()],
        }];
        let ours = vec![
            Group {
                domain: "pytorch".into(),
                module: "torch.nn".into(),
                functions: vec!["Linear.forward".into(), "Conv.forward".into()],
            },
            Group {
                domain: "pkg".into(),
                module: "pkg.m".into(),
                functions: vec!["A.forward".into()],
            },
        ];
        let merged = merge(base, ours);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].functions, vec!["Linear.forward", "Conv.forward"]);
    }
}
