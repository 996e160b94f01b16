#!/usr/bin/env python3
"""Generate a schema-faithful Nsight Systems SQLite export with known truth.

Writes OUT (the .sqlite) and, unless --no-expected, OUT with `.expected.json` in place of
`.sqlite`: the figures `instrument nsys report` must find, taken from the generator's own
bookkeeping (which ranges were open on the launching thread at each launch, which category each
kernel name was drawn from, which collective an all-to-all really was, ...), not recomputed from
the tables.

The tables are created from the CREATE TABLE text real nsys releases wrote
(fixtures/nsys/schemas/nsys-VERSION.sql, --nsys-version, default 2026.2); rows are inserted by
column name and every NOT NULL column the generator does not set gets 0 (or ''), so each
release's column set, order and constraints are the real ones. A table the chosen release's
export did not contain is taken from the nearest release that has it (said on stderr). The
metadata table is EXPORT_META_DATA before 2023.3 and META_DATA_EXPORT after.

What real exports do and the generator reproduces: globalTid = (1 << 48) | pid << 24 | tid;
correlation ids restart in every process; NVTX_EVENTS written in start order per thread;
PyTorch's emit_nvtx names (torch/csrc/profiler/util.cpp getNvtxStr:
`aten::mm, seq = 12, op_id = 345, sizes = [[4, 8], [8, 16]], input_op_ids = [(340,0), (-1,-1)]`)
in the text column; each rank on CUDA ordinal 0 mapped to its GPU by TARGET_INFO_CUDA_DEVICE;
CUDA graphs as one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row per launch (--cuda-graph-trace=graph) or
as kernel rows carrying the launch's correlation id (node). The scenarios are in
tools/nsys_scenarios.py.

Usage: gen_nsys_sqlite.py --out DIR/x.sqlite [--scenario mixed|edge|autograd|graphs|graphs-only|dualpipe]
       [--kernels N] [--ranks R] [--seed S] [--nsys-version V] [--no-expected]
       dualpipe (one node of a pithtrain run, tools/nsys_dualpipe.py): [--node N] [--mesh "pp=2 dp=1 cp=2 ep=2"]
       [--variant base|regressed] [--steps S] [--num-chunks C] [--layers L] [--compute-kernels K]
"""

import argparse
import json
import os
import random
import re
import sqlite3
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nsys_dualpipe  # noqa: E402
import nsys_scenarios  # noqa: E402

PUSHPOP, STARTEND, MARK, DOMAIN_CREATE = 59, 60, 34, 75
EVENT_TYPES = [
    (34, "NvtxMark", "NvtxMark"),
    (59, "NvtxPushPopRange", "NvtxPushPopRange"),
    (60, "NvtxStartEndRange", "NvtxStartEndRange"),
    (75, "NvtxDomainCreate", "NvtxDomainCreate"),
]
GLOBAL_BIT = 1 << 48
SCHEMAS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "nsys", "schemas")
VERSIONS = {  # release -> (product version, export schema version)
    "2022.2": ("2022.2.1.31", "2.9.1"),
    "2024.5": ("2024.5.1.113", "3.13.2"),
    "2025.5": ("2025.5.2.266", "3.24.0"),
    "2026.2": ("2026.2.1.210", "3.25.0"),
}
# Counter families (`iteration N`): more distinct names than this, about one instance each,
# become one row (the rule instrument documents).
FOLD_MIN_NAMES = 16


def gpid_of(pid):
    return GLOBAL_BIT | (pid << 24)


def gtid_of(pid, tid):
    return gpid_of(pid) | tid


# ---------------------------------------------------------------- writing

def tables_of(sql):
    out = {}
    for m in re.finditer(r"^CREATE TABLE (\w+) \((.*?)\);[ \t]*$", sql, re.S | re.M):
        out[m.group(1)] = m.group(0)
    return out


