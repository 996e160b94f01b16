//! The launcher tables (`launchers.toml`) and reading a launcher's own options: where srun's or
//! mpirun's options end and the program it starts begins, and what those options say about the
//! shape of the job (nodes, tasks per node).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::error::CommandError;

/// The built-in table.
pub const BUILTIN: &str = include_str!("launchers.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launchers {
    pub srun: Srun,
    pub mpirun: Mpirun,
    pub torchrun: Torchrun,
    pub refuse: BTreeMap<String, Refusal>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Srun {
    pub programs: Vec<String>,
    pub short_value: String,
    pub short_attached: String,
    pub short_flag: String,
    pub long_value: Vec<String>,
    pub long_attached: Vec<String>,
    pub long_flag: Vec<String>,
    pub refuse: BTreeMap<String, String>,
    pub separator: String,
    pub nodes: Vec<String>,
    pub ntasks: Vec<String>,
    pub ntasks_per_node: Vec<String>,
    pub node_id: String,
    pub rank: String,
    pub node_tokens: Vec<String>,
    pub task_tokens: Vec<String>,
    pub rank_tokens: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mpirun {
    pub programs: Vec<String>,
    pub value: Vec<String>,
    pub value2: Vec<String>,
    pub flag: Vec<String>,
    pub refuse: BTreeMap<String, String>,
    pub separator: String,
    pub rank_tokens: Vec<String>,
    pub node_tokens: Vec<String>,
    pub task_tokens: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Torchrun {
    pub programs: Vec<String>,
    pub modules: Vec<String>,
    pub nnodes: String,
    pub node_tokens: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    pub why: String,
    pub instead: String,
}

impl Launchers {
    pub fn builtin() -> Result<Launchers, CommandError> {
        toml::from_str(BUILTIN)
            .map_err(|e| CommandError::Table(format!("launchers.toml (built in): {e}")))
    }

    /// Whether `word` runs `python -m` one of torchrun's modules at `words[i..]`.
    pub fn is_torchrun_at(&self, words: &[String], i: usize) -> bool {
        let w = &words[i];
        if self.torchrun.programs.iter().any(|p| p == base(w)) {
            return true;
        }
        base(w).starts_with("python")
            && words.get(i + 1).is_some_and(|m| m == "-m")
            && words
                .get(i + 2)
                .is_some_and(|m| self.torchrun.modules.contains(m))
    }
}

/// The file name of a program word (`/usr/bin/srun` is `srun`).
pub fn base(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// A launcher's options as read: canonical name (`--nodes`, `-N`) and value.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub values: Vec<(String, Option<String>)>,
}

impl Options {
    /// The last value given under any of `names`.
    pub fn get(&self, names: &[String]) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(n, _)| names.contains(n))
            .and_then(|(_, v)| v.as_deref())
    }
}

/// Read srun's options at the start of `words` (the words after `srun`): the index where the
/// program starts, and the options.
pub fn scan_srun(s: &Srun, words: &[String]) -> Result<(usize, Options), CommandError> {
    let mut opts = Options::default();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w == "--" {
            return after_separator_check(words, i + 1, &s.separator, "srun", opts);
        }
        if !w.starts_with('-') || w == "-" || *w == s.separator {
            return after_separator_check(words, i, &s.separator, "srun", opts);
        }
        let next = words.get(i + 1);
        let took_next = match w.strip_prefix("--") {
            Some(long) => srun_long(s, w, long, next, &mut opts)?,
            None => srun_short(s, w, next, &mut opts)?,
        };
        i += 1 + usize::from(took_next);
    }
    after_separator_check(words, words.len(), &s.separator, "srun", opts)
}

const SRUN_PLACE_YOURSELF: &str =
    "place nsys yourself, right before the program: `srun OPTIONS nsys profile ... PROGRAM`";

/// One long option (`--nodes 2`, `--nodes=2`, `--nod 2`); whether it took the next word.
fn srun_long(
    s: &Srun,
    w: &str,
    long: &str,
    next: Option<&String>,
    opts: &mut Options,
) -> Result<bool, CommandError> {
    let (name, attached) = match long.split_once('=') {
        Some((n, v)) => (n, Some(v.to_string())),
        None => (long, None),
    };
    let Some((name, kind)) = resolve_long(s, name, w)? else {
        if attached.is_some() {
            // Unknown, but written with `=`: it cannot take the next word.
            opts.values.push((format!("--{name}"), attached));
            return Ok(false);
        }
        return Err(CommandError::unplaceable(
            format!(
                "srun option {w} is not one instrument knows, so it cannot tell whether the next word is its value or the program"
            ),
            format!("write it as {w}=VALUE if it takes one, or {SRUN_PLACE_YOURSELF}"),
        ));
    };
    if let Some(why) = s.refuse.get(name) {
        return Err(CommandError::unplaceable(why.clone(), SRUN_PLACE_YOURSELF));
    }
    let (value, took) = match (kind, attached) {
        (_, Some(v)) => (Some(v), false),
        (Kind::Value, None) => match next {
            Some(v) => (Some(v.clone()), true),
            None => {
                return Err(CommandError::unplaceable(
                    format!("srun option {w} has no value"),
                    "give it one, then the program",
                ));
            }
        },
        _ => (None, false),
    };
    opts.values.push((format!("--{name}"), value));
    Ok(took)
}

