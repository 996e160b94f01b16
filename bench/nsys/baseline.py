#!/usr/bin/env python3
"""Baseline for bench/nsys/run.sh: the summary `instrument nsys report` gives, computed with
Python's sqlite3 module the way one would write it by hand — per process: kernel time by
category (classified on the demangled name), communication by operation, communication hidden
under compute, a kernel summary (total, count, mean, median, min, max, stddev per name), and
NVTX ranges projected onto the GPU work launched inside them (runtime call joined on process and
correlation id; inclusive and exclusive time per range name).

Prints a JSON digest of the figures, which run.sh compares with instrument's.
"""

import json
import math
import sqlite3
import sys
from collections import defaultdict

PID_MASK = 0xFFFFFFFFFF000000


def classify(name):
    n = name.lower()
    if "nccl" in n:
        for key, op in (("sendrecv", "SendRecv"), ("alltoall", "AllToAll"), ("allgather", "AllGather"),
                        ("reducescatter", "ReduceScatter"), ("allreduce", "AllReduce"),
                        ("broadcast", "Broadcast"), ("reduce", "Reduce")):
            if key in n:
                return "communication", op
        return "communication", "Other"
    if "deep_ep" in n or "deepep" in n:
        return "communication", "AllToAll"
    if any(k in n for k in ("flash_fwd", "flash_bwd", "flash::", "flashattn", "flash_attn", "fmha", "attention", "sdpa", "_attn")):
        return "attention", None
    if any(k in n for k in ("gemm", "cutlass", "cublas", "nvjet", "xmma", "matmul", "gemv")):
        return "gemm", None
    if "elementwise" in n:
        return "elementwise", None
    return "other", None


def union(iv):
    iv.sort()
    out = []
    for s, e in iv:
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return out


def inter(a, b):
    i = j = tot = 0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if e > s:
            tot += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tot


