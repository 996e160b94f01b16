//! The rules of one model. Rules are written once for every model, scoping into role
//! classes (`class {DECODER_LAYER}`); where a model departs, a rule for it (`models = [..]`)
//! stands in for the common one (`extends`, `replaces`) or adds one (`after`). This module
//! puts each model's rules in application order, writes their ids as the markers carry
//! them (`5B.gpt-oss.flags`) and fills in the role classes found in the model file.

use std::collections::BTreeMap;

use super::error::Error;
pub use super::set::placeholders;
use super::set::{RuleSet, tagged_id};
use super::{Rule, TargetKind};

/// The rules for one model, ready to compile and plan.
pub struct ModelRules {
    pub set: RuleSet,
    /// For each rule (by index in `set.rules`) that scopes into a role no class was found
    /// for: the role.
    pub unplaced: BTreeMap<usize, String>,
}

/// The pattern fields of a rule, where role placeholders may stand (and the summary,
/// which may name them too).
fn pattern_fields(rule: &mut Rule, with_summary: bool) -> Vec<&mut String> {
    let mut out: Vec<&mut String> = rule.scope.iter_mut().collect();
    match &mut rule.anchor {
        Some(super::Anchor::One(p)) => out.push(p),
        Some(super::Anchor::Any(ps)) => out.extend(ps.iter_mut()),
        None => {}
    }
    out.extend(rule.following.iter_mut());
    out.extend(rule.contains.iter_mut());
    out.extend(rule.capture.iter_mut());
    if with_summary {
        out.push(&mut rule.summary);
    }
    out
}

