//! Loading a rule set: from the copy embedded in the binary (`--rules memory-prints`,
//! the default) or from a folder (`--rules DIR`), with every rule checked before use.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use include_dir::{Dir, include_dir};

use super::error::Error;
use super::set::{RuleSet, tagged_id};
use super::{Manifest, Rule};

/// The raw files: for `embedded_names`, and for the TOML path that messages come from.
pub(super) static EMBEDDED: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/rules");

// `EMBEDDED_JSON` (sets and their files, by name) and `EMBEDDED_SETS` (how many): every
// embedded TOML file parsed by build.rs and written as JSON, which `serde_json` reads into
// the same `toml::Table` many times faster than `toml::from_str` (issue #19's CPU target).
include!(concat!(env!("OUT_DIR"), "/embedded_rules.rs"));

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
/// with every rule checked (its fields, its placeholders and metavariables: `names`). The
/// rules are raw: `instantiate` makes them the rules of one target. A print declaration
/// without `line` keeps it empty (`load_with_prints` derives it).
pub fn load(spec: &str) -> Result<RuleSet, Error> {
    match locate(spec) {
        Some(Located::Folder(path)) => load_from_dir(path),
        Some(found @ Located::Embedded(dir)) => {
            let origin = found.origin(spec);
            // The pre-parsed copy; should it fail, the TOML says why, with file and line.
            if let Some(set) = json_index(dir.path())
                && let Ok(rules) = from_json(&origin, set)
            {
                return Ok(rules);
            }
            build(origin, embedded_texts(dir)?)
        }
        None if Path::new(spec).exists() => Err(Error::NoManifest {
            spec: spec.to_string(),
            path: Path::new(spec).display().to_string(),
        }),
        None => Err(Error::NotFound {
            spec: spec.to_string(),
            builtin: embedded_names().join(", "),
        }),
    }
}

/// Where rule set `spec` is: a folder holding `ruleset.toml` first, else the embedded set
/// of that name. The one choice every loader (rules, manifest, examples) makes.
pub(super) enum Located<'a> {
    Folder(&'a Path),
    Embedded(&'static Dir<'static>),
}

impl Located<'_> {
    /// How messages name the set found for `spec`: its folder as given, or `embedded:NAME`.
    fn origin(&self, spec: &str) -> String {
        match self {
            Located::Folder(path) => path.display().to_string(),
            Located::Embedded(_) => format!("embedded:{spec}"),
        }
    }
}

pub(super) fn locate(spec: &str) -> Option<Located<'_>> {
    let path = Path::new(spec);
    if path.join("ruleset.toml").is_file() {
        return Some(Located::Folder(path));
    }
    EMBEDDED.get_dir(spec).map(Located::Embedded)
}

/// `load`, with every print declaration's `line` (derived from the template where the
/// rule set does not write it): for what reads the prints (`log`, `report`, `test-rules`,
/// `rules`, `explain`). `add` and `remove` never read them, and skip reading the templates
/// as Python.
pub fn load_with_prints(spec: &str) -> Result<RuleSet, Error> {
    let mut set = load(spec)?;
    super::prints::derive_lines(&mut set)?;
    Ok(set)
}

/// The `.toml` files of an embedded folder (a rule set, its examples), as text.
pub(super) fn embedded_texts(dir: &Dir<'_>) -> Result<Vec<(String, String)>, Error> {
    let mut files: Vec<(String, String)> = Vec::new();
    for f in dir.files() {
        let name = f
            .path()
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if name.ends_with(".toml") {
            let text = f
                .contents_utf8()
                .ok_or_else(|| Error::invalid(format!("embedded rule file {name} is not UTF-8")))?;
            files.push((name, text.to_string()));
        }
    }
    Ok(files)
}

/// Which entry of `EMBEDDED_JSON` holds the embedded set at `dir` (none: `dir` has no
/// `ruleset.toml`).
fn json_index(dir: &Path) -> Option<usize> {
    EMBEDDED_JSON
        .iter()
        .position(|(name, _)| Path::new(name) == dir)
}

