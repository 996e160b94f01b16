//! `test-rules`, for print declarations: every line a rule's template prints (found by
//! `fstring`) must be read by one of that rule's `[[rule.prints]]`, and every declaration
//! must read a line the template prints. Then each line is printed with sample values
//! as Python would format them (negative deltas after a literal `+`, large numbers,
//! paths with spaces), behind the prefixes launchers add, and read back by the same
//! scanner `instrument log` uses: every value must come back as printed, and the line
//! must read as this rule's print, not another's. A template whose print changes without
//! its declaration fails here.

use std::collections::BTreeMap;

use super::decl::{self, Catalog, Piece, Ty};
use super::fstring::{self, Line, Part};
use super::scan::{Scanner, Value, parse_value};
use crate::rules::RuleSet;

/// A rule whose prints and declarations disagree.
#[derive(Debug)]
pub struct Problem {
    pub rule: String,
    pub message: String,
}

/// What was checked.
#[derive(Debug, Default)]
pub struct Summary {
    /// Lines the templates print, and how many of them were read back.
    pub lines: usize,
    pub read_back: usize,
    /// Rules that print at least one line.
    pub rules: usize,
    pub declarations: usize,
    pub problems: Vec<Problem>,
}

/// Sample rounds per line; each uses other values and another prefix.
const ROUNDS: usize = 4;

/// What launchers put before a line, and what a progress bar leaves before a `\r`.
const PREFIXES: [&str; ROUNDS] = [
    "",
    "[default3]:",
    "14: ",
    "2024-05-02 14:06:55,120 INFO  45%|####      | 9/20\r",
];

pub fn check(set: &RuleSet) -> Result<Summary, decl::InvalidDeclaration> {
    let catalog = decl::compile(set)?;
    let lines = fstring::printed_lines(set);
    let by_rule = decl::entries_by_rule(&catalog);
    let scanner = Scanner::new(&catalog);
    let mut s = Summary {
        declarations: set.rules.iter().map(|r| r.prints.len()).sum(),
        ..Summary::default()
    };
    for (ri, rule) in set.rules.iter().enumerate() {
        let printed = lines.get(&ri).cloned().unwrap_or_default();
        let mine: Vec<usize> = by_rule.get(&rule.id).cloned().unwrap_or_default();
        if printed.is_empty() && mine.is_empty() {
            continue;
        }
        if !printed.is_empty() {
            s.rules += 1;
        }
        let mut used = vec![false; mine.len()];
        for line in &printed {
            s.lines += 1;
            let aligned: Vec<(usize, Vec<(usize, usize)>)> = mine
                .iter()
                .enumerate()
                .filter_map(|(k, &ei)| align(&catalog.entries[ei].pieces, line).map(|b| (k, b)))
                .collect();
            let problem = match aligned.as_slice() {
                [] => Some(format!(
                    "prints `{}`, which none of its [[rule.prints]] reads",
                    fstring::show(line)
                )),
                [(k, bounds)] => {
                    used[*k] = true;
                    round_trip(&catalog, &scanner, mine[*k], line, bounds)
                }
                many => Some(format!(
                    "prints `{}`, which {} of its [[rule.prints]] read alike: make them differ",
                    fstring::show(line),
                    many.len()
                )),
            };
            match problem {
                Some(message) => s.problems.push(Problem {
                    rule: rule.id.clone(),
                    message,
                }),
                None => s.read_back += 1,
            }
        }
        for (k, &ei) in mine.iter().enumerate() {
            if !used[k] {
                s.problems.push(Problem {
                    rule: rule.id.clone(),
                    message: format!(
                        "declares `{}`, which is not a line its template prints",
                        catalog.entries[ei].line
                    ),
                });
            }
        }
    }
    Ok(s)
}

/// A template line's skeleton: characters, and fields by index.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sk {
    C(char),
    F(usize),
}

fn skeleton(line: &Line) -> Vec<Sk> {
    let mut out = Vec::new();
    let mut k = 0;
    for p in line {
        match p {
            Part::Lit(s) => out.extend(s.chars().map(Sk::C)),
            Part::Field { .. } => {
                out.push(Sk::F(k));
                k += 1;
            }
        }
    }
    out
}

