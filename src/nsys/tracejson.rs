//! The `--python-functions-trace` JSON nsys reads, built from a static scan of the
//! sources (nothing is imported), and checked against the tree.
//!
//! Format: a JSON array of `{"domain": D, "module": M, "functions": [F, ...]}`, where M is
//! the import path of the module defining F, and F is `"Class.method"` or `"func"`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::python::scan::{Module, Tree};
pub use crate::python::select::{Problem, Severity, Target};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Group {
    pub domain: String,
    pub module: String,
    pub functions: Vec<String>,
}

fn loc(m: &Module, line: usize) -> String {
    format!("{}:{line}", m.file)
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

/// Read a functions-trace JSON: a file that cannot be read keeps its I/O class, one that
/// is not such a JSON is the user's to fix.
pub fn read_groups(path: &Path) -> Result<Vec<Group>, crate::nsys::error::Error> {
    let text = std::fs::read_to_string(path).map_err(|source| crate::nsys::error::Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| {
        crate::nsys::error::Error::input(
            path,
            format!("not a functions-trace JSON (an array of {{domain, module, functions}}): {e}"),
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
