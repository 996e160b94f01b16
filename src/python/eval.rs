//! Evaluating a small, side-effect-free Python expression: integer arithmetic,
//! comparisons, boolean logic, membership, and attribute reads from a JSON object (a
//! model config). Used to evaluate a model's MoE-versus-dense layer condition.

use std::collections::BTreeMap;

use serde_json::Value;
use tree_sitter::Node;

use super::Source;

/// A value the evaluator works with: JSON, so config values need no conversion.
pub type Val = Value;

/// Names bound to values, and one object whose attributes come from a JSON config.
pub struct Env<'a> {
    pub names: BTreeMap<String, Val>,
    /// (name of the config variable, the config). Any `other.attr` is looked up here.
    pub config: Option<&'a Value>,
}

fn truthy(v: &Val) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn int(v: &Val, what: &str) -> Result<i64, String> {
    v.as_i64()
        .ok_or_else(|| format!("{what} is not an integer ({v})"))
}

/// Evaluate `node` of `src`.
pub fn eval(src: &Source, node: Node, env: &Env) -> Result<Val, String> {
    let text = src.text_of(node);
    match node.kind() {
        "integer" => text
            .replace('_', "")
            .parse::<i64>()
            .map(Value::from)
            .map_err(|e| e.to_string()),
        "true" => Ok(Value::Bool(true)),
        "false" => Ok(Value::Bool(false)),
        "none" => Ok(Value::Null),
        "string" => {
            let inner = text.trim_matches(|c| c == '"' || c == '\'');
            Ok(Value::String(inner.to_string()))
        }
        "identifier" => env
            .names
            .get(text)
            .cloned()
            .ok_or_else(|| format!("`{text}` has no known value")),
        "parenthesized_expression" => {
            eval(src, node.named_child(0).ok_or("empty parentheses")?, env)
        }
        "attribute" => {
            let attr = node
                .child_by_field_name("attribute")
                .map(|a| src.text_of(a))
                .ok_or("bad attribute")?;
            let config = env
                .config
                .ok_or_else(|| format!("`{text}` needs the model config (pass --config)"))?;
            config
                .get(attr)
                .cloned()
                .ok_or_else(|| format!("the config has no `{attr}`"))
        }
        "subscript" => {
            let value = eval(
                src,
                node.child_by_field_name("value").ok_or("bad subscript")?,
                env,
            )?;
            let index = eval(
                src,
                node.child_by_field_name("subscript")
                    .ok_or("bad subscript")?,
                env,
            )?;
            let i = int(&index, "the index")?;
            let arr = value.as_array().ok_or("subscript of a non-list")?;
            let i = if i < 0 { arr.len() as i64 + i } else { i };
            arr.get(i as usize)
                .cloned()
                .ok_or_else(|| "index out of range".to_string())
        }
        "list" | "tuple" => {
            let mut cursor = node.walk();
            let items: Result<Vec<Val>, String> = node
                .named_children(&mut cursor)
                .map(|c| eval(src, c, env))
                .collect();
            Ok(Value::Array(items?))
        }
        "unary_operator" => {
            let v = int(
                &eval(
                    src,
                    node.child_by_field_name("argument").ok_or("bad unary")?,
                    env,
                )?,
                "the operand",
            )?;
            match node.child(0).map(|c| c.kind()) {
                Some("-") => Ok(Value::from(-v)),
                Some("+") => Ok(Value::from(v)),
                _ => Err(format!("unsupported operator in `{text}`")),
            }
        }
        "not_operator" => Ok(Value::Bool(!truthy(&eval(
            src,
            node.child_by_field_name("argument").ok_or("bad not")?,
            env,
        )?))),
        "boolean_operator" => {
            let left = eval(
                src,
                node.child_by_field_name("left").ok_or("bad operator")?,
                env,
            )?;
            let op = node
                .child_by_field_name("operator")
                .map(|o| o.kind())
                .unwrap_or("");
            match op {
                "and" if !truthy(&left) => Ok(left),
                "or" if truthy(&left) => Ok(left),
                "and" | "or" => eval(
                    src,
                    node.child_by_field_name("right").ok_or("bad operator")?,
                    env,
                ),
                _ => Err(format!("unsupported operator in `{text}`")),
            }
        }
        "binary_operator" => {
            let l = int(
                &eval(
                    src,
                    node.child_by_field_name("left").ok_or("bad operator")?,
                    env,
                )?,
                "the left operand",
            )?;
            let r = int(
                &eval(
                    src,
                    node.child_by_field_name("right").ok_or("bad operator")?,
                    env,
                )?,
                "the right operand",
            )?;
            let op = node
                .child_by_field_name("operator")
                .map(|o| o.kind())
                .unwrap_or("");
            let v = match op {
                "+" => l + r,
                "-" => l - r,
                "*" => l * r,
                "//" if r != 0 => l.div_euclid(r),
                "%" if r != 0 => l.rem_euclid(r),
                _ => return Err(format!("unsupported arithmetic in `{text}`")),
            };
            Ok(Value::from(v))
        }
        "comparison_operator" => {
            let mut cursor = node.walk();
            let children: Vec<Node> = node.children(&mut cursor).collect();
            let operands: Vec<Node> = children.iter().copied().filter(|c| c.is_named()).collect();
            let ops: Vec<String> = {
                // Operators are the anonymous children between operands; `not in` and
                // `is not` come as two tokens.
                let mut ops = Vec::new();
                let mut pending = String::new();
                for c in &children {
                    if c.is_named() {
                        if !pending.is_empty() {
                            ops.push(std::mem::take(&mut pending));
                        }
                    } else {
                        if !pending.is_empty() {
                            pending.push(' ');
                        }
                        pending.push_str(c.kind());
                    }
                }
                ops
            };
            let mut left = eval(src, operands[0], env)?;
            for (op, rnode) in ops.iter().zip(&operands[1..]) {
                let right = eval(src, *rnode, env)?;
                let ok = match op.as_str() {
                    "==" => left == right,
                    "!=" => left != right,
                    "in" | "not in" => {
                        let arr = right.as_array().ok_or("`in` needs a list")?;
                        (op == "in") == arr.contains(&left)
                    }
                    "<" | "<=" | ">" | ">=" => {
                        let (a, b) = (
                            int(&left, "the left operand")?,
                            int(&right, "the right operand")?,
                        );
                        match op.as_str() {
                            "<" => a < b,
                            "<=" => a <= b,
                            ">" => a > b,
                            _ => a >= b,
                        }
                    }
                    _ => return Err(format!("unsupported comparison `{op}`")),
                };
                if !ok {
                    return Ok(Value::Bool(false));
                }
                left = right;
            }
            Ok(Value::Bool(true))
        }
        _ => Err(format!("cannot evaluate `{text}` ({})", node.kind())),
    }
}

