//! Unified diffs of planned changes, with `a/` and `b/` paths so `git apply` takes them.

use similar::TextDiff;

/// The diff of one file; empty when nothing changes.
pub fn unified(path: &str, before: &str, after: &str) -> String {
    if before == after {
        return String::new();
    }
    let diff = TextDiff::from_lines(before, after);
    let mut out = format!("diff --git a/{path} b/{path}\n");
    out.push_str(
        &diff
            .unified_diff()
            .context_radius(3)
            .header(&format!("a/{path}"), &format!("b/{path}"))
            .to_string(),
    );
    out
}

/// Colour a diff for a terminal: additions green, removals red, hunk headers cyan.
pub fn colorize(diff: &str) -> String {
    let mut out = String::with_capacity(diff.len() + diff.len() / 8);
    for line in diff.split_inclusive('\n') {
        let colour =
            if line.starts_with("+++") || line.starts_with("---") || line.starts_with("diff ") {
                "\x1b[1m"
            } else if line.starts_with('+') {
                "\x1b[32m"
            } else if line.starts_with('-') {
                "\x1b[31m"
            } else if line.starts_with("@@") {
                "\x1b[36m"
            } else {
                ""
            };
        if colour.is_empty() {
            out.push_str(line);
        } else {
            let (body, nl) = line.strip_suffix('\n').map_or((line, ""), |b| (b, "\n"));
            out.push_str(colour);
            out.push_str(body);
            out.push_str("\x1b[0m");
            out.push_str(nl);
        }
    }
    out
}

/// Lines added and removed in a unified diff `unified` made (headers left out).
pub fn counts_of(diff: &str) -> (usize, usize) {
    let (mut added, mut removed) = (0, 0);
    for line in diff.lines() {
        if line.starts_with("+++ ") || line.starts_with("--- ") {
            continue;
        }
        if line.starts_with('+') {
            added += 1;
        } else if line.starts_with('-') {
            removed += 1;
        }
    }
    (added, removed)
}

/// One file a command changes, with its diff.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileChange {
    pub file: String,
    pub added: usize,
    pub removed: usize,
    #[serde(skip)]
    pub before: String,
    #[serde(skip)]
    pub after: String,
    /// The unified diff (`git apply` takes it).
    #[serde(skip)]
    pub diff: String,
}

impl FileChange {
    /// The change from `before` to `after`, its diff computed once.
    pub fn new(file: String, before: String, after: String) -> FileChange {
        let diff = unified(&file, &before, &after);
        let (added, removed) = counts_of(&diff);
        FileChange {
            file,
            added,
            removed,
            before,
            after,
            diff,
        }
    }
}
