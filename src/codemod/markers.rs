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
//! noticed. Removal deletes the region and puts the `# |` lines back as they were.
//! Markers are found by reading lines, not by parsing, so `remove` works on files that
//! no longer parse.

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
    /// The original lines to restore (empty for a pure insertion).
    pub stash: Vec<String>,
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
    let mut h: u32 = 0x811c_9dc5;
    for line in lines {
        for &b in line.trim_end_matches('\r').as_bytes().iter().chain(b"\n") {
            h ^= b as u32;
            h = h.wrapping_mul(0x0100_0193);
        }
    }
    format!("{h:08x}")
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
    let mut inner: Vec<String> = stash.iter().map(|l| stash_line(indent, l)).collect();
    inner.extend(body.iter().cloned());
    let hash = hash_lines(inner.iter().map(|s| s.as_str()));
    let params_text = if params.is_empty() {
        String::new()
    } else {
        let joined: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!(" [{}]", joined.join("; "))
    };
    let mut out = Vec::with_capacity(inner.len() + 2);
    out.push(format!(
        "{indent}{OPEN}{rule_set} {rule}{params_text} {TAKE_OUT} h={hash}"
    ));
    out.extend(inner);
    out.push(format!("{indent}{CLOSE}{rule_set} {rule}"));
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

fn unstash_line(indent: &str, marker_line: &str) -> Option<String> {
    let rest = marker_line.strip_prefix(indent)?.strip_prefix(STASH)?;
    if rest.is_empty() {
        Some(String::new())
    } else if let Some(raw) = rest.strip_prefix("! ") {
        Some(raw.to_string())
    } else {
        rest.strip_prefix(' ').map(|r| format!("{indent}{r}"))
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
    let mut params = Vec::new();
    if let Some(p) = words.next() {
        let inner = p.strip_prefix('[')?.strip_suffix(']')?;
        for kv in inner.split("; ") {
            let (k, v) = kv.split_once('=')?;
            params.push((k.to_string(), v.to_string()));
        }
    }
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
}

/// Every region in `text`, in order. Nested or unbalanced markers are errors.
pub fn find_regions(text: &str) -> Result<Vec<Region>, MarkerError> {
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let mut regions = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if trimmed.starts_with(CLOSE) {
            return Err(MarkerError {
                line: i + 1,
                message: "closing marker without an opening one".into(),
            });
        }
        if !trimmed.starts_with(OPEN) {
            if line.contains(INLINE)
                && let Some((code, rule_set, rule, blank, hash)) = parse_inline(line)
            {
                let (open_line, close_line) = match blank {
                    Blank::None => (i, i),
                    Blank::Before => (i.saturating_sub(1), i),
                    Blank::After => (i, (i + 1).min(lines.len() - 1)),
                };
                let blank_ok = match blank {
                    Blank::None => true,
                    Blank::Before => i > 0 && lines[i - 1].trim().is_empty(),
                    Blank::After => i + 1 < lines.len() && lines[i + 1].trim().is_empty(),
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
        let OpenMarker {
            indent,
            rule_set,
            rule,
            params,
            hash,
        } = parse_open(line).ok_or_else(|| MarkerError {
            line: i + 1,
            message: "unreadable instrument marker (was it edited?)".into(),
        })?;
        let close = format!("{indent}{CLOSE}{rule_set} {rule}");
        let mut j = i + 1;
        while j < lines.len() && lines[j] != close {
            let t = lines[j].trim_start();
            if t.starts_with(OPEN) || t.starts_with(CLOSE) {
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
        let body = &lines[i + 1..j];
        let intact = hash_lines(body.iter().copied()) == hash;
        let mut stash = Vec::new();
        for l in body {
            match unstash_line(&indent, l) {
                Some(orig) => stash.push(orig),
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

/// Remove the regions that `selected` picks and restore what they replaced.
/// Returns the new text and the regions removed.
pub fn strip(
    text: &str,
    selected: impl Fn(&Region) -> bool,
) -> Result<(String, Vec<Region>), MarkerError> {
    let regions = find_regions(text)?;
    let chosen: Vec<Region> = regions.into_iter().filter(|r| selected(r)).collect();
    if chosen.is_empty() {
        return Ok((text.to_string(), chosen));
    }
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let raw_lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::with_capacity(text.len());
    let mut next = 0;
    for r in &chosen {
        for l in &raw_lines[next..r.open_line] {
            out.push_str(l);
        }
        for s in &r.stash {
            out.push_str(s);
            out.push_str(eol);
        }
        next = r.close_line + 1;
    }
    for l in &raw_lines[next.min(raw_lines.len())..] {
        out.push_str(l);
    }
    Ok((out, chosen))
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
                unstash_line("    ", &s).as_deref(),
                Some(line),
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
    fn crlf_files_round_trip() {
        let region = render("", "r", "a", &[], &["x = 1"], &["x = 2".to_string()]);
        let text = format!("a = 0\r\n{}\r\nb = 1\r\n", region.join("\r\n"));
        let (back, _) = strip(&text, |_| true).unwrap();
        assert_eq!(back, "a = 0\r\nx = 1\r\nb = 1\r\n");
    }
}
