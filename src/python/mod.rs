//! Python source as tree-sitter sees it: parsing, syntax-error detection and the small
//! tree walks that every part of the tool needs (statements of a block, names of
//! definitions). Nothing here knows about pithtrain or about rules.

use tree_sitter::{Node, Parser, Tree};

pub mod binds;
pub mod builtins;
pub mod compiled;
pub mod eval;
pub mod host;
pub mod layout;
pub mod literal;
pub mod names;
pub mod pattern;
pub mod printed;
pub mod scan;
pub mod select;
pub mod style;

/// `Node::kind` without its cost: tree-sitter's converts the kind's C string to UTF-8 on
/// every call, and the walks ask it for every node; the grammar's kind names are read once.
pub trait KindOf: Sized {
    fn kind_of(&self) -> &'static str;
    /// `child_by_field_name` without its cost: tree-sitter finds a field's id by comparing
    /// the name with every field of the grammar (`strncmp`) on every call; the ids of the
    /// fields the tool asks about are looked up once.
    fn field(&self, name: &str) -> Option<Self>;
}

impl KindOf for Node<'_> {
    #[inline]
    fn kind_of(&self) -> &'static str {
        let id = self.kind_id();
        match kinds().get(id as usize) {
            Some(k) => k,
            // Outside the grammar's table: tree-sitter's own error symbols.
            None if id == u16::MAX => "ERROR",
            None => "_ERROR",
        }
    }

    #[inline]
    fn field(&self, name: &str) -> Option<Self> {
        match FIELDS.iter().position(|f| *f == name) {
            Some(i) => self.child_by_field_id(field_ids()[i]?.get()),
            None => self.child_by_field_name(name),
        }
    }
}

/// The fields the tool reads, by name (any other is looked up by tree-sitter).
const FIELDS: [&str; 19] = [
    "body",
    "name",
    "left",
    "function",
    "right",
    "parameters",
    "alias",
    "module_name",
    "attribute",
    "value",
    "superclasses",
    "operator",
    "object",
    "arguments",
    "type",
    "definition",
    "condition",
    "return_type",
    "consequence",
];

/// The grammar's id of each of `FIELDS` (None: a field the grammar does not have).
fn field_ids() -> &'static [Option<std::num::NonZeroU16>; FIELDS.len()] {
    static IDS: std::sync::OnceLock<[Option<std::num::NonZeroU16>; FIELDS.len()]> =
        std::sync::OnceLock::new();
    IDS.get_or_init(|| {
        let language: tree_sitter::Language = tree_sitter_python::LANGUAGE.into();
        FIELDS.map(|f| language.field_id_for_name(f))
    })
}

fn kinds() -> &'static [&'static str] {
    static KINDS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let language: tree_sitter::Language = tree_sitter_python::LANGUAGE.into();
        // The names live as long as the grammar (static data); copied once into the process.
        (0..language.node_kind_count() as u16)
            .map(|id| -> &'static str {
                Box::leak(
                    language
                        .node_kind_for_id(id)
                        .unwrap_or("")
                        .to_string()
                        .into_boxed_str(),
                )
            })
            .collect()
    })
}

/// A parsed Python file: its text and its tree, kept together so node text can be read.
#[derive(Clone)]
pub struct Source {
    pub text: String,
    pub tree: Tree,
}

/// Parses shared within the process (see `Source::share`): a few, by exact text.
static SHARED: std::sync::Mutex<Vec<(String, Tree)>> = std::sync::Mutex::new(Vec::new());

/// Where tree-sitter found a syntax error: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntaxErrorAt {
    pub line: usize,
    pub column: usize,
}

impl Source {
    /// Parse `text`. Parsing itself never fails; call `first_error` to learn whether the
    /// grammar accepted the whole file.
    pub fn parse(text: String) -> Source {
        Self::parse_with(text, None)
    }

