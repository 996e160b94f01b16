//! Reading one line against every declared format at once. The formats are merged into a
//! prefix tree (literal bytes and typed values as edges), so the shared beginnings of a
//! hundred formats are compared once; the walk backtracks only over text-like values.

use super::decl::{Catalog, Piece, Ty};

/// How a value class takes its part of the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Int,
    Number,
    Shape,
    Word,
    Text,
    /// The start / end of a span (zero width).
    Open,
    Close,
}

fn class_of(ty: Ty) -> Class {
    match ty {
        Ty::Int => Class::Int,
        Ty::Number | Ty::Bytes { .. } => Class::Number,
        Ty::Shape => Class::Shape,
        Ty::Word => Class::Word,
        Ty::Text | Ty::Path => Class::Text,
    }
}

#[derive(Debug, Default)]
struct Node {
    lits: Vec<(u8, u32)>,
    values: Vec<(Class, u32)>,
    /// Entries whose format ends here.
    ends: Vec<u32>,
    /// For a node with one way on, a literal: the bytes up to the next node where formats
    /// part or end, and that node (compared at once instead of byte by byte).
    chain: Option<(Box<[u8]>, u32)>,
}

/// The outcome of reading one line.
#[derive(Debug, PartialEq)]
pub enum Read {
    /// The line is entry `entry`; the scratch's `spans[i]` is the byte range of its field `i`.
    Print { entry: usize },
    /// The line is the beginning of a declared print that stops (the line ends, or another
    /// writer's output begins) before the print does.
    Cut,
    /// It starts like a print but reads as none of the declared formats.
    Unreadable,
}

/// The compiled prefix tree.
#[derive(Debug)]
pub struct Matcher {
    nodes: Vec<Node>,
    /// Per entry: the field index each recorded position belongs to, in path order, and
    /// whether it is a start (true) or an end.
    marks: Vec<Vec<(usize, bool)>>,
    fields: Vec<usize>,
    /// The literal every format begins with, as far as they all agree (found by memmem);
    /// when they do not agree, each format's first literal.
    pub anchors: Vec<Vec<u8>>,
}

/// Work allowed per line before the walk gives up (a pathological line, not a print).
const BUDGET: u32 = 20_000;

/// Buffers reused from line to line.
#[derive(Debug, Default)]
pub struct Scratch {
    positions: Vec<usize>,
    pub spans: Vec<(usize, usize)>,
}

struct Walk<'a> {
    text: &'a [u8],
    positions: &'a mut Vec<usize>,
    budget: u32,
    /// The walk reached the end of the line with more of a format to come.
    viable: bool,
    /// The furthest position where a format stopped matching.
    furthest: usize,
}

impl Matcher {
    pub fn new(catalog: &Catalog) -> Matcher {
        let mut m = Matcher {
            nodes: vec![Node::default()],
            marks: Vec::new(),
            fields: Vec::new(),
            anchors: Vec::new(),
        };
        for (ei, e) in catalog.entries.iter().enumerate() {
            let mut node = 0u32;
            let mut marks = Vec::new();
            for p in &e.pieces {
                match p {
                    Piece::Lit(bytes) => {
                        for &b in bytes {
                            node = m.lit_child(node, b);
                        }
                    }
                    Piece::Value(i) => {
                        node = m.value_child(node, class_of(e.fields[*i].ty));
                        marks.push((*i, true));
                        marks.push((*i, false));
                    }
                    Piece::Open(i) => {
                        node = m.value_child(node, Class::Open);
                        marks.push((*i, true));
                    }
                    Piece::Close(i) => {
                        node = m.value_child(node, Class::Close);
                        marks.push((*i, false));
                    }
                }
            }
            m.nodes[node as usize].ends.push(ei as u32);
            m.marks.push(marks);
            m.fields.push(e.fields.len());
        }
        m.anchors = anchors(catalog);
        m.chains();
        m
    }

    fn passes_through(&self, i: usize) -> bool {
        let n = &self.nodes[i];
        n.lits.len() == 1 && n.values.is_empty() && n.ends.is_empty()
    }

