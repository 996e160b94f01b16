#!/usr/bin/env python3
"""Benchmark `instrument log BEFORE --diff AFTER` against its baseline: the same two reads
done one after the other (`instrument log --json BEFORE`, then `instrument log --json
AFTER`), which is what comparing two runs by hand costs. Both sides are 1 GB logs made by
bench/log/run.py's generators from two real runs of the instrumented fixture on the fake
torch, the second with a planted change (layer 3 saves 256 MiB more: tools/log_fixture.py
--extra-saved), so the comparison has something to find. Runs alternate (A B A B ...), in the
same run; the diff must name the planted layer on every rank that holds it.

    bench/log/diff.py [--size-mb 1024] [--runs 5] [--work /tmp/log-work/bench-diff]

Prints medians (wall, CPU, peak RSS) and the ratio diff / sequential reads (at most 1.2x is
the bar).
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
import os
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as gen  # noqa: E402  (bench/log/run.py: the scenario and the 1 GB generators)

ROOT = gen.ROOT


def timed(cmds, out_path: Path):
    """Run `cmds` one after the other, stdout of the last to out_path: (wall s, cpu s, peak
    RSS of the largest)."""
    wall, cpu, rss = 0.0, 0.0, 0
    for cmd in cmds:
        w, c, r = gen.run(cmd, out_path)
        wall, cpu, rss = wall + w, cpu + c, max(rss, r)
    return wall, cpu, rss


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--work", default="/tmp/log-work/bench-diff")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    gen.sh(["cargo", "build", "--release", "--quiet", "--manifest-path", str(ROOT / "Cargo.toml")])
    binary = ROOT / "target" / "release" / "instrument"
    size = args.size_mb << 20
    made = []
    try:
        before = gen.scenario(work, binary, "before")
        after = gen.scenario(work, binary, "after", ["--extra-saved", "3:256"])
        rows = []
        for kind, write in (("prints", gen.write_prints), ("console", gen.write_console)):
            logs = {}
            for side, scen in (("before", before), ("after", after)):
                logs[side] = work / f"{kind}-{side}.log"
                made.append(logs[side])
                write(logs[side], scen, size)
            diff = [[str(binary), "log", "--json", str(logs["before"]), "--diff", str(logs["after"])]]
            seq = [[str(binary), "log", "--json", str(logs[s])] for s in ("before", "after")]
            a, b = [], []
            for _ in range(args.runs):
                a.append(timed(diff, work / "diff.json"))
                b.append(timed(seq, work / "seq.json"))
            d = json.loads((work / "diff.json").read_text())
            # Every rank that holds layer 3 (pipeline rank 1) changed there, and only there.
            changed = [r for r in d["ranks"] if r["changed"]]
            assert changed, "the diff found nothing"
            for r in changed:
                layers = {c.get("layer") for c in r["changes"] if c["kind"].startswith("saved")}
                assert layers == {3}, (r["rank"], layers)
            rows.append((kind, sum(p.stat().st_size for p in logs.values()), len(d["ranks"]), len(changed), a, b))
        print(f"{args.runs} runs each, alternating; medians (the machine is shared: trust the ratios)")
        print("| logs | both sides | ranks (changed) | --diff | the two reads in turn | ratio | peak RSS diff / one read |")
        print("|---|---|---|---|---|---|---|")
        for kind, sz, ranks, changed, a, b in rows:
            aw = statistics.median(x[0] for x in a)
            bw = statistics.median(x[0] for x in b)
            pair = statistics.median(x[0] / y[0] for x, y in zip(a, b))
            print(f"| {kind} | {sz / 1e9:.2f} GB | {ranks} ({changed}) | {aw:.2f} s (cpu {statistics.median(x[1] for x in a):.2f} s) "
                  f"| {bw:.2f} s (cpu {statistics.median(x[1] for x in b):.2f} s) | {aw / bw:.2f}x (pairs: {pair:.2f}x) "
                  f"| {max(x[2] for x in a) / 2**20:.0f} MiB / {max(x[2] for x in b) / 2**20:.0f} MiB |")
    finally:
        for p in made + [work / "diff.json", work / "seq.json"]:
            p.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