#[derive(Debug, Clone, Copy)]
enum Tok {
    C(char),
    Value(usize),
    Open(usize),
    Close(usize),
}

/// Match a declared format against a template line: literal text must be the same, each
/// declared value takes one or more characters or fields of the line. Returns each
/// declared field's bounds in the skeleton.
fn align(pieces: &[Piece], line: &Line) -> Option<Vec<(usize, usize)>> {
    let sk = skeleton(line);
    let mut toks = Vec::new();
    let mut nfields = 0;
    for p in pieces {
        match p {
            Piece::Lit(b) => toks.extend(String::from_utf8_lossy(b).chars().map(Tok::C)),
            Piece::Value(i) => {
                toks.push(Tok::Value(*i));
                nfields = nfields.max(i + 1);
            }
            Piece::Open(i) => {
                toks.push(Tok::Open(*i));
                nfields = nfields.max(i + 1);
            }
            Piece::Close(i) => toks.push(Tok::Close(*i)),
        }
    }
    let mut bounds = vec![(0, 0); nfields];
    let mut budget = 200_000u32;
    go(&toks, &sk, 0, 0, &mut bounds, &mut budget).then_some(bounds)
}

fn go(
    toks: &[Tok],
    sk: &[Sk],
    ti: usize,
    si: usize,
    bounds: &mut Vec<(usize, usize)>,
    budget: &mut u32,
) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    let Some(t) = toks.get(ti) else {
        return si == sk.len();
    };
    match *t {
        Tok::C(c) => sk.get(si) == Some(&Sk::C(c)) && go(toks, sk, ti + 1, si + 1, bounds, budget),
        Tok::Open(i) => {
            bounds[i].0 = si;
            go(toks, sk, ti + 1, si, bounds, budget)
        }
        Tok::Close(i) => {
            bounds[i].1 = si;
            go(toks, sk, ti + 1, si, bounds, budget)
        }
        Tok::Value(i) => {
            // A declared value reads one of the template's values (or literal text): one
            // that swallowed a second value would hide a value added to the print.
            let mut fields = 0;
            for end in si + 1..=sk.len() {
                if matches!(sk[end - 1], Sk::F(_)) {
                    fields += 1;
                    if fields > 1 {
                        break;
                    }
                }
                bounds[i] = (si, end);
                if go(toks, sk, ti + 1, end, bounds, budget) {
                    return true;
                }
            }
            false
        }
    }
}

