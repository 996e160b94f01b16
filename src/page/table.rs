//! Tables: a head that says which columns are figures (`class="n"`: right-aligned, tabular
//! digits), and rows of text (escaped here) or of markup (escaped by the caller).

use std::fmt::Write as _;

use super::esc;

/// One table being written into a page; `end` closes it.
pub struct Table<'o> {
    out: &'o mut String,
    numeric: Vec<bool>,
}

/// A column: its heading and whether it holds figures.
pub type Col<'a> = (&'a str, bool);

impl<'o> Table<'o> {
    /// `<table>` (with `class`, unless empty) and its head row.
    pub fn new(out: &'o mut String, class: &str, cols: &[Col]) -> Table<'o> {
        if class.is_empty() {
            out.push_str("<table><tr>");
        } else {
            let _ = write!(out, "<table class=\"{class}\"><tr>");
        }
        for (name, numeric) in cols {
            let _ = write!(out, "<th{}>{}</th>", n(*numeric), esc(name));
        }
        out.push_str("</tr>\n");
        Table {
            out,
            numeric: cols.iter().map(|c| c.1).collect(),
        }
    }

    /// A row of text, each cell escaped.
    pub fn row<S: AsRef<str>>(&mut self, cells: &[S]) {
        self.row_with("", cells.iter().map(|c| esc(c.as_ref())));
    }

    /// A row of markup (escaped by the caller); `attrs` go into the `<tr>` as they are
    /// (` class="rest"`, ` data-stage="..."`).
    pub fn row_with(&mut self, attrs: &str, cells: impl IntoIterator<Item = String>) {
        let _ = write!(self.out, "<tr{attrs}>");
        for (i, c) in cells.into_iter().enumerate() {
            let numeric = self.numeric.get(i).copied().unwrap_or(false);
            let _ = write!(self.out, "<td{}>{c}</td>", n(numeric));
        }
        self.out.push_str("</tr>\n");
    }

    pub fn end(self) {
        self.out.push_str("</table>\n");
    }
}

fn n(numeric: bool) -> &'static str {
    if numeric { " class=\"n\"" } else { "" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_marked_and_text_escaped() {
        let mut o = String::new();
        let mut t = Table::new(&mut o, "k", &[("name", false), ("ms", true)]);
        t.row(&["a<b", "1.0"]);
        t.row_with(
            " class=\"rest\"",
            ["<i>3 more</i>".to_string(), "2.0".into()],
        );
        t.end();
        assert_eq!(
            o,
            "<table class=\"k\"><tr><th>name</th><th class=\"n\">ms</th></tr>\n\
<tr><td>a&lt;b</td><td class=\"n\">1.0</td></tr>\n\
<tr class=\"rest\"><td><i>3 more</i></td><td class=\"n\">2.0</td></tr>\n</table>\n"
        );
    }
}
