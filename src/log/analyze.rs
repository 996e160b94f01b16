//! From prints to a per-rank report. Records are kept per rank as they stream in, bounded:
//! a rank that prints its setup again (a restarted run, or the same output in a second
//! file) starts over, and once the profiled step's schedule begins again the rest is
//! counted, not kept. The meaning of each print comes from its declaration's kind and
//! roles; nothing here knows which project printed them.

use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};

use super::decl::{Catalog, Entry, Kind, Role, Ty};
use super::model::*;
use super::scan::{Record, Value};

/// At most this many prints are kept for one rank's run (one profiled step of a large
/// model prints a few thousand).
pub const MAX_RECORDS_PER_RANK: usize = 50_000;
/// At most this many ranks are kept.
pub const MAX_RANKS: usize = 4096;

/// A print kept for the report; its values are `values[start..start + len]` of its rank.
#[derive(Clone, Copy)]
struct Kept {
    entry: u32,
    file: u32,
    line: u64,
    start: u32,
    len: u32,
}

#[derive(Default)]
struct RankState {
    /// Where each run began (file, line).
    runs: Vec<(u32, u64)>,
    records: Vec<Kept>,
    /// The values of the kept prints, one after the other.
    values: Vec<Value>,
    /// The setup phases and schedule points seen in this run, by `label_key`.
    setup_labels: HashSet<u64>,
    timeline_labels: HashSet<u64>,
    step_done: bool,
    after_step: u64,
    not_kept: u64,
    files: Vec<u32>,
}

/// Collects the records of every rank.
pub struct Collector<'c> {
    catalog: &'c Catalog,
    ranks: BTreeMap<i64, RankState>,
    only: Vec<i64>,
    pub ranks_not_kept: u64,
}

impl<'c> Collector<'c> {
    /// `only`: keep just these ranks (empty: all).
    pub fn new(catalog: &'c Catalog, only: &[i64]) -> Collector<'c> {
        Collector {
            catalog,
            ranks: BTreeMap::new(),
            only: only.to_vec(),
            ranks_not_kept: 0,
        }
    }

    pub fn add(&mut self, r: Record<'_>) {
        let e = &self.catalog.entries[r.entry as usize];
        let Some(rank) = e.field_with(Role::Rank).and_then(|i| match &r.values[i] {
            Value::Int(v) => Some(*v),
            _ => None,
        }) else {
            return;
        };
        if !self.only.is_empty() && !self.only.contains(&rank) {
            return;
        }
        if !self.ranks.contains_key(&rank) && self.ranks.len() >= MAX_RANKS {
            self.ranks_not_kept += 1;
            return;
        }
        let st = self.ranks.entry(rank).or_default();
        if !st.files.contains(&r.file) {
            st.files.push(r.file);
        }
        if st.runs.is_empty() {
            st.runs.push((r.file, r.line));
        }
        match e.kind {
            Kind::Setup => {
                let label = label_key(r.entry, e, r.values);
                if !st.setup_labels.insert(label) {
                    // The setup printed again: a new run of this rank.
                    st.runs.push((r.file, r.line));
                    st.records.clear();
                    st.values.clear();
                    st.setup_labels.clear();
                    st.setup_labels.insert(label);
                    st.timeline_labels.clear();
                    st.step_done = false;
                    st.after_step = 0;
                    st.not_kept = 0;
                }
            }
            Kind::Timeline => {
                let label = label_key(r.entry, e, r.values);
                if st.step_done || !st.timeline_labels.insert(label) {
                    st.step_done = true;
                    st.after_step += 1;
                    return;
                }
            }
            Kind::Layer
            | Kind::SavedHeader
            | Kind::SavedActivation
            | Kind::SavedWeight
            | Kind::SavedTotal
                if st.step_done =>
            {
                st.after_step += 1;
                return;
            }
            _ => {}
        }
        if st.records.len() >= MAX_RECORDS_PER_RANK {
            st.not_kept += 1;
            return;
        }
        st.records.push(Kept {
            entry: r.entry,
            file: r.file,
            line: r.line,
            start: st.values.len() as u32,
            len: r.values.len() as u32,
        });
        st.values.extend_from_slice(r.values);
    }

    /// The per-rank reports; `files` names the input files by index.
    pub fn finish(self, files: &[String]) -> Vec<RankReport> {
        self.ranks
            .into_iter()
            .map(|(rank, st)| rank_report(self.catalog, files, rank, st))
            .collect()
    }
}

/// What tells a line from the other lines of its format: the format and the values its
/// label names (hashed, so that no label is built for the lines that stream past).
fn label_key(entry: u32, e: &Entry, values: &[Value]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    entry.hash(&mut h);
    for &i in &e.label_fields {
        match &values[i] {
            Value::Int(v) => v.hash(&mut h),
            Value::Num(v, d) => (v.to_bits(), d).hash(&mut h),
            Value::Text(t) => t.hash(&mut h),
        }
    }
    h.finish()
}

/// A label or command with `{name}` filled from the values as printed.
pub fn fill(template: &str, e: &Entry, values: &[Value]) -> String {
    let mut out = template.to_string();
    for (f, v) in e.fields.iter().zip(values) {
        let key = format!("{{{}}}", f.name);
        if out.contains(&key) {
            out = out.replace(&key, &v.printed());
        }
    }
    out
}

/// A value in bytes, when the field is an amount of memory.
fn bytes(e: &Entry, values: &[Value], i: usize) -> Option<i64> {
    match (e.fields[i].ty, &values[i]) {
        (Ty::Bytes { factor, .. }, Value::Num(v, _)) => Some((v * factor).round() as i64),
        _ => None,
    }
}

fn resolution(e: &Entry, values: &[Value], i: usize) -> i64 {
    match (e.fields[i].ty, &values[i]) {
        (Ty::Bytes { factor, .. }, Value::Num(_, d)) => {
            (factor / 10f64.powi(*d as i32)).round() as i64
        }
        _ => 0,
    }
}

/// One record with its declaration, and what it inherits.
struct View<'a> {
    e: &'a Entry,
    r: Record<'a>,
    at: String,
    layer: Option<i64>,
    stage: Option<String>,
}

