//! Finding a model's role classes: the rule set says what each role's class looks like
//! (`[models.roles]`: the methods it defines, a parameter a method takes, a statement it
//! holds), and each model file is searched for the one class that fits. A role the
//! structure cannot place is reported with why, and the table line that would place it.

use crate::python::KindOf;
use std::collections::BTreeMap;

use tree_sitter::Node;

use crate::python::pattern::Pattern;
use crate::python::{self, Source};
use crate::rules::{self, CompiledSet, ModelsSpec, On, RoleSpec, RuleSet, Target};

/// The roles of one model file.
#[derive(Debug, Default)]
pub struct Roles {
    /// Role -> class name.
    pub classes: BTreeMap<String, String>,
    /// Role -> why no single class fits, with the table line that would place it.
    pub unplaced: BTreeMap<String, Unplaced>,
}

/// Why a rule cannot be planned before its file is read: the role it scopes into is
/// not placed.
#[derive(Debug, Clone)]
pub struct Blocked {
    pub line: Option<usize>,
    pub message: String,
}

/// A role no class was found for.
#[derive(Debug, Clone)]
pub struct Unplaced {
    pub why: String,
    /// The class that came closest, if any (for the table line and the line number).
    pub closest: Option<(String, usize)>,
    /// The lines of the rule set's table that would place it.
    pub table: String,
}

/// A top-level class of the file, as role finding sees it.
struct Class<'t> {
    name: String,
    line: usize,
    /// Methods defined in the class body, by name.
    methods: Vec<(String, Node<'t>)>,
}

fn classes<'t>(src: &'t Source) -> Vec<Class<'t>> {
    let mut out = Vec::new();
    for stmt in python::statements_of(src.root()) {
        let def = python::undecorated(stmt);
        if def.kind_of() != "class_definition" {
            continue;
        }
        let Some(name) = python::definition_name(src, def) else {
            continue;
        };
        let mut methods = Vec::new();
        if let Some(body) = def.field("body") {
            for s in python::statements_of(body) {
                let f = python::undecorated(s);
                if f.kind_of() == "function_definition"
                    && let Some(n) = python::definition_name(src, f)
                {
                    methods.push((n.to_string(), f));
                }
            }
        }
        out.push(Class {
            name: name.to_string(),
            line: def.start_position().row + 1,
            methods,
        });
    }
    out
}

/// How well a class fits a role: criteria met, of how many, and what it lacks.
type Fit = (usize, usize, Vec<String>);

/// How well `class` fits `spec`.
fn fit(src: &Source, class: &Class, spec: &RoleSpec, holds: Option<&Pattern>) -> Fit {
    let mut met = 0;
    let mut total = 0;
    let mut missing = Vec::new();
    let mut undefined = Vec::new();
    for m in &spec.defines {
        total += 1;
        if class.methods.iter().any(|(n, _)| n == m) {
            met += 1;
        } else {
            undefined.push(format!("`{m}`"));
        }
    }
    if !undefined.is_empty() {
        missing.push(format!("defines no {}", undefined.join(", ")));
    }
    if let Some((method, param)) = spec.takes.as_deref().and_then(split_takes) {
        total += 1;
        match class.methods.iter().find(|(n, _)| n == method) {
            Some((_, f)) if python::parameter_names(src, *f).contains(&param) => met += 1,
            Some(_) => missing.push(format!("has a `{method}` that takes no `{param}`")),
            None => missing.push(format!("defines no `{method}`")),
        }
    }
    if let Some(p) = holds {
        total += 1;
        let found = class.methods.iter().any(|(_, f)| {
            super::anchor::reachable_statements(*f)
                .iter()
                .any(|s| p.match_statement(src, *s).is_some())
        });
        if found {
            met += 1;
        } else {
            missing.push(format!("holds no `{}`", p.text));
        }
    }
    (met, total, missing)
}

/// Whether a class name says the role: every word of `EXPERTS` / `DECODER_LAYER` in it.
fn names_role(class: &str, role: &str) -> bool {
    let class = class.to_lowercase();
    role.split('_')
        .filter(|w| !w.is_empty() && *w != "CLASS")
        .all(|w| class.contains(&w.to_lowercase()))
}

/// `forward(grouped_mm_offs)` -> (`forward`, `grouped_mm_offs`).
pub fn split_takes(text: &str) -> Option<(&str, &str)> {
    let (method, rest) = text.split_once('(')?;
    Some((method.trim(), rest.strip_suffix(')')?.trim()))
}

/// What the role's criteria say, for messages: `defines forward_stage1, forward_stage3`.
fn criteria(spec: &RoleSpec) -> String {
    let mut parts = Vec::new();
    if !spec.defines.is_empty() {
        let names: Vec<String> = spec.defines.iter().map(|m| format!("`{m}`")).collect();
        parts.push(format!("defines {}", names.join(", ")));
    }
    if let Some((m, p)) = spec.takes.as_deref().and_then(split_takes) {
        parts.push(format!("has a `{m}` that takes `{p}`"));
    }
    if let Some(h) = &spec.holds {
        parts.push(format!("holds `{h}`"));
    }
    parts.join(" and ")
}

