"""Randomly shared snapshot graphs for the differential test.

Each case is a random program on the simulated allocator (random sizes, streams,
call sites, frees, delayed frees, empty_cache, a ring buffer), built as some torch
version builds it, and then shared further at random the way other tools might: a
trace entry appended twice, frame dicts and frame lists reused across blocks,
segments and entries, one string object for equal strings, a `pool_id` tuple reused,
a block or segment dict referenced again from an unknown key, lists of frames stored
under other keys as well. It is written with `pickle.dumps` (a random protocol, or
torch::jit::Pickler) and with `json.dumps`, which writes every shared object out in
full: the reference reading. The test checks that both give the same report.
"""

import json
import os
import pickle
import random

from . import graph, jit_pickle
from . import program as P
from .allocator import KiB, MiB, OutOfMemory, Process

SITES = [P.ATTN_PROJ, P.EXPERT_GEMM, P.SILU_OUT, P.A2A_RECV, P.NCCL_BUF, P.BATCH, P.LOSS, P.CUBLAS,
         P.MM_BACKWARD, P.ACCUM, P.SILU_BWD, P.GROUPED_BWD, P.EXPERT_WEIGHT, P.ATTN_WEIGHT, P.ADAM_STATE]


def program(rng):
    proc = Process(devices=rng.choice((1, 1, 2)), capacity=rng.choice((256, 512, 4096)) * MiB)
    a = proc.devices[-1]
    early = [a.malloc(rng.choice((1, 2, 4)) * MiB, rng.choice(SITES)) for _ in range(rng.randrange(3))]
    proc.record_memory_history(context=rng.choice(("all", "all", "alloc", "state")),
                               max_entries=rng.choice((1 << 20, 1 << 20, rng.randrange(20, 200))))
    live = list(early)
    for _ in range(rng.randrange(20, 300)):
        r = rng.random()
        if r < 0.5 or not live:
            size = rng.choice((100, 512, 4 * KiB, 300 * KiB, 2 * MiB, 6 * MiB, 24 * MiB))
            stream = rng.choice((0, 0, 0, 0x55D0C0FFEE00))
            try:
                live.append(a.malloc(size + rng.randrange(64), rng.choice(SITES), stream=stream))
            except OutOfMemory:
                pass
        elif r < 0.85:
            b = live.pop(rng.randrange(len(live)))
            if rng.random() < 0.2:
                a.record_stream(b, 0x55D0C0FFEF40)
            a.free(b, rng.choice(SITES + [None]))
        elif r < 0.9:
            a.stream_done(0x55D0C0FFEF40)
        elif r < 0.93:
            a.empty_cache(rng.choice(SITES))
        elif r < 0.95:
            a.snapshot_taken()
        else:
            a.clock.advance(rng.randrange(1, 10_000))
    return proc


def walk(o, out):
    """Every dict and list in the graph (tuples too), with its parent."""
    stack = [o]
    seen = set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        out.append(x)
        vals = x.values() if isinstance(x, dict) else x
        for v in vals:
            if isinstance(v, (dict, list, tuple)):
                stack.append(v)


def share(g, rng):
    """Share objects of `g` further, at random (no cycles: JSON must write it)."""
    objs = []
    walk(g, objs)
    frame_dicts = [o for o in objs if isinstance(o, dict) and "filename" in o]
    frame_lists = [o for o in objs if isinstance(o, list) and o and all(isinstance(f, dict) and "filename" in f for f in o)]
    entries = [o for o in objs if isinstance(o, dict) and "action" in o]
    blocks = [o for o in objs if isinstance(o, dict) and "state" in o]
    segments = g["segments"]
    owned = []
    for _ in range(rng.randrange(1, 6)):
        k = rng.randrange(8)
        if k == 0 and frame_lists and len(frame_lists) > 1:
            # one frame list for two owners
            src, dst = rng.sample(frame_lists, 2)
            for o in objs:
                if isinstance(o, dict) and o.get("frames") is dst:
                    o["frames"] = src
        elif k == 1 and frame_dicts and frame_lists:
            lst = rng.choice(frame_lists)
            i = rng.randrange(len(lst))
            lst[i] = rng.choice(frame_dicts)  # a frame dict recurring elsewhere
        elif k == 2 and entries:
            trace = next(t for t in g["device_traces"] if t) if any(g["device_traces"]) else None
            if trace:
                trace.insert(rng.randrange(len(trace) + 1), rng.choice(trace))  # an entry twice
        elif k == 3 and blocks and entries:
            rng.choice(blocks)["extra"] = rng.choice(entries)  # a record under an unknown key
        elif k == 4 and frame_lists and blocks:
            rng.choice(blocks)["saved_frames"] = rng.choice(frame_lists)
        elif k == 5:
            # equal strings as one object
            pool = {}
            for o in objs:
                if isinstance(o, dict):
                    for key, v in list(o.items()):
                        if isinstance(v, str):
                            o[key] = pool.setdefault(v, v)
        elif k == 6 and len(segments) > 1:
            # a segment referenced from another's unknown key (no cycles)
            a, b = rng.sample(segments, 2)
            if "owner" not in b and not any(o is a for o in owned):
                a["owner"] = {"segment": b, "note": "shared"}
                owned.append(b)
        elif k == 7:
            t = (0, 0)
            for o in objs:
                if isinstance(o, dict) and "pool_id" in o:
                    o["pool_id"] = t
    return g


def generate(out, n, seed):
    os.makedirs(out, exist_ok=True)
    rng = random.Random(seed)
    for i in range(n):
        proc = program(rng)
        version = rng.choice(("2.1", "2.5", "2.9", "2.9", "cpp", "2.0"))
        stacks = rng.choice(("all", "python"))
        holders = {} if version == "cpp" else None
        g = graph.build(proc.devices, version, stacks, rng.choice(("active_pending_free", "active_awaiting_free")),
                        holders=holders)
        shared = rng.random() < 0.7 and version != "cpp"
        if shared:
            g = share(g, rng)
        if version == "cpp":
            data = jit_pickle.dumps(g, holders)
        else:
            data = pickle.dumps(g, protocol=rng.choice((0, 1, 2, 3, 4, 4, 5, 5)))
        with open(os.path.join(out, f"case_{i:03d}.pickle"), "wb") as f:
            f.write(data)
        with open(os.path.join(out, f"case_{i:03d}.json"), "w") as f:
            json.dump(g, f)
