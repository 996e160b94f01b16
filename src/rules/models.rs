//! The rules of one model. Rules are written once for every model, scoping into role
//! classes (`class {DECODER_LAYER}`); where a model departs, a rule for it (`models = [..]`)
//! stands in for the common one (`extends`, `replaces`) or adds one (`after`). This module
//! puts each model's rules in application order; `instantiate` writes their ids as the
//! markers carry them (`5B.gpt-oss.flags`) and fills in the role classes found in the
//! model file.

use super::error::Error;
use super::set::RuleSet;
use super::template::placeholders;
use super::{Anchor, Rule};

/// The pattern fields of a rule, where role placeholders may stand.
pub(super) fn pattern_fields(rule: &Rule) -> Vec<&str> {
    let mut out: Vec<&str> = rule.scope.iter().map(String::as_str).collect();
    match &rule.anchor {
        Some(Anchor::One(p)) => out.push(p),
        Some(Anchor::Any(ps)) => out.extend(ps.iter().map(String::as_str)),
        None => {}
    }
    out.extend(rule.following.as_deref());
    out.extend(rule.contains.as_deref());
    out.extend(rule.capture.iter().map(String::as_str));
    out
}

/// The roles a rule's patterns name.
pub fn roles_of(rule: &Rule, set: &RuleSet) -> Vec<String> {
    let roles = set.manifest.models.as_ref().map(|m| &m.roles);
    let mut out: Vec<String> = Vec::new();
    for field in pattern_fields(rule) {
        for name in placeholders(field) {
            if roles.is_some_and(|roles| roles.contains_key(name)) && !out.iter().any(|o| o == name)
            {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// Whether `rule` is for `model` (`Rule::applies_to`).
fn applies(rule: &Rule, model: &str) -> bool {
    rule.applies_to(Some(model))
}

/// A model-specific rule that takes a place among the common rules.
fn is_placed(rule: &Rule) -> bool {
    rule.extends.is_some() || !rule.replaces.is_empty() || rule.after.is_some()
}

/// The rules for `model`, in application order, as indices into `set.rules`. Errors when
/// a rule for the model stands in for a rule the model does not have.
pub fn order(set: &RuleSet, model: &str) -> Result<Vec<usize>, Error> {
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
    Ok(order.into_iter().map(|(i, _)| i).collect())
}

/// Checks of the model-specific parts of a rule set, at load time.
pub fn validate(set: &RuleSet) -> Result<(), Error> {
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
    }
    Ok(())
}