/// Print the line with sample values, read it back, compare.
fn round_trip(
    catalog: &Catalog,
    scanner: &Scanner,
    entry: usize,
    line: &Line,
    bounds: &[(usize, usize)],
) -> Option<String> {
    let e = &catalog.entries[entry];
    let sk = skeleton(line);
    // The declared value each template field falls in (for fields without a format spec,
    // whose type only the declaration knows).
    let owner = |pos: usize| {
        e.fields
            .iter()
            .enumerate()
            .find(|(i, f)| !f.span && bounds[*i].0 <= pos && pos < bounds[*i].1)
            .map(|(i, _)| i)
    };
    let fields: Vec<(&Part, usize)> = {
        let mut v = Vec::new();
        let parts: Vec<&Part> = line
            .iter()
            .filter(|p| matches!(p, Part::Field { .. }))
            .collect();
        for (pos, s) in sk.iter().enumerate() {
            if let Sk::F(k) = s {
                v.push((parts[*k], pos));
            }
        }
        v
    };
    for (round, prefix) in PREFIXES.iter().enumerate() {
        // Render, noting where each skeleton element starts in the output.
        let mut text = String::new();
        let mut offset = Vec::with_capacity(sk.len() + 1);
        for (pos, s) in sk.iter().enumerate() {
            offset.push(text.len());
            match s {
                Sk::C(c) => text.push(*c),
                Sk::F(k) => {
                    let (part, _) = fields[*k];
                    let Part::Field { expr, conv, spec } = part else {
                        unreachable!()
                    };
                    let ty = owner(pos).map(|i| e.fields[i].ty).unwrap_or(Ty::Text);
                    text.push_str(&sample(spec, *conv, ty, round, expr));
                }
            }
        }
        offset.push(text.len());
        let mut expected: Vec<Value> = Vec::new();
        for (i, f) in e.fields.iter().enumerate() {
            let (a, b) = bounds[i];
            let t = &text[offset[a]..offset[b]];
            match parse_value(f.ty, t.as_bytes()) {
                Some(v) => expected.push(v),
                None => {
                    return Some(format!(
                        "prints `{text}`, where {{{}}} is `{t}`, which is not {} as declared",
                        f.name,
                        article(f.ty.name())
                    ));
                }
            }
        }
        let log = format!("{prefix}{text}\n");
        let mut got = Vec::new();
        let stats = scanner.scan(0, &mut log.as_bytes(), &mut |r| {
            got.push((r.entry, r.values.to_vec()))
        });
        let shown = log.trim_end_matches('\n').replace('\r', "\\r");
        let [record] = got.as_slice() else {
            let why = if stats.cut > 0 {
                "reads as a cut print"
            } else if got.is_empty() {
                "is not read as a print"
            } else {
                "reads as several prints"
            };
            return Some(format!("prints `{shown}`, which {why}"));
        };
        let (read_as, values) = record;
        if *read_as as usize != entry {
            return Some(format!(
                "prints `{shown}`, which reads as the print of {} (`{}`): the declarations overlap",
                catalog.entries[*read_as as usize].rules.join(", "),
                catalog.entries[*read_as as usize].line
            ));
        }
        for ((f, want), have) in e.fields.iter().zip(&expected).zip(values.iter()) {
            if want != have {
                return Some(format!(
                    "prints `{shown}`, which reads {{{}}} as `{}` where it printed `{}`",
                    f.name,
                    have.printed(),
                    want.printed()
                ));
            }
        }
    }
    None
}

/// Python's output for a field: from its format spec when that says the type, else a
/// value of the declared type.
fn sample(spec: &str, conv: Option<char>, ty: Ty, round: usize, expr: &str) -> String {
    if conv.is_none()
        && let Some(s) = from_spec(spec, round)
    {
        return s;
    }
    let base = match ty {
        Ty::Int => ["3", "14", "1023", "0"][round],
        Ty::Number | Ty::Bytes { .. } => ["0.5", "12.25", "1024.0", "0.0"][round],
        Ty::Word => ["stage3", "x_1", "torch.bfloat16", "a"][round],
        Ty::Text => ["a: b (c)", "some text", "x", "#1 of 2, [x]"][round],
        Ty::Path => ["/tmp/run 1/out", "/tmp", "rel/dir", "/a"][round],
        Ty::Shape => ["(4, 2048)", "(4,)", "()", "(1, 2, 3)"][round],
    }
    .to_string();
    let _ = expr;
    match conv {
        Some('r') => format!("'{base}'"),
        _ => base,
    }
}

