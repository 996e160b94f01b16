#!/usr/bin/env python3
"""Benchmark the codemod against named baselines, in one run.

1. `instrument add qwen3-moe --dry-run` and `instrument remove` on the miniature
   pithtrain (and, with --pithtrain, a real checkout), against two baselines on the same
   six target files: the floor of any tree-sitter tool (`floor.rs`: one process that reads
   and parses them, nothing else) and `ruff check --no-cache`.
2. `instrument check` on a generated tree of 10,000 Python files (100 of them
   instrumented), against `grep -rl` for the marker.

Whole-process wall time, median of N runs after one warm-up. Usage:
    bench/codemod/run.py [--runs N] [--pithtrain DIR]   (DIR: also time a real checkout)
"""

import argparse
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


def timed(cmd, cwd, runs, setup=None, ok=(0,)):
    samples = []
    for i in range(runs + 1):
        if setup:
            setup()
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dt = time.perf_counter() - t0
        if p.returncode not in ok:
            sys.exit(f"{cmd} exited {p.returncode}")
        if i:  # the first run warms the page cache
            samples.append(dt)
    return statistics.median(samples)


def row(name, seconds, baseline=None):
    ratio = f"{seconds / baseline:6.2f}x" if baseline else "       "
    print(f"  {name:<48} {seconds * 1000:9.1f} ms  {ratio}")


def codemod(checkout, runs, label):
    work = Path(tempfile.mkdtemp(prefix="bench-codemod-"))
    tree = work / "tree"
    shutil.copytree(checkout, tree)
    ruff = shutil.which("ruff") or sys.exit("ruff is needed for the baseline (pip install ruff==0.15.0)")
    print(f"{label} ({checkout})")
    floor = timed([str(FLOOR), ".", *TARGETS], tree, runs)
    row("floor: read + tree-sitter parse (6 files)", floor)
    floor_threads = timed([str(FLOOR), "--threads", ".", *TARGETS], tree, runs)
    row("floor, one thread per file", floor_threads)
    base = timed([ruff, "check", "--no-cache", "--quiet", *TARGETS], tree, runs, ok=(0, 1))
    row("ruff check --no-cache (6 target files)", base)
    add = timed([str(BIN), "add", "qwen3-moe", "--ranks", "3,14", "--dry-run"], tree, runs)
    row("instrument add qwen3-moe --dry-run  (vs floor)", add, floor)
    row("  the same, vs ruff check", add, base)

    def instrumented():
        subprocess.run([str(BIN), "add", "qwen3-moe", "--ranks", "3,14"], cwd=tree, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    remove = timed([str(BIN), "remove"], tree, runs, setup=instrumented)
    row("instrument remove  (vs floor)", remove, floor)
    shutil.rmtree(work)
    return add / floor, remove / floor


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
    grep = timed(["grep", "-rl", "--include=*.py", "# >>> instrument ", "."], work, runs, ok=(0,))
    row("baseline: grep -rl '# >>> instrument '", grep)
    check = timed([str(BIN), "check", "--root", "."], work, runs, ok=(1,))
    row("instrument check", check, grep)
    shutil.rmtree(work)
    return check / grep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--pithtrain", type=Path)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "codemod_floor"], cwd=ROOT, check=True)
    add_ratio, _ = codemod(ROOT / "fixtures" / "pithtrain", args.runs, "codemod on the fixture")
    if args.pithtrain:
        add_ratio, _ = codemod(args.pithtrain, args.runs, "codemod on a real pithtrain checkout")
    check_ratio = check_tree(max(5, args.runs // 2))
    print(f"aims: add --dry-run <= 1.5x the floor ({add_ratio:.2f}x), check <= 2x grep ({check_ratio:.2f}x)")


if __name__ == "__main__":
    main()
