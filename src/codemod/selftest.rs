//! Rule self-tests: each example (an `[[example]]` of the set's `examples/<stem>.toml`, or
//! a `[[rule.examples]]` written inline) gives a snippet standing for the rule's target
//! file; the rule alone is planned on it and the output compared with the expected text
//! (marker hashes may be written `h=XXXXXXXX`), or the error with the expected fragment.
//! Every passing example must also strip back to its input.

use std::collections::BTreeMap;

use super::markers;
use super::plan::{self, PlanContext};
use crate::rules::{self, CompiledSet, Example, FunctionTarget, On, RuleSet, Target};

/// One example's outcome.
#[derive(Debug)]
pub struct ExampleResult {
    pub rule: String,
    pub index: usize,
    /// None when it passed; otherwise what went wrong.
    pub problem: Option<String>,
    /// The rule's output on the example (hashes masked), for writing `after`.
    pub output: String,
}

/// Replace every marker hash by `XXXXXXXX`, so expected outputs can be written by hand.
pub fn mask_hashes(text: &str) -> String {
    text.lines()
        .map(|l| match l.rfind(" h=") {
            Some(i)
                if l.len() == i + 11
                    && (l.trim_start().starts_with(markers::OPEN)
                        || l.contains(markers::INLINE)) =>
            {
                format!("{} h=XXXXXXXX", &l[..i])
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn first_difference(expected: &str, got: &str) -> String {
    let (e, g): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), got.lines().collect());
    for i in 0..e.len().max(g.len()) {
        let (a, b) = (e.get(i).copied(), g.get(i).copied());
        if a != b {
            return format!(
                "line {}: expected {:?}, got {:?}",
                i + 1,
                a.unwrap_or("<end>"),
                b.unwrap_or("<end>")
            );
        }
    }
    "outputs differ".into()
}

/// Why an example does not pass.
#[derive(Debug, thiserror::Error)]
enum Problem {
    #[error("an example of a per-target rule needs params.TARGET")]
    NoTarget,
    #[error(
        "role {role} is not in the example ({why}); write the class as a model file has it, or name it with roles = {{ {role} = \"...\" }}"
    )]
    RoleNotFound { role: String, why: String },
    #[error("{0}")]
    Rules(#[from] crate::rules::Error),
    #[error("expected an error containing {want:?}, got: {got}")]
    OtherError { want: String, got: String },
    #[error("expected an error containing {want:?}, but the rule applied")]
    Applied { want: String },
    #[error("the rule did not apply: {0}")]
    NotApplied(String),
    #[error("unexpected output ({0})")]
    Output(String),
    #[error("removing the rule's regions does not restore the input byte for byte")]
    NotRestored,
    #[error("the output's markers do not read back: {0}")]
    Markers(String),
}

fn run_example(
    set: &RuleSet,
    defaults: &BTreeMap<String, String>,
    index: usize,
    example: &Example,
) -> (Option<String>, String) {
    let mut output = String::new();
    let mut params = defaults.clone();
    params.extend(example.params.clone());
    let problem = instantiate(set, index, example, &params)
        .and_then(|rules| check_example(&rules, &params, example, &mut output));
    (problem.err().map(|p| p.to_string()), output)
}

/// Rule `index` of `set` alone, for its example: a rule written per target for the
/// example's TARGET (`Class.method` or `func`) in a file named after the rule; a rule
/// scoping into role classes with the classes of the example's snippet (a model file, its
/// roles found as `add` finds them, or named by the example); any other as written.
fn instantiate(
    set: &RuleSet,
    index: usize,
    example: &Example,
    params: &BTreeMap<String, String>,
) -> Result<CompiledSet, Problem> {
    let rule = &set.rules[index];
    let one = set.only(index);
    if rule.per.is_some() {
        let target = example.params.get("TARGET").ok_or(Problem::NoTarget)?;
        let (class, function) = match target.split_once('.') {
            Some((c, f)) => (Some(c.to_string()), f.to_string()),
            None => (None, target.clone()),
        };
        let targets = [FunctionTarget {
            file: "example.py".to_string(),
            class,
            function,
        }];
        let on = On::Functions(&targets);
        return Ok(rules::instantiate(&one, &Target { on, params })?);
    }
    let roles = crate::rules::models::roles_of(rule, set);
    let classes = if roles.is_empty() {
        BTreeMap::new()
    } else {
        classes_of(set, example, &roles)?
    };
    let model = rule.models.first().map_or("model", String::as_str);
    let on = On::AsWritten {
        model: Some(model),
        classes: &classes,
    };
    Ok(rules::instantiate(&one, &Target { on, params })?)
}

/// The classes of `roles` in the example's snippet.
fn classes_of(
    set: &RuleSet,
    example: &Example,
    roles: &[String],
) -> Result<BTreeMap<String, String>, Problem> {
    let mut spec = set
        .manifest
        .models
        .clone()
        .unwrap_or_else(|| crate::rules::ModelsSpec {
            dir: String::new(),
            exclude: Vec::new(),
            aliases: Default::default(),
            roles: Default::default(),
            known: Default::default(),
        });
    spec.known.insert(
        "example".into(),
        crate::rules::KnownModel {
            roles: example.roles.clone(),
            ..Default::default()
        },
    );
    let src = crate::python::Source::parse(example.before.clone());
    let found = super::roles::find(&src, "the example", "example", &spec);
    if let Some(role) = roles.iter().find(|r| !found.classes.contains_key(*r)) {
        let why = found
            .unplaced
            .get(role)
            .map_or_else(|| "not found".to_string(), |u| u.why.clone());
        return Err(Problem::RoleNotFound {
            role: role.clone(),
            why,
        });
    }
    Ok(found.classes)
}

/// Plan the one rule of `set` on the example's snippet and compare.
fn check_example(
    set: &CompiledSet,
    params: &BTreeMap<String, String>,
    example: &Example,
    output: &mut String,
) -> Result<(), Problem> {
    let rule = &set.rules[0];
    let first_party = set.manifest.first_party.clone();
    // Examples stand for files of the checkout the set is written for; they are laid out
    // for pithtrain's ruff settings (line length 100, double quotes).
    let style = crate::python::style::Style {
        line_length: 100,
        double_quotes: true,
    };
    let ctx = PlanContext {
        first_party: &first_party,
        rule_set: set,
        params,
        style: &style,
        blocked: &BTreeMap::new(),
    };
    let before = if example.before.ends_with('\n') {
        example.before.clone()
    } else {
        format!("{}\n", example.before)
    };
    let plan = plan::plan_file(&rule.file, &before, &[(0, rule)], &ctx);
    *output = mask_hashes(&plan.after);
    match (&example.error, plan.failures.first()) {
        (Some(want), Some(f)) => {
            let got = f.to_string();
            if got.contains(want.as_str()) {
                return Ok(());
            }
            return Err(Problem::OtherError {
                want: want.clone(),
                got,
            });
        }
        (Some(want), None) => return Err(Problem::Applied { want: want.clone() }),
        (None, Some(f)) => return Err(Problem::NotApplied(f.to_string())),
        (None, None) => {}
    }
    if let Some(after) = &example.after {
        let (want, got) = (
            mask_hashes(after.trim_end()),
            mask_hashes(plan.after.trim_end()),
        );
        if want != got {
            return Err(Problem::Output(first_difference(&want, &got)));
        }
    }
    match markers::strip(&plan.after, |_| true) {
        Ok((back, _)) if back == before => Ok(()),
        Ok(_) => Err(Problem::NotRestored),
        Err(e) => Err(Problem::Markers(e.to_string())),
    }
}

/// A group's rules in one rule file, none of which has examples.
#[derive(Debug, PartialEq)]
pub struct Untested {
    pub group: String,
    /// The rule file, as the set names it (`5-layer-forward.toml`).
    pub file: String,
    pub rules: usize,
}

/// Each group of `set`, file by file, whose rules there carry no example: a rule set
/// carries its tests, and a group split over files (a model's own rules beside the
/// shared ones) is tested in each, so `test-rules` fails on these.
pub fn groups_without_examples(set: &RuleSet) -> Vec<Untested> {
    let mut seen: Vec<(&str, &str, usize, bool)> = Vec::new();
    for (r, file) in set.rules.iter().zip(&set.rule_files) {
        let tested = !r.examples.is_empty();
        match seen
            .iter_mut()
            .find(|(g, f, _, _)| *g == r.group && *f == file.as_str())
        {
            Some(entry) => {
                entry.2 += 1;
                entry.3 |= tested;
            }
            None => seen.push((&r.group, file, 1, tested)),
        }
    }
    seen.into_iter()
        .filter(|(_, _, _, tested)| !tested)
        .map(|(group, file, rules, _)| Untested {
            group: group.to_string(),
            file: file.to_string(),
            rules,
        })
        .collect()
}

/// Run every example of every rule in `set`, with `defaults` for the parameters an
/// example does not set.
pub fn run_all(set: &RuleSet, defaults: &BTreeMap<String, String>) -> Vec<ExampleResult> {
    let mut out = Vec::new();
    for (index, rule) in set.rules.iter().enumerate() {
        for (i, example) in rule.examples.iter().enumerate() {
            let (problem, output) = run_example(set, defaults, index, example);
            out.push(ExampleResult {
                rule: rule.id.clone(),
                index: i + 1,
                problem,
                output,
            });
        }
    }
    out
}
