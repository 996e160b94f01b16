#!/usr/bin/env python3
"""Benchmark `instrument report` on a 16-rank run against reading the same sixteen snapshots
alone with the same workers.

The run: pp=2 x 8, one profiled step, every rank profiled.
- The two node logs are a real run of the instrumented fixture on the fake torch
  (tools/log_fixture.py, qwen3-moe, pp=2, all 16 ranks printing): node0.console.log and
  node1.console.log.gz, as torchrun writes them.
- Sixteen step snapshots of the marked shape, `memory_snapshot_rank{R}_step0.pickle`, about
  --mb MB each (tools/gen_snapshots.py --bench-marked: the profiled step of a pipeline rank
  recorded as the recipe records it, every chunk call of DualPipeV.step inside its schedule
  mark, two detail layers' stages marked). Two are generated, one per pipeline rank, and
  each rank's file is a copy of its pipeline rank's (real copies, one file per rank).

Measured, in the same session, alternating (A B A B ...), after one warm-up of each:
- the baseline, named: `instrument snapshot SNAPS_DIR` over the same sixteen files (the
  snapshot reader's folder-of-ranks mode: every file read whole and analysed, two at a time);
- `instrument report RUN_DIR` (the two node logs and the sixteen snapshots: every file read
  and reduced to its schedule on as many workers as there are cores).
Both run with the same workers: pinned to --workers cores with taskset (the reader takes
min(cores, 2) workers, the report as many as there are cores: pinned to 2, both have 2).
Then peak RSS of both at 4, 8 and 16 files (the 4- and 8-file folders hold the logs and the
first ranks' snapshots, hard links to the same files).

    bench/report/run.py [--mb 500] [--runs 3] [--workers 2] [--work /tmp/report-bench] [--keep]

Everything generated goes under --work and is deleted at the end unless --keep (then it is
reused by the next run). Prints a markdown table of medians with the ratio, and the RSS rows.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RANKS = 16


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def run(cmd, out_path: Path):
    """Run `cmd`, stdout to out_path: (wall s, cpu s, peak RSS bytes)."""
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{cmd} exited {code}: {p.stderr.read().decode()}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def logs(work: Path, binary: Path) -> tuple[list[Path], dict]:
    """The two node logs of the fixture run with all 16 ranks printing, and each rank's pp rank."""
    out = work / "fixture"
    if not (out / "truth.json").exists():
        checkout = work / "checkout"
        shutil.rmtree(checkout, ignore_errors=True)
        shutil.copytree(ROOT / "fixtures" / "pithtrain", checkout, ignore=shutil.ignore_patterns("__pycache__"))
        small = work / "fixture-snaps"
        small.mkdir(exist_ok=True)
        ranks = ",".join(str(r) for r in range(RANKS))
        sh([str(binary), "add", "qwen3-moe", "--root", str(checkout), "--ranks", ranks, "--snapshot-dir", str(small)],
           stdout=subprocess.DEVNULL)
        sh([sys.executable, str(ROOT / "tools" / "log_fixture.py"), "scenario", "--checkout", str(checkout),
            "--example", "qwen3-tiny", "--pp", "2", "--ranks", ranks, "--snapshot-dir", str(small), "--out", str(out)],
           stdout=subprocess.DEVNULL)
    truth = json.loads((out / "truth.json").read_text())
    pp = {int(r): t["pp_rank"] for r, t in truth["ranks"].items()}
    return [out / "node0.console.log", out / "node1.console.log.gz"], pp


def snapshots(work: Path, mb: float, pp_ranks: set) -> dict:
    """One marked step snapshot per pipeline rank."""
    gen = work / "gen"
    gen.mkdir(exist_ok=True)
    files = {}
    for p in sorted(pp_ranks):
        f = gen / f"pp{p}.pickle"
        if not f.exists():
            print(f"generating a ~{mb:.0f} MB marked step snapshot of pp rank {p}...", file=sys.stderr)
            sh([sys.executable, str(ROOT / "tools" / "gen_snapshots.py"), "--bench-marked", str(f), "--mb", str(mb),
                "--pp-rank", str(p)], stdout=subprocess.DEVNULL)
        files[p] = f
    return files


