//! The named memory patterns of the spec, each stated only when the snapshot (or the
//! diff) holds its evidence, with that evidence and the matching fix.

use super::analysis::Analysis;
use super::model::BlockState;
use super::report::{Diff, Pattern, SiteRef, human, pct, sat_sum};
use super::sites::Category;
use super::trace::NONE;

pub const RETAINED_GRAPH: &str = "retained_autograd_graph";
pub const GROWING_CONTAINER: &str = "growing_python_container";
pub const OPTIMIZER_STATE: &str = "first_step_optimizer_state";
pub const CHECKPOINTING: &str = "activation_checkpointing";
pub const DDP_REPLICATION: &str = "ddp_replication";
pub const REFERENCE_CYCLES: &str = "python_reference_cycles";
pub const FRAGMENTATION: &str = "allocator_fragmentation";

fn pattern(
    name: &str,
    title: &str,
    evidence: Vec<String>,
    fix: &str,
    bytes: Option<u64>,
    sites: Vec<SiteRef>,
) -> Pattern {
    Pattern {
        name: name.into(),
        title: title.into(),
        evidence,
        fix: fix.into(),
        bytes,
        sites,
        ranks: Vec::new(),
    }
}

fn steps_span(steps: &[u32]) -> String {
    match (steps.first(), steps.last()) {
        (Some(a), Some(b)) if a != b => format!("steps {a}-{b}"),
        (Some(a), _) => format!("step {a}"),
        _ => "no step".into(),
    }
}

/// Evaluate every pattern on one analysed snapshot (and the diff that ends at it).
pub fn detect(a: &mut Analysis, diff: Option<&Diff>) -> Vec<Pattern> {
    let mut out = Vec::new();
    let graph = retained_graph(a, diff);
    let graph_fired = graph.is_some();
    out.extend(graph);
    out.extend(growing_container(a, diff, graph_fired));
    out.extend(optimizer_state(a, diff));
    out.extend(checkpointing(a));
    out.extend(ddp(a));
    out.extend(reference_cycles(a));
    out.extend(fragmentation(a));
    out
}

fn retained_graph(a: &mut Analysis, diff: Option<&Diff>) -> Option<Pattern> {
    let snap = a.snap;
    let mut evidence = Vec::new();
    let mut sites = Vec::new();
    let mut bytes = 0u64;
    if let Some(t) = &a.trace {
        let act: Vec<_> = t
            .retained
            .iter()
            .filter(|r| r.category == Category::Activations)
            .collect();
        let mut steps: Vec<u32> = act.iter().flat_map(|r| r.steps.iter().copied()).collect();
        steps.sort_unstable();
        steps.dedup();
        let blocks: u64 = sat_sum(act.iter().map(|r| r.blocks));
        let b: u64 = sat_sum(act.iter().map(|r| r.bytes));
        if steps.len() >= 2 && blocks >= 2 * steps.len() as u64 {
            bytes = b;
            evidence.push(format!(
                "{blocks} activation blocks ({}) allocated during {} of {} are still live at the end: about {} per step is never released",
                human(b),
                steps_span(&steps),
                t.step_count(),
                human(b / steps.len() as u64)
            ));
            for r in act.iter().take(3) {
                let s = SiteRef::of(snap, r.site);
                evidence.push(format!(
                    "{}: {} blocks ({}) kept from {} steps",
                    s.label(),
                    r.blocks,
                    human(r.bytes),
                    r.steps.len()
                ));
                sites.push(s);
            }
            if let Some(one) = t
                .retained
                .iter()
                .find(|r| r.min_per_step == 1 && r.max_per_step == 1 && r.steps.len() >= 2)
            {
                evidence.push(format!(
                    "alongside one tensor per step from {} (a loss or output kept each step)",
                    SiteRef::of(snap, one.site).label()
                ));
            }
        }
    }
    if let Some(d) = diff {
        for s in d
            .sites
            .iter()
            .filter(|s| s.verdict == "growing" && s.category == Category::Activations)
            .take(3)
        {
            evidence.push(format!(
                "diff: {}:{} in {} grew from {} blocks ({}) to {} blocks ({})",
                super::report::short(&s.file),
                s.line,
                s.function,
                s.blocks_before,
                human(s.bytes_before),
                s.blocks_after,
                human(s.bytes_after)
            ));
            bytes = bytes.saturating_add(s.bytes_after.saturating_sub(s.bytes_before));
            sites.push(SiteRef {
                file: s.file.clone(),
                line: s.line,
                function: s.function.clone(),
            });
        }
    }
    (!evidence.is_empty()).then(|| {
        pattern(
            RETAINED_GRAPH,
            "Retained autograd graph",
            evidence,
            "Something keeps each step's graph alive. Log `loss.item()`, or append `loss.detach()` (not `loss`) to any list or metric; look for a `backward(retain_graph=True)` that is not needed.",
            Some(bytes),
            sites,
        )
    })
}

