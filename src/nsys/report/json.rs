//! `--json`: the report as one JSON document (schema `instrument.nsys.report/3`, see
//! docs/nsys.md), written straight to the output as it is serialised (never built as a string).

use std::io::Write;

use serde::Serialize;

pub fn write(report: &impl Serialize, out: &mut impl Write) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::with_capacity(1 << 16, out);
    serde_json::to_writer_pretty(&mut w, report).map_err(std::io::Error::other)?;
    w.write_all(b"\n")?;
    w.flush()
}
