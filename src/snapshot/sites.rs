//! Sites: which frame of a stack names an allocation, and what kind of memory the
//! stack says it is. Below both the analysis and the trace, which group by site.
//!
//! The site is the first (innermost) frame in the user's own Python files. Skipped on
//! the way: torch's own files ([`frames::INTERNAL_FILES`]), installed libraries (under
//! `site-packages` / `dist-packages`, and `--internal GLOB`), the standard library and
//! C++ frames. The innermost library frame below the user's is kept as detail
//! (`transformers modeling_opt.py:160 in forward`, called from `train.py:63`). Without
//! a user frame the site is that library frame (`origin: "library"`), else the first
//! torch Python frame (`"torch"`), else a standard-library frame (`"library"`); without
//! a Python frame (the autograd engine's thread), the first C++ frame that is not
//! plumbing ([`frames::NEVER_A_SITE`]): the autograd node or communication call, an ATen
//! operator only when nothing else is there (`"native"`). File names are read with
//! either separator ([`paths`]).

use std::collections::BTreeMap;

use serde::Serialize;

pub use super::categories::Category;
use super::categories::categorize;
use super::frames::{self, OPERATOR, PseudoFile};
use super::model::{FrameId, Snapshot, StackId};
use super::paths::{self, glob_match_path, normalize};

/// torch's own files, matched against every Python frame's filename.
pub const DEFAULT_INTERNAL: &[&str] = frames::INTERNAL_FILES;

/// How the site frame was chosen.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A frame in the user's own files.
    User,
    /// No user frame: an installed library's frame (or `--internal`, or the standard
    /// library's).
    Library,
    /// No user or library frame: the first torch (Python) frame.
    Torch,
    /// No Python frame at all: the first native frame.
    Native,
    /// The stack was empty (no history when it was allocated).
    None,
}

#[derive(Clone, Copy, Debug)]
pub struct Attribution {
    /// The site frame, if the stack had any frame.
    pub site: Option<FrameId>,
    /// The innermost library frame at or below the site (the library code that
    /// allocated on the site's behalf), if any.
    pub library: Option<FrameId>,
    pub origin: Origin,
    pub category: Category,
}

/// Attributes stacks, caching the answer per interned stack.
pub struct Attributor {
    patterns: Vec<String>,
    /// `--internal GLOB`: framework code of the user's own (read as a library).
    extra: Vec<String>,
    cache: Vec<Option<Attribution>>,
    frame_class: Vec<Class>,
    /// A frame's file with `/` separators, where that differs from the file as written.
    normalized: Vec<Option<Box<str>>>,
}

/// What a frame is, for choosing sites.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Class {
    Unknown,
    /// The user's own Python code.
    User,
    /// An installed library's Python code (or `--internal`).
    Library,
    /// The Python standard library.
    Stdlib,
    /// torch's own Python code.
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
        Attributor {
            patterns: DEFAULT_INTERNAL.iter().map(|s| s.to_string()).collect(),
            extra: extra_internal.to_vec(),
            cache: Vec::new(),
            frame_class: Vec::new(),
            normalized: Vec::new(),
        }
    }

    /// Every pattern skipped when looking for the user's frame: torch's, then `--internal`.
    pub fn patterns(&self) -> Vec<String> {
        self.patterns.iter().chain(&self.extra).cloned().collect()
    }

    /// The `--internal` pattern a file matches, if any.
    pub fn internal_match(&self, file: &str) -> Option<&str> {
        self.extra
            .iter()
            .find(|p| glob_match_path(p, file))
            .map(|s| s.as_str())
    }

    /// The frame's file with `/` separators.
    pub fn file<'s>(&'s self, snap: &'s Snapshot, f: FrameId) -> &'s str {
        match self.normalized.get(f as usize) {
            Some(Some(n)) => n,
            _ => snap.frame_file(f),
        }
    }

    pub fn class(&mut self, snap: &Snapshot, f: FrameId) -> Class {
        let i = f as usize;
        if self.frame_class.len() < snap.frames.len() {
            self.frame_class.resize(snap.frames.len(), Class::Unknown);
        }
        if self.frame_class[i] == Class::Unknown {
            let raw = snap.frame_file(f);
            let file = normalize(raw);
            let name = snap.frame_name(f);
            self.frame_class[i] = if frames::is_python_file(raw) {
                self.python_class(&file)
            } else if frames::never_a_site(name, &file).is_some() {
                Class::Plumbing
            } else if OPERATOR.iter().any(|m| m.test(name)) {
                Class::Operator
            } else {
                Class::Native
            };
            if let std::borrow::Cow::Owned(n) = file {
                if self.normalized.len() <= i {
                    self.normalized.resize(i + 1, None);
                }
                self.normalized[i] = Some(n.into());
            }
        }
        self.frame_class[i]
    }

    fn python_class(&self, file: &str) -> Class {
        match frames::pseudo_file(file) {
            Some(PseudoFile::Stdlib) => return Class::Stdlib,
            Some(PseudoFile::Torch) => return Class::Torch,
            Some(PseudoFile::User) => return Class::User,
            None => {}
        }
        if self.patterns.iter().any(|p| glob_match_path(p, file)) {
            Class::Torch
        } else if self.extra.iter().any(|p| glob_match_path(p, file))
            || paths::installed_package(file).is_some()
        {
            Class::Library
        } else if paths::is_stdlib(file) {
            Class::Stdlib
        } else {
            Class::User
        }
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
        let (mut library, mut stdlib, mut torch, mut native, mut operator) =
            (None, None, None, None, None);
        let mut user = None;
        for &f in frames {
            match self.class(snap, f) {
                Class::User => {
                    user = Some(f);
                    break;
                }
                Class::Library => {
                    library.get_or_insert(f);
                }
                Class::Stdlib => {
                    stdlib.get_or_insert(f);
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
        } else if let Some(l) = library {
            (Some(l), Origin::Library)
        } else if let Some(t) = torch {
            (Some(t), Origin::Torch)
        } else if let Some(l) = stdlib {
            (Some(l), Origin::Library)
        } else if let Some(n) = native.or(operator).or(frames.first().copied()) {
            (Some(n), Origin::Native)
        } else {
            (None, Origin::None)
        };
        // Every frame of the stack has its class (and normalized file) from here on.
        for &f in frames {
            self.class(snap, f);
        }
        let category = if frames.is_empty() {
            Category::NoStack
        } else {
            let this = &*self;
            categorize(
                frames
                    .iter()
                    .map(|&f| (snap.frame_name(f), this.file(snap, f))),
            )
        };
        let a = Attribution {
            site,
            library: if origin == Origin::Library {
                site
            } else {
                library
            },
            origin,
            category,
        };
        self.cache[i] = Some(a);
        a
    }
}

/// Live memory grouped under one site frame (and the library frame below it).
#[derive(Clone, Debug)]
pub struct SiteAgg {
    pub site: Option<FrameId>,
    pub library: Option<FrameId>,
    pub origin: Origin,
    pub bytes: u64,
    pub blocks: u64,
    pub category: Category,
    /// The stack holding the most bytes under this site (for context lines).
    pub example_stack: StackId,
}

/// Group `(stack, bytes)` pairs by site frame and library frame; largest first.
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
    type Key = (Option<FrameId>, Option<FrameId>);
    let mut by: BTreeMap<Key, Acc> = BTreeMap::new();
    for (stack, bytes) in items {
        let a = attr.attribute(snap, stack);
        let acc = by.entry((a.site, a.library)).or_insert_with(|| Acc {
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
        .map(|((site, library), acc)| {
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
                library,
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
            .then(a.library.cmp(&b.library))
    });
    out
}
