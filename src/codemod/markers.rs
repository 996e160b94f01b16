//! The marker format: how an inserted or changed region announces itself in the file,
//! keeps what it replaced, and is found and taken out again.
//!
//! ```text
//! <indent># >>> instrument <rule-set> <rule-id> [KEY=value; ...] (take out: instrument remove) h=<hash>
//! <indent># | <an original line the region replaced, one per line>
//! <indent><inserted code>
//! <indent># <<< instrument <rule-set> <rule-id>
//! ```
//!
//! The hash covers every line between the two markers, so a region edited by hand is
//! noticed. Removal deletes the region and puts the `# |` lines back as they were, each
//! with the line ending it had. Markers are found by reading lines of bytes, not by
//! parsing, so `remove` works on files that no longer parse or are no longer UTF-8.
//!
//! A region that rewrites a `def` line (a parameter added to a one-line signature) ends
//! with its close marker at the end of its last code line: `) -> T:  # <<< instrument ...`,
//! where a comment of its own line would be re-indented by ruff format.
//!
//! Parameters are Python literals (`RANKS={3, 14}; SNAPSHOT_DIR="/tmp"`): a value ends at
//! `; ` or `]` outside any bracket or string, so a string holding `"; STEP=5` reads back
//! as the one value it is.

use std::fmt;

pub const OPEN: &str = "# >>> instrument ";
pub const CLOSE: &str = "# <<< instrument ";
/// The trailing marker of a one-line region (an added import: isort reads own-line
/// comments between imports as separators, so imports carry their marker at the end).
pub const INLINE: &str = "  # instrument ";
const TAKE_OUT: &str = "(take out: instrument remove)";
/// A kept original line: `# | text` (the region's indentation prefixed again on restore),
/// `# |` (an empty line), `# |! text` (a line kept verbatim, e.g. inside a string).
const STASH: &str = "# |";

/// A marked region found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    pub rule_set: String,
    pub rule: String,
    /// Parameters recorded at insertion, e.g. `("RANKS", "{3, 14}")`.
    pub params: Vec<(String, String)>,
    /// 0-based index of the open and close marker lines.
    pub open_line: usize,
    pub close_line: usize,
    pub indent: String,
    /// The original lines to restore, each with its own line ending (empty for a pure
    /// insertion).
    pub stash: Vec<Vec<u8>>,
    /// False when the body no longer matches the recorded hash (edited by hand).
    pub intact: bool,
    /// 0-based line holding the marker (the open marker, or the marked import line).
    pub marker_line: usize,
}

/// A marker problem that makes the file's regions unreadable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerError {
    /// 1-based line.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for MarkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// FNV-1a, 32 bits: stable across versions and platforms, enough to notice an edit.
pub fn hash_lines<'a>(lines: impl IntoIterator<Item = &'a str>) -> String {
    hash_byte_lines(lines.into_iter().map(str::as_bytes))
}

fn hash_byte_lines<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut h = crate::fnv::Fnv1a32::default();
    for line in lines {
        h.write(line.strip_suffix(b"\r").unwrap_or(line));
        h.write(b"\n");
    }
    format!("{:08x}", h.finish())
}

/// `[K=v; K2=v2]`, or nothing without parameters.
fn params_text(params: &[(String, String)]) -> String {
    if params.is_empty() {
        return String::new();
    }
    let joined: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(" [{}]", joined.join("; "))
}

/// Render a region. `stash` are the original lines it replaces (without line endings),
/// `body` the new lines (already indented). Returns the lines without endings.
pub fn render(
    indent: &str,
    rule_set: &str,
    rule: &str,
    params: &[(String, String)],
    stash: &[&str],
    body: &[String],
) -> Vec<String> {
    render_with(indent, rule_set, rule, params, stash, body, false)
}

/// `render`, and with `close_at_end` the close marker ends the last body line instead of
/// taking a line of its own (a rewritten `def` header, whose next line is its body).
pub fn render_with(
    indent: &str,
    rule_set: &str,
    rule: &str,
    params: &[(String, String)],
    stash: &[&str],
    body: &[String],
    close_at_end: bool,
) -> Vec<String> {
    let mut inner: Vec<String> = stash.iter().map(|l| stash_line(indent, l)).collect();
    inner.extend(body.iter().cloned());
    let hash = hash_lines(inner.iter().map(|s| s.as_str()));
    let mut out = Vec::with_capacity(inner.len() + 2);
    out.push(format!(
        "{indent}{OPEN}{rule_set} {rule}{} {TAKE_OUT} h={hash}",
        params_text(params)
    ));
    out.extend(inner);
    if close_at_end && let Some(last) = out.last_mut() {
        last.push_str(&format!("  {CLOSE}{rule_set} {rule}"));
    } else {
        out.push(format!("{indent}{CLOSE}{rule_set} {rule}"));
    }
    out
}