/// Format a sample as Python would for a spec with a numeric type (`.2f`, `+.2f`, `d`,
/// `>8.1f`); None for specs that do not say.
fn from_spec(spec: &str, round: usize) -> Option<String> {
    if spec.is_empty() {
        return None;
    }
    let chars: Vec<char> = spec.chars().collect();
    let mut i = 0;
    let mut fill = ' ';
    let mut align = None;
    if chars.len() >= 2 && matches!(chars[1], '<' | '>' | '^' | '=') {
        fill = chars[0];
        align = Some(chars[1]);
        i = 2;
    } else if matches!(chars.first(), Some('<' | '>' | '^' | '=')) {
        align = Some(chars[0]);
        i = 1;
    }
    let mut sign = '-';
    if let Some(&c @ ('+' | '-' | ' ')) = chars.get(i) {
        sign = c;
        i += 1;
    }
    if chars.get(i) == Some(&'0') {
        fill = '0';
        align = align.or(Some('='));
        i += 1;
    }
    let mut width = 0usize;
    while let Some(d) = chars.get(i).and_then(|c| c.to_digit(10)) {
        width = width * 10 + d as usize;
        i += 1;
    }
    let grouping = matches!(chars.get(i), Some(',' | '_'));
    if grouping {
        i += 1;
    }
    let mut precision = None;
    if chars.get(i) == Some(&'.') {
        i += 1;
        let mut p = 0usize;
        while let Some(d) = chars.get(i).and_then(|c| c.to_digit(10)) {
            p = p * 10 + d as usize;
            i += 1;
        }
        precision = Some(p);
    }
    let ty = chars.get(i).copied();
    if i + ty.is_some() as usize != chars.len() {
        return None;
    }
    let body = match ty {
        Some('f' | 'F') => {
            let v: f64 = [0.08, -0.01, 1234.5678, 0.0][round];
            signed(
                format!("{:.*}", precision.unwrap_or(6), v.abs()),
                v < 0.0,
                sign,
            )
        }
        Some('%') => {
            let v: f64 = [0.08, -0.01, 12.5, 0.0][round] * 100.0;
            signed(
                format!("{:.*}%", precision.unwrap_or(6), v.abs()),
                v < 0.0,
                sign,
            )
        }
        Some('d' | 'n') => {
            let v: i64 = [3, -2, 1024, 0][round];
            let digits = if grouping {
                super::text::thousands(v.unsigned_abs())
            } else {
                v.abs().to_string()
            };
            signed(digits, v < 0, sign)
        }
        _ => return None,
    };
    let n = body.chars().count();
    if width <= n {
        return Some(body);
    }
    let pad: String = std::iter::repeat_n(fill, width - n).collect();
    Some(match align.unwrap_or('>') {
        '<' => format!("{body}{pad}"),
        '^' => {
            let left = (width - n) / 2;
            let l: String = std::iter::repeat_n(fill, left).collect();
            let r: String = std::iter::repeat_n(fill, width - n - left).collect();
            format!("{l}{body}{r}")
        }
        '=' => {
            let (s, rest) = match body.chars().next() {
                Some(c @ ('+' | '-' | ' ')) => (c.to_string(), body[1..].to_string()),
                _ => (String::new(), body.clone()),
            };
            format!("{s}{pad}{rest}")
        }
        _ => format!("{pad}{body}"),
    })
}

fn article(word: &str) -> String {
    let vowel = word.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {word}", if vowel { "an" } else { "a" })
}

fn signed(digits: String, negative: bool, sign: char) -> String {
    match (negative, sign) {
        (true, _) => format!("-{digits}"),
        (false, '+') => format!("+{digits}"),
        (false, ' ') => format!(" {digits}"),
        _ => digits,
    }
}