    fn parse_with(text: String, old: Option<&Tree>) -> Source {
        thread_local! {
            // One parser per thread: setting the language up is not free, and the engine
            // parses many small patterns.
            static PARSER: std::cell::RefCell<Parser> = std::cell::RefCell::new({
                let mut parser = Parser::new();
                parser
                    .set_language(&tree_sitter_python::LANGUAGE.into())
                    .expect("the bundled tree-sitter-python grammar matches the tree-sitter version");
                parser
            });
        }
        let tree = PARSER
            .with(|p| p.borrow_mut().parse(&text, old))
            .expect("parsing without a timeout always returns a tree");
        Source { text, tree }
    }

    /// Parse `text`, or take the tree of an earlier parse of exactly this text that was
    /// shared with `share` (the detail-layer choice and the planner read the model file).
    pub fn parse_reusing(text: String) -> Source {
        let shared = SHARED.lock().ok().and_then(|s| {
            s.iter()
                .find(|(t, _)| *t == text)
                .map(|(_, tree)| tree.clone())
        });
        match shared {
            Some(tree) => Source { text, tree },
            None => Self::parse(text),
        }
    }

    /// Offer this parse to later `parse_reusing` calls of the same text.
    pub fn share(&self) {
        if let Ok(mut s) = SHARED.lock() {
            s.push((self.text.clone(), self.tree.clone()));
        }
    }

    /// Parse `new_text`, which is this source with `edits` applied: each edit replaced
    /// `start..old_end` of this text by `new_len` bytes, edits in order and not
    /// overlapping. Only the edited parts are parsed again.
    pub fn reparse(&self, new_text: String, edits: &[(usize, usize, usize)]) -> Source {
        let mut tree = self.tree.clone();
        // Back to front, so each edit's offsets are still those of the current text.
        let mut shift: isize = edits
            .iter()
            .map(|&(s, e, n)| n as isize - (e - s) as isize)
            .sum();
        for &(start, old_end, new_len) in edits.iter().rev() {
            shift -= new_len as isize - (old_end - start) as isize;
            let new_start = (start as isize + shift) as usize;
            let inserted = &new_text[new_start..new_start + new_len];
            let start_position = point_at(&self.text, start);
            let old_end_position = point_at(&self.text, old_end);
            let rows = inserted.matches('\n').count();
            let column = match inserted.rfind('\n') {
                Some(i) => inserted.len() - i - 1,
                None => start_position.column + inserted.len(),
            };
            tree.edit(&tree_sitter::InputEdit {
                start_byte: start,
                old_end_byte: old_end,
                new_end_byte: start + new_len,
                start_position,
                old_end_position,
                new_end_position: tree_sitter::Point {
                    row: start_position.row + rows,
                    column,
                },
            });
        }
        Self::parse_with(new_text, Some(&tree))
    }

    pub fn root(&self) -> Node<'_> {
        self.tree.root_node()
    }

    pub fn text_of(&self, node: Node) -> &str {
        &self.text[node.byte_range()]
    }

    /// The first error or missing node, in source order, if the grammar rejected anything.
    pub fn first_error(&self) -> Option<SyntaxErrorAt> {
        first_error_node(self.root()).map(|n| {
            let p = n.start_position();
            SyntaxErrorAt {
                line: p.row + 1,
                column: p.column + 1,
            }
        })
    }

    /// 1-based line number of a byte offset.
    pub fn line_of(&self, byte: usize) -> usize {
        line_of(&self.text, byte)
    }
}

/// The names of a function's parameters (`self`, `x`, `*args` as `args`, ...).
pub fn parameter_names<'s>(src: &'s Source, func: Node) -> Vec<&'s str> {
    let Some(params) = func.field("parameters") else {
        return Vec::new();
    };
    let mut cursor = params.walk();
    params
        .named_children(&mut cursor)
        .filter_map(|p| {
            let ident = match p.kind_of() {
                "identifier" => Some(p),
                _ => p.field("name").or_else(|| p.named_child(0)).and_then(|n| {
                    // `*args: T` nests the splat inside the typed parameter.
                    if n.kind_of() == "identifier" {
                        Some(n)
                    } else {
                        n.named_child(0).filter(|i| i.kind_of() == "identifier")
                    }
                }),
            };
            ident.map(|n| src.text_of(n))
        })
        .collect()
}

