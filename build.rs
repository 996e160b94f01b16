//! The rule sets under rules/ are embedded in the binary. Besides the raw files
//! (`include_dir`, for messages and the TOML fallback), every `rules/<set>/*.toml` is parsed
//! here, once, and written as JSON into OUT_DIR: at run time `serde_json` reads it into the
//! same `toml::Table` that `toml::from_str` would give, for a fraction of the CPU. Parsing
//! the embedded TOML was ~8 M of the ~245 M instructions of an `add` on a real checkout
//! (issue #19: `add` within 1.5x of reading and parsing the target files).
//!
//! A set's rule examples (`examples/<stem>.toml`, `[[example]]` tables) are pre-parsed the
//! same way into a table of their own, which only `rules` and `test-rules` read: `add`
//! never deserializes them.
//!
//! A rule or examples file that is not valid TOML fails the build here, naming the file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=rules");
    // The skills are embedded too (src/skills): a changed SKILL.md rebuilds the binary.
    println!("cargo:rerun-if-changed=skills");
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let mut sets: Vec<_> = std::fs::read_dir("rules")
        .unwrap_or_else(|e| fail(&format!("rules: {e}")))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("ruleset.toml").is_file())
        .collect();
    sets.sort();
    // `EMBEDDED_JSON: &[(set, &[(file, json)])]`, sets and files by name.
    let mut code = format!("const EMBEDDED_SETS: usize = {};\n", sets.len());
    code.push_str(&json_table("EMBEDDED_JSON", &sets, |set| set.to_path_buf()));
    write(&out_dir, "embedded_rules.rs", &code);
    // `EMBEDDED_EXAMPLES_JSON`, the same for each set's `examples/` folder (none: no files).
    let examples = json_table("EMBEDDED_EXAMPLES_JSON", &sets, |set| set.join("examples"));
    write(&out_dir, "embedded_examples.rs", &examples);
}

/// `static NAME: &[(&str, &[(&str, &str)])]`: for each set, the `.toml` files of the folder
/// `folder(set)` (none when it is missing), parsed and written as JSON, by name.
fn json_table(name: &str, sets: &[PathBuf], folder: impl Fn(&Path) -> PathBuf) -> String {
    let mut code = format!("static {name}: &[(&str, &[(&str, &str)])] = &[\n");
    for set in sets {
        let _ = writeln!(code, "    ({:?}, &[", file_name(set));
        let dir = folder(set);
        let mut files: Vec<_> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "toml"))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => fail(&format!("{}: {e}", dir.display())),
        };
        files.sort();
        for file in &files {
            let at = file.display().to_string();
            let text =
                std::fs::read_to_string(file).unwrap_or_else(|e| fail(&format!("{at}: {e}")));
            let table: toml::Table =
                toml::from_str(&text).unwrap_or_else(|e| fail(&format!("{at}: {e}")));
            check_json_safe(&at, &toml::Value::Table(table.clone()));
            let json =
                serde_json::to_string(&table).unwrap_or_else(|e| fail(&format!("{at}: {e}")));
            let _ = writeln!(code, "        ({:?}, {json:?}),", file_name(file));
        }
        code.push_str("    ]),\n");
    }
    code.push_str("];\n");
    code
}

fn write(out_dir: &str, name: &str, code: &str) {
    let dest = Path::new(out_dir).join(name);
    std::fs::write(&dest, code).unwrap_or_else(|e| fail(&format!("{}: {e}", dest.display())));
}

/// JSON has no datetimes and no inf/nan: an embedded rule file using them could not come
/// back as the same table.
fn check_json_safe(at: &str, v: &toml::Value) {
    match v {
        toml::Value::Float(f) if !f.is_finite() => fail(&format!(
            "{at}: {f}: an embedded rule file holds finite numbers only"
        )),
        toml::Value::Datetime(d) => fail(&format!(
            "{at}: {d}: an embedded rule file holds no datetimes"
        )),
        toml::Value::Array(items) => items.iter().for_each(|i| check_json_safe(at, i)),
        toml::Value::Table(t) => t.values().for_each(|i| check_json_safe(at, i)),
        _ => {}
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

fn fail(msg: &str) -> ! {
    eprintln!("error: embedded rule set: {msg}");
    std::process::exit(1)
}
