//! A static map of Python packages, without importing anything: each file's import path,
//! its top-level functions and classes, their methods, bases and decorators, and which
//! submodule classes a class builds in `__init__`. Shared by the functions-trace JSON and
//! the NVTX rule set.

use super::KindOf;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use tree_sitter::Node;

use super::{Source, decorators, definition_name, statements_of, undecorated};

/// A function or method definition.
#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    /// 1-based line of the `def` (or of its first decorator).
    pub line: usize,
    pub decorators: Vec<String>,
    /// Defined inside another function or class body that nsys cannot reach.
    pub nested: bool,
    /// `self.a(...)`, `self.a.b(...)`, ... calls in the body, as the attribute chain after
    /// `self` (`["mlp", "gate"]`).
    pub self_calls: Vec<Vec<String>>,
    /// Plain `name(...)` calls in the body (functions it may run).
    pub calls: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Class {
    pub name: String,
    pub line: usize,
    /// Base classes as written (`nn.Module`, `Qwen3MoeExperts`).
    pub bases: Vec<String>,
    pub methods: Vec<Function>,
    pub nested: bool,
    /// `self.ATTR = ClassName(...)` assignments in `__init__`: attribute -> class name.
    pub attr_types: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct Module {
    /// The import path (`pithtrain.models.qwen3_moe`), or None when the file is not
    /// importable as a module of a package (with the reason).
    pub import_path: Result<String, NotImportable>,
    /// The file, relative to the scan root.
    pub file: String,
    pub path: PathBuf,
    pub functions: Vec<Function>,
    pub classes: Vec<Class>,
    /// Names imported at top level: local name -> (module, name) as written.
    pub imports: BTreeMap<String, (String, String)>,
    /// The file's first syntax error line, if tree-sitter rejected something.
    pub syntax_error: Option<usize>,
    /// What the file says about compiling (decorators and wrapping assignments).
    pub compile_facts: super::compiled::Facts,
}

/// Why a file is not importable as a module by name (said beside the function nsys cannot
/// trace; the user moves the file or passes `--package-root`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotImportable {
    #[error("not a file name")]
    NoFileName,
    #[error("a `__main__` module is not importable by name")]
    Main,
    #[error("no parent folder")]
    NoParent,
    #[error("{folder} has no __init__.py, so it is not a package")]
    NotAPackage { folder: String },
    #[error("odd folder name")]
    OddFolderName,
    #[error("the file is not under --package-root")]
    OutsideRoot,
    #[error("a package's __init__ outside any package")]
    InitOutsidePackage,
    #[error(
        "it is not in a package (no __init__.py in {folder}); pass --package-root if that folder is on sys.path"
    )]
    NotInPackage { folder: String },
}

/// The import path of `file` given the folder imports resolve from (`package_root`), or
/// found by walking up while folders hold `__init__.py`.
pub fn import_path(file: &Path, package_root: Option<&Path>) -> Result<String, NotImportable> {
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .ok_or(NotImportable::NoFileName)?;
    if stem == "__main__" {
        return Err(NotImportable::Main);
    }
    let mut parts: Vec<String> = if stem == "__init__" {
        Vec::new()
    } else {
        vec![stem.to_string()]
    };
    let mut dir = file.parent().ok_or(NotImportable::NoParent)?.to_path_buf();
    loop {
        if let Some(root) = package_root {
            if dir == root {
                break;
            }
        } else if !dir.join("__init__.py").is_file() {
            break;
        }
        if !dir.join("__init__.py").is_file() {
            return Err(NotImportable::NotAPackage {
                folder: dir.display().to_string(),
            });
        }
        let name = dir
            .file_name()
            .and_then(|s| s.to_str())
            .ok_or(NotImportable::OddFolderName)?
            .to_string();
        parts.insert(0, name);
        match dir.parent() {
            Some(p) => dir = p.to_path_buf(),
            None => break,
        }
        if package_root.is_some_and(|root| !dir.starts_with(root)) {
            return Err(NotImportable::OutsideRoot);
        }
    }
    if parts.is_empty() {
        return Err(NotImportable::InitOutsidePackage);
    }
    if parts.len() == 1
        && package_root.is_none()
        && !file
            .parent()
            .is_some_and(|d| d.join("__init__.py").is_file())
    {
        let folder = file
            .parent()
            .map(|d| d.display().to_string())
            .unwrap_or_default();
        return Err(NotImportable::NotInPackage { folder });
    }
    Ok(parts.join("."))
}

