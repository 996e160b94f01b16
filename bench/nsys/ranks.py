#!/usr/bin/env python3
"""Benchmark the per-rank report of `instrument nsys report` over the node exports of one
pithtrain DualPipeV run (tools/gen_nsys_sqlite.py --scenario dualpipe, one export per node, every
rank of the node in it) against the named baseline, measured in the same run on the same files:

  baseline  pithtrain's own analyze-nsys-profile scripts (889a408: show_setup.py, find_window.py,
            classify_streams.py, compute_overlap.py), all four run on every export, one after
            the other, as its SKILL.md prescribes. They are read from a pithtrain checkout
            (--pithtrain DIR), never copied here.

  instrument  `instrument nsys report --json DIR` (every export of the folder, read in parallel):
            the whole report, of which the scripts' figures are a part.

Per command: median wall time of --runs runs, the largest peak RSS of one process, and the load
average of the machine around the runs (the machine is shared: both sides are slowed alike).
Also checks that both said the same: every rank's window and, per (rank, stage), exposed_ns and
the overlap percentages. Targets (issue #16): at least 10x faster than the scripts; two 2 GB node
exports in at most 1 GiB. Not part of `cargo test`.

Usage: bench/nsys/ranks.py [--kernels N] [--nodes M] [--ranks R] [--runs R] [--dir DIR]
                           [--pithtrain DIR] [--no-scripts]
   --kernels 2000000   ~320 MB per node (the default)
   --repeat 7          each export's work 7 times over (7 training steps of 300 MB: 2.2 GB per
                       node), copied by SQLite: generating 2 GB row by row takes hours
   --no-scripts        time only instrument (the scripts take minutes per GB)
Exports live in DIR (default: $TMPDIR/instrument-nsys-bench), generated once and reused.
"""

import argparse
import json
import os
import re
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
SCRIPTS = ("show_setup", "find_window", "classify_streams", "compute_overlap")


def run(cmd, out_path=None):
    """Wall time and peak RSS (bytes) of one whole process."""
    out = open(out_path, "wb") if out_path else subprocess.DEVNULL
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    if out_path:
        out.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({code}): {err}")
    return wall, usage.ru_maxrss * 1024


def repeat(src, dst, times):
    """`src` with its captured work repeated `times` times, one repetition after the other (as
    further training steps): kernels, runtime calls and NVTX events shifted by the capture's span
    (correlation ids by their largest), the setup ranges stretched over all of it. SQLite does the
    copying, so a 2 GB export takes minutes, not the generator's hours."""
    import shutil
    import sqlite3
    part = dst.with_suffix(".part")
    shutil.copyfile(src, part)
    c = sqlite3.connect(part)
    c.execute("PRAGMA journal_mode=OFF")
    c.execute("PRAGMA synchronous=OFF")
    k, r, n = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"
    last = max(c.execute(f"SELECT max(end) FROM {t}").fetchone()[0] or 0 for t in (k, r, n))
    span = last + 1_000_000
    corr = max(c.execute(f"SELECT max(correlationId) FROM {t}").fetchone()[0] or 0 for t in (k, r)) + 1
    setup = "text LIKE 'rank=%'"
    for t, where in ((k, ""), (r, ""), (n, f" WHERE start >= 0 AND NOT ({setup})")):
        cols = [row[1] for row in c.execute(f"PRAGMA table_info({t})")]
        top = c.execute(f"SELECT max(rowid) FROM {t}").fetchone()[0] or 0
        for i in range(1, times):
            expr = []
            for col in cols:
                if col in ("start", "end"):
                    expr.append(f'"{col}" + {i * span}')
                elif col == "correlationId":
                    expr.append(f'"{col}" + {i * corr}')
                else:
                    expr.append(f'"{col}"')
            sel = ", ".join(expr)
            names = ", ".join(f'"{col}"' for col in cols)
            cond = f"{where} {'AND' if where else 'WHERE'} rowid <= {top}"
            c.execute(f"INSERT INTO {t} ({names}) SELECT {sel} FROM {t}{cond} ORDER BY rowid")
    c.execute(f"UPDATE {n} SET end = end + {(times - 1) * span} WHERE {setup}")
    c.commit()
    c.close()
    part.rename(dst)


def generate(d, nodes, ranks, kernels, times):
    for n in range(nodes):
        db = d / f"pithtrain_node{n}.sqlite"
        if db.exists():
            continue
        if times > 1:
            base = d.parent / f"dualpipe-{nodes}x{ranks}-{kernels}" / db.name
            generate(base.parent, nodes, ranks, kernels, 1)
            print(f"making {db}: {base} repeated {times} times ...", flush=True)
            repeat(base, db, times)
            continue
        print(f"generating {db} (once; reused by later runs) ...", flush=True)
        part = db.with_suffix(".part")
        subprocess.run([sys.executable, ROOT / "tools/gen_nsys_sqlite.py", "--out", part, "--scenario", "dualpipe",
                        "--ranks", str(ranks), "--node", str(n), "--mesh", f"pp={nodes} dp=1 cp=1 ep={ranks}",
                        "--steps", "0", "--kernels", str(kernels), "--num-chunks", "32", "--layers", "4",
                        "--compute-kernels", "6", "--seed", str(20 + n), "--no-expected"], check=True)
        part.rename(db)


def scripts_once(skill, files, outdir):
    """The four scripts on every export; returns (wall, peak RSS, compute_overlap outputs)."""
    wall, rss, outputs = 0.0, 0, {}
    for f in files:
        for s in SCRIPTS:
            out = outdir / f"{f.stem}.{s}.txt"
            w, r = run([sys.executable, skill / f"{s}.py", f], out)
            wall += w
            rss = max(rss, r)
            outputs[(f.name, s)] = out
    return wall, rss, outputs


