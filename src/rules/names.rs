//! The names a rule uses, checked when its set loads, so that `rules`, `test-rules`,
//! `explain` and `add` refuse a broken set alike instead of `add` alone finding out:
//! - every placeholder (`{NAME}`) is something that fills it where it stands: `{MODEL}`
//!   and `{FILE}` in `file`, a role of `[models.roles]` (or, in a rule written per target,
//!   `{FUNCTION}`/`{NAME}`/`{FILE}`/`{CLASS_SCOPE}`) in a pattern, a parameter of
//!   `[params]` (or `{ORIGINAL}` on a line of its own, in a `replace`/`wrap` rule) in the
//!   template;
//! - every metavariable the template uses (`$X`) is bound by the rule's patterns: its
//!   scope, captures, `following`, and every alternative of its anchor.

use std::collections::BTreeSet;

use super::error::Error;
use super::set::RuleSet;
use super::template::{metavariables, placeholders};
use super::{Anchor, Per, Position, Rule, TargetKind};

/// Built-in placeholders of a rule written per target, by what it is written for.
fn per_target(per: Option<Per>) -> &'static [&'static str] {
    match per {
        None => &[],
        Some(Per::File) => &["FILE"],
        Some(Per::Function) => &["FILE", "FUNCTION", "NAME"],
    }
}

fn listed(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

fn braced(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| format!("{{{n}}}")).collect()
}

/// Check every rule of `set`; `at(i)` says where rule `i` is written
/// (`origin/file:line: rule id`).
pub(super) fn check(set: &RuleSet, at: &dyn Fn(usize) -> String) -> Result<(), Error> {
    for (i, rule) in set.rules.iter().enumerate() {
        placeholders_of(set, rule, &|| at(i))?;
        metavariables_of(rule, &|| at(i))?;
    }
    Ok(())
}

/// The placeholders of `rule`, each against what fills it where it stands.
fn placeholders_of(set: &RuleSet, rule: &Rule, at: &dyn Fn() -> String) -> Result<(), Error> {
    let manifest = &set.manifest;
    let per = per_target(rule.per);
    let per_model = manifest.targets == TargetKind::Model && manifest.models.is_some();
    let roles: Vec<String> = match (&manifest.models, manifest.targets) {
        (Some(m), TargetKind::Model) => m.roles.keys().cloned().collect(),
        _ => Vec::new(),
    };
    let unknown = |name: &str, place: String, known: String, next: String| Error::Placeholder {
        at: at(),
        name: name.to_string(),
        place,
        known,
        next,
    };

    // `file`: the model's file stem, or the selected function's file.
    for name in placeholders(&rule.file) {
        let fits = (name == "MODEL" && per_model) || (name == "FILE" && !per.is_empty());
        if !fits {
            let mut known = Vec::new();
            if per_model {
                known.push("MODEL");
            }
            if !per.is_empty() {
                known.push("FILE");
            }
            return Err(unknown(
                name,
                "`file`".into(),
                format!(
                    "filled in there (`file` takes: {})",
                    listed(&braced(&known))
                ),
                "name the file without it, or correct the name".into(),
            ));
        }
    }

    // The patterns: the role classes, or what a rule written per target is written for.
    for field in super::models::pattern_fields(rule) {
        for name in placeholders(field) {
            let class_scope = name == "CLASS_SCOPE" && rule.per == Some(Per::Function);
            if class_scope
                && field.trim() == "{CLASS_SCOPE}"
                && rule.scope.iter().any(|s| s == field)
            {
                continue;
            }
            if class_scope {
                return Err(unknown(
                    name,
                    format!("`{field}`"),
                    "a pattern of its own".into(),
                    "write it alone, as an entry of `scope` (`scope = [\"{CLASS_SCOPE}\"]`)".into(),
                ));
            }
            if roles.iter().any(|r| r == name) || per.contains(&name) {
                continue;
            }
            if name == "MODEL" {
                return Err(unknown(
                    name,
                    format!("`{field}`"),
                    "filled in there (the model's file stem is filled in `file` only)".into(),
                    "match the model's classes through a role of [models.roles] instead".into(),
                ));
            }
            return Err(if per.is_empty() {
                unknown(
                    name,
                    format!("`{field}`"),
                    format!("a role of [models.roles] (roles: {})", listed(&roles)),
                    format!("declare [models.roles.{name}] in ruleset.toml, or correct the name"),
                )
            } else {
                let mut known = braced(per);
                if rule.per == Some(Per::Function) {
                    known.push("{CLASS_SCOPE}".into());
                }
                unknown(
                    name,
                    format!("`{field}`"),
                    format!(
                        "filled in for a rule written per {} (it takes: {})",
                        if rule.per == Some(Per::File) {
                            "file"
                        } else {
                            "function"
                        },
                        known.join(", ")
                    ),
                    "correct the name".into(),
                )
            });
        }
    }

    // The template: the parameters, `{ORIGINAL}` on a line of its own.
    let params: Vec<String> = manifest.params.keys().cloned().collect();
    let takes_original = matches!(rule.position, Position::Replace | Position::Wrap);
    for line in rule.template.lines() {
        if line.trim() == "{ORIGINAL}" {
            if !takes_original {
                return Err(unknown(
                    "ORIGINAL",
                    "the template".into(),
                    format!(
                        "filled in for a rule whose position is {} (only replace and wrap rules replace a statement)",
                        rule.position.name()
                    ),
                    "take it out, or make the rule replace or wrap its anchor".into(),
                ));
            }
            continue;
        }
        for name in placeholders(line) {
            if params.iter().any(|p| p == name) || per.contains(&name) {
                continue;
            }
            if name == "ORIGINAL" {
                return Err(unknown(
                    name,
                    format!("`{}`", line.trim()),
                    "filled in inside a line (it stands for whole statements)".into(),
                    "put {ORIGINAL} on a line of its own".into(),
                ));
            }
            if name == "MODEL" {
                return Err(unknown(
                    name,
                    "the template".into(),
                    "filled in there (the model's file stem is filled in `file` only)".into(),
                    "take it out (a template reads what it needs of the model from the code it lands in)".into(),
                ));
            }
            let mut known = braced(per);
            if takes_original {
                known.push("{ORIGINAL}".into());
            }
            return Err(unknown(
                name,
                "the template".into(),
                format!(
                    "a parameter of the rule set (parameters: {}{})",
                    listed(&params),
                    if known.is_empty() {
                        String::new()
                    } else {
                        format!("; built in: {}", known.join(", "))
                    }
                ),
                format!("declare [params.{name}] in ruleset.toml, or correct the name"),
            ));
        }
    }
    Ok(())
}

