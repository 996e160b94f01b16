//! What a rule's template prints, found without running it: the templates are parsed as
//! Python and each `print(...)` is followed through f-strings, string locals, helper
//! functions the rule set defines (`_lmem(label)` prints `label` inside its own line),
//! `x if c else y` (both lines), and lists a class appends to and loops over. Every value
//! Python would format at run time stays a field (the expression and its format spec).
//! `test-rules` holds these lines against the rule's print declarations, and a
//! declaration that does not write its line gets it from here (`rules::prints`).

use super::KindOf;
use std::collections::{BTreeMap, HashMap};

use tree_sitter::Node;

use super::Source;

/// A piece of a printed line.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Lit(String),
    /// A value formatted at run time: the expression as written, `!r`/`!s`, and the
    /// format spec after the colon.
    Field {
        expr: String,
        conv: Option<char>,
        spec: String,
    },
}

/// One way a print can come out.
pub type Line = Vec<Part>;

/// Alternatives of a string (a conditional gives two).
#[derive(Debug, Clone, PartialEq)]
struct Sym(Vec<Line>);

/// At most this many alternatives are followed for one string.
const MAX_ALTERNATIVES: usize = 16;
/// Helper calls followed inside helper calls, at most.
const MAX_DEPTH: usize = 6;
/// The expression a helper's parameter stands for while its body is read on its own.
const PARAM_MARK: &str = "\u{1}param:";

impl Sym {
    fn lit(s: &str) -> Sym {
        Sym(vec![vec![Part::Lit(s.to_string())]])
    }

    fn field(expr: &str) -> Sym {
        Sym(vec![vec![Part::Field {
            expr: expr.to_string(),
            conv: None,
            spec: String::new(),
        }]])
    }

    fn concat(&self, other: &Sym) -> Sym {
        let mut out = Vec::new();
        for a in &self.0 {
            for b in &other.0 {
                if out.len() >= MAX_ALTERNATIVES {
                    break;
                }
                let mut l = a.clone();
                l.extend(b.iter().cloned());
                out.push(l);
            }
        }
        Sym(out)
    }

    fn union(mut self, other: Sym) -> Sym {
        for l in other.0 {
            if self.0.len() < MAX_ALTERNATIVES && !self.0.contains(&l) {
                self.0.push(l);
            }
        }
        self
    }
}

/// Literal pieces merged, empty ones dropped.
fn normalize(line: Line) -> Line {
    let mut out: Line = Vec::new();
    for p in line {
        match (out.last_mut(), p) {
            (_, Part::Lit(s)) if s.is_empty() => {}
            (Some(Part::Lit(a)), Part::Lit(b)) => a.push_str(&b),
            (_, p) => out.push(p),
        }
    }
    out
}