def table(path):
    lines = path.read_text().splitlines()
    head = lines[0].split()
    return [dict(zip(head, re.split(r"\s{1,}", ln.strip(), maxsplit=len(head) - 1))) for ln in lines[2:] if ln.strip()]


def agree(doc, outputs):
    """Every rank's window and every (rank, stage) figure, ours against the scripts'."""
    bad, n = [], 0
    for e in doc["exports"]:
        name = Path(e["file"]).name
        procs = {p["pid"]: p for p in e["processes"]}
        for row in table(outputs[(name, "find_window")]):
            p = procs[int(row["pid"])]
            n += 1
            if (p["window"]["start_ns"], p["window"]["end_ns"]) != (int(row["start"]), int(row["end"])):
                bad.append(f"{name} pid {row['pid']}: window {p['window']} vs {row}")
        for row in table(outputs[(name, "compute_overlap")]):
            p = procs[int(row["pid"])]
            s = next((s for s in p["stages"] if s["stage"] == row["stage"]), None)
            n += 1
            if s is None or s["exposed_ns"] != int(row["exposed_ns"]):
                bad.append(f"{name} pid {row['pid']} {row['stage']}: {s} vs {row}")
                continue
            for ours, theirs in (("overlap", "overlap"), ("overlap_min", "overlap_min"), ("overlap_max", "overlap_max")):
                if abs(s[ours] * 100 - float(row[theirs].rstrip("%"))) > 0.0051:
                    bad.append(f"{name} pid {row['pid']} {row['stage']}: {ours} {s[ours]} vs {row[theirs]}")
    return n, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=2_000_000, help="kernels per node export")
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--ranks", type=int, default=8, help="ranks per node")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "instrument-nsys-bench"))
    ap.add_argument("--pithtrain", default=os.environ.get("PITHTRAIN", "/work/ref/pith-train-889a408"))
    ap.add_argument("--no-scripts", action="store_true")
    ap.add_argument("--repeat", type=int, default=1,
                    help="repeat each generated export's work this many times (2 GB without hours of generating)")
    a = ap.parse_args()
    skill = Path(a.pithtrain) / ".agents/skills/analyze-nsys-profile/scripts"
    if not a.no_scripts and not (skill / "compute_overlap.py").exists():
        sys.exit(f"{skill}: pithtrain's analyze-nsys-profile scripts are not there (--pithtrain DIR, or --no-scripts)")
    subprocess.run(["cargo", "build", "--release", "-q"], cwd=ROOT, check=True)
    d = Path(a.dir) / f"dualpipe-{a.nodes}x{a.ranks}-{a.kernels}{f'x{a.repeat}' if a.repeat > 1 else ''}"
    d.mkdir(parents=True, exist_ok=True)
    generate(d, a.nodes, a.ranks, a.kernels, a.repeat)
    files = sorted(d.glob("pithtrain_node*.sqlite"))
    import sqlite3
    sizes = []
    for f in files:
        c = sqlite3.connect(f)
        k, r, nv = (c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS"))
        c.close()
        sizes.append(f.stat().st_size)
        print(f"export {f.name}: {f.stat().st_size / MB:,.0f} MB, {k:,} kernels, {r:,} runtime calls, {nv:,} NVTX events")
        with open(f, "rb") as fh:  # the same page-cache state for every command
            while fh.read(1 << 24):
                pass
    outdir = d / "out"
    outdir.mkdir(exist_ok=True)
    ours_json = outdir / "instrument.json"
    load = [os.getloadavg()[0]]
    samples = {"instrument": [], "scripts": []}
    rss = {"instrument": 0, "scripts": 0}
    outputs = None
    for _ in range(a.runs):
        w, r = run([BIN, "nsys", "report", "--json", d], ours_json)
        samples["instrument"].append(w)
        rss["instrument"] = max(rss["instrument"], r)
        load.append(os.getloadavg()[0])
        if not a.no_scripts:
            w, r, outputs = scripts_once(skill, files, outdir)
            samples["scripts"].append(w)
            rss["scripts"] = max(rss["scripts"], r)
            load.append(os.getloadavg()[0])
    print(f"{a.runs} runs each, alternating; machine: {os.cpu_count()} cores, load average (1 min) "
          f"{min(load):.1f} to {max(load):.1f} during the runs")
    print(f"{'command':<58} {'median s':>9} {'min':>7} {'max':>7} {'peak RSS':>10}")
    names = {"instrument": f"instrument nsys report --json ({len(files)} exports)",
             "scripts": f"pithtrain's 4 scripts on each of the {len(files)} exports"}
    for k, v in samples.items():
        if v:
            print(f"{names[k]:<58} {statistics.median(v):>9.2f} {min(v):>7.2f} {max(v):>7.2f} "
                  f"{rss[k] / (1 << 20):>7.0f} MiB")
    checks = []
    if samples["scripts"]:
        ratio = statistics.median(samples["scripts"]) / statistics.median(samples["instrument"])
        print(f"instrument is {ratio:.1f}x faster than the scripts (medians)")
        checks.append(("at least 10x faster than pithtrain's scripts", ratio >= 10))
        doc = json.loads(ours_json.read_text())
        n, bad = agree(doc, outputs)
        for b in bad[:10]:
            print("  differs:", b)
        checks.append((f"the same {n} windows and stage rows as the scripts", not bad))
    if min(sizes) >= 2 * 10**9:
        checks.append(("peak RSS within 1 GiB", rss["instrument"] <= GiB))
    for what, ok in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
    sys.exit(0 if all(ok for _, ok in checks) else 1)


if __name__ == "__main__":
    main()
