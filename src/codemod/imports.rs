//! Adding a module-level import where isort (ruff's `I` rules) would put it, and only
//! when the names it binds are not bound in the module already.

use crate::python::KindOf;
use tree_sitter::Node;

use super::markers::Blank;
use crate::python::{self, Source};

/// Top-level modules of the standard library that code commonly imports.
const STDLIB: &[&str] = &[
    "abc",
    "argparse",
    "array",
    "ast",
    "asyncio",
    "atexit",
    "base64",
    "bisect",
    "builtins",
    "collections",
    "contextlib",
    "copy",
    "csv",
    "ctypes",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "errno",
    "fnmatch",
    "functools",
    "gc",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "importlib",
    "inspect",
    "io",
    "itertools",
    "json",
    "logging",
    "math",
    "multiprocessing",
    "operator",
    "os",
    "pathlib",
    "pickle",
    "platform",
    "pprint",
    "queue",
    "random",
    "re",
    "shutil",
    "signal",
    "socket",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "sys",
    "tempfile",
    "textwrap",
    "threading",
    "time",
    "traceback",
    "types",
    "typing",
    "unittest",
    "uuid",
    "warnings",
    "weakref",
    "zipfile",
];

/// isort's section order: future, standard library, third party, first party, local.
fn section(module: &str, first_party: &[String]) -> u8 {
    let top = module.split('.').next().unwrap_or("");
    if module.starts_with('.') {
        4
    } else if top == "__future__" {
        0
    } else if STDLIB.contains(&top) {
        1
    } else if first_party.iter().any(|p| p == top) {
        3
    } else {
        2
    }
}

/// (section, `from` imports after plain ones, module lowercased): isort's order.
fn sort_key(src: &Source, stmt: Node, first_party: &[String]) -> Option<(u8, u8, String)> {
    let (is_from, module) = match stmt.kind_of() {
        "import_statement" => (
            0,
            stmt.named_child(0).map(|n| {
                let n = if n.kind_of() == "aliased_import" {
                    n.field("name").unwrap_or(n)
                } else {
                    n
                };
                src.text_of(n).to_string()
            })?,
        ),
        "import_from_statement" => (1, src.text_of(stmt.field("module_name")?).to_string()),
        "future_import_statement" => (1, "__future__".to_string()),
        _ => return None,
    };
    Some((
        section(&module, first_party),
        is_from,
        module.to_lowercase(),
    ))
}

/// Names an import statement (parsed alone) binds.
fn bound_names(import: &Source) -> Vec<String> {
    let mut out = Vec::new();
    for stmt in python::statements_of(import.root()) {
        let plain = stmt.kind_of() == "import_statement";
        if !plain && stmt.kind_of() != "import_from_statement" {
            continue;
        }
        let module = stmt.field("module_name").map(|m| m.id());
        let mut cursor = stmt.walk();
        for c in stmt.named_children(&mut cursor) {
            if Some(c.id()) == module {
                continue;
            }
            match c.kind_of() {
                "aliased_import" => {
                    if let Some(a) = c.field("alias") {
                        out.push(import.text_of(a).to_string());
                    }
                }
                "dotted_name" => {
                    let t = import.text_of(c);
                    let name = if plain {
                        t.split('.').next()
                    } else {
                        t.rsplit('.').next()
                    };
                    out.extend(name.map(str::to_string));
                }
                _ => {}
            }
        }
    }
    out
}

/// A rule's import that is not one import statement.
#[derive(Debug, thiserror::Error)]
#[error("`{import}` is not a single import statement")]
pub struct NotAnImport {
    pub import: String,
}

/// Where to add `import` (a single import statement), or `None` when every name it
/// binds is bound already. Returns the byte offset (a line start), the import line, and
/// on which side an empty line must come with it when it opens an isort section.
pub fn plan_import(
    src: &Source,
    import: &str,
    first_party: &[String],
) -> Result<Option<(usize, String, Blank)>, NotAnImport> {
    let parsed = Source::parse(format!("{}\n", import.trim()));
    let stmts = python::statements_of(parsed.root());
    if parsed.first_error().is_some()
        || stmts.len() != 1
        || !matches!(
            stmts[0].kind_of(),
            "import_statement" | "import_from_statement"
        )
    {
        return Err(NotAnImport {
            import: import.to_string(),
        });
    }
    let wanted = bound_names(&parsed);
    let bound = crate::python::names::module_bindings(src);
    if wanted.iter().all(|n| bound.contains(n)) {
        return Ok(None);
    }
    let key = sort_key(&parsed, stmts[0], first_party).expect("an import");
    let top: Vec<Node> = python::statements_of(src.root());
    let imports: Vec<(Node, (u8, u8, String))> = top
        .iter()
        .filter_map(|s| sort_key(src, *s, first_party).map(|k| (*s, k)))
        .collect();
    let text = &src.text;
    let line_start = |at: usize| text[..at].rfind('\n').map_or(0, |i| i + 1);
    let after_line = |node: Node| {
        text[node.end_byte()..]
            .find('\n')
            .map_or(text.len(), |i| node.end_byte() + i + 1)
    };
    let prev = imports.iter().rfind(|(_, k)| *k < key);
    let next = imports.iter().find(|(_, k)| *k > key);
    let line = import.trim().to_string();
    let (at, blank) = match (prev, next) {
        (Some((node, k)), _) if k.0 == key.0 => (after_line(*node), Blank::None),
        (_, Some((node, k))) if k.0 == key.0 => (line_start(node.start_byte()), Blank::None),
        // A section of its own: isort separates sections by one empty line.
        (Some((node, _)), _) => (after_line(*node), Blank::Before),
        (None, Some((node, _))) => (line_start(node.start_byte()), Blank::After),
        // No imports at all: below the docstring (one empty line after it), or first.
        (None, None) => match python::docstring(src.root()) {
            Some(d) => (after_line(d), Blank::Before),
            None => (0, Blank::After),
        },
    };
    Ok(Some((at, line, blank)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(code: &str, import: &str) -> Option<usize> {
        let src = Source::parse(code.to_string());
        plan_import(&src, import, &["pithtrain".to_string()])
            .unwrap()
            .map(|(at, _, _)| python::line_of(code, at))
    }

    #[test]
    fn skips_names_already_imported_under_another_path() {
        let code = "import torch\nfrom torch.distributed._tensor import DTensor\n";
        assert_eq!(
            place(code, "from torch.distributed.tensor import DTensor"),
            None
        );
    }

    #[test]
    fn goes_where_isort_puts_it() {
        let code = "import os\n\nimport torch\nfrom torch.optim import Optimizer\n\nfrom pithtrain.config import X\n";
        assert_eq!(
            place(code, "from torch.distributed.tensor import DTensor"),
            Some(4)
        );
        assert_eq!(place(code, "import numpy"), Some(3));
        assert_eq!(place(code, "import pickle"), Some(2));
        assert_eq!(place(code, "from pithtrain.z import Y"), Some(7));
    }
}
