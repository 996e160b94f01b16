//! The print declarations of a rule set (`[[rule.prints]]`), compiled: each line format
//! split into literal text and typed values, each value with its unit and role. The reader
//! knows report concepts (a setup phase, a point of the schedule, memory allocated) and
//! nothing of the project whose prints these are: that lives in the rules.

use std::collections::BTreeMap;

use crate::rules::{PrintDecl, RuleSet};

/// What a printed line is, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A phase of setup (process group, model creation, checkpoint load).
    Setup,
    /// A point of the profiled step's schedule.
    Timeline,
    /// A probe inside a layer (or outside every layer when it names none).
    Layer,
    /// Opens a list of the tensors one layer stage saved for backward.
    SavedHeader,
    SavedActivation,
    SavedWeight,
    /// The totals closing that list.
    SavedTotal,
    /// A file the run wrote (a memory snapshot).
    File,
    /// A file the run meant to write and could not (with the reason).
    FileFailed,
    /// The rank ran out of memory (what it asked for, what was free).
    Oom,
    /// Which layers the rank prints layer detail for (or that it has none).
    DetailLayers,
    /// Something that went wrong or leaves the report short (nothing will be profiled).
    Warning,
    /// Anything else worth saying per rank.
    Note,
    /// The run's shape as the trainer labels it (`rank=3; pp=0/2 ...; mbs=1 seq=2048`): the
    /// rank's coordinates on the parallelism mesh and the sizes of the run (read by
    /// `crate::mesh`).
    Run,
}

impl Kind {
    pub const ALL: [(&'static str, Kind); 14] = [
        ("setup", Kind::Setup),
        ("timeline", Kind::Timeline),
        ("layer", Kind::Layer),
        ("saved-header", Kind::SavedHeader),
        ("saved-activation", Kind::SavedActivation),
        ("saved-weight", Kind::SavedWeight),
        ("saved-total", Kind::SavedTotal),
        ("file", Kind::File),
        ("file-failed", Kind::FileFailed),
        ("oom", Kind::Oom),
        ("detail-layers", Kind::DetailLayers),
        ("warning", Kind::Warning),
        ("note", Kind::Note),
        ("run", Kind::Run),
    ];

    pub fn name(self) -> &'static str {
        Kind::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.iter().find(|(n, _)| *n == s).map(|(_, k)| *k)
    }

    /// Kinds whose lines need a label (the others are named by their kind).
    fn needs_label(self) -> bool {
        matches!(
            self,
            Kind::Setup
                | Kind::Timeline
                | Kind::Layer
                | Kind::File
                | Kind::DetailLayers
                | Kind::Warning
                | Kind::Note
                | Kind::Run
        )
    }
}

/// What a value means to the report. Everything else is carried through as printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// The global rank that printed the line (every line has one).
    Rank,
    PpRank,
    /// Memory PyTorch's allocator has allocated.
    Allocated,
    /// Reserved by the caching allocator but not allocated.
    Cached,
    /// Device memory in use outside PyTorch's allocator (CUDA context, NCCL, ...).
    NonPytorch,
    /// A change of memory the line states itself.
    Delta,
    /// Memory a setup phase cost (its meaning names the item).
    Cost,
    Layer,
    Stage,
    /// Saved-tensor totals.
    Activations,
    Weights,
    Count,
    /// One saved tensor's size.
    Size,
    /// A file the run wrote.
    Path,
    Host,
    /// Why something failed, as printed.
    Reason,
    /// An allocation that failed: what it asked for, what was free, of how much.
    Requested,
    Free,
    Total,
    /// A list of layer numbers (`0, 1`): the layers given detail.
    Layers,
    /// The layers a rank holds, as printed (`0-1, 6-7`).
    Held,
    /// The run's shape, `key=value` fields (`pp=0/2 ... seq=2048`), as `crate::mesh` reads it.
    Run,
}