    fn chains(&mut self) {
        for i in 0..self.nodes.len() {
            if !self.passes_through(i) {
                continue;
            }
            let mut bytes = Vec::new();
            let mut at = i;
            while self.passes_through(at) {
                let (b, c) = self.nodes[at].lits[0];
                bytes.push(b);
                at = c as usize;
            }
            self.nodes[i].chain = Some((bytes.into_boxed_slice(), at as u32));
        }
    }

    fn lit_child(&mut self, node: u32, b: u8) -> u32 {
        if let Some(&(_, c)) = self.nodes[node as usize].lits.iter().find(|(x, _)| *x == b) {
            return c;
        }
        let c = self.nodes.len() as u32;
        self.nodes.push(Node::default());
        self.nodes[node as usize].lits.push((b, c));
        c
    }

    fn value_child(&mut self, node: u32, class: Class) -> u32 {
        if let Some(&(_, c)) = self.nodes[node as usize]
            .values
            .iter()
            .find(|(x, _)| *x == class)
        {
            return c;
        }
        let c = self.nodes.len() as u32;
        self.nodes.push(Node::default());
        self.nodes[node as usize].values.push((class, c));
        c
    }

    /// Read `text` (one line, from where a print may begin to where the line ends).
    pub fn read(&self, text: &[u8], scratch: &mut Scratch) -> Read {
        scratch.positions.clear();
        let mut w = Walk {
            text,
            positions: &mut scratch.positions,
            budget: BUDGET,
            viable: false,
            furthest: 0,
        };
        if let Some(entry) = self.walk(0, 0, &mut w) {
            let marks = &self.marks[entry as usize];
            scratch.spans.clear();
            scratch.spans.resize(self.fields[entry as usize], (0, 0));
            for (&(field, start), &pos) in marks.iter().zip(&scratch.positions) {
                if start {
                    scratch.spans[field].0 = pos;
                } else {
                    scratch.spans[field].1 = pos;
                }
            }
            return Read::Print {
                entry: entry as usize,
            };
        }
        let rest = &text[w.furthest.min(text.len())..];
        if w.viable || starts_another_writer(rest) {
            Read::Cut
        } else {
            Read::Unreadable
        }
    }

    fn walk(&self, node: u32, pos: usize, w: &mut Walk) -> Option<u32> {
        if w.budget == 0 {
            return None;
        }
        w.budget -= 1;
        w.furthest = w.furthest.max(pos);
        let n = &self.nodes[node as usize];
        let text = w.text;
        if let Some((bytes, next)) = &n.chain {
            let rest = &text[pos..];
            let same = rest
                .iter()
                .zip(bytes.iter())
                .take_while(|(a, b)| a == b)
                .count();
            if same == bytes.len() {
                return self.walk(*next, pos + same, w);
            }
            if same == rest.len() {
                w.viable = true;
            }
            w.furthest = w.furthest.max(pos + same);
            return None;
        }
        if pos == text.len()
            && let Some(&e) = n.ends.first()
        {
            return Some(e);
        }
        if pos < text.len() {
            let b = text[pos];
            if let Some(&(_, c)) = n.lits.iter().find(|(x, _)| *x == b) {
                if let Some(e) = self.walk(c, pos + 1, w) {
                    return Some(e);
                }
            } else if !n.lits.is_empty() {
                w.furthest = w.furthest.max(pos);
            }
        } else if !n.lits.is_empty() {
            w.viable = true;
        }
        for &(class, child) in &n.values {
            let depth = w.positions.len();
            match class {
                Class::Open | Class::Close => {
                    w.positions.push(pos);
                    if let Some(e) = self.walk(child, pos, w) {
                        return Some(e);
                    }
                }
                Class::Int | Class::Number | Class::Shape => {
                    let end = match class {
                        Class::Int => scan_int(text, pos),
                        Class::Number => scan_number(text, pos),
                        _ => scan_shape(text, pos),
                    };
                    match end {
                        Some(end) => {
                            w.positions.push(pos);
                            w.positions.push(end);
                            if let Some(e) = self.walk(child, end, w) {
                                return Some(e);
                            }
                        }
                        None if pos == text.len() => w.viable = true,
                        None => w.furthest = w.furthest.max(pos),
                    }
                }
                Class::Word | Class::Text => {
                    if pos == text.len() {
                        w.viable = true;
                    }
                    let mut end = pos + 1;
                    while end <= text.len() {
                        if class == Class::Word && text[end - 1].is_ascii_whitespace() {
                            w.furthest = w.furthest.max(end - 1);
                            break;
                        }
                        w.positions.truncate(depth);
                        w.positions.push(pos);
                        w.positions.push(end);
                        if let Some(e) = self.walk(child, end, w) {
                            return Some(e);
                        }
                        if w.budget == 0 {
                            break;
                        }
                        end += 1;
                    }
                }
            }
            w.positions.truncate(depth);
        }
        None
    }
}

