//! Loading a rule set: from the copy embedded in the binary (`--rules memory-prints`,
//! the default) or from a folder (`--rules DIR`), with every rule checked before use.

use std::path::{Path, PathBuf};

use include_dir::{Dir, include_dir};

use super::error::Error;
use super::set::{RuleSet, tagged_id};
use super::{Manifest, Rule};

static EMBEDDED: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/rules");

/// Names of the rule sets built into the binary.
pub fn embedded_names() -> Vec<String> {
    let mut names: Vec<String> = EMBEDDED
        .dirs()
        .filter(|d| d.get_file(d.path().join("ruleset.toml")).is_some())
        .map(|d| d.path().display().to_string())
        .collect();
    names.sort();
    names
}

/// Load `spec`: the name of an embedded rule set, or a folder holding `ruleset.toml`,
/// with every rule's patterns compiled (and so checked).
pub fn load_rule_set(spec: &str) -> Result<RuleSet, Error> {
    let mut set = load_rule_set_lazy(spec)?;
    set.retain_and_compile(|_| true)?;
    Ok(set)
}

/// Load `spec` with its rules checked but no pattern compiled yet: for a caller that
/// keeps only some rules and compiles those. Every print declaration has its `line`
/// (derived from the template where the rule set does not write it).
pub fn load_rule_set_lazy(spec: &str) -> Result<RuleSet, Error> {
    let mut set = load_rules_only(spec)?;
    super::prints::derive_lines(&mut set)?;
    Ok(set)
}

/// `load_rule_set_lazy` for a caller that never reads the print declarations (`add`,
/// `remove`): their derived lines are not worked out (the templates are not read as
/// Python), so a declaration without `line` keeps it empty.
pub fn load_rules_only(spec: &str) -> Result<RuleSet, Error> {
    let path = Path::new(spec);
    if path.join("ruleset.toml").is_file() {
        return load_from_dir(path);
    }
    if let Some(dir) = EMBEDDED.get_dir(spec) {
        let mut files: Vec<(String, String)> = Vec::new();
        for f in dir.files() {
            let name = f
                .path()
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            if name.ends_with(".toml") {
                let text = f.contents_utf8().ok_or_else(|| {
                    Error::invalid(format!("embedded rule file {name} is not UTF-8"))
                })?;
                files.push((name, text.to_string()));
            }
        }
        return build(format!("embedded:{spec}"), files);
    }
    if path.exists() {
        return Err(Error::NoManifest {
            spec: spec.to_string(),
            path: path.display().to_string(),
        });
    }
    Err(Error::NotFound {
        spec: spec.to_string(),
        builtin: embedded_names().join(", "),
    })
}

fn load_from_dir(dir: &Path) -> Result<RuleSet, Error> {
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Read {
        path: dir.display().to_string(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&p).map_err(|source| Error::Read {
                path: p.display().to_string(),
                source,
            })?;
            files.push((
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .to_string(),
                text,
            ));
        }
    }
    build(dir.display().to_string(), files)
}

