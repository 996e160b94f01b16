//! Choosing the detail layers when `--detail-layers` is not given: find the model's
//! MoE-versus-dense decision in its decoder layer (patterns from the rule set), evaluate
//! it with the model config, and take the first MoE layers. Never a silent guess: when
//! the decision cannot be found or evaluated, the error says so and asks for the flag.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::anchor::reachable_statements;
use crate::python::eval::{self, Env};
use crate::python::pattern::Pattern;
use crate::python::{self, Source};
use crate::rules::{DetailLayersSpec, Manifest};

/// The layers chosen and why (printed so the user can check).
#[derive(Debug, Clone)]
pub struct LayerChoice {
    pub layers: Vec<u64>,
    pub reason: Option<String>,
}

/// A model config and where it came from.
struct Config {
    value: Value,
    path: String,
}

fn read_config(path: &Path) -> Result<Value, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--config {}: {e}", path.display()))?;
    let v: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON ({e})", path.display()))?;
    // Multimodal configs keep the language model's settings in `text_config`.
    Ok(match v.get("text_config") {
        Some(t) if v.get("num_hidden_layers").is_none() => t.clone(),
        _ => v,
    })
}

/// Example configs under the checkout whose `model_type` is the model's.
fn example_configs(root: &Path, spec: &DetailLayersSpec, model: &str) -> Vec<Config> {
    let (Some(glob), Some(model_type)) = (&spec.example_configs, spec.model_types.get(model))
    else {
        return Vec::new();
    };
    let Some((dir, file)) = glob.split_once("/*/") else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path().join(file)))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| {
            let value = read_config(&p).ok()?;
            let matches =
                value.get("model_type").and_then(|t| t.as_str()) == Some(model_type.as_str());
            matches.then(|| Config {
                value,
                path: p.strip_prefix(root).unwrap_or(&p).display().to_string(),
            })
        })
        .collect()
}

fn configs(
    root: &Path,
    spec: &DetailLayersSpec,
    model: &str,
    explicit: Option<&Path>,
) -> Result<Vec<Config>, String> {
    match explicit {
        Some(p) => Ok(vec![Config {
            value: read_config(p)?,
            path: p.display().to_string(),
        }]),
        None => Ok(example_configs(root, spec, model)),
    }
}

fn num_layers(c: &Config) -> Option<u64> {
    c.value.get("num_hidden_layers").and_then(|v| v.as_u64())
}

/// The decision as found in the model file.
enum Decision {
    /// Every decoder layer has experts (the MoE block is built unconditionally).
    Always,
    /// A condition on the layer index.
    Condition { layer_var: String, expr: String },
}

fn find_decision(
    root: &Path,
    manifest: &Manifest,
    spec: &DetailLayersSpec,
    model: &str,
) -> Result<(String, Decision), String> {
    let dir = manifest
        .models
        .as_ref()
        .map(|m| m.dir.as_str())
        .unwrap_or(".");
    let rel = format!("{dir}/{model}.py");
    let text = std::fs::read_to_string(root.join(&rel)).map_err(|e| format!("{rel}: {e}"))?;
    // Read the model as it is without instrumentation, so lines match the clean file.
    let clean = super::markers::strip(&text, |_| true)
        .map(|(t, _)| t)
        .unwrap_or(text);
    let src = Source::parse(clean);
    let ask = "pass --detail-layers";
    let index = Pattern::compile(&spec.index)?;
    let hits: Vec<_> = python::all_statements(src.root())
        .into_iter()
        .filter_map(|n| index.match_statement(&src, n).map(|b| (n, b)))
        .collect();
    let [(index_stmt, bindings)] = hits.as_slice() else {
        return Err(format!(
            "cannot tell which layers have experts: `{}` occurs {} times in {rel} (expected once, in the decoder layer); {ask}",
            spec.index,
            hits.len()
        ));
    };
    let layer_var = bindings
        .get("LAYER")
        .cloned()
        .ok_or("the index pattern must bind $LAYER")?;
    let func = python::enclosing_functions(*index_stmt)
        .into_iter()
        .next()
        .ok_or_else(|| format!("`{}` is not inside a function in {rel}; {ask}", spec.index))?;
    let pool = reachable_statements(func);
    for c in &spec.conditions {
        let p = Pattern::compile(c)?;
        let found: Vec<_> = pool
            .iter()
            .filter_map(|s| p.match_statement(&src, *s).map(|b| (*s, b)))
            .collect();
        if let [(stmt, b)] = found.as_slice() {
            let cond = b
                .get("COND")
                .cloned()
                .ok_or("a condition pattern must bind $COND")?;
            let mut line = src.line_of(stmt.start_byte());
            let mut expr = cond.clone();
            // `has_experts` in `MoE() if has_experts else MLP()`: use its assignment.
            if cond.chars().all(|ch| ch.is_alphanumeric() || ch == '_') {
                let assign = Pattern::compile(&format!("{cond} = $VALUE"))?;
                let defs: Vec<_> = pool
                    .iter()
                    .filter(|s| s.start_byte() < stmt.start_byte())
                    .filter_map(|s| assign.match_statement(&src, *s).map(|b| (*s, b)))
                    .collect();
                if let Some((s, b)) = defs.last() {
                    expr = b["VALUE"].clone();
                    line = src.line_of(s.start_byte());
                }
            }
            return Ok((
                format!("{rel}:{line}"),
                Decision::Condition { layer_var, expr },
            ));
        }
    }
    for a in &spec.always_moe {
        let p = Pattern::compile(a)?;
        if let Some(s) = pool.iter().find(|s| p.match_statement(&src, **s).is_some()) {
            return Ok((
                format!("{rel}:{}", src.line_of(s.start_byte())),
                Decision::Always,
            ));
        }
    }
    Err(format!(
        "cannot find the MoE-vs-dense decision in {rel} (looked in the function around line {} for {}); {ask}",
        src.line_of(func.start_byte()),
        spec.conditions
            .iter()
            .chain(&spec.always_moe)
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(" or ")
    ))
}