/// The lines each template prints (by the caller's index), in template order.
/// `templates` are the rules' code as Python a parser takes, column 0 their indentation:
/// the values it cannot know written as names, each metavariable `$X` as
/// `metavariable_name("X")`, read back as the field `$X`. Helpers a template defines
/// are followed from any template.
pub fn printed_lines(templates: &[(usize, String)]) -> BTreeMap<usize, Vec<Line>> {
    let (text, wrappers) = module_text(templates);
    let src = Source::parse(text);
    let root = src.root();
    // Each rule's wrapper function, and the helpers defined at a template's top level.
    let mut bodies: HashMap<usize, Node> = HashMap::new();
    let mut defs: HashMap<String, Node> = HashMap::new();
    let mut own_defs: Vec<(usize, Node)> = Vec::new();
    let mut cursor = root.walk();
    for def in root.named_children(&mut cursor) {
        if def.kind_of() != "function_definition" {
            continue;
        }
        let name = def.field("name").map(|n| src.text_of(n)).unwrap_or("");
        let Some(&rule) = wrappers.get(name) else {
            continue;
        };
        let Some(body) = def.field("body") else {
            continue;
        };
        bodies.insert(rule, body);
        let mut c = body.walk();
        for stmt in body.named_children(&mut c) {
            let stmt = undecorate(stmt);
            if matches!(stmt.kind_of(), "function_definition" | "class_definition") {
                if stmt.kind_of() == "function_definition"
                    && let Some(n) = stmt.field("name")
                {
                    defs.insert(src.text_of(n).to_string(), stmt);
                }
                own_defs.push((rule, stmt));
            }
        }
    }
    let ev = Eval {
        src: &src,
        defs: &defs,
    };
    // What the helpers print on their own, whoever calls them: those lines are the
    // defining rule's (a caller's line is one that prints something the caller passed).
    let mut helper_lines: Vec<Line> = Vec::new();
    for (_, def) in &own_defs {
        ev.definition_alone(*def, &mut helper_lines);
    }
    let helper_lines: Vec<Line> = helper_lines.into_iter().map(normalize).collect();
    let mut out: BTreeMap<usize, Vec<Line>> = BTreeMap::new();
    let mut rules: Vec<usize> = bodies.keys().copied().collect();
    rules.sort();
    for rule in rules {
        let mut lines = Vec::new();
        let mut env = Env::default();
        ev.block(bodies[&rule], &mut env, &mut lines, 0);
        lines.retain(|l| !helper_lines.contains(&normalize(l.clone())));
        for (r, def) in &own_defs {
            if *r == rule {
                ev.definition_alone(*def, &mut lines);
            }
        }
        let mut unique: Vec<Line> = Vec::new();
        for l in lines.into_iter().map(normalize) {
            if !unique.contains(&l) {
                unique.push(l);
            }
        }
        if !unique.is_empty() {
            out.insert(rule, unique);
        }
    }
    out
}

fn undecorate(n: Node) -> Node {
    if n.kind_of() == "decorated_definition" {
        n.field("definition").unwrap_or(n)
    } else {
        n
    }
}

/// All templates as one module: each rule's template is the body of a function named
/// after the rule's index.
fn module_text(templates: &[(usize, String)]) -> (String, HashMap<String, usize>) {
    let mut text = String::new();
    let mut wrappers = HashMap::new();
    for (i, template) in templates {
        if template.trim().is_empty() {
            continue;
        }
        let name = format!("__instrument_rule_{i}__");
        wrappers.insert(name.clone(), *i);
        text.push_str(&format!("def {name}():\n    pass\n"));
        for line in template.lines() {
            text.push_str("    ");
            text.push_str(line);
            text.push('\n');
        }
        text.push('\n');
    }
    (text, wrappers)
}

/// The name metavariable `$X` is written as in a template given to `printed_lines`.
pub fn metavariable_name(name: &str) -> String {
    format!("__mv_{name}__")
}

/// `__mv_X__` back to `$X` in text shown to people.
fn show_metavariables(s: &str) -> String {
    let mut out = s.to_string();
    while let Some(i) = out.find("__mv_") {
        let Some(j) = out[i + 5..].find("__") else {
            break;
        };
        let name = out[i + 5..i + 5 + j].to_string();
        out.replace_range(i..i + 5 + j + 2, &format!("${name}"));
    }
    out
}

#[derive(Default, Clone)]
struct Env {
    strings: HashMap<String, Sym>,
    /// What `self.<attr>.append(...)` added, by attribute.
    lists: HashMap<String, Sym>,
    /// What the function being read returns.
    returns: Option<Sym>,
}

struct Eval<'s> {
    src: &'s Source,
    defs: &'s HashMap<String, Node<'s>>,
}

impl<'s> Eval<'s> {
    fn text(&self, n: Node) -> &str {
        self.src.text_of(n)
    }

