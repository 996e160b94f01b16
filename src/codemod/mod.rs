//! The codemod engine: find anchors in Python sources, plan marked edits, apply them
//! all or nothing, and take them out again byte for byte. It knows Python and its own
//! markers; everything about pithtrain comes from the rules.

pub mod add;
pub mod anchor;
mod check;
pub mod checkout;
pub mod computed;
mod context;
pub mod diff;
pub mod edit;
pub mod error;
pub mod explain;
pub use error::Error;
pub mod failure;
pub mod fault;
mod fix;
pub mod imports;
pub mod layers;
pub mod lock;
pub mod markers;
pub mod params;
pub mod plan;
mod planned;
pub mod remove;
pub mod roles;
pub mod selftest;
pub mod session;
pub mod signature;
pub mod status;
pub mod template;
pub mod transaction;
