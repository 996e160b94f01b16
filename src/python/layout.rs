//! Laying out a line that a parameter value made too long, as `ruff format` does:
//! a set, tuple or list that ends the line is split one element per line with a trailing
//! comma (the right-hand split ruff applies to a collection literal); a scalar that is the
//! whole right side of an assignment is parenthesised when that makes it fit. Anything
//! else that is too long is reported, never written unformatted.

/// The lines to write for `line` (indented, without a line ending), which ends with
/// `literal` (optionally followed by `:`), under a `width`-column limit; `unit` is one
/// indentation step. `Err` when the line is too long and no ruff layout applies.
pub fn fit(line: &str, literal: &str, width: usize, unit: &str) -> Result<Vec<String>, TooLong> {
    let columns = |s: &str| s.chars().count();
    if columns(line) <= width {
        return Ok(vec![line.to_string()]);
    }
    let indent: String = line.chars().take_while(|c| c.is_whitespace()).collect();
    let (head, tail) = match line.strip_suffix(':') {
        Some(h) if h.ends_with(literal) => (&h[..h.len() - literal.len()], ":"),
        _ => match line.strip_suffix(literal) {
            Some(h) => (h, ""),
            None => return Err(too_long(line, width)),
        },
    };
    let open = literal.chars().next().unwrap_or(' ');
    // ruff splits the collection that ends the line only when it may leave the right side
    // unparenthesised: not when the lowest-precedence operator there occurs twice
    // (`a and b and x in {...}`), which it parenthesises and breaks at every operator.
    if lowest_operator_repeats(head) {
        return Err(too_long(line, width));
    }
    if matches!(open, '{' | '(' | '[') && literal.len() >= 2 {
        let close = &literal[literal.len() - 1..];
        let inner = &literal[1..literal.len() - 1];
        let items: Vec<&str> = inner
            .split(", ")
            .map(|i| i.trim().trim_end_matches(','))
            .filter(|i| !i.is_empty())
            .collect();
        let first = format!("{head}{open}");
        if items.is_empty() || columns(&first) > width {
            return Err(too_long(line, width));
        }
        let mut out = vec![first];
        out.extend(items.iter().map(|i| format!("{indent}{unit}{i},")));
        out.push(format!("{indent}{close}{tail}"));
        return Ok(out);
    }
    // `NAME = <scalar>`: ruff wraps the right side in parentheses when it then fits.
    let target = head.trim_end().strip_suffix(" =").map(str::trim);
    let simple = target.is_some_and(|t| {
        !t.is_empty()
            && t.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
    });
    if tail.is_empty() && simple {
        let inner = format!("{indent}{unit}{literal}");
        if columns(&inner) <= width {
            return Ok(vec![format!("{head}("), inner, format!("{indent})")]);
        }
        // ruff leaves a line that does not fit either way as it is.
        return Ok(vec![line.to_string()]);
    }
    Err(too_long(line, width))
}

/// Whether the expression that `head` ends in (after an assignment's `=`, or an `if`,
/// `elif` or `while`) has its lowest-precedence operator more than once at the top level:
/// two boolean operators, or, without any, two comparisons (checked against ruff 0.15).
fn lowest_operator_repeats(head: &str) -> bool {
    let expr = match head.split_once(" = ") {
        Some((_, rhs)) => rhs,
        None => head
            .trim_start()
            .trim_start_matches("if ")
            .trim_start_matches("elif ")
            .trim_start_matches("while "),
    };
    // Words at bracket depth 0, outside strings.
    let mut words: Vec<String> = vec![String::new()];
    let (mut depth, mut quote) = (0usize, None::<char>);
    for c in expr.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' => quote = Some(c),
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                ' ' if depth == 0 => words.push(String::new()),
                _ if depth == 0 => words.last_mut().unwrap().push(c),
                _ => {}
            },
        }
    }
    let count = |set: &[&str]| words.iter().filter(|w| set.contains(&w.as_str())).count();
    // ruff counts a nested `and` under an `or` too (`a and b or c` is parenthesised).
    let bools = count(&["and", "or"]);
    if bools > 0 {
        return bools > 1;
    }
    count(&["in", "==", "!=", "<", ">", "<=", ">=", "is"]) > 1
}

/// A line that a parameter value made longer than the checkout's line length, where ruff
/// would lay it out in a way the engine does not reproduce: the user picks a shorter value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "with this value the line `{line}` is {columns} columns, over the checkout's line length {width}, and ruff format would lay it out in a way the engine does not reproduce; use a shorter value"
)]
pub struct TooLong {
    /// The line, trimmed.
    pub line: String,
    pub columns: usize,
    pub width: usize,
}

crate::exit::user_errors!(TooLong);

fn too_long(line: &str, width: usize) -> TooLong {
    TooLong {
        line: line.trim().to_string(),
        columns: line.chars().count(),
        width,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_sets_split_one_per_line() {
        let ranks = format!(
            "{{{}}}",
            (0..14)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let line = format!("        _profiling = self.memory_profiling and self.rank in {ranks}");
        let out = fit(&line, &ranks, 100, "    ").unwrap();
        assert_eq!(
            out[0],
            "        _profiling = self.memory_profiling and self.rank in {"
        );
        assert_eq!(out[1], "            0,");
        assert_eq!(out.last().unwrap(), "        }");
        let header = format!("        if rank in {ranks}:");
        assert_eq!(
            fit(&header, &ranks, 40, "    ").unwrap().last().unwrap(),
            "        }:"
        );
        assert_eq!(
            fit("x = (5,)", "(5,)", 5, "    ").unwrap(),
            ["x = (", "    5,", ")"]
        );
    }

    #[test]
    fn a_repeated_lowest_operator_is_refused() {
        let ranks = format!(
            "{{{}}}",
            (0..30)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        // ruff parenthesises these and breaks at every operator.
        for head in [
            "        x = a and b and self.rank in ",
            "        x = a or b or self.rank in ",
            "        x = a < b in ",
            "        if a and b and self.rank in ",
            "        x = a and b or self.rank in ",
        ] {
            let line = format!("{head}{ranks}");
            assert!(fit(&line, &ranks, 100, "    ").is_err(), "{line}");
        }
        // One boolean operator, whatever binds tighter below it: the set is split.
        for head in [
            "        x = a and self.rank in ",
            "        x = c == 0 and b + 1 in ",
            "        x = not a and self.rank in ",
            "        x = f(a and b, c and d) and self.rank in ",
            "        x = \"a and b and\" and self.rank in ",
        ] {
            let line = format!("{head}{ranks}");
            assert!(fit(&line, &ranks, 100, "    ").is_ok(), "{line}");
        }
    }

    #[test]
    fn scalars_are_parenthesised_when_that_fits() {
        let s = format!("\"/{}\"", "a".repeat(84));
        let line = format!("        _dir = {s}");
        assert_eq!(
            fit(&line, &s, 100, "    ").unwrap(),
            vec![
                "        _dir = (".to_string(),
                format!("            {s}"),
                "        )".to_string()
            ]
        );
        let s = format!("\"/{}\"", "a".repeat(100));
        let line = format!("        _dir = {s}");
        assert_eq!(fit(&line, &s, 100, "    ").unwrap(), vec![line.clone()]);
        assert!(fit(&format!("f({s})"), &s, 100, "    ").is_err());
    }
}
