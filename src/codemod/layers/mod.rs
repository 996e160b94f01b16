//! Choosing the detail layers when `--detail-layers` is not given: find the model's
//! MoE-versus-dense decision in its decoder layer (patterns from the rule set), run the
//! decoder's `__init__` up to it with the model config (locals, `getattr` defaults,
//! `self.` attributes: see `python::eval`), and take the first MoE layers. Never a silent
//! guess: when the decision cannot be found or evaluated, the error says so and asks for
//! the flag. Work is bounded whatever the config claims (`MAX_LAYERS`).

use crate::python::KindOf;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tree_sitter::Node;

use super::anchor::reachable_statements;
use crate::python::eval::{self, Binding, Env};
use crate::python::pattern::Pattern;
use crate::python::{self, Source};
use crate::rules::{DetailLayersSpec, Manifest};

/// Layers evaluated at most, whatever `num_hidden_layers` says.
pub const MAX_LAYERS: u64 = 10_000;

mod error;
pub use error::{Dense, Error, TooFewMoe, Unsettled};

fn compile(pattern: &str) -> Result<Pattern, Error> {
    Ok(Pattern::compile(pattern)?)
}

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

pub fn read_config(path: &Path) -> Result<Value, Error> {
    let shown = || path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            Error::ConfigMissing { path: shown() }
        } else {
            Error::ConfigRead {
                path: shown(),
                source,
            }
        }
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|source| Error::ConfigNotJson {
        path: shown(),
        source,
    })?;
    // Multimodal configs keep the language model's settings in `text_config`; the decoder
    // reads those, and `config.text_config` still reaches them.
    Ok(match v.get("text_config") {
        Some(Value::Object(t)) if v.get("num_hidden_layers").is_none() => {
            let mut t = t.clone();
            t.insert("text_config".into(), Value::Object(t.clone()));
            Value::Object(t)
        }
        _ => v,
    })
}

/// Example configs under the checkout whose `model_type` is the model's.
fn example_configs(root: &Path, spec: &DetailLayersSpec, model_type: Option<&str>) -> Vec<Config> {
    let (Some(glob), Some(model_type)) = (&spec.example_configs, model_type) else {
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
            let matches = value.get("model_type").and_then(|t| t.as_str()) == Some(model_type);
            matches.then(|| Config {
                value,
                path: p.strip_prefix(root).unwrap_or(&p).display().to_string(),
            })
        })
        .collect()
}

/// The `model_type` of `model`'s configs: the model table's, else `[detail_layers]`'s,
/// else the model's file stem (HuggingFace names most model types as pithtrain names
/// the files: `olmoe`, `qwen3_moe`).
fn model_type<'m>(manifest: &'m Manifest, spec: &'m DetailLayersSpec, model: &'m str) -> &'m str {
    manifest
        .models
        .as_ref()
        .and_then(|m| m.known.get(model))
        .and_then(|k| k.model_type.as_deref())
        .or_else(|| spec.model_types.get(model).map(String::as_str))
        .unwrap_or(model)
}

fn configs(
    root: &Path,
    manifest: &Manifest,
    spec: &DetailLayersSpec,
    model: &str,
    explicit: Option<&Path>,
) -> Result<Vec<Config>, Error> {
    match explicit {
        Some(p) => Ok(vec![Config {
            value: read_config(p)?,
            path: p.display().to_string(),
        }]),
        None => Ok(example_configs(
            root,
            spec,
            Some(model_type(manifest, spec, model)),
        )),
    }
}

fn num_layers(c: &Config) -> Option<u64> {
    c.value.get("num_hidden_layers").and_then(|v| v.as_u64())
}

