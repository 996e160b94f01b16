//! `instrument rules | explain | test-rules`: for rule authors and reviewers.

use std::path::PathBuf;

use clap::Args;

use crate::codemod::{checkout, explain, params, selftest};
use crate::exit::{self, Error};
use crate::rules::{DEFAULT_SET as DEFAULT_RULES, RuleSet};

/// The schema ids of `rules --json` and `explain --json`.
pub const RULES_SCHEMA: &str = "instrument.rules/1";
pub const EXPLAIN_SCHEMA: &str = "instrument.explain/1";

/// The rule set `spec`, with its print declarations' lines.
fn load_rules(spec: &str) -> Result<RuleSet, Error> {
    let set = crate::rules::load_with_prints(spec)?;
    super::codemod::check_param_flags(&set.manifest, spec)?;
    Ok(set)
}

/// The rule set `spec` with its prints and its examples, every rule compiled as written: for
/// reviewing the whole set.
fn load_reviewed(spec: &str) -> Result<RuleSet, Error> {
    let set = crate::rules::load_with_examples(spec)?;
    super::codemod::check_param_flags(&set.manifest, spec)?;
    crate::rules::instantiate::review(&set)?;
    Ok(set)
}

#[derive(Args, Debug)]
pub struct RulesArgs {
    /// A built-in rule set name or a folder with ruleset.toml.
    #[arg(long, default_value = DEFAULT_RULES)]
    pub rules: String,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The model, as for `add`.
    pub model: String,
    /// The checkout (default: the current folder or the first parent holding pithtrain/).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// A built-in rule set name or a folder with ruleset.toml.
    #[arg(long, default_value = DEFAULT_RULES, value_name = "NAME-or-DIR")]
    pub rules: String,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct TestRulesArgs {
    /// A built-in rule set name or a folder with ruleset.toml.
    #[arg(long, default_value = DEFAULT_RULES, value_name = "NAME-or-DIR")]
    pub rules: String,
    /// Print each example's actual output (hashes masked), to write or review `after`.
    #[arg(long)]
    pub print: bool,
}

pub fn list(args: RulesArgs) -> Result<u8, Error> {
    let set = load_reviewed(&args.rules)?;
    if args.json {
        let rules: Vec<serde_json::Value> = set
            .rules
            .iter()
            .map(|r| {
                serde_json::json!({
                    "id": r.id, "group": r.group, "file": r.file, "models": r.models,
                    "extends": r.extends, "replaces": r.replaces, "after": r.after,
                    "scope": r.scope, "anchor": r.anchor.as_ref().map(|a| a.describe()), "following": r.following,
                    "contains": r.contains, "position": r.position.name(),
                    "summary": r.summary, "note": r.note, "examples": r.examples.len(),
                })
            })
            .collect();
        let roles = set.manifest.models.as_ref().map(|m| &m.roles);
        let doc = serde_json::json!({
            "schema": RULES_SCHEMA,
            "rule_set": set.manifest.name, "origin": set.origin,
            "description": set.manifest.description, "params": set.manifest.params,
            "roles": roles, "groups": set.manifest.groups, "rules": rules,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(exit::OK);
    }
    println!(
        "{} ({}): {}",
        set.manifest.name, set.origin, set.manifest.description
    );
    // The classes the rules scope into, and how a model file's are found.
    for (name, role) in set.manifest.models.iter().flat_map(|m| &m.roles) {
        let mut how = Vec::new();
        if !role.defines.is_empty() {
            how.push(format!("defines {}", role.defines.join(", ")));
        }
        if let Some(t) = &role.takes {
            how.push(format!("has {t}"));
        }
        if let Some(h) = &role.holds {
            how.push(format!("holds `{h}`"));
        }
        println!(
            "role {{{name}}}: {}: the class that {}",
            role.about,
            how.join(" and ")
        );
    }
    // What groups need of each other: `--partial` never applies one without these.
    for (group, spec) in &set.manifest.groups {
        if spec.requires.is_empty() {
            continue;
        }
        let why = spec
            .why
            .as_deref()
            .map_or(String::new(), |w| format!(": {w}"));
        println!(
            "group {group} requires group {}{why}",
            spec.requires.join(", ")
        );
    }
    for r in &set.rules {
        let models = if r.models.is_empty() {
            String::new()
        } else {
            let place = match (&r.extends, r.replaces.as_slice(), &r.after) {
                (Some(b), _, _) => format!("; stands in for {b}"),
                (_, [_, ..], _) => format!("; stands in for {}", r.replaces.join(", ")),
                (_, _, Some(a)) => format!("; after {a}"),
                _ => String::new(),
            };
            format!(" [{}{place}]", r.models.join(", "))
        };
        let mut place: Vec<String> = r.scope.clone();
        if let Some(a) = &r.anchor {
            place.push(format!("{} `{}`", r.position.name(), a.describe()));
        } else {
            place.push(r.position.name().to_string());
        }
        println!(
            "{:<24} group {:<3} {}{models}\n    {}\n    {}",
            r.id,
            r.group,
            r.file,
            place.join(" > "),
            r.summary
        );
        if let Some(note) = &r.note {
            println!("    note: {note}");
        }
    }
    Ok(exit::OK)
}

pub fn explain(args: ExplainArgs) -> Result<u8, Error> {
    let set = load_rules(&args.rules)?;
    let root = checkout::root_for(args.root.as_deref(), &set.manifest)?;
    let model = checkout::resolve_model(&root, &set.manifest, &args.model)?;
    // Explaining renders no template: no parameter values.
    let no_params = std::collections::BTreeMap::new();
    let (set, blocked) = crate::codemod::roles::model_rules(&root, &set, &model, &no_params)?;
    let mut landings = explain::explain(&root, &set);
    for (i, b) in &blocked {
        landings[*i].error = Some(b.message.clone());
        landings[*i].line = None;
    }
    if args.json {
        let doc = serde_json::json!({
            "schema": EXPLAIN_SCHEMA,
            "rule_set": set.manifest.name,
            "model": checkout::display_model(&model),
            "rules": landings,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        for l in &landings {
            match (&l.error, l.line) {
                (None, Some(line)) => println!(
                    "{:<24} {}:{line}  `{}`",
                    l.rule,
                    l.file,
                    l.matched.as_deref().unwrap_or("")
                ),
                _ => println!(
                    "{:<24} {}  NOT FOUND: {}",
                    l.rule,
                    l.file,
                    l.error.as_deref().unwrap_or("")
                ),
            }
        }
    }
    let failed = landings.iter().filter(|l| l.error.is_some()).count();
    if failed > 0 {
        eprintln!(
            "instrument explain: {failed} of {} rules do not resolve in {}",
            landings.len(),
            root.display()
        );
        return Ok(exit::FOUND);
    }
    Ok(exit::OK)
}

pub fn test_rules(args: TestRulesArgs) -> Result<u8, Error> {
    let set = load_reviewed(&args.rules)?;
    // Examples use the parameters' defaults for what they do not set.
    let defaults = params::example_defaults(&set.manifest);
    let results = selftest::run_all(&set, &defaults);
    let failed: Vec<&selftest::ExampleResult> =
        results.iter().filter(|r| r.problem.is_some()).collect();
    if args.print {
        for r in &results {
            println!("=== {} example {}\n{}", r.rule, r.index, r.output);
        }
    }
    for r in &failed {
        println!(
            "FAIL {} example {}: {}",
            r.rule,
            r.index,
            r.problem.as_deref().unwrap_or("")
        );
    }
    // Every group carries examples.
    let untested = selftest::groups_without_examples(&set);
    for u in &untested {
        println!(
            "FAIL rule set {} group {} in {}/{}: none of its {} rule(s) there has examples; write [[example]] tables in {}/{}/{} for each rule whose shape differs",
            set.manifest.name,
            u.group,
            set.origin,
            u.file,
            u.rules,
            set.origin,
            crate::rules::examples::FOLDER,
            u.file
        );
    }
    let with_examples = set.rules.iter().filter(|r| !r.examples.is_empty()).count();
    println!(
        "rule set {}: {} examples on {with_examples} of {} rules",
        set.manifest.name,
        results.len(),
        set.rules.len()
    );
    // Each printed line must read back through the rule's print declarations.
    let prints = crate::log::readback::check(&set)?;
    for line in crate::log::readback::report(&prints) {
        println!("{line}");
    }
    println!(
        "prints: {} of {} lines the templates of {} rules print read back through {} declarations",
        prints.read_back, prints.lines, prints.rules, prints.declarations
    );
    let checked = results.len() + prints.read_back + prints.problems.len() + untested.len();
    let failures = failed.len() + prints.problems.len() + untested.len();
    println!("{} passed, {} failed", checked - failures, failures);
    Ok(if failures == 0 { exit::OK } else { exit::FOUND })
}
