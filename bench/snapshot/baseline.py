#!/usr/bin/env python3
"""Python baseline for the `instrument snapshot` benchmark.

What a user does today: `pickle.load` the snapshot, then compute the summary
instrument prints for one device: totals (reserved, live, delayed frees, inactive,
requested vs rounded, largest inactive block, fragmented and reclaimable bytes),
per-stream totals, live memory grouped by site (the first user frame and the
library frame below it; else a library's, torch's, or the first C++ frame that is
not the unwinder, allocator, dispatcher or interpreter, as memory_viz's frame filter
and instrument's table have it; file names read with either separator) with a
category from the innermost frame with evidence (blocks without a stack apart), and
from the trace (whole by default; the newest --max-trace-events entries if given): counts per action, frees requested
but not completed per stream, live memory over time with its peak, each OOM with the
sites holding memory just before it, and the steps the run's annotations mark.
Prints a short summary.

    python3 bench/snapshot/baseline.py SNAPSHOT.pickle [--max-trace-events N]
"""

import argparse
import bisect
import collections
import fnmatch
import pickle
import sys

INTERNAL = ["torch/nn/modules/*", "torch/autograd/*", "torch/optim/*", "torch/utils/*", "torch/*",
            "*/torchinductor_*/*"]
# memory_viz's _frame_filter, and what instrument adds (src/snapshot/frames.rs)
SKIP_NAMES = ["unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
              "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_", "CUDACachingAllocator",
              "CachingDeviceAllocator", "wrap_kernel_functor", "THPVariable_subclass_dealloc"]
SKIP_PREFIX = ["start_thread", "clone", "execute_native_thread_routine", "_Py", "Py", "cfunction_",
               "method_vectorcall", "slot_tp_", "pymain_", "c10::", "at::detail::empty", "at::empty",
               "at::native::empty", "at::_ops::", "at::(", "torch::autograd::VariableType::",
               "torch::autograd::THPVariable_", "torch::autograd::Node::operator()",
               "torch::autograd::call_function", "torch::autograd::Engine::",
               "torch::autograd::python::PythonEngine::"]
SKIP_FILES = ["pythonrun.c", "Modules/main.c", "Objects/call.c", "Objects/methodobject.c",
              "pycore_ceval.h", "ceval.c", "cpython/abstract.h", "CUDACachingAllocator", "core/boxing",
              "/Register", "/Redispatch"]
CATEGORIES = [
    ("communication", lambda n, f: f.find("torch/distributed/") >= 0 or "/c10d/" in f or "torch/nn/parallel/" in f
     or n.startswith("c10d::") or "ProcessGroup" in n or "Reducer::" in n
     or any(w in n.lower() for w in ("all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter",
                                     "reducescatter", "all_to_all", "alltoall", "broadcast", "nccl"))),
    ("optimizer_state", lambda n, f: "torch/optim/" in f),
    ("gradients", lambda n, f: "Backward" in n or "AccumulateGrad" in n or "autograd::Engine" in n
     or "autograd::PyNode" in n or n.startswith("backward")
     or ("torch/autograd/graph.py" in f and n == "_engine_run_backward")
     or ("torch/autograd/__init__.py" in f and n in ("backward", "grad"))
     or ("torch/_tensor.py" in f and n == "backward")),
    ("parameters", lambda n, f: n.lower() in ("reset_parameters", "load_state_dict", "_load_from_state_dict",
                                              "to_empty", "init_weights", "_init_weights")
     or "torch/nn/init.py" in f or "torch/nn/parameter.py" in f
     or "from_pretrained" in n.lower() or "set_module_tensor_to_device" in n.lower()
     or "torch/serialization.py" in f or "/safetensors/" in f
     or ("torch/nn/modules/" in f and n in ("__init__", "_apply", "convert", "to", "cuda"))),
    ("activations", lambda n, f: n.startswith("forward") or "torch/nn/functional.py" in f
     or "torch/utils/checkpoint.py" in f
     or ("torch/nn/modules/module.py" in f and n in ("_call_impl", "_wrapped_call_impl"))
     or ("torch/autograd/function.py" in f and n == "apply")),
    ("temporary", lambda n, f: "workspace" in n.lower() or "scratch" in n.lower()),
]


def cached(fn):
    cache = {}

    def wrapper(frames):
        k = id(frames)
        r = cache.get(k)
        if r is None:
            r = cache[k] = (fn(frames), frames)
        return r[0]
    return wrapper


def frame_class(f, cache={}):
    key = (f["filename"], f["name"])
    r = cache.get(key)
    if r is None:
        file, name = key
        file = file.replace("\\", "/")
        if file.endswith(".py") or file.startswith("<"):
            parts = file.split("/")
            suffixes = ["/".join(parts[i:]) for i in range(len(parts))]
            lower = file.lower()
            library = "/site-packages/" in lower or "/dist-packages/" in lower
            stdlib = "/lib/python3" in lower and not library
            if any(fnmatch.fnmatchcase(s, p) for p in INTERNAL for s in suffixes):
                r = "torch"
            else:
                r = "library" if library else "stdlib" if stdlib else "user"
        elif (any(s in name for s in SKIP_NAMES) or any(name.startswith(p) for p in SKIP_PREFIX)
              or any(s in file for s in SKIP_FILES)):
            r = "skip"
        elif name.startswith("at::"):
            r = "op"
        else:
            r = "native"
        cache[key] = r
    return r