fn growing_container(a: &mut Analysis, diff: Option<&Diff>, graph_fired: bool) -> Option<Pattern> {
    let snap = a.snap;
    let mut evidence = Vec::new();
    let mut sites = Vec::new();
    let mut bytes = 0u64;
    if let Some(t) = &a.trace {
        // With a retained graph, whatever it saves is retained in the same steps
        // (activations, all-to-all outputs): part of the graph, not a container.
        let graph_steps: Vec<u32> = {
            let mut v: Vec<u32> = t
                .retained
                .iter()
                .filter(|r| r.category == Category::Activations)
                .flat_map(|r| r.steps.iter().copied())
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        for r in t.retained.iter().filter(|r| {
            r.steps.len() >= 3
                && r.max_per_step <= 2 * r.min_per_step
                && !(graph_fired && (r.category == Category::Activations || r.steps == graph_steps))
        }) {
            let s = SiteRef::of(snap, r.site);
            let per = if r.min_per_step == r.max_per_step {
                format!("{}", r.min_per_step)
            } else {
                format!("{}-{}", r.min_per_step, r.max_per_step)
            };
            evidence.push(format!(
                "{} keeps {per} block(s) every step: {} blocks ({}) from {} are still live, so its block count grows linearly with steps",
                s.label(),
                r.blocks,
                human(r.bytes),
                steps_span(&r.steps)
            ));
            bytes = bytes.saturating_add(r.bytes);
            sites.push(s);
        }
    }
    if let Some(d) = diff {
        for s in d
            .sites
            .iter()
            .filter(|s| s.verdict == "growing" && s.category != Category::Activations)
            .take(5)
        {
            evidence.push(format!(
                "diff: {}:{} in {} went from {} to {} blocks ({} to {})",
                super::report::short(&s.file),
                s.line,
                s.function,
                s.blocks_before,
                s.blocks_after,
                human(s.bytes_before),
                human(s.bytes_after)
            ));
            bytes = bytes.saturating_add(s.bytes_after.saturating_sub(s.bytes_before));
            sites.push(SiteRef {
                file: s.file.clone(),
                line: s.line,
                function: s.function.clone(),
            });
        }
    }
    (!evidence.is_empty()).then(|| {
        pattern(
            GROWING_CONTAINER,
            "Growing Python container",
            evidence,
            "A Python list, dict or cache keeps a GPU tensor every step. Store `t.detach().cpu()` (or `t.item()`) instead, or bound the container (e.g. `collections.deque(maxlen=N)`).",
            Some(bytes),
            sites,
        )
    })
}

fn optimizer_state(a: &mut Analysis, diff: Option<&Diff>) -> Option<Pattern> {
    let snap = a.snap;
    let opt = a.cat_bytes(Category::OptimizerState);
    let live = a.live_bytes();
    if opt == 0 {
        return None;
    }
    let opt_sites: Vec<SiteRef> = a
        .sites
        .iter()
        .filter(|s| s.category == Category::OptimizerState)
        .take(3)
        .map(|s| SiteRef::of(snap, s.site))
        .collect();
    let mut evidence = vec![format!(
        "{} ({}% of live memory) is optimizer state, allocated under torch/optim ({})",
        human(opt),
        pct(opt, live),
        opt_sites
            .iter()
            .map(|s| s.label())
            .collect::<Vec<_>>()
            .join("; ")
    )];
    let mut timed = false;
    if let Some(t) = &a.trace {
        let mut steps: Vec<u32> = Vec::new();
        let mut in_window = 0u64;
        let mut grew_later = false;
        for r in &t.recs {
            if r.alloc_idx == NONE || r.free_idx != NONE {
                continue;
            }
            if a.attr.attribute(snap, r.stack).category != Category::OptimizerState {
                continue;
            }
            in_window = in_window.saturating_add(r.size);
            steps.push(t.step_of(r.alloc_idx));
        }
        steps.sort_unstable();
        steps.dedup();
        if steps.len() > 1 {
            grew_later = true;
        }
        if grew_later {
            // Optimizer state added in several steps is not a one-time spike.
            return None;
        }
        timed = true;
        match steps.first() {
            Some(&s) if s > 0 => evidence.push(format!(
                "all {} of it that the trace saw allocated appeared in step {s} of {} (the first optimizer.step()) and nothing was added after: it is stable",
                human(in_window),
                t.step_count()
            )),
            Some(_) => evidence.push(format!(
                "{} of it appeared once, before the first detected step, and nothing was added after",
                human(in_window)
            )),
            None => evidence.push(
                "it was allocated before the trace window and no optimizer state was added during it".into(),
            ),
        }
    }
    if let Some(d) = diff {
        let new: Vec<_> = d
            .sites
            .iter()
            .filter(|s| s.category == Category::OptimizerState && s.verdict != "shrinking")
            .collect();
        if !new.is_empty() {
            let b: u64 = sat_sum(
                new.iter()
                    .map(|s| s.bytes_after.saturating_sub(s.bytes_before)),
            );
            evidence.push(format!(
                "diff: optimizer state grew by {} between the snapshots ({} site(s))",
                human(b),
                new.len()
            ));
            timed = true;
        }
    }
    if !timed && opt * 10 < live {
        return None;
    }
    evidence.push("This is expected retention, not a leak.".into());
    Some(pattern(
        OPTIMIZER_STATE,
        "First-step optimizer state",
        evidence,
        "Expected, not a leak: optimizer state is created at the first optimizer.step() and kept. If it does not fit, use a smaller model or batch, a lower-memory optimizer (SGD, Adafactor, 8-bit Adam), or shard it (ZeRO / FSDP); leak hunting will not help.",
        Some(opt),
        opt_sites,
    ))
}

fn checkpointing(a: &mut Analysis) -> Option<Pattern> {
    let snap = a.snap;
    let live = a.live_bytes();
    let act_now = a.cat_bytes(Category::Activations);
    let fix = "Wrap repeated blocks in activation checkpointing (`torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)`, or `checkpoint_sequential`): their activations are recomputed in backward instead of held from forward to backward, at the cost of about one extra forward pass per step (~30% more compute).";
    if let Some(t) = &a.trace {
        let saw: Vec<_> = t
            .sawtooth_steps()
            .into_iter()
            .filter(|s| s.activation_released * 5 >= s.peak && s.activation_at_peak > 0)
            .collect();
        if saw.len() >= 2 {
            let n = saw.len() as u64;
            let mean_rel = sat_sum(saw.iter().map(|s| s.activation_released)) / n;
            let best = saw
                .iter()
                .max_by_key(|s| s.activation_at_peak)
                .expect("non-empty");
            let act_sites = super::sites::group_sites(
                snap,
                &mut a.attr,
                t.recs
                    .iter()
                    .filter(|r| {
                        r.alloc_idx != NONE
                            && r.free_idx != NONE
                            && r.alloc_idx >= best.start
                            && r.alloc_idx <= best.peak_idx
                            && r.free_idx > best.peak_idx
                            && r.free_idx < best.end
                    })
                    .map(|r| (r.stack, r.size)),
            );
            let sites: Vec<SiteRef> = act_sites
                .iter()
                .filter(|s| s.category == Category::Activations)
                .take(3)
                .map(|s| SiteRef::of(snap, s.site))
                .collect();
            let evidence = vec![
                format!(
                    "live memory rises and falls in {} of {} steps (the activation sawtooth): about {} of activations are allocated in forward and freed in backward each step",
                    saw.len(),
                    t.step_count(),
                    human(mean_rel)
                ),
                format!(
                    "at the peak of step {} ({} live), {} ({}%) is forward activations that backward frees later: the bytes checkpointing would not hold at the peak",
                    t.step_of(best.start),
                    human(best.peak),
                    human(best.activation_at_peak),
                    pct(best.activation_at_peak, best.peak)
                ),
                format!(
                    "largest activation sites: {}",
                    sites
                        .iter()
                        .map(|s| s.label())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            ];
            return Some(pattern(
                CHECKPOINTING,
                "Activation memory vs. checkpointing",
                evidence,
                fix,
                Some(best.activation_at_peak),
                sites,
            ));
        }
        return None;
    }
    if live > 0 && act_now * 2 >= live {
        let sites: Vec<SiteRef> = a
            .sites
            .iter()
            .filter(|s| s.category == Category::Activations)
            .take(3)
            .map(|s| SiteRef::of(snap, s.site))
            .collect();
        return Some(pattern(
            CHECKPOINTING,
            "Activation memory vs. checkpointing",
            vec![
                format!(
                    "{} ({}% of live memory) is forward activations (no trace to show the sawtooth)",
                    human(act_now),
                    pct(act_now, live)
                ),
                format!(
                    "largest activation sites: {}",
                    sites
                        .iter()
                        .map(|s| s.label())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            ],
            fix,
            Some(act_now),
            sites,
        ));
    }
    None
}

fn ddp(a: &mut Analysis) -> Option<Pattern> {
    let p = a.cat_bytes(Category::Parameters);
    let g = a.cat_bytes(Category::Gradients);
    let o = a.cat_bytes(Category::OptimizerState);
    let c = a.cat_bytes(Category::Communication);
    let live = a.live_bytes();
    let model = p.saturating_add(g).saturating_add(o);
    let (p128, g128) = (p as u128, g as u128);
    // Full-size gradients (about one per parameter byte) and the model state dominating.
    if p == 0 || g128 * 4 < p128 * 3 || g128 * 4 > p128 * 5 || model < live / 2 || !a.distributed()
    {
        return None;
    }
    let mut evidence = vec![
        format!(
            "parameters {}, gradients {} ({:.2}x the parameters: full-size gradients on this rank), optimizer state {}",
            human(p),
            human(g),
            g as f64 / p as f64,
            human(o)
        ),
        format!(
            "parameters + gradients + optimizer state are {} ({}% of live memory)",
            human(model),
            pct(model, live)
        ),
    ];
    if c > 0 {
        evidence.push(format!(
            "communication buffers {} (gradient buckets, another {:.2}x the parameters)",
            human(c),
            c as f64 / p as f64
        ));
    }
    Some(pattern(
        DDP_REPLICATION,
        "Gradient memory under DDP vs. FSDP",
        evidence,
        "Every rank holds full parameters, gradients and optimizer state (DDP-style replication). If memory-bound, shard them: FSDP (`torch.distributed.fsdp.fully_shard`) or ZeRO stages 1-3 divide this state by the number of ranks.",
        Some(model),
        Vec::new(),
    ))
}

fn reference_cycles(a: &mut Analysis) -> Option<Pattern> {
    let snap = a.snap;
    let t = a.trace.as_ref()?;
    if t.bursts.is_empty() {
        return None;
    }
    let total: u64 = sat_sum(t.bursts.iter().map(|b| b.bytes));
    let big = t.bursts.iter().max_by_key(|b| b.bytes).expect("non-empty");
    let site = SiteRef::of(snap, big.site);
    let evidence = vec![
        format!(
            "{} burst(s) of frees of blocks that outlived their step ({} in all): the largest, in step {}, freed {} blocks ({}) at once that were allocated over {} earlier steps",
            t.bursts.len(),
            human(total),
            big.step,
            big.blocks,
            human(big.bytes),
            big.alloc_steps
        ),
        format!(
            "mostly from {}: these tensors are not freed when their step ends but only together later, as when Python's garbage collector breaks a reference cycle",
            site.label()
        ),
    ];
    Some(pattern(
        REFERENCE_CYCLES,
        "Python reference cycles",
        evidence,
        "Find the cycles: call `from torch.utils.viz._cycles import warn_tensor_cycles; warn_tensor_cycles()` at start-up; it reports each cycle that keeps a CUDA tensor alive. Break it (weak references, no tensors stored on objects that reference themselves), or call `gc.collect()` at step end as a stopgap.",
        Some(total),
        vec![site],
    ))
}

/// The caching allocator's free memory in pieces: an OOM with more cached free memory
/// than it asked for but no block that large, or (no OOM) a cache mostly free and
/// scattered over many split segments.
fn fragmentation(a: &mut Analysis) -> Option<Pattern> {
    let t = a.totals.clone();
    let expandable = a
        .snap
        .allocator_settings
        .iter()
        .any(|(k, v)| k == "expandable_segments" && v == "True");
    let mut evidence = Vec::new();
    let mut bytes = 0;
    let mut request = 0;
    if let Some(tr) = &a.trace {
        for o in tr
            .ooms
            .iter()
            .filter(|o| o.state.cause == crate::snapshot::oom::Cause::Fragmentation)
        {
            let st = &o.state;
            evidence.push(format!(
                "the OOM at event {} asked for {} while {} was cached free ({}% of the {} reserved in {} segment(s) of its pool and stream): the largest free block was only {}",
                o.idx,
                human(o.size),
                human(st.cached_free_bytes),
                pct(st.cached_free_bytes, st.reserved_bytes),
                human(st.reserved_bytes),
                st.segments,
                human(st.largest_free_block_bytes)
            ));
            evidence.push(format!(
                "{} of those segments hold free space next to live blocks, so none can be returned and reused whole",
                st.segments_with_free
            ));
            bytes = bytes.max(st.cached_free_bytes);
            request = request.max(o.size);
        }
    }
    if evidence.is_empty() {
        // No OOM: a large, scattered cache is still memory the next peak cannot use.
        // Only segments that are not expandable: an expandable segment's free pages
        // go back to the device when an allocation needs them (see `expandable`).
        let (mut split, mut largest) = (0u64, 0u64);
        for seg in a
            .snap
            .segments
            .iter()
            .filter(|s| s.device == a.device && !s.is_expandable)
        {
            let free = seg
                .blocks
                .iter()
                .filter(|b| b.state == BlockState::Inactive);
            if seg.blocks.iter().any(|b| b.state != BlockState::Inactive)
                && free.clone().count() > 0
            {
                split += 1;
                largest = largest.max(free.map(|b| b.size).max().unwrap_or(0));
            }
        }
        let frag = t.fragmented_bytes;
        if t.reserved_bytes == 0
            || t.fragmentation_fraction < 0.3
            || largest.saturating_mul(4) > frag
            || split < 4
        {
            return None;
        }
        evidence.push(format!(
            "{} of the {} reserved ({:.0}%) is cached but free inside {split} segment(s) that also hold live blocks; the largest of those free blocks is {}",
            human(frag),
            human(t.reserved_bytes),
            t.fragmentation_fraction * 100.0,
            human(largest)
        ));
        evidence.push(format!(
            "an allocation larger than {} needs a new segment although {} is free: torch.cuda.empty_cache() cannot return it either",
            human(largest),
            human(frag)
        ));
        bytes = frag;
    }
    let fix = if expandable {
        "expandable_segments is already on: cap splitting of large blocks with `PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:N` (N about the largest allocation that fails), or free long-lived tensors before the peak so their segments can be reused.".to_string()
    } else {
        let mb = (request.max(t.largest_inactive_block_bytes) >> 20)
            .max(64)
            .next_power_of_two();
        format!(
            "Set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`: segments then grow by mapping pages, so freed ranges join into one block. Where that is not possible, `max_split_size_mb:{mb}` keeps large blocks from being split by small allocations."
        )
    };
    Some(Pattern {
        name: FRAGMENTATION.into(),
        title: "Allocator fragmentation".into(),
        evidence,
        fix,
        bytes: Some(bytes),
        sites: Vec::new(),
        ranks: Vec::new(),
    })
}