class Writer:
    """Creates the chosen release's tables and inserts rows by column name, in batches."""

    BATCH = 50_000

    def __init__(self, path, version):
        if os.path.exists(path):
            os.remove(path)
        self.db = sqlite3.connect(path)
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        self.version = version
        mine = tables_of(open(os.path.join(SCHEMAS, f"nsys-{version}.sql")).read())
        others = {}
        for v in sorted(VERSIONS, key=lambda v: abs(float(v) - float(version))):
            for t, s in tables_of(open(os.path.join(SCHEMAS, f"nsys-{v}.sql")).read()).items():
                others.setdefault(t, (v, s))
        self.available = mine
        self.others = others
        self.borrowed = {}
        self.created = set()
        self.cols = {}
        self.pending = {}

    def ensure(self, table):
        if table in self.created:
            return
        if table in self.available:
            sql = self.available[table]
        else:
            v, sql = self.others[table]
            self.borrowed[table] = v
        self.db.execute(sql)
        self.created.add(table)
        info = self.db.execute(f"PRAGMA table_info({table})").fetchall()
        # (name, type, notnull, default)
        self.cols[table] = [(r[1], r[2], r[3], r[4]) for r in info]

    def insert(self, table, row):
        """row: dict column -> value; columns the release lacks are dropped."""
        self.ensure(table)
        self.pending.setdefault(table, []).append(row)
        if len(self.pending[table]) >= self.BATCH:
            self.flush(table)

    def flush(self, table=None):
        for t in [table] if table else list(self.pending):
            rows = self.pending.get(t)
            if not rows:
                continue
            cols = self.cols[t]
            names = [c[0] for c in cols]
            fill = [None if not c[2] or c[3] is not None else ("" if "TEXT" in (c[1] or "").upper() else 0) for c in cols]
            values = [(r.get("_rowid"),) + tuple(r.get(n, f) for n, f in zip(names, fill)) for r in rows]
            self.db.executemany(f"INSERT INTO {t} (rowid, {', '.join(names)}) VALUES ({','.join('?' * (len(names) + 1))})", values)
            for r in rows:
                r["_flushed"] = True
            self.pending[t] = []

    def update_nvtx_end(self, row):
        """A range row written before it ended (see Export._drain) gets its end."""
        self.db.execute("UPDATE NVTX_EVENTS SET end = ?, endGlobalTid = ? WHERE rowid = ?",
                        (row["end"], row["endGlobalTid"], row["_rowid"]))

    def close(self):
        self.flush()
        self.db.commit()
        self.db.close()


# ---------------------------------------------------------------- the export being built

class Strings:
    def __init__(self):
        self.ids = {}

    def id(self, s):
        if s not in self.ids:
            self.ids[s] = len(self.ids) + 1
        return self.ids[s]


