#!/usr/bin/env python3
"""Benchmark `instrument nsys report` on a generated 8-rank export of the autograd shape
(tools/gen_nsys_sqlite.py --scenario autograd: one NVTX range per aten op named by PyTorch's
getNvtxStr, module and pipeline-stage ranges, the expert all-to-all as NCCL SendRecv), against a
named baseline measured in the same run:

  baseline  one SQLite scan of exactly the columns the report reads (kernels, memcpy, memset,
            graph launches, runtime calls, NVTX ranges with their text), totalled inside
            SQLite by Python's sqlite3 module, so no per-row work outside the SQLite library.

Per command: median wall time of --runs runs, the largest peak RSS, and output size. Targets
(issue #9): `--json` within 3x of the baseline and within 1 GiB, JSON under 20 MB, HTML under
5 MB. Not part of `cargo test`.

Usage: bench/nsys/run.py [--kernels N] [--runs R] [--dir DIR] [--check]
   --kernels 950000  ~350 MB export (the default); --kernels 5500000  ~2 GB
   --check           also compare every figure with tools/nsys_stats_reference.py: for small
                     exports (--kernels 60000 takes about a minute); its range join is
                     quadratic per thread, so at 350 MB it does not finish in reasonable time
Big exports live in DIR (default: $TMPDIR/instrument-nsys-bench), generated once and reused.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "target" / "release" / "instrument"
GiB = 1 << 30
MB = 1_000_000

SCAN = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
q = {
    "CUPTI_ACTIVITY_KIND_KERNEL": "total(start), total(end), total(globalPid), total(correlationId), total(deviceId), total(demangledName)",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "total(start), total(end), total(globalPid), total(correlationId), total(deviceId)",
    "CUPTI_ACTIVITY_KIND_MEMSET": "total(start), total(end), total(globalPid), total(correlationId), total(deviceId)",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": "total(start), total(end), total(globalPid), total(correlationId), total(deviceId)",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "total(start), total(end), total(globalTid), total(correlationId)",
    "NVTX_EVENTS": "total(start), total(end), total(eventType), total(globalTid), total(endGlobalTid), total(textId), total(length(text)), total(domainId)",
}
for t, cols in q.items():
    if t in have:
        where = " WHERE eventType IN (59, 60, 70, 71, 75)" if t == "NVTX_EVENTS" else ""
        db.execute(f"SELECT {cols} FROM {t}{where}").fetchall()
"""


def run(cmd, out_path=None):
    """Wall time and peak RSS (bytes) of one whole process."""
    out = open(out_path, "wb") if out_path else subprocess.DEVNULL
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.returncode = os.waitstatus_to_exitcode(status)
    if out_path:
        out.close()
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({p.returncode}): {err}")
    return wall, usage.ru_maxrss * 1024


def bench(name, cmd, runs, out_path=None):
    samples, rss = [], 0
    for _ in range(runs):
        w, r = run(cmd, out_path)
        samples.append(w)
        rss = max(rss, r)
    return {"name": name, "median": statistics.median(samples), "min": min(samples),
            "max": max(samples), "rss": rss}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=950_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "instrument-nsys-bench"))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q"], cwd=ROOT, check=True)
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    db = d / f"autograd-8rank-{a.kernels}.sqlite"
    if not db.exists():
        print(f"generating {db} (once; reused by later runs) ...", flush=True)
        subprocess.run([sys.executable, ROOT / "tools/gen_nsys_sqlite.py", "--out", db, "--scenario", "autograd",
                        "--kernels", str(a.kernels), "--ranks", "8", "--seed", "11", "--no-expected"], check=True)
    import sqlite3
    c = sqlite3.connect(db)
    counts = {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")}
    c.close()
    print(f"export: {db.name}: {db.stat().st_size / MB:,.0f} MB, {counts['CUPTI_ACTIVITY_KIND_KERNEL']:,} kernels, "
          f"{counts['CUPTI_ACTIVITY_KIND_RUNTIME']:,} runtime calls, {counts['NVTX_EVENTS']:,} NVTX events; "
          f"{a.runs} runs each, median")
    with open(db, "rb") as f:  # the same page-cache state for every command
        while f.read(1 << 24):
            pass
    json_out, html_out, text_out = d / "report.json", d / "report.html", d / "report.txt"
    rows = [
        bench("baseline: one SQLite scan of the columns read", [sys.executable, "-c", SCAN, db], a.runs),
        bench("instrument nsys report --json", [BIN, "nsys", "report", "--json", db], a.runs, json_out),
        bench("instrument nsys report (text)", [BIN, "nsys", "report", db], a.runs, text_out),
        bench("instrument nsys report --html", [BIN, "nsys", "report", "--html", html_out, db], a.runs),
    ]
    base = rows[0]["median"]
    print(f"{'command':<48} {'median s':>9} {'min':>7} {'max':>7} {'x base':>7} {'peak RSS':>10}")
    for r in rows:
        print(f"{r['name']:<48} {r['median']:>9.2f} {r['min']:>7.2f} {r['max']:>7.2f} "
              f"{r['median'] / base:>7.2f} {r['rss'] / (1 << 20):>7.0f} MiB")
    sizes = {"JSON": json_out.stat().st_size, "HTML": html_out.stat().st_size, "text": text_out.stat().st_size}
    print("outputs: " + ", ".join(f"{k} {v / MB:.2f} MB" for k, v in sizes.items()))
    js = rows[1]
    checks = [
        ("--json within 3x of the baseline", js["median"] <= 3 * base),
        ("--json peak RSS under 1 GiB", js["rss"] < GiB),
        ("JSON under 20 MB", sizes["JSON"] < 20 * MB),
        ("HTML under 5 MB", sizes["HTML"] < 5 * MB),
    ]
    for what, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if a.check:
        ref = d / "reference.json"
        ours = d / "all.json"
        run([BIN, "nsys", "report", "--json", "--all", db], ours)
        run([sys.executable, ROOT / "tools/nsys_stats_reference.py", db], ref)
        subprocess.run([sys.executable, ROOT / "bench/nsys/check_reference.py", ours, ref], check=True)
    sys.exit(0 if all(ok for _, ok in checks) else 1)


if __name__ == "__main__":
    main()