/// The checks, one line each, for `test-rules`.
pub fn report(s: &Summary) -> Vec<String> {
    let mut by_rule: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for p in &s.problems {
        by_rule.entry(&p.rule).or_default().push(&p.message);
    }
    by_rule
        .into_iter()
        .flat_map(|(rule, ms)| ms.into_iter().map(move |m| format!("FAIL {rule}: {m}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::load_with_prints;

    fn problems(edit: impl Fn(&mut RuleSet)) -> Vec<String> {
        let mut set = load_with_prints("memory-prints").unwrap();
        edit(&mut set);
        match check(&set) {
            Ok(s) => s
                .problems
                .into_iter()
                .map(|p| format!("{}: {}", p.rule, p.message))
                .collect(),
            Err(e) => vec![e.to_string()],
        }
    }

    fn rule<'a>(set: &'a mut RuleSet, id: &str) -> &'a mut crate::rules::Rule {
        set.rules.iter_mut().find(|r| r.id == id).unwrap()
    }

    #[test]
    fn the_shipped_declarations_read_back_every_print() {
        let set = load_with_prints("memory-prints").unwrap();
        let s = check(&set).unwrap();
        assert!(s.problems.is_empty(), "{:#?}", s.problems);
        assert!(s.lines >= 70 && s.read_back == s.lines, "{s:?}");
    }

    #[test]
    fn a_print_changed_without_its_declaration_fails() {
        // Reworded text.
        let p = problems(|s| {
            let r = rule(s, "4A.profiling-flag");
            r.template = r.template.replace("Before pipeline", "Before the pipeline");
        });
        assert!(
            p.iter()
                .any(|m| m.contains("none of its [[rule.prints]] reads")),
            "{p:?}"
        );
        assert!(
            p.iter()
                .any(|m| m.contains("is not a line its template prints")),
            "{p:?}"
        );
        // A value added (the size of a snapshot), in a helper another rule calls.
        let p = problems(|s| {
            let r = rule(s, "7.state");
            assert!(r.template.contains(":{path}\", flush=True)"));
            r.template = r.template.replace(
                ":{path}\", flush=True)",
                ":{path} ({_mib:.1f} MiB)\", flush=True)",
            );
        });
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p.iter().all(|m| m.starts_with("7.state: ")), "{p:?}");
        // A new line.
        let p = problems(|s| {
            let r = rule(s, "3.after-apply-fsdp");
            r.template
                .push_str("print(f\"[rank={rank}] memory snapshot not saved: {_why}\")\n");
        });
        assert_eq!(p.len(), 1, "{p:?}");
        // A value whose type the declaration gets wrong.
        let p = problems(|s| {
            let r = rule(s, "2B.mesh-after");
            r.prints[0].fields.insert("mesh".into(), "int".into());
        });
        assert!(p.iter().any(|m| m.contains("not an int")), "{p:?}");
        // Declarations of two rules that read the same line differently.
        let p = problems(|s| {
            let d = rule(s, "4E.step4-print").prints[0].clone();
            let r = rule(s, "4D.step3-before-b1");
            let mut d2 = d.clone();
            d2.label = Some("something else".into());
            r.prints.insert(0, d2);
        });
        assert!(
            p.iter().any(|m| m.contains("declarations overlap")),
            "{p:?}"
        );
    }

    #[test]
    fn python_format_specs() {
        assert_eq!(from_spec(".2f", 0).as_deref(), Some("0.08"));
        assert_eq!(from_spec("+.2f", 0).as_deref(), Some("+0.08"));
        assert_eq!(from_spec("+.2f", 1).as_deref(), Some("-0.01"));
        assert_eq!(from_spec(".1f", 2).as_deref(), Some("1234.6"));
        assert_eq!(from_spec(">8.2f", 0).as_deref(), Some("    0.08"));
        assert_eq!(from_spec("08.2f", 1).as_deref(), Some("-0000.01"));
        assert_eq!(from_spec(",d", 2).as_deref(), Some("1,024"));
        assert_eq!(from_spec(".1%", 0).as_deref(), Some("8.0%"));
        assert_eq!(from_spec("", 0), None);
        assert_eq!(from_spec("s", 0), None);
        assert_eq!(from_spec(".3g", 0), None);
    }

    #[test]
    fn alignment_lets_values_cover_fields_and_literal_text() {
        let f = |e: &str| Part::Field {
            expr: e.into(),
            conv: None,
            spec: String::new(),
        };
        let line = vec![
            Part::Lit("[rank=".into()),
            f("rank"),
            Part::Lit("] saved to ".into()),
            f("dir"),
            Part::Lit("/x.pickle".into()),
        ];
        let (pieces, _) = {
            let d = crate::rules::PrintDecl {
                kind: "file".into(),
                line: "[rank={rank}] saved to {path}".into(),
                label: Some("x".into()),
                fields: Default::default(),
                part: None,
                inherit: vec![],
                open: None,
                same_on_every_stage: false,
            };
            let e = decl::compile_one(&d, "r#1").unwrap();
            (e.pieces, e.fields)
        };
        let b = align(&pieces, &line).unwrap();
        assert_eq!(b[0], (6, 7));
        assert_eq!(b[1], (18, 28));
        // A literal that differs does not align.
        let other = vec![
            Part::Lit("[rank=".into()),
            f("rank"),
            Part::Lit("] kept at ".into()),
            f("dir"),
        ];
        assert!(align(&pieces, &other).is_none());
    }
}
