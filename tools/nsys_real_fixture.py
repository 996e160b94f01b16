#!/usr/bin/env python3
"""Cut a small SQL fixture out of a real nsys SQLite export: the CREATE TABLE text of the tables
`instrument nsys report` reads, as that release wrote it, and the rows of a few processes in a
time window (NVTX ranges open in it, the runtime calls made in it and the GPU work they
launched), with only the metadata rows that describe the capture (product and schema version,
what was traced, the CUDA graph trace mode) -- never environment, host, user or path rows.

Usage: nsys_real_fixture.py EXPORT OUT.sql --source "repo@commit:path" --licence "MIT, (c) ..."
       [--pid PID ...] [--window T0 T1]
"""

import argparse
import sqlite3

BIG = ["CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
       "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "NVTX_EVENTS", "CUDA_GRAPH_EVENTS"]
SMALL = ["META_DATA_EXPORT", "EXPORT_META_DATA", "META_DATA_CAPTURE", "ENUM_NSYS_EVENT_TYPE", "TARGET_INFO_GPU",
         "TARGET_INFO_CUDA_DEVICE", "PROCESSES", "ThreadNames"]
META_KEYS = ("EXPORT_PRODUCT_NAME", "EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION", "CAPTURE_EVENT_TYPE")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("export")
    ap.add_argument("out")
    ap.add_argument("--source", required=True)
    ap.add_argument("--licence", required=True)
    ap.add_argument("--pid", type=int, action="append", default=[])
    ap.add_argument("--window", type=int, nargs=2)
    a = ap.parse_args()
    db = sqlite3.connect(a.export)
    have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    pid_sql = lambda col: (f"(({col} >> 24) & 16777215) IN ({','.join(map(str, a.pid))})" if a.pid else "1")
    lo, hi = a.window if a.window else (-(1 << 62), 1 << 62)
    rows = {}

    def take(table, where):
        if table in have:
            cur = db.execute(f"SELECT * FROM {table} WHERE {where}")
            rows[table] = ([d[0] for d in cur.description], cur.fetchall())

    take("CUPTI_ACTIVITY_KIND_RUNTIME", f"{pid_sql('globalTid')} AND start >= {lo} AND start <= {hi}")
    runtime = rows.get("CUPTI_ACTIVITY_KIND_RUNTIME", ([], []))
    launched = {(r[runtime[0].index("globalTid")] & ~0xFFFFFF, r[runtime[0].index("correlationId")]) for r in runtime[1]}
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        if t in have:
            cur = db.execute(f"SELECT * FROM {t} WHERE {pid_sql('globalPid')}")
            cols = [d[0] for d in cur.description]
            g, c = cols.index("globalPid"), cols.index("correlationId")
            rows[t] = (cols, [r for r in cur.fetchall() if (r[g], r[c]) in launched])
    # NVTX: ranges that overlap the window (so the ones enclosing it too) and domain creations.
    take("NVTX_EVENTS", f"{pid_sql('globalTid')} AND (eventType = 75 OR (start <= {hi} AND coalesce(end, start) >= {lo}))")
    take("CUDA_GRAPH_EVENTS", f"{pid_sql('globalTid')}")
    for t in ("META_DATA_EXPORT", "EXPORT_META_DATA", "META_DATA_CAPTURE"):
        take(t, "name IN ({}) OR name LIKE '%CUDA_GRAPH_TRACE_OPTIONS:MODE'".format(",".join(f"'{k}'" for k in META_KEYS)))
    take("ENUM_NSYS_EVENT_TYPE", "id IN (34, 39, 59, 60, 70, 71, 75)")
    take("TARGET_INFO_GPU", "1")
    take("TARGET_INFO_CUDA_DEVICE", f"pid IN ({','.join(map(str, a.pid))})" if a.pid else "1")
    take("PROCESSES", f"pid IN ({','.join(map(str, a.pid))})" if a.pid else "1")
    take("ThreadNames", pid_sql("globalTid"))
    ids = set()
    for t, cols in (("CUPTI_ACTIVITY_KIND_KERNEL", ("demangledName", "shortName", "mangledName")),
                    ("CUPTI_ACTIVITY_KIND_RUNTIME", ("nameId",)), ("NVTX_EVENTS", ("textId",)),
                    ("ThreadNames", ("nameId",)), ("CUDA_GRAPH_EVENTS", ("nameId",))):
        if t in rows:
            names, data = rows[t]
            for col in cols:
                if col in names:
                    ids |= {r[names.index(col)] for r in data if r[names.index(col)] is not None}
    cur = db.execute(f"SELECT * FROM StringIds WHERE id IN ({','.join(map(str, sorted(ids))) or 'NULL'})")
    rows["StringIds"] = ([d[0] for d in cur.description], cur.fetchall())

    with open(a.out, "w") as f:
        f.write(f"-- Rows cut from a real Nsight Systems export by tools/nsys_real_fixture.py.\n"
                f"-- Source: {a.source}\n-- Licence of the source: {a.licence}\n"
                f"-- The CREATE TABLE text is NVIDIA's schema as that release wrote it.\n\n")
        for t in ["StringIds"] + SMALL + BIG:
            if t not in rows:
                continue
            schema = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (t,)).fetchone()[0]
            f.write(schema + ";\n")
            cols, data = rows[t]
            for r in data:
                vals = ", ".join(db.execute("SELECT quote(?)", (v,)).fetchone()[0] for v in r)
                f.write(f"INSERT INTO {t} VALUES ({vals});\n")
            f.write("\n")
    print(f"{a.out}: " + ", ".join(f"{t} {len(rows[t][1])}" for t in rows if rows[t][1]))


if __name__ == "__main__":
    main()
