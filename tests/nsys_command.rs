//! `instrument nsys command`: the recommended command, and its checks against a fake `nsys`
//! on PATH that answers like a given release (fixtures/nsys/fake/).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// PATH with `first` in front of the system directories (for /bin/sh) but no real nsys.
fn path_with(first: &Path) -> String {
    format!("{}:/usr/bin:/bin", first.display())
}

fn run(path: &str, args: &[&str]) -> Output {
    Command::new(bin())
        .args(["nsys", "command"])
        .args(args)
        .env("PATH", path)
        .env_remove("FAKE_NSYS_EXIT")
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const LAUNCH: [&str; 6] = [
    "--",
    "torchrun",
    "--standalone",
    "--nproc_per_node=4",
    "-m",
    "pkg.profile_run",
];

fn trace_json(dir: &Path) -> PathBuf {
    let p = dir.join("trace.json");
    std::fs::write(
        &p,
        r#"[{"domain": "pithtrain", "module": "pithtrain.models.moe", "functions": ["MoELayer.forward"]}]"#,
    )
    .unwrap();
    p
}

#[test]
fn without_nsys_prints_the_recommended_command_and_says_it_is_unchecked() {
    let empty = tempfile::tempdir().unwrap();
    let tj = trace_json(empty.path());
    let mut args = vec!["--out", "prof/run1", "--trace-json", tj.to_str().unwrap()];
    args.extend(LAUNCH);
    let o = run(&path_with(empty.path()), &args);
    assert!(o.status.success());
    let (out, err) = text(&o);
    let flat = out.replace(" \\\n", " ");
    // The allocator setting changes the run being profiled: not set unless asked for.
    assert!(flat.starts_with("nsys profile -o prof/run1 "), "{out}");
    assert!(!out.contains("PYTORCH_CUDA_ALLOC_CONF") && !err.contains("PYTORCH_CUDA_ALLOC_CONF"));
    // Not a pithtrain launcher: the whole run is recorded.
    assert!(!out.contains("--capture-range"), "{out}");
    for needle in [
        "--export sqlite",
        "--trace cuda,nvtx,osrt",
        "--force-overwrite true",
        "--cuda-graph-trace=node",
        "--cuda-memory-usage true",
        "--pytorch=autograd-shapes-nvtx",
        &format!("--python-functions-trace={}", tj.display()),
        "--cudabacktrace=all",
        "--python-backtrace=cuda",
    ] {
        assert!(flat.contains(needle), "missing {needle} in {out}");
    }
    assert!(
        flat.trim_end()
            .ends_with("torchrun --standalone --nproc_per_node=4 -m pkg.profile_run")
    );
    assert!(!flat.contains("functions-trace,") && !flat.contains("--pytorch=functions-trace"));
    assert!(
        err.contains("could not be checked against an installed nsys"),
        "{err}"
    );
    assert!(err.contains("instrument nsys report prof/run1.sqlite"));
}

#[test]
fn current_release_passes_every_check() {
    let fake = fake_nsys(
        "help-current.txt",
        "status-ok.txt",
        "2025.1.1.131-251135540420v0",
    );
    let tj = trace_json(fake.path());
    let mut args = vec!["--trace-json", tj.to_str().unwrap()];
    args.extend(LAUNCH);
    let o = run(&path_with(fake.path()), &args);
    assert!(o.status.success());
    let (out, err) = text(&o);
    assert!(!err.contains("warning:"), "{err}");
    assert!(
        err.contains("checked against") && err.contains("2025.1.1"),
        "{err}"
    );
    // The checked binary is named by its absolute path.
    assert!(
        out.contains(&format!("{} profile", fake.path().join("nsys").display())),
        "{out}"
    );
    assert!(out.contains("--pytorch=autograd-shapes-nvtx"));
}

#[test]
fn cpu_sampling_unavailable_makes_backtraces_inert_with_the_reason() {
    let fake = fake_nsys(
        "help-current.txt",
        "status-fail.txt",
        "2024.6.2.225-246235244400v0",
    );
    let o = run(&path_with(fake.path()), &LAUNCH);
    let (out, err) = text(&o);
    assert!(o.status.success());
    assert!(
        err.contains("--cudabacktrace and --python-backtrace will be inert"),
        "{err}"
    );
    assert!(err.contains("Linux Kernel Paranoid Level = 4"), "{err}");
    assert!(out.contains("--cudabacktrace=all"));
    // And --no-backtraces leaves them out, with no warning.
    let mut args = vec!["--no-backtraces"];
    args.extend(LAUNCH);
    let o = run(&path_with(fake.path()), &args);
    let (out, err) = text(&o);
    assert!(
        !out.contains("backtrace") && !err.contains("inert"),
        "{out}{err}"
    );
}

#[test]
fn release_without_autograd_shapes_falls_back_to_autograd_nvtx() {
    let fake = fake_nsys(
        "help-no-shapes.txt",
        "status-ok.txt",
        "2024.5.1.113-245134619542v0",
    );
    let o = run(&path_with(fake.path()), &LAUNCH);
    let (out, err) = text(&o);
    assert!(
        out.contains("--pytorch=autograd-nvtx") && !out.contains("autograd-shapes-nvtx"),
        "{out}"
    );
    assert!(
        err.contains("does not accept autograd-shapes-nvtx"),
        "{err}"
    );
}

#[test]
fn old_release_warns_about_version_and_drops_unknown_options() {
    let fake = fake_nsys("help-old.txt", "status-ok.txt", "2022.4.2.1-df9881f");
    let tj = trace_json(fake.path());
    let mut args = vec!["--trace-json", tj.to_str().unwrap()];
    args.extend(LAUNCH);
    let o = run(&path_with(fake.path()), &args);
    let (out, err) = text(&o);
    assert!(o.status.success());
    assert!(err.contains("nsys 2022.4, older than 2024.5"), "{err}");
    for opt in [
        "--pytorch",
        "--python-functions-trace",
        "--python-backtrace",
        "--cuda-memory-usage",
        "--cuda-graph-trace",
    ] {
        assert!(!out.contains(opt), "{opt} should be dropped: {out}");
        assert!(
            err.contains(&format!("does not list {opt}")),
            "{opt}: {err}"
        );
    }
    assert!(
        out.contains("--trace cuda,nvtx ") || out.contains("--trace cuda,nvtx \\"),
        "{out}"
    );
    assert!(err.contains("--trace does not accept osrt"), "{err}");
}

#[test]
fn bad_trace_json_is_reported() {
    let empty = tempfile::tempdir().unwrap();
    let bad = empty.path().join("bad.json");
    std::fs::write(&bad, r#"{"module": "x"}"#).unwrap();
    for (file, needle) in [
        (bad.clone(), "not a functions-trace JSON"),
        (empty.path().join("missing.json"), "cannot read it"),
    ] {
        let mut args = vec!["--trace-json", file.to_str().unwrap()];
        args.extend(LAUNCH);
        let (_, err) = text(&run(&path_with(empty.path()), &args));
        assert!(err.contains(needle), "{err}");
    }
}

#[test]
fn no_sqlite_leaves_out_the_export() {
    let empty = tempfile::tempdir().unwrap();
    let mut args = vec!["--no-sqlite"];
    args.extend(LAUNCH);
    let (out, err) = text(&run(&path_with(empty.path()), &args));
    assert!(!out.contains("--export"), "{out}");
    assert!(!err.contains("instrument nsys report"));
}

#[test]
fn run_executes_the_checked_nsys_with_the_environment() {
    let fake = fake_nsys(
        "help-current.txt",
        "status-ok.txt",
        "2025.1.1.131-251135540420v0",
    );
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
    assert_eq!(&ran[..2], &["-o", out_name.to_str().unwrap()]);
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
    let o = Command::new(bin())
        .args(["nsys", "command"])
        .args(&args)
        .env("PATH", path_with(fake.path()))
        .env_remove("FAKE_NSYS_EXIT")
        .output()
        .unwrap();
    assert!(o.status.success());
    let (out, err) = text(&o);
    assert!(
        out.starts_with("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "),
        "{out}"
    );
    assert!(
        err.contains("note: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is set"),
        "{err}"
    );
    let env = std::fs::read_to_string(fake.path().join("ran-env.txt")).unwrap();
    assert_eq!(env.trim(), "expandable_segments:True");
}

/// A pithtrain launcher drives the capture window itself: the command follows the CUDA profiler
/// API, as pithtrain's own capture script does, and reminds (or warns) about nsys_start/stop.
#[test]
fn pithtrain_launcher_captures_the_profiler_api_window() {
    let fake = fake_nsys(
        "help-current.txt",
        "status-ok.txt",
        "2025.1.1.131-251135540420v0",
    );
    let d = tempfile::tempdir().unwrap();
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
    let (out, err) = text(&run(&path_with(fake.path()), &launch));
    let flat = out
        .replace(" \\\n", " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        flat.contains("--capture-range=cudaProfilerApi --capture-range-end=stop-shutdown"),
        "{out}"
    );
    assert!(flat.contains("--cuda-graph-trace=node"), "{out}");
    assert!(
        err.contains("warning: --capture-range=cudaProfilerApi")
            && err.contains("does not set both")
            && err.contains("training.nsys_start = 5"),
        "{err}"
    );
    // A script that sets both: a note naming it, no warning.
    std::fs::write(
        &script,
        "from pithtrain.tasks.pretrain_lm import PretrainLMCfg, launch\ncfg = PretrainLMCfg()\ncfg.training.nsys_start = 5\ncfg.training.nsys_stop = 6\nlaunch(cfg)\n",
    )
    .unwrap();
    let (_, err) = text(&run(&path_with(fake.path()), &launch));
    assert!(!err.contains("warning:"), "{err}");
    assert!(
        err.contains(
            "note: --capture-range=cudaProfilerApi: nsys records the steps from training.nsys_start"
        ),
        "{err}"
    );
    // A module launch: the reminder.
    let (out, err) = text(&run(
        &path_with(fake.path()),
        &[
            "--",
            "torchrun",
            "--nproc_per_node=8",
            "-m",
            "pithtrain.tasks.pretrain_lm",
        ],
    ));
    assert!(out.contains("--capture-range=cudaProfilerApi"), "{out}");
    assert!(err.contains("set both in the config"), "{err}");
    // --capture-range none: the whole run, with the consequence spelled out.
    let mut args = vec!["--capture-range", "none"];
    args.extend(launch);
    let (out, err) = text(&run(&path_with(fake.path()), &args));
    assert!(!out.contains("--capture-range"), "{out}");
    assert!(
        err.contains("records the whole run, initialisation and warm-up included"),
        "{err}"
    );
    // Any launcher can ask for the profiler-API window; the reminder is then about its own calls.
    let mut args = vec!["--capture-range", "cudaProfilerApi"];
    args.extend(LAUNCH);
    let (out, err) = text(&run(&path_with(fake.path()), &args));
    assert!(out.contains("--capture-range=cudaProfilerApi"), "{out}");
    assert!(
        err.contains("the program's cudaProfilerStart and cudaProfilerStop calls")
            && !err.contains("nsys_start"),
        "{err}"
    );
}

#[test]
fn run_without_nsys_is_a_user_error() {
    let empty = tempfile::tempdir().unwrap();
    let mut args = vec!["--run"];
    args.extend(LAUNCH);
    let o = run(&path_with(empty.path()), &args);
    assert_eq!(o.status.code(), Some(2));
    let (_, err) = text(&o);
    assert!(
        err.lines()
            .any(|l| l.starts_with("error:") && l.contains("no usable nsys")),
        "{err}"
    );
}
