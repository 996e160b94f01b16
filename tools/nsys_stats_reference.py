#!/usr/bin/env python3
"""What `nsys stats --report cuda_gpu_kern_sum --report nvtx_gpu_proj_sum` would print for an
nsys SQLite export, computed with plain SQL after the public report definitions:

cuda_gpu_kern_sum — per demangled kernel name: total, instances, avg, median, min, max, sample
stddev of (end - start); Time % of the summed total; ordered by total desc, instances, name.

nvtx_gpu_proj_sum — NVTX push/pop and start/end ranges that end on the thread they started on
(endGlobalTid IS NULL); an unended range ends at the last NVTX range timestamp; a range's name
is `domain:text` with text from StringIds via textId or else the text column. A GPU operation
(kernel, memcpy, memset) joins its runtime call on correlationId and globalPid and belongs to a
range of the calling thread that contains the whole call. Per range instance: projected span =
last op end - first op start, ops = distinct correlation ids. Per (name, style): sums and
statistics over the instances that launched GPU work.

Prints JSON: {"cuda_gpu_kern_sum": [...], "nvtx_gpu_proj_sum": [...]} with nsys column names.
Used by tests/nsys_report.rs as an independent reference; small exports only (no R-tree).
"""

import json
import sqlite3
import statistics
import sys

RANGE_TYPES = "(59, 60, 70, 71)"


def tables(db):
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def stats(durs):
    return (statistics.median(durs), statistics.stdev(durs) if len(durs) > 1 else 0.0)


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


def proj_sum(db):
    have = tables(db)
    db.executescript(f"""
        CREATE TEMP TABLE mm AS SELECT min(min(start), min(end)) AS lo, max(max(start), max(end)) AS hi
            FROM NVTX_EVENTS WHERE eventType IN {RANGE_TYPES};
        CREATE TEMP TABLE domains AS
            SELECT ne.domainId AS id, (ne.globalTid >> 24) & 16777215 AS pid,
                   coalesce(s.value, ne.text) AS name, min(ne.start) AS first
            FROM NVTX_EVENTS AS ne LEFT JOIN StringIds AS s ON ne.textId = s.id
            WHERE ne.eventType = 75 GROUP BY 1, 2;
        CREATE TEMP TABLE ranges AS
            SELECT ne.rowid AS rid, ne.start AS start, ifnull(ne.end, (SELECT hi FROM mm)) AS end,
                   ne.globalTid AS tid,
                   coalesce(d.name, '') || ':' || coalesce(s.value, ne.text, '') AS name,
                   CASE WHEN ne.eventType IN (59, 70) THEN 'PushPop' ELSE 'StartEnd' END AS style
            FROM NVTX_EVENTS AS ne
            LEFT JOIN domains AS d ON d.id = ne.domainId AND d.pid = ((ne.globalTid >> 24) & 16777215)
            LEFT JOIN StringIds AS s ON ne.textId = s.id
            WHERE ne.eventType IN {RANGE_TYPES} AND ne.endGlobalTid IS NULL;
        CREATE INDEX temp.ranges_tid ON ranges (tid, start);
    """)
    ops = " UNION ALL ".join(
        f"SELECT start, end, correlationId, globalPid FROM {t}"
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
        if t in have
    )
    per_range = db.execute(f"""
        WITH gpuops AS ({ops})
        SELECT rt.rid, rt.name, rt.style, rt.end - rt.start, min(op.start), max(op.end),
               count(DISTINCT r.correlationId)
        FROM gpuops AS op
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
            ON op.correlationId = r.correlationId AND op.globalPid = (r.globalTid & -16777216)
        JOIN ranges AS rt
            ON rt.tid = r.globalTid AND rt.start <= r.start AND rt.end >= r.end
        GROUP BY rt.rid
    """).fetchall()
    groups = {}
    for _rid, name, style, rdur, pstart, pend, nops in per_range:
        g = groups.setdefault((name, style), {"proj": [], "range": 0, "ops": 0})
        g["proj"].append(pend - pstart)
        g["range"] += rdur
        g["ops"] += nops
    rows = []
    for (name, style), g in groups.items():
        v = g["proj"]
        med, sd = stats(v)
        rows.append({"Range": name, "Style": style, "Total Proj Time": sum(v), "Total Range Time": g["range"],
                     "Range Instances": len(v), "Proj Avg": sum(v) / len(v), "Proj Med": med, "Proj Min": min(v),
                     "Proj Max": max(v), "Proj StdDev": sd, "Total GPU Ops": g["ops"]})
    rows.sort(key=lambda r: (-r["Total Proj Time"], r["Range"]))
    return rows


def main():
    db = sqlite3.connect(sys.argv[1])
    json.dump({"cuda_gpu_kern_sum": kern_sum(db), "nvtx_gpu_proj_sum": proj_sum(db)}, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
