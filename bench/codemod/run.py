#!/usr/bin/env python3
"""Benchmark the codemod against named baselines, in one run.

1. `instrument add qwen3-moe --ranks 3,14 --dry-run` and `instrument remove` on the
   miniature pithtrain (and, with --pithtrain, a real checkout), against two baselines on
   the same six target files: the floor of any tree-sitter tool (`floor.rs`: one process
   that reads and parses them, nothing else) and `ruff check --no-cache`.
2. `instrument check` on a generated tree of 10,000 Python files (100 of them
   instrumented), against `grep -rl` for the marker.

Each command is a whole process, timed for its wall time and its CPU time (user + system,
from the kernel's accounting of the child). The commands of one comparison run in turn,
round after round (after one warm-up round each), so a change in the machine's load hits
all of them alike; the figures are medians. With --callgrind, the instructions of `add`
and of the floor (valgrind --tool=callgrind), the steadiest figure on a loaded machine.
The load average is printed with the results.

    bench/codemod/run.py [--runs N] [--pithtrain DIR] [--callgrind] [--before BIN]

(--before: another build of instrument, e.g. the one before a change, timed in the same
rounds.)

Every binary timed (instrument, the floor, --before) is first copied into a temporary
folder, as an installer would put it, and run from there: on the machine these figures
come from, a binary run from the file the linker wrote ran 5% slower than a copy of the
same file (the same build measured both ways in the same rounds, 2026-12-03), an effect
of how that file sits in the page cache that no installed binary has.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "target" / "release" / "instrument"
FLOOR = ROOT / "target" / "release" / "examples" / "codemod_floor"
TARGETS = [
    "pithtrain/dualpipe/dualpipev.py",
    "pithtrain/dualpipe/execution.py",
    "pithtrain/models/qwen3_moe.py",
    "pithtrain/modules/distributed.py",
    "pithtrain/modules/training.py",
    "pithtrain/tasks/pretrain_lm.py",
]


def once(cmd, cwd, ok):
    """Run `cmd` once: (wall seconds, CPU seconds)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in ok:
        sys.exit(f"{cmd} exited {code}")
    return wall, usage.ru_utime + usage.ru_stime


def rounds(commands, cwd, runs):
    """Time `commands` ({name: (cmd, ok, setup)}) in turn, `runs` rounds after a warm-up:
    name -> (median wall, median CPU)."""
    samples = {name: ([], []) for name in commands}
    for i in range(runs + 1):
        for name, (cmd, ok, setup) in commands.items():
            if setup:
                setup()
            wall, cpu = once(cmd, cwd, ok)
            if i:  # the first round warms the page cache
                samples[name][0].append(wall)
                samples[name][1].append(cpu)
    return {n: (statistics.median(w), statistics.median(c)) for n, (w, c) in samples.items()}


def row(name, figures, baseline=None):
    wall, cpu = figures
    ratio = ""
    if baseline:
        ratio = f"  {cpu / baseline[1]:5.2f}x CPU  {wall / baseline[0]:5.2f}x wall"
    print(f"  {name:<44} {cpu * 1000:7.1f} ms CPU {wall * 1000:7.1f} ms wall{ratio}")


def instructions(cmd, cwd):
    out = Path(tempfile.mkdtemp(prefix="bench-cg-")) / "cg.out"
    p = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd],
        cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    shutil.rmtree(out.parent)
    m = re.search(r"Collected : (\d+)", p.stderr)
    return int(m.group(1)) if m else None


