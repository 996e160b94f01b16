//! A run's schedule marks: the `record_function` ranges a pipeline trainer's step runs its
//! chunk calls in (`instrument add`'s schedule marks), found among the snapshot's
//! `external_annotations` by the conventions table and placed on the trace. Below both the
//! step detection (a marked step is one pipeline step, not one "step" per chunk) and the
//! per-event memory (`schedule`).
//!
//! - `conventions` — the table (`conventions.toml`): which names are events and stages, the
//!   categories of memory;
//! - `spans`       — the marks placed on the trace;
//! - `stage_frames` — which layer stage an allocation's Python frames name.

pub mod conventions;
pub mod spans;
pub mod stage_frames;

pub use conventions::Conventions;
pub use spans::{Kind, Marks, Span, find};