/// The roles a rule's patterns name.
pub fn roles_of(rule: &Rule, set: &RuleSet) -> Vec<String> {
    let roles = set.manifest.models.as_ref().map(|m| &m.roles);
    let mut r = rule.clone();
    let mut out: Vec<String> = Vec::new();
    for field in pattern_fields(&mut r, false) {
        for name in placeholders(field) {
            if roles.is_some_and(|roles| roles.contains_key(name)) && !out.iter().any(|o| o == name)
            {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// Replace the role placeholders of `rule`'s patterns (and summary) by `classes`.
pub fn fill_roles(rule: &mut Rule, classes: &BTreeMap<String, String>) {
    for field in pattern_fields(rule, true) {
        for (role, class) in classes {
            let key = format!("{{{role}}}");
            if field.contains(&key) {
                *field = field.replace(&key, class);
            }
        }
    }
}

/// Whether `rule` is for `model` (`Rule::applies_to`).
fn applies(rule: &Rule, model: &str) -> bool {
    rule.applies_to(Some(model))
}

/// A model-specific rule that takes a place among the common rules.
fn is_placed(rule: &Rule) -> bool {
    rule.extends.is_some() || !rule.replaces.is_empty() || rule.after.is_some()
}

/// The rules for `model`, in application order, with ids as the markers write them and
/// role placeholders replaced by `classes` (roles missing there are reported in
/// `unplaced`, their placeholders left as written). Errors when a rule for the model
/// stands in for a rule the model does not have.
pub fn for_model(
    set: &RuleSet,
    model: &str,
    classes: &BTreeMap<String, String>,
) -> Result<ModelRules, Error> {
    let tag = set
        .manifest
        .models
        .as_ref()
        .map(|m| m.id_tag(model))
        .unwrap_or_default();
    // Application order, as indices into `set.rules`, each with the ids it stands for.
    let mut order: Vec<(usize, Vec<String>)> = set
        .rules
        .iter()
        .enumerate()
        .filter(|(_, r)| applies(r, model) && !is_placed(r))
        .map(|(i, r)| (i, vec![r.id.clone()]))
        .collect();
    let place = |order: &Vec<(usize, Vec<String>)>, id: &str| {
        order
            .iter()
            .position(|(_, ids)| ids.iter().any(|x| x == id))
    };
    for (i, rule) in set.rules.iter().enumerate() {
        if !applies(rule, model) || !is_placed(rule) || rule.models.is_empty() {
            continue;
        }
        let at = |what: &str, id: &str| {
            Error::invalid(format!(
                "{}/{}: rule {} {what} {id}, which model {model} does not have (another rule for it already stands in for it?)",
                set.origin, set.rule_files[i], rule.id
            ))
        };
        if let Some(base) = &rule.extends {
            let p = place(&order, base).ok_or_else(|| at("extends", base))?;
            let mut ids = std::mem::take(&mut order[p].1);
            ids.push(rule.id.clone());
            order[p] = (i, ids);
        } else if let Some(first) = rule.replaces.first() {
            let p = place(&order, first).ok_or_else(|| at("replaces", first))?;
            let mut ids = std::mem::take(&mut order[p].1);
            for other in &rule.replaces[1..] {
                let q = place(&order, other).ok_or_else(|| at("replaces", other))?;
                ids.extend(order[q].1.iter().cloned());
                order[q].1.clear();
            }
            ids.push(rule.id.clone());
            order[p] = (i, ids);
            order.retain(|(_, ids)| !ids.is_empty());
        } else if let Some(prev) = &rule.after {
            let p = place(&order, prev).ok_or_else(|| at("comes after", prev))?;
            order.insert(p + 1, (i, vec![rule.id.clone()]));
        }
    }
    let mut rules = Vec::with_capacity(order.len());
    let mut rule_files = Vec::with_capacity(order.len());
    let mut unplaced = BTreeMap::new();
    for (k, (i, _)) in order.iter().enumerate() {
        let mut rule = set.rules[*i].clone();
        let roles = roles_of(&rule, set);
        // The rules of the model's own file carry its tag; the rules of files every model
        // shares keep their ids.
        if rule.models.is_empty() && rule.file.contains("{MODEL}") {
            rule.id = tagged_id(&rule.id, &tag);
        }
        fill_roles(&mut rule, classes);
        if let Some(missing) = roles.iter().find(|r| !classes.contains_key(*r)) {
            unplaced.insert(k, missing.clone());
        }
        rules.push(rule);
        rule_files.push(set.rule_files[*i].clone());
    }
    Ok(ModelRules {
        set: RuleSet {
            manifest: set.manifest.clone(),
            rules,
            patterns: Vec::new(),
            origin: set.origin.clone(),
            rule_files,
        },
        unplaced,
    })
}

/// Checks of the model-specific parts of a rule set, at load time.
pub fn validate(set: &RuleSet) -> Result<(), Error> {
    let roles = set.manifest.models.as_ref().map(|m| &m.roles);
    for (rule, file) in set.rules.iter().zip(&set.rule_files) {
        let at = format!("{}/{file}: rule {}", set.origin, rule.id);
        if is_placed(rule) && rule.models.is_empty() {
            return Err(Error::invalid(format!(
                "{at}: `extends`, `replaces` and `after` are for rules of some models; give `models`"
            )));
        }
        let placements = [
            rule.extends.is_some(),
            !rule.replaces.is_empty(),
            rule.after.is_some(),
        ];
        if placements.iter().filter(|p| **p).count() > 1 {
            return Err(Error::invalid(format!(
                "{at}: a rule either extends, replaces or comes after another, not several"
            )));
        }
        for id in rule.replaces.iter().chain(&rule.after) {
            if !set.rules.iter().any(|r| &r.id == id) {
                return Err(Error::invalid(format!(
                    "{at}: names rule {id}, which the rule set does not have"
                )));
            }
        }
        if set.manifest.targets != TargetKind::Model {
            continue;
        }
        let mut r = rule.clone();
        for field in pattern_fields(&mut r, false) {
            for name in placeholders(field) {
                if !roles.is_some_and(|roles| roles.contains_key(name)) {
                    let known: Vec<&String> = roles.map(|r| r.keys().collect()).unwrap_or_default();
                    return Err(Error::invalid(format!(
                        "{at}: `{{{name}}}` in `{field}` is not a role of [models.roles] (roles: {})",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known
                                .iter()
                                .map(|k| k.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    )));
                }
            }
        }
    }
    Ok(())
}