def codemod(checkout, runs, label, callgrind, before=None):
    work = Path(tempfile.mkdtemp(prefix="bench-codemod-"))
    tree = work / "tree"
    shutil.copytree(checkout, tree)
    ruff = shutil.which("ruff") or sys.exit("ruff is needed for the baseline (pip install ruff==0.15.0)")
    add = [str(BIN), "add", "qwen3-moe", "--ranks", "3,14", "--dry-run"]

    def instrumented():
        subprocess.run([str(BIN), "add", "qwen3-moe", "--ranks", "3,14"], cwd=tree, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    print(f"{label} ({checkout}); load average before: {os.getloadavg()[0]:.2f}")
    commands = {
        "floor": ([str(FLOOR), ".", *TARGETS], (0,), None),
        "floor, threads": ([str(FLOOR), "--threads", ".", *TARGETS], (0,), None),
        "ruff": ([ruff, "check", "--no-cache", "--quiet", *TARGETS], (0, 1), None),
        "add": (add, (0,), None),
    }
    if before:
        commands["before"] = ([str(before), *add[1:]], (0,), None)
    r = rounds(commands, tree, runs)
    row("floor: read + tree-sitter parse (6 files)", r["floor"])
    row("floor, one thread per file", r["floor, threads"])
    row("ruff check --no-cache (6 target files)", r["ruff"])
    row("instrument add qwen3-moe --dry-run  (vs floor)", r["add"], r["floor"])
    row("  the same, vs ruff check", r["add"], r["ruff"])
    if before:
        row(f"add with {before.name} (vs floor)", r["before"], r["floor"])
        row("instrument add vs that build", r["add"], r["before"])
    rm = rounds({
        "floor": ([str(FLOOR), ".", *TARGETS], (0,), None),
        "remove": ([str(BIN), "remove"], (0,), instrumented),
    }, tree, runs)
    row("instrument remove  (vs floor)", rm["remove"], rm["floor"])
    if callgrind and shutil.which("valgrind"):
        a = instructions(add, tree)
        f = instructions([str(FLOOR), ".", *TARGETS], tree)
        if a and f:
            print(f"  instructions (callgrind): add {a / 1e6:.0f} M, floor {f / 1e6:.0f} M, {a / f:.2f}x")
        if before and f:
            b = instructions([str(before), *add[1:]], tree)
            if b:
                print(f"  instructions (callgrind): {before.name} {b / 1e6:.0f} M, {b / f:.2f}x the floor")
    print(f"  load average after: {os.getloadavg()[0]:.2f}")
    shutil.rmtree(work)
    return r["add"][1] / r["floor"][1], r["add"][0] / r["floor"][0]


def check_tree(runs):
    work = Path(tempfile.mkdtemp(prefix="bench-check-"))
    body = "".join(f"def f{i}(x):\n    y = x * {i}\n    return y + 1\n\n\n" for i in range(40))
    marked = (
        "def g():\n    # >>> instrument memory-prints 4A.x (take out: instrument remove) h=00000000\n"
        "    print(1)\n    # <<< instrument memory-prints 4A.x\n"
    )
    for i in range(10_000):
        d = work / f"pkg{i // 100:03d}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i:05d}.py").write_text(body + (marked if i % 100 == 0 else ""))
    print("check on 10,000 generated Python files (100 instrumented)")
    r = rounds({
        "grep": (["grep", "-rl", "--include=*.py", "# >>> instrument ", "."], (0,), None),
        "check": ([str(BIN), "check", "--root", "."], (1,), None),
    }, work, runs)
    row("baseline: grep -rl '# >>> instrument '", r["grep"])
    row("instrument check", r["check"], r["grep"])
    shutil.rmtree(work)
    return r["check"][1] / r["grep"][1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--pithtrain", type=Path)
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--skip-check", action="store_true", help="leave out the 10,000-file check")
    ap.add_argument("--before", type=Path, help="another instrument binary, timed in the same rounds")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "codemod_floor"], cwd=ROOT, check=True)
    global BIN, FLOOR
    installed = Path(tempfile.mkdtemp(prefix="bench-bin-"))
    try:
        BIN = Path(shutil.copy(BIN, installed / "instrument"))
        FLOOR = Path(shutil.copy(FLOOR, installed / "codemod_floor"))
        if args.before:
            args.before = Path(shutil.copy(args.before, installed / f"before-{args.before.name}"))
        cpu, wall = codemod(ROOT / "fixtures" / "pithtrain", args.runs, "codemod on the fixture", args.callgrind, args.before)
        if args.pithtrain:
            cpu, wall = codemod(args.pithtrain, args.runs, "codemod on a real pithtrain checkout", args.callgrind, args.before)
        print(f"aim (issue #27): add --dry-run <= 1.6x the floor in wall time: {wall:.2f}x ({cpu:.2f}x CPU)")
        if not args.skip_check:
            check_ratio = check_tree(max(5, args.runs // 2))
            print(f"aim: check <= 2x grep: {check_ratio:.2f}x CPU")
    finally:
        shutil.rmtree(installed)


if __name__ == "__main__":
    main()