def summary(d):
    d.sort()
    n = len(d)
    tot = sum(d)
    avg = tot / n
    med = d[n // 2] if n % 2 else (d[n // 2 - 1] + d[n // 2]) / 2
    sd = math.sqrt(sum((x - avg) ** 2 for x in d) / (n - 1)) if n > 1 else 0.0
    return {"total": tot, "count": n, "avg": avg, "med": med, "min": d[0], "max": d[-1], "stddev": sd}


def main(path):
    db = sqlite3.connect(path)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    names = dict(db.execute("SELECT id, value FROM StringIds WHERE id IN (SELECT DISTINCT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL)"))
    cls = {i: classify(v) for i, v in names.items()}

    ops = []  # (start, end, gpid, corr, device, class)
    for s, e, g, c, dev, name in db.execute("SELECT start, end, globalPid, correlationId, deviceId, demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL"):
        ops.append((s, e, g, c, dev, name))
    for t, tag in (("CUPTI_ACTIVITY_KIND_MEMCPY", -1), ("CUPTI_ACTIVITY_KIND_MEMSET", -2)):
        if t in tables:
            for s, e, g, c, dev in db.execute(f"SELECT start, end, globalPid, correlationId, deviceId FROM {t}"):
                ops.append((s, e, g, c, dev, tag))

    procs = defaultdict(lambda: {"kernel_ns": 0, "kernel_count": 0, "categories": defaultdict(int),
                                 "comm_ops": defaultdict(int)})
    durs = defaultdict(list)
    lanes = defaultdict(lambda: ([], []))
    op_cat = []
    for s, e, g, c, dev, name in ops:
        d = e - s
        if name < 0:
            op_cat.append("memcpy" if name == -1 else "memset")
            continue
        cat, comm = cls[name]
        op_cat.append(cat)
        p = procs[g]
        p["kernel_ns"] += d
        p["kernel_count"] += 1
        p["categories"][cat] += d
        if comm:
            p["comm_ops"][comm] += d
        durs[name].append(d)
        lanes[(g, dev)][0 if cat == "communication" else 1].append((s, e))
    overlap = defaultdict(lambda: [0, 0])
    for (g, dev), (cm, cp) in lanes.items():
        cm, cp = union(cm), union(cp)
        overlap[g][0] += sum(e - s for s, e in cm)
        overlap[g][1] += inter(cm, cp)
    kernel_summary = {names[n]: summary(d) for n, d in durs.items()}

    # NVTX projection.
    runtime = {}
    for s, e, gt, c in db.execute("SELECT start, end, globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME"):
        runtime[(gt & PID_MASK, c)] = (gt, s, e)
    strings = {}
    ranges = defaultdict(list)
    domains = {}
    ev = db.execute("SELECT start, end, eventType, globalTid, endGlobalTid, textId, text, domainId FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71, 75)").fetchall()
    text_ids = {r[5] for r in ev if r[5] is not None}
    for i in text_ids:
        row = db.execute("SELECT value FROM StringIds WHERE id = ?", (i,)).fetchone()
        if row:
            strings[i] = row[0]
    max_ts = max(max(r[0], r[1] if r[1] is not None else r[0]) for r in ev if r[2] != 75)
    for s, e, et, gt, egt, tid, text, dom in ev:
        if et == 75:
            domains[((gt >> 24) & 0xFFFFFF, dom)] = strings.get(tid, text)
    for s, e, et, gt, egt, tid, text, dom in ev:
        if et == 75 or (egt is not None and egt != gt):
            continue
        name = strings.get(tid) if tid is not None and tid in strings else (text or "")
        dname = domains.get(((gt >> 24) & 0xFFFFFF, dom), "") if dom else ""
        style = "PushPop" if et in (59, 70) else "StartEnd"
        # [start, end, key, first op start, last op end, distinct launches, last correlation id]
        ranges[gt].append([s, max_ts if e is None else e, f"{dname}:{name}|{style}", None, None, 0, None])
    launches = defaultdict(list)
    unattributed = defaultdict(int)
    for i, (s, e, g, c, dev, name) in enumerate(ops):
        r = runtime.get((g, c))
        if r is None or r[0] not in ranges:
            unattributed[g] += e - s
        else:
            launches[r[0]].append((r[1], r[2], c, i))
    incl = defaultdict(int)
    excl = defaultdict(int)
    for gt, ls in launches.items():
        ls.sort()
        rs = sorted(ranges[gt], key=lambda r: (r[0], -r[1]))
        active = []
        ri = 0
        g = gt & PID_MASK
        for rs_, re_, c, i in ls:
            while ri < len(rs) and rs[ri][0] <= rs_:
                active.append(rs[ri])
                ri += 1
            active = [r for r in active if r[1] >= rs_]
            d = ops[i][1] - ops[i][0]
            seen = set()
            inner = None
            for r in active:
                if r[1] >= re_:
                    inner = r
                    o = ops[i]
                    r[3] = o[0] if r[3] is None else min(r[3], o[0])
                    r[4] = o[1] if r[4] is None else max(r[4], o[1])
                    if r[6] != c:
                        r[5] += 1
                        r[6] = c
                    if r[2] not in seen:
                        seen.add(r[2])
                        incl[(g, r[2])] += d
            if inner is None:
                unattributed[g] += d
            else:
                excl[(g, inner[2])] += d

    proj = defaultdict(lambda: [0, 0, 0])  # key -> [instances, total projected span, launches]
    for rs in ranges.values():
        for r in rs:
            if r[5]:
                q = proj[r[2]]
                q[0] += 1
                q[1] += r[4] - r[3]
                q[2] += r[5]

    out = {"processes": {}, "nvtx_gpu_proj_sum": {k: v for k, v in proj.items()}}
    for g, p in procs.items():
        out["processes"][str((g >> 24) & 0xFFFFFF)] = {
            "kernel_ns": p["kernel_ns"], "kernel_count": p["kernel_count"],
            "categories": dict(p["categories"]), "comm_ops": dict(p["comm_ops"]),
            "communication_ns": overlap[g][0], "hidden_ns": overlap[g][1],
            "unattributed_ns": unattributed[g],
            "nvtx": {k: [incl[(gg, k)], excl[(gg, k)]] for (gg, k) in set(incl) | set(excl) if gg == g},
        }
    out["kernel_summary"] = kernel_summary
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