fn line(_src: &Source, node: Node) -> usize {
    node.start_position().row + 1
}

/// `self.ATTR(...)` / `self.ATTR.METHOD(...)` calls, and plain `name(...)` calls, in a body.
fn calls_in(src: &Source, body: Node) -> (Vec<Vec<String>>, Vec<String>) {
    let mut out = BTreeSet::new();
    let mut plain = BTreeSet::new();
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        if n.kind_of() == "call"
            && let Some(f) = n.field("function")
        {
            let text = src.text_of(f);
            if f.kind_of() == "identifier" {
                plain.insert(text.to_string());
            }
            let parts: Vec<&str> = text.split('.').map(str::trim).collect();
            if parts.len() >= 2
                && parts[0] == "self"
                && parts
                    .iter()
                    .all(|p| p.chars().all(|c| c.is_alphanumeric() || c == '_'))
            {
                out.insert(
                    parts[1..]
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<String>>(),
                );
            }
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c));
    }
    (out.into_iter().collect(), plain.into_iter().collect())
}

fn function(src: &Source, node: Node, nested: bool) -> Option<Function> {
    let def = undecorated(node);
    if def.kind_of() != "function_definition" {
        return None;
    }
    let (self_calls, calls) = def
        .field("body")
        .map(|b| calls_in(src, b))
        .unwrap_or_default();
    Some(Function {
        name: definition_name(src, def)?.to_string(),
        line: line(src, node),
        decorators: decorators(src, def)
            .into_iter()
            .map(str::to_string)
            .collect(),
        nested,
        self_calls,
        calls,
    })
}

/// Functions and classes defined anywhere inside `node`'s body (nsys cannot reach them).
fn nested_defs(src: &Source, body: Node, functions: &mut Vec<Function>, classes: &mut Vec<Class>) {
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        let mut c = n.walk();
        for child in n.named_children(&mut c) {
            let inner = undecorated(child);
            match inner.kind_of() {
                "function_definition" => {
                    functions.extend(function(src, child, true));
                    if let Some(b) = inner.field("body") {
                        stack.push(b);
                    }
                }
                "class_definition" => {
                    classes.extend(class(src, child, true));
                }
                _ => stack.push(child),
            }
        }
    }
}

fn class(src: &Source, node: Node, nested: bool) -> Option<Class> {
    let def = undecorated(node);
    let mut out = Class {
        name: definition_name(src, def)?.to_string(),
        line: line(src, node),
        bases: Vec::new(),
        methods: Vec::new(),
        nested,
        attr_types: BTreeMap::new(),
    };
    if let Some(sup) = def.field("superclasses") {
        let mut c = sup.walk();
        out.bases = sup
            .named_children(&mut c)
            .filter(|b| b.kind_of() != "keyword_argument")
            .map(|b| src.text_of(b).to_string())
            .collect();
    }
    let Some(body) = def.field("body") else {
        return Some(out);
    };
    for stmt in statements_of(body) {
        if let Some(f) = function(src, stmt, nested) {
            if f.name == "__init__"
                && let Some(init_body) = undecorated(stmt).field("body")
            {
                collect_attr_types(src, init_body, &mut out.attr_types);
            }
            out.methods.push(f);
        }
    }
    Some(out)
}

