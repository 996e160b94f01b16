//! The report's readings that need a sentence: which library allocated for a site,
//! how the steps were found (the run's markers or a guess), and what blocks without a
//! stack mean.

use serde::Serialize;

use super::{SiteRef, pct};
use crate::snapshot::analysis::Analysis;
use crate::snapshot::frames::{is_python_file, short_function};
use crate::snapshot::model::{BlockState, FrameId, Snapshot};
use crate::snapshot::paths::{self, short};
use crate::snapshot::sites::Category;
use crate::snapshot::steps::{Edge, StepMethod};
use crate::snapshot::trace::{NONE, TraceAnalysis};

/// The library code that allocated on a site's behalf.
#[derive(Clone, Debug, Serialize)]
pub struct LibraryRef {
    /// The installed package (`transformers`), `--internal`'s pattern, or `stdlib`.
    pub name: String,
    pub file: String,
    pub line: i64,
    pub function: String,
}

impl LibraryRef {
    /// `transformers modeling_opt.py:160 in forward`.
    pub fn label(&self) -> String {
        let file = short(&self.file);
        let base = file.rsplit(['/', '\\']).next().unwrap_or(&file).to_string();
        format!(
            "{} {}:{} in {}",
            self.name,
            base,
            self.line,
            short_function(&self.function)
        )
    }
}

