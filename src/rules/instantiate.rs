//! From a loaded rule set to the rules one target gets: which rules, in what order and
//! under what ids (a model's own order, functions' expansions), every placeholder filled
//! in (`{MODEL}`, the role classes, `{FILE}`/`{FUNCTION}`/`{NAME}`/`{CLASS_SCOPE}`, the
//! parameters' values), then every pattern and template compiled. The one place rules are
//! substituted: what comes out (`CompiledSet`) is final.

use std::collections::{BTreeMap, BTreeSet};

use super::compiled::{CompiledRule, CompiledSet, RulePatterns};
use super::error::Error;
use super::set::tagged_id;
use super::template::{Template, fill};
use super::{Anchor, Occurrence, Per, Rule, RuleSet};
use crate::python::pattern::Pattern;

/// What a rule set is instantiated for.
pub struct Target<'a> {
    pub on: On<'a>,
    /// Each parameter's value as a Python literal (`RANKS` -> `{3, 14}`).
    pub params: &'a BTreeMap<String, String>,
}

/// What the rules are applied to.
pub enum On<'a> {
    /// Every rule as written (ids and order kept): `{MODEL}` and the role classes given
    /// here filled in, any other placeholder of a pattern standing for a name that matches
    /// nothing. With no model and no classes: the whole set, to check that it compiles
    /// (`rules`, `test-rules`); with them: one rule, as its examples test it.
    AsWritten {
        model: Option<&'a str>,
        classes: &'a BTreeMap<String, String>,
    },
    /// The checkout as a whole (a rule set without models): the rules for no model.
    Checkout,
    /// One model (a file stem) and the classes of its roles: its rules in their order,
    /// with the ids the markers write.
    Model {
        name: &'a str,
        classes: &'a BTreeMap<String, String>,
    },
    /// Selected functions, for a rule set whose rules are written per target: per-file
    /// rules once for each file holding one (first), per-function rules for each, in order.
    Functions(&'a [FunctionTarget]),
}

/// A selected function, as the expansion needs it.
#[derive(Debug, Clone)]
pub struct FunctionTarget {
    /// The file, relative to the root.
    pub file: String,
    pub class: Option<String>,
    pub function: String,
}

impl FunctionTarget {
    /// `Class.method` or `func`.
    pub fn name(&self) -> String {
        match &self.class {
            Some(c) => format!("{c}.{}", self.function),
            None => self.function.clone(),
        }
    }
}

/// A rule for one target, every placeholder filled in, nothing compiled yet.
struct Instantiated<'r> {
    rule: &'r Rule,
    rule_file: &'r str,
    id: String,
    file: String,
    scope: Vec<String>,
    anchor: Vec<String>,
    following: Option<String>,
    contains: Option<String>,
    capture: Vec<String>,
    template: String,
}

/// What a placeholder of a pattern stands for when no value is given: a name no class or
/// function has, so that the pattern compiles (and matches nothing).
fn stand_in(name: &str) -> String {
    format!("_instrument_role_{name}")
}

/// `rule` with the placeholders `value` knows filled in everywhere; in its patterns, the
/// others stand for names that match nothing. A `{CLASS_SCOPE}` scope entry is the given
/// class's header, or nothing for a module-level function.
fn instantiate_rule<'r>(
    rule: &'r Rule,
    rule_file: &'r str,
    id: String,
    value: &dyn Fn(&str) -> Option<String>,
    class_scope: Option<Option<&str>>,
) -> Instantiated<'r> {
    let pattern = |text: &str| fill(text, &|n: &str| value(n).or_else(|| Some(stand_in(n))));
    let scope = rule
        .scope
        .iter()
        .filter_map(|s| match (s.as_str(), class_scope) {
            ("{CLASS_SCOPE}", Some(Some(class))) => Some(format!("class {class}")),
            ("{CLASS_SCOPE}", Some(None)) => None,
            _ => Some(pattern(s)),
        })
        .collect();
    let anchor = match &rule.anchor {
        None => Vec::new(),
        Some(Anchor::One(p)) => vec![pattern(p)],
        Some(Anchor::Any(ps)) => ps.iter().map(|p| pattern(p)).collect(),
    };
    Instantiated {
        rule,
        rule_file,
        id,
        file: fill(&rule.file, value),
        scope,
        anchor,
        following: rule.following.as_deref().map(pattern),
        contains: rule.contains.as_deref().map(pattern),
        capture: rule.capture.iter().map(|p| pattern(p)).collect(),
        template: fill(&rule.template, value),
    }
}