/// Which side of a one-line region carries an empty line added with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blank {
    None,
    Before,
    After,
}

/// Render a one-line region: `code` with its trailing marker, and the empty line added
/// with it, if any.
pub fn render_inline(code: &str, rule_set: &str, rule: &str, blank: Blank) -> Vec<String> {
    let tag = match blank {
        Blank::None => "",
        Blank::Before => " [blank-before]",
        Blank::After => " [blank-after]",
    };
    let hash = hash_lines([code]);
    let line = format!("{code}{INLINE}{rule_set} {rule}{tag} {TAKE_OUT} h={hash}");
    match blank {
        Blank::None => vec![line],
        Blank::Before => vec![String::new(), line],
        Blank::After => vec![line, String::new()],
    }
}

/// Parse a one-line region's marked line: (code, rule set, rule, blank, hash).
fn parse_inline(line: &str) -> Option<(&str, String, String, Blank, String)> {
    let at = line.rfind(INLINE)?;
    let (code, rest) = (&line[..at], &line[at + INLINE.len()..]);
    if code.trim().is_empty() || code.trim_start().starts_with('#') {
        return None;
    }
    let (rest, hash) = rest.rsplit_once(" h=")?;
    let rest = rest.strip_suffix(TAKE_OUT)?.trim_end();
    let mut words = rest.split(' ');
    let rule_set = words.next()?.to_string();
    let rule = words.next()?.to_string();
    let blank = match words.next() {
        None => Blank::None,
        Some("[blank-before]") => Blank::Before,
        Some("[blank-after]") => Blank::After,
        Some(_) => return None,
    };
    Some((code, rule_set, rule, blank, hash.trim().to_string()))
}

fn stash_line(indent: &str, line: &str) -> String {
    if line.is_empty() {
        format!("{indent}{STASH}")
    } else if let Some(rest) = line.strip_prefix(indent).filter(|r| !r.is_empty()) {
        format!("{indent}{STASH} {rest}")
    } else {
        format!("{indent}{STASH}! {line}")
    }
}

fn unstash_line(indent: &[u8], marker_line: &[u8]) -> Option<Vec<u8>> {
    let rest = marker_line
        .strip_prefix(indent)?
        .strip_prefix(STASH.as_bytes())?;
    if rest.is_empty() {
        Some(Vec::new())
    } else if let Some(raw) = rest.strip_prefix(b"! ") {
        Some(raw.to_vec())
    } else {
        rest.strip_prefix(b" ").map(|r| [indent, r].concat())
    }
}

/// What an open marker line says.
struct OpenMarker {
    indent: String,
    rule_set: String,
    rule: String,
    params: Vec<(String, String)>,
    hash: String,
}

/// Split `[K=v; K2=v2]` into pairs; a value is a Python literal and ends at `; ` or the
/// closing `]` outside brackets and strings.
fn parse_params(text: &str) -> Option<Vec<(String, String)>> {
    let inner = text.strip_prefix('[')?.strip_suffix(']')?;
    let bytes = inner.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let eq = inner[i..].find('=')? + i;
        let key = &inner[i..eq];
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return None;
        }
        let mut j = eq + 1;
        let mut depth = 0usize;
        let mut quote: Option<u8> = None;
        while j < bytes.len() {
            let b = bytes[j];
            match quote {
                Some(q) => {
                    if b == b'\\' {
                        j += 1;
                    } else if b == q {
                        quote = None;
                    }
                }
                None => match b {
                    b'"' | b'\'' => quote = Some(b),
                    b'(' | b'[' | b'{' => depth += 1,
                    b')' | b']' | b'}' => depth = depth.checked_sub(1)?,
                    b';' if depth == 0 && bytes.get(j + 1) == Some(&b' ') => break,
                    _ => {}
                },
            }
            j += 1;
        }
        if quote.is_some() || depth != 0 || j > bytes.len() {
            return None;
        }
        out.push((key.to_string(), inner[eq + 1..j].to_string()));
        i = j + 2;
    }
    Some(out)
}