/// Where a print breaks off and the next thing is another writer's line prefix
/// (`[default3]:`, `[rank14]:`) or another print, the print was cut by interleaving.
fn starts_another_writer(rest: &[u8]) -> bool {
    if rest.first() != Some(&b'[') {
        return false;
    }
    let head = &rest[..rest.len().min(40)];
    head.windows(2).any(|w| w == b"]:") || head.starts_with(b"[rank=")
}

fn digits(text: &[u8], mut pos: usize) -> usize {
    while pos < text.len() && text[pos].is_ascii_digit() {
        pos += 1;
    }
    pos
}

fn scan_int(text: &[u8], pos: usize) -> Option<usize> {
    let start = if matches!(text.get(pos), Some(b'-' | b'+')) {
        pos + 1
    } else {
        pos
    };
    let end = digits(text, start);
    (end > start).then_some(end)
}

fn scan_number(text: &[u8], pos: usize) -> Option<usize> {
    let mut p = pos;
    if matches!(text.get(p), Some(b'-' | b'+')) {
        p += 1;
    }
    for word in [&b"inf"[..], b"nan"] {
        if text[p.min(text.len())..].starts_with(word) {
            return Some(p + 3);
        }
    }
    let int_end = digits(text, p);
    let mut end = int_end;
    if text.get(end) == Some(&b'.') {
        let frac_end = digits(text, end + 1);
        if frac_end > end + 1 || int_end > p {
            end = frac_end;
        }
    }
    if end == p || (end == int_end && int_end == p) {
        return None;
    }
    if matches!(text.get(end), Some(b'e' | b'E')) {
        let mut q = end + 1;
        if matches!(text.get(q), Some(b'-' | b'+')) {
            q += 1;
        }
        let exp_end = digits(text, q);
        if exp_end > q {
            end = exp_end;
        }
    }
    Some(end)
}

/// `(4, 2048)`, `(4,)`, `()`, or torch's `torch.Size([4, 2048])`.
fn scan_shape(text: &[u8], pos: usize) -> Option<usize> {
    let (open, close, start) = if text[pos.min(text.len())..].starts_with(b"torch.Size([") {
        (b'[', b"])".as_slice(), pos + 12)
    } else if text.get(pos) == Some(&b'(') {
        (b'(', b")".as_slice(), pos + 1)
    } else {
        return None;
    };
    let _ = open;
    let mut p = start;
    while p < text.len() && (text[p].is_ascii_digit() || matches!(text[p], b',' | b' ' | b'-')) {
        p += 1;
    }
    text[p..].starts_with(close).then_some(p + close.len())
}