/// Where `word` occurs in `text[range]` as a whole word (not inside a longer name), as
/// byte offsets in `text`, in order and not overlapping. memchr's vectorised search, not
/// `str::find`'s two-way search: the name checks look names up in whole functions, some
/// hundreds of times an `add`.
pub fn word_occurrences<'t>(
    text: &'t str,
    range: std::ops::Range<usize>,
    word: &'t str,
) -> impl Iterator<Item = usize> + 't {
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let start = range.start;
    // A match of a UTF-8 needle in UTF-8 text starts and ends on character boundaries.
    memchr::memmem::find_iter(&text.as_bytes()[range], word.as_bytes())
        .map(move |i| start + i)
        .filter(move |&at| {
            !is_word(text[..at].chars().next_back())
                && !is_word(text[at + word.len()..].chars().next())
        })
}

/// Row and column (0-based, bytes) of a byte offset.
fn point_at(text: &str, byte: usize) -> tree_sitter::Point {
    let before = &text.as_bytes()[..byte];
    let row = before.iter().filter(|&&b| b == b'\n').count();
    let column = before.iter().rev().take_while(|&&b| b != b'\n').count();
    tree_sitter::Point { row, column }
}

/// 1-based line number of a byte offset in `text`.
pub fn line_of(text: &str, byte: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..byte.min(text.len())]).count() + 1
}

fn first_error_node(node: Node) -> Option<Node> {
    if node.is_error() || node.is_missing() {
        return Some(node);
    }
    if !node.has_error() {
        return None;
    }
    let mut cursor = node.walk();
    let children: Vec<Node> = node.children(&mut cursor).collect();
    children.into_iter().find_map(first_error_node)
}

/// Node kinds that are statements (what a block holds), compound or simple.
pub fn is_statement(node: Node) -> bool {
    node.is_named()
        && node.kind_of() != "comment"
        && node
            .parent()
            .is_some_and(|p| matches!(p.kind_of(), "module" | "block"))
}

/// Compound statements whose bodies hold further statements of the same scope.
pub fn is_compound(kind: &str) -> bool {
    matches!(
        kind,
        "if_statement"
            | "for_statement"
            | "while_statement"
            | "with_statement"
            | "try_statement"
            | "match_statement"
            | "elif_clause"
            | "else_clause"
            | "except_clause"
            | "except_group_clause"
            | "finally_clause"
            | "case_clause"
    )
}

/// A definition that opens a new scope.
pub fn is_definition(kind: &str) -> bool {
    matches!(
        kind,
        "function_definition" | "class_definition" | "decorated_definition"
    )
}

/// The definition inside a `decorated_definition`, or the node itself.
pub fn undecorated(node: Node) -> Node {
    if node.kind_of() == "decorated_definition" {
        node.field("definition").unwrap_or(node)
    } else {
        node
    }
}

/// The statement that stands for a definition in its block: the `decorated_definition`
/// around it when it has decorators, so that edits before it go above the decorators.
pub fn with_decorators(node: Node) -> Node {
    match node.parent() {
        Some(p) if p.kind_of() == "decorated_definition" => p,
        _ => node,
    }
}

/// The decorators of a function or class definition, as source text.
pub fn decorators<'a>(src: &'a Source, def: Node) -> Vec<&'a str> {
    let holder = with_decorators(def);
    if holder.kind_of() != "decorated_definition" {
        return Vec::new();
    }
    let mut cursor = holder.walk();
    holder
        .named_children(&mut cursor)
        .filter(|c| c.kind_of() == "decorator")
        .map(|c| src.text_of(c))
        .collect()
}

/// Statements directly held by a block-like node (module, block, or a clause's body),
/// comments excluded.
pub fn statements_of(block: Node) -> Vec<Node> {
    let mut cursor = block.walk();
    block
        .named_children(&mut cursor)
        .filter(|c| c.kind_of() != "comment")
        .collect()
}