/// `self.x = Name(...)` (also inside `if`/`else`) in an `__init__` body.
fn collect_attr_types(src: &Source, body: Node, out: &mut BTreeMap<String, String>) {
    let mut stack = vec![body];
    while let Some(n) = stack.pop() {
        if n.kind_of() == "assignment" {
            let (Some(left), Some(right)) = (n.field("left"), n.field("right")) else {
                continue;
            };
            let target = src.text_of(left);
            let Some(attr) = target
                .strip_prefix("self.")
                .filter(|a| !a.contains(['.', ',', '[']))
            else {
                continue;
            };
            let mut values = vec![right];
            if right.kind_of() == "conditional_expression" {
                let mut c = right.walk();
                values = right.named_children(&mut c).collect();
            }
            for v in values {
                if v.kind_of() == "call"
                    && let Some(f) = v.field("function")
                {
                    let name = src.text_of(f).rsplit('.').next().unwrap_or("").to_string();
                    out.entry(attr.to_string()).or_insert(name);
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

fn imports(src: &Source, root: Node) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for stmt in statements_of(root) {
        if stmt.kind_of() != "import_from_statement" {
            continue;
        }
        let Some(module) = stmt
            .field("module_name")
            .map(|m| src.text_of(m).to_string())
        else {
            continue;
        };
        let mut c = stmt.walk();
        for name in stmt.children_by_field_name("name", &mut c) {
            let (orig, local) = match name.kind_of() {
                "aliased_import" => (
                    name.field("name").map(|n| src.text_of(n)).unwrap_or(""),
                    name.field("alias").map(|n| src.text_of(n)).unwrap_or(""),
                ),
                _ => (src.text_of(name), src.text_of(name)),
            };
            out.insert(local.to_string(), (module.clone(), orig.to_string()));
        }
    }
    out
}

/// A file the scan could not read.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {source}")]
pub struct Error {
    pub file: String,
    #[source]
    pub source: std::io::Error,
}

impl crate::exit::Classify for Error {
    fn class(&self) -> crate::exit::Class {
        // A file that is not UTF-8 text is the user's to fix; otherwise the class every
        // command gives the I/O error (a path not there is the user's, a failing disk not).
        if self.source.kind() == std::io::ErrorKind::InvalidData {
            crate::exit::Class::User
        } else {
            crate::exit::io_class(&self.source)
        }
    }
}

/// For callers that report errors as text (one line each).
impl From<Error> for String {
    fn from(e: Error) -> String {
        e.to_string()
    }
}

/// Scan one file.
pub fn scan_file(path: &Path, display: &str, package_root: Option<&Path>) -> Result<Module, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error {
        file: display.to_string(),
        source,
    })?;
    let src = Source::parse(text);
    Ok(scan_source(&src, path, display, package_root))
}

/// Scan one file already parsed.
pub fn scan_source(
    src: &Source,
    path: &Path,
    display: &str,
    package_root: Option<&Path>,
) -> Module {
    let root = src.root();
    let mut m = Module {
        import_path: import_path(path, package_root),
        file: display.to_string(),
        path: path.to_path_buf(),
        functions: Vec::new(),
        classes: Vec::new(),
        imports: imports(src, root),
        syntax_error: src.first_error().map(|e| e.line),
        compile_facts: super::compiled::facts(src),
    };
    for stmt in statements_of(root) {
        let inner = undecorated(stmt);
        match inner.kind_of() {
            "function_definition" => {
                m.functions.extend(function(src, stmt, false));
                if let Some(b) = inner.field("body") {
                    nested_defs(src, b, &mut m.functions, &mut m.classes);
                }
            }
            "class_definition" => {
                if let Some(c) = class(src, stmt, false) {
                    m.classes.push(c);
                }
                if let Some(b) = inner.field("body") {
                    for s in statements_of(b) {
                        let si = undecorated(s);
                        if si.kind_of() == "class_definition" {
                            m.classes.extend(class(src, s, true));
                        } else if si.kind_of() == "function_definition"
                            && let Some(fb) = si.field("body")
                        {
                            nested_defs(src, fb, &mut m.functions, &mut m.classes);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    m
}

/// The Python files under `paths` (files or folders), sorted; hidden folders, caches and
/// environments skipped.
pub fn python_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_file() {
            out.push(p.clone());
            continue;
        }
        for e in walkdir::WalkDir::new(p)
            .into_iter()
            .filter_entry(|e| {
                let name = e.file_name().to_string_lossy();
                e.depth() == 0
                    || !(e.file_type().is_dir()
                        && (name.starts_with('.')
                            || matches!(
                                name.as_ref(),
                                "__pycache__" | "node_modules" | "venv" | "site-packages"
                            )))
            })
            .filter_map(Result::ok)
        {
            if e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "py") {
                out.push(e.path().to_path_buf());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A scanned tree.
#[derive(Debug, Default)]
pub struct Tree {
    pub modules: Vec<Module>,
}

/// Every class in the tree by name (a name defined twice keeps all definitions).
impl Tree {
    pub fn scan(paths: &[PathBuf], package_root: Option<&Path>) -> Result<Tree, Error> {
        let base = std::env::current_dir().unwrap_or_default();
        let mut modules = Vec::new();
        for f in python_files(paths) {
            let display = f.strip_prefix(&base).unwrap_or(&f).display().to_string();
            modules.push(scan_file(&f, &display, package_root)?);
        }
        Ok(Tree { modules })
    }

    /// Classes (top level) by name, with their module.
    pub fn classes_named(&self, name: &str) -> Vec<(&Module, &Class)> {
        self.modules
            .iter()
            .flat_map(|m| {
                m.classes
                    .iter()
                    .filter(|c| !c.nested && c.name == name)
                    .map(move |c| (m, c))
            })
            .collect()
    }

    /// Whether `class` (in `module`) derives from `torch.nn.Module`, directly or through
    /// classes defined in the tree.
    pub fn is_nn_module(&self, module: &Module, class: &Class) -> bool {
        self.is_nn_module_inner(module, class, &mut BTreeSet::new())
    }

    fn is_nn_module_inner(
        &self,
        module: &Module,
        class: &Class,
        seen: &mut BTreeSet<(String, String)>,
    ) -> bool {
        if !seen.insert((module.file.clone(), class.name.clone())) {
            return false;
        }
        class.bases.iter().any(|base| {
            let last = base.rsplit('.').next().unwrap_or(base);
            let from_torch = |local: &str| {
                module
                    .imports
                    .get(local)
                    .is_some_and(|(m, orig)| orig == "Module" && m.starts_with("torch"))
            };
            if matches!(base.as_str(), "nn.Module" | "torch.nn.Module")
                || (base == "Module" && from_torch("Module"))
            {
                return true;
            }
            self.resolve_class(module, last)
                .into_iter()
                .any(|(m, c)| self.is_nn_module_inner(m, c, seen))
        })
    }

    /// The class a name refers to in `module`: defined there, or imported from a scanned
    /// module, or else any class of that name in the tree.
    pub fn resolve_class<'t>(
        &'t self,
        module: &'t Module,
        name: &str,
    ) -> Vec<(&'t Module, &'t Class)> {
        if let Some(c) = module.classes.iter().find(|c| !c.nested && c.name == name) {
            return vec![(module, c)];
        }
        if let Some((from, orig)) = module.imports.get(name) {
            let found: Vec<(&Module, &Class)> = self
                .modules
                .iter()
                .filter(|m| {
                    m.import_path.as_deref().is_ok_and(|p| {
                        p == from || p.ends_with(&format!(".{}", from.trim_start_matches('.')))
                    })
                })
                .flat_map(|m| {
                    m.classes
                        .iter()
                        .filter(|c| !c.nested && &c.name == orig)
                        .map(move |c| (m, c))
                })
                .collect();
            if !found.is_empty() {
                return found;
            }
        }
        self.classes_named(name)
    }

    /// Whether `Class.method` exists: defined on the class or inherited through classes
    /// in the tree.
    pub fn has_method(&self, module: &Module, class: &Class, method: &str) -> bool {
        let mut seen = BTreeSet::new();
        self.has_method_inner(module, class, method, &mut seen)
    }

    fn has_method_inner(
        &self,
        module: &Module,
        class: &Class,
        method: &str,
        seen: &mut BTreeSet<(String, String)>,
    ) -> bool {
        if !seen.insert((module.file.clone(), class.name.clone())) {
            return false;
        }
        if class.methods.iter().any(|m| m.name == method) {
            return true;
        }
        class.bases.iter().any(|b| {
            let last = b.rsplit('.').next().unwrap_or(b);
            self.resolve_class(module, last)
                .into_iter()
                .any(|(m, c)| self.has_method_inner(m, c, method, seen))
        })
    }
}
