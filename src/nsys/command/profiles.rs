//! The trace sets (`profiles.toml`): the profiling guide's default, each trainer's own capture,
//! and the extras added on request, each with the one line that says what it adds and costs.

use serde::Deserialize;
use std::collections::BTreeMap;

use super::error::CommandError;
use super::scripts::Script;

/// The built-in table.
pub const BUILTIN: &str = include_str!("profiles.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profiles {
    /// The folder the reports go to by default.
    pub folder: String,
    pub default: Set,
    #[serde(default)]
    pub trainer: Vec<Trainer>,
    pub extra: BTreeMap<String, Extra>,
}

/// What nsys is asked to record.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Set {
    pub output: String,
    pub options: Vec<String>,
    #[serde(default)]
    pub extras: Vec<String>,
}

/// A trainer: how to recognise its launches, and its own capture set.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trainer {
    pub name: String,
    pub source: String,
    pub args: Vec<String>,
    pub python: Vec<String>,
    pub shell: Vec<String>,
    pub output: String,
    pub options: Vec<String>,
    #[serde(default)]
    pub extras: Vec<String>,
    pub own_nvtx: Option<String>,
    pub capture_start: Option<String>,
    pub capture_stop: Option<String>,
    #[serde(default)]
    pub capture_markers: Vec<String>,
    pub capture_example: Option<String>,
}

impl Trainer {
    pub fn set(&self) -> Set {
        Set {
            output: self.output.clone(),
            options: self.options.clone(),
            extras: self.extras.clone(),
        }
    }

    /// Whether a Python script sets the capture window (all markers appear in it).
    pub fn sets_window(&self, script: &Script) -> bool {
        !self.capture_markers.is_empty()
            && self.capture_markers.iter().all(|m| script.code.contains(m))
    }
}

/// An addition to a set: the request flag, what it adds to nsys, and why one would.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Extra {
    pub request: String,
    #[serde(default)]
    pub trace: Vec<String>,
    #[serde(default)]
    pub options: Vec<String>,
    pub why: String,
}

impl Profiles {
    pub fn builtin() -> Result<Profiles, CommandError> {
        Profiles::parse(BUILTIN, "profiles.toml (built in)")
    }

    pub fn parse(text: &str, name: &str) -> Result<Profiles, CommandError> {
        let p: Profiles =
            toml::from_str(text).map_err(|e| CommandError::Table(format!("{name}: {e}")))?;
        let sets = std::iter::once(("default", p.default.extras.as_slice(), &p.default.options))
            .chain(
                p.trainer
                    .iter()
                    .map(|t| (t.name.as_str(), t.extras.as_slice(), &t.options)),
            );
        for (set, extras, options) in sets {
            if let Some(e) = extras.iter().find(|e| !p.extra.contains_key(*e)) {
                return Err(CommandError::Table(format!(
                    "{name}: set {set} names extra {e:?}, which has no [extra.{e}]"
                )));
            }
            if let Some(o) = options.iter().find(|o| !is_long_option(o)) {
                return Err(CommandError::Table(format!(
                    "{name}: set {set}: option {o:?} is not written --flag=value"
                )));
            }
            if !options.iter().any(|o| o.starts_with("--trace=")) {
                return Err(CommandError::Table(format!(
                    "{name}: set {set} has no --trace= option"
                )));
            }
        }
        Ok(p)
    }

    /// The trainer the launch runs, if one is recognised: by an argument, by the Python scripts
    /// it names, or by the shell scripts it runs.
    pub fn recognise(
        &self,
        launch: &[String],
        python: &[Script],
        shell: &[Script],
    ) -> Option<&Trainer> {
        self.trainer.iter().find(|t| {
            launch.iter().any(|a| t.args.iter().any(|m| a.contains(m)))
                || python
                    .iter()
                    .any(|s| t.python.iter().any(|m| s.code.contains(m)))
                || shell
                    .iter()
                    .any(|s| t.shell.iter().any(|m| s.code.contains(m)))
        })
    }
}

fn is_long_option(o: &str) -> bool {
    o.starts_with("--")
        && o.split_once('=')
            .is_some_and(|(f, v)| f.len() > 2 && !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_parses_and_names_real_extras() {
        let p = Profiles::builtin().unwrap();
        let pith = p.trainer.iter().find(|t| t.name == "pithtrain").unwrap();
        assert!(pith.options.contains(&"--trace=cuda,nvtx".to_string()));
        assert!(pith.extras.is_empty());
        for e in &p.default.extras {
            assert!(p.extra.contains_key(e));
        }
    }

    #[test]
    fn a_set_naming_a_missing_extra_is_refused() {
        let text = BUILTIN.replace(
            "extras = [\"osrt\", \"cuda-memory-usage\"",
            "extras = [\"nope\", \"cuda-memory-usage\"",
        );
        let e = Profiles::parse(&text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("\"nope\""), "{e}");
        let text = BUILTIN.replace("\"--delay=0\"", "\"--delay 0\"");
        assert!(Profiles::parse(&text, "t.toml").is_err());
    }
}