/// Embedded set `set` from its pre-parsed JSON, through the same checks as `build`.
/// Its errors carry no line (the JSON has none): the caller then loads the TOML instead.
fn from_json(origin: &str, set: usize) -> Result<RuleSet, Error> {
    let manifest = embedded_manifest(origin, set)?;
    let mut tables = Vec::new();
    for (name, json) in EMBEDDED_JSON[set].1 {
        if *name != "ruleset.toml" {
            let doc: toml::Table = serde_json::from_str(json)
                .map_err(|e| Error::invalid(format!("{origin}/{name}: {e}")))?;
            rule_tables(origin, name, doc, &mut tables)?;
        }
    }
    assemble(origin.to_string(), manifest, tables, &[])
}

/// The checked manifest of embedded set `set`, read once per process: `add` wants it for
/// its flags before it loads the rules.
fn embedded_manifest(origin: &str, set: usize) -> Result<Manifest, Error> {
    static CACHE: [OnceLock<Manifest>; EMBEDDED_SETS] = [const { OnceLock::new() }; EMBEDDED_SETS];
    if let Some(m) = CACHE[set].get() {
        return Ok(m.clone());
    }
    let (name, files) = EMBEDDED_JSON[set];
    let from_json = files
        .iter()
        .find(|(n, _)| *n == "ruleset.toml")
        .and_then(|(_, json)| serde_json::from_str::<toml::Table>(json).ok())
        .and_then(|t| toml::Value::Table(t).try_into::<Manifest>().ok());
    let manifest = match from_json {
        Some(m) => check_manifest(origin, m)?,
        // Not read back (it should always be): the TOML says why.
        None => {
            let text = EMBEDDED
                .get_file(format!("{name}/ruleset.toml"))
                .and_then(|f| f.contents_utf8())
                .ok_or_else(|| {
                    Error::invalid(format!("{origin}: ruleset.toml is missing or not UTF-8"))
                })?;
            parse_manifest(origin, text)?
        }
    };
    let _ = CACHE[set].set(manifest.clone());
    Ok(manifest)
}

fn load_from_dir(dir: &Path) -> Result<RuleSet, Error> {
    build(dir.display().to_string(), toml_texts(dir)?)
}

/// The `.toml` files of folder `dir` (a rule set, its examples), as (name, text), by name.
pub(super) fn toml_texts(dir: &Path) -> Result<Vec<(String, String)>, Error> {
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
    Ok(files)
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
        let doc: toml::Table = toml::from_str(text).map_err(|e| {
            Error::invalid(format!("{origin}/{name}: {}", one_line(&e.to_string())))
        })?;
        rule_tables(&origin, name, doc, &mut tables)?;
    }
    assemble(origin, manifest, tables, &files)
}

/// The `[[rule]]` tables of rule file `name`, appended to `tables` with the file's name.
fn rule_tables(
    origin: &str,
    name: &str,
    mut doc: toml::Table,
    tables: &mut Vec<(String, toml::Table)>,
) -> Result<(), Error> {
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
            toml::Value::Table(t) => tables.push((name.to_string(), t)),
            _ => {
                return Err(Error::invalid(format!(
                    "{origin}/{name}: `rule` must be written [[rule]]"
                )));
            }
        }
    }
    Ok(())
}