/// A long option's name and kind: exact, or an unambiguous prefix as getopt_long takes it.
fn resolve_long<'a>(
    s: &'a Srun,
    name: &str,
    w: &str,
) -> Result<Option<(&'a str, Kind)>, CommandError> {
    let all = s
        .long_value
        .iter()
        .map(|n| (n.as_str(), Kind::Value))
        .chain(s.long_attached.iter().map(|n| (n.as_str(), Kind::Attached)))
        .chain(s.long_flag.iter().map(|n| (n.as_str(), Kind::Flag)));
    let candidates: Vec<(&str, Kind)> = all.filter(|(n, _)| n.starts_with(name)).collect();
    if let Some(exact) = candidates.iter().find(|(n, _)| *n == name) {
        return Ok(Some(*exact));
    }
    match candidates.len() {
        0 => Ok(None),
        1 => Ok(Some(candidates[0])),
        _ => Err(CommandError::unplaceable(
            format!(
                "srun option {w} is short for more than one option ({})",
                candidates
                    .iter()
                    .map(|(n, _)| format!("--{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "write it out in full",
        )),
    }
}

/// A cluster of short options (`-lu`, `-N2`, `-N 2`): flags, then at most one that takes a
/// value; whether it took the next word.
fn srun_short(
    s: &Srun,
    w: &str,
    next: Option<&String>,
    opts: &mut Options,
) -> Result<bool, CommandError> {
    let chars: Vec<char> = w[1..].chars().collect();
    for (j, &c) in chars.iter().enumerate() {
        let rest: String = chars[j + 1..].iter().collect();
        if s.short_flag.contains(c) {
            opts.values.push((format!("-{c}"), None));
            continue;
        }
        if s.short_value.contains(c) {
            if !rest.is_empty() {
                opts.values.push((format!("-{c}"), Some(rest)));
                return Ok(false);
            }
            let Some(v) = next else {
                return Err(CommandError::unplaceable(
                    format!("srun option -{c} has no value"),
                    "give it one, then the program",
                ));
            };
            opts.values.push((format!("-{c}"), Some(v.clone())));
            return Ok(true);
        }
        if s.short_attached.contains(c) {
            opts.values
                .push((format!("-{c}"), (!rest.is_empty()).then_some(rest)));
            return Ok(false);
        }
        return Err(CommandError::unplaceable(
            format!(
                "srun option -{c} (in {w}) is not one instrument knows, so it cannot tell where the program starts"
            ),
            SRUN_PLACE_YOURSELF,
        ));
    }
    Ok(false)
}

/// The program starts at `words[i]`; a separator word after it still belongs to the launcher
/// (`srun A : B`, `mpirun A : B`), so nsys before `A` would wrap the rest too.
fn after_separator_check(
    words: &[String],
    i: usize,
    separator: &str,
    launcher: &str,
    opts: Options,
) -> Result<(usize, Options), CommandError> {
    if i >= words.len() {
        return Err(CommandError::unplaceable(
            format!("{launcher} is given no program to run"),
            format!(
                "end the launch with the program {launcher} starts, e.g. `{launcher} ... torchrun ...`"
            ),
        ));
    }
    if words[i..].iter().any(|w| w == separator) {
        return Err(CommandError::unplaceable(
            format!(
                "{launcher}'s `{separator}` starts another program of the same launch (a heterogeneous or MPMD job)"
            ),
            "give instrument one program at a time, or put `nsys profile ...` before each program yourself",
        ));
    }
    Ok((i, opts))
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Value,
    Attached,
    Flag,
}

/// Read mpirun's options at the start of `words` (the words after `mpirun`).
pub fn scan_mpirun(m: &Mpirun, words: &[String]) -> Result<(usize, Options), CommandError> {
    let place_yourself =
        "place nsys yourself, right before the program: `mpirun OPTIONS nsys profile ... PROGRAM`";
    let mut opts = Options::default();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if *w == m.separator {
            return Err(CommandError::unplaceable(
                "mpirun's `:` starts another program of an MPMD launch",
                "put `nsys profile ...` before each program yourself",
            ));
        }
        if !w.starts_with('-') || w == "-" {
            return after_separator_check(words, i, &m.separator, "mpirun", opts);
        }
        let (name, attached) = match w.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (w.as_str(), None),
        };
        if let Some(why) = m.refuse.get(name) {
            return Err(CommandError::unplaceable(why.clone(), place_yourself));
        }
        let takes = if m.flag.iter().any(|f| f == name) {
            0
        } else if m.value.iter().any(|f| f == name) {
            1
        } else if m.value2.iter().any(|f| f == name) {
            2
        } else if attached.is_some() {
            0
        } else {
            return Err(CommandError::unplaceable(
                format!(
                    "mpirun option {w} is not one instrument knows, so it cannot tell where the program starts"
                ),
                place_yourself,
            ));
        };
        let takes = if attached.is_some() { 0 } else { takes };
        if i + takes >= words.len() {
            return Err(CommandError::unplaceable(
                format!("mpirun option {w} is missing its value or the program after it"),
                "give the option its value, then the program",
            ));
        }
        let value = match takes {
            0 => attached,
            _ => Some(words[i + 1..=i + takes].join(" ")),
        };
        opts.values.push((name.to_string(), value));
        i += 1 + takes;
    }
    after_separator_check(words, words.len(), &m.separator, "mpirun", opts)
}

/// torchrun's `--nnodes` (`2`, or the most of a range `1:4`), where written as a number.
pub fn torchrun_nnodes(t: &Torchrun, words: &[String]) -> Option<u32> {
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        let value = if *w == t.nnodes {
            words.get(i + 1).map(String::as_str)
        } else {
            w.strip_prefix(t.nnodes.as_str())
                .and_then(|r| r.strip_prefix('='))
        };
        if let Some(v) = value {
            found = v.rsplit(':').next().and_then(|n| n.parse::<u32>().ok());
        }
    }
    found
}

