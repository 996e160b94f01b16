//! The findings on an HTML page (built with the page kit, whose style draws them).

use std::fmt::Write as _;

use super::{Finding, Severity};
use crate::page::esc;

/// The section every page opens with: `<h2>Findings</h2>` and the ranked list; nothing when
/// there are none.
pub fn render(out: &mut String, findings: &[Finding]) {
    if findings.is_empty() {
        return;
    }
    out.push_str("<section id=\"findings\"><h2>Findings</h2><ol class=\"findings\">");
    for f in findings {
        let class = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Notice => "notice",
        };
        let _ = write!(
            out,
            "<li class=\"{class}\" data-kind=\"{}\"><b>{}</b>",
            esc(&f.kind),
            esc(f.severity.word())
        );
        let place = f.place.label();
        if !place.is_empty() {
            let _ = write!(out, " {}:", esc(&place));
        }
        let _ = write!(out, " {}", esc(&f.what));
        if let Some(fig) = &f.figure {
            let _ = write!(out, ": {}", esc(&fig.show()));
        }
        for e in &f.evidence {
            let _ = write!(out, "<div class=\"ev\">{}</div>", esc(e));
        }
        if let Some(n) = &f.next {
            let _ = write!(out, "<div class=\"next\">next: {}</div>", esc(n));
        }
        out.push_str("</li>");
    }
    out.push_str("</ol></section>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_lists_every_finding_escaped() {
        let f = vec![
            Finding::new(Severity::Error, "oom", "out of <memory>"),
            Finding::new(Severity::Notice, "peak", "peak"),
        ];
        let mut o = String::new();
        render(&mut o, &f);
        assert_eq!(o.matches("<li ").count(), 2);
        assert!(o.contains("out of &lt;memory&gt;"));
        let mut none = String::new();
        render(&mut none, &[]);
        assert!(none.is_empty());
    }
}