/// Parse an open marker line (without its line ending).
fn parse_open(line: &str) -> Option<OpenMarker> {
    let trimmed = line.trim_start();
    let indent = line[..line.len() - trimmed.len()].to_string();
    let rest = trimmed.strip_prefix(OPEN)?;
    let (rest, hash) = rest.rsplit_once(" h=")?;
    let rest = rest.strip_suffix(TAKE_OUT)?.trim_end();
    let mut words = rest.splitn(3, ' ');
    let rule_set = words.next()?.to_string();
    let rule = words.next()?.to_string();
    let params = match words.next() {
        Some(p) => parse_params(p)?,
        None => Vec::new(),
    };
    Some(OpenMarker {
        indent,
        rule_set,
        rule,
        params,
        hash: hash.trim().to_string(),
    })
}

/// Whether a line (or comment) is an open or close marker.
pub fn is_marker_line(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with(OPEN) || t.starts_with(CLOSE)
}

/// Whether a file's text may contain regions (a fast check before reading lines).
pub fn mentions_markers(text: &[u8]) -> bool {
    memchr::memmem::find(text, OPEN.as_bytes()).is_some()
        || memchr::memmem::find(text, CLOSE.as_bytes()).is_some()
        || memchr::memmem::find(text, INLINE.as_bytes()).is_some()
}

/// A line of a file: its bytes without the ending, and the ending (`\n`, `\r\n` or none).
struct Line<'a> {
    text: &'a [u8],
    ending: &'a [u8],
}

fn split_lines(text: &[u8]) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in memchr::memchr_iter(b'\n', text) {
        let cr = i > start && text[i - 1] == b'\r';
        let end = if cr { i - 1 } else { i };
        out.push(Line {
            text: &text[start..end],
            ending: &text[end..=i],
        });
        start = i + 1;
    }
    out.push(Line {
        text: &text[start..],
        ending: b"",
    });
    out
}

fn trim_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| **c == b' ' || **c == b'\t').count();
    &b[n..]
}

/// Every region in `text`, in order. Nested or unbalanced markers are errors.
pub fn find_regions(text: &str) -> Result<Vec<Region>, MarkerError> {
    find_regions_bytes(text.as_bytes())
}

/// `find_regions` for any bytes: only marker lines need to be text.
pub fn find_regions_bytes(text: &[u8]) -> Result<Vec<Region>, MarkerError> {
    let lines = split_lines(text);
    find_in_lines(&lines)
}

fn find_in_lines(lines: &[Line]) -> Result<Vec<Region>, MarkerError> {
    let mut regions = Vec::new();
    let mut i = 0;
    let open_b = OPEN.as_bytes();
    let close_b = CLOSE.as_bytes();
    // One searcher for every line (building one costs more than searching a line).
    let inline = memchr::memmem::Finder::new(INLINE.as_bytes());
    while i < lines.len() {
        let raw = lines[i].text;
        let trimmed = trim_start(raw);
        if trimmed.starts_with(close_b) {
            return Err(MarkerError {
                line: i + 1,
                message: "closing marker without an opening one".into(),
            });
        }
        if !trimmed.starts_with(open_b) {
            if inline.find(raw).is_some()
                && let Ok(line) = std::str::from_utf8(raw)
                && let Some((code, rule_set, rule, blank, hash)) = parse_inline(line)
            {
                let last = lines.len() - 1;
                let (open_line, close_line) = match blank {
                    Blank::None => (i, i),
                    Blank::Before => (i.saturating_sub(1), i),
                    Blank::After => (i, (i + 1).min(last)),
                };
                let blank_ok = match blank {
                    Blank::None => true,
                    Blank::Before => i > 0 && trim_start(lines[i - 1].text).is_empty(),
                    Blank::After => i < last && trim_start(lines[i + 1].text).is_empty(),
                };
                regions.push(Region {
                    rule_set,
                    rule,
                    params: Vec::new(),
                    open_line,
                    close_line,
                    indent: String::new(),
                    stash: Vec::new(),
                    intact: blank_ok && hash_lines([code]) == hash,
                    marker_line: i,
                });
            }
            i += 1;
            continue;
        }
        let unreadable = || {
            MarkerError {
            line: i + 1,
            message: "unreadable instrument marker (was it edited?); fix it by hand or restore the file from version control".into(),
        }
        };
        let line = std::str::from_utf8(raw).map_err(|_| unreadable())?;
        let OpenMarker {
            indent,
            rule_set,
            rule,
            params,
            hash,
        } = parse_open(line).ok_or_else(unreadable)?;
        let close = format!("{indent}{CLOSE}{rule_set} {rule}");
        let close_at_end = format!("  {CLOSE}{rule_set} {rule}");
        let mut j = i + 1;
        let mut end_code: Option<&[u8]> = None;
        while j < lines.len() {
            let l = lines[j].text;
            if l == close.as_bytes() {
                break;
            }
            if let Some(code) = l.strip_suffix(close_at_end.as_bytes())
                && !trim_start(code).is_empty()
                && !trim_start(code).starts_with(b"#")
            {
                end_code = Some(code);
                break;
            }
            let t = trim_start(l);
            if t.starts_with(open_b) || t.starts_with(close_b) {
                return Err(MarkerError {
                    line: j + 1,
                    message: format!(
                        "marker inside the region of rule {rule} opened at line {}",
                        i + 1
                    ),
                });
            }
            j += 1;
        }
        if j == lines.len() {
            return Err(MarkerError {
                line: i + 1,
                message: format!(
                    "region of rule {rule} is never closed (expected `{}`)",
                    close.trim_start()
                ),
            });
        }
        let body = lines[i + 1..j].iter().map(|l| l.text).chain(end_code);
        let intact = hash_byte_lines(body) == hash;
        let mut stash = Vec::new();
        for l in &lines[i + 1..j] {
            match unstash_line(indent.as_bytes(), l.text) {
                Some(mut orig) => {
                    orig.extend_from_slice(l.ending);
                    stash.push(orig);
                }
                None => break,
            }
        }
        regions.push(Region {
            rule_set,
            rule,
            params,
            open_line: i,
            close_line: j,
            indent,
            stash,
            intact,
            marker_line: i,
        });
        i = j + 1;
    }
    Ok(regions)
}