fn build(origin: String, mut files: Vec<(String, String)>) -> Result<RuleSet, Error> {
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let manifest_text = files
        .iter()
        .find(|(n, _)| n == "ruleset.toml")
        .map(|(_, t)| t.clone())
        .ok_or_else(|| Error::invalid(format!("{origin}: no ruleset.toml")))?;
    let manifest = parse_manifest(&origin, &manifest_text)?;
    // Rules are read as tables first: a rule that `extends` another inherits what it does
    // not set, from a rule of any file.
    let mut tables: Vec<(String, toml::Table)> = Vec::new();
    for (name, text) in files.iter().filter(|(n, _)| n != "ruleset.toml") {
        let mut doc: toml::Table = toml::from_str(text).map_err(|e| {
            Error::invalid(format!("{origin}/{name}: {}", one_line(&e.to_string())))
        })?;
        let rules = match doc.remove("rule") {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => items,
            Some(_) => {
                return Err(Error::invalid(format!(
                    "{origin}/{name}: `rule` must be written [[rule]]"
                )));
            }
        };
        if let Some(key) = doc.keys().next() {
            return Err(Error::invalid(format!(
                "{origin}/{name}: unknown key `{key}` (a rule file holds [[rule]] tables)"
            )));
        }
        for item in rules {
            match item {
                toml::Value::Table(t) => tables.push((name.clone(), t)),
                _ => {
                    return Err(Error::invalid(format!(
                        "{origin}/{name}: `rule` must be written [[rule]]"
                    )));
                }
            }
        }
    }
    let mut rules = Vec::new();
    let mut rule_files = Vec::new();
    for (i, (name, table)) in tables.iter().enumerate() {
        let at = |id: &str| {
            let line = files
                .iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, text)| line_of_id(text, id));
            match line {
                Some(l) => format!("{origin}/{name}:{l}: rule {id}"),
                None => format!("{origin}/{name}: rule {id}"),
            }
        };
        let id = table
            .get("id")
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string();
        let merged = match table.get("extends").and_then(|v| v.as_str()) {
            None => table.clone(),
            Some(base) => {
                let found = tables
                    .iter()
                    .enumerate()
                    .find(|(j, (_, t))| {
                        *j != i
                            && t.get("extends").is_none()
                            && t.get("id").and_then(|v| v.as_str()) == Some(base)
                    })
                    .map(|(_, (_, t))| t);
                let Some(base_table) = found else {
                    return Err(Error::invalid(format!(
                        "{}: extends rule {base}, which the rule set does not have (or which extends another)",
                        at(&id)
                    )));
                };
                inherit(base_table, table, &manifest)
                    .map_err(|e| Error::invalid(format!("{}: {e}", at(&id))))?
            }
        };
        let id = merged
            .get("id")
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string();
        let rule: Rule = toml::Value::Table(merged)
            .try_into()
            .map_err(|e: toml::de::Error| {
                Error::invalid(format!("{}: {}", at(&id), one_line(&e.to_string())))
            })?;
        rules.push(rule);
        rule_files.push(name.clone());
    }
    let set = RuleSet {
        manifest,
        rules,
        origin,
        rule_files,
        patterns: Vec::new(),
    };
    set.validate()?;
    super::models::validate(&set)?;
    Ok(set)
}

/// The flags of `add` itself: a parameter's flag may not be one of them.
pub const OWN_FLAGS: &[&str] = &[
    "rules", "root", "param", "config", "dry-run", "partial", "json", "help", "color",
];