impl Role {
    pub const ALL: [(&'static str, Role); 22] = [
        ("rank", Role::Rank),
        ("pp_rank", Role::PpRank),
        ("allocated", Role::Allocated),
        ("cached", Role::Cached),
        ("non_pytorch", Role::NonPytorch),
        ("delta", Role::Delta),
        ("cost", Role::Cost),
        ("layer", Role::Layer),
        ("stage", Role::Stage),
        ("activations", Role::Activations),
        ("weights", Role::Weights),
        ("count", Role::Count),
        ("size", Role::Size),
        ("path", Role::Path),
        ("host", Role::Host),
        ("reason", Role::Reason),
        ("requested", Role::Requested),
        ("free", Role::Free),
        ("total", Role::Total),
        ("layers", Role::Layers),
        ("held", Role::Held),
        ("run", Role::Run),
    ];

    pub fn name(self) -> &'static str {
        Role::ALL
            .iter()
            .find(|(_, r)| *r == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.iter().find(|(n, _)| *n == s).map(|(_, r)| *r)
    }

    /// The type a value named after the role has when its spec does not say.
    fn default_type(self) -> Option<Ty> {
        match self {
            Role::Rank | Role::PpRank | Role::Layer | Role::Count => Some(Ty::Int),
            Role::Stage | Role::Host => Some(Ty::Word),
            Role::Path => Some(Ty::Path),
            Role::Reason | Role::Layers | Role::Held | Role::Run => Some(Ty::Text),
            _ => None,
        }
    }

    /// Roles whose values are amounts of memory.
    fn is_memory(self) -> bool {
        matches!(
            self,
            Role::Allocated
                | Role::Cached
                | Role::NonPytorch
                | Role::Delta
                | Role::Cost
                | Role::Activations
                | Role::Weights
                | Role::Size
                | Role::Requested
                | Role::Free
                | Role::Total
        )
    }
}

/// How a value is written, and so how much of the line it takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ty {
    /// `-?[0-9]+`.
    Int,
    /// A decimal number without a unit.
    Number,
    /// A decimal number of `factor` bytes each (`unit` is how the rules name it).
    Bytes { factor: f64, unit: &'static str },
    /// A run of non-space characters.
    Word,
    /// Any text (up to where the rest of the line matches).
    Text,
    /// A file path (any text).
    Path,
    /// A tuple of integers as Python prints one: `(4, 2048)`, `(4,)`, `()`.
    Shape,
}

pub const UNITS: [(&str, f64); 9] = [
    ("B", 1.0),
    ("KiB", 1024.0),
    ("MiB", 1048576.0),
    ("GiB", 1073741824.0),
    ("TiB", 1099511627776.0),
    ("KB", 1e3),
    ("MB", 1e6),
    ("GB", 1e9),
    ("TB", 1e12),
];

impl Ty {
    fn parse(s: &str) -> Option<Ty> {
        if let Some((unit, factor)) = UNITS.iter().find(|(u, _)| *u == s) {
            return Some(Ty::Bytes {
                factor: *factor,
                unit,
            });
        }
        Some(match s {
            "int" => Ty::Int,
            "number" => Ty::Number,
            "word" => Ty::Word,
            "text" => Ty::Text,
            "path" => Ty::Path,
            "shape" => Ty::Shape,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Ty::Int => "int",
            Ty::Number => "number",
            Ty::Bytes { unit, .. } => unit,
            Ty::Word => "word",
            Ty::Text => "text",
            Ty::Path => "path",
            Ty::Shape => "shape",
        }
    }
}

/// One value of a line format.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub ty: Ty,
    pub role: Option<Role>,
    pub meaning: Option<String>,
    /// A `{name=...}` span: its value is the text of everything inside.
    pub span: bool,
}

/// A line format, in order: literal bytes, values (by index into `fields`), and the
/// bounds of spans.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Lit(Vec<u8>),
    Value(usize),
    Open(usize),
    Close(usize),
}

