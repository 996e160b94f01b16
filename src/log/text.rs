//! The report as text for a terminal: tables at most about 100 columns wide, memory in
//! GiB as the prints give it (saved tensors in MiB), units always said.

use std::fmt::Write as _;

use super::fmt::GIB;
pub use super::fmt::{
    gib, human, mib, place, rank_name, say, shorten, signed_gib, table, thousands,
};
use super::model::*;

/// Longest label shown in a table column before it is shortened.
const LABEL: usize = 34;

fn opt(b: Option<i64>) -> String {
    b.map(gib).unwrap_or_else(|| "-".into())
}

pub fn render(r: &Report) -> String {
    let mut o = String::new();
    let ranks: Vec<String> = r.ranks.iter().map(|x| x.rank.to_string()).collect();
    let _ = writeln!(
        o,
        "instrument log: {} file(s), {} lines, {} prints from rank(s) {} (rules: {})",
        r.totals.files,
        thousands(r.totals.lines),
        thousands(r.totals.prints),
        if ranks.is_empty() {
            "-".into()
        } else {
            ranks.join(", ")
        },
        r.rules
    );
    for i in &r.inputs {
        let s = &i.stats;
        let mut line = format!(
            "  {}: {} lines, {} prints",
            i.file.name,
            thousands(s.lines),
            thousands(s.prints)
        );
        if s.gzip {
            line.push_str(" (gzip)");
        }
        if let (Some(a), Some(l)) = (i.file.attempt, i.file.local_rank) {
            let _ = write!(line, " [torchrun attempt {a}, local rank {l}]");
        }
        if s.binary {
            line.push_str(", looks binary");
        }
        say(&mut o, &line);
        if let Some(c) = &s.first_cut {
            say(
                &mut o,
                &format!(
                    "    {} print(s) cut off, skipped (first: line {})",
                    s.cut, c.line
                ),
            );
        }
        if let Some(u) = &s.first_unreadable {
            say(
                &mut o,
                &format!(
                    "    {} line(s) begin like a print but match no declaration (first: line {}: {})",
                    s.unreadable,
                    u.line,
                    shorten(&u.text, 48)
                ),
            );
        }
        if s.overlong_lines > 0 {
            say(
                &mut o,
                &format!("    {} over-long line(s) skipped", s.overlong_lines),
            );
        }
        if let Some(e) = &s.error {
            say(&mut o, &format!("    {e}"));
        }
    }
    if !r.skipped_files.is_empty() {
        let _ = writeln!(
            o,
            "  {} other file(s) in the folders not read (not named like logs), e.g. {}",
            r.skipped_files.len(),
            r.skipped_files[0]
        );
    }
    for m in &r.missing_ranks {
        let _ = writeln!(o, "  rank {m} (--rank) printed nothing");
    }
    let _ = writeln!(
        o,
        "Memory as printed: GiB, rounded to 0.01 GiB; saved tensors in MiB (the prints' \"MB\" are MiB)."
    );
    crate::findings::text::render(&mut o, &r.findings);
    if let Some(e) = &r.estimate
        && let Some(why) = &e.unavailable
    {
        say(&mut o, &format!("Estimate: none, {why}"));
    }
    for rank in &r.ranks {
        let estimate = r
            .estimate
            .as_ref()
            .and_then(|e| e.ranks.iter().find(|x| x.rank == rank.rank).map(|x| (e, x)));
        render_rank(&mut o, rank, estimate);
    }
    if let Some(a) = &r.across {
        render_across(&mut o, a);
    }
    crate::findings::text::fit(&o)
}