/// A count as srun takes it: `2`, or the least of a range `2-4`.
pub fn least_count(v: &str) -> Option<u32> {
    v.split(['-', ':']).next().and_then(|n| n.parse().ok())
}

/// An exact count: `2` (not a range).
pub fn exact_count(v: &str) -> Option<u32> {
    v.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_tables_parse() {
        let t = Launchers::builtin().unwrap();
        assert!(t.srun.long_value.iter().any(|n| n == "nodes"));
        assert!(t.srun.short_value.contains('N') && t.srun.short_flag.contains('l'));
    }

    #[test]
    fn srun_options_end_at_the_program() {
        let t = Launchers::builtin().unwrap();
        let w =
            words("-N 2 -W 0 -o logging/x.log --nodes=2 -lu --gpus-per-node 8 torchrun --nnodes 2");
        let (i, o) = scan_srun(&t.srun, &w).unwrap();
        assert_eq!(w[i], "torchrun");
        assert_eq!(o.get(&t.srun.nodes), Some("2"));
        assert_eq!(o.get(&["-o".to_string()]), Some("logging/x.log"));
        // getopt's abbreviations, attached short values, optional values only attached.
        let w = words("--ntasks-per-n 1 -N2 -I --kill-on-bad-exit prog");
        let (i, o) = scan_srun(&t.srun, &w).unwrap();
        assert_eq!(w[i], "prog");
        assert_eq!(o.get(&t.srun.ntasks_per_node), Some("1"));
        assert_eq!(o.get(&t.srun.nodes), Some("2"));
        // Unknown without `=`: refused; with `=`: accepted.
        assert!(scan_srun(&t.srun, &words("--frobnicate x prog")).is_err());
        let (i, _) = scan_srun(&t.srun, &words("--frobnicate=x prog")).unwrap();
        assert_eq!(i, 1);
        // Ambiguous abbreviation, no program, heterogeneous jobs, --multi-prog.
        assert!(scan_srun(&t.srun, &words("--nt 2 prog")).is_err());
        assert!(scan_srun(&t.srun, &words("-N 2")).is_err());
        assert!(scan_srun(&t.srun, &words("-N 1 a : -N 1 b")).is_err());
        assert!(scan_srun(&t.srun, &words("-N 1 : b")).is_err());
        assert!(scan_srun(&t.srun, &words("--multi-prog conf")).is_err());
    }

    #[test]
    fn mpirun_options_end_at_the_program() {
        let t = Launchers::builtin().unwrap();
        let w = words("-np 16 --mca btl ^openib -x NCCL_DEBUG --map-by ppr:8:node python train.py");
        let (i, o) = scan_mpirun(&t.mpirun, &w).unwrap();
        assert_eq!(w[i], "python");
        assert_eq!(o.get(&["--mca".to_string()]), Some("btl ^openib"));
        assert!(scan_mpirun(&t.mpirun, &words("--weird python x.py")).is_err());
    }

    #[test]
    fn torchrun_node_counts() {
        let t = Launchers::builtin().unwrap();
        assert_eq!(
            torchrun_nnodes(&t.torchrun, &words("--nnodes 2 x.py")),
            Some(2)
        );
        assert_eq!(
            torchrun_nnodes(&t.torchrun, &words("--nnodes=1:4 x.py")),
            Some(4)
        );
        assert_eq!(
            torchrun_nnodes(&t.torchrun, &words("--nnodes=$N x.py")),
            None
        );
        assert_eq!(
            torchrun_nnodes(&t.torchrun, &words("--standalone x.py")),
            None
        );
    }
}