/// One declared line format (several rules declaring the same line with the same meaning
/// share one entry).
#[derive(Debug, Clone)]
pub struct Entry {
    /// `rule-id#n` of every declaration this entry stands for.
    pub rules: Vec<String>,
    pub kind: Kind,
    pub label: Option<String>,
    pub line: String,
    pub pieces: Vec<Piece>,
    pub fields: Vec<Field>,
    pub part: Option<String>,
    pub inherit: Vec<Role>,
    pub open: Option<String>,
    /// The costs it states are alike on every pipeline stage (compared across all ranks).
    pub same_on_every_stage: bool,
    /// The fields the label names (what tells two lines of this format apart).
    pub label_fields: Vec<usize>,
}

impl Entry {
    /// The index of the first field with `role`.
    pub fn field_with(&self, role: Role) -> Option<usize> {
        self.fields.iter().position(|f| f.role == Some(role))
    }

    /// Same format and same meaning (the rules aside).
    fn same_as(&self, other: &Entry) -> bool {
        self.kind == other.kind
            && self.label == other.label
            && self.pieces == other.pieces
            && self.fields == other.fields
            && self.part == other.part
            && self.inherit == other.inherit
            && self.open == other.open
            && self.same_on_every_stage == other.same_on_every_stage
    }
}

/// Every declared line format of a rule set.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub entries: Vec<Entry>,
    /// Where the declarations came from, for messages.
    pub origin: String,
}

/// Compile the declarations of every rule in `set`. Errors name the rule file, rule and
/// declaration.
pub fn compile(set: &RuleSet) -> Result<Catalog, InvalidDeclaration> {
    let mut catalog = Catalog {
        entries: Vec::new(),
        origin: set.origin.clone(),
    };
    for (rule, file) in set.rules.iter().zip(&set.rule_files) {
        for (i, d) in rule.prints.iter().enumerate() {
            let id = format!("{}#{}", rule.id, i + 1);
            let entry = compile_one(d, &id).map_err(|why| InvalidDeclaration {
                origin: set.origin.clone(),
                file: file.clone(),
                rule: rule.id.clone(),
                print: i + 1,
                why,
            })?;
            match catalog.entries.iter_mut().find(|e| e.same_as(&entry)) {
                Some(e) => e.rules.push(id),
                None => catalog.entries.push(entry),
            }
        }
    }
    Ok(catalog)
}

/// Why one print declaration does not compile (said after the rule and print it is).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct DeclError(String);

impl From<String> for DeclError {
    fn from(why: String) -> DeclError {
        DeclError(why)
    }
}

/// A print declaration of a rule set that does not compile: the rule set is the user's to fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{origin}/{file}: rule {rule} print {print}: {why}")]
pub struct InvalidDeclaration {
    /// The rule set's origin (its folder, or the built-in set's name).
    pub origin: String,
    /// The rule file, relative to the origin.
    pub file: String,
    pub rule: String,
    /// The declaration's number in the rule, from 1.
    pub print: usize,
    pub why: DeclError,
}

crate::exit::user_errors!(InvalidDeclaration);