/// Whether `node` is truthy.
pub fn eval_bool(src: &Source, node: Node, env: &Env) -> Result<bool, String> {
    eval(src, node, env).map(|v| truthy(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(expr: &str, layer: i64, config: &Value) -> bool {
        let src = Source::parse(format!("{expr}\n"));
        let node = src.root().named_child(0).unwrap().named_child(0).unwrap();
        let env = Env {
            names: BTreeMap::from([("layer_id".to_string(), Value::from(layer))]),
            config: Some(config),
        };
        eval_bool(&src, node, &env).unwrap()
    }

    #[test]
    fn evaluates_layer_conditions() {
        let cfg = serde_json::json!({"first_k_dense_replace": 1, "decoder_sparse_step": 2, "mlp_only_layers": [3]});
        assert!(!check("layer_id >= config.first_k_dense_replace", 0, &cfg));
        assert!(check("layer_id >= config.first_k_dense_replace", 1, &cfg));
        assert!(check(
            "(layer_id + 1) % config.decoder_sparse_step == 0 and layer_id not in config.mlp_only_layers",
            1,
            &cfg
        ));
        assert!(!check(
            "(layer_id + 1) % config.decoder_sparse_step == 0 and layer_id not in config.mlp_only_layers",
            3,
            &cfg
        ));
        assert!(check("0 <= layer_id < 2", 1, &cfg));
    }
}
