//! The findings on an HTML page, and the one escaper every page uses.

use std::fmt::Write as _;

use super::{Finding, Severity};

/// Text for an HTML page (element content and quoted attribute values alike).
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// The style of the findings section, for a page's `<style>`.
pub const STYLE: &str = ".findings{margin:0 0 1.5em 0;padding:0;list-style:none}\
.findings li{margin:.3em 0;padding:.4em .6em;border-left:4px solid #888;background:#f7f7f7}\
.findings li.error{border-color:#c0392b}.findings li.warning{border-color:#e67e22}\
.findings li.notice{border-color:#2980b9}.findings .ev{color:#555;font-size:90%}\
.findings .next{color:#1a5276;font-size:90%}";

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
    fn escapes_all_five() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

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