/// "a.json (24 layers), b.json (36 layers)", for messages about several configs.
fn listed(configs: &[Config]) -> String {
    configs
        .iter()
        .map(|c| match num_layers(c) {
            Some(n) => format!("{} ({n} layers)", c.path),
            None => c.path.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The decision as found in the model file.
enum Decision {
    /// Every decoder layer has experts (the MoE block is built unconditionally).
    Always,
    /// A condition: `cond` (byte range of the expression) evaluated after running the
    /// function body up to `stop`; `shown` is what the user reads.
    Condition {
        cond: std::ops::Range<usize>,
        stop: usize,
        shown: String,
    },
}

/// The decoder layer found: its source, its `__init__`, where the decision is.
struct Found {
    src: Source,
    func: std::ops::Range<usize>,
    layer_var: String,
    at: String,
    decision: Decision,
}

fn node_at<'s>(
    src: &'s Source,
    range: &std::ops::Range<usize>,
    kind: Option<&str>,
) -> Option<Node<'s>> {
    let mut n = src
        .root()
        .descendant_for_byte_range(range.start, range.end)?;
    loop {
        if n.byte_range() == *range && kind.is_none_or(|k| n.kind_of() == k) {
            return Some(n);
        }
        n = n.parent()?;
    }
}

/// Whether `stmt` runs every time its function does (no `if`, loop or `try` around it).
fn unconditional(stmt: Node, func: Node) -> bool {
    let mut cur = stmt.parent();
    while let Some(n) = cur {
        if n.id() == func.id() {
            return true;
        }
        if python::is_compound(n.kind_of()) || n.kind_of().ends_with("_statement") {
            return false;
        }
        cur = n.parent();
    }
    true
}

fn find_decision(
    root: &Path,
    manifest: &Manifest,
    spec: &DetailLayersSpec,
    model: &str,
    flag: &str,
) -> Result<Found, Error> {
    let dir = manifest
        .models
        .as_ref()
        .map(|m| m.dir.as_str())
        .unwrap_or(".");
    let rel = format!("{dir}/{model}.py");
    let bytes = std::fs::read(root.join(&rel)).map_err(|source| Error::ModelRead {
        file: rel.clone(),
        source,
    })?;
    // Read the model as it is without instrumentation, so lines match the clean file.
    let clean = super::markers::strip_bytes(&bytes, |_| true)
        .map(|s| s.text)
        .unwrap_or(bytes);
    let text = String::from_utf8(clean).map_err(|_| Error::ModelNotUtf8 { file: rel.clone() })?;
    let src = Source::parse_reusing(text);
    src.share();
    let index = compile(&spec.index)?;
    let hits: Vec<_> = python::all_statements(src.root())
        .into_iter()
        .filter_map(|n| index.match_statement(&src, n).map(|b| (n, b)))
        .collect();
    let [(index_stmt, bindings)] = hits.as_slice() else {
        return Err(Error::IndexCount {
            index: spec.index.clone(),
            count: hits.len(),
            file: rel,
            flag: flag.to_string(),
        });
    };
    let layer_var = bindings
        .get("LAYER")
        .cloned()
        .ok_or(Error::IndexBindsNoLayer)?;
    let func = python::enclosing_functions(*index_stmt)
        .into_iter()
        .next()
        .ok_or_else(|| Error::IndexOutsideFunction {
            index: spec.index.clone(),
            file: rel.clone(),
            flag: flag.to_string(),
        })?;
    let pool = reachable_statements(func);
    let mut decision = None;
    for c in &spec.conditions {
        let p = compile(c)?;
        let found: Vec<_> = pool
            .iter()
            .filter_map(|s| p.match_statement(&src, *s).map(|b| (*s, b)))
            .collect();
        if let [(stmt, _)] = found.as_slice() {
            let cond_node = find_bound(&src, *stmt, &p).ok_or(Error::ConditionBindsNothing)?;
            let cond_text = src.text_of(cond_node).to_string();
            let mut line = stmt.start_position().row + 1;
            let mut shown = cond_text.clone();
            // `has_experts` in `MoE() if has_experts else MLP()`: show its assignment.
            if cond_text
                .chars()
                .all(|ch| ch.is_alphanumeric() || ch == '_')
            {
                let assign = compile(&format!("{cond_text} = $VALUE"))?;
                if let Some((s, b)) = pool
                    .iter()
                    .filter(|s| s.start_byte() < stmt.start_byte())
                    .filter_map(|s| assign.match_statement(&src, *s).map(|b| (*s, b)))
                    .next_back()
                {
                    shown = b["VALUE"].split_whitespace().collect::<Vec<_>>().join(" ");
                    shown = shown.replace("( ", "(").replace(" )", ")");
                    line = s.start_position().row + 1;
                }
            }
            decision = Some((
                format!("{rel}:{line}"),
                Decision::Condition {
                    cond: cond_node.byte_range(),
                    stop: stmt.start_byte(),
                    shown,
                },
            ));
            break;
        }
    }
    if decision.is_none() {
        for a in &spec.always_moe {
            let p = compile(a)?;
            if let Some(s) = pool
                .iter()
                .find(|s| p.match_statement(&src, **s).is_some() && unconditional(**s, func))
            {
                decision = Some((
                    format!("{rel}:{}", (s.start_position().row + 1)),
                    Decision::Always,
                ));
                break;
            }
        }
    }
    let Some((at, decision)) = decision else {
        return Err(Error::NoDecision {
            file: rel,
            line: func.start_position().row + 1,
            looked: spec
                .conditions
                .iter()
                .chain(&spec.always_moe)
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(" or "),
            flag: flag.to_string(),
        });
    };
    Ok(Found {
        func: func.byte_range(),
        layer_var,
        at,
        decision,
        src,
    })
}

/// The node `$COND` matched in `stmt` (patterns bind text; find the node holding it).
fn find_bound<'t>(src: &'t Source, stmt: Node<'t>, p: &Pattern) -> Option<Node<'t>> {
    let b = p.match_statement(src, stmt)?;
    let text = b.get("COND")?;
    let mut stack = vec![stmt];
    while let Some(n) = stack.pop() {
        if src.text_of(n) == text && n.is_named() {
            return Some(n);
        }
        let mut c = n.walk();
        let mut kids: Vec<Node> = n.named_children(&mut c).collect();
        kids.reverse();
        stack.extend(kids);
    }
    None
}

/// The environment the decoder's `__init__` starts with for layer `i`.
fn start_env(found: &Found, func: Node, config: &Config, i: u64) -> Env {
    let src = &found.src;
    let mut env = Env::default();
    if let Some(params) = func.field("parameters") {
        let mut cursor = params.walk();
        for p in params.named_children(&mut cursor) {
            let (name, annotation, default) = match p.kind_of() {
                "identifier" => (Some(p), None, None),
                "typed_parameter" => (p.named_child(0), p.field("type"), None),
                "default_parameter" | "typed_default_parameter" => {
                    (p.field("name"), p.field("type"), p.field("value"))
                }
                _ => (None, None, None),
            };
            let Some(name) = name.map(|n| src.text_of(n)) else {
                continue;
            };
            let annotation = annotation.map(|a| src.text_of(a)).unwrap_or("");
            if name == found.layer_var {
                env.set(name, Value::from(i));
            } else if name == "config" || annotation.ends_with("Config") {
                env.set(name, config.value.clone());
            } else if let Some(v) = config.value.get(name) {
                // A decoder built from unpacked config fields (`decoder_sparse_step: int = 1`)
                // gets them from the config under the same name.
                env.reads
                    .borrow_mut()
                    .insert(format!("{name}={v} (as parameter `{name}`)"));
                env.set(name, v.clone());
            } else if let Some(d) = default {
                let v = eval::eval(src, d, &Env::default());
                env.names.insert(
                    name.to_string(),
                    match v {
                        Ok(v) => Binding::Known(v),
                        Err(e) => Binding::Unknown(format!("parameter `{name}`: {e}")),
                    },
                );
            } else if name != "self" {
                env.names.insert(
                    name.to_string(),
                    Binding::Unknown(format!(
                        "`{name}` is a parameter of the decoder's __init__ that the config does not give"
                    )),
                );
            }
        }
    }
    env
}

/// The first `count` layers the condition selects under `config`, evaluating at most
/// `MAX_LAYERS`; with the config fields it read.
fn moe_layers(
    found: &Found,
    config: &Config,
    count: usize,
    flag: &str,
) -> Result<(Vec<u64>, Vec<String>), Error> {
    let Decision::Condition { cond, stop, shown } = &found.decision else {
        unreachable!("only conditions are evaluated");
    };
    let n = num_layers(config).ok_or_else(|| Error::NoLayerCount {
        config: config.path.clone(),
        flag: flag.to_string(),
    })?;
    let mut out = Vec::new();
    let mut reads = std::collections::BTreeSet::new();
    let limit = n.min(MAX_LAYERS);
    for i in 0..limit {
        let yes = layer_is_moe(found, config, i, cond, *stop, shown, &mut reads)?;
        if yes {
            out.push(i);
            if out.len() == count {
                break;
            }
        }
    }
    if out.len() < count {
        let among = if limit < n {
            format!("the first {limit} of {n} layers")
        } else {
            format!("its {n} layers")
        };
        return Err(Error::TooFewMoe(Box::new(TooFewMoe {
            shown: shown.clone(),
            at: found.at.clone(),
            found: out.len(),
            among,
            config: config.path.clone(),
            count,
            flag: flag.to_string(),
        })));
    }
    Ok((out, reads.into_iter().collect()))
}

/// Whether layer `i` is MoE by the decision `cond` (evaluated after running the decoder's
/// function up to `stop`) with `config`; the config fields read go to `reads`.
fn layer_is_moe(
    found: &Found,
    config: &Config,
    i: u64,
    cond: &std::ops::Range<usize>,
    stop: usize,
    shown: &str,
    reads: &mut std::collections::BTreeSet<String>,
) -> Result<bool, Error> {
    let src = &found.src;
    let func = node_at(src, &found.func, Some("function_definition"))
        .ok_or(Error::Lost("lost the decoder"))?;
    let body = func
        .field("body")
        .ok_or(Error::Lost("the decoder has no body"))?;
    let cond = node_at(src, cond, None).ok_or(Error::Lost("lost the condition"))?;
    let mut env = start_env(found, func, config, i);
    eval::run_until(src, body, stop, &mut env).map_err(Error::Run)?;
    let yes = eval::eval_bool(src, cond, &env).map_err(|why| Error::Evaluate {
        shown: shown.to_string(),
        config: config.path.clone(),
        why,
    })?;
    reads.extend(env.reads.into_inner());
    Ok(yes)
}

/// Layers as ranges: `1..=26` for 1 to 26, `0, 2, 4..=9`.
fn ranges(layers: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < layers.len() {
        let mut j = i;
        while j + 1 < layers.len() && layers[j + 1] == layers[j] + 1 {
            j += 1;
        }
        out.push(match j - i {
            0 => layers[i].to_string(),
            1 => format!("{}, {}", layers[i], layers[j]),
            _ => format!("{}..={}", layers[i], layers[j]),
        });
        i = j + 1;
    }
    out.join(", ")
}

/// A given detail layer that is dense (no MoE block) by the decoder's decision under
/// every config: why, naming the MoE layers. None when the decision is not found or
/// cannot be evaluated (the range check stands alone then).
fn dense_given(
    root: &Path,
    manifest: &Manifest,
    spec: &DetailLayersSpec,
    model: &str,
    configs: &[&Config],
    layers: &[u64],
    flag: &str,
) -> Option<Error> {
    let found = find_decision(root, manifest, spec, model, flag).ok()?;
    let Decision::Condition { cond, stop, shown } = &found.decision else {
        return None;
    };
    let mut reads = std::collections::BTreeSet::new();
    // Per config: the given layers that are dense, and every MoE layer.
    let mut per: Vec<(&Config, Vec<u64>, Vec<u64>)> = Vec::new();
    for c in configs {
        let n = num_layers(c)?.min(MAX_LAYERS);
        let mut moe = Vec::new();
        for i in 0..n {
            if layer_is_moe(&found, c, i, cond, *stop, shown, &mut reads).ok()? {
                moe.push(i);
            }
        }
        let dense: Vec<u64> = layers
            .iter()
            .copied()
            .filter(|l| *l < n && !moe.contains(l))
            .collect();
        per.push((c, dense, moe));
    }
    let bad = layers
        .iter()
        .copied()
        .find(|l| per.iter().all(|(_, dense, _)| dense.contains(l)))?;
    let (c, _, moe) = &per[0];
    let moe_text = if moe.is_empty() {
        "none".to_string()
    } else {
        ranges(moe)
    };
    let example: Vec<String> = moe.iter().take(2).map(u64::to_string).collect();
    let example = if example.is_empty() {
        String::new()
    } else {
        format!(" (e.g. {flag} {})", example.join(","))
    };
    Some(Error::Dense(Box::new(Dense {
        flag: flag.to_string(),
        bad,
        shown: shown.clone(),
        at: found.at.clone(),
        config: c.path.clone(),
        moe: moe_text,
        example,
    })))
}

/// The layers `spec` chooses for `model` (`flag` is how the user gives them instead).
pub fn auto(
    root: &Path,
    manifest: &Manifest,
    spec: &DetailLayersSpec,
    model: &str,
    config: Option<&Path>,
    flag: &str,
) -> Result<LayerChoice, Error> {
    let found = find_decision(root, manifest, spec, model, flag)?;
    let configs = configs(root, manifest, spec, model, config)?;
    let count = spec.count;
    let several = |what: Unsettled| Error::Unsettled {
        what: Box::new(what),
        configs: (configs.len() > 1).then(|| listed(&configs)),
        flag: flag.to_string(),
    };
    match &found.decision {
        Decision::Always => {
            let layers: Vec<u64> = (0..count as u64).collect();
            let smallest = configs
                .iter()
                .filter(|c| num_layers(c).is_some())
                .min_by_key(|c| num_layers(c));
            if let Some(c) = smallest
                && let Some(n) = num_layers(c)
                && n < count as u64
            {
                return Err(several(Unsettled::FewLayers {
                    config: c.path.clone(),
                    n,
                    count,
                }));
            }
            let checked = match &configs[..] {
                [] => String::new(),
                [c] => format!(
                    " (the model has {}, per {})",
                    num_layers(c).map_or("?".into(), |n| n.to_string()),
                    c.path
                ),
                _ => format!(
                    " (every example config has at least {count}: {})",
                    listed(&configs)
                ),
            };
            Ok(LayerChoice {
                layers,
                reason: Some(format!(
                    "every decoder layer builds the MoE block unconditionally ({}), so the first {count} layers{checked}",
                    found.at
                )),
            })
        }
        Decision::Condition { shown, .. } => {
            if configs.is_empty() {
                return Err(Error::NeedsConfig {
                    shown: shown.clone(),
                    at: found.at.clone(),
                    flag: flag.to_string(),
                });
            }
            let mut results = Vec::new();
            for c in &configs {
                results.push((c, moe_layers(&found, c, count, flag)?));
            }
            let (first_cfg, (layers, reads)) = &results[0];
            if let Some((other, (l2, _))) = results.iter().find(|(_, (l, _))| l != layers) {
                return Err(several(Unsettled::Disagree {
                    first: first_cfg.path.clone(),
                    layers: layers.clone(),
                    other: other.path.clone(),
                    other_layers: l2.clone(),
                }));
            }
            let from = if results.len() > 1 {
                format!(
                    "{} (and the same with {})",
                    first_cfg.path,
                    listed(&configs[1..])
                )
            } else {
                first_cfg.path.clone()
            };
            Ok(LayerChoice {
                layers: layers.clone(),
                reason: Some(format!(
                    "first {count} MoE layers by `{shown}` ({}) with {} from {from}",
                    found.at,
                    reads.join(", ")
                )),
            })
        }
    }
}

/// Check explicit `--detail-layers` against the model's layer count when a config is
/// known: refused when no config has the layer; with several example configs, a layer
/// only some have is taken, with a note naming them.
pub fn check_explicit(
    root: &Path,
    manifest: &Manifest,
    spec: &DetailLayersSpec,
    model: &str,
    config: Option<&Path>,
    layers: &[u64],
    flag: &str,
) -> Result<Option<String>, Error> {
    let configs = configs(root, manifest, spec, model, config)?;
    let sized: Vec<&Config> = configs.iter().filter(|c| num_layers(c).is_some()).collect();
    let Some(&largest) = sized.iter().max_by_key(|c| num_layers(c)) else {
        return Ok(None);
    };
    let n = num_layers(largest).expect("filtered");
    if let Some(bad) = layers.iter().find(|l| **l >= n) {
        let others = if sized.len() > 1 {
            format!(" (the largest of {})", listed(&configs))
        } else {
            String::new()
        };
        return Err(Error::OutOfRange {
            flag: flag.to_string(),
            bad: *bad,
            n,
            config: largest.path.clone(),
            others,
        });
    }
    if let Some(why) = dense_given(root, manifest, spec, model, &sized, layers, flag) {
        return Err(why);
    }
    let short: Vec<String> = sized
        .iter()
        .filter(|c| layers.iter().any(|l| *l >= num_layers(c).unwrap_or(0)))
        .map(|c| c.path.clone())
        .collect();
    Ok((!short.is_empty()).then(|| {
        format!(
            "note: {} has fewer layers than {flag} asks for (its runs print no detail there); pass --config FILE to check against the config you train",
            short.join(", ")
        )
    }))
}