impl View<'_> {
    fn role_bytes(&self, role: Role) -> Option<i64> {
        self.e
            .field_with(role)
            .and_then(|i| bytes(self.e, self.r.values, i))
    }

    fn role_int(&self, role: Role) -> Option<i64> {
        self.e
            .field_with(role)
            .and_then(|i| match &self.r.values[i] {
                Value::Int(v) => Some(*v),
                _ => None,
            })
    }

    fn role_text(&self, role: Role) -> Option<String> {
        self.e.field_with(role).map(|i| self.r.values[i].printed())
    }

    fn label(&self) -> String {
        let default = match self.e.kind {
            Kind::SavedHeader => "saved tensors",
            Kind::SavedActivation => "activation",
            Kind::SavedWeight => "weight",
            Kind::SavedTotal => "saved totals",
            Kind::FileFailed => "file not written",
            Kind::Oom => "out of memory",
            _ => "",
        };
        fill(
            self.e.label.as_deref().unwrap_or(default),
            self.e,
            self.r.values,
        )
    }

    fn rule(&self) -> String {
        self.e.rules.join(", ")
    }

    fn values(&self) -> BTreeMap<String, String> {
        self.e
            .fields
            .iter()
            .zip(self.r.values.iter())
            .filter(|(f, _)| f.role != Some(Role::Rank))
            .map(|(f, v)| (f.name.clone(), v.printed()))
            .collect()
    }

    fn meaning_of(&self, role: Role) -> Option<String> {
        self.e
            .field_with(role)
            .and_then(|i| self.e.fields[i].meaning.clone())
    }
}

