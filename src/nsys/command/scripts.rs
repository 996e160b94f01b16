//! The scripts a launch names, read (never run): which programs a shell script runs (nsys itself,
//! srun, torchrun), which Python files it names, and the text a trainer is recognised by.

use std::path::{Path, PathBuf};

/// A script the launch names, as read.
#[derive(Debug, Clone)]
pub struct Script {
    /// As the launch names it (relative to the folder the launch runs in).
    pub path: PathBuf,
    /// The text without comment lines.
    pub code: String,
}

/// A command a shell script runs: the program word, its 1-based line, the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub program: String,
    pub line: usize,
    pub text: String,
}

/// Read a script; `None` when it is not a readable text file here.
pub fn read(path: &Path) -> Option<Script> {
    if !path.is_file() {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    Some(Script {
        path: path.to_path_buf(),
        code: without_comments(&text),
    })
}

/// A script given inline (`bash -c '...'`).
pub fn inline(label: &str, text: &str) -> Script {
    Script {
        path: PathBuf::from(label),
        code: without_comments(text),
    }
}

/// The text with its comment lines blanked (line numbers kept). A `#` inside a line is left:
/// telling a comment from `$#` or a quoted `#` needs a shell parser, and a false program there
/// is harmless (it is only looked for by name).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.trim_start().starts_with('#') {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether the file starts like a shell script (`#!/bin/bash`, `#!/usr/bin/env sh`).
pub fn has_shell_shebang(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let first = text.lines().next().unwrap_or("");
    first.starts_with("#!")
        && first
            .split(['/', ' '])
            .any(|w| matches!(w, "sh" | "bash" | "dash" | "zsh" | "ksh"))
}

/// Words that may precede a command without being it.
const PREFIXES: [&str; 12] = [
    "exec", "time", "then", "do", "else", "if", "while", "until", "!", "command", "nohup", "{",
];

/// The commands the script runs, by program word, in order.
pub fn commands(script: &Script) -> Vec<Run> {
    let mut runs = Vec::new();
    for (n, line) in script.code.lines().enumerate() {
        let code = strip_arrays(line);
        for segment in code.split([';', '|', '&', '(', ')', '`']) {
            let mut words = segment.split_whitespace().peekable();
            while let Some(w) = words.peek() {
                let assignment = w
                    .split_once('=')
                    .is_some_and(|(name, _)| is_name(name.trim_end_matches('+')));
                if assignment || PREFIXES.contains(w) {
                    words.next();
                } else {
                    break;
                }
            }
            if let Some(program) = words.next() {
                let program = program.trim_matches(|c| c == '"' || c == '\'');
                runs.push(Run {
                    program: super::launchers::base(program).to_string(),
                    line: n + 1,
                    text: line.trim().to_string(),
                });
            }
        }
    }
    runs
}

/// The line with array literals (`A=(x y)`, `A+=(x y)`) taken out: their words are values.
fn strip_arrays(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find("=(") {
        out.push_str(&rest[..=i]);
        rest = match rest[i + 2..].find(')') {
            Some(j) => &rest[i + 2 + j + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// The Python files a script names that exist here (`SCRIPT=path/x.py`, `python path/x.py`).
pub fn python_files(script: &Script) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    for word in script
        .code
        .split(|c: char| c.is_whitespace() || matches!(c, '=' | '"' | '\'' | '(' | ')' | ';'))
    {
        if word.ends_with(".py") && !word.contains('$') {
            let p = PathBuf::from(word);
            if p.is_file() && !found.contains(&p) {
                found.push(p);
            }
        }
    }
    found
}

/// The Python scripts among the launch's arguments (`x.py`, `--script=x.py`) that exist here.
pub fn python_arguments(launch: &[String]) -> Vec<PathBuf> {
    launch
        .iter()
        .map(|a| a.split_once('=').map_or(a.as_str(), |(_, v)| v))
        .filter(|v| v.ends_with(".py"))
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(text: &str) -> Vec<(String, usize)> {
        commands(&inline("t", text))
            .into_iter()
            .map(|r| (r.program, r.line))
            .collect()
    }

    #[test]
    fn programs_at_command_position() {
        let text = "#!/bin/bash\n# srun -W 0 this is a comment\nNSYS_ARGS+=(profile)\nARGS+=(--nnodes=${SLURM_NNODES:-1} --nproc-per-node=gpu)\nOUTDIR=x; mkdir -p $OUTDIR\nnsys ${NSYS_ARGS[@]} torchrun ${ARGS[@]} $SCRIPT $@\nexec > >(tee $OUTPUT) 2>&1\nA=1 B=2 /usr/bin/srun -N 2 x.sh\n";
        let r = runs(text);
        assert!(r.contains(&("nsys".into(), 6)), "{r:?}");
        assert!(r.contains(&("srun".into(), 8)), "{r:?}");
        assert!(r.contains(&("mkdir".into(), 5)), "{r:?}");
        assert!(
            !r.iter().any(|(p, _)| p == "profile" || p.starts_with("--")),
            "{r:?}"
        );
        assert!(
            !r.iter().any(|(_, l)| *l == 2),
            "a comment runs nothing: {r:?}"
        );
    }
}
