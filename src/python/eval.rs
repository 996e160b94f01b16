//! A small, bounded evaluator for the side-effect-free Python a model's `__init__` uses to
//! decide which layers get experts: names and `self.attr` locals, integer arithmetic,
//! comparisons (`in`, `not in`, `is`), `and`/`or`/`not`, conditional expressions, config
//! attributes (`config.x`, `config.text_config.x`), `getattr(config, "x", default)`,
//! `hasattr`, `len`, `min`, `max`, `int`, `bool`. Anything else is an error that names the
//! expression, never a guess. Work is bounded: expressions nest at most `MAX_DEPTH` deep,
//! integers never overflow, and a statement walk stops after `MAX_STEPS` statements.

use super::KindOf;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use tree_sitter::Node;

use super::Source;

/// Why an expression has no value here: code the evaluator does not follow (a call it does
/// not know, an f-string), a name or config attribute without a known value, or one of its
/// bounds. The model's code and config are the user's input, so it is a user error; the
/// caller says what to pass instead (`--moe-layers`, `--detail-layers`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct EvalError(String);

impl From<String> for EvalError {
    fn from(why: String) -> EvalError {
        EvalError(why)
    }
}

impl From<&str> for EvalError {
    fn from(why: &str) -> EvalError {
        EvalError(why.to_string())
    }
}

crate::exit::user_errors!(EvalError);

/// A value the evaluator works with: JSON, so config values need no conversion.
pub type Val = Value;

const MAX_DEPTH: usize = 64;
/// Statements one walk of a body may execute.
pub const MAX_STEPS: usize = 10_000;

/// What a name is bound to: a value, or why its value is not known.
#[derive(Debug, Clone, PartialEq)]
pub enum Binding {
    Known(Val),
    Unknown(String),
}

/// Names bound to values; a config object is a JSON object value like any other.
#[derive(Default)]
pub struct Env {
    pub names: BTreeMap<String, Binding>,
    /// Config attributes read, as `name=value` (for the reason shown to the user).
    pub reads: RefCell<BTreeSet<String>>,
}

impl Env {
    pub fn set(&mut self, name: &str, v: Val) {
        self.names.insert(name.to_string(), Binding::Known(v));
    }
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

fn int(v: &Val, what: &str) -> Result<i64, EvalError> {
    match v {
        Value::Bool(b) => Ok(i64::from(*b)),
        _ => v
            .as_i64()
            .ok_or_else(|| EvalError(format!("{what} is not an integer ({v})"))),
    }
}

fn text_of<'s>(src: &'s Source, node: Node) -> &'s str {
    src.text_of(node)
}

/// Evaluate `node` of `src`.
pub fn eval(src: &Source, node: Node, env: &Env) -> Result<Val, EvalError> {
    eval_at(src, node, env, 0)
}

/// Whether `node` is truthy.
pub fn eval_bool(src: &Source, node: Node, env: &Env) -> Result<bool, EvalError> {
    eval(src, node, env).map(|v| truthy(&v))
}

fn child<'t>(node: Node<'t>, field: &str) -> Result<Node<'t>, EvalError> {
    node.field(field)
        .ok_or_else(|| EvalError(format!("malformed {}", node.kind_of())))
}

/// `name.attr.attr` as a dotted name, when the node is one.
fn dotted(src: &Source, node: Node) -> Option<String> {
    match node.kind_of() {
        "identifier" => Some(text_of(src, node).to_string()),
        "attribute" => {
            let obj = dotted(src, node.field("object")?)?;
            let attr = text_of(src, node.field("attribute")?);
            Some(format!("{obj}.{attr}"))
        }
        _ => None,
    }
}

fn lookup(env: &Env, name: &str) -> Option<Result<Val, EvalError>> {
    env.names.get(name).map(|b| match b {
        Binding::Known(v) => Ok(v.clone()),
        Binding::Unknown(why) => Err(EvalError(why.clone())),
    })
}

fn attribute_of(obj: &Val, attr: &str, shown: &str, env: &Env) -> Result<Val, EvalError> {
    let map = obj
        .as_object()
        .ok_or_else(|| format!("`{shown}`: not an object with attributes"))?;
    let v = map
        .get(attr)
        .cloned()
        .ok_or_else(|| format!("the config has no `{attr}` (read as `{shown}`)"))?;
    if !v.is_object() {
        env.reads.borrow_mut().insert(format!("{attr}={v}"));
    }
    Ok(v)
}

