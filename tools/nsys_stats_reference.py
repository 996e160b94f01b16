#!/usr/bin/env python3
"""What `nsys stats --report cuda_gpu_kern_sum --report nvtx_gpu_proj_sum` would print for an
nsys SQLite export, computed with plain SQL after the public report definitions, with range names
grouped the way `instrument nsys report` groups them (an independent implementation, in regular
expressions, of the same rules):

cuda_gpu_kern_sum — per demangled kernel name: total, instances, avg, median, min, max, sample
stddev of (end - start); Time % of the summed total; ordered by total desc, instances, name.

nvtx_gpu_proj_sum — NVTX push/pop and start/end ranges that end on the thread they started on
(endGlobalTid NULL or equal); an unended range ends at the last NVTX range timestamp; a range's
name is `domain:text` with text from StringIds via textId or else the text column. A GPU
operation (kernel, memcpy, memset, and a CUDA graph launch row unless the graph's nodes were
traced as kernels with the same process and correlation id) joins its runtime call on
correlationId and globalPid and belongs to a range of the calling thread that contains the whole
call. Per range instance: projected span = last op end - first op start, ops = distinct
correlation ids. Per (name, style): sums and statistics over the instances that launched GPU
work.

Name grouping (unless --raw-names): PyTorch's getNvtxStr suffix
`, seq = N, op_id = M, sizes = [[...]], input_op_ids = [(a,b), ...]` is taken off (`--by-shape`
keeps `sizes`); names with one run of digits that differ only in it, more than 16 of them per
process, domain and style, averaging fewer than two instances each, become one name with the
digits written `N`.

Prints JSON: {"cuda_gpu_kern_sum": [...], "nvtx_gpu_proj_sum": [...]} with nsys column names
(plus "Shapes" with --by-shape). Used by tests/it/nsys_report.rs as an independent reference; small
exports only.
"""

import argparse
import json
import re
import sqlite3
import statistics
import sys
from collections import defaultdict

RANGE_TYPES = "(59, 60, 70, 71)"
SUFFIX = re.compile(
    r"^(?P<name>.*?)(?P<suffix>"
    r"(?:, (?:stashed )?seq = -?\d+)?"
    r"(?:, op_id = -?\d+)?"
    r"(?:, sizes = (?P<sizes>\[(?:\[[\d, -]*\](?:, )?)*\]))?"
    r"(?:, input_op_ids = \[(?:\(-?\d+,-?\d+\)(?:, )?)*\])?"
    r")$",
    re.S,
)
FOLD_MIN_NAMES = 16


def tables(db):
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def stats(durs):
    return (statistics.median(durs), statistics.stdev(durs) if len(durs) > 1 else 0.0)


def group_name(text, by_shape):
    m = SUFFIX.match(text)
    if m and m.group("suffix"):
        return m.group("name"), (m.group("sizes") if by_shape else None)
    return text, None


def kern_sum(db):
    durs = {}
    for name, d in db.execute(
        "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL AS k "
        "JOIN StringIds AS s ON s.id = k.demangledName"
    ):
        durs.setdefault(name, []).append(d)
    grand = sum(sum(v) for v in durs.values())
    rows = []
    for name, v in durs.items():
        med, sd = stats(v)
        rows.append({"Time": round(sum(v) * 100.0 / grand, 1), "Total Time": sum(v), "Instances": len(v),
                     "Avg": sum(v) / len(v), "Med": med, "Min": min(v), "Max": max(v), "StdDev": sd, "Name": name})
    rows.sort(key=lambda r: (-r["Total Time"], r["Instances"], r["Name"]))
    return rows


