//! Where nsys goes in a launch. nsys records the process it starts and that process's children,
//! on the node it runs on. srun and mpirun start their tasks through daemons on every node (not
//! as their own children), so nsys around them records only the launcher on this node: nsys has
//! to go inside them, before the program they start, once per node (a program such as torchrun
//! that starts the node's ranks itself) or once per task. A launch that cannot be read that far
//! with certainty is refused, with what to write instead.

use std::path::PathBuf;

use super::error::CommandError;
use super::launchers::{self, Launchers, Options, base};
use super::scripts::{self, Script};

/// Where nsys runs, and so what must tell its outputs apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// One nsys around the whole launch, on this node.
    One,
    /// torchrun on several nodes, started by hand on each: this command runs on every node.
    EachHost { nnodes: u32 },
    /// Inside srun, once per node: the program starts the node's ranks itself.
    SrunPerNode,
    /// Inside srun, once per task (each task is one rank, or tasks share a node).
    SrunPerTask,
    /// Inside mpirun, once per rank.
    MpiPerRank,
}

impl Placement {
    pub fn is_one(self) -> bool {
        self == Placement::One
    }
}

/// The launch taken apart.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Leading `NAME=VALUE` words: the environment of the whole launch.
    pub env: Vec<(String, String)>,
    /// The launcher nsys goes inside (`srun -N 2 -W 0`), empty when nsys goes first.
    pub outer: Vec<String>,
    /// What nsys starts.
    pub inner: Vec<String>,
    pub placement: Placement,
    /// The program starts a node's ranks itself (torchrun, or a script that runs it).
    pub node_launcher: bool,
    /// srun's node count as written (`2`, `2-4`).
    pub srun_nodes: Option<String>,
    /// srun was told no task count: one task per node is assumed (srun's default).
    pub tasks_assumed: bool,
    /// The Python and shell scripts the launch names, as read.
    pub python: Vec<Script>,
    pub shell: Vec<Script>,
    /// Scripts the launch names that could not be read here.
    pub unread: Vec<PathBuf>,
}

const SHELLS: [&str; 5] = ["sh", "bash", "dash", "zsh", "ksh"];

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// Take the launch apart and decide where nsys goes.
pub fn analyse(launch: &[String], t: &Launchers) -> Result<Layout, CommandError> {
    let mut env = Vec::new();
    let mut k = 0;
    while let Some((name, value)) = launch.get(k).and_then(|w| w.split_once('=')) {
        if !is_name(name) {
            break;
        }
        env.push((name.to_string(), value.to_string()));
        k += 1;
    }
    let words = &launch[k..];
    let Some(first) = words.first() else {
        return Err(CommandError::unplaceable(
            "the launch sets variables but runs no program",
            "end it with the launcher to profile, e.g. `torchrun ...` or `srun ... torchrun ...`",
        ));
    };
    let program = base(first);
    if program == "nsys" {
        return Err(CommandError::unplaceable(
            "the launch is already an nsys command",
            "give instrument the command nsys starts, without nsys and its options",
        ));
    }
    if let Some(r) = t.refuse.get(program) {
        return Err(CommandError::unplaceable(r.why.clone(), r.instead.clone()));
    }
    let srun = t.srun.programs.iter().any(|p| p == program);
    let mpirun = t.mpirun.programs.iter().any(|p| p == program);
    let (outer_len, opts) = if srun {
        let (i, o) = launchers::scan_srun(&t.srun, &words[1..])?;
        (1 + i, o)
    } else if mpirun {
        let (i, o) = launchers::scan_mpirun(&t.mpirun, &words[1..])?;
        (1 + i, o)
    } else {
        (0, Options::default())
    };
    let outer = words[..outer_len].to_vec();
    let inner = words[outer_len..].to_vec();
    refuse_hidden_launchers(&inner, t)?;

    let mut shell = Vec::new();
    let mut unread = Vec::new();
    for (label, found) in shell_scripts(&inner) {
        match found {
            Some(s) => {
                refuse_what_a_script_runs(&s, t)?;
                shell.push(s);
            }
            None => unread.push(PathBuf::from(label)),
        }
    }
    let mut python_paths = scripts::python_arguments(&inner);
    for s in &shell {
        for p in scripts::python_files(s) {
            if !python_paths.contains(&p) {
                python_paths.push(p);
            }
        }
    }
    let python: Vec<Script> = python_paths
        .iter()
        .filter_map(|p| scripts::read(p))
        .collect();

    let node_launcher = (0..inner.len()).any(|i| t.is_torchrun_at(&inner, i))
        || shell.iter().any(|s| {
            scripts::commands(s)
                .iter()
                .any(|r| t.torchrun.programs.contains(&r.program))
                || t.torchrun
                    .modules
                    .iter()
                    .any(|m| s.code.contains(m.as_str()))
        });
    let mut tasks_assumed = false;
    let placement = if srun {
        let tasks = srun_tasks(&t.srun, &opts);
        tasks_assumed = tasks == Tasks::Assumed;
        if node_launcher && tasks != Tasks::Many {
            Placement::SrunPerNode
        } else {
            Placement::SrunPerTask
        }
    } else if mpirun {
        Placement::MpiPerRank
    } else {
        match launchers::torchrun_nnodes(&t.torchrun, &inner) {
            Some(n) if n > 1 && node_launcher => Placement::EachHost { nnodes: n },
            _ => Placement::One,
        }
    };
    Ok(Layout {
        env,
        outer,
        inner,
        placement,
        node_launcher,
        srun_nodes: srun
            .then(|| opts.get(&t.srun.nodes).map(String::from))
            .flatten(),
        tasks_assumed,
        python,
        shell,
        unread,
    })
}