/// The rule set from its manifest and rule tables: `extends` resolved, every rule read
/// and checked. `files` (name, text) give the lines of messages; without them (the
/// pre-parsed embedded copy) a message names the file only.
fn assemble(
    origin: String,
    manifest: Manifest,
    tables: Vec<(String, toml::Table)>,
    files: &[(String, String)],
) -> Result<RuleSet, Error> {
    let at = |name: &str, id: &str| {
        let line = files
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, text)| line_of_id(text, id));
        match line {
            Some(l) => format!("{origin}/{name}:{l}: rule {id}"),
            None => format!("{origin}/{name}: rule {id}"),
        }
    };
    // The rules that extend another are merged first, while their bases are whole; every
    // other table is then moved into its rule, not copied (issue #19: CPU). An error waits
    // for its rule's turn, so the first rule at fault is the one named.
    let merged: Vec<Option<Result<toml::Table, Error>>> = tables
        .iter()
        .enumerate()
        .map(|(i, (name, table))| {
            let base = table.get("extends").and_then(|v| v.as_str())?;
            let id = table.get("id").and_then(|v| v.as_str()).unwrap_or("?");
            let found = tables
                .iter()
                .enumerate()
                .find(|(j, (_, t))| {
                    *j != i
                        && t.get("extends").is_none()
                        && t.get("id").and_then(|v| v.as_str()) == Some(base)
                })
                .map(|(_, (_, t))| t);
            Some(match found {
                None => Err(Error::invalid(format!(
                    "{}: extends rule {base}, which the rule set does not have (or which extends another)",
                    at(name, id)
                ))),
                Some(base_table) => inherit(base_table, table, &manifest)
                    .map_err(|e| Error::invalid(format!("{}: {e}", at(name, id)))),
            })
        })
        .collect();
    let mut rules = Vec::new();
    let mut rule_files = Vec::new();
    for ((name, table), merged) in tables.into_iter().zip(merged) {
        let table = match merged {
            None => table,
            Some(merged) => merged?,
        };
        let id = table
            .get("id")
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string();
        let rule: Rule = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| {
                Error::invalid(format!("{}: {}", at(&name, &id), one_line(&e.to_string())))
            })?;
        rules.push(rule);
        rule_files.push(name);
    }
    let set = RuleSet {
        manifest,
        rules,
        origin,
        rule_files,
    };
    set.validate()?;
    check_groups(&set, files)?;
    super::models::validate(&set)?;
    super::names::check(&set, &|i| rule_at(&set, files, i))?;
    super::names::check_roles(&set, &|role| role_at(&set, files, role))?;
    Ok(set)
}

/// Where rule `i` of `set` is written, for messages: `origin/file:line: rule id`, the line
/// its id is on (or, for a rule whose id is derived, its `[[rule]]` header). Without the
/// files' text (the pre-parsed embedded copy), the file alone.
fn rule_at(set: &RuleSet, files: &[(String, String)], i: usize) -> String {
    let (name, id) = (&set.rule_files[i], &set.rules[i].id);
    let text = files.iter().find(|(n, _)| n == name).map(|(_, t)| t);
    let nth = set.rule_files[..i].iter().filter(|f| *f == name).count();
    let line = text.and_then(|t| line_of_id(t, id).or_else(|| line_of_header(t, "[[rule]]", nth)));
    match line {
        Some(l) => format!("{}/{name}:{l}: rule {id}", set.origin),
        None => format!("{}/{name}: rule {id}", set.origin),
    }
}

/// Where role `role` is declared in `ruleset.toml`, for messages.
fn role_at(set: &RuleSet, files: &[(String, String)], role: &str) -> String {
    let header = format!("[models.roles.{role}]");
    let line = files
        .iter()
        .find(|(n, _)| n == "ruleset.toml")
        .and_then(|(_, t)| t.lines().position(|l| l.trim() == header))
        .map(|i| i + 1);
    match line {
        Some(l) => format!("{}/ruleset.toml:{l}: {header}", set.origin),
        None => format!("{}/ruleset.toml: {header}", set.origin),
    }
}

/// The 1-based line of the `nth` (from 0) `header` (`[[rule]]`, `[[example]]`) of a file.
pub(super) fn line_of_header(text: &str, header: &str, nth: usize) -> Option<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.split_whitespace().collect::<String>() == header)
        .nth(nth)
        .map(|(i, _)| i + 1)
}