impl Instantiated<'_> {
    /// Compile the patterns and the template (with `params`).
    fn compile(
        self,
        origin: &str,
        params: &BTreeMap<String, String>,
    ) -> Result<CompiledRule, Error> {
        let at = || format!("{origin}/{}: rule {}", self.rule_file, self.id);
        let one =
            |p: &String| Pattern::compile(p).map_err(|source| Error::Pattern { at: at(), source });
        let patterns = RulePatterns {
            scope: self.scope.iter().map(one).collect::<Result<_, _>>()?,
            anchor: self.anchor.iter().map(one).collect::<Result<_, _>>()?,
            following: self.following.as_ref().map(one).transpose()?,
            contains: self.contains.as_ref().map(one).transpose()?,
            capture: self.capture.iter().map(one).collect::<Result<_, _>>()?,
        };
        let rule = self.rule;
        Ok(CompiledRule {
            id: self.id,
            group: rule.group.clone(),
            file: self.file,
            position: rule.position,
            occurrence: if rule.following.is_some() {
                Occurrence::First
            } else {
                rule.occurrence
            },
            anchor: (!self.anchor.is_empty()).then(|| self.anchor.join(" or ")),
            patterns,
            template: Template::compile(&self.template, params),
            imports: rule.imports.clone(),
            rule_file: self.rule_file.to_string(),
        })
    }
}

/// Every rule of `set` as written, compiled: what `rules` and `test-rules` review (a
/// pattern that is not Python is refused here as `add` would refuse it).
pub fn review(set: &RuleSet) -> Result<CompiledSet, Error> {
    let none = BTreeMap::new();
    let on = On::AsWritten {
        model: None,
        classes: &none,
    };
    instantiate(set, &Target { on, params: &none })
}

/// The rules of `set` for `target`, every placeholder filled in and compiled.
pub fn instantiate(set: &RuleSet, target: &Target) -> Result<CompiledSet, Error> {
    let file_of = |i: usize| set.rule_files[i].as_str();
    // Rule `i` under its own id, its placeholders filled by `value`.
    let own = |i: usize, value: &dyn Fn(&str) -> Option<String>| {
        let rule = &set.rules[i];
        instantiate_rule(rule, file_of(i), rule.id.clone(), value, None)
    };
    let none = |_: &str| None;
    let mut rules: Vec<Instantiated> = Vec::new();
    let mut unplaced = BTreeMap::new();
    match &target.on {
        On::AsWritten { model, classes } => {
            let value = |n: &str| match n {
                "MODEL" => model.map(str::to_string),
                _ => classes.get(n).cloned(),
            };
            rules.extend((0..set.rules.len()).map(|i| own(i, &value)));
        }
        On::Checkout => {
            let applies = |i: &usize| set.rules[*i].applies_to(None);
            rules.extend((0..set.rules.len()).filter(applies).map(|i| own(i, &none)));
        }
        On::Model { name, classes } => {
            let tag = set
                .manifest
                .models
                .as_ref()
                .map(|m| m.id_tag(name))
                .unwrap_or_default();
            let value = |n: &str| match n {
                "MODEL" => Some(name.to_string()),
                _ => classes.get(n).cloned(),
            };
            for (k, i) in super::models::order(set, name)?.into_iter().enumerate() {
                let rule = &set.rules[i];
                // The rules of the model's own file carry its tag; the rules of files every
                // model shares keep their ids.
                let id = if rule.models.is_empty() && rule.file.contains("{MODEL}") {
                    tagged_id(&rule.id, &tag)
                } else {
                    rule.id.clone()
                };
                let roles = super::models::roles_of(rule, set);
                if let Some(missing) = roles.iter().find(|r| !classes.contains_key(*r)) {
                    unplaced.insert(k, missing.clone());
                }
                rules.push(instantiate_rule(rule, file_of(i), id, &value, None));
            }
        }
        On::Functions(targets) => {
            let files: BTreeSet<&str> = targets.iter().map(|t| t.file.as_str()).collect();
            for (i, rule) in set.rules.iter().enumerate() {
                match rule.per {
                    Some(Per::File) => {
                        for f in &files {
                            rules.push(own(i, &|n: &str| (n == "FILE").then(|| f.to_string())));
                        }
                    }
                    Some(Per::Function) => {
                        for t in targets.iter() {
                            let value = |n: &str| match n {
                                "FILE" => Some(t.file.clone()),
                                "FUNCTION" => Some(t.function.clone()),
                                "NAME" => Some(t.name()),
                                _ => None,
                            };
                            let id = format!("{}.{}", rule.id, t.name());
                            let class = Some(t.class.as_deref());
                            rules.push(instantiate_rule(rule, file_of(i), id, &value, class));
                        }
                    }
                    None if rule.applies_to(None) => rules.push(own(i, &none)),
                    None => {}
                }
            }
        }
    }
    let rules = rules
        .into_iter()
        .map(|r| r.compile(&set.origin, target.params))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CompiledSet {
        manifest: set.manifest.clone(),
        origin: set.origin.clone(),
        rules,
        unplaced,
    })
}

