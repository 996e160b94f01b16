//! What the report says about the export itself: the notes (tables missing, ranges left out or
//! closed by rule, names grouped, ...) and what the CUDA graph trace mode means for the figures.

use crate::nsys::nvtx::Projection;
use crate::nsys::ranks::ProcRank;
use crate::nsys::report::Note;

/// What the CUDA graph trace mode means for the figures.
pub fn graphs_meaning(mode: Option<&str>, graph_count: u64, has_graph_table: bool) -> String {
    match (mode, graph_count) {
        (Some("graph"), n) if n > 0 => format!(
            "--cuda-graph-trace=graph: each of the {n} CUDA graph launches is one GPU interval (category cuda_graph), counted as compute and projected onto the NVTX range that launched it; the kernels inside graphs are not listed (profile with --cuda-graph-trace=node to see them)"
        ),
        (Some("graph"), _) => "--cuda-graph-trace=graph: no CUDA graph was launched".into(),
        (Some("node"), _) => "--cuda-graph-trace=node: kernels inside CUDA graphs are traced one by one and counted like any kernel".into(),
        (Some(m), _) => format!("--cuda-graph-trace={m}"),
        (None, n) if n > 0 => format!(
            "{n} CUDA graph launches traced whole (category cuda_graph, counted as compute); the export does not record the trace mode"
        ),
        (None, _) if has_graph_table => "CUDA graph rows are all shadowed by traced nodes".into(),
        (None, _) => "no CUDA graph launches in the export".into(),
    }
}

pub struct NoteInputs<'a> {
    pub has_runtime: bool,
    pub has_nvtx: bool,
    pub proj: &'a Projection,
    pub unmatched: u64,
    pub negative: u64,
    pub graph_rows: u64,
    /// Every process's per-rank figures, and whether NVTX was read sorted for them.
    pub ranks: &'a [ProcRank],
    pub ranks_reordered: bool,
}

pub fn notes(n: NoteInputs) -> Vec<Note> {
    let mut notes = Vec::new();
    let proj = n.proj;
    if !n.has_runtime {
        notes.push(Note {
            kind: "no_runtime_table",
            count: 0,
            message: "no CUPTI_ACTIVITY_KIND_RUNTIME table: GPU work cannot be tied to NVTX ranges"
                .into(),
        });
    }
    if !n.has_nvtx {
        notes.push(Note {
            kind: "no_nvtx_table",
            count: 0,
            message: "no NVTX_EVENTS table: profile with --trace nvtx (and --python-functions-trace) to name modules".into(),
        });
    }
    if proj.cross_thread_ranges > 0 {
        notes.push(Note {
            kind: "cross_thread_ranges",
            count: proj.cross_thread_ranges,
            message: format!(
                "{} NVTX range(s) ended on another thread than they started on (e.g. {}); left out of the projection, as nsys does",
                proj.cross_thread_ranges,
                proj.cross_thread_names.join(", ")
            ),
        });
    }
    if proj.unclosed_ranges > 0 {
        notes.push(Note {
            kind: "unclosed_ranges",
            count: proj.unclosed_ranges,
            message: format!(
                "{} NVTX range(s) never ended; closed at the last NVTX timestamp, as nsys does",
                proj.unclosed_ranges
            ),
        });
    }
    if n.has_runtime && n.unmatched > 0 {
        notes.push(Note {
            kind: "unmatched_gpu_ops",
            count: n.unmatched,
            message: format!(
                "{} GPU operation(s) have no CUDA runtime call with the same process and correlation id; they count toward no NVTX range",
                n.unmatched
            ),
        });
    }
    if n.negative > 0 {
        notes.push(Note {
            kind: "negative_timestamps",
            count: n.negative,
            message: format!(
                "{} event(s) have negative timestamps (recorded before the capture range started); they are kept",
                n.negative
            ),
        });
    }
    if n.graph_rows > 0 {
        notes.push(Note {
            kind: "graph_rows_with_nodes",
            count: n.graph_rows,
            message: format!(
                "{} CUDA graph launch row(s) also have their nodes traced as kernels; the nodes are counted, the graph rows are not",
                n.graph_rows
            ),
        });
    }
    if proj.names.stripped > 0 {
        notes.push(Note {
            kind: "grouped_autograd_names",
            count: proj.names.stripped,
            message: format!(
                "{} NVTX range name(s) carried PyTorch's per-op suffixes (seq, op_id, sizes, input_op_ids); they are grouped by op name (--by-shape keeps the input shapes)",
                proj.names.stripped
            ),
        });
    }
    if proj.folded_families > 0 {
        notes.push(Note {
            kind: "folded_counter_names",
            count: proj.folded_families,
            message: format!(
                "{} family(ies) of range names that differ only in numbers (e.g. `step N`) were folded into one row each",
                proj.folded_families
            ),
        });
    }
    rank_notes(n.ranks, n.ranks_reordered, &mut notes);
    if proj.reordered {
        notes.push(Note {
            kind: "nvtx_reordered",
            count: 0,
            message: "NVTX_EVENTS is not in start order per thread; it was read sorted by thread and start (slower)".into(),
        });
    }
    notes
}

/// What the conventions could not find: one note per kind, naming the first process's reason.
fn rank_notes(ranks: &[ProcRank], reordered: bool, notes: &mut Vec<Note>) {
    let total = ranks.len();
    let mut note = |kind: &'static str, reasons: Vec<&str>, tail: &str| {
        if let Some(first) = reasons.first() {
            notes.push(Note {
                kind,
                count: reasons.len() as u64,
                message: format!(
                    "{kind_text} for {} of {total} process(es): {first}{tail}",
                    reasons.len(),
                    kind_text = match kind {
                        "mesh_unknown" => "mesh unknown",
                        "setup_not_first" => "setup range not first",
                        _ => "window",
                    }
                ),
            });
        }
    };
    note(
        "mesh_unknown",
        ranks
            .iter()
            .filter_map(|p| p.mesh_unknown.as_deref())
            .collect(),
        "; processes are listed by pid",
    );
    note(
        "setup_not_first",
        ranks
            .iter()
            .filter_map(|p| p.setup_note.as_deref())
            .collect(),
        "",
    );
    note(
        "window",
        ranks
            .iter()
            .filter_map(|p| p.window.note.as_deref())
            .collect(),
        "",
    );
    if reordered {
        notes.push(Note {
            kind: "nvtx_read_sorted",
            count: 0,
            message: "NVTX_EVENTS is not in start order per process; the per-rank figures read it sorted by start (slower)".into(),
        });
    }
}
