//! Attribution: which frame of a stack names the owner of an allocation, and what
//! kind of memory the stack says it is.
//!
//! The site is the first (innermost) frame in the user's own Python files, skipping
//! torch internals (`torch/nn/modules/*`, `torch/autograd/*`, `torch/optim/*`,
//! `torch/utils/*`, the rest of the `torch` package, generated code) and C++ frames;
//! `--internal GLOB` adds patterns. Only when no user frame exists does it fall back to
//! the first torch frame, then to the first frame at all.

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::{FrameId, Snapshot, StackId};

/// Internal-code patterns applied to every frame's filename (see [`glob_match_path`]).
pub const DEFAULT_INTERNAL: &[&str] = &[
    "torch/nn/modules/*",
    "torch/autograd/*",
    "torch/optim/*",
    "torch/utils/*",
    "torch/*",
    "*/torchinductor_*/*",
];

/// Glob match: `*` matches any run of characters (slashes included), `?` one character.
pub fn glob_match(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    let (mut star, mut mark) = (usize::MAX, 0usize);
    while i < s.len() {
        if p < pat.len() && (pat[p] == b'?' || pat[p] == s[i]) {
            p += 1;
            i += 1;
        } else if p < pat.len() && pat[p] == b'*' {
            star = p;
            mark = i;
            p += 1;
        } else if star != usize::MAX {
            p = star + 1;
            mark += 1;
            i = mark;
        } else {
            return false;
        }
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
}

/// A pattern matches a path when it matches the whole path or any part of it that
/// starts after a `/` (so `torch/optim/*` matches `/venv/.../torch/optim/adam.py`).
pub fn glob_match_path(pat: &str, path: &str) -> bool {
    let (p, s) = (pat.as_bytes(), path.as_bytes());
    if glob_match(p, s) {
        return true;
    }
    if p.first() == Some(&b'/') {
        return false;
    }
    s.iter()
        .enumerate()
        .filter(|&(_, &c)| c == b'/')
        .any(|(i, _)| glob_match(p, &s[i + 1..]))
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Parameters,
    Gradients,
    OptimizerState,
    Activations,
    Temporary,
    Communication,
    Other,
}

impl Category {
    pub fn name(self) -> &'static str {
        match self {
            Category::Parameters => "parameters",
            Category::Gradients => "gradients",
            Category::OptimizerState => "optimizer_state",
            Category::Activations => "activations",
            Category::Temporary => "temporary",
            Category::Communication => "communication",
            Category::Other => "other",
        }
    }
}

/// How the site frame was chosen.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A frame in the user's own files.
    User,
    /// No user frame: the first torch (Python) frame.
    Torch,
    /// No Python frame at all: the first native frame.
    Native,
    /// The stack was empty (history recorded without context).
    None,
}

#[derive(Clone, Copy, Debug)]
pub struct Attribution {
    /// The site frame, if the stack had any frame.
    pub site: Option<FrameId>,
    pub origin: Origin,
    pub category: Category,
}

/// Attributes stacks, caching the answer per interned stack.
pub struct Attributor {
    patterns: Vec<String>,
    cache: Vec<Option<Attribution>>,
    frame_class: Vec<u8>,
}

const UNKNOWN: u8 = 0;
const USER: u8 = 1;
const TORCH: u8 = 2;
const NATIVE: u8 = 3;