/// The rule of `set` a marker's rule id was instantiated from: the id itself (a rule
/// under its own id, an override with one), a function's instance (`<id>.<Class.function>`
/// of a `per = "function"` rule), or a model's tagged instance (`5B.qwen35-moe.flags` of
/// `5B.flags`, a rule of the file every model has). The inverse of the ids `instantiate`
/// gives, for what reads markers back (`status`); none for an id the set never gives.
pub fn rule_of_marker<'s>(set: &'s RuleSet, id: &str) -> Option<&'s Rule> {
    if let Some(rule) = set.rules.iter().find(|r| r.id == id) {
        return Some(rule);
    }
    let per_function = |r: &&Rule| {
        r.per == Some(Per::Function)
            && id
                .strip_prefix(r.id.as_str())
                .is_some_and(|rest| rest.len() > 1 && rest.starts_with('.'))
    };
    if let Some(rule) = set.rules.iter().find(per_function) {
        return Some(rule);
    }
    // `tagged_id` puts the tag after the group part, or after a dotless id.
    let (group, rest) = id.split_once('.')?;
    let base = match rest.split_once('.') {
        Some((_tag, rest)) => format!("{group}.{rest}"),
        None => group.to_string(),
    };
    set.rules
        .iter()
        .find(|r| r.id == base && r.models.is_empty() && r.file.contains("{MODEL}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ruleset: &str, rules: &str) -> RuleSet {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ruleset.toml"), ruleset).unwrap();
        std::fs::write(dir.path().join("rules.toml"), rules).unwrap();
        crate::rules::load(&dir.path().display().to_string()).unwrap()
    }

    const FUNCTIONS: &str =
        "name = \"t\"\ndescription = \"t\"\nsource_dir = \".\"\ntargets = \"functions\"\n";

    /// Per-target rules: the per-file rule once for each file (sorted), then the
    /// per-function rule for each function, its id, file, class scope and template filled.
    #[test]
    fn functions_expand_per_file_then_per_function() {
        let set = set(
            FUNCTIONS,
            r#"
[[rule]]
id = "h"
group = "g"
per = "file"
file = "{FILE}"
summary = "s"
anchor = "def $_"
occurrence = "first"
position = "before"
template = "x = 1\n"

[[rule]]
id = "r"
group = "g"
per = "function"
file = "{FILE}"
summary = "around {NAME}"
scope = ["{CLASS_SCOPE}"]
anchor = "def {FUNCTION}"
position = "before"
template = "@d(\"{NAME}\")\n"
"#,
        );
        let targets = [
            FunctionTarget {
                file: "b.py".into(),
                class: Some("A".into()),
                function: "f".into(),
            },
            FunctionTarget {
                file: "a.py".into(),
                class: None,
                function: "g".into(),
            },
        ];
        let params = BTreeMap::new();
        let c = instantiate(
            &set,
            &Target {
                on: On::Functions(&targets),
                params: &params,
            },
        )
        .unwrap();
        type Row = (String, String, Vec<String>, Option<String>, String);
        let got: Vec<Row> = c
            .rules
            .iter()
            .map(|r| {
                (
                    r.id.clone(),
                    r.file.clone(),
                    r.patterns.scope.iter().map(|p| p.text.clone()).collect(),
                    r.anchor.clone(),
                    r.template.written.clone(),
                )
            })
            .collect();
        let s = |x: &str| x.to_string();
        assert_eq!(
            got,
            vec![
                (s("h"), s("a.py"), vec![], Some(s("def $_")), s("x = 1\n")),
                (s("h"), s("b.py"), vec![], Some(s("def $_")), s("x = 1\n")),
                (
                    s("r.A.f"),
                    s("b.py"),
                    vec![s("class A")],
                    Some(s("def f")),
                    s("@d(\"A.f\")\n")
                ),
                (
                    s("r.g"),
                    s("a.py"),
                    vec![],
                    Some(s("def g")),
                    s("@d(\"g\")\n")
                ),
            ]
        );
    }

    /// `rule_of_marker` inverts the ids `instantiate` gives: every rule of every known
    /// model of the embedded memory-prints set, and every per-file and per-function rule
    /// of the nvtx set, leads back to the rule it came from (its group, and its file
    /// once the target is filled in); an id no rule gives leads nowhere.
    #[test]
    fn a_markers_id_leads_back_to_its_rule() {
        let prints = crate::rules::load("memory-prints").unwrap();
        let spec = prints.manifest.models.as_ref().unwrap();
        let classes: BTreeMap<String, String> = spec
            .roles
            .keys()
            .map(|r| (r.clone(), format!("Role{r}")))
            .collect();
        let params = BTreeMap::new();
        let mut tagged = 0;
        for model in spec.known.keys() {
            let c = instantiate(
                &prints,
                &Target {
                    on: On::Model {
                        name: model,
                        classes: &classes,
                    },
                    params: &params,
                },
            )
            .unwrap();
            for r in &c.rules {
                let raw = rule_of_marker(&prints, &r.id).unwrap_or_else(|| panic!("{}", r.id));
                assert_eq!(raw.group, r.group, "{}", r.id);
                assert_eq!(raw.file.replace("{MODEL}", model), r.file, "{}", r.id);
                tagged += usize::from(raw.id != r.id);
            }
        }
        assert!(
            tagged > 0,
            "no model's rules carry a tag: the test tests nothing"
        );
        let nvtx = crate::rules::load("nvtx").unwrap();
        let targets = [FunctionTarget {
            file: "pkg/m.py".into(),
            class: Some("Block".into()),
            function: "forward".into(),
        }];
        let c = instantiate(
            &nvtx,
            &Target {
                on: On::Functions(&targets),
                params: &params,
            },
        )
        .unwrap();
        assert!(c.rules.iter().any(|r| r.id.ends_with(".Block.forward")));
        for r in &c.rules {
            let raw = rule_of_marker(&nvtx, &r.id).unwrap_or_else(|| panic!("{}", r.id));
            assert_eq!(raw.group, r.group, "{}", r.id);
            assert_eq!(raw.file.replace("{FILE}", "pkg/m.py"), r.file, "{}", r.id);
        }
        for unknown in ["9Z.nothing", "5B", "", "5B.qwen35-moe.nothing"] {
            assert!(rule_of_marker(&prints, unknown).is_none(), "{unknown}");
        }
    }
}
