//! The codemod engine: find anchors in Python sources, plan marked edits, apply them
//! all or nothing, and take them out again byte for byte. It knows Python and its own
//! markers; everything about pithtrain comes from the rules.

pub mod anchor;
pub mod checkout;
pub mod diff;
pub mod expand;
pub mod explain;
pub mod failure;
pub mod imports;
pub mod layers;
pub mod markers;
pub mod pattern;
pub mod plan;
pub mod selftest;
pub mod session;
pub mod template;
pub mod write;
