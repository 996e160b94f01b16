//! The positions at an anchor statement: `before` it (above the comments attached to it),
//! `after` it (below its whole block), and `replace`/`wrap` it (the original kept in the
//! region's marker, `{ORIGINAL}` in the template standing for it).

use crate::python::KindOf;
use tree_sitter::Node;

use super::{Build, BuildError, Refusal};
use crate::codemod::edit::{Region, eols_of, line_start, next_line_start};
use crate::codemod::markers;
use crate::codemod::template::Original;
use crate::python::{self, Source};

/// The anchor statement, on lines of its own.
fn anchor<'t>(b: &Build<'_, 't>) -> Result<Node<'t>, BuildError> {
    let stmt = b
        .resolved
        .anchor
        .expect("positions with an anchor resolve one");
    own_lines(b.cx.src, stmt)
        .map_err(|why| BuildError::place(Some(stmt.start_position().row + 1), why))?;
    Ok(stmt)
}

/// The indentation of `stmt`'s line.
fn base_of<'s>(src: &'s Source, stmt: Node) -> &'s str {
    &src.text[line_start(&src.text, stmt.start_byte())..stmt.start_byte()]
}

/// `before`: above the anchor and the comments attached to it; never above a docstring or
/// a `from __future__` import, which must stay first.
pub(super) fn before(b: &Build) -> Result<Vec<Region>, BuildError> {
    let stmt = anchor(b)?;
    let is_docstring = stmt
        .parent()
        .and_then(python::docstring)
        .is_some_and(|d| d.id() == stmt.id());
    if is_docstring || is_future_import(stmt) {
        let line = Some(stmt.start_position().row + 1);
        return Err(BuildError::place(line, Refusal::AboveDocstring));
    }
    let base = base_of(b.cx.src, stmt);
    let at = b.cache.outside(first_attached_comment(b.cx.src, stmt));
    b.insert(at, base, stmt.start_byte())
}

/// `after`: below the anchor (below its whole block when it is compound).
pub(super) fn after(b: &Build) -> Result<Vec<Region>, BuildError> {
    let stmt = anchor(b)?;
    let base = base_of(b.cx.src, stmt);
    let at = next_line_start(&b.cx.src.text, stmt.end_byte());
    b.insert(at, base, stmt.start_byte())
}

/// `replace` and `wrap`: the anchor's lines replaced by the region, which keeps them
/// (each with its own line ending) for `remove`.
pub(super) fn replace(b: &Build) -> Result<Vec<Region>, BuildError> {
    let stmt = anchor(b)?;
    let (src, text) = (b.cx.src, &b.cx.src.text);
    let base = base_of(src, stmt);
    let ls = line_start(text, stmt.start_byte());
    let end = next_line_start(text, stmt.end_byte());
    let original_text = &text[ls..end];
    let lines: Vec<&str> = original_text
        .strip_suffix('\n')
        .unwrap_or(original_text)
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .collect();
    let mut in_string = Vec::with_capacity(lines.len());
    let mut offset = ls;
    for l in &lines {
        in_string.push(offset != ls && inside_string(src, offset));
        offset += l.len() + 1 + usize::from(text[offset..].starts_with(&format!("{l}\r\n")));
    }
    let original = Original {
        lines: lines.clone(),
        in_string,
    };
    let r = b.render(Some(&original), base)?;
    let stash = (&lines[..], eols_of(original_text));
    Ok(vec![b.statements(
        ls..end,
        base,
        stash,
        &r,
        stmt.start_byte(),
    )])
}

fn is_future_import(node: Node) -> bool {
    node.kind_of() == "future_import_statement"
}

/// The statement's own line must hold nothing before it but indentation, and nothing
/// after it but a comment.
pub(super) fn own_lines(src: &Source, stmt: Node) -> Result<(), Refusal> {
    let text = &src.text;
    let ls = line_start(text, stmt.start_byte());
    if !text[ls..stmt.start_byte()].trim().is_empty() {
        return Err(Refusal::SharesFirstLine);
    }
    let end = stmt.end_byte();
    let nl = text[end..].find('\n').map_or(text.len(), |i| end + i);
    let rest = text[end..nl].trim();
    if !rest.is_empty() && !rest.starts_with('#') {
        return Err(Refusal::SharesLastLine(rest.to_string()));
    }
    if nl == text.len() {
        return Err(Refusal::LastLineUnended);
    }
    Ok(())
}

/// Comments directly above `stmt` (no blank line between) belong to it: `before` goes
/// above them.
fn first_attached_comment(src: &Source, stmt: Node) -> usize {
    let mut first = stmt;
    while let Some(prev) = first.prev_sibling() {
        let adjacent = prev.end_position().row + 1 == first.start_position().row;
        let own_line = src.text[line_start(&src.text, prev.start_byte())..prev.start_byte()]
            .trim()
            .is_empty();
        // A marker of another region is not a comment about this statement.
        let marker = markers::is_marker_line(src.text_of(prev));
        if prev.kind_of() == "comment" && adjacent && own_line && !marker {
            first = prev;
        } else {
            break;
        }
    }
    line_start(&src.text, first.start_byte())
}

/// Whether a byte offset lies inside a string literal that started before it.
fn inside_string(src: &Source, at: usize) -> bool {
    let Some(mut node) = src.root().descendant_for_byte_range(at, at) else {
        return false;
    };
    loop {
        if node.kind_of() == "string" && node.start_byte() < at {
            return true;
        }
        match node.parent() {
            Some(p) => node = p,
            None => return false,
        }
    }
}