/// The blocks directly nested in a compound statement (its body and the bodies of its
/// `elif`/`else`/`except`/`finally` clauses), in source order.
pub fn nested_blocks(stmt: Node) -> Vec<Node> {
    let mut out = Vec::new();
    let mut cursor = stmt.walk();
    for child in stmt.named_children(&mut cursor) {
        match child.kind_of() {
            "block" => out.push(child),
            k if is_compound(k) => out.extend(nested_blocks(child)),
            _ => {}
        }
    }
    out
}

/// Every statement of a file, in every body (functions and classes included), in source
/// order.
pub fn all_statements(root: Node) -> Vec<Node> {
    fn walk<'t>(block: Node<'t>, out: &mut Vec<Node<'t>>) {
        for stmt in statements_of(block) {
            out.push(stmt);
            let inner = undecorated(stmt);
            match inner.kind_of() {
                "function_definition" | "class_definition" => {
                    if let Some(body) = inner.field("body") {
                        walk(body, out);
                    }
                }
                _ => {
                    for b in nested_blocks(inner) {
                        walk(b, out);
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(root, &mut out);
    out
}

/// The name of a function or class definition.
pub fn definition_name<'a>(src: &'a Source, def: Node) -> Option<&'a str> {
    undecorated(def).field("name").map(|n| src.text_of(n))
}

/// The docstring statement of a body (module, class or function), if the body opens with one.
pub fn docstring(body: Node) -> Option<Node> {
    let first = statements_of(body).into_iter().next()?;
    if first.kind_of() != "expression_statement" {
        return None;
    }
    let mut cursor = first.walk();
    let only: Vec<Node> = first.named_children(&mut cursor).collect();
    (only.len() == 1 && matches!(only[0].kind_of(), "string" | "concatenated_string"))
        .then_some(first)
}

/// The class whose body directly holds `def` (a method's class), if any.
pub fn enclosing_class(def: Node) -> Option<Node> {
    let holder = with_decorators(def);
    let block = holder.parent().filter(|p| p.kind_of() == "block")?;
    block.parent().filter(|c| c.kind_of() == "class_definition")
}

/// Innermost enclosing function definitions of `node`, innermost first.
pub fn enclosing_functions(node: Node) -> Vec<Node> {
    let mut out = Vec::new();
    let mut cur = node.parent();
    while let Some(n) = cur {
        if n.kind_of() == "function_definition" {
            out.push(n);
        }
        cur = n.parent();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_occurrences_are_str_finds_whole_words() {
        // The second implementation: `str::find` from after each match, as the name
        // checks searched before, with the same whole-word test.
        fn by_find(text: &str, range: std::ops::Range<usize>, word: &str) -> Vec<usize> {
            let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            let (mut out, mut from) = (Vec::new(), range.start);
            while let Some(i) = text[from..range.end].find(word) {
                let at = from + i;
                from = at + word.len();
                if !is_word(text[..at].chars().next_back()) && !is_word(text[from..].chars().next())
                {
                    out.push(at);
                }
            }
            out
        }
        let text = "x = xx + x_x + éx + xé + x\nx(x)x\n  x.x = [x for x in x]\nxx";
        for word in ["x", "xx", "x_x", "é", "for"] {
            for range in [0..text.len(), 4..text.len(), 0..20, 9..9, 20..text.len()] {
                assert_eq!(
                    word_occurrences(text, range.clone(), word).collect::<Vec<_>>(),
                    by_find(text, range.clone(), word),
                    "{word:?} in {range:?}"
                );
            }
        }
        assert_eq!(word_occurrences(text, 0..text.len(), "x").count(), 10);
    }

    #[test]
    fn a_field_by_its_cached_id_is_the_field_by_name() {
        // Every field the table names exists in the grammar, and reads the same child as
        // tree-sitter's own lookup, on every node of a file that has each of them.
        let src = Source::parse(
            "import a.b as c\nfrom m import n as o\n\n\nclass K(B):\n    def f(self, x) -> int:\n        for i in x:\n            y = i.v + 1\n        while x:\n            pass\n        if y:\n            return g(y)\n        return y\n"
                .to_string(),
        );
        assert!(field_ids().iter().all(Option::is_some));
        let mut stack = vec![src.root()];
        let mut found = std::collections::BTreeSet::new();
        while let Some(n) = stack.pop() {
            for name in FIELDS.iter().chain(&["key", "no_such_field"]) {
                let by_id = n.field(name);
                assert_eq!(by_id, n.child_by_field_name(name), "{name} of {}", n.kind());
                if by_id.is_some() {
                    found.insert(*name);
                }
            }
            let mut c = n.walk();
            stack.extend(n.children(&mut c));
        }
        assert!(
            found.len() >= 15,
            "the file exercises most fields: {found:?}"
        );
    }

    #[test]
    fn incremental_reparse_equals_a_fresh_parse() {
        let old = Source::parse(
            "def f():\n    x = 1\n    return x\n\n\ndef g():\n    pass\n".to_string(),
        );
        let new_text =
            "def f():\n    x = 1\n    y = x\n    return y\n\n\ndef g():\n    z = 2\n".to_string();
        // Inserted "    y = x\n" at 19, replaced "return x" by "return y", replaced "pass" by "z = 2".
        let edits = [(19, 19, 10), (23, 31, 8), (47, 51, 5)];
        let re = old.reparse(new_text.clone(), &edits);
        let fresh = Source::parse(new_text);
        fn nodes(n: tree_sitter::Node, out: &mut Vec<(String, usize, usize)>) {
            out.push((n.kind_of().to_string(), n.start_byte(), n.end_byte()));
            let mut c = n.walk();
            for ch in n.children(&mut c) {
                nodes(ch, out);
            }
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        nodes(re.root(), &mut a);
        nodes(fresh.root(), &mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn reports_first_syntax_error_line() {
        let src = Source::parse("x = 1\ndef f(:\n    pass\n".to_string());
        assert_eq!(src.first_error().map(|e| e.line), Some(2));
        assert!(Source::parse("x = 1\n".to_string()).first_error().is_none());
    }

    #[test]
    fn finds_docstring_only_when_first() {
        let src = Source::parse("def f():\n    \"\"\"Doc.\"\"\"\n    return 1\n".to_string());
        let def = src.root().named_child(0).unwrap();
        let body = def.field("body").unwrap();
        assert!(docstring(body).is_some());
        let src = Source::parse("def f():\n    x = 1\n    \"\"\"Not a doc.\"\"\"\n".to_string());
        let def = src.root().named_child(0).unwrap();
        assert!(docstring(def.field("body").unwrap()).is_none());
    }

    #[test]
    fn kind_of_is_kind() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/pithtrain/pithtrain/dualpipe/dualpipev.py"
        ))
        .unwrap();
        let src = Source::parse(text);
        let mut cursor = src.root().walk();
        let mut seen = 0;
        loop {
            let n = cursor.node();
            assert_eq!(n.kind_of(), n.kind());
            seen += 1;
            if cursor.goto_first_child() || cursor.goto_next_sibling() {
                continue;
            }
            while cursor.goto_parent() && !cursor.goto_next_sibling() {}
            if cursor.node().id() == src.root().id() {
                break;
            }
        }
        assert!(seen > 1000, "{seen}");
        // Kinds outside the grammar's table (ERROR) come from tree-sitter itself.
        let broken = Source::parse("def f(:\n    x = = 1\n".into());
        let mut stack = vec![broken.root()];
        let mut errors = 0;
        while let Some(n) = stack.pop() {
            assert_eq!(n.kind_of(), n.kind());
            errors += usize::from(n.kind_of() == "ERROR");
            let mut c = n.walk();
            stack.extend(n.children(&mut c));
        }
        assert!(errors > 0);
    }
}