/// What `strip` returns: the new text, the regions taken out, and for each line of the
/// new text the line of the old text it comes from (a restored line: its `# |` line).
pub struct Stripped {
    pub text: Vec<u8>,
    pub removed: Vec<Region>,
    pub origin: Vec<usize>,
}

/// Remove the regions that `selected` picks and restore what they replaced, byte for byte.
pub fn strip_bytes(
    text: &[u8],
    selected: impl Fn(&Region) -> bool,
) -> Result<Stripped, MarkerError> {
    let lines = split_lines(text);
    let regions = find_in_lines(&lines)?;
    let chosen: Vec<Region> = regions.into_iter().filter(|r| selected(r)).collect();
    let mut out = Vec::with_capacity(text.len());
    let mut origin = Vec::with_capacity(lines.len());
    let mut next = 0;
    let keep = |out: &mut Vec<u8>, origin: &mut Vec<usize>, from: usize, to: usize| {
        for (k, l) in lines[from..to].iter().enumerate() {
            out.extend_from_slice(l.text);
            out.extend_from_slice(l.ending);
            origin.push(from + k);
        }
    };
    for r in &chosen {
        keep(&mut out, &mut origin, next, r.open_line);
        for (k, s) in r.stash.iter().enumerate() {
            out.extend_from_slice(s);
            origin.push(r.open_line + 1 + k);
        }
        next = r.close_line + 1;
    }
    keep(&mut out, &mut origin, next.min(lines.len()), lines.len());
    Ok(Stripped {
        text: out,
        removed: chosen,
        origin,
    })
}