/// `[groups]` names only groups the rules have, and no group requires itself.
fn check_groups(set: &RuleSet, files: &[(String, String)]) -> Result<(), Error> {
    let text = files
        .iter()
        .find(|(n, _)| n == "ruleset.toml")
        .map(|(_, t)| t.as_str());
    let mut known: Vec<&str> = set.rules.iter().map(|r| r.group.as_str()).collect();
    known.sort_unstable();
    known.dedup();
    for (group, spec) in &set.manifest.groups {
        let (header, requires) = text.map_or((None, None), |t| group_lines(t, group));
        let at = |line: Option<usize>| match line {
            Some(l) => format!("{}/ruleset.toml:{l}: [groups.{group}]", set.origin),
            None => format!("{}/ruleset.toml: [groups.{group}]", set.origin),
        };
        if !known.contains(&group.as_str()) {
            return Err(Error::invalid(format!(
                "{}: no rule is in group {group:?} (the groups: {})",
                at(header),
                known.join(", ")
            )));
        }
        for r in &spec.requires {
            if r == group {
                return Err(Error::invalid(format!(
                    "{}: requires itself",
                    at(requires.or(header))
                )));
            }
            if !known.contains(&r.as_str()) {
                return Err(Error::invalid(format!(
                    "{}: requires group {r:?}, which no rule is in (the groups: {})",
                    at(requires.or(header)),
                    known.join(", ")
                )));
            }
        }
    }
    Ok(())
}

/// The 1-based lines of `[groups.<group>]` and of the `requires` below it in
/// `ruleset.toml`, for messages.
fn group_lines(text: &str, group: &str) -> (Option<usize>, Option<usize>) {
    let headers = [format!("[groups.{group}]"), format!("[groups.\"{group}\"]")];
    let lines: Vec<&str> = text.lines().collect();
    let Some(h) = lines.iter().position(|l| {
        let l: String = l
            .split('#')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        headers.contains(&l)
    }) else {
        return (None, None);
    };
    let requires = lines[h + 1..]
        .iter()
        .take_while(|l| !l.trim_start().starts_with('['))
        .position(|l| l.trim_start().starts_with("requires"))
        .map(|i| h + 2 + i);
    (Some(h + 1), requires)
}

/// Read and check `ruleset.toml`.
fn parse_manifest(origin: &str, text: &str) -> Result<Manifest, Error> {
    let manifest: Manifest = toml::from_str(text).map_err(|e| {
        Error::invalid(format!(
            "{origin}/ruleset.toml: {}",
            one_line(&e.to_string())
        ))
    })?;
    check_manifest(origin, manifest)
}

