//! The positions in a scope's body: `body-start` (below a docstring, and below
//! `from __future__` imports in a module) and `body-end` (below its last statement).

use crate::python::KindOf;
use tree_sitter::Node;

use super::statement::own_lines;
use super::{Build, BuildError, Refusal};
use crate::codemod::edit::{Region, line_start, next_line_start};
use crate::python;

/// The scope's body: its block and statements (at least one, on lines of their own below
/// the header), and the indentation they are at.
struct Body<'t> {
    block: Node<'t>,
    stmts: Vec<Node<'t>>,
    base: String,
    module: bool,
}

fn body<'t>(b: &Build<'_, 't>) -> Result<Body<'t>, BuildError> {
    let (scope, text) = (b.resolved.scope, &b.cx.src.text);
    let module = scope.kind_of() == "module";
    let block = if module {
        Some(scope)
    } else {
        scope.field("body")
    };
    let block = block.ok_or(BuildError::place(None, Refusal::NoBody))?;
    let stmts = python::statements_of(block);
    let Some(first) = stmts.first().copied() else {
        return Err(BuildError::place(None, Refusal::EmptyBody));
    };
    if !module && first.start_position().row == scope.start_position().row {
        let line = Some(scope.start_position().row + 1);
        return Err(BuildError::place(line, Refusal::BodyOnHeaderLine));
    }
    let base = if module {
        String::new()
    } else {
        text[line_start(text, first.start_byte())..first.start_byte()].to_string()
    };
    Ok(Body {
        block,
        stmts,
        base,
        module,
    })
}

/// `body-start`: above the body's first statement, below its docstring (and, in a module,
/// below the `from __future__` imports, which must stay first).
pub(super) fn start(b: &Build) -> Result<Vec<Region>, BuildError> {
    let Body {
        block,
        stmts,
        base,
        module,
    } = body(b)?;
    let text = &b.cx.src.text;
    let first = stmts[0];
    let mut after: Option<Node> = python::docstring(block);
    if module {
        for s in &stmts {
            if s.kind_of() == "future_import_statement" || after.is_some_and(|a| a.id() == s.id()) {
                after = Some(*s);
            } else {
                break;
            }
        }
    }
    let at = match after {
        Some(node) => next_line_start(text, node.end_byte()),
        None => {
            let mut cursor = block.walk();
            let first_child = block.children(&mut cursor).next().unwrap_or(first);
            line_start(text, first_child.start_byte())
        }
    };
    b.insert(at, &base, first.start_byte())
}

/// `body-end`: below the body's last statement (its whole block, when compound).
pub(super) fn end(b: &Build) -> Result<Vec<Region>, BuildError> {
    let Body { stmts, base, .. } = body(b)?;
    let last = *stmts.last().expect("a body has a statement");
    own_lines(b.cx.src, last)
        .map_err(|why| BuildError::place(Some(last.start_position().row + 1), why))?;
    let at = next_line_start(&b.cx.src.text, last.end_byte());
    b.insert(at, &base, last.start_byte())
}