    /// A definition read on its own: a function's lines that do not print one of its
    /// parameters (those belong to its callers), or a class's methods.
    fn definition_alone(&self, def: Node<'s>, out: &mut Vec<Line>) {
        if def.kind_of() == "class_definition" {
            let Some(body) = def.field("body") else {
                return;
            };
            let methods: Vec<Node> = {
                let mut c = body.walk();
                body.named_children(&mut c).map(undecorate).collect()
            };
            // First what the methods append to the instance's lists, then their prints.
            let mut env = Env::default();
            let mut ignore = Vec::new();
            for m in &methods {
                if m.kind_of() == "function_definition" {
                    let mut e = Env {
                        lists: env.lists.clone(),
                        ..Env::default()
                    };
                    self.function_body(*m, &mut e, &mut ignore);
                    env.lists = e.lists;
                }
            }
            for m in &methods {
                if m.kind_of() == "function_definition" {
                    let mut e = Env {
                        lists: env.lists.clone(),
                        ..Env::default()
                    };
                    self.function_body(*m, &mut e, out);
                }
            }
            return;
        }
        let mut env = Env::default();
        for p in self.params(def) {
            env.strings
                .insert(p.clone(), Sym::field(&format!("{PARAM_MARK}{p}")));
        }
        let mut lines = Vec::new();
        self.function_body(def, &mut env, &mut lines);
        out.extend(lines.into_iter().filter(|l| {
            !l.iter()
                .any(|p| matches!(p, Part::Field { expr, .. } if expr.starts_with(PARAM_MARK)))
        }));
    }

    fn function_body(&self, def: Node<'s>, env: &mut Env, out: &mut Vec<Line>) {
        if let Some(body) = def.field("body") {
            self.block(body, env, out, 0);
        }
    }

    fn params(&self, def: Node) -> Vec<String> {
        let Some(ps) = def.field("parameters") else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut c = ps.walk();
        for p in ps.named_children(&mut c) {
            let name = match p.kind_of() {
                "identifier" => Some(p),
                "typed_parameter" => p.named_child(0),
                "default_parameter" | "typed_default_parameter" => p.field("name"),
                _ => None,
            };
            if let Some(n) = name {
                let t = self.text(n);
                if t != "self" {
                    out.push(t.to_string());
                }
            }
        }
        out
    }

    fn block(&self, block: Node<'s>, env: &mut Env, out: &mut Vec<Line>, depth: usize) {
        let mut c = block.walk();
        let stmts: Vec<Node> = block.named_children(&mut c).collect();
        for s in stmts {
            self.statement(s, env, out, depth);
        }
    }

    fn statement(&self, s: Node<'s>, env: &mut Env, out: &mut Vec<Line>, depth: usize) {
        match s.kind_of() {
            "expression_statement" => {
                let mut c = s.walk();
                let children: Vec<Node> = s.named_children(&mut c).collect();
                for e in children {
                    match e.kind_of() {
                        "call" => self.call(e, env, out, depth),
                        "assignment" => self.assignment(e, env, out, depth),
                        "augmented_assignment" => self.augmented(e, env),
                        _ => {}
                    }
                }
            }
            "return_statement" => {
                if let Some(v) = s.named_child(0) {
                    let sym = self.value(v, env, depth);
                    env.returns = Some(match env.returns.take() {
                        Some(r) => r.union(sym),
                        None => sym,
                    });
                }
            }
            "for_statement" => {
                if let (Some(left), Some(right)) = (s.field("left"), s.field("right")) {
                    let name = self.text(left).to_string();
                    match env.lists.get(self.text(right)).cloned() {
                        Some(items) => {
                            env.strings.insert(name, items);
                        }
                        None => {
                            env.strings.remove(&name);
                        }
                    }
                }
                self.children_blocks(s, env, out, depth);
            }
            "if_statement" => self.branches(s, env, out, depth),
            "while_statement" | "with_statement" | "try_statement" => {
                self.children_blocks(s, env, out, depth);
            }
            _ => {}
        }
    }

    /// The blocks of a compound statement and of its clauses (elif, else, except, finally).
    fn children_blocks(&self, s: Node<'s>, env: &mut Env, out: &mut Vec<Line>, depth: usize) {
        let mut c = s.walk();
        let children: Vec<Node> = s.named_children(&mut c).collect();
        for ch in children {
            match ch.kind_of() {
                "block" => self.block(ch, env, out, depth),
                "elif_clause"
                | "else_clause"
                | "except_clause"
                | "finally_clause"
                | "except_group_clause" => self.children_blocks(ch, env, out, depth),
                _ => {}
            }
        }
    }