fn rank_report(catalog: &Catalog, files: &[String], rank: i64, st: RankState) -> RankReport {
    let at = |r: &Kept| {
        format!(
            "{}:{}",
            files
                .get(r.file as usize)
                .map(String::as_str)
                .unwrap_or("?"),
            r.line
        )
    };
    // Resolve inheritance in stream order.
    let mut last_layer: Option<i64> = None;
    let mut last_stage: Option<String> = None;
    let mut views = Vec::with_capacity(st.records.len());
    let mut resolution_bytes = 0;
    let mut saved_resolution_bytes = 0;
    for k in &st.records {
        let e = &catalog.entries[k.entry as usize];
        let r = Record {
            entry: k.entry,
            file: k.file,
            line: k.line,
            values: &st.values[k.start as usize..(k.start + k.len) as usize],
        };
        let mut v = View {
            e,
            r,
            at: at(k),
            layer: None,
            stage: None,
        };
        v.layer = v.role_int(Role::Layer);
        v.stage = v.role_text(Role::Stage);
        if v.layer.is_none() && e.inherit.contains(&Role::Layer) {
            v.layer = last_layer;
        }
        if v.stage.is_none() && e.inherit.contains(&Role::Stage) {
            v.stage = last_stage.clone();
        }
        if v.layer.is_some() || v.stage.is_some() {
            last_layer = v.layer;
            last_stage = v.stage.clone();
        }
        for (i, f) in e.fields.iter().enumerate() {
            match f.role {
                Some(Role::Allocated) => {
                    resolution_bytes = resolution_bytes.max(resolution(e, r.values, i));
                }
                Some(Role::Activations | Role::Weights | Role::Size) => {
                    saved_resolution_bytes = saved_resolution_bytes.max(resolution(e, r.values, i));
                }
                _ => {}
            }
        }
        views.push(v);
    }

    let pp_rank = views.iter().find_map(|v| v.role_int(Role::PpRank));
    let (mesh, run) = match views.iter().rfind(|v| v.e.kind == Kind::Run) {
        Some(v) => run_shape(v),
        None => (None, None),
    };
    let setup = setup_phases(&views);
    let setup_breakdown = breakdown(&setup);
    let (step, layers, outside_layers) = step_and_layers(&views);
    // A file written (or not) by the print right after an out-of-memory print.
    let after_oom = |i: usize| i > 0 && views[i - 1].e.kind == Kind::Oom;
    let of_kind = |k: Kind| views.iter().enumerate().filter(move |(_, v)| v.e.kind == k);
    let files_written = of_kind(Kind::File)
        .map(|(i, v)| FileWritten {
            label: v.label(),
            path: v.role_text(Role::Path).unwrap_or_default(),
            host: v.role_text(Role::Host),
            at: v.at.clone(),
            command: v.e.open.as_deref().map(|o| fill(o, v.e, v.r.values)),
            at_out_of_memory: after_oom(i),
        })
        .collect();
    let files_not_written = of_kind(Kind::FileFailed)
        .map(|(i, v)| FileNotWritten {
            label: v.label(),
            path: v.role_text(Role::Path).unwrap_or_default(),
            reason: v.role_text(Role::Reason),
            at: v.at.clone(),
            at_out_of_memory: after_oom(i),
        })
        .collect();
    let out_of_memory = of_kind(Kind::Oom)
        .map(|(_, v)| OutOfMemory {
            label: v.label(),
            requested_bytes: v.role_bytes(Role::Requested).unwrap_or(0),
            free_bytes: v.role_bytes(Role::Free),
            total_bytes: v.role_bytes(Role::Total),
            at: v.at.clone(),
        })
        .collect();
    let detail_layers = of_kind(Kind::DetailLayers)
        .next_back()
        .map(|(_, v)| DetailLayers {
            label: v.label(),
            layers: v
                .role_text(Role::Layers)
                .map(|t| t.split(',').filter_map(|x| x.trim().parse().ok()).collect())
                .unwrap_or_default(),
            held: v.role_text(Role::Held),
            at: v.at.clone(),
        });
    let notes_of = |k: Kind| {
        of_kind(k)
            .map(|(_, v)| Note {
                label: v.label(),
                at: v.at.clone(),
            })
            .collect()
    };
    let warnings = notes_of(Kind::Warning);
    let notes = notes_of(Kind::Note);
    let (run_file, run_line) = st.runs.last().copied().unwrap_or((0, 0));
    RankReport {
        rank,
        pp_rank,
        mesh,
        run,
        files: st
            .files
            .iter()
            .filter_map(|&f| files.get(f as usize).cloned())
            .collect(),
        runs: st.runs.len(),
        run_from: format!(
            "{}:{}",
            files
                .get(run_file as usize)
                .map(String::as_str)
                .unwrap_or("?"),
            run_line
        ),
        resolution_bytes,
        saved_resolution_bytes,
        setup,
        setup_breakdown,
        step,
        layers,
        outside_layers,
        detail_layers,
        files_written,
        files_not_written,
        out_of_memory,
        warnings,
        notes,
        prints_after_step: st.after_step,
        prints_not_kept: st.not_kept,
    }
}