/// Find every role of `spec` in `src` (the model file `file`, model `model`).
pub fn find(src: &Source, file: &str, model: &str, spec: &ModelsSpec) -> Roles {
    let all = classes(src);
    let given = spec.known.get(model).map(|k| &k.roles);
    let mut roles = Roles::default();
    // Roles whose `holds` names another role are found after it.
    let mut pending: Vec<(&String, &RoleSpec)> = spec.roles.iter().collect();
    while !pending.is_empty() {
        let before = pending.len();
        let mut still = Vec::new();
        for (name, role) in pending {
            let needs: Vec<&str> = role
                .holds
                .as_deref()
                .map(crate::rules::template::placeholders)
                .unwrap_or_default();
            if needs.iter().any(|n| {
                !roles.classes.contains_key(*n) && !roles.unplaced.contains_key(*n) && *n != name
            }) {
                still.push((name, role));
                continue;
            }
            let table = |class: &str| format!("[models.known.{model}.roles]\n{name} = \"{class}\"");
            if let Some(class) = given.and_then(|g| g.get(name)) {
                if all.iter().any(|c| &c.name == class) {
                    roles.classes.insert(name.clone(), class.clone());
                } else {
                    roles.unplaced.insert(
                        name.clone(),
                        Unplaced {
                            why: format!(
                                "the rule set's [models.known.{model}.roles] names class `{class}`, which {file} does not define"
                            ),
                            closest: None,
                            table: table("<the class>"),
                        },
                    );
                }
                continue;
            }
            if let Some(missing) = needs.iter().find(|n| roles.unplaced.contains_key(**n)) {
                roles.unplaced.insert(
                    name.clone(),
                    Unplaced {
                        why: format!("it is found through role {missing}, which is not placed"),
                        closest: None,
                        table: table("<the class>"),
                    },
                );
                continue;
            }
            let holds = match role.holds.as_deref() {
                Some(h) => {
                    let text = crate::rules::template::fill(h, &|r| roles.classes.get(r).cloned());
                    match Pattern::compile(&text) {
                        Ok(p) => Some(p),
                        Err(e) => {
                            roles.unplaced.insert(
                                name.clone(),
                                Unplaced {
                                    why: format!("its `holds` pattern does not compile: {e}"),
                                    closest: None,
                                    table: table("<the class>"),
                                },
                            );
                            continue;
                        }
                    }
                }
                None => None,
            };
            let scored: Vec<(&Class, Fit)> = all
                .iter()
                .map(|c| (c, fit(src, c, role, holds.as_ref())))
                .collect();
            let fitting: Vec<&Class> = scored
                .iter()
                .filter(|(_, (met, total, _))| met == total && *total > 0)
                .map(|(c, _)| *c)
                .collect();
            match fitting.as_slice() {
                [one] => {
                    roles.classes.insert(name.clone(), one.name.clone());
                }
                [] => {
                    // The class meeting most criteria; among equals (or when none meets
                    // any), the one whose name says the role (`MixtralExperts`).
                    let best = scored
                        .iter()
                        .filter(|(c, (met, _, _))| *met > 0 || names_role(&c.name, name))
                        .max_by_key(|(c, (met, _, _))| {
                            (*met, names_role(&c.name, name), std::cmp::Reverse(c.line))
                        });
                    let why = match best {
                        Some((c, (met, _, missing))) => format!(
                            "no class of {file} {}; the {}, `{}` (line {}), {}",
                            criteria(role),
                            if *met > 0 {
                                "closest"
                            } else {
                                "likeliest by its name"
                            },
                            c.name,
                            c.line,
                            missing.join(" and ")
                        ),
                        None => format!("no class of {file} {}", criteria(role)),
                    };
                    let closest = best.map(|(c, _)| (c.name.clone(), c.line));
                    let class = closest
                        .as_ref()
                        .map_or("<the class>".to_string(), |(n, _)| n.clone());
                    roles.unplaced.insert(
                        name.clone(),
                        Unplaced {
                            why,
                            closest,
                            table: table(&class),
                        },
                    );
                }
                many => {
                    let listed: Vec<String> = many
                        .iter()
                        .map(|c| format!("`{}` (line {})", c.name, c.line))
                        .collect();
                    roles.unplaced.insert(
                        name.clone(),
                        Unplaced {
                            why: format!(
                                "{} classes of {file} {}: {}; the rules scope into one",
                                many.len(),
                                criteria(role),
                                listed.join(", ")
                            ),
                            closest: Some((many[0].name.clone(), many[0].line)),
                            table: table(&many[0].name),
                        },
                    );
                }
            }
        }
        if still.len() == before {
            // Roles that name each other: none can be found first.
            for (name, _) in &still {
                roles.unplaced.insert(
                    (*name).clone(),
                    Unplaced {
                        why: "its `holds` names a role that names it back".into(),
                        closest: None,
                        table: format!("[models.known.{model}.roles]\n{name} = \"<the class>\""),
                    },
                );
            }
            break;
        }
        pending = still;
    }
    roles
}