fn render_rank(
    o: &mut String,
    r: &RankReport,
    estimate: Option<(
        &super::estimate::EstimateReport,
        &super::estimate::RankEstimate,
    )>,
) {
    let _ = writeln!(
        o,
        "\n== {}: from {}",
        rank_name(r.rank, &r.mesh, r.pp_rank),
        r.run_from
    );
    if let Some(run) = &r.run {
        say(o, &format!("  run: {} ({})", run.label, run.at));
    }
    if r.files.len() > 1 {
        let _ = writeln!(o, "  its prints are in {}", r.files.join(", "));
    }
    if r.runs > 1 {
        let _ = writeln!(
            o,
            "  {} runs printed (a restarted run, or the same prints in several files): the last, from {}, is shown",
            r.runs, r.run_from
        );
    }
    if !r.setup.is_empty() {
        let _ = writeln!(o, "Setup");
        let rows: Vec<Vec<String>> = r
            .setup
            .iter()
            .map(|p| {
                let costs: Vec<String> = p
                    .costs
                    .iter()
                    .map(|c| format!("{} {:.2}", c.label, c.bytes as f64 / GIB))
                    .collect();
                vec![
                    shorten(&p.label, LABEL),
                    opt(p.allocated_bytes),
                    opt(p.cached_bytes),
                    opt(p.non_pytorch_bytes),
                    costs.join("; "),
                ]
            })
            .collect();
        table(
            o,
            "  ",
            &[
                "phase",
                "allocated",
                "cached",
                "non-PyTorch",
                "<stated cost (GiB)",
            ],
            &rows,
        );
    }
    match &r.step {
        None => {
            let _ = writeln!(o, "Profiled step: no schedule points printed");
        }
        Some(s) => {
            let probes: usize = s.points.iter().map(|p| p.probes_before).sum();
            let _ = writeln!(
                o,
                "Profiled step: {} schedule points, {probes} layer probes",
                s.points.len()
            );
            let rows: Vec<Vec<String>> = s
                .points
                .iter()
                .map(|p| {
                    vec![
                        shorten(&p.label, LABEL),
                        gib(p.allocated_bytes),
                        p.change_bytes.map(signed_gib).unwrap_or_else(|| "-".into()),
                        opt(p.cached_bytes),
                        opt(p.non_pytorch_bytes),
                    ]
                })
                .collect();
            table(
                o,
                "  ",
                &["point", "allocated", "change", "cached", "non-PyTorch"],
                &rows,
            );
            say(o, &format!("  peak: {}", peak_text(&s.peak)));
            let mut sp = format!(
                "  schedule peak: {} at {}",
                gib(s.schedule_peak.allocated_bytes),
                s.schedule_peak.label
            );
            if let Some(d) = s.device_in_use_at_schedule_peak_bytes {
                let _ = write!(
                    sp,
                    "; device memory in use there {} (allocated + cached + non-PyTorch)",
                    gib(d)
                );
            }
            say(o, &sp);
            if let Some(inc) = &s.largest_increase {
                say(
                    o,
                    &format!(
                        "  largest increase: {} GiB, {} -> {} ({})",
                        signed_gib(inc.bytes),
                        inc.from,
                        inc.to,
                        inc.at
                    ),
                );
            }
            if let Some(n) = &s.non_pytorch {
                if n.min_bytes == n.max_bytes {
                    let _ = writeln!(
                        o,
                        "  non-PyTorch memory: {} throughout the step",
                        gib(n.max_bytes)
                    );
                } else {
                    let _ = writeln!(
                        o,
                        "  non-PyTorch memory: {} to {} during the step",
                        gib(n.min_bytes),
                        gib(n.max_bytes)
                    );
                }
            }
        }
    }
    if let Some((e, x)) = estimate {
        super::estimate::render::text(o, e, x);
    }
    if let Some(d) = &r.detail_layers {
        say(o, &format!("Detail layers {} ({})", d.label, d.at));
    } else if !r.layers.is_empty() {
        let _ = writeln!(o, "Detail layers");
    }
    if !r.layers.is_empty() {
        for l in &r.layers {
            let mut rows: Vec<Vec<String>> = l
                .stages
                .iter()
                .map(|s| {
                    let saved = s.saved.as_ref();
                    vec![
                        s.stage.clone(),
                        opt(s.allocated_after_bytes),
                        s.change_bytes.map(signed_gib).unwrap_or_else(|| "-".into()),
                        saved
                            .map(|x| mib(x.activation_bytes()))
                            .unwrap_or_else(|| "-".into()),
                        saved
                            .map(|x| mib(x.weight_bytes()))
                            .unwrap_or_else(|| "-".into()),
                        saved
                            .map(|x| x.tensors.unwrap_or(x.list.len() as i64).to_string())
                            .unwrap_or_else(|| "-".into()),
                    ]
                })
                .collect();
            if let Some(all) = &l.saved_all {
                rows.push(vec![
                    "all stages".to_string(),
                    String::new(),
                    String::new(),
                    mib(all.activations_bytes),
                    mib(all.weights_bytes),
                    String::new(),
                ]);
            }
            let name = if l.layer < 0 {
                "layer ?".to_string()
            } else {
                format!("layer {}", l.layer)
            };
            let _ = writeln!(o, "  {name}");
            table(
                o,
                "    ",
                &[
                    "stage",
                    "allocated after",
                    "change",
                    "saved activations",
                    "saved weights",
                    "tensors",
                ],
                &rows,
            );
            for s in &l.stages {
                let mut parts: Vec<&str> =
                    s.probes.iter().filter_map(|p| p.part.as_deref()).collect();
                parts.dedup();
                for part in parts {
                    let steps: Vec<String> = s
                        .probes
                        .iter()
                        .filter(|p| p.part.as_deref() == Some(part))
                        .map(|p| format!("{} {:.2}", p.label, p.allocated_bytes as f64 / GIB))
                        .collect();
                    wrap(
                        o,
                        &format!("    {part}, layer {} {} (GiB): ", l.layer, s.stage),
                        &steps,
                    );
                }
            }
        }
    }
    if !r.outside_layers.is_empty() {
        let steps: Vec<String> = r
            .outside_layers
            .iter()
            .map(|p| format!("{} {:.2}", p.label, p.allocated_bytes as f64 / GIB))
            .collect();
        wrap(o, "  outside the layers (GiB): ", &steps);
    }
    for m in &r.out_of_memory {
        let mut line = format!(
            "{}: {} requested",
            capital(&m.label),
            gib(m.requested_bytes)
        );
        if let Some(f) = m.free_bytes {
            let _ = write!(line, ", {} free", gib(f));
        }
        if let Some(t) = m.total_bytes {
            let _ = write!(line, " of {}", gib(t));
        }
        say(o, &format!("{line} ({})", m.at));
    }
    for f in &r.files_written {
        let host = f
            .host
            .as_deref()
            .map(|h| format!(" on {h}"))
            .unwrap_or_default();
        let when = if f.at_out_of_memory {
            " (at the out-of-memory error)"
        } else {
            ""
        };
        say(o, &format!("{}{when}: {}{host}", capital(&f.label), f.path));
        if let Some(c) = &f.command {
            say(
                o,
                &format!("  open it: {}", command_line(c, f.host.as_deref())),
            );
        }
    }
    for f in &r.files_not_written {
        let reason = f
            .reason
            .as_deref()
            .map(|x| format!(": {x}"))
            .unwrap_or_default();
        say(
            o,
            &format!("{}: {}{reason} ({})", capital(&f.label), f.path, f.at),
        );
    }
    for w in &r.warnings {
        say(o, &format!("Warning: {} ({})", w.label, w.at));
    }
    for n in &r.notes {
        let _ = writeln!(o, "Note: {} ({})", n.label, n.at);
    }
    if r.prints_after_step > 0 {
        let _ = writeln!(
            o,
            "  {} prints after the profiled step (its schedule began again) are not in this report",
            r.prints_after_step
        );
    }
    if r.prints_not_kept > 0 {
        let _ = writeln!(
            o,
            "  {} prints beyond the first {} of this rank were counted, not kept",
            r.prints_not_kept,
            super::analyze::MAX_RECORDS_PER_RANK
        );
    }
}