def proj_sum(db, raw, by_shape):
    have = tables(db)
    db.executescript(f"""
        CREATE TEMP TABLE mm AS SELECT max(max(start), coalesce(max(end), max(start))) AS hi
            FROM NVTX_EVENTS WHERE eventType IN {RANGE_TYPES};
        CREATE TEMP TABLE domains AS
            SELECT ne.domainId AS id, (ne.globalTid >> 24) & 16777215 AS pid,
                   coalesce(s.value, ne.text) AS name, min(ne.start) AS first
            FROM NVTX_EVENTS AS ne LEFT JOIN StringIds AS s ON ne.textId = s.id
            WHERE ne.eventType = 75 GROUP BY 1, 2;
        CREATE TEMP TABLE ranges AS
            SELECT ne.rowid AS rid, ne.start AS start, ifnull(ne.end, (SELECT hi FROM mm)) AS end,
                   ne.globalTid AS tid, ne.globalTid & -16777216 AS gpid,
                   coalesce(d.name, '') AS domain, coalesce(s.value, ne.text, '') AS text,
                   CASE WHEN ne.eventType IN (59, 70) THEN 'PushPop' ELSE 'StartEnd' END AS style
            FROM NVTX_EVENTS AS ne
            LEFT JOIN domains AS d ON d.id = ne.domainId AND d.pid = ((ne.globalTid >> 24) & 16777215)
            LEFT JOIN StringIds AS s ON ne.textId = s.id
            WHERE ne.eventType IN {RANGE_TYPES}
              AND (ne.endGlobalTid IS NULL OR ne.endGlobalTid = ne.globalTid);
        CREATE INDEX temp.ranges_tid ON ranges (tid, start);
    """)
    parts = [f"SELECT start, end, correlationId, globalPid, 0 AS graph FROM {t}"
             for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
             if t in have]
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in have:
        nodes = " UNION ".join(f"SELECT globalPid, correlationId FROM {t}"
                               for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
                               if t in have)
        shadow = f"AND (g.globalPid, g.correlationId) NOT IN ({nodes})" if nodes else ""
        parts.append(f"SELECT g.start, g.end, g.correlationId, g.globalPid, 1 AS graph "
                     f"FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE AS g WHERE 1 {shadow}")
    ops = " UNION ALL ".join(parts)

    # Every projected instance: its range row, and the ops it launched.
    per_range = {rid: (pstart, pend, nops) for rid, pstart, pend, nops in db.execute(f"""
        WITH gpuops AS ({ops})
        SELECT rt.rid, min(op.start), max(op.end), count(DISTINCT r.correlationId)
        FROM gpuops AS op
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
            ON op.correlationId = r.correlationId AND op.globalPid = (r.globalTid & -16777216)
        JOIN ranges AS rt
            ON rt.tid = r.globalTid AND rt.start <= r.start AND rt.end >= r.end
        GROUP BY rt.rid
    """)}
    # Names per (process, domain, style), to group and fold.
    instances = []  # (gpid, domain, style, name, shapes, rid, duration)
    for rid, start, end, gpid, domain, text, style in db.execute(
        "SELECT rid, start, end, gpid, domain, text, style FROM ranges"
    ):
        name, shapes = (text, None) if raw else group_name(text, by_shape)
        instances.append((gpid, domain, style, name, shapes, rid, end - start))
    if not raw:
        counts = defaultdict(int)
        for gpid, domain, style, name, shapes, _rid, _d in instances:
            counts[(gpid, domain, style, name, shapes)] += 1
        families = defaultdict(list)
        for (gpid, domain, style, name, shapes), n in counts.items():
            if len(re.findall(r"\d+", name)) == 1:
                families[(gpid, domain, style, re.sub(r"\d+", "N", name), shapes)].append(n)
        folded = {k for k, ns in families.items() if len(ns) > FOLD_MIN_NAMES and sum(ns) < 2 * len(ns)}
        out = []
        for gpid, domain, style, name, shapes, rid, d in instances:
            fam = re.sub(r"\d+", "N", name)
            if (gpid, domain, style, fam, shapes) in folded:
                name = fam
            out.append((gpid, domain, style, name, shapes, rid, d))
        instances = out
    groups = {}
    for _gpid, domain, style, name, shapes, rid, d in instances:
        if rid not in per_range:
            continue
        pstart, pend, nops = per_range[rid]
        g = groups.setdefault((f"{domain}:{name}", shapes, style), {"proj": [], "range": 0, "ops": 0})
        g["proj"].append(pend - pstart)
        g["range"] += d
        g["ops"] += nops
    rows = []
    for (name, shapes, style), g in groups.items():
        v = g["proj"]
        med, sd = stats(v)
        row = {"Range": name, "Style": style, "Total Proj Time": sum(v), "Total Range Time": g["range"],
               "Range Instances": len(v), "Proj Avg": sum(v) / len(v), "Proj Med": med, "Proj Min": min(v),
               "Proj Max": max(v), "Proj StdDev": sd, "Total GPU Ops": g["ops"]}
        if by_shape:
            row["Shapes"] = shapes
        rows.append(row)
    rows.sort(key=lambda r: (-r["Total Proj Time"], r["Range"], r.get("Shapes") or ""))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("export")
    ap.add_argument("--raw-names", action="store_true", help="group on the range text as nsys does")
    ap.add_argument("--by-shape", action="store_true", help="keep PyTorch's sizes in the name")
    a = ap.parse_args()
    db = sqlite3.connect(a.export)
    have = tables(db)
    out = {"cuda_gpu_kern_sum": kern_sum(db) if "CUPTI_ACTIVITY_KIND_KERNEL" in have else [],
           "nvtx_gpu_proj_sum": proj_sum(db, a.raw_names, a.by_shape)
           if {"NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME"} <= have else []}
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