/// A launcher further in (`timeout 600 srun ...`, `torchrun ... nsys`): nsys before the first
/// word would wrap it on this node only. (`ssh` and the like are looked for as the first word
/// only: as a later word they are as likely an argument's value.)
fn refuse_hidden_launchers(inner: &[String], t: &Launchers) -> Result<(), CommandError> {
    for (i, w) in inner.iter().enumerate() {
        let b = base(w);
        if b == "nsys" {
            let at = if i == 0 {
                "it is the program the launcher starts".to_string()
            } else {
                format!(
                    "word {} of the program, after `{}`",
                    i + 1,
                    inner[..i].join(" ")
                )
            };
            return Err(CommandError::unplaceable(
                format!("the launch already runs nsys ({at})"),
                "give instrument the command without nsys and its options",
            ));
        }
        let launcher =
            t.srun.programs.iter().any(|p| p == b) || t.mpirun.programs.iter().any(|p| p == b);
        if launcher && i > 0 {
            return Err(CommandError::unplaceable(
                format!(
                    "{b} comes after `{}`, so nsys would wrap that on this node only",
                    inner[..i].join(" ")
                ),
                format!("start the launch with {b} (`{b} ... {} ...`)", inner[0]),
            ));
        }
    }
    Ok(())
}

/// The shell scripts the program is or runs: (label, the script if it could be read).
fn shell_scripts(inner: &[String]) -> Vec<(String, Option<Script>)> {
    let Some(first) = inner.first() else {
        return Vec::new();
    };
    if SHELLS.contains(&base(first)) {
        let mut it = inner[1..].iter();
        while let Some(w) = it.next() {
            if w == "-c" {
                return it
                    .next()
                    .map(|text| {
                        let label = format!("the {} -c command", base(first));
                        (label.clone(), Some(scripts::inline(&label, text)))
                    })
                    .into_iter()
                    .collect();
            }
            if !w.starts_with('-') {
                return vec![(w.clone(), scripts::read(w.as_ref()))];
            }
        }
        return Vec::new();
    }
    let path = std::path::Path::new(first);
    if first.ends_with(".sh") || scripts::has_shell_shebang(path) {
        return vec![(first.clone(), scripts::read(path))];
    }
    Vec::new()
}