    /// An `if` and its `elif`/`else` branches: each read from the state before the `if`;
    /// afterwards a name holds what any branch (or, without `else`, none) left in it.
    fn branches(&self, s: Node<'s>, env: &mut Env, out: &mut Vec<Line>, depth: usize) {
        let mut blocks = Vec::new();
        let mut has_else = false;
        let mut c = s.walk();
        for ch in s.named_children(&mut c) {
            match ch.kind_of() {
                "block" => blocks.push(ch),
                "elif_clause" | "else_clause" => {
                    has_else |= ch.kind_of() == "else_clause";
                    let mut cc = ch.walk();
                    blocks.extend(
                        ch.named_children(&mut cc)
                            .filter(|n| n.kind_of() == "block"),
                    );
                }
                _ => {}
            }
        }
        let before = env.clone();
        let mut after: Vec<Env> = Vec::new();
        for b in blocks {
            let mut e = before.clone();
            self.block(b, &mut e, out, depth);
            after.push(e);
        }
        if !has_else {
            after.push(before);
        }
        let mut merged = Env::default();
        for e in after {
            for (k, v) in e.strings {
                let m = match merged.strings.remove(&k) {
                    Some(old) => old.union(v),
                    None => v,
                };
                merged.strings.insert(k, m);
            }
            for (k, v) in e.lists {
                let m = match merged.lists.remove(&k) {
                    Some(old) => old.union(v),
                    None => v,
                };
                merged.lists.insert(k, m);
            }
            if let Some(r) = e.returns {
                merged.returns = Some(match merged.returns.take() {
                    Some(old) => old.union(r),
                    None => r,
                });
            }
        }
        *env = merged;
    }

    /// The helper a call runs: `name(...)`, or `module.name(...)` through an imported
    /// module (`_mod._layer_mem_choose(...)`), not a method of `self`.
    fn helper(&self, func: Node<'s>) -> Option<Node<'s>> {
        match func.kind_of() {
            "identifier" => self.defs.get(self.text(func)).copied(),
            "attribute" => {
                let obj = func.field("object")?;
                let attr = func.field("attribute")?;
                if obj.kind_of() != "identifier" || self.text(obj) == "self" {
                    return None;
                }
                self.defs.get(self.text(attr)).copied()
            }
            _ => None,
        }
    }

    fn assignment(&self, a: Node<'s>, env: &mut Env, out: &mut Vec<Line>, depth: usize) {
        let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
            return;
        };
        // `x = helper(...)`: what the helper prints is printed whatever becomes of `x`.
        let called = match right.kind_of() {
            "call" if depth < MAX_DEPTH => right
                .field("function")
                .and_then(|f| self.helper(f))
                .map(|def| self.invoke(def, right.field("arguments"), env, out, depth)),
            _ => None,
        };
        if left.kind_of() != "identifier" {
            return;
        }
        let name = self.text(left).to_string();
        let value = match called {
            Some(returned) => returned,
            None => self.string(right, env, 0),
        };
        match value {
            Some(sym) => {
                env.strings.insert(name, sym);
            }
            None => {
                env.strings.remove(&name);
            }
        }
    }