class Export:
    """Rows being written, and (unless truth=False) the truth being planted alongside."""

    def __init__(self, rng, writer, truth=True):
        self.rng = rng
        self.w = writer
        self.truth_on = truth
        self.s = Strings()
        self.threads = []  # (nameId, priority, globalTid)
        self.processes = []  # (globalPid, pid, name)
        self.gpus = set()
        self.cuda_devices = []  # (gpuId, cudaId, pid)
        self.domains = {}  # (pid, domain) -> domainId
        self.n_kernels = self.n_runtime = self.n_nvtx = self.n_graph = 0
        self.graph_mode = None  # "Graph" / "Node" for META_DATA_CAPTURE
        self.traced = ["Cuda", "NvtxEvents", "OSRuntime"]
        self.shuffle_nvtx = False
        self.nvtx_out = []  # when shuffling: every row, written at the end
        self._all_threads = []
        # truth
        self.ops = []  # dicts
        self.instances = []  # dicts
        self.negative = 0
        self.range_max = None  # last NVTX range timestamp
        self.session_start = 1700000000000000000  # utcEpochNs: when nsys started

    # ---- processes, threads, domains
    def process(self, pid, name, gpu, ordinal=None):
        """A rank on GPU `gpu`; `ordinal` is the CUDA device id the process sees (deviceId)."""
        ordinal = gpu if ordinal is None else ordinal
        self.processes.append((gpid_of(pid), pid, name))
        self.gpus.add(gpu)
        self.cuda_devices.append((gpu, ordinal, pid))
        return {"pid": pid, "gpu": gpu, "ordinal": ordinal, "corr": 0, "streams": {}}

    def thread(self, proc, tid, name, t0):
        self.threads.append((self.s.id(name), 0, gtid_of(proc["pid"], tid)))
        th = {"proc": proc, "tid": tid, "gtid": gtid_of(proc["pid"], tid), "t": t0, "stack": [],
              "open": [], "pending": []}
        self._all_threads.append(th)
        return th

    def domain(self, th, name):
        key = (th["proc"]["pid"], name)
        if key not in self.domains:
            did = len([k for k in self.domains if k[0] == key[0]]) + 1
            self.domains[key] = did
            self.nvtx_row(th, th["t"], DOMAIN_CREATE, name, "text", did, count_negative=False, done=True)
        return self.domains[key]

    # ---- NVTX rows: kept per thread until every earlier row is complete (start order)
    def nvtx_row(self, th, start, etype, text, via, domain_id, count_negative=True, done=False):
        text_col, text_id = (text, None) if via == "text" else (None, self.s.id(text))
        row = {"start": start, "end": None, "eventType": etype, "text": text_col, "globalTid": th["gtid"],
               "endGlobalTid": None, "textId": text_id, "domainId": domain_id, "_done": done}
        if count_negative and start < 0:
            self.negative += 1
        if etype in (PUSHPOP, STARTEND):
            self.range_max = start if self.range_max is None else max(self.range_max, start)
        th["pending"].append(row)
        if done:
            self._drain(th)
        return row

    def _drain(self, th):
        """Write the thread's rows in start order: every complete row at the head, and open ones
        too once many rows wait behind them (a range open for the whole run); those get their end
        when they close."""
        p = th["pending"]
        k = 0
        while k < len(p) and (p[k]["_done"] or len(p) - k > 2000):
            k += 1
        for row in p[:k]:
            self._emit(row)
        del p[:k]

    def _emit(self, row):
        self.n_nvtx += 1
        row["_rowid"] = self.n_nvtx
        row["_written"] = True
        if self.shuffle_nvtx:
            self.nvtx_out.append(row)
        else:
            self.w.insert("NVTX_EVENTS", row)

    def _open(self, th, text, style, via, domain, key, cross=False, counter=None):
        did = self.domain(th, domain) if domain else 0
        row = self.nvtx_row(th, th["t"], PUSHPOP if style == "PushPop" else STARTEND, text, via, did)
        inst = {"pid": th["proc"]["pid"], "name": key if key is not None else text, "dom": domain or "",
                "style": style, "start": th["t"], "end": None, "ops": [], "cross": cross, "row": row,
                "counter": counter}
        if self.truth_on:
            self.instances.append(inst)
        th["t"] += self.rng.randint(50, 400)
        return inst

    def push(self, th, text, via="text", domain=None, key=None, counter=None, setup=False):
        """A push/pop range; `key` is the grouped name the report must show (default: text);
        `counter` marks a per-instance counter name with its family (`iteration N`); `setup` a
        trainer's setup range (open for the whole capture, not listed as work per process)."""
        inst = self._open(th, text, "PushPop", via, domain, key, counter=counter)
        inst["setup"] = setup
        th["stack"].append(inst)
        th["open"].append(inst)
        return inst

    def pop(self, th):
        self._close(th, th["stack"].pop())

    def _close(self, th, inst, end_th=None):
        th["t"] += self.rng.randint(50, 400)
        inst["end"] = th["t"]
        row = inst["row"]
        row["end"] = th["t"]
        self.range_max = max(self.range_max, th["t"])
        if end_th is not None:
            row["endGlobalTid"] = end_th["gtid"]
        row["_done"] = True
        if row.get("_flushed") and not self.shuffle_nvtx:
            self.w.update_nvtx_end(row)
        if inst in th["open"]:
            th["open"].remove(inst)
        self._drain(th)

    def start_range(self, th, text, via="text", domain=None, cross=False, never_ends=False):
        inst = self._open(th, text, "StartEnd", via, domain, None, cross=cross)
        if not cross:
            th["open"].append(inst)
        if never_ends:
            inst["row"]["_done"] = True
            self._drain(th)
        return inst

    def end_range(self, th, inst, end_th=None):
        self._close(th, inst, end_th)

    def mark(self, th, text):
        self.nvtx_row(th, th["t"], MARK, text, "text", 0, count_negative=False, done=True)

    # ---- launches
    def launch(self, th, items, api="cudaLaunchKernel_v7000", runtime_row=True, gpu_start=None):
        """items: (kind, key, stream, duration[, truth comm op]); kind is kernel, memcpy, memset,
        graph (a CUDA graph traced whole) or node (a kernel of a graph traced node by node).
        One runtime call, one correlation id. `gpu_start` places an item without a runtime call
        anywhere (nothing then ties it to the CPU clock)."""
        proc = th["proc"]
        proc["corr"] += 1
        corr = proc["corr"]
        r0 = th["t"]
        r1 = r0 + self.rng.randint(2000, 6000)
        th["t"] = r1 + self.rng.randint(100, 1500)
        if runtime_row:
            self.n_runtime += 1
            self.w.insert("CUPTI_ACTIVITY_KIND_RUNTIME", {
                "start": r0, "end": r1, "eventClass": 1, "globalTid": th["gtid"], "correlationId": corr,
                "nameId": self.s.id(api), "returnValue": 0})
        opened = list(th["open"]) if runtime_row else []
        innermost = max(opened, key=lambda i: i["start"]) if opened else None
        if opened:
            # Ties: the range opened later is inner (instances are opened in start order).
            best = innermost["start"]
            innermost = [i for i in opened if i["start"] == best][-1]
        for item in items:
            kind, key, stream, dur = item[:4]
            start = max(proc["streams"].get(stream, -10**18), r0 + self.rng.randint(1000, 4000))
            if gpu_start is not None and not runtime_row:
                start = gpu_start
            end = start + dur
            proc["streams"][stream] = end + self.rng.randint(200, 1500)
            common = {"start": start, "end": end, "deviceId": proc["ordinal"], "contextId": 1,
                      "streamId": stream, "correlationId": corr, "globalPid": gpid_of(proc["pid"])}
            if kind in ("kernel", "node"):
                dem, short, cls, comm = nsys_scenarios.KERNELS[key]
                comm = item[4] if len(item) > 4 else comm
                self.n_kernels += 1
                row = dict(common, demangledName=self.s.id(dem), shortName=self.s.id(short),
                           registersPerThread=128, gridX=132, gridY=1, gridZ=1, blockX=256, blockY=1,
                           blockZ=1, staticSharedMemory=0, dynamicSharedMemory=49152,
                           localMemoryPerThread=0, localMemoryTotal=0, gridId=self.n_kernels)
                if kind == "node":
                    row.update(graphNodeId=1000 + self.n_kernels, graphId=7)
                self.w.insert("CUPTI_ACTIVITY_KIND_KERNEL", row)
                op = {"name": dem, "cls": cls, "comm": comm}
            elif kind == "graph":
                self.n_graph += 1
                self.w.insert("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", dict(common, graphId=key, graphExecId=key + 100))
                op = {"cls": "cuda_graph", "comm": None}
            elif kind == "memcpy":
                self.w.insert("CUPTI_ACTIVITY_KIND_MEMCPY", dict(common, bytes=key, copyKind=1, srcKind=0, dstKind=2))
                op = {"cls": "memcpy", "comm": None}
            else:
                self.w.insert("CUPTI_ACTIVITY_KIND_MEMSET", dict(common, value=0, bytes=key, memKind=2))
                op = {"cls": "memset", "comm": None}
            if start < 0:
                self.negative += 1
            if self.truth_on:
                op.update(pid=proc["pid"], gpu=proc["gpu"], start=start, end=end, corr=corr,
                          kind=kind, ranges=opened, innermost=innermost if runtime_row else None,
                          launched=runtime_row)
                self.ops.append(op)
        return corr

    def finish(self, version):
        """Flush NVTX rows still held, then the small tables."""
        w = self.w
        for th in self._all_threads:
            for row in th["pending"]:
                self._emit(row)
            th["pending"] = []
        if self.shuffle_nvtx:
            # Not in start order per thread: by end time, unended last.
            for row in sorted(self.nvtx_out, key=lambda r: (r["end"] is None, r["end"] or 0, r["start"])):
                row["_rowid"] = None  # the table's order is the insertion order
                w.insert("NVTX_EVENTS", row)
        product, schema = VERSIONS[version]
        meta = "EXPORT_META_DATA" if version < "2023.3" else "META_DATA_EXPORT"
        for n, v in (("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", product),
                     ("EXPORT_SCHEMA_VERSION", schema)):
            w.insert(meta, {"name": n, "value": v})
        if version >= "2023.3":
            for t in self.traced:
                w.insert("META_DATA_CAPTURE", {"name": "CAPTURE_EVENT_TYPE", "value": t})
            if self.graph_mode:
                key = "PROCESS_0:CUDA_GRAPH_TRACE_OPTIONS:MODE" if version == "2025.5" else "CUDA_GRAPH_TRACE_OPTIONS:MODE"
                w.insert("META_DATA_CAPTURE", {"name": key, "value": self.graph_mode})
        if version >= "2024.5":
            for i, n, l in EVENT_TYPES:
                w.insert("ENUM_NSYS_EVENT_TYPE", {"id": i, "name": n, "label": l})
        w.insert("TARGET_INFO_SESSION_START_TIME", {"utcEpochNs": self.session_start,
                                                    "utcTime": "2023-11-14T22:13:20", "localTime": "2023-11-14T22:13:20"})
        for g in sorted(self.gpus):
            w.insert("TARGET_INFO_GPU", {"vmId": GLOBAL_BIT, "id": g, "name": "NVIDIA H100 80GB HBM3",
                                         "busLocation": f"0000:{g + 0x18:02x}:00.0", "isDiscrete": 1,
                                         "smCount": 132, "chipName": "GH100", "cuDevice": g})
        if any(g != o for g, o, _ in self.cuda_devices) and version >= "2025.5":
            for g, o, p in self.cuda_devices:
                w.insert("TARGET_INFO_CUDA_DEVICE", {"gpuId": g, "cudaId": o, "pid": p})
        for gp, pid, name in self.processes:
            w.insert("PROCESSES", {"globalPid": gp, "pid": pid, "name": name})
        for n, pr, t in self.threads:
            w.insert("ThreadNames", {"nameId": n, "priority": pr, "globalTid": t})
        for s, i in self.s.ids.items():
            w.insert("StringIds", {"id": i, "value": s})
        w.close()