fn eval_at(src: &Source, node: Node, env: &Env, depth: usize) -> Result<Val, EvalError> {
    if depth > MAX_DEPTH {
        return Err(EvalError::from(
            "the expression nests too deeply to evaluate",
        ));
    }
    let next = |n: Node| eval_at(src, n, env, depth + 1);
    let text = text_of(src, node);
    match node.kind_of() {
        "integer" => text
            .replace('_', "")
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| EvalError(format!("`{text}`: integer out of range"))),
        "float" => text
            .replace('_', "")
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| EvalError(format!("`{text}`: not a float"))),
        "true" => Ok(Value::Bool(true)),
        "false" => Ok(Value::Bool(false)),
        "none" => Ok(Value::Null),
        "string" => {
            if text.contains('{') && text.starts_with(['f', 'F']) {
                return Err(EvalError(format!("cannot evaluate the f-string `{text}`")));
            }
            let inner = text
                .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                .trim_matches(|c| c == '"' || c == '\'');
            Ok(Value::String(inner.to_string()))
        }
        "identifier" => lookup(env, text)
            .unwrap_or_else(|| Err(EvalError(format!("`{text}` has no known value")))),
        "parenthesized_expression" => next(node.named_child(0).ok_or("empty parentheses")?),
        "attribute" => {
            if let Some(name) = dotted(src, node)
                && let Some(v) = lookup(env, &name)
            {
                return v;
            }
            let obj = next(child(node, "object")?)?;
            let attr = text_of(src, child(node, "attribute")?);
            attribute_of(&obj, attr, text, env)
        }
        "subscript" => {
            let value = next(child(node, "value")?)?;
            let index = next(child(node, "subscript")?)?;
            let i = int(&index, "the index")?;
            let arr = value.as_array().ok_or("subscript of a non-list")?;
            let i = if i < 0 { arr.len() as i64 + i } else { i };
            usize::try_from(i)
                .ok()
                .and_then(|i| arr.get(i))
                .cloned()
                .ok_or(EvalError::from("index out of range"))
        }
        "list" | "tuple" | "set" => {
            let mut cursor = node.walk();
            let items: Result<Vec<Val>, EvalError> =
                node.named_children(&mut cursor).map(next).collect();
            Ok(Value::Array(items?))
        }
        "conditional_expression" => {
            let mut cursor = node.walk();
            let parts: Vec<Node> = node.named_children(&mut cursor).collect();
            let [yes, cond, no] = parts.as_slice() else {
                return Err(EvalError(format!("cannot evaluate `{text}`")));
            };
            if truthy(&next(*cond)?) {
                next(*yes)
            } else {
                next(*no)
            }
        }
        "call" => call(src, node, env, depth),
        "unary_operator" => {
            let v = int(&next(child(node, "argument")?)?, "the operand")?;
            match node.child(0).map(|c| c.kind_of()) {
                Some("-") => v
                    .checked_neg()
                    .map(Value::from)
                    .ok_or_else(|| "integer overflow".into()),
                Some("+") => Ok(Value::from(v)),
                _ => Err(EvalError(format!("unsupported operator in `{text}`"))),
            }
        }
        "not_operator" => Ok(Value::Bool(!truthy(&next(child(node, "argument")?)?))),
        "boolean_operator" => {
            let left = next(child(node, "left")?)?;
            let op = node.field("operator").map(|o| o.kind_of()).unwrap_or("");
            match op {
                "and" if !truthy(&left) => Ok(left),
                "or" if truthy(&left) => Ok(left),
                "and" | "or" => next(child(node, "right")?),
                _ => Err(EvalError(format!("unsupported operator in `{text}`"))),
            }
        }
        "binary_operator" => {
            let l = int(&next(child(node, "left")?)?, "the left operand")?;
            let r = int(&next(child(node, "right")?)?, "the right operand")?;
            let op = node.field("operator").map(|o| o.kind_of()).unwrap_or("");
            let v = match op {
                "+" => l.checked_add(r),
                "-" => l.checked_sub(r),
                "*" => l.checked_mul(r),
                "//" if r != 0 => l.checked_div_euclid(r),
                "%" if r != 0 => l.checked_rem_euclid(r),
                "**" if (0..=64).contains(&r) => l.checked_pow(r as u32),
                _ => return Err(EvalError(format!("unsupported arithmetic in `{text}`"))),
            };
            v.map(Value::from)
                .ok_or_else(|| EvalError(format!("integer overflow in `{text}`")))
        }
        "comparison_operator" => compare(src, node, env, depth),
        _ => Err(EvalError(format!(
            "cannot evaluate `{text}` ({})",
            node.kind_of()
        ))),
    }
}

