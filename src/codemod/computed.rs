//! Parameter defaults the engine works out from the checkout. The rule set declares each
//! (`[computed.NAME]`: which method, with what) and names it from a parameter's default;
//! this module runs the method. The parameter code knows only the name.

use std::path::Path;

use super::layers;
use super::params::{self, Value};
use crate::rules::{ComputedSpec, Manifest};

/// Why a value cannot be worked out, or a value given does not fit the checkout.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter's default names a computation the rule set does not declare (the
    /// loader checks this; a manifest built otherwise may not).
    #[error("the rule set declares no [computed.{name}]")]
    NotDeclared { name: String },
    #[error("{name} is worked out per model; pass {flag}")]
    PerModel { name: String, flag: String },
    /// The layer-condition method's reason.
    #[error(transparent)]
    Layers(Box<layers::Error>),
}

impl From<layers::Error> for Error {
    fn from(e: layers::Error) -> Error {
        Error::Layers(Box::new(e))
    }
}

impl crate::exit::Classify for Error {
    fn class(&self) -> crate::exit::Class {
        match self {
            Error::Layers(e) => e.class(),
            _ => crate::exit::Class::User,
        }
    }
}

/// What a computation may read.
pub struct Context<'a> {
    pub root: &'a Path,
    pub manifest: &'a Manifest,
    /// The model, for rule sets that work per model.
    pub model: Option<&'a str>,
    /// A model config the user gave (`--config`).
    pub config: Option<&'a Path>,
}

impl Context<'_> {
    fn spec(&self, name: &str) -> Result<&ComputedSpec, Error> {
        self.manifest
            .computed
            .get(name)
            .ok_or_else(|| Error::NotDeclared {
                name: name.to_string(),
            })
    }
}

/// Work out `name` (for the parameter set by `flag`): the value and why, or why not.
pub fn compute(ctx: &Context, name: &str, flag: &str) -> params::Computed<Error> {
    match ctx.spec(name)? {
        ComputedSpec::LayerCondition(spec) => {
            let model = ctx.model.ok_or_else(|| Error::PerModel {
                name: name.to_string(),
                flag: flag.to_string(),
            })?;
            let choice = layers::auto(ctx.root, ctx.manifest, spec, model, ctx.config, flag)?;
            Ok((
                Value::Ints(choice.layers),
                choice.reason.unwrap_or_default(),
            ))
        }
    }
}

/// Check a value the user gave for a parameter whose default `name` works out: a note,
/// or why it does not fit the checkout.
pub fn check_given(
    ctx: &Context,
    name: &str,
    flag: &str,
    value: &Value,
) -> Result<Option<String>, Error> {
    match (ctx.spec(name)?, value, ctx.model) {
        (ComputedSpec::LayerCondition(spec), Value::Ints(l), Some(model)) => Ok(
            layers::check_explicit(ctx.root, ctx.manifest, spec, model, ctx.config, l, flag)?,
        ),
        _ => Ok(None),
    }
}