/// Metavariables `patterns` bind (`$_` binds nothing).
fn bound_by<'a>(patterns: impl IntoIterator<Item = &'a str>) -> BTreeSet<&'a str> {
    patterns
        .into_iter()
        .flat_map(metavariables)
        .filter(|n| *n != "_")
        .collect()
}

/// The metavariables `rule`'s template uses, each against what its patterns bind.
fn metavariables_of(rule: &Rule, at: &dyn Fn() -> String) -> Result<(), Error> {
    let always = bound_by(
        rule.scope
            .iter()
            .chain(&rule.capture)
            .chain(&rule.following)
            .map(String::as_str),
    );
    let alternatives: Vec<BTreeSet<&str>> = match &rule.anchor {
        None => Vec::new(),
        Some(Anchor::One(p)) => vec![bound_by([p.as_str()])],
        Some(Anchor::Any(ps)) => ps.iter().map(|p| bound_by([p.as_str()])).collect(),
    };
    for line in rule.template.lines() {
        if line.trim() == "{ORIGINAL}" {
            continue;
        }
        for name in metavariables(line) {
            let by_anchor = alternatives.iter().filter(|a| a.contains(name)).count();
            if always.contains(name) || (by_anchor > 0 && by_anchor == alternatives.len()) {
                continue;
            }
            let mut bound: Vec<String> = always
                .iter()
                .chain(alternatives.iter().flatten())
                .map(|n| format!("${n}"))
                .collect();
            bound.sort();
            bound.dedup();
            return Err(Error::Unbound {
                at: at(),
                name: name.to_string(),
                partly: by_anchor > 0,
                bound,
            });
        }
    }
    Ok(())
}

/// The `holds` pattern of each role names other roles only.
pub(super) fn check_roles(set: &RuleSet, at: &dyn Fn(&str) -> String) -> Result<(), Error> {
    let Some(models) = &set.manifest.models else {
        return Ok(());
    };
    let roles: Vec<String> = models.roles.keys().cloned().collect();
    for (role, spec) in &models.roles {
        for name in spec.holds.as_deref().map(placeholders).unwrap_or_default() {
            if name == role || !roles.iter().any(|r| r == name) {
                return Err(Error::Placeholder {
                    at: at(role),
                    name: name.to_string(),
                    place: format!("`holds = \"{}\"`", spec.holds.as_deref().unwrap_or("")),
                    known: format!("another role of [models.roles] (roles: {})", listed(&roles)),
                    next: "correct the name".into(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Why the set of one rule file `rules` is refused (its folder written `<DIR>`), if it is.
    fn refused(rules: &str) -> Option<String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ruleset.toml"),
            "name = \"t\"\ndescription = \"t\"\nsource_dir = \".\"\ntargets = \"functions\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("r.toml"), rules).unwrap();
        let spec = dir.path().display().to_string();
        crate::rules::load(&spec)
            .err()
            .map(|e| e.to_string().replace(&spec, "<DIR>"))
    }

    fn rule(per: &str, scope: &str, anchor: &str) -> String {
        format!(
            "[[rule]]\nid = \"r\"\ngroup = \"g\"\nper = \"{per}\"\nfile = \"{{FILE}}\"\nsummary = \"s\"\nscope = [{scope}]\nanchor = \"{anchor}\"\nposition = \"before\"\ntemplate = \"x = 1\"\n"
        )
    }

    /// What a rule written per target may name: per file, `{FILE}` only; per function,
    /// `{FUNCTION}` too, and `{CLASS_SCOPE}` as a scope entry of its own.
    #[test]
    fn per_target_placeholders_are_the_ones_its_expansion_fills() {
        assert_eq!(
            refused(&rule("function", "\"{CLASS_SCOPE}\"", "def {FUNCTION}")),
            None
        );
        assert_eq!(
            refused(&rule("file", "", "def {FUNCTION}")).unwrap(),
            "<DIR>/r.toml:2: rule r: `{FUNCTION}` in `def {FUNCTION}` is not filled in for a rule written per file (it takes: {FILE}); correct the name"
        );
        assert_eq!(
            refused(&rule("function", "\"{CLASS_SCOPE} x\"", "def {FUNCTION}")).unwrap(),
            "<DIR>/r.toml:2: rule r: `{CLASS_SCOPE}` in `{CLASS_SCOPE} x` is not a pattern of its own; write it alone, as an entry of `scope` (`scope = [\"{CLASS_SCOPE}\"]`)"
        );
    }
}
