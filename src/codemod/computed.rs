//! Parameter defaults the engine works out from the checkout. The rule set declares each
//! (`[computed.NAME]`: which method, with what) and names it from a parameter's default;
//! this module runs the method. The parameter code knows only the name.

use std::path::Path;

use super::layers;
use super::params::{self, Value};
use crate::rules::{ComputedSpec, Manifest};

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
    fn spec(&self, name: &str) -> Result<&ComputedSpec, String> {
        self.manifest
            .computed
            .get(name)
            .ok_or_else(|| format!("the rule set declares no [computed.{name}]"))
    }
}

/// Work out `name` (for the parameter set by `flag`): the value and why, or why not.
pub fn compute(ctx: &Context, name: &str, flag: &str) -> params::Computed {
    match ctx.spec(name)? {
        ComputedSpec::LayerCondition(spec) => {
            let model = ctx
                .model
                .ok_or_else(|| format!("{name} is worked out per model; pass {flag}"))?;
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
) -> Result<Option<String>, String> {
    match (ctx.spec(name)?, value, ctx.model) {
        (ComputedSpec::LayerCondition(spec), Value::Ints(l), Some(model)) => {
            layers::check_explicit(ctx.root, ctx.manifest, spec, model, ctx.config, l, flag)
        }
        _ => Ok(None),
    }
}