/// A script that runs nsys, srun or mpirun itself cannot be wrapped.
fn refuse_what_a_script_runs(s: &Script, t: &Launchers) -> Result<(), CommandError> {
    let path = s.path.display();
    for run in scripts::commands(s) {
        if run.program == "nsys" {
            return Err(CommandError::unplaceable(
                format!(
                    "{path} runs nsys itself (line {}: `{}`), and nsys cannot record under another nsys",
                    run.line, run.text
                ),
                "run it as it is, then `instrument nsys report` over the folder it writes; or give instrument the command it wraps (`instrument nsys command -- srun ... torchrun ...`)",
            ));
        }
        let launcher = t.srun.programs.contains(&run.program)
            || t.mpirun.programs.contains(&run.program)
            || t.refuse.contains_key(&run.program);
        if launcher {
            return Err(CommandError::unplaceable(
                format!(
                    "{path} runs {} itself (line {}: `{}`): nsys around the script would record this node's {}, not the ranks it starts",
                    run.program, run.line, run.text, run.program
                ),
                format!(
                    "give instrument that {} line, with the script's variables written out (`instrument nsys command -- {} ...`)",
                    run.program, run.program
                ),
            ));
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tasks {
    One,
    Many,
    /// Not said: srun's default, one task per node (unless the allocation says otherwise).
    Assumed,
}

/// How many tasks srun starts per node, as far as its options say.
fn srun_tasks(s: &launchers::Srun, o: &Options) -> Tasks {
    if let Some(v) = o.get(&s.ntasks_per_node) {
        return if launchers::exact_count(v) == Some(1) {
            Tasks::One
        } else {
            Tasks::Many
        };
    }
    let nodes = o.get(&s.nodes).and_then(launchers::least_count);
    match o.get(&s.ntasks).map(launchers::exact_count) {
        None => Tasks::Assumed,
        Some(Some(1)) => Tasks::One,
        Some(Some(n)) if nodes.is_some_and(|m| n <= m) => Tasks::One,
        Some(_) => Tasks::Many,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(s: &str) -> Result<Layout, CommandError> {
        let w: Vec<String> = s.split_whitespace().map(String::from).collect();
        analyse(&w, &Launchers::builtin().unwrap())
    }

    #[test]
    fn placements() {
        let l = layout("srun -N 2 -W 0 torchrun --nnodes 2 -m pkg.train").unwrap();
        assert_eq!(l.placement, Placement::SrunPerNode);
        assert_eq!(l.outer, ["srun", "-N", "2", "-W", "0"]);
        assert_eq!(l.inner[0], "torchrun");
        assert_eq!(l.srun_nodes.as_deref(), Some("2"));
        assert!(l.tasks_assumed);
        let l = layout("srun -N 2 --ntasks-per-node 8 python train.py").unwrap();
        assert_eq!(l.placement, Placement::SrunPerTask);
        assert!(!l.tasks_assumed);
        let l = layout("srun -N 2 -n 16 torchrun -m x").unwrap();
        assert_eq!(l.placement, Placement::SrunPerTask);
        let l = layout("srun -N 2 -n 2 python -m torch.distributed.run -m x").unwrap();
        assert_eq!(l.placement, Placement::SrunPerNode);
        let l = layout("mpirun -np 16 python train.py").unwrap();
        assert_eq!(l.placement, Placement::MpiPerRank);
        let l = layout("torchrun --nnodes=2 --node-rank=0 train.py").unwrap();
        assert_eq!(l.placement, Placement::EachHost { nnodes: 2 });
        let l = layout("torchrun --standalone -m pkg --transport ssh").unwrap();
        assert_eq!(
            l.placement,
            Placement::One,
            "an argument named ssh is not a launcher"
        );
        let l = layout("A=1 torchrun --standalone --nproc_per_node=4 -m pkg").unwrap();
        assert_eq!(l.placement, Placement::One);
        assert_eq!(l.env, [("A".to_string(), "1".to_string())]);
    }

    #[test]
    fn refusals() {
        for (launch, needle) in [
            ("sbatch job.sh", "sbatch queues the job"),
            ("nsys profile torchrun x.py", "already an nsys command"),
            ("srun -N 2 nsys profile torchrun x.py", "already runs nsys"),
            ("timeout 60 srun -N 2 x", "srun comes after `timeout 60`"),
            ("srun -N 2 bash -c 'srun -N 1 x'", "runs srun itself"),
            ("A=1", "runs no program"),
        ] {
            let e = layout(launch).unwrap_err().to_string();
            assert!(e.contains(needle), "{launch}: {e}");
        }
    }
}