fn compare(src: &Source, node: Node, env: &Env, depth: usize) -> Result<Val, EvalError> {
    let mut cursor = node.walk();
    let children: Vec<Node> = node.children(&mut cursor).collect();
    let operands: Vec<Node> = children.iter().copied().filter(|c| c.is_named()).collect();
    // Operators are the anonymous children between operands; `not in` and `is not` come
    // as two tokens.
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
            pending.push_str(c.kind_of());
        }
    }
    let first = operands.first().ok_or("empty comparison")?;
    let mut left = eval_at(src, *first, env, depth + 1)?;
    for (op, rnode) in ops.iter().zip(&operands[1..]) {
        let right = eval_at(src, *rnode, env, depth + 1)?;
        let ok = match op.as_str() {
            "==" => left == right,
            "!=" => left != right,
            "is" => left.is_null() && right.is_null() || left == right && left.is_boolean(),
            "is not" => !(left.is_null() && right.is_null() || left == right && left.is_boolean()),
            "in" | "not in" => {
                let found = match &right {
                    Value::Array(a) => a.contains(&left),
                    Value::Object(o) => left.as_str().is_some_and(|k| o.contains_key(k)),
                    Value::String(s) => left.as_str().is_some_and(|k| s.contains(k)),
                    _ => return Err(EvalError::from("`in` needs a list")),
                };
                (op == "in") == found
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
            _ => return Err(EvalError(format!("unsupported comparison `{op}`"))),
        };
        if !ok {
            return Ok(Value::Bool(false));
        }
        left = right;
    }
    Ok(Value::Bool(true))
}

fn call(src: &Source, node: Node, env: &Env, depth: usize) -> Result<Val, EvalError> {
    let text = text_of(src, node);
    let func = text_of(src, child(node, "function")?);
    let args = child(node, "arguments")?;
    let mut cursor = args.walk();
    let items: Vec<Node> = args
        .named_children(&mut cursor)
        .filter(|n| n.kind_of() != "comment")
        .collect();
    if items
        .iter()
        .any(|n| n.kind_of() != "keyword_argument" && !n.is_named())
    {
        return Err(EvalError(format!("cannot evaluate `{text}`")));
    }
    let positional: Vec<Node> = items
        .iter()
        .copied()
        .filter(|n| n.kind_of() != "keyword_argument")
        .collect();
    let arg = |i: usize| -> Result<Val, EvalError> {
        eval_at(
            src,
            *positional
                .get(i)
                .ok_or_else(|| format!("`{text}`: missing argument"))?,
            env,
            depth + 1,
        )
    };
    match (func, positional.len()) {
        ("getattr", 2 | 3) | ("hasattr", 2) => {
            let obj = arg(0)?;
            let name = arg(1)?;
            let name = name
                .as_str()
                .ok_or_else(|| format!("`{text}`: the attribute name is not a string"))?;
            let found = obj.as_object().and_then(|o| o.get(name)).cloned();
            if let Some(v) = &found
                && !v.is_object()
            {
                env.reads.borrow_mut().insert(format!("{name}={v}"));
            }
            match (func, found) {
                ("hasattr", f) => Ok(Value::Bool(f.is_some())),
                (_, Some(v)) => Ok(v),
                (_, None) if positional.len() == 3 => arg(2),
                (_, None) => Err(EvalError(format!(
                    "the config has no `{name}` (read by `{text}`)"
                ))),
            }
        }
        ("len", 1) => match arg(0)? {
            Value::Array(a) => Ok(Value::from(a.len())),
            Value::String(s) => Ok(Value::from(s.chars().count())),
            Value::Object(o) => Ok(Value::from(o.len())),
            v => Err(EvalError(format!("`{text}`: len of {v}"))),
        },
        ("int", 1) => arg(0).and_then(|v| int(&v, "the argument").map(Value::from)),
        ("bool", 1) => arg(0).map(|v| Value::Bool(truthy(&v))),
        ("min" | "max", n) if n >= 2 => {
            let mut best = int(&arg(0)?, "an argument")?;
            for i in 1..n {
                let v = int(&arg(i)?, "an argument")?;
                best = if func == "min" {
                    best.min(v)
                } else {
                    best.max(v)
                };
            }
            Ok(Value::from(best))
        }
        _ => Err(EvalError(format!("cannot evaluate the call `{text}`"))),
    }
}