/// Compile one declaration (`id` names it in the entry).
pub fn compile_one(d: &PrintDecl, id: &str) -> Result<Entry, DeclError> {
    let kind = Kind::parse(&d.kind).ok_or_else(|| {
        format!(
            "kind {:?} is not one of {}",
            d.kind,
            Kind::ALL.map(|(n, _)| n).join(", ")
        )
    })?;
    if kind.needs_label() && d.label.is_none() {
        return Err(DeclError(format!(
            "a `{}` print needs a label",
            kind.name()
        )));
    }
    let (pieces, names) = parse_line(&d.line)?;
    match pieces.first() {
        Some(Piece::Lit(l)) if l.len() >= 2 => {}
        _ => {
            return Err(DeclError(
                "the line must begin with literal text (two characters or more), so that it is found behind any prefix".into(),
            ));
        }
    }
    let mut fields = Vec::new();
    for (name, span) in &names {
        fields.push(field(name, *span, d.fields.get(name))?);
    }
    for name in d.fields.keys() {
        if !names.iter().any(|(n, _)| n == name) {
            return Err(DeclError(format!("fields.{name} is not in the line")));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for (n, _) in &names {
        if !seen.insert(n) {
            return Err(DeclError(format!("{{{n}}} appears twice in the line")));
        }
    }
    for w in pieces.windows(2) {
        if let [Piece::Value(a), Piece::Value(b)] = w {
            return Err(DeclError(format!(
                "{{{}}} and {{{}}} touch: a value must be followed by literal text or the end",
                fields[*a].name, fields[*b].name
            )));
        }
    }
    if !fields.iter().any(|f| f.role == Some(Role::Rank)) {
        return Err(DeclError(
            "the line has no value with role `rank` (e.g. `[rank={rank}]`)".into(),
        ));
    }
    let inherit = d
        .inherit
        .iter()
        .map(|r| Role::parse(r).ok_or_else(|| format!("inherit: unknown role {r:?}")))
        .collect::<Result<Vec<_>, _>>()?;
    for text in [&d.label, &d.open].into_iter().flatten() {
        for name in placeholders(text) {
            if !names.iter().any(|(n, _)| *n == name) {
                return Err(DeclError(format!(
                    "{{{name}}} in {text:?} is not a value of the line"
                )));
            }
        }
    }
    check_kind_roles(kind, &fields, &inherit)?;
    let label_fields = d
        .label
        .as_deref()
        .map(placeholders)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| names.iter().position(|(x, _)| x == n))
        .collect();
    Ok(Entry {
        label_fields,
        rules: vec![id.to_string()],
        kind,
        label: d.label.clone(),
        line: d.line.clone(),
        pieces,
        fields,
        part: d.part.clone(),
        inherit,
        open: d.open.clone(),
        same_on_every_stage: d.same_on_every_stage,
    })
}

/// The roles each kind relies on must be there (declared or inherited).
fn check_kind_roles(kind: Kind, fields: &[Field], inherit: &[Role]) -> Result<(), DeclError> {
    let has = |r: Role| fields.iter().any(|f| f.role == Some(r)) || inherit.contains(&r);
    let need: &[Role] = match kind {
        Kind::Timeline => &[Role::Allocated],
        Kind::Layer => &[Role::Allocated],
        Kind::SavedActivation | Kind::SavedWeight => &[Role::Size],
        Kind::SavedTotal => &[Role::Activations, Role::Weights],
        Kind::File | Kind::FileFailed => &[Role::Path],
        Kind::Oom => &[Role::Requested],
        Kind::Run => &[Role::Run],
        _ => &[],
    };
    for r in need {
        if !has(*r) {
            return Err(DeclError(format!(
                "a `{}` print needs a value with role `{}`",
                kind.name(),
                r.name()
            )));
        }
    }
    Ok(())
}

fn field(name: &str, span: bool, spec: Option<&String>) -> Result<Field, DeclError> {
    let implied = Role::parse(name);
    let Some(spec) = spec else {
        let ty = if span {
            Some(implied.and_then(Role::default_type).unwrap_or(Ty::Text))
        } else {
            implied.and_then(Role::default_type)
        };
        return match ty {
            Some(ty) => Ok(Field {
                name: name.into(),
                ty,
                role: implied,
                meaning: None,
                span,
            }),
            None => Err(DeclError(format!(
                "{{{name}}} needs a type: fields.{name} = \"GiB\" (or int, number, word, text, path, shape, B, KiB, MiB, KB, MB, GB)"
            ))),
        };
    };
    let (head, meaning) = match spec.split_once(':') {
        Some((h, m)) => (
            h.trim(),
            Some(m.trim().to_string()).filter(|m| !m.is_empty()),
        ),
        None => (spec.trim(), None),
    };
    let mut words = head.split_whitespace();
    let ty_word = words
        .next()
        .ok_or_else(|| format!("fields.{name} is empty"))?;
    let ty = Ty::parse(ty_word).ok_or_else(|| {
        format!(
            "fields.{name}: unknown type {ty_word:?} (int, number, word, text, path, shape, or a unit: {})",
            UNITS.map(|(u, _)| u).join(", ")
        )
    })?;
    let role = match words.next() {
        Some(w) => {
            Some(Role::parse(w).ok_or_else(|| format!("fields.{name}: unknown role {w:?}"))?)
        }
        None => implied,
    };
    if let Some(extra) = words.next() {
        return Err(DeclError(format!(
            "fields.{name}: {extra:?} after the role; write the meaning after a colon"
        )));
    }
    if let Some(r) = role
        && r.is_memory()
        && !matches!(ty, Ty::Bytes { .. })
    {
        return Err(DeclError(format!(
            "fields.{name}: role `{}` is an amount of memory; give its unit (GiB, MiB, ...)",
            r.name()
        )));
    }
    Ok(Field {
        name: name.into(),
        ty,
        role,
        meaning,
        span,
    })
}

/// `{name}` placeholders of a label or command.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        match after.find('}') {
            Some(j) => {
                out.push(after[..j].to_string());
                rest = &after[j + 1..];
            }
            None => break,
        }
    }
    out
}

