//! The checkout's `ruff format` settings that decide how inserted code must be laid out:
//! the line length and the preferred quote, from `ruff.toml`, `.ruff.toml` or
//! `pyproject.toml` (`[tool.ruff]`) in the checkout root, as ruff finds them there.

use std::path::Path;

/// What the layout of inserted code follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub line_length: usize,
    pub double_quotes: bool,
}

impl Default for Style {
    /// ruff's own defaults.
    fn default() -> Self {
        Style {
            line_length: 88,
            double_quotes: true,
        }
    }
}

impl Style {
    /// The settings of the checkout at `root` (ruff's defaults where it sets none).
    pub fn of_checkout(root: &Path) -> Style {
        for (file, table) in [
            ("ruff.toml", None),
            (".ruff.toml", None),
            ("pyproject.toml", Some("tool")),
        ] {
            let Ok(text) = std::fs::read_to_string(root.join(file)) else {
                continue;
            };
            let Ok(doc) = text.parse::<toml::Table>() else {
                continue;
            };
            let ruff = match table {
                None => Some(&doc),
                Some(t) => doc
                    .get(t)
                    .and_then(|v| v.get("ruff"))
                    .and_then(|v| v.as_table()),
            };
            let Some(ruff) = ruff else {
                continue;
            };
            let mut style = Style::default();
            if let Some(n) = ruff.get("line-length").and_then(|v| v.as_integer()) {
                style.line_length = n.clamp(1, 320) as usize;
            }
            if let Some(q) = ruff
                .get("format")
                .and_then(|f| f.get("quote-style"))
                .and_then(|q| q.as_str())
            {
                style.double_quotes = q != "single";
            }
            return style;
        }
        Style::default()
    }
}