    fn augmented(&self, a: Node<'s>, env: &mut Env) {
        let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
            return;
        };
        let name = self.text(left).to_string();
        let op = a.field("operator").map(|o| self.text(o)).unwrap_or("");
        match (env.strings.get(&name).cloned(), self.string(right, env, 0)) {
            (Some(old), Some(add)) if op == "+=" => {
                env.strings.insert(name, old.concat(&add));
            }
            _ => {
                env.strings.remove(&name);
            }
        }
    }

    fn call(&self, call: Node<'s>, env: &mut Env, out: &mut Vec<Line>, depth: usize) {
        let Some(func) = call.field("function") else {
            return;
        };
        let args = call.field("arguments");
        let fname = self.text(func);
        if fname == "print" {
            if let Some(args) = args {
                let (positional, keywords) = self.arguments(args);
                let sep = keywords
                    .get("sep")
                    .and_then(|n| self.string(*n, env, depth))
                    .unwrap_or_else(|| Sym::lit(" "));
                let mut line: Option<Sym> = None;
                for a in positional {
                    let v = self.value(a, env, depth);
                    line = Some(match line {
                        Some(l) => l.concat(&sep).concat(&v),
                        None => v,
                    });
                }
                out.extend(line.unwrap_or_else(|| Sym::lit("")).0);
            }
            return;
        }
        if func.kind_of() == "attribute"
            && let Some(attr) = func.field("attribute")
            && self.text(attr) == "append"
            && let Some(obj) = func.field("object")
            && let Some(args) = args
        {
            let (positional, _) = self.arguments(args);
            if let Some(a) = positional.first() {
                let v = self.value(*a, env, depth);
                let key = self.text(obj).to_string();
                let merged = match env.lists.remove(&key) {
                    Some(old) => old.union(v),
                    None => v,
                };
                env.lists.insert(key, merged);
            }
            return;
        }
        if let Some(def) = self.helper(func)
            && depth < MAX_DEPTH
        {
            self.invoke(def, args, env, out, depth);
        }
    }

    /// Read a helper's body with its parameters bound to the arguments; returns what it
    /// returns (when that is a string).
    fn invoke(
        &self,
        def: Node<'s>,
        args: Option<Node<'s>>,
        env: &Env,
        out: &mut Vec<Line>,
        depth: usize,
    ) -> Option<Sym> {
        let params = self.params(def);
        let mut inner = Env::default();
        if let Some(args) = args {
            let (positional, keywords) = self.arguments(args);
            for (p, a) in params.iter().zip(positional) {
                inner.strings.insert(p.clone(), self.value(a, env, depth));
            }
            for (k, a) in keywords {
                if params.contains(&k) {
                    inner.strings.insert(k, self.value(a, env, depth));
                }
            }
        }
        if let Some(body) = def.field("body") {
            self.block(body, &mut inner, out, depth + 1);
        }
        inner.returns
    }

    fn arguments(&self, args: Node<'s>) -> (Vec<Node<'s>>, HashMap<String, Node<'s>>) {
        let mut positional = Vec::new();
        let mut keywords = HashMap::new();
        let mut c = args.walk();
        for a in args.named_children(&mut c) {
            match a.kind_of() {
                "keyword_argument" => {
                    if let (Some(n), Some(v)) = (a.field("name"), a.field("value")) {
                        keywords.insert(self.text(n).to_string(), v);
                    }
                }
                "comment" => {}
                _ => positional.push(a),
            }
        }
        (positional, keywords)
    }

    /// A value as text: a string we can follow, or a field for whatever Python formats.
    fn value(&self, n: Node<'s>, env: &Env, depth: usize) -> Sym {
        self.string(n, env, depth)
            .unwrap_or_else(|| Sym::field(&show_metavariables(self.text(n))))
    }

    /// The expression as a string, when it is one we can follow.
    fn string(&self, n: Node<'s>, env: &Env, depth: usize) -> Option<Sym> {
        match n.kind_of() {
            "string" => Some(self.string_literal(n, env, depth)),
            "concatenated_string" => {
                let mut c = n.walk();
                let parts: Vec<Node> = n.named_children(&mut c).collect();
                let mut acc = Sym::lit("");
                for p in parts {
                    acc = acc.concat(&self.string_literal(p, env, depth));
                }
                Some(acc)
            }
            "parenthesized_expression" => n.named_child(0).and_then(|x| self.string(x, env, depth)),
            "identifier" => env.strings.get(self.text(n)).cloned(),
            "binary_operator" => {
                let op = n.field("operator").map(|o| self.text(o))?;
                if op != "+" {
                    return None;
                }
                let l = self.string(n.field("left")?, env, depth)?;
                let r = self.string(n.field("right")?, env, depth)?;
                Some(l.concat(&r))
            }
            "conditional_expression" => {
                let mut c = n.walk();
                let parts: Vec<Node> = n.named_children(&mut c).collect();
                let (a, b) = (parts.first()?, parts.get(2)?);
                // A conditional of two non-strings (`get_rank() if ok else 0`) is one value.
                if self.string(*a, env, depth).is_none() && self.string(*b, env, depth).is_none() {
                    return None;
                }
                let a = self.value(*a, env, depth);
                let b = self.value(*b, env, depth);
                Some(a.union(b))
            }
            "call" => {
                let func = n.field("function")?;
                let def = self.helper(func)?;
                if depth >= MAX_DEPTH {
                    return None;
                }
                let mut ignore = Vec::new();
                self.invoke(def, n.field("arguments"), env, &mut ignore, depth)
            }
            _ => None,
        }
    }

    fn string_literal(&self, n: Node<'s>, env: &Env, depth: usize) -> Sym {
        let mut acc = Sym::lit("");
        let mut is_f = false;
        let mut raw = false;
        let mut c = n.walk();
        let children: Vec<Node> = n.children(&mut c).collect();
        for ch in children {
            match ch.kind_of() {
                "string_start" => {
                    let prefix = self.text(ch).to_ascii_lowercase();
                    is_f = prefix.contains('f');
                    raw = prefix.contains('r');
                }
                "string_content" => {
                    let t = decode(self.text(ch), is_f, raw);
                    acc = acc.concat(&literal_with_metavariables(&t));
                }
                "interpolation" => acc = acc.concat(&self.interpolation(ch, env, depth)),
                _ => {}
            }
        }
        acc
    }

    fn interpolation(&self, n: Node<'s>, env: &Env, depth: usize) -> Sym {
        let mut expr: Option<Node> = None;
        let mut conv = None;
        let mut spec = String::new();
        let mut c = n.walk();
        for ch in n.named_children(&mut c) {
            match ch.kind_of() {
                "type_conversion" => conv = self.text(ch).chars().nth(1),
                "format_specifier" => {
                    spec = self.text(ch).trim_start_matches(':').to_string();
                }
                _ if expr.is_none() => expr = Some(ch),
                _ => {}
            }
        }
        let Some(e) = expr else { return Sym::lit("") };
        if conv.is_none()
            && spec.is_empty()
            && let Some(s) = self.string(e, env, depth)
        {
            return s;
        }
        Sym(vec![vec![Part::Field {
            expr: show_metavariables(self.text(e)),
            conv,
            spec,
        }]])
    }
}