/// A command that opens a file, with the host the file is on as a shell comment.
pub fn command_line(command: &str, host: Option<&str>) -> String {
    match host {
        Some(h) => format!("{command}  # the file is on {h}"),
        None => command.to_string(),
    }
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// `items` joined with ", ", wrapped at 100 columns under `head`.
fn wrap(o: &mut String, head: &str, items: &[String]) {
    let indent = " ".repeat(6);
    let mut line = head.to_string();
    let mut first = true;
    for it in items {
        let add = if first { it.clone() } else { format!(", {it}") };
        if !first && line.chars().count() + add.chars().count() > 100 {
            let _ = writeln!(o, "{},", line);
            line = format!("{indent}{it}");
        } else {
            line.push_str(&add);
        }
        first = false;
    }
    let _ = writeln!(o, "{line}");
}

/// What is said when no rank stands out.
pub const NO_STANDOUT: &str = "no rank stands out: every figure compared is within the prints' resolution of the median of the ranks it is compared with";

/// What is said when too few ranks were read to call one out: the odd one out needs three
/// peers or more.
pub const TOO_FEW_PEERS: &str = "no rank is called out: standing out needs three ranks or more of one pipeline stage (all ranks, for the costs alike on every stage); read the logs of more ranks";

/// `NO_STANDOUT`, or `TOO_FEW_PEERS` when no figure had three ranks to compare.
pub fn no_standout(a: &Across) -> &'static str {
    if a.ranks.len() >= 3 {
        NO_STANDOUT
    } else {
        TOO_FEW_PEERS
    }
}