/// The message for a rule that scopes into an unplaced role.
pub fn describe(role: &str, spec: &ModelsSpec, unplaced: &Unplaced) -> String {
    let about = spec
        .roles
        .get(role)
        .map(|r| format!(" ({})", r.about))
        .unwrap_or_default();
    format!(
        "cannot place role {role}{about}: {}; to place it, add to the rule set's ruleset.toml: {}",
        unplaced.why,
        unplaced.table.replace('\n', " ")
    )
}

/// The rules of `set` for `model` in the checkout at `root`, instantiated with `params`:
/// its role classes found in its file (parsed once, the parse shared with the planner),
/// every rule in its place. Rules scoping into a role that could not be placed come with
/// their failure, by index in the compiled set.
pub fn model_rules(
    root: &std::path::Path,
    set: &RuleSet,
    model: &str,
    params: &BTreeMap<String, String>,
) -> Result<(CompiledSet, BTreeMap<usize, Blocked>), crate::rules::Error> {
    let instantiate = |classes: &BTreeMap<String, String>| {
        let on = On::Model {
            name: model,
            classes,
        };
        rules::instantiate(set, &Target { on, params })
    };
    let Some(spec) = &set.manifest.models else {
        return instantiate(&BTreeMap::new()).map(|rules| (rules, BTreeMap::new()));
    };
    let file = format!("{}/{model}.py", spec.dir);
    let roles = if spec.roles.is_empty() {
        Roles::default()
    } else {
        match std::fs::read_to_string(root.join(&file)) {
            Ok(text) => {
                // Markers are comments: an instrumented file has the same classes.
                let src = Source::parse_reusing(text);
                src.share();
                find(&src, &file, model, spec)
            }
            // The planner reports the unreadable file, per rule.
            Err(_) => Roles::default(),
        }
    };
    let rules = instantiate(&roles.classes)?;
    let blocked = rules
        .unplaced
        .iter()
        .filter_map(|(i, role)| {
            roles.unplaced.get(role).map(|u| {
                let blocked = Blocked {
                    line: u.closest.as_ref().map(|(_, l)| *l),
                    message: describe(role, spec, u),
                };
                (*i, blocked)
            })
        })
        .collect();
    Ok((rules, blocked))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ModelsSpec {
        toml::from_str(
            r#"
dir = "m"
[roles.LAYER]
about = "the layer"
defines = ["stage1", "stage3"]
[roles.EXPERTS]
about = "the experts"
takes = "forward(offs)"
[roles.BLOCK]
about = "the block"
holds = "self.experts = {EXPERTS}($$$)"
"#,
        )
        .unwrap()
    }

    #[test]
    fn roles_are_found_by_structure() {
        let src = Source::parse(
            "class A:\n    def stage1(self): pass\n    def stage3(self): pass\n\n\nclass E:\n    def forward(self, x, offs=None): pass\n\n\nclass B:\n    def __init__(self):\n        self.experts = E(1)\n".into(),
        );
        let r = find(&src, "m/x.py", "x", &spec());
        assert_eq!(r.classes["LAYER"], "A");
        assert_eq!(r.classes["EXPERTS"], "E");
        assert_eq!(r.classes["BLOCK"], "B");
        assert!(r.unplaced.is_empty());
    }

    #[test]
    fn a_role_not_found_says_why_and_the_table_line() {
        let src = Source::parse(
            "class A:\n    def stage1(self): pass\n\n\nclass XExperts:\n    def forward(self, x): pass\n".into(),
        );
        let r = find(&src, "m/x.py", "x", &spec());
        let layer = &r.unplaced["LAYER"];
        assert!(
            layer.why.contains("`A` (line 1), defines no `stage3`"),
            "{}",
            layer.why
        );
        assert_eq!(layer.table, "[models.known.x.roles]\nLAYER = \"A\"");
        let experts = &r.unplaced["EXPERTS"];
        assert!(
            experts.why.contains(
                "likeliest by its name, `XExperts` (line 5), has a `forward` that takes no `offs`"
            ),
            "{}",
            experts.why
        );
        assert!(r.unplaced["BLOCK"].why.contains("role EXPERTS"));
    }

    #[test]
    fn two_fitting_classes_are_ambiguous_and_the_table_decides() {
        let text = "class A:\n    def stage1(self): pass\n    def stage3(self): pass\n\n\nclass A2:\n    def stage1(self): pass\n    def stage3(self): pass\n";
        let src = Source::parse(text.into());
        let r = find(&src, "m/x.py", "x", &spec());
        assert!(r.unplaced["LAYER"].why.contains("2 classes"));
        let mut given = spec();
        given.known.insert(
            "x".into(),
            toml::from_str("roles = { LAYER = \"A2\" }").unwrap(),
        );
        let r = find(&src, "m/x.py", "x", &given);
        assert_eq!(r.classes["LAYER"], "A2");
    }
}
