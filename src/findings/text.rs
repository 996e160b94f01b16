//! Findings and long lines for a terminal: at most `WIDTH` columns, wrapped at spaces (and,
//! for stack chains, after ` < `), continuation lines indented under their first.

use std::fmt::Write as _;

use super::{Finding, Severity};

/// The widest line a text report writes.
pub const WIDTH: usize = 100;

/// How many findings the text shows before "and N more" (the JSON has them all).
pub const SHOWN: usize = 12;

/// `text` (its own leading spaces kept) wrapped at `WIDTH`; continuation lines indented four
/// more. A word longer than a line is cut where it must be, never left past the edge.
pub fn wrap(out: &mut String, text: &str) {
    wrap_at(out, text, WIDTH);
}

pub fn wrap_at(out: &mut String, text: &str, width: usize) {
    let indent = text.len() - text.trim_start().len();
    let more = indent + 4;
    let mut line = " ".repeat(indent);
    let mut empty = true;
    for word in text.trim_start().split(' ') {
        let len = line.chars().count();
        let wlen = word.chars().count();
        if !empty && len + 1 + wlen > width {
            let _ = writeln!(out, "{line}");
            line = " ".repeat(more);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        // A word longer than the rest of the line (a path, a long symbol) is cut.
        let mut rest: &str = word;
        loop {
            let room = width.saturating_sub(line.chars().count()).max(1);
            if rest.chars().count() <= room || room < 8 && !empty {
                break;
            }
            let cut = rest.char_indices().nth(room).map_or(rest.len(), |(i, _)| i);
            line.push_str(&rest[..cut]);
            let _ = writeln!(out, "{line}");
            line = " ".repeat(more);
            rest = &rest[cut..];
        }
        line.push_str(rest);
        empty = false;
    }
    let _ = writeln!(out, "{line}");
}

/// A whole report made to fit `WIDTH` columns: every line past the edge (a long path, a
/// kernel's name, a table row) wrapped as `wrap` wraps, the others kept. Every text report
/// passes through it last, so no reader writes a line a terminal folds.
pub fn fit(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for line in text.lines() {
        if line.chars().count() > WIDTH {
            wrap(&mut out, line);
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// A chain of frames (`a < b < c`), innermost first, wrapped after its separators so that no
/// frame is split between lines unless it is longer than a line by itself.
pub fn wrap_chain(out: &mut String, indent: &str, frames: &[String]) {
    let joined = frames.join(" < ");
    wrap(out, &format!("{indent}{joined}"));
}

/// The findings block every text report opens with: a heading, the ranked findings (the first
/// `SHOWN`), each with its place, figure, evidence and next step; nothing when there are none.
pub fn render(out: &mut String, findings: &[Finding]) {
    if findings.is_empty() {
        return;
    }
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let warnings = findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .count();
    let _ = writeln!(
        out,
        "Findings: {} ({errors} error(s), {warnings} warning(s)), most important first",
        findings.len()
    );
    for (i, f) in findings.iter().take(SHOWN).enumerate() {
        let place = f.place.label();
        let mut head = format!("{:>2}. {}: ", i + 1, f.severity.word());
        if !place.is_empty() {
            let _ = write!(head, "{place}: ");
        }
        head.push_str(&f.what);
        if let Some(fig) = &f.figure {
            let _ = write!(head, ": {}", fig.show());
        }
        wrap(out, &head);
        for e in &f.evidence {
            wrap(out, &format!("      {e}"));
        }
        if let Some(n) = &f.next {
            wrap(out, &format!("      next: {n}"));
        }
    }
    if findings.len() > SHOWN {
        let _ = writeln!(
            out,
            "    and {} more (--json lists them all)",
            findings.len() - SHOWN
        );
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{Figure, Unit, Where};

    #[test]
    fn wrapped_lines_never_pass_the_edge() {
        let mut o = String::new();
        let long = format!("  {} {}", "word ".repeat(40), "x".repeat(250));
        wrap(&mut o, &long);
        for line in o.lines() {
            assert!(line.chars().count() <= WIDTH, "{line:?}");
        }
        let words: Vec<&str> = o.split_whitespace().collect();
        let joined: String = words.concat();
        let expected: String = long.split_whitespace().collect::<Vec<_>>().concat();
        assert_eq!(joined, expected, "nothing lost");
        assert!(o.starts_with("  word"));
    }

    #[test]
    fn a_report_is_fitted_line_by_line() {
        let long = format!("{}\n", "x ".repeat(80));
        let text = format!("short\n{long}\nend\n");
        let fitted = fit(&text);
        assert!(fitted.lines().all(|l| l.chars().count() <= WIDTH));
        assert_eq!(fitted.lines().next(), Some("short"));
        assert_eq!(fitted.lines().last(), Some("end"));
        assert_eq!(
            fitted.lines().filter(|l| l.is_empty()).count(),
            1,
            "blank lines kept"
        );
    }

    #[test]
    fn a_chain_breaks_at_its_separators() {
        let frames: Vec<String> = (0..30).map(|i| format!("module{i}.py:{i}:fn{i}")).collect();
        let mut o = String::new();
        wrap_chain(&mut o, "    ", &frames);
        let lines: Vec<&str> = o.lines().collect();
        assert!(lines.len() > 1);
        for l in &lines {
            assert!(l.chars().count() <= WIDTH);
            // every frame whole on one line
            for w in l.split_whitespace() {
                assert!(w == "<" || w.starts_with("module"), "{w}");
            }
        }
    }

    #[test]
    fn findings_block_ranks_numbers_and_caps() {
        let mut all: Vec<Finding> = (0..15)
            .map(|i| {
                Finding::new(Severity::Warning, "k", format!("finding {i}"))
                    .at(Where::rank(i))
                    .figure(Figure::new(1e6 * i as f64, Unit::Ns))
            })
            .collect();
        all.insert(
            0,
            Finding::new(Severity::Error, "oom", "out of memory").next("read it"),
        );
        let mut o = String::new();
        render(&mut o, &all);
        let lines: Vec<&str> = o.lines().collect();
        assert_eq!(
            lines[0],
            "Findings: 16 (1 error(s), 15 warning(s)), most important first"
        );
        assert_eq!(lines[1], " 1. error: out of memory");
        assert_eq!(lines[2], "      next: read it");
        assert_eq!(lines[3], " 2. warning: rank 0: finding 0: 0.000 ms");
        assert_eq!(
            lines[lines.len() - 2],
            "    and 4 more (--json lists them all)"
        );
        assert_eq!(lines[lines.len() - 1], "", "a blank line before the detail");
    }
}