/// A read manifest checked: its flags and computed defaults.
fn check_manifest(origin: &str, mut manifest: Manifest) -> Result<Manifest, Error> {
    manifest.forbid_inside = super::compilers::forbidden(manifest.compiled.as_ref());
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

/// How messages name the rule set `spec`: its folder as given, or `embedded:NAME`.
pub fn origin_of(spec: &str) -> String {
    match locate(spec) {
        Some(found) => found.origin(spec),
        None => format!("embedded:{spec}"),
    }
}

/// Only the manifest of `spec` (an embedded rule set or a folder): enough to know the
/// parameters and flags, without reading the rules.
pub fn load_manifest(spec: &str) -> Result<Manifest, Error> {
    match locate(spec) {
        Some(Located::Folder(path)) => {
            let file = path.join("ruleset.toml");
            let text = std::fs::read_to_string(&file).map_err(|source| Error::Read {
                path: file.display().to_string(),
                source,
            })?;
            parse_manifest(&path.display().to_string(), &text)
        }
        Some(found @ Located::Embedded(dir))
            if let Some(file) = dir.get_file(dir.path().join("ruleset.toml")) =>
        {
            let origin = found.origin(spec);
            if let Some(set) = json_index(dir.path()) {
                return embedded_manifest(&origin, set);
            }
            let text = file.contents_utf8().ok_or_else(|| {
                Error::invalid(format!(
                    "embedded rule set {spec}: ruleset.toml is not UTF-8"
                ))
            })?;
            parse_manifest(&origin, text)
        }
        // The full load says why, as `add` would.
        _ => load(spec).map(|s| s.manifest),
    }
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

pub(super) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pre-parsed copy of every embedded set (build.rs) is what its TOML gives: the
    /// same files, the same tables, the same rule set, and it loads without the fallback.
    #[test]
    fn the_pre_parsed_embedded_sets_are_their_toml() {
        let names = embedded_names();
        assert_eq!(
            names,
            EMBEDDED_JSON
                .iter()
                .map(|(n, _)| n.to_string())
                .collect::<Vec<_>>()
        );
        assert!(
            names.contains(&"memory-prints".to_string()) && names.contains(&"nvtx".to_string())
        );
        for (set, name) in names.iter().enumerate() {
            let dir = EMBEDDED.get_dir(name).unwrap();
            let mut texts = embedded_texts(dir).unwrap();
            texts.sort();
            let files = EMBEDDED_JSON[set].1;
            assert_eq!(
                texts.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
                files.iter().map(|(n, _)| *n).collect::<Vec<_>>()
            );
            for ((file, text), (_, json)) in texts.iter().zip(files) {
                let from_toml: toml::Table = toml::from_str(text).unwrap();
                let from_json: toml::Table = serde_json::from_str(json).unwrap();
                assert_eq!(from_toml, from_json, "{name}/{file}");
            }
            let origin = format!("embedded:{name}");
            let fast = from_json(&origin, set).unwrap();
            let slow = build(origin.clone(), texts).unwrap();
            assert!(!slow.rules.is_empty());
            assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{name}");
            // And what `add` gets: the cached manifest, then the cached one again.
            let manifest = format!("{:?}", slow.manifest);
            assert_eq!(format!("{:?}", load_manifest(name).unwrap()), manifest);
            assert_eq!(format!("{:?}", load_manifest(name).unwrap()), manifest);
            assert_eq!(format!("{:?}", load(name).unwrap()), format!("{slow:?}"));
            // The examples: the same files and tables, read into the same examples of the
            // same rules; `load` (what `add` uses) has none of them.
            let examples = super::super::examples::pre_parsed(name);
            let mut example_texts = super::super::examples::embedded_texts(name).unwrap();
            example_texts.sort();
            assert!(!examples.is_empty(), "{name}");
            assert_eq!(
                example_texts
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>(),
                examples.iter().map(|(n, _)| *n).collect::<Vec<_>>()
            );
            for ((file, text), (_, json)) in example_texts.iter().zip(examples) {
                let from_toml: toml::Table = toml::from_str(text).unwrap();
                let from_json: toml::Table = serde_json::from_str(json).unwrap();
                assert_eq!(from_toml, from_json, "{name}/examples/{file}");
            }
            let has_rule_file = |n: &str| dir.get_file(dir.path().join(n)).is_some();
            let fast = super::super::examples::from_json(&slow, name, examples, &has_rule_file);
            let slow_examples =
                super::super::examples::from_texts(&slow, name, example_texts, &has_rule_file);
            let (fast, slow_examples) = (fast.unwrap(), slow_examples.unwrap());
            assert_eq!(format!("{fast:?}"), format!("{slow_examples:?}"), "{name}");
            assert!(slow.rules.iter().all(|r| r.examples.is_empty()), "{name}");
            let with = super::super::load_with_examples(name).unwrap();
            for (i, rule) in with.rules.iter().enumerate() {
                let own: Vec<_> = fast
                    .iter()
                    .filter(|(r, _)| *r == i)
                    .map(|(_, e)| e)
                    .collect();
                assert_eq!(
                    format!("{:?}", rule.examples.iter().collect::<Vec<_>>()),
                    format!("{own:?}")
                );
            }
        }
    }

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
    }
}