/// Run the simple statements of a body in order, binding what they assign, up to (not
/// including) the statement that starts at `stop`. A name assigned where the walk cannot
/// tell whether it runs (a loop, a branch whose condition is unknown) is bound as
/// unknown, with why. Statements that assign nothing are skipped: they cannot change
/// what the decision reads.
pub fn run_until(src: &Source, body: Node, stop: usize, env: &mut Env) -> Result<(), EvalError> {
    let mut steps = 0;
    run_block(src, body, stop, env, &mut steps)
}

fn run_block(
    src: &Source,
    block: Node,
    stop: usize,
    env: &mut Env,
    steps: &mut usize,
) -> Result<(), EvalError> {
    let mut cursor = block.walk();
    let stmts: Vec<Node> = block
        .named_children(&mut cursor)
        .filter(|c| c.kind_of() != "comment")
        .collect();
    for stmt in stmts {
        if stmt.start_byte() >= stop {
            return Ok(());
        }
        *steps += 1;
        if *steps > MAX_STEPS {
            return Err(EvalError(format!(
                "stopped after {MAX_STEPS} statements before reaching the decision"
            )));
        }
        let contains_stop = stmt.start_byte() < stop && stop < stmt.end_byte();
        match stmt.kind_of() {
            "expression_statement" => {
                if let Some(e) = stmt.named_child(0) {
                    assign(src, e, env);
                }
            }
            "if_statement" => {
                run_if(src, stmt, stop, env, steps, contains_stop)?;
            }
            _ => {
                let why = format!(
                    "assigned in a `{}` at line {}, which the evaluator does not run",
                    stmt.kind_of().trim_end_matches("_statement"),
                    (stmt.start_position().row + 1)
                );
                mark_assigned_unknown(src, stmt, env, &why);
            }
        }
        if contains_stop {
            return Ok(());
        }
    }
    Ok(())
}