/// `strip_bytes` for text (the restored lines were text when they were stashed).
pub fn strip(
    text: &str,
    selected: impl Fn(&Region) -> bool,
) -> Result<(String, Vec<Region>), MarkerError> {
    let s = strip_bytes(text.as_bytes(), selected)?;
    let restored = String::from_utf8(s.text)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).to_string());
    Ok((restored, s.removed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_then_find_then_strip_round_trips() {
        let original = "def f():\n    x = g(1)\n    return x\n";
        let region = render(
            "    ",
            "memory-prints",
            "5D.return",
            &[("RANKS".into(), "{3, 14}".into())],
            &["    return x"],
            &[
                "    y = x".to_string(),
                "".to_string(),
                "    return y".to_string(),
            ],
        );
        let instrumented = format!("def f():\n    x = g(1)\n{}\n", region.join("\n"));
        let regions = find_regions(&instrumented).unwrap();
        assert_eq!(regions.len(), 1);
        assert!(regions[0].intact);
        assert_eq!(
            regions[0].params,
            vec![("RANKS".to_string(), "{3, 14}".to_string())]
        );
        let (back, removed) = strip(&instrumented, |_| true).unwrap();
        assert_eq!(removed.len(), 1);
        assert_eq!(back, original);
    }

    #[test]
    fn stash_keeps_odd_lines_verbatim() {
        for line in ["", "    ", "  shallower", "\tx", "    deeper = 1  # c"] {
            let s = stash_line("    ", line);
            assert_eq!(
                unstash_line(b"    ", s.as_bytes()),
                Some(line.as_bytes().to_vec()),
                "line {line:?} via {s:?}"
            );
        }
    }

    #[test]
    fn edited_body_is_detected() {
        let region = render("", "r", "a", &[], &[], &["x = 1".to_string()]);
        let text = format!("{}\n", region.join("\n")).replace("x = 1", "x = 2");
        assert!(!find_regions(&text).unwrap()[0].intact);
    }

    #[test]
    fn unbalanced_markers_are_errors() {
        let region = render("", "r", "a", &[], &[], &["x = 1".to_string()]);
        let text = format!("{}\n{}\n", region[0], region[1]);
        assert_eq!(find_regions(&text).unwrap_err().line, 1);
        let text = "# <<< instrument r a\n";
        assert!(find_regions(text).is_err());
    }

    #[test]
    fn inline_regions_take_their_blank_line_with_them() {
        let original = "import os\n\n\ndef f():\n    pass\n";
        let region = render_inline("import torch", "r", "a", Blank::Before);
        let text = original.replacen(
            "import os\n",
            &format!("import os\n{}\n", region.join("\n")),
            1,
        );
        assert_eq!(text, "import os\n\nimport torch  # instrument r a [blank-before] (take out: instrument remove) h=".to_string() + &hash_lines(["import torch"]) + "\n\n\ndef f():\n    pass\n");
        let regions = find_regions(&text).unwrap();
        assert_eq!(regions.len(), 1);
        assert!(regions[0].intact);
        assert_eq!(
            (
                regions[0].open_line,
                regions[0].close_line,
                regions[0].marker_line
            ),
            (1, 2, 2)
        );
        let (back, _) = strip(&text, |_| true).unwrap();
        assert_eq!(back, original);
        let edited = text.replace("import torch  #", "import torch as t  #");
        assert!(!find_regions(&edited).unwrap()[0].intact);
    }

    #[test]
    fn parameters_read_back_exactly() {
        let params = vec![
            ("RANKS".to_string(), "{3, 14}".to_string()),
            ("SNAPSHOT_DIR".to_string(), "'/tmp/x\"; STEP=5'".to_string()),
            ("STEP".to_string(), "None".to_string()),
        ];
        let region = render("", "r", "a", &params, &[], &["x = 1".to_string()]);
        let text = format!("{}\n", region.join("\n"));
        assert_eq!(find_regions(&text).unwrap()[0].params, params);
        let forged = text.replace("STEP=None", "STEP=\"5");
        assert!(find_regions(&forged).is_err());
    }

    #[test]
    fn mixed_endings_and_other_bytes_come_back_exactly() {
        let region = render("", "r", "a", &[], &["x = 1"], &["x = 2".to_string()]);
        let mut text = b"a = 0\n".to_vec();
        text.extend_from_slice(region[0].as_bytes());
        text.extend_from_slice(b"\n");
        text.extend_from_slice(region[1].as_bytes());
        text.extend_from_slice(b"\r\n");
        for l in &region[2..] {
            text.extend_from_slice(l.as_bytes());
            text.extend_from_slice(b"\n");
        }
        text.extend_from_slice(b"b = '\xff'\n");
        let s = strip_bytes(&text, |_| true).unwrap();
        assert_eq!(s.text, b"a = 0\nx = 1\r\nb = '\xff'\n".to_vec());
        assert_eq!(s.origin, vec![0, 2, 5, 6]);
    }

    #[test]
    fn a_close_marker_may_end_the_last_code_line() {
        let region = render_with(
            "    ",
            "r",
            "p",
            &[],
            &["    def f(self):"],
            &[
                "    def f(".to_string(),
                "        self,".to_string(),
                "    ):".to_string(),
            ],
            true,
        );
        assert!(region.last().unwrap().ends_with("):  # <<< instrument r p"));
        let text = format!("class A:\n{}\n        pass\n", region.join("\n"));
        let regions = find_regions(&text).unwrap();
        assert!(regions[0].intact);
        let (back, _) = strip(&text, |_| true).unwrap();
        assert_eq!(back, "class A:\n    def f(self):\n        pass\n");
    }

    #[test]
    fn crlf_files_round_trip() {
        let region = render("", "r", "a", &[], &["x = 1"], &["x = 2".to_string()]);
        let text = format!("a = 0\r\n{}\r\nb = 1\r\n", region.join("\r\n"));
        let (back, _) = strip(&text, |_| true).unwrap();
        assert_eq!(back, "a = 0\r\nx = 1\r\nb = 1\r\n");
    }
}
