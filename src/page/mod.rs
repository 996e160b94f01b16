//! The one kit every HTML page is built with (`log`, `log --diff`, `snapshot`, `nsys report`
//! and its `--diff`, `report`): the escaper, the shared style, the page's skeleton (head, the
//! tooltip and the render sentinel, foot), and the pieces pages share (`table`, `chart`).
//! Pages are self-contained: inline CSS and SVG, at most a few lines of script, nothing loaded
//! from the network. A page adds only the style and script of what is its own.
//!
//! The kit is the lowest layer of the pages: it knows no report (the findings section is
//! `findings::html`, built with this kit).

use std::fmt::Write as _;

pub mod chart;
pub mod table;

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

/// The colours of series, bands and parts, in order (Tableau 10).
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];
/// What is not one of the named series ("other sites").
pub const OTHER: &str = "#bab0ac";

/// The style every page shares: type, headings, tables (`td.n`: a figure, right-aligned),
/// legends, the tooltip, the findings section. A page's own style comes after it.
pub const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;color:#222;max-width:1200px;padding:0 16px}\
svg{max-width:100%;height:auto;display:block}svg text{font:11px system-ui,sans-serif}\
h1{font-size:20px;margin-bottom:4px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:3px}\
h3{font-size:14px;margin:18px 0 6px}table{border-collapse:collapse;margin:8px 0}\
td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}\
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}code{font-size:12px;overflow-wrap:anywhere}\
.muted{color:#777}.legend{margin:4px 0 8px}.legend span{display:inline-block;margin-right:14px}\
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}\
#tip{position:fixed;pointer-events:none;background:#222;color:#fff;padding:5px 8px;font-size:12px;display:none;border-radius:4px;max-width:520px;z-index:9;white-space:pre-line}\
.findings{margin:0 0 1.5em 0;padding:0;list-style:none}\
.findings li{margin:.3em 0;padding:.4em .6em;border-left:4px solid #888;background:#f7f7f7}\
.findings li.error{border-color:#c0392b}.findings li.warning{border-color:#e67e22}\
.findings li.notice{border-color:#2980b9}.findings .ev{color:#555;font-size:90%}\
.findings .next{color:#1a5276;font-size:90%}\
section.gate.failed{border-left:4px solid #c0392b;padding-left:10px}section.gate.refused{border-left:4px solid #e67e22;padding-left:10px}\
tr.exceeded td{color:#b00}";

/// How a page shows what is under the pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tips {
    /// No script: an SVG element's `<title>` (the browser's own tooltip).
    Title,
    /// The kit's script: a `data-tip` attribute, shown at the pointer; the page also reports
    /// how it rendered (the hidden `render-status` the Chromium tests read).
    Script,
}

/// Tooltips for every `data-tip` (elements inside a `data-hover` element handle the pointer
/// themselves, with `tip` and `untip`), and the hidden `render-status` element the tests read
/// after the page loads: `render-ok svg=N`, or the script errors.
const SCRIPT: &str = "<script>(function(){var tip=document.getElementById('tip');\
window.tip=function(x,y,t){tip.textContent=t;tip.style.display='block';tip.style.left=Math.min(x+14,window.innerWidth-540)+'px';tip.style.top=(y+14)+'px';};\
window.untip=function(){tip.style.display='none';};\
document.addEventListener('mousemove',function(e){var el=e.target,t=el&&el.getAttribute&&el.getAttribute('data-tip');\
if(t)window.tip(e.clientX,e.clientY,t);else if(!el.closest||!el.closest('[data-hover]'))window.untip();});\
window.addEventListener('load',function(){var s=document.createElement('div');s.id='render-status';\
var n=document.querySelectorAll('svg').length;\
s.textContent=window.__errors.length?('render-error: '+window.__errors.join(' | ')):('render-ok svg='+n);\
s.style.display='none';document.body.appendChild(s);});})();</script>";

/// Script errors, collected from the first line on for the render sentinel.
const ERRORS: &str = "<script>window.__errors=[];window.addEventListener('error',function(e){window.__errors.push(String(e.message||e));});</script>";

/// One page being written: the head is written by `new`, the foot by `finish`. It derefs to
/// the `String` the sections write into.
pub struct Page {
    html: String,
    tips: Tips,
}

impl Page {
    /// `<!DOCTYPE html>` to `<body>`: `title` (escaped here), the shared style and then
    /// `style`, the page's own.
    pub fn new(title: &str, style: &str, tips: Tips) -> Page {
        let mut html = String::with_capacity(1 << 16);
        let _ = write!(
            html,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}{style}</style>",
            esc(title)
        );
        if tips == Tips::Script {
            html.push_str(ERRORS);
        }
        html.push_str("</head><body>\n");
        if tips == Tips::Script {
            html.push_str("<div id=\"tip\"></div>");
        }
        Page { html, tips }
    }

    /// How this page shows tooltips (for the charts drawn on it).
    pub fn tips(&self) -> Tips {
        self.tips
    }

    /// The page: the kit's script (for `Tips::Script`), then `script`, the page's own (its
    /// text, without the `<script>` element; empty for none), and the end.
    pub fn finish(mut self, script: &str) -> String {
        if self.tips == Tips::Script {
            self.html.push_str(SCRIPT);
        }
        if !script.is_empty() {
            let _ = write!(self.html, "<script>{script}</script>");
        }
        self.html.push_str("\n</body></html>\n");
        self.html
    }
}

impl std::ops::Deref for Page {
    type Target = String;
    fn deref(&self) -> &String {
        &self.html
    }
}

impl std::ops::DerefMut for Page {
    fn deref_mut(&mut self) -> &mut String {
        &mut self.html
    }
}

/// A tooltip on an element, as the page shows them: ` data-tip="..."` to put in its start tag,
/// or `<title>...</title>` to put inside it. Returns (attribute, child).
pub fn tip(tips: Tips, text: &str) -> (String, String) {
    match tips {
        Tips::Script => (format!(" data-tip=\"{}\"", esc(text)), String::new()),
        Tips::Title => (String::new(), format!("<title>{}</title>", esc(text))),
    }
}

/// A legend: a swatch and a label (escaped) each.
pub fn legend<'a>(out: &mut String, items: impl IntoIterator<Item = (&'a str, &'a str)>) {
    out.push_str("<div class=\"legend\">");
    for (color, label) in items {
        let _ = write!(
            out,
            "<span><i style=\"background:{color}\"></i>{}</span>",
            esc(label)
        );
    }
    out.push_str("</div>");
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
    fn a_page_without_script_is_head_body_and_foot() {
        let mut p = Page::new("a <b>", "h1{x:y}", Tips::Title);
        p.push_str("<h1>x</h1>");
        assert_eq!(
            p.finish(""),
            format!(
                "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>a &lt;b&gt;</title><style>{STYLE}h1{{x:y}}</style></head><body>\n<h1>x</h1>\n</body></html>\n"
            )
        );
    }

    #[test]
    fn a_scripted_page_collects_errors_first_and_reports_how_it_rendered_last() {
        let mut p = Page::new("t", "", Tips::Script);
        p.push_str("<p>body</p>");
        let page = p.finish("var own=1;");
        assert_eq!(
            page,
            format!(
                "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>t</title><style>{STYLE}</style>{ERRORS}</head><body>\n<div id=\"tip\"></div><p>body</p>{SCRIPT}<script>var own=1;</script>\n</body></html>\n"
            )
        );
    }

    #[test]
    fn tips_are_attributes_or_titles() {
        assert_eq!(
            tip(Tips::Script, "a \"b\""),
            (" data-tip=\"a &quot;b&quot;\"".to_string(), String::new())
        );
        assert_eq!(
            tip(Tips::Title, "a<b"),
            (String::new(), "<title>a&lt;b</title>".to_string())
        );
        let mut o = String::new();
        legend(&mut o, [("#000", "x & y")]);
        assert_eq!(
            o,
            "<div class=\"legend\"><span><i style=\"background:#000\"></i>x &amp; y</span></div>"
        );
    }
}