fn run_if(
    src: &Source,
    stmt: Node,
    stop: usize,
    env: &mut Env,
    steps: &mut usize,
    contains_stop: bool,
) -> Result<(), EvalError> {
    // The branches in order: (condition or None for else, body).
    let mut branches: Vec<(Option<Node>, Node)> = Vec::new();
    if let (Some(c), Some(b)) = (stmt.field("condition"), stmt.field("consequence")) {
        branches.push((Some(c), b));
    }
    let mut cursor = stmt.walk();
    for clause in stmt.children_by_field_name("alternative", &mut cursor) {
        let body = clause.field("body");
        let cond = clause.field("condition");
        if let Some(b) = body {
            branches.push((cond, b));
        }
    }
    if contains_stop {
        // The decision sits inside this `if`: run up to it in its own branch.
        for (_, body) in &branches {
            if body.start_byte() <= stop && stop < body.end_byte() {
                return run_block(src, *body, stop, env, steps);
            }
        }
        return Ok(());
    }
    for (cond, body) in &branches {
        let taken = match cond {
            None => Ok(true),
            Some(c) => eval(src, *c, env).map(|v| truthy(&v)),
        };
        match taken {
            Ok(true) => return run_block(src, *body, usize::MAX, env, steps),
            Ok(false) => continue,
            Err(e) => {
                let why = format!(
                    "assigned under `if` at line {} whose condition cannot be evaluated ({e})",
                    (stmt.start_position().row + 1)
                );
                mark_assigned_unknown(src, stmt, env, &why);
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Bind an assignment's target (a name or `self.attr`) to its value, or to why it has none.
fn assign(src: &Source, e: Node, env: &mut Env) {
    if !matches!(e.kind_of(), "assignment" | "augmented_assignment") {
        return;
    }
    let (Some(left), Some(right)) = (e.field("left"), e.field("right")) else {
        return;
    };
    let Some(name) = dotted(src, left) else {
        mark_assigned_unknown(src, e, env, "assigned by unpacking");
        return;
    };
    let value = if e.kind_of() == "augmented_assignment" {
        let op = text_of(src, e)
            [left.end_byte() - e.start_byte()..right.start_byte() - e.start_byte()]
            .trim()
            .trim_end_matches('=')
            .to_string();
        let current =
            lookup(env, &name).unwrap_or_else(|| Err(EvalError(format!("`{name}` unknown"))));
        match (current, eval(src, right, env)) {
            (Ok(a), Ok(b)) => match (int(&a, "x"), int(&b, "y"), op.as_str()) {
                (Ok(a), Ok(b), "+") => a.checked_add(b).map(Value::from).ok_or("overflow".into()),
                (Ok(a), Ok(b), "-") => a.checked_sub(b).map(Value::from).ok_or("overflow".into()),
                (Ok(a), Ok(b), "*") => a.checked_mul(b).map(Value::from).ok_or("overflow".into()),
                _ => Err(EvalError(format!("cannot evaluate `{}`", text_of(src, e)))),
            },
            (Err(x), _) | (_, Err(x)) => Err(x),
        }
    } else {
        eval(src, right, env)
    };
    let line = e.start_position().row + 1;
    env.names.insert(
        name.clone(),
        match value {
            Ok(v) => Binding::Known(v),
            Err(why) => {
                Binding::Unknown(format!("`{name}` (line {line}) has no known value: {why}"))
            }
        },
    );
}

fn mark_assigned_unknown(src: &Source, node: Node, env: &mut Env, why: &str) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if matches!(
            n.kind_of(),
            "assignment" | "augmented_assignment" | "for_statement"
        ) && let Some(left) = n.field("left")
        {
            let mut names = vec![left];
            while let Some(t) = names.pop() {
                if let Some(d) = dotted(src, t) {
                    env.names
                        .insert(d.clone(), Binding::Unknown(format!("`{d}` is {why}")));
                } else {
                    let mut c = t.walk();
                    names.extend(t.named_children(&mut c));
                }
            }
        }
        if matches!(
            n.kind_of(),
            "function_definition" | "class_definition" | "lambda"
        ) {
            continue;
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(expr: &str, layer: i64, config: &Value) -> bool {
        let src = Source::parse(format!("{expr}\n"));
        let node = src.root().named_child(0).unwrap().named_child(0).unwrap();
        let mut env = Env::default();
        env.set("layer_id", Value::from(layer));
        env.set("config", config.clone());
        eval_bool(&src, node, &env).unwrap()
    }

    #[test]
    fn evaluates_layer_conditions() {
        let cfg = serde_json::json!({"first_k_dense_replace": 1, "decoder_sparse_step": 2, "mlp_only_layers": [3], "text_config": {"n": 4}});
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
        assert!(check("layer_id < config.text_config.n", 3, &cfg));
        assert!(check(
            "layer_id in (getattr(config, 'missing', None) or [2])",
            2,
            &cfg
        ));
        assert!(check(
            "not getattr(config, 'mlp_only_layers', [])[0] == 2",
            0,
            &cfg
        ));
        assert!(check(
            "hasattr(config, 'decoder_sparse_step') and 2 ** 3 == 8",
            0,
            &cfg
        ));
    }

    #[test]
    fn runs_a_body_up_to_the_decision() {
        let code = "def __init__(self, config, layer_idx):\n    self.idx = layer_idx\n    decoder_sparse_step = config.decoder_sparse_step\n    mlp_only_layers = getattr(config, \"mlp_only_layers\", []) or []\n    if config.flag:\n        k = 1\n    else:\n        k = 2\n    for i in range(3):\n        j = i\n    use_moe = (layer_idx + k) % decoder_sparse_step == 0 and layer_idx not in mlp_only_layers\n";
        let src = Source::parse(code.to_string());
        let func = src.root().named_child(0).unwrap();
        let body = func.field("body").unwrap();
        let stop = code.find("use_moe").unwrap();
        let mut env = Env::default();
        env.set("layer_idx", Value::from(1));
        env.set(
            "config",
            serde_json::json!({"decoder_sparse_step": 3, "flag": false}),
        );
        run_until(&src, body, stop, &mut env).unwrap();
        assert_eq!(env.names["k"], Binding::Known(Value::from(2)));
        assert_eq!(
            env.names["mlp_only_layers"],
            Binding::Known(serde_json::json!([]))
        );
        assert!(matches!(env.names["j"], Binding::Unknown(_)));
        assert_eq!(env.names["self.idx"], Binding::Known(Value::from(1)));
    }

    #[test]
    fn work_is_bounded() {
        let deep = format!("{}1{}", "(".repeat(200), ")".repeat(200));
        let src = Source::parse(format!("{deep}\n"));
        let node = src.root().named_child(0).unwrap().named_child(0).unwrap();
        assert!(eval(&src, node, &Env::default()).is_err());
        let src = Source::parse("9223372036854775807 + 1\n".to_string());
        let node = src.root().named_child(0).unwrap().named_child(0).unwrap();
        assert_eq!(
            eval(&src, node, &Env::default()).unwrap_err().to_string(),
            "integer overflow in `9223372036854775807 + 1`"
        );
    }
}
