//! The `--output` pattern: the default name for the placement, the checks that every nsys the
//! launch starts writes its own file, and the folder the report reads afterwards.
//!
//! Per-node names use nsys's own expansion (`%q{SLURM_NODEID}`, `%h`, `%p`, documented for
//! `nsys profile --output`): nsys reads them on the node it runs on, from its own environment,
//! so no shell is involved. A shell's `$SLURM_NODEID` would be expanded once, where the command
//! is typed, and is refused.

use std::path::{Path, PathBuf};

use super::error::CommandError;
use super::launch::Placement;
use super::launchers::Launchers;

/// The node part and the suffix a placement's default name gets.
fn naming(placement: Placement, t: &Launchers) -> (String, String) {
    let node_id = format!("%q{{{}}}", t.srun.node_id);
    match placement {
        Placement::One => ("0".into(), String::new()),
        Placement::EachHost { .. } => ("%h".into(), String::new()),
        Placement::SrunPerNode => (node_id, String::new()),
        Placement::SrunPerTask => (node_id, format!("_rank%q{{{}}}", t.srun.rank)),
        Placement::MpiPerRank => ("%h".into(), "_pid%p".into()),
    }
}

/// The default pattern: `folder/` + the set's name with its node part filled in.
pub fn default_pattern(
    folder: &str,
    template: &str,
    placement: Placement,
    t: &Launchers,
) -> String {
    let (node, suffix) = naming(placement, t);
    let name = if template.contains("{node}") {
        template.replace("{node}", &node)
    } else if placement.is_one() {
        template.to_string()
    } else {
        format!("{template}_node{node}")
    };
    let folder = folder.trim_end_matches('/');
    if folder.is_empty() {
        format!("{name}{suffix}")
    } else {
        format!("{folder}/{name}{suffix}")
    }
}

fn refused(pattern: &str, why: String) -> CommandError {
    CommandError::Output {
        pattern: pattern.to_string(),
        why,
    }
}

/// Check a pattern given with `--out` against the placement.
pub fn check_pattern(
    pattern: &str,
    placement: Placement,
    t: &Launchers,
) -> Result<(), CommandError> {
    let (folder, file) = split(pattern);
    if file.is_empty() {
        return Err(refused(
            pattern,
            "names a folder, not a report: add a file name, e.g. profile".into(),
        ));
    }
    if pattern.contains('$') {
        return Err(refused(
            pattern,
            "a shell would expand `$...` once, where the command is typed, not on each node: use nsys's own %q{NAME} (e.g. %q{SLURM_NODEID}), which nsys expands from each node's environment".into(),
        ));
    }
    if folder.contains('%') {
        return Err(refused(
            pattern,
            "put the per-node part in the file name, not the folder: the report reads one folder, and --run creates it before the launch".into(),
        ));
    }
    let has = |tokens: &[String]| tokens.iter().any(|tok| file.contains(tok.as_str()));
    let s = &t.srun;
    let m = &t.mpirun;
    let (ok, who, example) = match placement {
        Placement::One => (true, String::new(), String::new()),
        Placement::EachHost { nnodes } => (
            has(&t.torchrun.node_tokens),
            format!("torchrun --nnodes {nnodes} has this command run on every node"),
            "%h".to_string(),
        ),
        Placement::SrunPerNode => (
            has(&s.node_tokens) || has(&s.rank_tokens),
            "srun runs one nsys per node".to_string(),
            format!("_node%q{{{}}}", s.node_id),
        ),
        Placement::SrunPerTask => (
            has(&s.rank_tokens) || (has(&s.node_tokens) && has(&s.task_tokens)),
            "srun runs one nsys per task".to_string(),
            format!("_rank%q{{{}}}", s.rank),
        ),
        Placement::MpiPerRank => (
            has(&m.rank_tokens) || (has(&m.node_tokens) && has(&m.task_tokens)),
            "mpirun runs one nsys per rank".to_string(),
            "_%h_%p".to_string(),
        ),
    };
    if ok {
        return Ok(());
    }
    let sep = if example.starts_with('_') { "" } else { "_" };
    Err(refused(
        pattern,
        format!(
            "{who}, and each would write the same {file}.nsys-rep: tell them apart in the name, e.g. --out '{pattern}{sep}{example}'"
        ),
    ))
}

/// The folder and file parts of a pattern.
fn split(pattern: &str) -> (&str, &str) {
    match pattern.rfind('/') {
        Some(i) => (&pattern[..i], &pattern[i + 1..]),
        None => ("", pattern),
    }
}