# ---------------------------------------------------------------- truth

def covered_length(intervals_a, intervals_b=None):
    """Length covered by the union of intervals_a (and, if given, also by intervals_b):
    a sweep over boundary events with coverage counters."""
    events = []
    for s, e in intervals_a:
        if e > s:
            events += [(s, 0, 1), (e, 0, -1)]
    for s, e in intervals_b or []:
        if e > s:
            events += [(s, 1, 1), (e, 1, -1)]
    events.sort()
    cnt = [0, 0]
    total, last = 0, None
    for t, which, d in events:
        if last is not None and cnt[0] > 0 and (intervals_b is None or cnt[1] > 0):
            total += t - last
        cnt[which] += d
        last = t
    return total


def summary(durs):
    n = len(durs)
    return {"total": sum(durs), "count": n, "avg": sum(durs) / n, "med": float(statistics.median(durs)),
            "min": min(durs), "max": max(durs), "stddev": statistics.stdev(durs) if n > 1 else 0.0}


CATEGORIES = ["communication", "gemm", "attention", "elementwise", "reduction", "memory", "other", "cuda_graph"]


def truth(ex):
    procs = {}
    for (_, pid, _) in ex.processes:
        procs[pid] = {"kernel_ns": 0, "kernel_count": 0, "graph_ns": 0, "graph_count": 0, "memcpy_ns": 0,
                      "memcpy_count": 0, "memset_ns": 0, "memset_count": 0, "devices": set(),
                      "categories": {c: [0, 0] for c in CATEGORIES}, "comm_ops": {}, "from_sendrecv": {},
                      "nvtx": {}, "unattributed_ns": 0}
    by_name = {}
    lanes = {}
    for op in ex.ops:
        p = procs[op["pid"]]
        p["devices"].add(op["gpu"])
        d = op["end"] - op["start"]
        if op["cls"] in ("memcpy", "memset"):
            p[op["cls"] + "_ns"] += d
            p[op["cls"] + "_count"] += 1
            continue
        if op["cls"] == "cuda_graph":
            p["graph_ns"] += d
            p["graph_count"] += 1
        else:
            p["kernel_ns"] += d
            p["kernel_count"] += 1
            by_name.setdefault(op["name"], []).append(d)
        p["categories"][op["cls"]][0] += d
        p["categories"][op["cls"]][1] += 1
        if op["comm"]:
            c = p["comm_ops"].setdefault(op["comm"], [0, 0])
            c[0] += d
            c[1] += 1
        lane = lanes.setdefault((op["pid"], op["gpu"]), ([], []))
        lane[0 if op["cls"] == "communication" else 1].append((op["start"], op["end"]))
    for op in ex.ops:
        if op["kind"] in ("kernel", "node") and op["comm"] and op["comm"] != kernel_comm(op["name"]):
            f = procs[op["pid"]]["from_sendrecv"].setdefault(op["comm"], [0, 0])
            f[0] += op["end"] - op["start"]
            f[1] += 1
    for pid, p in procs.items():
        comm = compute = hidden = 0
        for (lp, _gpu), (cm, cp) in lanes.items():
            if lp != pid:
                continue
            comm += covered_length(cm)
            compute += covered_length(cp)
            hidden += covered_length(cm, cp)
        p["overlap"] = {"communication_ns": comm, "compute_ns": compute, "hidden_ns": hidden, "exposed_ns": comm - hidden}
        p["gpu_ns"] = p["kernel_ns"] + p["graph_ns"]
        p["devices"] = sorted(p["devices"])

    # Counter families: planted per-instance counters, folded when there are enough of them.
    fams = {}
    for inst in ex.instances:
        if inst["counter"] and not inst["cross"]:
            fams.setdefault((inst["pid"], inst["dom"], inst["style"], inst["counter"]), set()).add(inst["name"])
    for inst in ex.instances:
        k = (inst["pid"], inst["dom"], inst["style"], inst["counter"])
        if inst["counter"] and len(fams.get(k, ())) > FOLD_MIN_NAMES:
            inst["name"] = inst["counter"]
    for inst in ex.instances:
        inst["key"] = f"{inst['dom']}:{inst['name']}|{inst['style']}"
        if inst["end"] is None:
            inst["end"] = ex.range_max

    # NVTX: planted attribution. Setup ranges are not listed per process (their time stays
    # attributed: an op whose innermost range is the setup range is not outside every range).
    setup_keys = {i["key"] for i in ex.instances if i.get("setup")}
    for op in ex.ops:
        d = op["end"] - op["start"]
        keys = set()
        for inst in op["ranges"]:
            inst["ops"].append(op)
            keys.add(inst["key"])
        for key in keys - setup_keys:
            row = procs[op["pid"]]["nvtx"].setdefault(key, {})
            row["inclusive_ns"] = row.get("inclusive_ns", 0) + d
        if op["innermost"] is not None:
            if op["innermost"]["key"] not in setup_keys:
                row = procs[op["pid"]]["nvtx"].setdefault(op["innermost"]["key"], {})
                row["exclusive_ns"] = row.get("exclusive_ns", 0) + d
        else:
            procs[op["pid"]]["unattributed_ns"] += d
    proj_all = {}
    for inst in ex.instances:
        if inst["cross"]:
            continue
        if inst.get("setup"):
            row = {}  # the export-wide summary below still counts it
        else:
            row = procs[inst["pid"]]["nvtx"].setdefault(inst["key"], {})
        row["instances"] = row.get("instances", 0) + 1
        row["cpu_ns"] = row.get("cpu_ns", 0) + inst["end"] - inst["start"]
        for k in ("inclusive_ns", "exclusive_ns", "proj_range_ns", "gpu_ops"):
            row.setdefault(k, 0)
        row.setdefault("proj", [])
        if inst["ops"]:
            span = max(o["end"] for o in inst["ops"]) - min(o["start"] for o in inst["ops"])
            nops = len({o["corr"] for o in inst["ops"]})
            row["proj"].append(span)
            row["proj_range_ns"] += inst["end"] - inst["start"]
            row["gpu_ops"] += nops
            agg = proj_all.setdefault(inst["key"], {"proj": [], "range_ns": 0, "gpu_ops": 0})
            agg["proj"].append(span)
            agg["range_ns"] += inst["end"] - inst["start"]
            agg["gpu_ops"] += nops
    for p in procs.values():
        for row in p["nvtx"].values():
            spans = row.pop("proj", [])
            row["proj_instances"] = len(spans)
            row["proj_total_ns"] = sum(spans)
    nvtx_sum = {}
    for key, agg in proj_all.items():
        s = summary(agg["proj"])
        s.update(range_ns=agg["range_ns"], gpu_ops=agg["gpu_ops"])
        nvtx_sum[key] = s
    return {
        "kernel_count": ex.n_kernels,
        "graph_count": ex.n_graph,
        "processes": {str(pid): p for pid, p in procs.items()},
        "kernel_summary": {name: summary(d) for name, d in by_name.items()},
        "nvtx_gpu_proj_sum": nvtx_sum,
        "cuda_graph_trace": ex.graph_mode.lower() if ex.graph_mode else None,
        "notes": {
            "cross_thread_ranges": sum(1 for i in ex.instances if i["cross"]),
            "unclosed_ranges": sum(1 for i in ex.instances if i["row"]["end"] is None),
            "unmatched_gpu_ops": sum(1 for o in ex.ops if not o["launched"]),
            "negative_timestamps": ex.negative,
        },
    }