@cached
def attribute(frames):
    first = {}
    for f in frames:
        c = frame_class(f)
        if c == "user":
            first["user"] = f
            break
        first.setdefault(c, f)
    f = (first.get("user") or first.get("library") or first.get("torch") or first.get("stdlib")
         or first.get("native") or first.get("op") or (frames[0] if frames else None))
    lib = first.get("library")
    site = ((f["filename"], f["line"], f["name"]) if f else ("<no stack recorded>", 0, ""),
            (lib["filename"], lib["line"], lib["name"]) if lib else None)
    if not frames:
        return site, "no_stack"
    cat = "other"
    for fr in frames:
        file = fr["filename"].replace("\\", "/")
        c = next((c for c, rule in CATEGORIES if rule(fr["name"], file)), None)
        if c:
            cat = c
            break
    else:
        if any(fr["name"] == "__init__" for fr in frames):
            cat = "parameters"
    return site, cat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--max-trace-events", type=int, default=None)  # None: the whole trace, as instrument
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
            free = [b for b in s["blocks"] if b["state"] == "inactive"]
            if s.get("is_expandable"):
                page = (2 << 20) if s.get("segment_type") == "small" else (20 << 20)
                at = s["address"]
                for b in s["blocks"]:
                    if b["state"] == "inactive":
                        lo = -(-(at - s["address"]) // page) * page
                        t["reclaimable"] += max(0, (at + b["size"] - s["address"]) // page * page - lo)
                    at += b["size"]
            elif len(free) == len(s["blocks"]):
                t["reclaimable"] += s["total_size"]
            else:
                t["fragmented"] += sum(b["size"] for b in free)
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
    cats = collections.Counter()
    end_live = {}
    for s in mine:
        addr = s["address"]
        for b in s["blocks"]:
            if b["state"] == "active_allocated":
                site, cat = attribute(b.get("frames", []))
                sites[site][0] += b["size"]
                sites[site][1] += 1
                if cat != "no_stack":
                    cats[cat] += b["size"]
                # The block's size, as the trace's entries count it (torch's TraceEntry.size is
                # the rounded block size), not its requested_size.
                end_live[b.get("address", addr)] = (b["size"], b.get("frames", []))
            addr += b["size"]

    traces = snap.get("device_traces", [])
    trace = traces[device] if device < len(traces) else []
    dropped = max(0, len(trace) - a.max_trace_events) if a.max_trace_events else 0
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
                holders[attribute(frames)[0]] += size
        ooms.append((e["size"], e["device_free"], holders.most_common(a.top)))
    # steps the run marks: where each Optimizer.step range ends, on the trace's clock
    times = [e.get("time_us", 0) for e in trace]
    ends = [bisect.bisect_right(times, x["time_us"]) for x in snap.get("external_annotations") or []
            if x.get("name", "").startswith("Optimizer.step#") and x.get("stage") == "END"
            and times and times[0] <= x["time_us"] <= times[-1]]
    steps = sorted({0, *ends} - {len(trace)})

    out = sys.stdout
    out.write(f"device {device}: reserved {tot['reserved']} live {tot['allocated']} pending {tot['pending']} "
              f"inactive {tot['inactive']} requested {tot['requested']} waste {tot['allocated'] - tot['requested']} "
              f"segments {tot['segments']} largest_inactive {tot['largest_inactive']}\n")
    for k, v in sorted(streams.items()):
        out.write(f"  stream {k}: reserved {v['reserved']} live {v['allocated']}\n")
    live_total = tot["allocated"] or 1
    for (k, lib), (b, n) in sorted(sites.items(), key=lambda kv: -kv[1][0])[: a.top]:
        via = f" via {lib[0]}:{lib[1]} in {lib[2]}" if lib else ""
        out.write(f"  {b} {100 * b / live_total:.1f}% {n} {k[0]}:{k[1]} in {k[2]}{via}\n")
    out.write(f"  by category: {dict(cats)}\n")
    out.write(f"  fragmented {tot['fragmented']} reclaimable {tot['reclaimable']}\n")
    out.write(f"trace: {len(trace)} kept, {dropped} dropped, {dict(counts)}, peak {peak}\n")
    out.write(f"  steps marked by the run: {len(steps) if ends else 0}\n")
    for k, (n, b) in pend.items():
        out.write(f"  pending frees on stream {k}: {n} blocks {b} bytes\n")
    for size, free, holders in ooms:
        out.write(f"  OOM {size} device_free {free}: {holders[:3]}\n")


if __name__ == "__main__":
    main()