/// Split a declared line into pieces; returns the value names in order, with whether each
/// is a span. `{{` and `}}` stand for literal braces.
/// Value names in order of appearance, each with whether it is a span.
type Names = Vec<(String, bool)>;

fn parse_line(line: &str) -> Result<(Vec<Piece>, Names), DeclError> {
    let bytes = line.as_bytes();
    let mut pieces: Vec<Piece> = Vec::new();
    let mut names: Names = Vec::new();
    let mut lit: Vec<u8> = Vec::new();
    // Open spans: the index of their field.
    let mut open: Vec<usize> = Vec::new();
    let mut i = 0;
    let flush = |lit: &mut Vec<u8>, pieces: &mut Vec<Piece>| {
        if !lit.is_empty() {
            pieces.push(Piece::Lit(std::mem::take(lit)));
        }
    };
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'{' && bytes.get(i + 1) == Some(&b'{') {
            lit.push(b'{');
            i += 2;
        } else if c == b'}' && bytes.get(i + 1) == Some(&b'}') && open.is_empty() {
            lit.push(b'}');
            i += 2;
        } else if c == b'{' {
            let rest = &line[i + 1..];
            let end = rest
                .find(['}', '='])
                .ok_or_else(|| format!("unclosed {{ at column {}", i + 1))?;
            let name = &rest[..end];
            if name.is_empty()
                || !name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
            {
                return Err(DeclError(format!(
                    "{{{name}}} at column {}: a name is letters, digits and _",
                    i + 1
                )));
            }
            flush(&mut lit, &mut pieces);
            let idx = names.len();
            if rest.as_bytes()[end] == b'=' {
                names.push((name.to_string(), true));
                pieces.push(Piece::Open(idx));
                open.push(idx);
            } else {
                names.push((name.to_string(), false));
                pieces.push(Piece::Value(idx));
            }
            i += 1 + end + 1;
        } else if c == b'}' {
            let idx = open.pop().ok_or_else(|| {
                format!("unmatched }} at column {} (write }}}} for a brace)", i + 1)
            })?;
            flush(&mut lit, &mut pieces);
            pieces.push(Piece::Close(idx));
            i += 1;
        } else {
            lit.push(c);
            i += 1;
        }
    }
    if let Some(idx) = open.pop() {
        return Err(DeclError(format!(
            "the span {{{}=...}} is not closed",
            names[idx].0
        )));
    }
    flush(&mut lit, &mut pieces);
    Ok((pieces, names))
}

/// The declarations' rule ids per rule, for `test-rules` (rule id -> entry indices).
pub fn entries_by_rule(catalog: &Catalog) -> BTreeMap<String, Vec<usize>> {
    let mut map: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, e) in catalog.entries.iter().enumerate() {
        for r in &e.rules {
            let rule = r.rsplit_once('#').map(|(a, _)| a).unwrap_or(r);
            map.entry(rule.to_string()).or_default().push(i);
        }
    }
    map
}