/// The run shape a `run` print states, read as `crate::mesh` reads a trainer's label: the
/// rank's mesh coordinates, and the other fields as printed.
fn run_shape(v: &View) -> (Option<crate::mesh::Mesh>, Option<RunShape>) {
    let Some(text) = v.role_text(Role::Run) else {
        return (None, None);
    };
    let rank_key =
        v.e.field_with(Role::Rank)
            .map(|i| v.e.fields[i].name.clone())
            .unwrap_or_default();
    let label = crate::mesh::Label::parse(&text);
    let fields = label
        .iter()
        .flat_map(|l| &l.fields)
        .filter(|f| !matches!(f.value, crate::mesh::Value::Coord { .. }))
        .map(|f| (f.key.clone(), f.value.to_string()))
        .collect();
    let mesh = label.as_ref().map(|l| l.mesh()).filter(|m| !m.is_empty());
    let run = RunShape {
        label: text,
        fields,
        at: v.at.clone(),
        rank_key,
    };
    (mesh, Some(run))
}

fn setup_phases(views: &[View]) -> Vec<SetupPhase> {
    views
        .iter()
        .filter(|v| v.e.kind == Kind::Setup)
        .map(|v| {
            let label = v.label();
            let costs =
                v.e.fields
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| f.role == Some(Role::Cost))
                    .filter_map(|(i, f)| {
                        Some(Cost {
                            label: f.meaning.clone().unwrap_or_else(|| f.name.clone()),
                            bytes: bytes(v.e, v.r.values, i)?,
                            source: "stated",
                            phase: label.clone(),
                            same_on_every_stage: v.e.same_on_every_stage,
                        })
                    })
                    .collect();
            SetupPhase {
                rule: v.rule(),
                at: v.at.clone(),
                allocated_bytes: v.role_bytes(Role::Allocated),
                cached_bytes: v.role_bytes(Role::Cached),
                non_pytorch_bytes: v.role_bytes(Role::NonPytorch),
                costs,
                values: v.values(),
                same_on_every_stage: v.e.same_on_every_stage,
                label,
            }
        })
        .collect()
}

/// The stated costs, then what each setup phase added to the allocation.
fn breakdown(setup: &[SetupPhase]) -> Vec<Cost> {
    let mut out: Vec<Cost> = setup.iter().flat_map(|p| p.costs.iter().cloned()).collect();
    let mut previous: Option<i64> = None;
    for p in setup {
        if let Some(a) = p.allocated_bytes {
            if let Some(before) = previous
                && a != before
            {
                out.push(Cost {
                    label: p.label.clone(),
                    bytes: a - before,
                    source: "allocated",
                    phase: p.label.clone(),
                    same_on_every_stage: p.same_on_every_stage,
                });
            }
            previous = Some(a);
        }
    }
    out
}

type StepParts = (Option<Step>, Vec<LayerReport>, Vec<Probe>);