/// The literal to search for: the common beginning of every format's first literal (at
/// least two bytes), else each format's own first literal.
fn anchors(catalog: &Catalog) -> Vec<Vec<u8>> {
    let firsts: Vec<&[u8]> = catalog
        .entries
        .iter()
        .filter_map(|e| match e.pieces.first() {
            Some(Piece::Lit(l)) => Some(l.as_slice()),
            _ => None,
        })
        .collect();
    let Some(first) = firsts.first() else {
        return Vec::new();
    };
    let mut common = first.len();
    for f in &firsts {
        common = common.min(
            f.iter()
                .zip(first.iter())
                .take_while(|(a, b)| a == b)
                .count(),
        );
    }
    if common >= 2 {
        return vec![first[..common].to_vec()];
    }
    let mut all: Vec<Vec<u8>> = firsts.iter().map(|f| f.to_vec()).collect();
    all.sort();
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::decl::{Catalog, test_catalog, test_decl};

    fn catalog(lines: &[(&str, &[(&str, &str)])]) -> Catalog {
        let decls: Vec<_> = lines
            .iter()
            .map(|(line, fields)| test_decl("setup", line, "x", fields))
            .collect();
        test_catalog(&decls)
    }

    fn read(m: &Matcher, line: &str) -> (Read, Vec<(usize, usize)>) {
        let mut s = Scratch::default();
        let r = m.read(line.as_bytes(), &mut s);
        (r, s.spans)
    }

    fn text_of<'a>(line: &'a str, r: &(Read, Vec<(usize, usize)>)) -> Vec<&'a str> {
        match r {
            (Read::Print { .. }, spans) => spans.iter().map(|&(a, b)| &line[a..b]).collect(),
            other => panic!("{line:?} read as {other:?}"),
        }
    }

    #[test]
    fn shared_prefixes_split_where_formats_differ() {
        let c = catalog(&[
            ("[rank={rank}] a={x} GiB", &[("x", "GiB")]),
            ("[rank={rank}] a={x} MiB", &[("x", "MiB")]),
            (
                "[rank={rank} pp={pp_rank}] b: {x} GiB (+{d})",
                &[("x", "GiB"), ("d", "GiB")],
            ),
        ]);
        let m = Matcher::new(&c);
        assert_eq!(m.anchors, vec![b"[rank=".to_vec()]);
        let line = "[rank=14] a=0.25 MiB";
        let r = read(&m, line);
        assert!(matches!(r.0, Read::Print { entry: 1 }));
        assert_eq!(text_of(line, &r), vec!["14", "0.25"]);
        // A negative value after a literal plus sign, as Python prints `(+{x:.2f})` for x < 0.
        let line = "[rank=3 pp=1] b: 0.08 GiB (+-0.01)";
        let r = read(&m, line);
        assert_eq!(text_of(line, &r), vec!["3", "1", "0.08", "-0.01"]);
    }

    #[test]
    fn text_values_backtrack_and_spans_cover_their_parts() {
        let c = catalog(&[(
            "[rank={rank}] {label}: alloc={x} at {path={dir}/f{n}.pickle}",
            &[
                ("label", "text"),
                ("x", "GiB"),
                ("dir", "path"),
                ("n", "int"),
            ],
        )]);
        let m = Matcher::new(&c);
        let line = "[rank=0] a: b (c): alloc=1.00 at /tmp/x y/f3.pickle";
        let r = read(&m, line);
        assert_eq!(
            text_of(line, &r),
            vec![
                "0",
                "a: b (c)",
                "1.00",
                "/tmp/x y/f3.pickle",
                "/tmp/x y",
                "3"
            ]
        );
    }

    #[test]
    fn cut_lines_are_told_from_unknown_ones() {
        let c = catalog(&[("[rank={rank}] step: {x} GiB | ok", &[("x", "GiB")])]);
        let m = Matcher::new(&c);
        assert_eq!(read(&m, "[rank=3] step: 0.0").0, Read::Cut);
        assert_eq!(
            read(&m, "[rank=3] step: 0.0[default5]:NCCL INFO x").0,
            Read::Cut
        );
        assert_eq!(read(&m, "[rank=3] st").0, Read::Cut);
        assert_eq!(read(&m, "[rank=3] other thing").0, Read::Unreadable);
        assert_eq!(
            read(&m, "[rank=3] step: 0.08 GiB | ok and more").0,
            Read::Unreadable
        );
        assert!(matches!(
            read(&m, "[rank=3] step: 0.08 GiB | ok").0,
            Read::Print { .. }
        ));
    }

    #[test]
    fn shapes_numbers_and_words() {
        for (s, end) in [
            ("(4, 2048)x", 9),
            ("(4,)", 4),
            ("()", 2),
            ("torch.Size([4, 8]) ", 18),
        ] {
            assert_eq!(scan_shape(s.as_bytes(), 0), Some(end), "{s}");
        }
        assert_eq!(scan_shape(b"(a)", 0), None);
        for (s, end) in [
            ("0.08 ", 4),
            ("-0.00", 5),
            ("+12", 3),
            ("1.5e-3", 6),
            ("nan", 3),
            ("7.", 2),
        ] {
            assert_eq!(scan_number(s.as_bytes(), 0), Some(end), "{s}");
        }
        assert_eq!(scan_number(b"-x", 0), None);
        assert_eq!(scan_number(b".", 0), None);
    }
}