def kernel_comm(demangled):
    for dem, _short, _cls, comm in nsys_scenarios.KERNELS.values():
        if dem == demangled:
            return comm
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--scenario", choices=sorted(nsys_scenarios.SCENARIOS), default="mixed")
    ap.add_argument("--kernels", type=int, default=3000)
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--nsys-version", choices=sorted(VERSIONS), default="2026.2")
    ap.add_argument("--shuffle-nvtx", action="store_true", help="write NVTX_EVENTS out of start order")
    ap.add_argument("--no-expected", action="store_true")
    dp = ap.add_argument_group("dualpipe")
    dp.add_argument("--node", type=int, default=0, help="this export's node; --ranks is ranks per node")
    dp.add_argument("--mesh", default="pp=2 dp=1 cp=2 ep=2", help="axis sizes, pithtrain's order")
    dp.add_argument("--variant", choices=["base", "regressed"], default="base")
    dp.add_argument("--steps", type=int, default=1, help="training steps (0: enough for --kernels)")
    dp.add_argument("--num-chunks", type=int, default=8, help="micro-batches per step")
    dp.add_argument("--layers", type=int, default=2, help="layers per pipeline stage and phase")
    dp.add_argument("--compute-kernels", type=int, default=3, help="kernels per compute range")
    dp.add_argument("--mbs", type=int, default=1)
    dp.add_argument("--seq", type=int, default=4096)
    a = ap.parse_args()
    sizes = [int(v.split("/")[0]) for _, v in (f.split("=") for f in a.mesh.split())]
    if a.scenario == "dualpipe" and len(sizes) != 4:
        sys.exit("--mesh names four axis sizes: pp dp cp ep")
    rng = random.Random(a.seed)
    w = Writer(a.out, a.nsys_version)
    ex = Export(rng, w, truth=not a.no_expected)
    ex.shuffle_nvtx = a.shuffle_nvtx
    ex.params = {"node": a.node, "sizes": sizes, "variant": a.variant, "steps": a.steps, "num_chunks": a.num_chunks,
                 "layers": a.layers, "compute_kernels": a.compute_kernels, "mbs": a.mbs, "seq": a.seq}
    nsys_scenarios.SCENARIOS[a.scenario](ex, rng, a.kernels, a.ranks)
    ex.finish(a.nsys_version)
    for t, v in sorted(w.borrowed.items()):
        print(f"{a.out}: table {t} not in the nsys {a.nsys_version} schema file; created as nsys {v} writes it",
              file=sys.stderr)
    if not a.no_expected:
        t = truth(ex)
        if getattr(ex, "dualpipe", None):
            t["dualpipe"] = nsys_dualpipe.truth(ex.dualpipe)
        base = a.out[:-len(".sqlite")] if a.out.endswith(".sqlite") else a.out
        with open(base + ".expected.json", "w") as f:
            json.dump(t, f, indent=1, sort_keys=True)
    print(f"{a.out}: {ex.n_kernels} kernels, {ex.n_graph} graph launches, {ex.n_runtime} runtime calls, "
          f"{ex.n_nvtx} NVTX events", file=sys.stderr)


if __name__ == "__main__":
    main()