/// The rank that stands out, and the phases where it differs most, as a sentence.
pub fn standout_text(s: &Standout) -> String {
    let others: Vec<String> = s.compared_with.iter().map(i64::to_string).collect();
    let name = match &s.mesh {
        Some(m) => format!("rank {} ({})", s.rank, m.short()),
        None => format!("rank {}", s.rank),
    };
    let mut line = match s.pp_rank {
        // Compared with the ranks on its own pipeline stage.
        Some(pp) => format!(
            "{name} stands out on pipeline stage {pp}: {} {} against the median of the \
             other ranks on that stage ({}) of {}",
            s.figure,
            gib(s.bytes),
            super::across::and_list(&others),
            gib(s.median_bytes)
        ),
        None => format!(
            "{name} stands out: {} {} against the other ranks' median of {}",
            s.figure,
            gib(s.bytes),
            gib(s.median_bytes)
        ),
    };
    if !s.phases.is_empty() {
        let ph: Vec<String> = s
            .phases
            .iter()
            .map(|p| format!("{} ({} GiB)", p.phase, signed_gib(p.diff_bytes)))
            .collect();
        let _ = write!(line, "; it differs most at {}", ph.join(", "));
    }
    line
}

pub fn peak_text(p: &Peak) -> String {
    let mut s = format!("{} at \"{}\"", gib(p.allocated_bytes), p.label);
    match (p.layer, &p.stage) {
        (Some(l), Some(st)) => {
            let _ = write!(s, " (layer {l} {st})");
        }
        (Some(l), None) => {
            let _ = write!(s, " (layer {l})");
        }
        _ => {}
    }
    match (&p.after_point, &p.before_point) {
        (Some(a), Some(b)) => {
            let _ = write!(s, ", between \"{a}\" and \"{b}\"");
        }
        (Some(a), None) => {
            let _ = write!(s, ", after \"{a}\"");
        }
        _ => {}
    }
    let _ = write!(s, " ({})", p.at);
    s
}

/// The mesh axes of the rows that have more than one rank (every axis when none has), in the
/// order the labels give them: the columns of a table keyed by coordinates.
pub fn mesh_axes(rows: &[AcrossRow]) -> Vec<String> {
    let mut axes: Vec<(String, bool)> = Vec::new();
    for r in rows {
        for a in r.mesh.iter().flat_map(|m| &m.axes) {
            match axes.iter_mut().find(|(n, _)| *n == a.name) {
                Some((_, wide)) => *wide |= a.size > 1,
                None => axes.push((a.name.clone(), a.size > 1)),
            }
        }
    }
    let any_wide = axes.iter().any(|(_, w)| *w);
    axes.into_iter()
        .filter(|(_, w)| *w || !any_wide)
        .map(|(n, _)| n)
        .collect()
}