fn step_and_layers(views: &[View]) -> StepParts {
    let first = views.iter().position(|v| v.e.kind == Kind::Timeline);
    let last = views.iter().rposition(|v| v.e.kind == Kind::Timeline);
    let mut points: Vec<Point> = Vec::new();
    let mut layers: Vec<LayerReport> = Vec::new();
    let mut outside: Vec<Probe> = Vec::new();
    let mut peak: Option<(i64, &View, Option<String>, Option<String>)> = None;
    let mut previous_alloc: Option<i64> = None;
    let mut probes_since = 0;
    // The saved-tensor list being read: (layer, stage).
    let mut open_saved: Option<(Option<i64>, Option<String>)> = None;
    let mut trace: Vec<TraceItem> = Vec::new();
    for (i, v) in views.iter().enumerate() {
        let alloc = v.role_bytes(Role::Allocated);
        let in_step = matches!((first, last), (Some(a), Some(b)) if i >= a && i <= b);
        if v.e.kind == Kind::Layer || v.e.kind == Kind::Timeline {
            open_saved = None;
        }
        match v.e.kind {
            Kind::Timeline => {
                let Some(a) = alloc else { continue };
                let delta_field = v.e.field_with(Role::Delta);
                points.push(Point {
                    label: v.label(),
                    rule: v.rule(),
                    at: v.at.clone(),
                    allocated_bytes: a,
                    change_bytes: points.last().map(|p| a - p.allocated_bytes),
                    printed_delta_bytes: delta_field.and_then(|d| bytes(v.e, v.r.values, d)),
                    printed_delta_meaning: v.meaning_of(Role::Delta),
                    cached_bytes: v.role_bytes(Role::Cached),
                    non_pytorch_bytes: v.role_bytes(Role::NonPytorch),
                    probes_before: probes_since,
                    values: v.values(),
                });
                probes_since = 0;
            }
            Kind::Layer => {
                let Some(a) = alloc else { continue };
                let probe = Probe {
                    label: v.label(),
                    part: v.e.part.clone(),
                    rule: v.rule(),
                    at: v.at.clone(),
                    allocated_bytes: a,
                    change_bytes: previous_alloc.map(|p| a - p),
                    values: v.values(),
                };
                probes_since += 1;
                match (v.layer, &v.stage) {
                    (None, None) => outside.push(probe),
                    (layer, stage) => {
                        let stage = stage.clone().unwrap_or_else(|| "-".into());
                        let st = stage_of(&mut layers, layer.unwrap_or(-1), &stage);
                        if st.probes.is_empty() {
                            st.change_bytes = previous_alloc.map(|p| a - p);
                        }
                        st.allocated_after_bytes = Some(a);
                        st.probes.push(probe);
                        if let Some(c) = st.change_bytes.as_mut()
                            && let Some(first) = st.probes.first()
                        {
                            let start = first.allocated_bytes - first.change_bytes.unwrap_or(0);
                            *c = a - start;
                        }
                    }
                }
            }
            Kind::SavedHeader => {
                let (layer, stage) = (v.layer, v.stage.clone());
                open_saved = Some((layer, stage.clone()));
                let st = stage_of(
                    &mut layers,
                    layer.unwrap_or(-1),
                    stage.as_deref().unwrap_or("-"),
                );
                st.saved = Some(Saved {
                    at: v.at.clone(),
                    ..Saved::default()
                });
            }
            Kind::SavedActivation | Kind::SavedWeight | Kind::SavedTotal => {
                let Some((layer, stage)) = open_saved.clone() else {
                    continue;
                };
                let st = stage_of(
                    &mut layers,
                    layer.unwrap_or(-1),
                    stage.as_deref().unwrap_or("-"),
                );
                let saved = st.saved.get_or_insert_with(Saved::default);
                if v.e.kind == Kind::SavedTotal {
                    saved.activations_bytes = v.role_bytes(Role::Activations);
                    saved.weights_bytes = v.role_bytes(Role::Weights);
                    saved.tensors = v.role_int(Role::Count);
                    open_saved = None;
                } else {
                    let b = v.role_bytes(Role::Size).unwrap_or(0);
                    let kind = if v.e.kind == Kind::SavedWeight {
                        saved.list_weight_bytes += b;
                        "weight"
                    } else {
                        saved.list_activation_bytes += b;
                        "activation"
                    };
                    saved.list.push(SavedTensor {
                        kind,
                        bytes: b,
                        values: v.values(),
                    });
                }
            }
            _ => {}
        }
        if let Some(a) = alloc
            && in_step
        {
            trace.push(TraceItem {
                label: v.label(),
                allocated_bytes: a,
                point: v.e.kind == Kind::Timeline,
                layer: v.layer,
                stage: v.stage.clone(),
            });
            if peak.as_ref().is_none_or(|(p, ..)| a > *p) {
                let after = points.last().map(|p| p.label.clone());
                peak = Some((a, v, after, None));
            }
            previous_alloc = Some(a);
        } else if let Some(a) = alloc
            && v.e.kind != Kind::Setup
        {
            previous_alloc = Some(a);
        }
    }
    for l in &mut layers {
        l.saved_all = saved_all(&l.stages);
    }
    let Some((peak_bytes, pv, after, _)) = peak else {
        return (None, layers, outside);
    };
    // The first schedule point after the peak.
    let peak_index = views.iter().position(|v| std::ptr::eq(v, pv)).unwrap_or(0);
    let before_point = if pv.e.kind == Kind::Timeline {
        None
    } else {
        views[peak_index..]
            .iter()
            .find(|v| v.e.kind == Kind::Timeline)
            .map(View::label)
    };
    let peak = Peak {
        allocated_bytes: peak_bytes,
        label: pv.label(),
        at: pv.at.clone(),
        layer: pv.layer,
        stage: pv.stage.clone(),
        after_point: if pv.e.kind == Kind::Timeline {
            None
        } else {
            after
        },
        before_point,
    };
    let Some(sp) = points.iter().fold(None::<&Point>, |best, p| match best {
        Some(b) if b.allocated_bytes >= p.allocated_bytes => Some(b),
        _ => Some(p),
    }) else {
        return (None, layers, outside);
    };
    let schedule_peak = Peak {
        allocated_bytes: sp.allocated_bytes,
        label: sp.label.clone(),
        at: sp.at.clone(),
        layer: None,
        stage: None,
        after_point: None,
        before_point: None,
    };
    // The first of the largest rises between consecutive points.
    let largest_increase = points
        .windows(2)
        .filter(|w| w[1].allocated_bytes > w[0].allocated_bytes)
        .fold(None::<&[Point]>, |best, w| match best {
            // Figures rounded alike can differ by a byte: those are the same rise.
            Some(b)
                if b[1].allocated_bytes - b[0].allocated_bytes + 2
                    >= w[1].allocated_bytes - w[0].allocated_bytes =>
            {
                Some(b)
            }
            _ => Some(w),
        })
        .map(|w| Increase {
            bytes: w[1].allocated_bytes - w[0].allocated_bytes,
            from: w[0].label.clone(),
            to: w[1].label.clone(),
            at: w[1].at.clone(),
        });
    let non_pt: Vec<i64> = points.iter().filter_map(|p| p.non_pytorch_bytes).collect();
    let non_pytorch = (!non_pt.is_empty()).then(|| Range {
        min_bytes: *non_pt.iter().min().unwrap(),
        max_bytes: *non_pt.iter().max().unwrap(),
        at_schedule_peak_bytes: sp.non_pytorch_bytes,
    });
    let device_in_use = match (sp.cached_bytes, sp.non_pytorch_bytes) {
        (Some(c), Some(n)) => Some(sp.allocated_bytes + c + n),
        _ => None,
    };
    (
        Some(Step {
            points,
            trace,
            peak,
            schedule_peak,
            largest_increase,
            non_pytorch,
            device_in_use_at_schedule_peak_bytes: device_in_use,
        }),
        layers,
        outside,
    )
}

