//! Python literals written the way `ruff format` leaves them: integer sets and tuples, and
//! strings quoted with the project's preferred quote unless the other needs fewer escapes.

/// `{3, 14}`.
pub fn int_set(values: &[u64]) -> String {
    format!("{{{}}}", join(values))
}

/// `(5,)`, `(5, 6)`, `()`.
pub fn int_tuple(values: &[u64]) -> String {
    match values {
        [one] => format!("({one},)"),
        _ => format!("({})", join(values)),
    }
}

fn join(values: &[u64]) -> String {
    values
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A string literal for `text` (which holds no control characters). As ruff does: the
/// preferred quote, unless the text holds more of it than of the other quote; the chosen
/// quote and backslashes escaped, nothing else.
pub fn string(text: &str, prefer_double: bool) -> String {
    let doubles = text.matches('"').count();
    let singles = text.matches('\'').count();
    let double = if prefer_double {
        doubles <= singles
    } else {
        doubles < singles
    };
    let quote = if double { '"' } else { '\'' };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for ch in text.chars() {
        if ch == '\\' || ch == quote {
            out.push('\\');
        }
        out.push(ch);
    }
    out.push(quote);
    out
}

/// The first character Python source must not hold raw in a one-line string literal
/// (a line break or another control character), with its position.
pub fn first_control(text: &str) -> Option<(usize, char)> {
    text.chars()
        .enumerate()
        .find(|(_, c)| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}'))
}

/// Read back a string literal `string` wrote (for marker parameters).
pub fn unquote(literal: &str) -> Option<String> {
    let mut chars = literal.chars();
    let quote = chars.next().filter(|q| *q == '"' || *q == '\'')?;
    let mut out = String::new();
    let mut escaped = false;
    let mut closed = false;
    for ch in chars {
        if closed {
            return None;
        }
        if escaped {
            out.push(ch);
            escaped = false;
        } else if ch == '\\' {
            escaped = true;
        } else if ch == quote {
            closed = true;
        } else {
            out.push(ch);
        }
    }
    closed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_quoted_as_ruff_prefers() {
        assert_eq!(string("/tmp", true), "\"/tmp\"");
        assert_eq!(string("a\"b", true), "'a\"b'");
        assert_eq!(string("a\"b'c", true), "\"a\\\"b'c\"");
        assert_eq!(string("C:\\x", true), "\"C:\\\\x\"");
        assert_eq!(string("/tmp", false), "'/tmp'");
        for s in ["", "a\"; STEP=5", "x'\"\\", "é 中"] {
            assert_eq!(unquote(&string(s, true)).as_deref(), Some(s));
            assert_eq!(unquote(&string(s, false)).as_deref(), Some(s));
        }
    }

    #[test]
    fn control_characters_are_found() {
        assert_eq!(first_control("/tmp/x\r"), Some((6, '\r')));
        assert_eq!(first_control("/tmp/é"), None);
    }
}
