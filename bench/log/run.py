#!/usr/bin/env python3
"""Benchmark `instrument log` against the baseline a person uses today: `grep -a -F
'[rank='` for the print lines, then a Python script with regular expressions for the
same facts (bench/log/baseline.py). Both read the same generated 1 GB logs in the same
run, in turn (A B A B ...), and must agree on the facts (per rank: schedule points, peak
of the profiled step, CUDA context, NCCL world and device-mesh cost, snapshot path).

Two logs, from one real run of the instrumented fixture on the fake torch
(tools/log_fixture.py, qwen3-moe, pp=2, ranks 3 and 14):
- console: the two nodes' torchrun consoles (prints among NCCL INFO lines, warnings,
  progress bars), then a long training run's noise from 16 workers to 1 GB: the common
  case, a huge log with the prints in it once;
- prints: the srun --label log of that run repeated with the ranks renumbered (512 ranks,
  each restarted many times) to 1 GB: every other line a print.

    bench/log/run.py [--size-mb 1024] [--runs 5] [--work /tmp/log-work/bench]

The logs are written under --work and deleted at the end. Prints a table of medians
(wall, CPU, peak RSS) with the ratio to the baseline.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GIB = 1073741824.0


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def scenario(work: Path, binary: Path, name: str = "scenario", extra=()) -> Path:
    """One run of the instrumented fixture (qwen3-moe, pp=2, ranks 3 and 14) into work/name;
    `extra`: more tools/log_fixture.py arguments (a planted change)."""
    checkout = work / "checkout"
    if checkout.exists():
        shutil.rmtree(checkout)
    shutil.copytree(ROOT / "fixtures" / "pithtrain", checkout, ignore=shutil.ignore_patterns("__pycache__"))
    snaps = work / "snaps"
    snaps.mkdir(exist_ok=True)
    sh([str(binary), "add", "qwen3-moe", "--root", str(checkout), "--ranks", "3,14", "--snapshot-dir", str(snaps)],
       stdout=subprocess.DEVNULL)
    out = work / name
    sh([sys.executable, str(ROOT / "tools" / "log_fixture.py"), "scenario", "--checkout", str(checkout),
        "--example", "qwen3-tiny", "--pp", "2", "--snapshot-dir", str(snaps), "--out", str(out), *extra])
    return out


def noise_block(steps: int) -> str:
    out = []
    for step in range(steps):
        for local in range(8):
            pid = 41000 + local
            out.append(f"[default{local}]:node0:{pid}:{pid + step % 90} [{local}] NCCL INFO Channel {step % 32:02d}/32 :    0   1   2   3   4   5   6   7\n")
        out.append(f"[default0]:step {step:>6d} | loss {10.8 - step * 1e-4:.4f} | lr 3.00e-04 | grad_norm 2.13 | tokens/s 51234 | 1.24s/it\n")
        if step % 50 == 0:
            out.append("[default3]:/usr/local/lib/python3.11/site-packages/torch/utils/checkpoint.py:91: UserWarning: None of the inputs have requires_grad=True. Gradients will be None\n")
            out.append("[default3]:  warnings.warn(\n")
        if step % 200 == 0:
            bar = "".join(f"[default0]:\rsaving: {p:3d}%|{'#' * (p // 10):<10}|" for p in range(0, 101, 10))
            out.append(bar + "\n")
    return "".join(out)


def write_console(path: Path, scen: Path, size: int) -> None:
    head = (scen / "node0.console.log").read_text()
    with gzip.open(scen / "node1.console.log.gz", "rt") as f:
        head += f.read()
    block = noise_block(4000).encode()
    with open(path, "wb") as f:
        f.write(head.encode())
        written = len(head)
        while written < size:
            f.write(block)
            written += len(block)


def write_prints(path: Path, scen: Path, size: int) -> None:
    text = (scen / "srun.log").read_bytes().decode()
    # The rank in each print's prefix, in the snapshot file names, and in the run's shape.
    rank_re = re.compile(r"\[rank=(3|14)([ \]])|rank(3|14)_step|run \| rank=(3|14);")

    def renumber(m, x):
        if x.group(1):
            return f"[rank={m[x.group(1)]}{x.group(2)}"
        if x.group(3):
            return f"rank{m[x.group(3)]}_step"
        return f"run | rank={m[x.group(4)]};"

    copies = []
    for k in range(512 // 2):
        a, b = 2 * k, 2 * k + 1
        m = {"3": str(a), "14": str(b)}
        copies.append(rank_re.sub(lambda x: renumber(m, x), text).encode())
    with open(path, "wb") as f:
        written, i = 0, 0
        while written < size:
            c = copies[i % len(copies)]
            f.write(c)
            written += len(c)
            i += 1


def run(cmd, out_path: Path):
    """Run `cmd` (a list; a pipeline through sh), stdout to out_path: (wall s, cpu s, peak RSS bytes)."""
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{cmd} failed: {p.stderr.read().decode()}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def tool_facts(report: dict) -> dict:
    facts = {}
    for r in report["ranks"]:
        stated = {c["label"]: c["bytes"] for c in r["setup_breakdown"] if c["source"] == "stated"}
        step = r.get("step")
        facts[str(r["rank"])] = {
            "points": len(step["points"]) if step else 0,
            "peak_gib": "%.2f" % (step["peak"]["allocated_bytes"] / GIB) if step else None,
            "cuda_ctx_gib": "%.2f" % (stated["CUDA context"] / GIB),
            "nccl_world_gib": "%.2f" % (stated["NCCL world"] / GIB),
            "mesh_gib": "%.2f" % (stated["device mesh"] / GIB),
            "snapshot": r["files_written"][-1]["path"] if r["files_written"] else None,
        }
    return facts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work", default="/tmp/log-work/bench")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sh(["cargo", "build", "--release", "--quiet", "--manifest-path", str(ROOT / "Cargo.toml")])
    binary = ROOT / "target" / "release" / "instrument"
    size = args.size_mb << 20
    try:
        scen = scenario(work, binary)
        logs = {"console": work / "console.log", "prints": work / "prints.log"}
        write_console(logs["console"], scen, size)
        write_prints(logs["prints"], scen, size)
        rows = []
        for name, log in logs.items():
            tool = [str(binary), "log", "--json", str(log)]
            base = ["sh", "-c", f"grep -a -F '[rank=' '{log}' | {sys.executable} '{ROOT / 'bench/log/baseline.py'}'"]
            a, b = [], []
            for _ in range(args.runs):
                a.append(run(tool, work / "tool.json"))
                b.append(run(base, work / "base.json"))
            got = tool_facts(json.loads((work / "tool.json").read_text()))
            want = json.loads((work / "base.json").read_text())
            if got != want:
                diff = [k for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)][:3]
                raise SystemExit(f"{name}: the tool and the baseline disagree, e.g. ranks {diff}: "
                                 f"{[got.get(k) for k in diff]} vs {[want.get(k) for k in diff]}")
            lines = sum(1 for _ in open(log, "rb"))
            rows.append((name, log.stat().st_size, lines, len(got), a, b))
        print(f"{args.runs} runs each, alternating; medians (the machine is shared: trust the ratios)")
        print("| log | size | lines | ranks | instrument log --json | grep -F + Python | ratio (wall) | peak RSS instrument / baseline |")
        print("|---|---|---|---|---|---|---|---|")
        for name, sz, lines, ranks, a, b in rows:
            aw = statistics.median(x[0] for x in a)
            bw = statistics.median(x[0] for x in b)
            pair = statistics.median(y[0] / x[0] for x, y in zip(a, b))
            ar = max(x[2] for x in a) / 2**20
            br = max(x[2] for x in b) / 2**20
            print(f"| {name} | {sz / 1e9:.2f} GB | {lines:,} | {ranks} | {aw:.2f} s (cpu {statistics.median(x[1] for x in a):.2f} s) "
                  f"| {bw:.2f} s (cpu {statistics.median(x[1] for x in b):.2f} s) | {bw / aw:.1f}x faster (pairs: {pair:.1f}x) "
                  f"| {ar:.0f} MiB / {br:.0f} MiB |")
        print("facts agree: points, peak, CUDA context, NCCL world, device mesh, snapshot path per rank")
    finally:
        for p in ("console.log", "prints.log", "tool.json", "base.json"):
            (work / p).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