/// A layer's saved tensors over its stages (the totals each stage states, else the sum of
/// the tensors it listed); `None` when no stage printed them.
fn saved_all(stages: &[StageReport]) -> Option<SavedAll> {
    let saved: Vec<&Saved> = stages.iter().filter_map(|s| s.saved.as_ref()).collect();
    (!saved.is_empty()).then(|| SavedAll {
        activations_bytes: saved.iter().map(|x| x.activation_bytes()).sum(),
        weights_bytes: saved.iter().map(|x| x.weight_bytes()).sum(),
        stages: saved.len(),
    })
}

fn stage_of<'a>(layers: &'a mut Vec<LayerReport>, layer: i64, stage: &str) -> &'a mut StageReport {
    let li = match layers.iter().position(|l| l.layer == layer) {
        Some(i) => i,
        None => {
            layers.push(LayerReport {
                layer,
                stages: Vec::new(),
                saved_all: None,
            });
            layers.len() - 1
        }
    };
    let stages = &mut layers[li].stages;
    let si = match stages.iter().position(|s| s.stage == stage) {
        Some(i) => i,
        None => {
            stages.push(StageReport {
                stage: stage.to_string(),
                allocated_after_bytes: None,
                change_bytes: None,
                probes: Vec::new(),
                saved: None,
            });
            stages.len() - 1
        }
    };
    &mut stages[si]
}