/// Where the exports go and what `instrument nsys report` reads afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The folder the exports go to.
    pub folder: PathBuf,
    /// The file names start with this (the name up to its first pattern).
    pub prefix: String,
    /// One export per node or task: the report reads the folder.
    pub many: bool,
    /// The argument to `instrument nsys report`.
    pub report_arg: String,
}

pub fn target(pattern: &str) -> Target {
    let (folder, file) = split(pattern);
    let stem = file.strip_suffix(".nsys-rep").unwrap_or(file);
    let many = stem.contains('%');
    let folder_text = if folder.is_empty() { "." } else { folder };
    Target {
        folder: PathBuf::from(folder_text),
        prefix: stem.split('%').next().unwrap_or("").to_string(),
        many,
        report_arg: if many {
            format!("{folder_text}/")
        } else if folder.is_empty() {
            format!("{stem}.sqlite")
        } else {
            format!("{folder}/{stem}.sqlite")
        },
    }
}

/// Exports already in the folder that a report over it would mix with this run's.
pub fn stale_exports(t: &Target) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(&t.folder) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with(&t.prefix) && (n.ends_with(".sqlite") || n.ends_with(".nsys-rep"))
        })
        .collect();
    names.sort();
    names
}

pub fn folder_exists(t: &Target) -> bool {
    Path::new(&t.folder).is_dir()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Launchers {
        Launchers::builtin().unwrap()
    }

    #[test]
    fn default_names_per_placement() {
        let l = t();
        let f = "profiling/results/nsys";
        assert_eq!(
            default_pattern(f, "pithtrain_node{node}", Placement::SrunPerNode, &l),
            "profiling/results/nsys/pithtrain_node%q{SLURM_NODEID}"
        );
        assert_eq!(
            default_pattern(f, "pithtrain_node{node}", Placement::One, &l),
            "profiling/results/nsys/pithtrain_node0"
        );
        assert_eq!(
            default_pattern(f, "profile", Placement::One, &l),
            "profiling/results/nsys/profile"
        );
        assert_eq!(
            default_pattern(f, "profile", Placement::EachHost { nnodes: 2 }, &l),
            "profiling/results/nsys/profile_node%h"
        );
        assert_eq!(
            default_pattern(f, "profile", Placement::SrunPerTask, &l),
            "profiling/results/nsys/profile_node%q{SLURM_NODEID}_rank%q{SLURM_PROCID}"
        );
        assert_eq!(
            default_pattern(f, "profile", Placement::MpiPerRank, &l),
            "profiling/results/nsys/profile_node%h_pid%p"
        );
    }

    #[test]
    fn every_default_tells_its_writers_apart() {
        let l = t();
        for p in [
            Placement::One,
            Placement::EachHost { nnodes: 2 },
            Placement::SrunPerNode,
            Placement::SrunPerTask,
            Placement::MpiPerRank,
        ] {
            for template in ["profile", "pithtrain_node{node}"] {
                let pat = default_pattern("d", template, p, &l);
                assert!(check_pattern(&pat, p, &l).is_ok(), "{p:?} {pat}");
            }
        }
    }

    #[test]
    fn patterns_refused() {
        let l = t();
        let e = check_pattern("out/run", Placement::SrunPerNode, &l)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--out 'out/run_node%q{SLURM_NODEID}'"), "{e}");
        assert!(check_pattern("out/run_%h", Placement::SrunPerNode, &l).is_ok());
        assert!(check_pattern("out/run_%h", Placement::SrunPerTask, &l).is_err());
        assert!(check_pattern("out/run_%h_%p", Placement::SrunPerTask, &l).is_ok());
        let e = check_pattern("out/run_$SLURM_NODEID", Placement::SrunPerNode, &l)
            .unwrap_err()
            .to_string();
        assert!(e.contains("%q{NAME}"), "{e}");
        assert!(check_pattern("out/%h/run", Placement::SrunPerNode, &l).is_err());
        assert!(check_pattern("out/", Placement::One, &l).is_err());
        assert!(check_pattern("run", Placement::One, &l).is_ok());
    }

    #[test]
    fn report_targets() {
        assert_eq!(
            target("a/b/pithtrain_node%q{SLURM_NODEID}").report_arg,
            "a/b/"
        );
        assert_eq!(
            target("a/b/pithtrain_node%q{SLURM_NODEID}").prefix,
            "pithtrain_node"
        );
        assert_eq!(target("a/b/run1").report_arg, "a/b/run1.sqlite");
        assert_eq!(target("a/run1.nsys-rep").report_arg, "a/run1.sqlite");
        assert_eq!(target("run_%h").report_arg, "./");
    }
}