/// A declaration for the tests of the reader's modules.
#[cfg(test)]
pub(crate) fn test_decl(kind: &str, line: &str, label: &str, fields: &[(&str, &str)]) -> PrintDecl {
    PrintDecl {
        kind: kind.into(),
        line: line.into(),
        label: Some(label.into()),
        fields: fields
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect(),
        part: None,
        inherit: vec![],
        open: None,
        same_on_every_stage: false,
    }
}

/// A catalog of one-rule declarations, for tests.
#[cfg(test)]
pub(crate) fn test_catalog(decls: &[PrintDecl]) -> Catalog {
    Catalog {
        entries: decls
            .iter()
            .enumerate()
            .map(|(i, d)| compile_one(d, &format!("r{i}#1")).unwrap())
            .collect(),
        origin: "test".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(kind: &str, line: &str, fields: &[(&str, &str)]) -> PrintDecl {
        test_decl(kind, line, "x", fields)
    }

    #[test]
    fn splits_literals_values_and_spans() {
        let d = decl(
            "file",
            "[rank={rank}] saved to {path={dir}/snap{n}.pickle} ok {{x}}",
            &[("dir", "path"), ("n", "int")],
        );
        let e = compile_one(&d, "r#1").unwrap();
        assert_eq!(
            e.pieces,
            vec![
                Piece::Lit(b"[rank=".to_vec()),
                Piece::Value(0),
                Piece::Lit(b"] saved to ".to_vec()),
                Piece::Open(1),
                Piece::Value(2),
                Piece::Lit(b"/snap".to_vec()),
                Piece::Value(3),
                Piece::Lit(b".pickle".to_vec()),
                Piece::Close(1),
                Piece::Lit(b" ok {x}".to_vec()),
            ]
        );
        assert_eq!(e.fields[1].role, Some(Role::Path));
        assert!(e.fields[1].span);
        assert_eq!(e.fields[0].ty, Ty::Int);
    }

    #[test]
    fn specs_give_type_role_and_meaning() {
        let d = decl(
            "setup",
            "[rank={rank}] x={cuda} y={alloc}",
            &[
                ("cuda", "GiB cost: CUDA context"),
                ("alloc", "GiB allocated"),
            ],
        );
        let e = compile_one(&d, "r#1").unwrap();
        assert_eq!(e.fields[1].role, Some(Role::Cost));
        assert_eq!(e.fields[1].meaning.as_deref(), Some("CUDA context"));
        assert_eq!(e.fields[2].role, Some(Role::Allocated));
        assert!(matches!(e.fields[2].ty, Ty::Bytes { unit: "GiB", .. }));
    }

    #[test]
    fn bad_declarations_say_what_is_wrong() {
        let cases = [
            (decl("setup", "[rank={rank}] {a}", &[]), "needs a type"),
            (decl("bogus", "[rank={rank}]", &[]), "kind \"bogus\""),
            (decl("setup", "{rank} x", &[]), "begin with literal text"),
            (decl("setup", "[x] {a}", &[("a", "int")]), "role `rank`"),
            (
                decl("setup", "[rank={rank}] {a}", &[("a", "int allocated")]),
                "give its unit",
            ),
            (
                decl(
                    "setup",
                    "[rank={rank}] {a}{b}",
                    &[("a", "int"), ("b", "int")],
                ),
                "touch",
            ),
            (
                decl("setup", "[rank={rank}] a", &[("b", "int")]),
                "not in the line",
            ),
            (decl("timeline", "[rank={rank}] a", &[]), "role `allocated`"),
            (decl("setup", "[rank={rank}] {a", &[]), "unclosed"),
        ];
        for (d, want) in cases {
            let e = compile_one(&d, "r#1").unwrap_err();
            assert!(e.to_string().contains(want), "{e} lacks {want:?}");
        }
    }
}