/// A metavariable left in literal text (`$ACT={...}`) is filled in at `add` time: a field.
fn literal_with_metavariables(t: &str) -> Sym {
    let mut line: Line = Vec::new();
    let mut rest = t;
    while let Some(i) = rest.find("__mv_") {
        let Some(j) = rest[i + 5..].find("__") else {
            break;
        };
        line.push(Part::Lit(rest[..i].to_string()));
        line.push(Part::Field {
            expr: format!("${}", &rest[i + 5..i + 5 + j]),
            conv: None,
            spec: String::new(),
        });
        rest = &rest[i + 5 + j + 2..];
    }
    line.push(Part::Lit(rest.to_string()));
    Sym(vec![line])
}

/// A string literal's text as Python reads it: `{{`/`}}` in f-strings, escapes unless raw.
fn decode(t: &str, is_f: bool, raw: bool) -> String {
    let mut out = String::new();
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' | '}' if is_f && chars.peek() == Some(&c) => {
                chars.next();
                out.push(c);
            }
            '\\' if !raw => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('\\') => out.push('\\'),
                Some('\'') => out.push('\''),
                Some('"') => out.push('"'),
                Some('\n') => {}
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push('\\'),
            },
            _ => out.push(c),
        }
    }
    out
}

/// A line as people read it: fields in `⟨⟩`.
pub fn show(line: &Line) -> String {
    line.iter()
        .map(|p| match p {
            Part::Lit(s) => s.clone(),
            Part::Field { expr, conv, spec } => {
                let mut s = format!("⟨{expr}");
                if let Some(c) = conv {
                    s.push('!');
                    s.push(*c);
                }
                if !spec.is_empty() {
                    s.push(':');
                    s.push_str(spec);
                }
                s.push('⟩');
                s
            }
        })
        .collect()
}
