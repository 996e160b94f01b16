//! The command as a POSIX shell reads it: every word quoted where it needs to be, so what the
//! shell passes on is exactly the words of the plan (spaces, quotes, `$`, and nsys's
//! `%q{NAME}`, which must reach nsys unexpanded).

/// The command's words: the environment, the launcher nsys goes inside (empty: nsys goes
/// first), nsys, `profile` and its options, the program nsys starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Words {
    pub env: Vec<(String, String)>,
    pub outer: Vec<String>,
    pub program: String,
    pub args: Vec<String>,
    pub inner: Vec<String>,
}

impl Words {
    /// The words to execute, the program first.
    pub fn argv(&self) -> Vec<String> {
        let mut v = self.outer.clone();
        v.push(self.program.clone());
        v.extend(self.args.iter().cloned());
        v.extend(self.inner.iter().cloned());
        v
    }

    /// The command on several lines: the environment, the launcher nsys goes inside, nsys and
    /// one option per line, the program nsys starts.
    pub fn render(&self) -> String {
        let mut lines: Vec<String> = self.env.iter().map(|(k, v)| assignment(k, v)).collect();
        let indent = if self.outer.is_empty() {
            ""
        } else {
            lines.push(words(&self.outer));
            "  "
        };
        let (profile, options) = self.args.split_at(self.args.len().min(1));
        let mut head = vec![shell_quote(&self.program)];
        head.extend(profile.iter().map(|a| shell_quote(a)));
        lines.push(format!("{indent}{}", head.join(" ")));
        for o in options {
            lines.push(format!("{indent}  {}", shell_quote(o)));
        }
        if !self.inner.is_empty() {
            lines.push(format!("{indent}  {}", words(&self.inner)));
        }
        let mut s = lines.join(" \\\n");
        s.push('\n');
        s
    }
}

/// Quote a word for a POSIX shell when it needs it (single quotes: nothing inside is expanded).
pub fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | '/' | '=' | ':' | ',' | '+' | '@' | '%')
        });
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `NAME=VALUE` with only the value quoted (a quoted whole word is a command, not an assignment).
pub fn assignment(name: &str, value: &str) -> String {
    format!("{name}={}", shell_quote(value))
}

fn words(ws: &[String]) -> String {
    ws.iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote("--nproc_per_node=4"), "--nproc_per_node=4");
        assert_eq!(
            shell_quote("--output=x_%q{SLURM_NODEID}"),
            "'--output=x_%q{SLURM_NODEID}'"
        );
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
        assert_eq!(assignment("A", "x y"), "A='x y'");
    }
}
