//! Sites: which frame of a stack names an allocation, and what kind of memory the
//! stack says it is. Below both the analysis and the trace, which group by site.
//!
//! The site is the first (innermost) frame in the user's own Python files: torch's
//! own files ([`frames::INTERNAL_FILES`], plus `--internal GLOB`), the standard
//! library and C++ frames are skipped. Without a user frame, the first torch Python
//! frame (`origin: "torch"`); without a Python frame (the autograd engine's thread),
//! the first C++ frame that is not plumbing ([`frames::NEVER_A_SITE`]): the autograd
//! node or communication call, an ATen operator only when nothing else is there.

use std::collections::BTreeMap;

use serde::Serialize;

pub use super::frames::Category;
use super::frames::{self, CATEGORY_RULES, OPERATOR, WEAK_PARAMETERS};
use super::model::{FrameId, Snapshot, StackId};

/// Internal-code patterns applied to every Python frame's filename.
pub const DEFAULT_INTERNAL: &[&str] = frames::INTERNAL_FILES;

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
    frame_class: Vec<Class>,
}

/// What a frame is, for choosing sites.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Class {
    Unknown,
    /// The user's own Python code.
    User,
    /// torch's (or `--internal`) Python code, or the standard library.
    Torch,
    /// A C++ frame that can name an allocation (an autograd node, c10d).
    Native,
    /// An ATen operator: names an allocation only when nothing better is there.
    Operator,
    /// Never a site: unwinder, allocator, dispatcher, interpreter, thread start.
    Plumbing,
}

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

    pub fn class(&mut self, snap: &Snapshot, f: FrameId) -> Class {
        let i = f as usize;
        if self.frame_class.len() < snap.frames.len() {
            self.frame_class.resize(snap.frames.len(), Class::Unknown);
        }
        if self.frame_class[i] == Class::Unknown {
            let file = snap.frame_file(f);
            let name = snap.frame_name(f);
            self.frame_class[i] = if file.ends_with(".py") {
                if frames::is_stdlib(file) || self.patterns.iter().any(|p| glob_match_path(p, file))
                {
                    Class::Torch
                } else {
                    Class::User
                }
            } else if frames::never_a_site(name, file).is_some() {
                Class::Plumbing
            } else if OPERATOR.iter().any(|m| m.test(name)) {
                Class::Operator
            } else {
                Class::Native
            };
        }
        self.frame_class[i]
    }

    /// True when the frame is in the user's own Python code.
    pub fn is_user(&mut self, snap: &Snapshot, f: FrameId) -> bool {
        self.class(snap, f) == Class::User
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
        let (mut torch, mut native, mut operator) = (None, None, None);
        let mut user = None;
        for &f in frames {
            match self.class(snap, f) {
                Class::User => {
                    user = Some(f);
                    break;
                }
                Class::Torch => {
                    torch.get_or_insert(f);
                }
                Class::Native => {
                    native.get_or_insert(f);
                }
                Class::Operator => {
                    operator.get_or_insert(f);
                }
                _ => {}
            }
        }
        let (site, origin) = if let Some(u) = user {
            (Some(u), Origin::User)
        } else if let Some(t) = torch {
            (Some(t), Origin::Torch)
        } else if let Some(n) = native.or(operator).or(frames.first().copied()) {
            (Some(n), Origin::Native)
        } else {
            (None, Origin::None)
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

/// What kind of memory a stack allocates: the innermost frame with evidence decides
/// (the rules are data: [`frames::CATEGORY_RULES`]).
pub fn categorize(snap: &Snapshot, frames: &[FrameId]) -> Category {
    for &f in frames {
        let (name, file) = (snap.frame_name(f), snap.frame_file(f));
        if let Some(r) = CATEGORY_RULES.iter().find(|r| r.matches(name, file)) {
            return r.category;
        }
    }
    if frames
        .iter()
        .any(|&f| WEAK_PARAMETERS.contains(&snap.frame_name(f)))
    {
        return Category::Parameters;
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
