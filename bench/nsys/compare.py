#!/usr/bin/env python3
"""Check that instrument's JSON report and the Python baseline's digest agree (bench/nsys/run.sh)."""
import json
import sys

ours = json.load(open(sys.argv[1]))
base = json.load(open(sys.argv[2]))
bad = []
for p in ours["processes"]:
    b = base["processes"].get(str(p["pid"]))
    if b is None:
        if p["kernel_count"]:
            bad.append(f"process {p['pid']} missing from the baseline")
        continue
    for k in ("kernel_ns", "kernel_count", "unattributed_ns"):
        if p[k] != b[k]:
            bad.append(f"{p['pid']} {k}: {p[k]} vs {b[k]}")
    for c in p["categories"]:
        if c["time_ns"] != b["categories"].get(c["category"], 0):
            bad.append(f"{p['pid']} {c['category']}")
    for o in p["communication"]["by_op"]:
        if o["time_ns"] != b["comm_ops"].get(o["op"], 0):
            bad.append(f"{p['pid']} {o['op']}")
    if p["overlap"]["communication_ns"] != b["communication_ns"] or p["overlap"]["hidden_ns"] != b["hidden_ns"]:
        bad.append(f"{p['pid']} overlap")
    for r in p["nvtx"]:
        key = f"{r['nsys_name']}|{r['style']}"
        if r["inclusive_ns"] and [r["inclusive_ns"], r["exclusive_ns"]] != b["nvtx"].get(key, [0, 0]):
            bad.append(f"{p['pid']} nvtx {key}")
for r in ours["nvtx_gpu_proj_sum"]:
    q = base["nvtx_gpu_proj_sum"].get(f"{r['nsys_name']}|{r['style']}")
    if q is None or [r["instances"], r["total_ns"], r["gpu_ops"]] != q:
        bad.append(f"proj {r['nsys_name']}")
ks = {k["name"]: k for k in ours["kernel_summary"]}
for name, s in base["kernel_summary"].items():
    k = ks.get(name)
    if k is None or k["total_ns"] != s["total"] or k["count"] != s["count"] or abs(k["med_ns"] - s["med"]) > 1e-6:
        bad.append(f"kernel {name[:40]}")
if bad:
    print("figures DIFFER:", "; ".join(bad[:10]))
    sys.exit(1)
print("figures agree: per-process categories, communication ops, overlap, NVTX inclusive/exclusive, projection, kernel summary")