/// Which layers of `0..n` the condition selects, under `config`.
fn moe_layers(layer_var: &str, expr: &str, config: &Config, n: u64) -> Result<Vec<u64>, String> {
    let src = Source::parse(format!("{expr}\n"));
    let node = src
        .root()
        .named_child(0)
        .and_then(|s| s.named_child(0))
        .ok_or("empty condition")?;
    let mut out = Vec::new();
    for i in 0..n {
        let env = Env {
            names: BTreeMap::from([(layer_var.to_string(), Value::from(i))]),
            config: Some(&config.value),
        };
        if eval::eval_bool(&src, node, &env)
            .map_err(|e| format!("cannot evaluate `{expr}` with {}: {e}", config.path))?
        {
            out.push(i);
        }
    }
    Ok(out)
}

/// The default detail layers for `model`.
pub fn auto(
    root: &Path,
    manifest: &Manifest,
    model: &str,
    config: Option<&Path>,
) -> Result<LayerChoice, String> {
    let spec = manifest
        .detail_layers
        .as_ref()
        .ok_or("this rule set has no rule for choosing detail layers; pass --detail-layers")?;
    let (at, decision) = find_decision(root, manifest, spec, model)?;
    let configs = configs(root, spec, model, config)?;
    let count = spec.count;
    match decision {
        Decision::Always => {
            let layers: Vec<u64> = (0..count as u64).collect();
            // Check against the smallest model the example configs describe.
            let smallest = configs
                .iter()
                .filter(|c| num_layers(c).is_some())
                .min_by_key(|c| num_layers(c));
            let limit = smallest.and_then(num_layers);
            if let Some(n) = limit
                && n < count as u64
            {
                return Err(format!(
                    "the model has only {n} layers; pass --detail-layers"
                ));
            }
            let checked = match (limit, smallest) {
                (Some(n), Some(c)) => format!(" (the model has {n}, per {})", c.path),
                _ => String::new(),
            };
            Ok(LayerChoice {
                layers,
                reason: Some(format!(
                    "every decoder layer builds the MoE block unconditionally ({at}), so the first {count} layers{checked}"
                )),
            })
        }
        Decision::Condition { layer_var, expr } => {
            if configs.is_empty() {
                return Err(format!(
                    "the layer condition `{expr}` ({at}) needs the model config: pass --config config.json, or --detail-layers"
                ));
            }
            let mut chosen: Option<(Vec<u64>, String)> = None;
            for c in &configs {
                let n = num_layers(c).ok_or_else(|| {
                    format!("{} has no num_hidden_layers; pass --detail-layers", c.path)
                })?;
                let layers: Vec<u64> = moe_layers(&layer_var, &expr, c, n)?
                    .into_iter()
                    .take(count)
                    .collect();
                if layers.len() < count {
                    return Err(format!(
                        "`{expr}` selects fewer than {count} MoE layers with {}; pass --detail-layers",
                        c.path
                    ));
                }
                match &chosen {
                    Some((prev, prev_path)) if *prev != layers => {
                        return Err(format!(
                            "the example configs disagree ({prev_path} gives {prev:?}, {} gives {layers:?}); pass --config or --detail-layers",
                            c.path
                        ));
                    }
                    Some(_) => {}
                    None => chosen = Some((layers, c.path.clone())),
                }
            }
            let (layers, path) = chosen.expect("at least one config");
            let keys: Vec<String> = configs[0]
                .value
                .as_object()
                .map(|o| {
                    o.iter()
                        .filter(|(k, _)| expr.contains(k.as_str()))
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect()
                })
                .unwrap_or_default();
            Ok(LayerChoice {
                layers,
                reason: Some(format!(
                    "first {count} MoE layers by `{expr}` ({at}) with {} from {path}",
                    keys.join(", ")
                )),
            })
        }
    }
}

/// Check explicit `--detail-layers` against the model's layer count when a config is known.
pub fn check_explicit(
    root: &Path,
    manifest: &Manifest,
    model: &str,
    config: Option<&Path>,
    layers: &[u64],
) -> Result<Option<String>, String> {
    let Some(spec) = &manifest.detail_layers else {
        return Ok(None);
    };
    let configs = configs(root, spec, model, config)?;
    if let Some(c) = configs
        .iter()
        .filter(|c| num_layers(c).is_some())
        .min_by_key(|c| num_layers(c))
    {
        let n = num_layers(c).expect("filtered");
        if let Some(bad) = layers.iter().find(|l| **l >= n) {
            return Err(format!(
                "--detail-layers {bad}: the model has {n} layers (0..{}) per {}",
                n - 1,
                c.path
            ));
        }
    }
    Ok(None)
}