impl Attributor {
    pub fn new(extra_internal: &[String]) -> Self {
        let mut patterns: Vec<String> = DEFAULT_INTERNAL.iter().map(|s| s.to_string()).collect();
        patterns.extend(extra_internal.iter().cloned());
        Attributor {
            patterns,
            cache: Vec::new(),
            frame_class: Vec::new(),
        }
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    fn class(&mut self, snap: &Snapshot, f: FrameId) -> u8 {
        let i = f as usize;
        if self.frame_class.len() < snap.frames.len() {
            self.frame_class.resize(snap.frames.len(), UNKNOWN);
        }
        if self.frame_class[i] == UNKNOWN {
            let file = snap.frame_file(f);
            self.frame_class[i] = if !file.ends_with(".py") {
                NATIVE
            } else if self.patterns.iter().any(|p| glob_match_path(p, file)) {
                TORCH
            } else {
                USER
            };
        }
        self.frame_class[i]
    }

    /// True when the frame is in the user's own Python code.
    pub fn is_user(&mut self, snap: &Snapshot, f: FrameId) -> bool {
        self.class(snap, f) == USER
    }

    pub fn attribute(&mut self, snap: &Snapshot, s: StackId) -> Attribution {
        let i = s as usize;
        if self.cache.len() < snap.stacks.len() {
            self.cache.resize(snap.stacks.len(), None);
        }
        if let Some(a) = self.cache[i] {
            return a;
        }
        let frames = snap.stack(s);
        let mut first_torch = None;
        let mut first_native = None;
        let mut user = None;
        for &f in frames {
            match self.class(snap, f) {
                USER => {
                    user = Some(f);
                    break;
                }
                TORCH if first_torch.is_none() => first_torch = Some(f),
                NATIVE if first_native.is_none() && !is_allocator_frame(snap, f) => {
                    first_native = Some(f)
                }
                _ => {}
            }
        }
        let (site, origin) = match (user, first_torch, first_native.or(frames.first().copied())) {
            (Some(u), _, _) => (Some(u), Origin::User),
            (None, Some(t), _) => (Some(t), Origin::Torch),
            (None, None, Some(f)) => (Some(f), Origin::Native),
            (None, None, None) => (None, Origin::None),
        };
        let a = Attribution {
            site,
            origin,
            category: categorize(snap, frames),
        };
        self.cache[i] = Some(a);
        a
    }
}

/// The caching allocator's own frames (and ATen's empty-tensor helpers): never the
/// owner of an allocation, so skipped when a native frame must stand for the site.
fn is_allocator_frame(snap: &Snapshot, f: FrameId) -> bool {
    let file = snap.frame_file(f);
    let name = snap.frame_name(f);
    file.contains("CUDACachingAllocator")
        || file.contains("/c10/")
        || file.contains("EmptyTensor")
        || name.contains("CachingAllocator")
        || name.starts_with("c10::")
        || name.starts_with("at::detail::empty")
}

fn any_frame(snap: &Snapshot, frames: &[FrameId], pred: impl Fn(&str, &str) -> bool) -> bool {
    frames
        .iter()
        .any(|&f| pred(snap.frame_file(f), snap.frame_name(f)))
}

/// What kind of memory a stack allocates, when its frames make that clear.
pub fn categorize(snap: &Snapshot, frames: &[FrameId]) -> Category {
    if frames.is_empty() {
        return Category::Other;
    }
    const COMM: &[&str] = &[
        "all_reduce",
        "allreduce",
        "all_gather",
        "allgather",
        "reduce_scatter",
        "reducescatter",
        "all_to_all",
        "alltoall",
        "broadcast",
        "nccl",
        "processgroup",
        "reducer::",
    ];
    if any_frame(snap, frames, |file, name| {
        let n = name.to_ascii_lowercase();
        file.contains("torch/distributed/")
            || file.contains("/c10d/")
            || COMM.iter().any(|c| n.contains(c))
    }) {
        return Category::Communication;
    }
    if any_frame(snap, frames, |file, _| file.contains("torch/optim/")) {
        return Category::OptimizerState;
    }
    if any_frame(snap, frames, |file, name| {
        file.contains("torch/autograd/")
            || name == "backward"
            || name.contains("autograd::Engine")
            || name.contains("AccumulateGrad")
    }) {
        return Category::Gradients;
    }
    if any_frame(snap, frames, |file, name| {
        file.contains("torch/nn/parameter.py")
            || file.contains("torch/nn/init.py")
            || matches!(
                name,
                "reset_parameters"
                    | "load_state_dict"
                    | "_load_from_state_dict"
                    | "to_empty"
                    | "init_weights"
                    | "_init_weights"
            )
            || (file.contains("torch/nn/modules/")
                && matches!(name, "__init__" | "_apply" | "to" | "cuda"))
    }) {
        return Category::Parameters;
    }
    if any_frame(snap, frames, |file, name| {
        name == "forward"
            || file.contains("torch/nn/functional.py")
            || (file.contains("torch/nn/modules/module.py")
                && matches!(name, "_call_impl" | "_wrapped_call_impl"))
    }) {
        return Category::Activations;
    }
    if any_frame(snap, frames, |_, name| {
        let n = name.to_ascii_lowercase();
        ["workspace", "scratch", "tmp", "temp"]
            .iter()
            .any(|w| n.contains(w))
    }) {
        return Category::Temporary;
    }
    Category::Other
}

/// Live memory grouped under one site frame.
#[derive(Clone, Debug)]
pub struct SiteAgg {
    pub site: Option<FrameId>,
    pub origin: Origin,
    pub bytes: u64,
    pub blocks: u64,
    pub category: Category,
    /// The stack holding the most bytes under this site (for context lines).
    pub example_stack: StackId,
}

/// Group `(stack, bytes)` pairs by site frame; largest first.
pub fn group_sites(
    snap: &Snapshot,
    attr: &mut Attributor,
    items: impl Iterator<Item = (StackId, u64)>,
) -> Vec<SiteAgg> {
    struct Acc {
        origin: Origin,
        bytes: u64,
        blocks: u64,
        cat: BTreeMap<Category, u64>,
        stacks: BTreeMap<StackId, u64>,
    }
    let mut by: BTreeMap<Option<FrameId>, Acc> = BTreeMap::new();
    for (stack, bytes) in items {
        let a = attr.attribute(snap, stack);
        let acc = by.entry(a.site).or_insert_with(|| Acc {
            origin: a.origin,
            bytes: 0,
            blocks: 0,
            cat: BTreeMap::new(),
            stacks: BTreeMap::new(),
        });
        acc.bytes = acc.bytes.saturating_add(bytes);
        acc.blocks += 1;
        let c = acc.cat.entry(a.category).or_default();
        *c = c.saturating_add(bytes);
        let st = acc.stacks.entry(stack).or_default();
        *st = st.saturating_add(bytes);
    }
    let mut out: Vec<SiteAgg> = by
        .into_iter()
        .map(|(site, acc)| {
            let category = acc
                .cat
                .iter()
                .max_by_key(|&(c, b)| (*b, std::cmp::Reverse(*c)))
                .map(|(c, _)| *c)
                .unwrap_or(Category::Other);
            let example_stack = acc
                .stacks
                .iter()
                .max_by_key(|&(s, b)| (*b, std::cmp::Reverse(*s)))
                .map(|(s, _)| *s)
                .unwrap_or(0);
            SiteAgg {
                site,
                origin: acc.origin,
                bytes: acc.bytes,
                blocks: acc.blocks,
                category,
                example_stack,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.blocks.cmp(&a.blocks))
            .then(a.site.cmp(&b.site))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match_path(
            "torch/optim/*",
            "/venv/lib/torch/optim/adam.py"
        ));
        assert!(glob_match_path("torch/*", "torch/nn/functional.py"));
        assert!(!glob_match_path("torch/*", "/home/me/mytorch/x.py"));
        assert!(glob_match_path("*/vendor/*.py", "/a/vendor/b.py"));
        assert!(!glob_match_path("/abs/*", "/x/abs/y.py"));
        assert!(glob_match_path("model?.py", "/src/model1.py"));
        assert!(!glob_match_path("model?.py", "/src/model12.py"));
    }
}
