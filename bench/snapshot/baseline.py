#!/usr/bin/env python3
"""Python baseline for the `instrument snapshot` benchmark.

What a user does today: `pickle.load` the snapshot, then compute the same summary
instrument prints for one device: totals (reserved, live, delayed frees, inactive,
requested vs rounded, largest inactive block), per-stream totals, live memory grouped
by the first user frame (skipping torch internals and C++ frames), and from the newest
--max-trace-events trace entries: counts per action, frees requested but not
completed per stream, live memory over time with its peak, and each OOM with the
sites holding memory just before it. It prints a short text summary.

    python3 bench/snapshot/baseline.py SNAPSHOT.pickle [--max-trace-events N]
"""

import argparse
import collections
import fnmatch
import pickle
import sys

INTERNAL = ["torch/nn/modules/*", "torch/autograd/*", "torch/optim/*", "torch/utils/*", "torch/*",
            "*/torchinductor_*/*"]


def is_internal(filename, cache={}):
    r = cache.get(filename)
    if r is None:
        if not filename.endswith(".py"):
            r = True
        else:
            parts = filename.split("/")
            suffixes = ["/".join(parts[i:]) for i in range(len(parts))]
            r = any(fnmatch.fnmatchcase(s, p) for p in INTERNAL for s in suffixes)
        cache[filename] = r
    return r


def site(frames):
    for f in frames:
        if not is_internal(f["filename"]):
            return (f["filename"], f["line"], f["name"])
    for f in frames:
        if f["filename"].endswith(".py"):
            return (f["filename"], f["line"], f["name"])
    if frames:
        f = frames[0]
        return (f["filename"], f["line"], f["name"])
    return ("<no stack recorded>", 0, "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--max-trace-events", type=int, default=1_000_000)
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args()
    with open(a.path, "rb") as f:
        snap = pickle.load(f)

    segs = snap["segments"]
    devices = collections.Counter()
    for s in segs:
        devices[s["device"]] += s["total_size"]
    device = max(devices, key=lambda d: (devices[d], -d)) if devices else 0

    def totals(seglist):
        t = collections.Counter()
        t["segments"] = len(seglist)
        largest = 0
        for s in seglist:
            t["reserved"] += s["total_size"]
            for b in s["blocks"]:
                st = b["state"]
                if st == "active_allocated":
                    t["allocated"] += b["size"]
                    t["requested"] += b.get("requested_size", b["size"])
                    t["allocated_blocks"] += 1
                elif st in ("active_pending_free", "active_awaiting_free"):
                    t["pending"] += b["size"]
                else:
                    t["inactive"] += b["size"]
                    largest = max(largest, b["size"])
        t["largest_inactive"] = largest
        return t

    mine = [s for s in segs if s["device"] == device]
    tot = totals(mine)
    by_stream = collections.defaultdict(list)
    for s in mine:
        by_stream[s["stream"]].append(s)
    streams = {k: totals(v) for k, v in by_stream.items()}

    sites = collections.defaultdict(lambda: [0, 0])
    end_live = {}
    for s in mine:
        addr = s["address"]
        for b in s["blocks"]:
            if b["state"] == "active_allocated":
                k = site(b.get("frames", []))
                sites[k][0] += b["size"]
                sites[k][1] += 1
                end_live[b.get("address", addr)] = (b.get("requested_size", b["size"]), b.get("frames", []))
            addr += b["size"]

    traces = snap.get("device_traces", [])
    trace = traces[device] if device < len(traces) else []
    dropped = max(0, len(trace) - a.max_trace_events)
    trace = trace[dropped:]
    counts = collections.Counter(e["action"] for e in trace)
    pending = {}
    open_ = {}
    recs = []  # [size, frames, alloc_idx, free_idx]
    for i, e in enumerate(trace):
        act = e["action"]
        if act == "alloc":
            r = [e["size"], e.get("frames", []), i, None]
            old = open_.get(e["addr"])
            if old is not None:
                old[3] = i
            open_[e["addr"]] = r
            recs.append(r)
        elif act == "free_requested":
            r = open_.pop(e["addr"], None)
            if r is None:
                r = [e["size"], e.get("frames", []), None, i]
                recs.append(r)
            else:
                r[3] = i
            pending[e["addr"]] = (e["stream"], e["size"])
        elif act == "free_completed":
            pending.pop(e["addr"], None)
    for addr, (size, frames) in end_live.items():
        if addr not in open_:
            recs.append([size, frames, None, None])
    delta = [0] * len(trace)
    base = 0
    for size, _, ai, fi in recs:
        if ai is None:
            base += size
        else:
            delta[ai] += size
        if fi is not None:
            delta[fi] -= size
    live, peak = base, base
    for d in delta:
        live += d
        peak = max(peak, live)
    pend = collections.defaultdict(lambda: [0, 0])
    for stream, size in pending.values():
        pend[stream][0] += 1
        pend[stream][1] += size
    ooms = []
    for i, e in enumerate(trace):
        if e["action"] != "oom":
            continue
        holders = collections.Counter()
        for size, frames, ai, fi in recs:
            if (ai is None or ai < i) and (fi is None or fi > i):
                holders[site(frames)] += size
        ooms.append((e["size"], e["device_free"], holders.most_common(a.top)))

    out = sys.stdout
    out.write(f"device {device}: reserved {tot['reserved']} live {tot['allocated']} pending {tot['pending']} "
              f"inactive {tot['inactive']} requested {tot['requested']} waste {tot['allocated'] - tot['requested']} "
              f"segments {tot['segments']} largest_inactive {tot['largest_inactive']}\n")
    for k, v in sorted(streams.items()):
        out.write(f"  stream {k}: reserved {v['reserved']} live {v['allocated']}\n")
    live_total = tot["allocated"] or 1
    for k, (b, n) in sorted(sites.items(), key=lambda kv: -kv[1][0])[: a.top]:
        out.write(f"  {b} {100 * b / live_total:.1f}% {n} {k[0]}:{k[1]} in {k[2]}\n")
    out.write(f"trace: {len(trace)} kept, {dropped} dropped, {dict(counts)}, peak {peak}\n")
    for k, (n, b) in pend.items():
        out.write(f"  pending frees on stream {k}: {n} blocks {b} bytes\n")
    for size, free, holders in ooms:
        out.write(f"  OOM {size} device_free {free}: {holders[:3]}\n")


if __name__ == "__main__":
    main()