def folders(work: Path, node_logs, pp, generated) -> dict:
    """run{N}: the logs and the first N ranks' snapshots; snaps{N}: the snapshots alone."""
    full_run, full_snaps = work / f"run{RANKS}", work / f"snaps{RANKS}"
    for d in (full_run, full_snaps):
        d.mkdir(exist_ok=True)
    for r in range(RANKS):
        name = f"memory_snapshot_rank{r}_step0.pickle"
        if not (full_run / name).exists():
            shutil.copyfile(generated[pp[r]], full_run / name)
        if not (full_snaps / name).exists():
            os.link(full_run / name, full_snaps / name)
    for log in node_logs:
        if not (full_run / log.name).exists():
            shutil.copyfile(log, full_run / log.name)
    out = {RANKS: (full_run, full_snaps)}
    for n in (4, 8):
        rd, sd = work / f"run{n}", work / f"snaps{n}"
        for d in (rd, sd):
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir()
        for log in node_logs:
            os.link(full_run / log.name, rd / log.name)
        for r in range(n):
            name = f"memory_snapshot_rank{r}_step0.pickle"
            os.link(full_run / name, rd / name)
            os.link(full_run / name, sd / name)
        out[n] = (rd, sd)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--work", default="/tmp/report-bench")
    ap.add_argument("--keep", action="store_true", help="keep the generated files (and reuse them next time)")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    sh(["cargo", "build", "--release", "--quiet", "--manifest-path", str(ROOT / "Cargo.toml")])
    binary = ROOT / "target" / "release" / "instrument"
    cores = os.cpu_count() or 1
    pin = ["taskset", "-c", f"0-{args.workers - 1}"] if cores > args.workers and shutil.which("taskset") else []
    try:
        node_logs, pp = logs(work, binary)
        generated = snapshots(work, args.mb, set(pp.values()))
        dirs = folders(work, node_logs, pp, generated)
        run_dir, snap_dir = dirs[RANKS]
        base = [*pin, str(binary), "snapshot", "--json", str(snap_dir)]
        tool = [*pin, str(binary), "report", "--json", str(run_dir)]
        run(base, work / "base.json")  # warm-up: the files into the page cache
        run(tool, work / "tool.json")
        load = [os.getloadavg()[0]]
        a, b = [], []
        for i in range(args.runs):
            print(f"  run {i + 1} of {args.runs}...", file=sys.stderr)
            a.append(run(base, work / "base.json"))
            b.append(run(tool, work / "tool.json"))
        load.append(os.getloadavg()[0])
        report = json.loads((work / "tool.json").read_text())
        reader = json.loads((work / "base.json").read_text())
        # Both read every rank: the report joins all sixteen, each with its schedule.
        joined = [x for x in report["ranks"] if x.get("step_snapshot") and x["events"]]
        if len(joined) != RANKS or len(reader["ranks"]) != RANKS:
            raise SystemExit(f"not every rank was read: report {len(joined)}, reader {len(reader['ranks'])}")
        unreadable = [f for f in report["findings"] if f["kind"] == "snapshot-unreadable"]
        if unreadable:
            raise SystemExit(f"unreadable: {unreadable}")
        rss = {}
        for n, (rd, sd) in sorted(dirs.items()):
            rss[n] = (run([*pin, str(binary), "snapshot", "--json", str(sd)], work / "base.json")[2],
                      run([*pin, str(binary), "report", "--json", str(rd)], work / "tool.json")[2])
        size = sum(f.stat().st_size for f in snap_dir.iterdir()) / 1e9
        med = lambda xs, k: statistics.median(x[k] for x in xs)  # noqa: E731
        ratio = statistics.median(y[0] / x[0] for x, y in zip(a, b))
        print(f"{RANKS} ranks, {size:.2f} GB of step snapshots (~{size / RANKS * 1000:.0f} MB each) and two node "
              f"logs; {args.runs} runs each, alternating; medians; workers: {args.workers}"
              f"{' (taskset)' if pin else f' (all {cores} cores)'}; load average {min(load):.1f} to {max(load):.1f}")
        print("| | wall | CPU | peak RSS |")
        print("|---|---|---|---|")
        print(f"| baseline: `instrument snapshot` over the 16 files | {med(a, 0):.2f} s | {med(a, 1):.2f} s "
              f"| {max(x[2] for x in a) / 2**20:.0f} MiB |")
        print(f"| `instrument report` (logs + 16 snapshots) | {med(b, 0):.2f} s | {med(b, 1):.2f} s "
              f"| {max(x[2] for x in b) / 2**20:.0f} MiB |")
        print(f"| ratio report / baseline (median of pairs) | {ratio:.2f}x | "
              f"{statistics.median(y[1] / x[1] for x, y in zip(a, b)):.2f}x | |")
        print()
        print("| files | baseline peak RSS | report peak RSS |")
        print("|---|---|---|")
        for n, (x, y) in sorted(rss.items()):
            print(f"| {n} | {x / 2**20:.0f} MiB | {y / 2**20:.0f} MiB |")
        print(json.dumps({"baseline": a, "report": b, "rss": rss, "ratio": ratio}), file=sys.stderr)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
