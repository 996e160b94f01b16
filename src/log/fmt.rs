//! How the readers' reports write figures and lines: memory in the unit the prints give it,
//! tables at most about 100 columns wide, lines wrapped at 100, text escaped for a page, a
//! rank named by where it is. Shared by the report, the estimate and the comparison.

use std::fmt::Write as _;

pub const GIB: f64 = 1073741824.0;
pub const MIB: f64 = 1048576.0;

pub fn gib(b: i64) -> String {
    format!("{:.2} GiB", b as f64 / GIB)
}

pub fn signed_gib(b: i64) -> String {
    format!("{:+.2}", b as f64 / GIB)
}

pub fn mib(b: i64) -> String {
    format!("{:.1} MiB", b as f64 / MIB)
}

/// A size in the unit that suits it.
pub fn human(b: i64) -> String {
    let a = b.unsigned_abs() as f64;
    if a >= GIB {
        gib(b)
    } else if a >= MIB {
        mib(b)
    } else if a >= 1024.0 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Write `text` as one line, or wrapped at 100 columns at spaces, continuing 4 columns
/// deeper than it starts.
pub fn say(o: &mut String, text: &str) {
    crate::findings::text::wrap(o, text);
}

/// Lay out rows under a header; columns after the first are right-aligned unless the
/// header starts with `<`.
pub fn table(out: &mut String, indent: &str, header: &[&str], rows: &[Vec<String>]) {
    let n = header.len();
    let mut width: Vec<usize> = header
        .iter()
        .map(|h| h.trim_start_matches('<').chars().count())
        .collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::from(indent);
        for (i, c) in cells.iter().enumerate() {
            let left = i == 0 || header[i].starts_with('<');
            let pad = width[i].saturating_sub(c.chars().count());
            if i > 0 {
                s.push_str("  ");
            }
            if left {
                s.push_str(c);
                if i + 1 < cells.len() {
                    s.push_str(&" ".repeat(pad));
                }
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        s.trim_end().to_string()
    };
    let _ = writeln!(
        out,
        "{}",
        line(
            header
                .iter()
                .map(|h| h.trim_start_matches('<').to_string())
                .collect()
        )
    );
    for r in rows {
        let _ = writeln!(out, "{}", line(r.clone()));
    }
}

/// Where a rank is: `pp 1, ep 6` from its run shape, else its pipeline stage.
pub fn place(mesh: &Option<crate::mesh::Mesh>, pp_rank: Option<i64>) -> Option<String> {
    match (mesh, pp_rank) {
        (Some(m), _) => Some(m.short()),
        (None, Some(p)) => Some(format!("pp {p}")),
        (None, None) => None,
    }
}

/// `rank 14 (pp 1, ep 6)`.
pub fn rank_name(rank: i64, mesh: &Option<crate::mesh::Mesh>, pp_rank: Option<i64>) -> String {
    match place(mesh, pp_rank) {
        Some(p) => format!("rank {rank} ({p})"),
        None => format!("rank {rank}"),
    }
}

pub use crate::page::esc;
