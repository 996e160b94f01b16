//! `instrument nsys command`: the command for a launch, and its checks against a fake `nsys`
//! on PATH that answers like a given release (fixtures/nsys/fake/).
//!
//! The pithtrain launch lines below are pithtrain's own (github mlc-ai/pith-train at 889a408,
//! Apache-2.0), quoted as test data: the capture skill's `launch_capture.sh`, the pretrain
//! launcher `examples/pretrain_lm/launch.sh`, the validate skill's launcher and the benchmark
//! launchers, with the launch lines their SKILL.md and docs give. Where pithtrain itself passes
//! options to nsys (launch_capture.sh), its lines are the oracle for the options we emit.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{Redact, Transcript, repo_root};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_instrument")
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/nsys/fake")
}

/// A directory holding a fake `nsys` answering with the given help/status/version.
fn fake_nsys(help: &str, status: &str, version: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let nsys = dir.path().join("nsys");
    std::fs::copy(fixtures().join("nsys.sh"), &nsys).unwrap();
    std::fs::set_permissions(&nsys, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::copy(fixtures().join(help), dir.path().join("help.txt")).unwrap();
    std::fs::copy(fixtures().join(status), dir.path().join("status.txt")).unwrap();
    std::fs::write(
        dir.path().join("version.txt"),
        format!("NVIDIA Nsight Systems version {version}\n"),
    )
    .unwrap();
    dir
}

fn current_nsys() -> tempfile::TempDir {
    fake_nsys(
        "help-current.txt",
        "status-ok.txt",
        "2025.1.1.131-251135540420v0",
    )
}

/// A fake `srun` in `dir` that writes the words it was given, one per line, to `ran-srun.txt`.
fn fake_srun(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let srun = dir.join("srun");
    std::fs::write(
        &srun,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$(dirname \"$0\")/ran-srun.txt\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&srun, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// PATH with `first` in front of the system directories (for /bin/sh) but no real nsys.
fn path_with(first: &Path) -> String {
    format!("{}:/usr/bin:/bin", first.display())
}

fn run_in(dir: &Path, path: &str, args: &[&str]) -> Output {
    Command::new(bin())
        .args(["nsys", "command"])
        .args(args)
        .env("PATH", path)
        .env_remove("FAKE_NSYS_EXIT")
        .current_dir(dir)
        .output()
        .unwrap()
}

/// `nsys command args` in `dir` with `path`, recorded in `t`.
fn record(t: &mut Transcript, dir: &Path, path: &str, args: &[&str]) -> Output {
    let o = run_in(dir, path, args);
    let mut shown = vec!["nsys", "command"];
    shown.extend(args);
    t.record(&shown, &o);
    o
}

/// The temporary folders of a test by the names its snapshots give them, and this
/// repository's root as `<REPO>`.
fn redact(folders: &[(&Path, &str)]) -> Redact {
    folders.iter().fold(
        Redact::default().folder(&repo_root(), "<REPO>"),
        |r, (p, n)| r.folder(p, n),
    )
}

fn run(path: &str, args: &[&str]) -> Output {
    run_in(Path::new(env!("CARGO_MANIFEST_DIR")), path, args)
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The words the printed command hands on, as a POSIX shell splits and unquotes them.
fn shell_words(out: &str) -> Vec<String> {
    let o = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("set -- {out}\nprintf '%s\\n' \"$@\""))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// The nsys options in the printed command (the words from `profile` to the program).
fn nsys_options(words: &[String]) -> Vec<String> {
    let start = words.iter().position(|w| w == "profile").unwrap() + 1;
    words[start..]
        .iter()
        .take_while(|w| w.starts_with("--"))
        .cloned()
        .collect()
}

const LAUNCH: [&str; 6] = [
    "--",
    "torchrun",
    "--standalone",
    "--nproc_per_node=4",
    "-m",
    "pkg.profile_run",
];

/// The words of a launch line (none of them holds a space).
fn args(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

fn trace_json(dir: &Path) -> PathBuf {
    let p = dir.join("trace.json");
    std::fs::write(
        &p,
        r#"[{"domain": "pithtrain", "module": "pithtrain.models.moe", "functions": ["MoELayer.forward"]}]"#,
    )
    .unwrap();
    p
}

// ---- pithtrain's own launch lines (889a408), as test data -------------------------------

/// .agents/skills/capture-nsys-profile/scripts/launch_capture.sh (whole, as pithtrain has it).
const LAUNCH_CAPTURE_SH: &str = r#"#!/bin/bash
# Capture an nsys profile of a short PithTrain run.

set -euo pipefail
export OMP_NUM_THREADS=8
export PYTHONUNBUFFERED=1

OUTDIR=workspace/capture-nsys-profile; mkdir -p $OUTDIR
SCRIPT=.agents/skills/capture-nsys-profile/scripts/capture.py

NSYS_ARGS=()
NSYS_ARGS+=(profile)
NSYS_ARGS+=(--stats=false)
NSYS_ARGS+=(--trace=cuda,nvtx)
NSYS_ARGS+=(--force-overwrite=true)
NSYS_ARGS+=(--output=$OUTDIR/pithtrain_node${SLURM_NODEID:-0})
NSYS_ARGS+=(--cuda-graph-trace=node)
NSYS_ARGS+=(--capture-range=cudaProfilerApi)
NSYS_ARGS+=(--capture-range-end=stop-shutdown)
NSYS_ARGS+=(--delay=0)

TORCHRUN_ARGS=()
TORCHRUN_ARGS+=(--nnodes=${SLURM_NNODES:-1} --node-rank=${SLURM_NODEID:-0} --nproc-per-node=gpu)
TORCHRUN_ARGS+=(--rdzv-backend=c10d --rdzv-endpoint=${SLURM_LAUNCH_NODE_IPADDR:-localhost}:15213)

nsys ${NSYS_ARGS[@]} torchrun ${TORCHRUN_ARGS[@]} $SCRIPT $@
"#;

/// examples/pretrain_lm/launch.sh: the lines that launch.
const PRETRAIN_LAUNCH_SH: &str = r#"#!/bin/bash
# Pretrain a Mixture-of-Experts (MoE) language model.
#
# For multi-node training with SLURM:
#   srun -W 0 examples/pretrain_lm/launch.sh qwen3-30b-a3b

set -euo pipefail
export OMP_NUM_THREADS=8
export PYTHONUNBUFFERED=1

LAUNCH_ARGS=()
LAUNCH_ARGS+=(--nnodes=${SLURM_NNODES:-1} --node-rank=${SLURM_NODEID:-0} --nproc-per-node=gpu)
LAUNCH_ARGS+=(--rdzv-backend=c10d --rdzv-endpoint=${SLURM_LAUNCH_NODE_IPADDR:-localhost}:15213)

SCRIPT=examples/pretrain_lm/$1/script.py
OUTPUT=logging/pretrain_lm/${1}_node${SLURM_NODEID:-0}.log

mkdir -p $(dirname $OUTPUT) && exec > >(tee $OUTPUT) 2>&1
torchrun ${LAUNCH_ARGS[@]} $SCRIPT
"#;

/// .agents/skills/validate-correctness/scripts/launch_validate.sh: the lines that launch.
const LAUNCH_VALIDATE_SH: &str = r#"#!/bin/bash
# Run a short PithTrain training run for correctness validation.

set -euo pipefail
export OMP_NUM_THREADS=8
export PYTHONUNBUFFERED=1

SCRIPT=.agents/skills/validate-correctness/scripts/validate.py

TORCHRUN_ARGS=()
TORCHRUN_ARGS+=(--nnodes=${SLURM_NNODES:-1} --node-rank=${SLURM_NODEID:-0} --nproc-per-node=gpu)
TORCHRUN_ARGS+=(--rdzv-backend=c10d --rdzv-endpoint=${SLURM_LAUNCH_NODE_IPADDR:-localhost}:15213)

torchrun ${TORCHRUN_ARGS[@]} $SCRIPT $@
"#;

/// benchmarks/pretraining/qwen3-30b-a3b/h100-2n8g/launch.sh: the lines that launch.
const BENCH_LAUNCH_SH: &str = r#"#!/bin/bash
# Benchmark the training throughput of Qwen3-30B-A3B with 2x8 H100.

SRUN_ARGS=()
SRUN_ARGS+=(--nodes=2 --gpus-per-node=8)
SRUN_ARGS+=(--wait=0 --time=00-01:00:00)

STEP=benchmarks/pretraining/qwen3-30b-a3b/h100-2n8g/pp2-dp1-cp1-ep8-seq2048-bf16
srun ${SRUN_ARGS[@]} --output logging/$STEP.log $STEP.sh
"#;

/// benchmarks/pretraining/qwen3-30b-a3b/h100-2n8g/pp2-dp1-cp1-ep8-seq2048-bf16.sh.
const BENCH_STEP_SH: &str = r#"#!/bin/bash
# Launch the training.

TRUN_ARGS=()
TRUN_ARGS+=(--nnodes=${SLURM_NNODES:-1} --node-rank=${SLURM_NODEID:-0} --nproc-per-node=gpu)
TRUN_ARGS+=(--rdzv-backend=c10d --rdzv-endpoint=${SLURM_LAUNCH_NODE_IPADDR:-localhost}:15213)

torchrun ${TRUN_ARGS[@]} benchmarks/pretraining/qwen3-30b-a3b/h100-2n8g/pp2-dp1-cp1-ep8-seq2048-bf16.py
"#;

/// A pithtrain tree with the launchers above (and one-line stand-ins for the Python scripts
/// they run: only their imports and capture settings matter here).
fn pithtrain_tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let files: [(&str, &str); 8] = [
        (
            ".agents/skills/capture-nsys-profile/scripts/launch_capture.sh",
            LAUNCH_CAPTURE_SH,
        ),
        (
            ".agents/skills/capture-nsys-profile/scripts/capture.py",
            "from pithtrain.tasks.pretrain_lm import PretrainLMCfg, launch\ntraining.nsys_start = 5\ntraining.nsys_stop = 6\n",
        ),
        ("examples/pretrain_lm/launch.sh", PRETRAIN_LAUNCH_SH),
        (
            "examples/pretrain_lm/qwen3-30b-a3b/script.py",
            "from pithtrain.tasks.pretrain_lm import PretrainLMCfg, launch\n",
        ),
        (
            ".agents/skills/validate-correctness/scripts/launch_validate.sh",
            LAUNCH_VALIDATE_SH,
        ),
        (
            ".agents/skills/validate-correctness/scripts/validate.py",
            "from pithtrain.tasks.pretrain_lm import PretrainLMCfg, launch\n",
        ),
        (
            "benchmarks/pretraining/qwen3-30b-a3b/h100-2n8g/launch.sh",
            BENCH_LAUNCH_SH,
        ),
        (
            "benchmarks/pretraining/qwen3-30b-a3b/h100-2n8g/pp2-dp1-cp1-ep8-seq2048-bf16.sh",
            BENCH_STEP_SH,
        ),
    ];
    for (p, text) in files {
        let path = d.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let py = d
        .path()
        .join("benchmarks/pretraining/qwen3-30b-a3b/h100-2n8g/pp2-dp1-cp1-ep8-seq2048-bf16.py");
    std::fs::write(
        py,
        "from setup import cfg\n\nfrom pithtrain.tasks import pretrain_lm\n",
    )
    .unwrap();
    d
}

/// What launch_capture.sh passes to nsys: the `NSYS_ARGS+=(...)` words, in order.
fn launch_capture_nsys_args() -> Vec<String> {
    LAUNCH_CAPTURE_SH
        .lines()
        .filter_map(|l| l.strip_prefix("NSYS_ARGS+=("))
        .map(|l| l.trim_end_matches(')').to_string())
        .collect()
}

/// What a pithtrain launch placed per node passes to nsys: the export named by node, the
/// SQLite export, and launch_capture.sh's options after its output.
fn pithtrain_per_node_options() -> Vec<String> {
    let theirs = launch_capture_nsys_args();
    [
        "--output=profiling/results/nsys/pithtrain_node%q{SLURM_NODEID}",
        "--export=sqlite",
    ]
    .into_iter()
    .map(String::from)
    .chain(
        theirs[1..]
            .iter()
            .filter(|a| !a.starts_with("--output="))
            .cloned(),
    )
    .collect()
}

// ---- the command for a plain torchrun ---------------------------------------------------

#[test]
fn without_nsys_prints_the_recommended_command_and_says_it_is_unchecked() {
    let empty = tempfile::tempdir().unwrap();
    let tj = trace_json(empty.path());
    let mut t = Transcript::new(redact(&[(empty.path(), "<EMPTY>")]));
    let mut args = vec!["--out", "prof/run1", "--trace-json", tj.to_str().unwrap()];
    args.extend(LAUNCH);
    let o = record(&mut t, &repo_root(), &path_with(empty.path()), &args);
    assert!(o.status.success());
    let (out, _) = text(&o);
    let words = shell_words(&out);
    // One node: nsys goes first, around torchrun.
    assert_eq!(&words[..2], ["nsys", "profile"], "{out}");
    // Not a pithtrain launcher: the whole run is recorded (no --capture-range), with the
    // guide's full set; the allocator setting changes the run being profiled, so it is not
    // set unless asked for.
    assert_eq!(
        nsys_options(&words),
        [
            "--output=prof/run1",
            "--export=sqlite",
            "--trace=cuda,nvtx,osrt",
            "--force-overwrite=true",
            "--cuda-graph-trace=node",
            "--cuda-memory-usage=true",
            "--pytorch=autograd-shapes-nvtx",
            "--cudabacktrace=all",
            "--python-backtrace=cuda",
            &format!("--python-functions-trace={}", tj.display()),
        ]
    );
    assert_eq!(&words[words.len() - 5..], &LAUNCH[1..]);
    // That it could not be checked; each extra in the command explained in one line; one
    // export, which the next step reads.
    insta::assert_snapshot!("plain_without_nsys", t.text());
}

#[test]
fn current_release_passes_every_check() {
    let fake = current_nsys();
    let tj = trace_json(fake.path());
    let mut t = Transcript::new(redact(&[(fake.path(), "<FAKE>")]));
    let mut args = vec!["--trace-json", tj.to_str().unwrap()];
    args.extend(LAUNCH);
    let o = record(&mut t, &repo_root(), &path_with(fake.path()), &args);
    assert!(o.status.success());
    // The checked binary is named by its absolute path.
    let words = shell_words(&text(&o).0);
    assert_eq!(words[0], fake.path().join("nsys").display().to_string());
    // No warning; checked against 2025.1.1.
    insta::assert_snapshot!("current_release", t.text());
}

#[test]
fn cpu_sampling_unavailable_makes_backtraces_inert_with_the_reason() {
    let fake = fake_nsys(
        "help-current.txt",
        "status-fail.txt",
        "2024.6.2.225-246235244400v0",
    );
    let mut t = Transcript::new(redact(&[(fake.path(), "<FAKE>")]));
    // The backtraces stay in the command, with a warning that they will be inert and why
    // (the kernel's paranoid level).
    let o = record(&mut t, &repo_root(), &path_with(fake.path()), &LAUNCH);
    assert!(o.status.success());
    // And --no-backtraces leaves them out, with no warning.
    let mut args = vec!["--no-backtraces"];
    args.extend(LAUNCH);
    let o = record(&mut t, &repo_root(), &path_with(fake.path()), &args);
    assert!(o.status.success());
    insta::assert_snapshot!("cpu_sampling_unavailable", t.text());
}

#[test]
fn release_without_autograd_shapes_falls_back_to_autograd_nvtx() {
    let fake = fake_nsys(
        "help-no-shapes.txt",
        "status-ok.txt",
        "2024.5.1.113-245134619542v0",
    );
    let mut t = Transcript::new(redact(&[(fake.path(), "<FAKE>")]));
    // --pytorch=autograd-nvtx, the warning why, and the explanation naming what is in the
    // command.
    let o = record(&mut t, &repo_root(), &path_with(fake.path()), &LAUNCH);
    assert!(o.status.success());
    insta::assert_snapshot!("without_autograd_shapes", t.text());
}

#[test]
fn old_release_warns_about_version_and_drops_unknown_options() {
    let fake = fake_nsys("help-old.txt", "status-ok.txt", "2022.4.2.1-df9881f");
    let tj = trace_json(fake.path());
    let mut t = Transcript::new(redact(&[(fake.path(), "<FAKE>")]));
    let mut args = vec!["--trace-json", tj.to_str().unwrap()];
    args.extend(LAUNCH);
    let o = record(&mut t, &repo_root(), &path_with(fake.path()), &args);
    assert!(o.status.success());
    // Only the options nsys 2022.4 lists, and --trace without osrt.
    assert_eq!(
        nsys_options(&shell_words(&text(&o).0)),
        [
            "--output=profiling/results/nsys/profile",
            "--export=sqlite",
            "--trace=cuda,nvtx",
            "--force-overwrite=true",
            "--cudabacktrace=all",
        ]
    );
    // The version warning, one line for each option dropped (--pytorch,
    // --python-functions-trace, --python-backtrace, --cuda-memory-usage,
    // --cuda-graph-trace) and for osrt; what was dropped is not explained as if it were
    // there.
    insta::assert_snapshot!("old_release", t.text());
}

#[test]
fn bad_trace_json_is_reported() {
    let empty = tempfile::tempdir().unwrap();
    let bad = empty.path().join("bad.json");
    std::fs::write(&bad, r#"{"module": "x"}"#).unwrap();
    let mut t = Transcript::new(redact(&[(empty.path(), "<EMPTY>")]));
    // Not a functions-trace JSON; a file that cannot be read.
    for file in [bad.clone(), empty.path().join("missing.json")] {
        let mut args = vec!["--trace-json", file.to_str().unwrap()];
        args.extend(LAUNCH);
        record(&mut t, &repo_root(), &path_with(empty.path()), &args);
    }
    insta::assert_snapshot!("bad_trace_json", t.text());
}

#[test]
fn no_sqlite_leaves_out_the_export() {
    let empty = tempfile::tempdir().unwrap();
    let path = path_with(empty.path());
    let mut args = vec!["--no-sqlite"];
    args.extend(LAUNCH);
    let o = run(&path, &args);
    assert!(o.status.success());
    let (out, err) = text(&o);
    // The command without its export, and no next step reading one: the default's words
    // and lines but those.
    let (out_default, err_default) = text(&run(&path, &LAUNCH));
    assert_eq!(out, out_default.replace("  --export=sqlite \\\n", ""));
    assert_eq!(
        err,
        err_default.replace(
            "then: instrument nsys report profiling/results/nsys/profile.sqlite\n",
            ""
        )
    );
    assert_ne!(err, err_default);
}

#[test]
fn run_executes_the_checked_nsys_with_the_environment() {
    let fake = current_nsys();
    let out_name = fake.path().join("results/run1");
    let mut args = vec!["--run", "--out", out_name.to_str().unwrap()];
    args.extend(LAUNCH);
    let o = Command::new(bin())
        .args(["nsys", "command"])
        .args(&args)
        .env("PATH", path_with(fake.path()))
        .env("FAKE_NSYS_EXIT", "3")
        .output()
        .unwrap();
    // nsys's exit status comes back.
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let ran = std::fs::read_to_string(fake.path().join("ran-args.txt")).unwrap();
    let ran: Vec<&str> = ran.lines().collect();
    assert_eq!(ran[0], format!("--output={}", out_name.display()));
    assert_eq!(&ran[ran.len() - 5..], &LAUNCH[1..]);
    let env = std::fs::read_to_string(fake.path().join("ran-env.txt")).unwrap();
    assert_eq!(
        env.trim(),
        "",
        "PYTORCH_CUDA_ALLOC_CONF is not set unless asked for"
    );
    assert!(fake.path().join("results").is_dir());
    // --expandable-segments sets it for the run, and says so.
    let mut args = vec![
        "--run",
        "--expandable-segments",
        "--out",
        out_name.to_str().unwrap(),
    ];
    args.extend(LAUNCH);
    let mut t = Transcript::new(redact(&[(fake.path(), "<FAKE>")]));
    let o = record(&mut t, &repo_root(), &path_with(fake.path()), &args);
    assert!(o.status.success());
    insta::assert_snapshot!("run_expandable_segments", t.text());
    let env = std::fs::read_to_string(fake.path().join("ran-env.txt")).unwrap();
    assert_eq!(env.trim(), "expandable_segments:True");
}

#[test]
fn run_without_nsys_is_a_user_error() {
    let empty = tempfile::tempdir().unwrap();
    let mut args = vec!["--run"];
    args.extend(LAUNCH);
    let mut t = Transcript::new(redact(&[(empty.path(), "<EMPTY>")]));
    let o = record(&mut t, &repo_root(), &path_with(empty.path()), &args);
    assert_eq!(o.status.code(), Some(2));
    insta::assert_snapshot!("run_without_nsys", t.text());
}

// ---- pithtrain: its own capture set, its own window ---------------------------------------

/// A pithtrain launcher gets what pithtrain's own capture passes to nsys: launch_capture.sh's
/// options, in its order, plus only the SQLite export the report reads; its output name.
#[test]
fn pithtrain_gets_what_its_own_capture_passes_to_nsys() {
    let fake = current_nsys();
    let mut t = Transcript::new(redact(&[(fake.path(), "<FAKE>")]));
    let o = record(
        &mut t,
        &repo_root(),
        &path_with(fake.path()),
        &args(
            "-- srun --nodes 2 torchrun --nnodes 2 --nproc-per-node 8 -m pithtrain.tasks.pretrain_lm",
        ),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let words = shell_words(&out);
    let ours = nsys_options(&words);
    let theirs = launch_capture_nsys_args();
    assert_eq!(theirs[0], "profile");
    let their_output = theirs.iter().find(|a| a.starts_with("--output=")).unwrap();
    // Nothing pithtrain's capture leaves out (no --pytorch, backtraces, memory usage or
    // osrt), and nothing but the export added.
    let expected: Vec<&String> = theirs[1..]
        .iter()
        .filter(|a| !a.starts_with("--output="))
        .collect();
    let ours_without: Vec<&String> = ours
        .iter()
        .filter(|a| !a.starts_with("--output=") && *a != "--export=sqlite")
        .collect();
    assert_eq!(ours_without, expected, "{out}");
    assert_eq!(ours.len(), expected.len() + 2, "{out}");
    // The name: pithtrain's `pithtrain_node${SLURM_NODEID:-0}`, with the node id expanded by
    // nsys on each node instead of by the shell on this one.
    let their_name = their_output.rsplit('/').next().unwrap();
    let our_output = ours.iter().find(|a| a.starts_with("--output=")).unwrap();
    assert_eq!(
        our_output.rsplit('/').next().unwrap(),
        their_name.replace("${SLURM_NODEID:-0}", "%q{SLURM_NODEID}")
    );
    // The notes: tracing what pithtrain's capture traces, the extras on request; no
    // reminder about a functions-trace JSON (pithtrain's own ranges name its stages); the
    // next step reads the folder of node exports.
    insta::assert_snapshot!("pithtrain_capture_set", t.text());
}

#[test]
fn pithtrain_extras_only_on_request_each_in_one_line() {
    let fake = current_nsys();
    let mut t = Transcript::new(redact(&[(fake.path(), "<FAKE>")]));
    let launch = args("-- torchrun --nproc_per_node=8 -m pithtrain.tasks.pretrain_lm");
    let mut asked = args("--pytorch-nvtx --backtraces --cuda-memory-usage --osrt");
    asked.extend(launch);
    let o = record(&mut t, &repo_root(), &path_with(fake.path()), &asked);
    assert!(o.status.success());
    // Each extra in the command, and explained in one line naming its options; single
    // node: one export, named as pithtrain names node 0.
    assert_eq!(
        nsys_options(&shell_words(&text(&o).0)),
        [
            "--output=profiling/results/nsys/pithtrain_node0",
            "--export=sqlite",
            "--stats=false",
            "--trace=cuda,nvtx,osrt",
            "--force-overwrite=true",
            "--cuda-graph-trace=node",
            "--capture-range=cudaProfilerApi",
            "--capture-range-end=stop-shutdown",
            "--delay=0",
            "--cudabacktrace=all",
            "--python-backtrace=cuda",
            "--cuda-memory-usage=true",
            "--pytorch=autograd-shapes-nvtx",
        ]
    );
    // And the guide's extras can be turned off for any launcher.
    let mut args = vec!["--no-pytorch-nvtx", "--no-cuda-memory-usage", "--no-osrt"];
    args.extend(LAUNCH);
    let o = record(&mut t, &repo_root(), &path_with(fake.path()), &args);
    assert!(o.status.success());
    insta::assert_snapshot!("pithtrain_extras_on_request", t.text());
}

/// The capture window: pithtrain calls cudaProfilerStart/Stop itself; the command reminds (or
/// warns) about nsys_start/stop and says what stop-shutdown does to the run.
#[test]
fn pithtrain_launcher_captures_the_profiler_api_window() {
    let fake = current_nsys();
    let d = tempfile::tempdir().unwrap();
    let mut t = Transcript::new(redact(&[(fake.path(), "<FAKE>"), (d.path(), "<DIR>")]));
    let script = d.path().join("script.py");
    std::fs::write(
        &script,
        "from pithtrain.tasks.pretrain_lm import PretrainLMCfg, launch\ncfg = PretrainLMCfg()\nlaunch(cfg)\n",
    )
    .unwrap();
    let launch = [
        "--",
        "torchrun",
        "--nproc-per-node=gpu",
        script.to_str().unwrap(),
    ];
    let path = path_with(fake.path());
    // The profiler-API window and stop-shutdown; a warning that the script does not set
    // both training.nsys_start and nsys_stop, and what stop-shutdown does.
    t.note("<DIR>/script.py sets neither training.nsys_start nor nsys_stop");
    record(&mut t, &repo_root(), &path, &launch);
    // A script that sets both: a note naming it, no warning.
    std::fs::write(
        &script,
        "from pithtrain.tasks.pretrain_lm import PretrainLMCfg, launch\ncfg = PretrainLMCfg()\ncfg.training.nsys_start = 5\ncfg.training.nsys_stop = 6\nlaunch(cfg)\n",
    )
    .unwrap();
    t.note("<DIR>/script.py sets training.nsys_start = 5 and nsys_stop = 6");
    record(&mut t, &repo_root(), &path, &launch);
    // A module launch: the reminder.
    record(
        &mut t,
        &repo_root(),
        &path,
        &args("-- torchrun --nproc_per_node=8 -m pithtrain.tasks.pretrain_lm"),
    );
    // --capture-range none: the whole run, with the consequence spelled out.
    let mut none = vec!["--capture-range", "none"];
    none.extend(launch);
    record(&mut t, &repo_root(), &path, &none);
    // Any launcher can ask for the profiler-API window; the reminder is then about its own
    // calls.
    let mut api = vec!["--capture-range", "cudaProfilerApi"];
    api.extend(LAUNCH);
    record(&mut t, &repo_root(), &path, &api);
    insta::assert_snapshot!("profiler_api_window", t.text());
}

// ---- multi-node: nsys inside srun, one export per node ------------------------------------

/// pithtrain's user guide: `srun -W 0 examples/pretrain_lm/launch.sh qwen3-30b-a3b`.
#[test]
fn the_user_guide_srun_line_gets_nsys_inside_srun_once_per_node() {
    let fake = current_nsys();
    let tree = pithtrain_tree();
    let mut t = Transcript::new(redact(&[(fake.path(), "<FAKE>"), (tree.path(), "<TREE>")]));
    let o = record(
        &mut t,
        tree.path(),
        &path_with(fake.path()),
        &args("-- srun -W 0 examples/pretrain_lm/launch.sh qwen3-30b-a3b"),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let words = shell_words(&out);
    let nsys = fake.path().join("nsys").display().to_string();
    // srun and its options first, then nsys, then the script srun starts on each node.
    assert_eq!(&words[..4], ["srun", "-W", "0", nsys.as_str()], "{out}");
    assert_eq!(
        &words[words.len() - 2..],
        ["examples/pretrain_lm/launch.sh", "qwen3-30b-a3b"]
    );
    // Recognised as pithtrain through the script (it runs pretrain_lm): pithtrain's capture
    // set; placed per node because the script starts the node's ranks itself (torchrun).
    // The pattern is single-quoted (in the snapshot), so a shell passes %q{...} through for
    // nsys to expand.
    assert_eq!(nsys_options(&words), pithtrain_per_node_options(), "{out}");
    // The notes: nsys inside srun, once per node; %q{SLURM_NODEID}; one task per node;
    // every node runs the checked nsys; the report reads the folder.
    insta::assert_snapshot!("user_guide_srun_line", t.text());
}

/// The validate skill: `srun -N <nodes> -W 0 -o logging/... launch_validate.sh ...`: srun's
/// `-o FILE` is its own option, not the program.
#[test]
fn the_validate_skill_srun_line_skips_srun_options_with_values() {
    let fake = current_nsys();
    let tree = pithtrain_tree();
    let mut t = Transcript::new(redact(&[(fake.path(), "<FAKE>"), (tree.path(), "<TREE>")]));
    let launch = args(
        "-- srun -N 2 -W 0 -o logging/validate-qwen3-30b-a3b-base.log .agents/skills/validate-correctness/scripts/launch_validate.sh --model qwen3-30b-a3b --pipeline-parallel-size 2 --expert-parallel-size 8",
    );
    let o = record(&mut t, tree.path(), &path_with(fake.path()), &launch);
    let words = shell_words(&text(&o).0);
    assert_eq!(&words[..7], &launch[1..8]);
    assert_eq!(words[7], fake.path().join("nsys").display().to_string());
    assert_eq!(&words[words.len() - 7..], &launch[8..]);
    // nsys inside srun -N 2, once per node; validate.py, which the script runs, is
    // pithtrain's and sets no capture window.
    insta::assert_snapshot!("validate_skill_srun_line", t.text());
}

/// The benchmark: its launch.sh runs srun itself (refused: nsys around it would record this node
/// only); its srun line, written out, is placed, `--output FILE` skipped as srun's option.
#[test]
fn the_benchmark_launcher_is_refused_and_its_srun_line_is_placed() {
    let fake = current_nsys();
    let tree = pithtrain_tree();
    let mut t = Transcript::new(redact(&[(fake.path(), "<FAKE>"), (tree.path(), "<TREE>")]));
    // Refused in one line naming the srun line, nothing printed.
    let o = record(
        &mut t,
        tree.path(),
        &path_with(fake.path()),
        &[
            "--",
            "bash",
            "benchmarks/pretraining/qwen3-30b-a3b/h100-2n8g/launch.sh",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    // The srun line with the script's variables written out.
    let step = "benchmarks/pretraining/qwen3-30b-a3b/h100-2n8g/pp2-dp1-cp1-ep8-seq2048-bf16";
    let log = format!("logging/{step}.log");
    let sh = format!("{step}.sh");
    let launch = [
        "--",
        "srun",
        "--nodes=2",
        "--gpus-per-node=8",
        "--wait=0",
        "--time=00-01:00:00",
        "--output",
        &log,
        &sh,
    ];
    let o = record(&mut t, tree.path(), &path_with(fake.path()), &launch);
    let words = shell_words(&text(&o).0);
    assert_eq!(&words[..7], &launch[1..8]);
    assert_eq!(words.last().unwrap(), &sh);
    // pithtrain through the Python file the step script runs; per node through its
    // torchrun.
    assert_eq!(nsys_options(&words), pithtrain_per_node_options());
    insta::assert_snapshot!("benchmark_launcher", t.text());
}

/// The capture skill's own launcher runs nsys itself: refused, in one line, exit 2, both as the
/// SKILL.md launches it under srun and on one node.
#[test]
fn the_capture_skill_launcher_is_refused_it_runs_nsys_itself() {
    let fake = current_nsys();
    let tree = pithtrain_tree();
    let mut t = Transcript::new(redact(&[(fake.path(), "<FAKE>"), (tree.path(), "<TREE>")]));
    let script = ".agents/skills/capture-nsys-profile/scripts/launch_capture.sh";
    for launch in [
        vec![
            "--",
            "srun",
            "-N",
            "2",
            "-W",
            "0",
            script,
            "--model",
            "qwen3-30b-a3b",
            "--pipeline-parallel-size",
            "2",
            "--expert-parallel-size",
            "8",
        ],
        vec![
            "--",
            "bash",
            script,
            "--model",
            "deepseek-v2-lite",
            "--pipeline-parallel-size",
            "2",
            "--expert-parallel-size",
            "2",
        ],
    ] {
        let o = record(&mut t, tree.path(), &path_with(fake.path()), &launch);
        assert_eq!(o.status.code(), Some(2));
        assert_eq!(text(&o).1.lines().count(), 1);
    }
    insta::assert_snapshot!("capture_skill_launcher", t.text());
}

#[test]
fn torchrun_on_several_nodes_by_hand_names_each_export_by_host() {
    let empty = tempfile::tempdir().unwrap();
    let tree = pithtrain_tree();
    let mut t = Transcript::new(redact(&[
        (empty.path(), "<EMPTY>"),
        (tree.path(), "<TREE>"),
    ]));
    // examples/pretrain_lm/launch.sh's torchrun line, as the shell expands it on node 0.
    let launch = args(
        "-- torchrun --nnodes=2 --node-rank=0 --nproc-per-node=gpu --rdzv-backend=c10d --rdzv-endpoint=10.0.0.1:15213 examples/pretrain_lm/qwen3-30b-a3b/script.py",
    );
    let o = record(&mut t, tree.path(), &path_with(empty.path()), &launch);
    assert!(o.status.success());
    // nsys first, the export named by host (%h); run it on each of the 2 nodes.
    insta::assert_snapshot!("torchrun_by_hand_on_two_nodes", t.text());
}

#[test]
fn per_task_and_per_rank_launches_name_each_export_by_task() {
    let empty = tempfile::tempdir().unwrap();
    let mut t = Transcript::new(redact(&[(empty.path(), "<EMPTY>")]));
    // Once per task: the export named by node and task.
    let o = record(
        &mut t,
        &repo_root(),
        &path_with(empty.path()),
        &args("-- srun -N 2 --ntasks-per-node=8 python train.py"),
    );
    assert!(o.status.success());
    // Inside mpirun, once per rank: by host and process id.
    let o = record(
        &mut t,
        &repo_root(),
        &path_with(empty.path()),
        &args("-- mpirun -np 16 --map-by ppr:8:node python train.py"),
    );
    assert!(o.status.success());
    insta::assert_snapshot!("per_task_and_per_rank", t.text());
}

// ---- --out patterns ---------------------------------------------------------------------

#[test]
fn out_takes_a_pattern_that_must_tell_the_nodes_apart() {
    let empty = tempfile::tempdir().unwrap();
    let mut t = Transcript::new(redact(&[(empty.path(), "<EMPTY>")]));
    let srun = args("srun -N 2 torchrun --nnodes 2 -m pkg.train");
    let mut with = |out: &str| {
        let mut a = vec!["--out", out, "--"];
        a.extend(&srun);
        record(&mut t, &repo_root(), &path_with(empty.path()), &a)
            .status
            .code()
    };
    // The same name on every node: refused, with the fix; a shell variable would be
    // expanded once, here: refused; a per-node folder: refused (the report reads one
    // folder).
    for refused in ["prof/run1", "prof/run_$SLURM_NODEID", "prof/%h/run"] {
        assert_eq!(with(refused), Some(2), "{refused}");
    }
    // A pattern of the user's own, with the job id and the host: used as given.
    assert_eq!(with("prof/run_%q{SLURM_JOB_ID}_%h"), Some(0));
    insta::assert_snapshot!("out_patterns", t.text());
}

#[test]
fn a_folder_holding_earlier_node_exports_is_warned_about() {
    let empty = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let folder = d.path().join("profiling/results/nsys");
    std::fs::create_dir_all(&folder).unwrap();
    for n in [
        "pithtrain_node2.sqlite",
        "pithtrain_node3.nsys-rep",
        "other.sqlite",
    ] {
        std::fs::write(folder.join(n), "").unwrap();
    }
    let mut t = Transcript::new(redact(&[(empty.path(), "<EMPTY>"), (d.path(), "<DIR>")]));
    t.note("<DIR>/profiling/results/nsys holds pithtrain_node2.sqlite, pithtrain_node3.nsys-rep, other.sqlite");
    // The two earlier node exports named; the folder is there.
    let o = record(
        &mut t,
        d.path(),
        &path_with(empty.path()),
        &args("-- srun -N 2 torchrun -m pithtrain.tasks.pretrain_lm"),
    );
    assert!(o.status.success());
    insta::assert_snapshot!("earlier_node_exports", t.text());
}

// ---- launches nsys cannot be placed in ----------------------------------------------------

#[test]
fn launches_nsys_cannot_be_placed_in_are_refused_in_one_line() {
    let empty = tempfile::tempdir().unwrap();
    let mut t = Transcript::new(redact(&[(empty.path(), "<EMPTY>")]));
    for launch in [
        // Queues the job and returns before it runs.
        &["sbatch", "job.sh"][..],
        // Runs its command on this node.
        &["salloc", "-N", "2", "bash"],
        // Runs the command on another machine.
        &["ssh", "node1", "torchrun x.py"],
        // Options instrument does not know.
        &["srun", "--frobnicate", "2", "torchrun", "x.py"],
        &["mpirun", "--weird", "python", "x.py"],
        // Heterogeneous or MPMD jobs, programs read from a file.
        &["srun", "-N", "1", "a", ":", "-N", "1", "b"],
        &["srun", "--multi-prog", "tasks.conf"],
        // srun behind another command.
        &["timeout", "600", "srun", "-N", "2", "torchrun", "x.py"],
        // nsys already there.
        &["srun", "-N", "2", "nsys", "profile", "torchrun", "x.py"],
        &["nsys", "profile", "torchrun", "x.py"],
        // No program.
        &["srun", "-N", "2"],
    ] {
        let mut args = vec!["--"];
        args.extend(launch.iter().copied());
        let o = record(&mut t, &repo_root(), &path_with(empty.path()), &args);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{launch:?}: {err}");
        assert_eq!((out.as_str(), err.lines().count()), ("", 1), "{launch:?}");
    }
    insta::assert_snapshot!("launches_refused", t.text());
}

// ---- quoting: what the shell hands on is what was planned ----------------------------------

#[test]
fn the_printed_command_hands_srun_exactly_the_planned_words() {
    let fake = current_nsys();
    fake_srun(fake.path());
    let launch = [
        "srun",
        "-N",
        "2",
        "--job-name=a b",
        "torchrun",
        "--nnodes",
        "2",
        "train.py",
        "--note",
        "it's $HOME and \"quotes\"",
        "--glob=*.py",
    ];
    let mut args = vec!["--out", "out dir/run_%q{SLURM_NODEID}", "--"];
    args.extend(launch);
    let o = run(&path_with(fake.path()), &args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    // Run the printed command with a real shell; the fake srun records what it was given.
    let sh = Command::new("/bin/sh")
        .arg("-c")
        .arg(&out)
        .env("PATH", path_with(fake.path()))
        .env("HOME", "/should/not/appear")
        .output()
        .unwrap();
    assert!(
        sh.status.success(),
        "{}",
        String::from_utf8_lossy(&sh.stderr)
    );
    let ran = std::fs::read_to_string(fake.path().join("ran-srun.txt")).unwrap();
    let ran: Vec<&str> = ran.lines().collect();
    assert_eq!(&ran[..3], &launch[1..4]);
    assert_eq!(ran[3], fake.path().join("nsys").display().to_string());
    assert_eq!(ran[4], "profile");
    assert_eq!(ran[5], "--output=out dir/run_%q{SLURM_NODEID}");
    assert_eq!(&ran[ran.len() - 7..], &launch[4..]);
    // --run executes the same words (srun first), without a shell.
    std::fs::remove_file(fake.path().join("ran-srun.txt")).unwrap();
    let mut args = vec!["--run", "--out", "out dir/run_%q{SLURM_NODEID}", "--"];
    args.extend(launch);
    let o = run_in(fake.path(), &path_with(fake.path()), &args);
    assert!(o.status.success(), "{}", text(&o).1);
    let ran_again = std::fs::read_to_string(fake.path().join("ran-srun.txt")).unwrap();
    assert_eq!(ran_again.lines().collect::<Vec<_>>(), ran);
    assert!(
        fake.path().join("out dir").is_dir(),
        "--run creates the folder"
    );
}
