#!/usr/bin/env python3
"""Compare `instrument nsys report --json --all` with tools/nsys_stats_reference.py on one export:
every kernel-summary row and every projected-range row, figure by figure. Exit 1 on a mismatch.

Usage: check_reference.py OURS.json REFERENCE.json
"""

import json
import sys


def close(a, b):
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1.0)


def main(ours_path, ref_path):
    ours = json.load(open(ours_path))
    if "exports" in ours:  # schema instrument.nsys.report/3: one export
        ours = ours["exports"][0]
    ref = json.load(open(ref_path))
    bad = []
    ks = ours["kernel_summary"]
    rk = ref["cuda_gpu_kern_sum"]
    if len(ks) != len(rk):
        bad.append(f"kernel rows: {len(ks)} vs {len(rk)}")
    for r, o in zip(rk, ks):
        for a, b, exact in (("Name", "name", True), ("Total Time", "total_ns", True), ("Instances", "count", True),
                            ("Min", "min_ns", True), ("Max", "max_ns", True), ("Avg", "avg_ns", False),
                            ("Med", "med_ns", False), ("StdDev", "stddev_ns", False)):
            if (r[a] != o[b]) if exact else not close(r[a], o[b]):
                bad.append(f"kernel {r['Name'][:60]}: {a} {r[a]} vs {o[b]}")
    ps = {(p["nsys_name"], p.get("shapes"), p["style"]): p for p in ours["nvtx_gpu_proj_sum"]}
    rp = ref["nvtx_gpu_proj_sum"]
    if len(ps) != len(rp):
        bad.append(f"projected range rows: {len(ps)} vs {len(rp)}")
    for r in rp:
        o = ps.get((r["Range"], r.get("Shapes"), r["Style"]))
        if o is None:
            bad.append(f"range {r['Range']} missing")
            continue
        for a, b, exact in (("Total Proj Time", "total_ns", True), ("Total Range Time", "range_ns", True),
                            ("Range Instances", "instances", True), ("Total GPU Ops", "gpu_ops", True),
                            ("Proj Min", "min_ns", True), ("Proj Max", "max_ns", True),
                            ("Proj Avg", "avg_ns", False), ("Proj Med", "med_ns", False), ("Proj StdDev", "stddev_ns", False)):
            if (r[a] != o[b]) if exact else not close(r[a], o[b]):
                bad.append(f"range {r['Range']}: {a} {r[a]} vs {o[b]}")
    print(f"{ours['file']}: {len(rk)} kernel names, {len(rp)} projected range names: "
          + ("agree" if not bad else f"{len(bad)} differences"))
    for b in bad[:20]:
        print("  " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