pub fn library_ref(a: &Analysis, f: FrameId) -> LibraryRef {
    let snap = a.snap;
    let file = snap.frame_file(f);
    let name = paths::installed_package(file)
        .or_else(|| a.attr.internal_match(file).map(str::to_string))
        .unwrap_or_else(|| {
            if paths::is_stdlib(file) {
                "stdlib".into()
            } else {
                "library".into()
            }
        });
    LibraryRef {
        name,
        file: file.to_string(),
        line: snap.frame_line(f),
        function: snap.frame_name(f).to_string(),
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct AnnotationRef {
    pub name: String,
    /// "start": a step starts where the range starts; "end": a step ends where it ends.
    pub edge: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Steps {
    pub count: u32,
    /// The trace entry each step starts at (indices into the kept entries).
    pub starts: Vec<u32>,
    /// "schedule" (the run marked its pipeline schedule: one step), "annotation" (the run's
    /// `external_annotations`), "optimizer_step" (the
    /// optimizer's steps in the trace's stacks), "marker" (a once-per-step allocation),
    /// "sawtooth" (live-memory cycles) or "none".
    pub method: String,
    /// The run marked its steps itself ("annotation", "optimizer_step").
    pub from_run: bool,
    /// The steps are a guess ("marker", "sawtooth").
    pub guess: bool,
    pub marker: Option<SiteRef>,
    pub annotation: Option<AnnotationRef>,
    pub optimizer_frame: Option<SiteRef>,
    /// How the steps were found, in a sentence.
    pub note: String,
}

const HOW_TO_MARK: &str = "record with torch >= 2.6 and step a torch.optim optimizer (its `Optimizer.step` annotations mark the steps), or wrap each step in `torch.profiler.record_function(\"train_step\")`";

pub fn steps_out(snap: &Snapshot, t: &TraceAnalysis) -> Steps {
    let s = &t.steps_found;
    let site = |f: Option<FrameId>| f.map(|f| SiteRef::of(snap, Some(f)));
    let unplaced = if s.unplaced_annotations {
        " (the file has external_annotations, but its trace entries have no time_us to place them)"
    } else {
        ""
    };
    let note = match s.method {
        StepMethod::Schedule => "marked by the run: one pipeline step, its schedule events marked \
            (record_function ranges named as the memory estimator names them)"
            .into(),
        StepMethod::Annotation => match &s.annotation {
            Some((name, Edge::End)) => format!(
                "marked by the run: each step ends where `{name}` ends (external_annotations)"
            ),
            Some((name, Edge::Start)) => format!(
                "marked by the run: each step starts where `{name}` starts (external_annotations)"
            ),
            None => "marked by the run (external_annotations)".into(),
        },
        StepMethod::OptimizerStep => format!(
            "marked by the run: each step ends after the allocations of its optimizer step ({})",
            site(s.optimizer_frame)
                .map(|r| r.label())
                .unwrap_or_default()
        ),
        StepMethod::Marker => format!(
            "a guess: the run marked no steps{unplaced}; each step starts at {}, an allocation that recurs once per step. To mark them, {HOW_TO_MARK}",
            site(s.marker_site).map(|r| r.label()).unwrap_or_default()
        ),
        StepMethod::Sawtooth => format!(
            "a guess: the run marked no steps{unplaced}; the steps are the cycles of live memory rising and falling. To mark them, {HOW_TO_MARK}"
        ),
        StepMethod::None => format!("none found: the run marked no steps{unplaced}"),
    };
    Steps {
        count: t.step_count(),
        starts: t.step_starts.clone(),
        method: s.method.name().into(),
        from_run: s.method.from_run(),
        guess: matches!(s.method, StepMethod::Marker | StepMethod::Sawtooth),
        marker: site(s.marker_site),
        annotation: s.annotation.as_ref().map(|(name, edge)| AnnotationRef {
            name: name.clone(),
            edge: match edge {
                Edge::Start => "start",
                Edge::End => "end",
            }
            .into(),
        }),
        optimizer_frame: site(s.optimizer_frame),
        note,
    }
}

/// Live blocks without a stack.
#[derive(Clone, Debug, Serialize)]
pub struct NoStack {
    pub bytes: u64,
    pub blocks: u64,
    /// Percent of live bytes.
    pub percent: f64,
    /// Of `bytes`: allocated inside the trace window, so while history was recorded,
    /// on a thread with no Python frame (the autograd engine's, with stacks="python").
    pub no_python_frame_bytes: u64,
    /// Of `bytes`: the rest, allocated before history was recorded (or while it was off).
    pub before_history_bytes: u64,
    /// Whether anything in the file has a stack (history was recorded, only later).
    pub stacks_recorded: bool,
    /// History began during the run (as the recipe starts it, at the profiled step): blocks
    /// from before it are alive with no stack, and the trace begins after them.
    pub history_started_during_run: bool,
    /// What it means, in a sentence.
    pub meaning: String,
    pub fix: String,
}

/// The recipe's call (add-memory-prints.SKILL.md): history starts at the profiled step, on
/// purpose, so the state from before it (parameters, gradients, optimizer state) has no stack.
pub const RECIPE_CALL: &str = "torch.cuda.memory._record_memory_history(max_entries=1048576)";

const BEFORE_HISTORY: &str = "allocated before memory history (`torch.cuda.memory._record_memory_history()`) started: the state from before the recorded window (the parameters, gradients and optimizer state when history starts at a training step, as the recipe starts it at the profiled step), or while history was turned off; not a mistake";
const NO_HISTORY: &str = "nothing in this snapshot has a stack: memory history was not recorded with stacks (`torch.cuda.memory._record_memory_history()` was not called before these allocations, or was called with `context=None`)";
const NO_PYTHON_FRAME: &str = "allocated while history was recorded, on a thread with no Python frame (the autograd engine's backward), and recorded with stacks=\"python\", which keeps no C++ frame";

pub fn no_stack_out(a: &Analysis) -> Option<NoStack> {
    let snap = a.snap;
    let bytes = a.cat_bytes(Category::NoStack);
    if bytes == 0 {
        return None;
    }
    let blocks = snap
        .segments
        .iter()
        .filter(|s| s.device == a.device)
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == BlockState::Allocated && b.stack == 0)
        .count() as u64;
    let stacks_recorded = snap.stacks.len() > 1;
    // A stack can be empty although history was on only when no C++ frame is kept.
    let python_only = !snap
        .frames
        .iter()
        .any(|f| !is_python_file(snap.strings.get(f.file)));
    let in_trace = match (&a.trace, python_only) {
        (Some(t), true) => t
            .recs
            .iter()
            .filter(|r| r.stack == 0 && r.alloc_idx != NONE && r.free_idx == NONE)
            .fold(0u64, |s, r| s.saturating_add(r.size)),
        _ => 0,
    }
    .min(bytes);
    let before = bytes - in_trace;
    let mut parts = Vec::new();
    if before > 0 {
        let what = if stacks_recorded {
            BEFORE_HISTORY
        } else {
            NO_HISTORY
        };
        parts.push(if in_trace > 0 {
            format!("{} of it {what}", super::human(before))
        } else {
            what.to_string()
        });
    }
    if in_trace > 0 {
        parts.push(if before > 0 {
            format!("{} of it {NO_PYTHON_FRAME}", super::human(in_trace))
        } else {
            NO_PYTHON_FRAME.to_string()
        });
    }
    let started_during_run = before > 0 && stacks_recorded;
    let mut fix = Vec::new();
    let no_history_fix = format!(
        "record with `{RECIPE_CALL}` (the recipe's call) from the step to profile until the snapshot is taken"
    );
    if started_during_run {
        // The recipe's snapshot is of one step: the state before it is accounted for by the
        // run's own memory prints, not by moving the call.
        fix.push("none needed for a snapshot of one step: the run's memory prints account for the state from before it (`instrument log` on the run's logs)");
    } else if before > 0 {
        fix.push(&no_history_fix);
    }
    if in_trace > 0 {
        fix.push("record with `stacks=\"all\"` to keep the C++ frames (the autograd node) that name those");
    }
    Some(NoStack {
        bytes,
        blocks,
        percent: pct(bytes, a.live_bytes()),
        no_python_frame_bytes: in_trace,
        before_history_bytes: before,
        stacks_recorded,
        history_started_during_run: started_during_run,
        meaning: parts.join("; "),
        fix: format!(
            "{}; these bytes are left out of the category shares",
            fix.join("; ")
        ),
    })
}