/// Read and check `ruleset.toml`.
fn parse_manifest(origin: &str, text: &str) -> Result<Manifest, Error> {
    let mut manifest: Manifest = toml::from_str(text).map_err(|e| {
        Error::invalid(format!(
            "{origin}/ruleset.toml: {}",
            one_line(&e.to_string())
        ))
    })?;
    if let Some(legacy) = manifest.detail_layers.take() {
        manifest
            .computed
            .entry("detail-layers".into())
            .or_insert(super::ComputedSpec::LayerCondition(legacy));
    }
    let at = format!("{origin}/ruleset.toml");
    let mut flags: Vec<&str> = Vec::new();
    for (name, p) in &manifest.params {
        if let Some(flag) = &p.flag {
            let ok = !flag.is_empty()
                && flag
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !flag.starts_with('-');
            if !ok {
                return Err(Error::invalid(format!(
                    "{at}: [params.{name}] flag = {flag:?}: a flag is lowercase letters, digits and dashes (`snapshot-dir`), without the leading --"
                )));
            }
            if OWN_FLAGS.contains(&flag.as_str()) {
                return Err(Error::invalid(format!(
                    "{at}: [params.{name}] flag = {flag:?} is one of add's own flags (--{})",
                    OWN_FLAGS.join(", --")
                )));
            }
            if flags.contains(&flag.as_str()) {
                return Err(Error::invalid(format!(
                    "{at}: [params.{name}] flag = {flag:?} is given to two parameters"
                )));
            }
            flags.push(flag);
        }
        if let Some(c) = p.default.as_ref().and_then(|d| d.computed())
            && !manifest.computed.contains_key(c)
        {
            let known: Vec<&str> = manifest.computed.keys().map(String::as_str).collect();
            return Err(Error::invalid(format!(
                "{at}: [params.{name}] computes its default with {c:?}, which no [computed.{c}] table declares (declared: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )));
        }
    }
    Ok(manifest)
}

/// Only the manifest of `spec` (an embedded rule set or a folder): enough to know the
/// parameters and flags, without reading the rules.
pub fn load_manifest(spec: &str) -> Result<Manifest, Error> {
    let path = Path::new(spec);
    if path.join("ruleset.toml").is_file() {
        let file = path.join("ruleset.toml");
        let text = std::fs::read_to_string(&file).map_err(|source| Error::Read {
            path: file.display().to_string(),
            source,
        })?;
        return parse_manifest(&path.display().to_string(), &text);
    }
    if let Some(file) = EMBEDDED.get_file(format!("{spec}/ruleset.toml")) {
        let text = file.contents_utf8().ok_or_else(|| {
            Error::invalid(format!(
                "embedded rule set {spec}: ruleset.toml is not UTF-8"
            ))
        })?;
        return parse_manifest(&format!("embedded:{spec}"), text);
    }
    // The full load says why, as `add` would.
    load_rule_set_lazy(spec).map(|s| s.manifest)
}

/// The 1-based line of `id = "<id>"` in a rule file, for messages.
fn line_of_id(text: &str, id: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            l.starts_with("id") && l.contains(&format!("\"{id}\""))
        })
        .map(|i| i + 1)
}

/// A rule that extends `base`: the base's fields, then the override's. Not inherited:
/// the examples (they test the base), the prints when the override has its own template
/// (they are what that template prints). Its id, unless it names one, is the base's with
/// the id tag of its one model.
fn inherit(
    base: &toml::Table,
    over: &toml::Table,
    manifest: &Manifest,
) -> Result<toml::Table, Error> {
    let mut out = base.clone();
    out.remove("examples");
    out.remove("models");
    if over.contains_key("template") {
        out.remove("prints");
    }
    for (k, v) in over {
        out.insert(k.clone(), v.clone());
    }
    if !over.contains_key("id") {
        let models: Vec<&str> = over
            .get("models")
            .and_then(|m| m.as_array())
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let base_id = base.get("id").and_then(|v| v.as_str()).unwrap_or("");
        let tag = match (models.as_slice(), &manifest.models) {
            ([one], Some(spec)) => spec.id_tag(one),
            _ => String::new(),
        };
        if tag.is_empty() {
            return Err(Error::invalid(format!(
                "a rule that extends {base_id} needs an `id` of its own (it is not for exactly one model with an id tag)"
            )));
        }
        out.insert("id".into(), toml::Value::String(tagged_id(base_id, &tag)));
    }
    Ok(out)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_detail_layers_table_is_a_computed_value() {
        let m = parse_manifest(
            "t",
            "name = \"t\"\ndescription = \"t\"\nsource_dir = \".\"\n[detail_layers]\ncount = 2\nindex = \"self.idx = $L\"\n",
        )
        .unwrap();
        assert!(matches!(
            m.computed.get("detail-layers"),
            Some(super::super::ComputedSpec::LayerCondition(s)) if s.count == 2
        ));
    }

    #[test]
    fn flags_are_checked() {
        let with = |flag: &str| {
            parse_manifest(
                "t",
                &format!(
                    "name = \"t\"\ndescription = \"t\"\nsource_dir = \".\"\n[params.A]\nkind = \"int\"\nflag = \"{flag}\"\nhelp = \"a\"\n"
                ),
            )
            .map_err(|e| e.to_string())
        };
        assert!(with("snapshot-dir").is_ok());
        assert!(with("--x").unwrap_err().contains("without the leading --"));
        assert!(with("Ranks").unwrap_err().contains("lowercase"));
        assert!(
            with("dry-run")
                .unwrap_err()
                .contains("one of add's own flags")
        );
    }
}
