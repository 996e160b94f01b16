//! `--json`: the report as one JSON document (schema `instrument.nsys.report/1`, see docs/nsys.md).

use crate::nsys::report::Report;

pub fn render(report: &Report) -> String {
    let mut s = serde_json::to_string_pretty(report).expect("report serialises");
    s.push('\n');
    s
}