fn render_across(o: &mut String, a: &Across) {
    let _ = writeln!(o, "\n== Across ranks");
    // Keyed by the mesh coordinates when the ranks printed them, else by pipeline stage.
    let axes = mesh_axes(&a.ranks);
    let rows: Vec<Vec<String>> = a
        .ranks
        .iter()
        .map(|r| {
            let mut row = vec![r.rank.to_string()];
            if axes.is_empty() {
                row.push(
                    r.pp_rank
                        .map(|p| p.to_string())
                        .unwrap_or_else(|| "-".into()),
                );
            }
            for ax in &axes {
                row.push(
                    r.mesh
                        .as_ref()
                        .and_then(|m| m.get(ax))
                        .map(|(k, _)| k.to_string())
                        .unwrap_or_else(|| "-".into()),
                );
            }
            row.extend([
                opt(r.peak_bytes),
                shorten(r.peak_label.as_deref().unwrap_or("-"), 22),
                opt(r.schedule_end_bytes),
                opt(r.non_pytorch_max_bytes),
                if r.setup_costs.is_empty() {
                    "-".into()
                } else {
                    gib(r.setup_total_bytes)
                },
                shorten(r.detail_layers.as_deref().unwrap_or("-"), 12),
            ]);
            row
        })
        .collect();
    let mut header: Vec<&str> = vec!["rank"];
    if axes.is_empty() {
        header.push("pp");
    }
    header.extend(axes.iter().map(String::as_str));
    header.extend([
        "peak",
        "<peak at",
        "end of step",
        "non-PyTorch",
        "setup costs",
        "<detail layers",
    ]);
    table(o, "  ", &header, &rows);
    let labels: Vec<&String> = {
        let mut v: Vec<&String> = a.ranks.iter().flat_map(|r| r.setup_costs.keys()).collect();
        v.sort();
        v.dedup();
        v
    };
    if !labels.is_empty() && labels.len() <= 6 {
        let mut header = vec!["rank".to_string()];
        header.extend(labels.iter().map(|l| shorten(l, 16)));
        let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
        let rows: Vec<Vec<String>> = a
            .ranks
            .iter()
            .map(|r| {
                let mut row = vec![r.rank.to_string()];
                row.extend(labels.iter().map(|l| opt(r.setup_costs.get(*l).copied())));
                row
            })
            .collect();
        let _ = writeln!(o, "  setup costs as stated:");
        table(o, "  ", &header_refs, &rows);
    }
    for h in a
        .highest
        .iter()
        .filter(|h| h.bytes - h.median_bytes > a.resolution_bytes)
    {
        let on = h.pp_rank.map(|p| format!(" on pp={p}")).unwrap_or_default();
        say(
            o,
            &format!(
                "  highest {}{on}: {} ({}; median {})",
                h.figure,
                rank_name(h.rank, &h.mesh, None),
                gib(h.bytes),
                gib(h.median_bytes)
            ),
        );
    }
    if let Some(n) = &a.not_compared {
        say(o, &format!("  {n}"));
    }
    match &a.standout {
        None => {
            say(o, &format!("  {}", no_standout(a)));
        }
        Some(s) => say(o, &format!("  {}", standout_text(s))),
    }
    let files: Vec<(i64, &FileWritten)> = a
        .ranks
        .iter()
        .flat_map(|r| r.files.iter().map(move |f| (r.rank, f)))
        .filter(|(_, f)| f.command.is_some())
        .collect();
    if !files.is_empty() {
        let _ = writeln!(o, "  open each rank's snapshot:");
        for (rank, f) in files {
            let c = command_line(f.command.as_deref().unwrap_or(""), f.host.as_deref());
            let when = if f.at_out_of_memory {
                " (at the out-of-memory error)"
            } else {
                ""
            };
            say(o, &format!("    rank {rank}{when}: {c}"));
        }
    }
}
