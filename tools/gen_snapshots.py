#!/usr/bin/env python3
"""Generate PyTorch-style CUDA memory snapshots for instrument's tests and benchmark.

The files follow the schema of ``torch.cuda.memory._snapshot()`` (segments with
blocks, ``device_traces`` with ``alloc`` / ``free_requested`` / ``free_completed`` /
``segment_alloc`` / ``segment_free`` / ``oom`` entries, shared frame dicts and
shared stack lists, ``allocator_settings``) and are written with the standard
``pickle`` module, so they are exactly what Python writes.

A small caching-allocator simulator produces them: allocations are rounded to 512
bytes, carved best-fit out of inactive blocks of segments on the same stream, and
new segments are ``cudaMalloc``-ed (2 MiB for small requests, 20 MiB or the rounded
size for large ones). Each scenario also writes ``planted.json``: the facts the
scenario planted, which the Rust tests compare every report against.

    python3 tools/gen_snapshots.py fixtures/snapshots          # all fixtures
    python3 tools/gen_snapshots.py --bench OUT.pickle --events 6000000
"""

import argparse
import json
import os
import pickle
import random
import sys

MiB = 1 << 20
KiB = 1 << 10
TORCH = "/usr/local/lib/python3.11/site-packages/torch"
PT = "/workspace/pithtrain/pithtrain"
TRAIN = "/workspace/pithtrain/examples/train.py"
CPP_MALLOC = ("/opt/conda/pytorch/c10/cuda/CUDACachingAllocator.cpp", 1420,
              "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)")
CPP_EMPTY = ("/opt/conda/pytorch/aten/src/ATen/EmptyTensor.cpp", 53, "at::detail::empty_generic(...)")
SIDE_STREAM = 0x55d0c0ffee00


class Frames:
    """Interns frames and stacks the way torch does: one dict per frame, one list per stack."""

    def __init__(self):
        self.frames = {}
        self.stacks = {}

    def frame(self, f):
        if f not in self.frames:
            file, line, name = f
            # torch inserts name, filename, line in this order
            self.frames[f] = {"name": name, "filename": file, "line": line}
        return self.frames[f]

    def stack(self, frames):
        key = tuple(frames)
        if key not in self.stacks:
            self.stacks[key] = [self.frame(f) for f in frames]
        return self.stacks[key]


FR = Frames()
EMPTY = []  # torch shares one empty list for "no context"


def py_stack(*user, module=None, extra_torch=(), native=True, tail=True):
    """A stack, innermost first: C++ allocator frames, torch frames, then user frames."""
    frames = []
    if native:
        frames += [CPP_MALLOC, CPP_EMPTY]
    frames += list(extra_torch)
    if module is not None:
        frames += [
            (TORCH + "/nn/modules/" + module[0], module[1], "forward"),
            (TORCH + "/nn/modules/module.py", 1762, "_call_impl"),
            (TORCH + "/nn/modules/module.py", 1751, "_wrapped_call_impl"),
        ]
    frames += list(user)
    if tail:
        frames += [(TRAIN, 212, "main"), (TRAIN, 230, "<module>")]
    return FR.stack(frames)


def round_size(n):
    return max(512, (n + 511) // 512 * 512)


class Block:
    __slots__ = ("addr", "size", "req", "state", "stack", "seg")

    def __init__(self, addr, size, seg):
        self.addr, self.size, self.req, self.state, self.stack, self.seg = addr, size, 0, "inactive", EMPTY, seg


class Segment:
    def __init__(self, addr, total, stream, large, stack):
        self.addr, self.total, self.stream, self.large, self.stack = addr, total, stream, large, stack
        self.blocks = [Block(addr, total, self)]


class Sim:
    """A toy CUDA caching allocator that records a torch-style trace."""

    def __init__(self, device=0, base=0x7F3A00000000, record=True, time_us=True,
                 extra_keys=True):
        self.device = device
        self.segments = []
        self.next_addr = base
        self.blocks = {}
        self.pending = []
        self.trace = []
        self.record = record
        self.time = 1_730_000_000_000_000
        self.time_us = time_us
        self.extra_keys = extra_keys

    def event(self, action, addr, size, stream, stack, oom=False):
        if not self.record:
            return
        self.time += 7
        e = {"action": action}
        e["device_free" if oom else "addr"] = addr
        e["size"] = size
        e["stream"] = stream
        if self.time_us:
            e["time_us"] = self.time
        if self.extra_keys:
            e["compile_context"] = ""
            e["user_metadata"] = ""
        e["frames"] = stack
        self.trace.append(e)

    def _segment(self, rsize, stream, stack):
        large = rsize > MiB
        if not large:
            total = 2 * MiB
        elif rsize < 10 * MiB:
            total = 20 * MiB
        else:
            total = (rsize + 2 * MiB - 1) // (2 * MiB) * (2 * MiB)
        seg = Segment(self.next_addr, total, stream, large, stack)
        self.next_addr += total + 2 * MiB
        self.segments.append(seg)
        self.event("segment_alloc", seg.addr, total, stream, stack)
        return seg

    def alloc(self, size, stack, stream=0):
        r = round_size(size)
        large = r > MiB
        best = None
        for seg in self.segments:
            if seg.stream != stream or seg.large != large:
                continue
            for b in seg.blocks:
                if b.state == "inactive" and b.size >= r and (best is None or b.size < best.size):
                    best = b
        if best is None:
            best = self._segment(r, stream, stack).blocks[0]
        seg = best.seg
        if best.size - r >= 512:
            rest = Block(best.addr + r, best.size - r, seg)
            seg.blocks.insert(seg.blocks.index(best) + 1, rest)
            best.size = r
        best.state, best.req, best.stack = "active_allocated", size, stack
        self.blocks[best.addr] = best
        self.event("alloc", best.addr, size, stream, stack)
        return best.addr

    def free(self, addr, delayed=False):
        b = self.blocks.pop(addr)
        self.event("free_requested", addr, b.req, b.seg.stream, b.stack)
        if delayed:
            b.state = "active_pending_free"
            self.pending.append(b)
        else:
            self.event("free_completed", addr, b.req, b.seg.stream, b.stack)
            self._release(b)

    def complete_pending(self):
        for b in self.pending:
            self.event("free_completed", b.addr, b.req, b.seg.stream, b.stack)
            self._release(b)
        self.pending = []

    def _release(self, b):
        b.state, b.req, b.stack = "inactive", 0, EMPTY
        seg = b.seg
        i = seg.blocks.index(b)
        if i + 1 < len(seg.blocks) and seg.blocks[i + 1].state == "inactive":
            b.size += seg.blocks.pop(i + 1).size
        if i > 0 and seg.blocks[i - 1].state == "inactive":
            prev = seg.blocks[i - 1]
            prev.size += b.size
            seg.blocks.pop(i)

    def empty_cache(self):
        keep = []
        for seg in self.segments:
            if len(seg.blocks) == 1 and seg.blocks[0].state == "inactive":
                self.event("segment_free", seg.addr, seg.total, seg.stream, seg.stack)
            else:
                keep.append(seg)
        self.segments = keep

    def oom(self, size, stack, device_free, stream=0):
        self.event("oom", device_free, size, stream, stack, oom=True)

    # --- facts for planted.json ---
    def totals(self):
        t = dict(reserved_bytes=0, allocated_bytes=0, pending_free_bytes=0, inactive_bytes=0,
                 requested_bytes=0, segments=len(self.segments), allocated_blocks=0,
                 pending_free_blocks=0, inactive_blocks=0, largest_inactive_block_bytes=0,
                 free_segments=0, free_segment_bytes=0)
        for seg in self.segments:
            t["reserved_bytes"] += seg.total
            if all(b.state == "inactive" for b in seg.blocks):
                t["free_segments"] += 1
                t["free_segment_bytes"] += seg.total
            for b in seg.blocks:
                if b.state == "active_allocated":
                    t["allocated_bytes"] += b.size
                    t["requested_bytes"] += b.req
                    t["allocated_blocks"] += 1
                elif b.state == "active_pending_free":
                    t["pending_free_bytes"] += b.size
                    t["pending_free_blocks"] += 1
                else:
                    t["inactive_bytes"] += b.size
                    t["inactive_blocks"] += 1
                    t["largest_inactive_block_bytes"] = max(t["largest_inactive_block_bytes"], b.size)
        t["rounding_waste_bytes"] = t["allocated_bytes"] - t["requested_bytes"]
        return t

    def live_by_stack(self, stack):
        bl = [b for b in self.blocks.values() if b.stack is stack]
        return dict(bytes=sum(b.size for b in bl), blocks=len(bl))

    def snapshot(self, layout="new", traces_for=None):
        segs = []
        for seg in self.segments:
            blocks = []
            for b in seg.blocks:
                if layout == "legacy":
                    bd = {"size": b.size, "state": "active_awaiting_free" if b.state == "active_pending_free" else b.state}
                    if b.state != "inactive":
                        bd["history"] = [{"addr": b.addr, "real_size": b.req, "frames": b.stack}]
                else:
                    bd = {"address": b.addr, "size": b.size, "requested_size": b.req, "state": b.state,
                          "frames": b.stack}
                blocks.append(bd)
            sd = {"device": self.device, "address": seg.addr, "total_size": seg.total,
                  "allocated_size": sum(b.size for b in seg.blocks if b.state == "active_allocated"),
                  "active_size": sum(b.size for b in seg.blocks if b.state != "inactive"),
                  "stream": seg.stream, "segment_type": "large" if seg.large else "small", "blocks": blocks}
            if layout != "legacy":
                sd["requested_size"] = sum(b.req for b in seg.blocks if b.state == "active_allocated")
                sd["segment_pool_id"] = (0, 0)
                sd["is_expandable"] = False
                sd["frames"] = seg.stack
            segs.append(sd)
        ndev = (traces_for or self.device + 1)
        traces = [[] for _ in range(ndev)]
        traces[self.device] = self.trace
        snap = {"segments": segs, "device_traces": traces}
        if layout != "legacy":
            snap["allocator_settings"] = {
                "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                "garbage_collection_threshold": 0.0, "expandable_segments": False,
                "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
                "pinned_use_cuda_host_register": False,
                "roundup_power2_divisions": {"1": 0, "2": 0, "4": 0}}
        return snap


def site(frame):
    return {"file": frame[0], "line": frame[1], "function": frame[2]}


# ----------------------------------------------------------------------------------
# Stacks used by the scenarios (innermost frame first).
# ----------------------------------------------------------------------------------
F_STEP = (TRAIN, 88, "train_step")
F_BATCH = (TRAIN, 61, "train_step")
F_LOSS = (TRAIN, 74, "train_step")
F_MOE_FWD = (PT + "/models/moe.py", 214, "forward")
F_ATTN_FWD = (PT + "/models/attention.py", 131, "forward")
F_DECODER = (PT + "/models/decoder.py", 97, "forward")
F_BUILD = (PT + "/models/build.py", 40, "build_model")

S_BATCH = py_stack(F_BATCH)
S_PARAM = py_stack(F_BUILD, native=True, extra_torch=[(TORCH + "/nn/modules/linear.py", 106, "__init__")])
S_GRAD = py_stack(F_STEP, extra_torch=[("??", 0, "torch::autograd::AccumulateGrad::apply(...)"),
                                       (TORCH + "/autograd/graph.py", 829, "_engine_run_backward"),
                                       (TORCH + "/autograd/__init__.py", 353, "backward"),
                                       (TORCH + "/_tensor.py", 648, "backward")])
S_ADAM_STATE = py_stack((TRAIN, 92, "train_step"), extra_torch=[(TORCH + "/optim/adam.py", 176, "_init_group"),
                                                                 (TORCH + "/optim/adam.py", 231, "step"),
                                                                 (TORCH + "/optim/optimizer.py", 493, "wrapper")])
S_MOE = py_stack(F_MOE_FWD, F_DECODER, F_STEP, module=("linear.py", 125))
S_ATTN = py_stack(F_ATTN_FWD, F_DECODER, F_STEP, module=("linear.py", 125))
S_LOSS = py_stack(F_LOSS, module=("loss.py", 1295),
                  extra_torch=[(TORCH + "/nn/functional.py", 3494, "cross_entropy")])
S_BUCKET = py_stack(F_STEP, extra_torch=[("??", 0, "c10d::Reducer::initialize_buckets(...)"),
                                         (TORCH + "/nn/parallel/distributed.py", 1190, "_ddp_init_helper")])


def write(path, obj, protocol=4):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


def plant(dirpath, facts):
    os.makedirs(dirpath, exist_ok=True)
    with open(os.path.join(dirpath, "planted.json"), "w") as f:
        json.dump(facts, f, indent=1, sort_keys=True)
        f.write("\n")


# ----------------------------------------------------------------------------------
# Scenarios
# ----------------------------------------------------------------------------------

def scenario_allocator(out):
    """Totals, sites, categories, fragmentation, delayed frees on a side stream,
    attribution fallbacks, --internal; written in every pickle protocol and as JSON."""
    sim = Sim()
    params = [sim.alloc(4 * MiB + 100, S_PARAM) for _ in range(6)]
    # fragmentation: many small activations, every other one freed
    acts = [sim.alloc(300 * KiB + 7, S_MOE) for _ in range(20)]
    for a in acts[::2]:
        sim.free(a)
    attn = [sim.alloc(64 * KiB, S_ATTN) for _ in range(3)]
    # no user frame at all: a torch-only Python stack, and a C++-only stack, and no stack
    s_torch = FR.stack([CPP_MALLOC, (TORCH + "/utils/data/_utils/pin_memory.py", 18, "pin_memory"),
                        (TORCH + "/utils/data/dataloader.py", 733, "__next__")])
    s_native = FR.stack([CPP_MALLOC, ("??", 0, "cublasLtMatmul workspace")])
    sim.alloc(512 * KiB, s_torch)
    sim.alloc(1536, s_native)
    sim.alloc(2048, EMPTY)
    # pithtrain's own helper: internal only with --internal
    s_helper = py_stack((PT + "/utils/buffers.py", 30, "alloc_buffer"), (PT + "/models/moe.py", 300, "dispatch"), F_STEP)
    sim.alloc(2 * MiB, s_helper)
    # delayed frees: blocks used on a side stream, freed but not yet completed
    side = [sim.alloc(256 * KiB, py_stack((PT + "/comm/overlap.py", 55, "prefetch"), F_STEP), stream=SIDE_STREAM)
            for _ in range(3)]
    for a in side[:2]:
        sim.free(a, delayed=True)
    snap = sim.snapshot()
    d = os.path.join(out, "allocator")
    for p in range(0, 6):
        write(os.path.join(d, f"snapshot_p{p}.pickle"), snap, protocol=p)
    with open(os.path.join(d, "snapshot.json"), "w") as f:
        json.dump(snap, f)
    t = sim.totals()
    plant(d, {
        "totals": t,
        "device": 0,
        "top_site": dict(site(F_MOE_FWD), **sim.live_by_stack(S_MOE), category="activations"),
        "param_site": dict(site(F_BUILD), **sim.live_by_stack(S_PARAM), category="parameters"),
        "attn_site": dict(site(F_ATTN_FWD), **sim.live_by_stack(S_ATTN)),
        "torch_fallback_site": dict(site((TORCH + "/utils/data/_utils/pin_memory.py", 18, "pin_memory")), origin="torch"),
        "native_site": dict(site(("??", 0, "cublasLtMatmul workspace")), origin="native"),
        "helper_site": site((PT + "/utils/buffers.py", 30, "alloc_buffer")),
        "helper_site_internal": site((PT + "/models/moe.py", 300, "dispatch")),
        "helper_glob": "pithtrain/utils/*",
        "pending": {"stream": SIDE_STREAM, "blocks": 2, "bytes": sum(b.req for b in sim.pending)},
        "pending_block_bytes": sum(b.size for b in sim.pending),
        "streams": sorted({s.stream for s in sim.segments}),
        "trace_counts": count_actions(sim.trace),
    })


def count_actions(trace):
    c = {}
    for e in trace:
        c[e["action"]] = c.get(e["action"], 0) + 1
    return c


def training(sim, steps, layers=4, act=8 * MiB, retain_graph=False, container=False, gc_every=0,
             optimizer=True, params=4, param_size=4 * MiB, oom_at=None, device_free=0):
    """Simulate a training loop; returns what it planted."""
    facts = {"steps": steps}
    p = [sim.alloc(param_size, S_PARAM) for _ in range(params)]
    grads = []
    kept_losses, kept_acts, feats, cyc = [], [], [], []
    opt = []
    s_feat = py_stack((TRAIN, 81, "train_step"))
    s_cyc = py_stack((PT + "/utils/metrics.py", 44, "record"), (TRAIN, 84, "train_step"))
    for step in range(1, steps + 1):
        x = sim.alloc(2 * MiB, S_BATCH)
        acts = []
        for l in range(layers):
            acts.append(sim.alloc(act, S_MOE))
            acts.append(sim.alloc(act // 4, S_ATTN))
        if oom_at == step:
            sim.oom(4 * act, S_MOE, device_free)
            facts["oom_step"] = step
            return facts
        loss = sim.alloc(4 * KiB, S_LOSS)
        if container:
            feats.append(sim.alloc(256 * KiB, s_feat))
        if gc_every:
            cyc.append(sim.alloc(512 * KiB, s_cyc))
        # backward: gradients, then activations freed in reverse
        if not grads:
            grads = [sim.alloc(param_size, S_GRAD) for _ in range(params)]
        if retain_graph:
            kept_acts.extend(acts)
            kept_losses.append(loss)
        else:
            for a in reversed(acts):
                sim.free(a)
            sim.free(loss)
        if optimizer and not opt:
            opt = [sim.alloc(param_size, S_ADAM_STATE) for _ in range(2 * params)]
            facts["optimizer_step"] = step
        sim.free(x)
        if gc_every and step % gc_every == 0:
            for c in cyc:
                sim.free(c)
            cyc = []
    facts.update(params=p, grads=grads, opt=opt, feats=feats)
    return facts


def scenario_oom(out):
    sim = Sim()
    f = training(sim, steps=3, oom_at=3, device_free=300 * MiB)
    d = os.path.join(out, "oom")
    write(os.path.join(d, "snapshot.pickle"), sim.snapshot(), protocol=4)
    live = {}
    for b in sim.blocks.values():
        key = id(b.stack)
        live[key] = live.get(key, 0) + b.req
    oom = [e for e in sim.trace if e["action"] == "oom"][0]
    plant(d, {
        "oom": {"size_bytes": oom["size"], "device_free_bytes": oom["device_free"], "site": site(F_MOE_FWD),
                "event_index": sim.trace.index(oom)},
        "top_holder": dict(site(F_MOE_FWD), bytes=sum(b.req for b in sim.blocks.values() if b.stack is S_MOE)),
        "live_before_requested": sum(b.req for b in sim.blocks.values()),
        "totals": sim.totals(),
    })


def scenario_retained_graph(out):
    sim = Sim()
    f = training(sim, steps=6, retain_graph=True)
    d = os.path.join(out, "retained_graph")
    write(os.path.join(d, "snapshot.pickle"), sim.snapshot(), protocol=5)
    plant(d, {"steps": 6, "pattern": "retained_autograd_graph",
              "activation_sites": [site(F_MOE_FWD), site(F_ATTN_FWD)],
              "loss_site": site(F_LOSS),
              "absent": ["python_reference_cycles", "activation_checkpointing"]})


def scenario_growing_container(out):
    sim = Sim()
    f = training(sim, steps=8, container=True)
    d = os.path.join(out, "growing_container")
    write(os.path.join(d, "snapshot.pickle"), sim.snapshot(), protocol=4)
    plant(d, {"steps": 8, "pattern": "growing_python_container", "site": site((TRAIN, 81, "train_step")),
              "blocks_live": len(f["feats"]), "block_bytes": round_size(256 * KiB),
              "absent": ["retained_autograd_graph", "python_reference_cycles"]})


def scenario_optimizer(out):
    sim = Sim()
    f = training(sim, steps=5)
    d = os.path.join(out, "optimizer_first_step")
    write(os.path.join(d, "snapshot.pickle"), sim.snapshot(), protocol=3)
    opt_bytes = sum(sim.blocks[a].size for a in f["opt"])
    plant(d, {"pattern": "first_step_optimizer_state", "optimizer_bytes": opt_bytes,
              "optimizer_step": f["optimizer_step"],
              "also": "activation_checkpointing",
              # all forward activations (4 layers of moe + attention) and the loss
              "activation_at_peak_bytes": 4 * (8 * MiB + 2 * MiB) + 4 * KiB,
              "absent": ["retained_autograd_graph", "growing_python_container", "python_reference_cycles"]})


def scenario_reference_cycles(out):
    sim = Sim()
    training(sim, steps=9, gc_every=3)
    d = os.path.join(out, "reference_cycles")
    write(os.path.join(d, "snapshot.pickle"), sim.snapshot(), protocol=4)
    plant(d, {"pattern": "python_reference_cycles", "bursts": 3, "burst_blocks": 2,
              "burst_bytes": 2 * 512 * KiB,
              "site": site((PT + "/utils/metrics.py", 44, "record")),
              "absent": ["retained_autograd_graph", "growing_python_container"]})


def scenario_ddp(out):
    sim = Sim(record=False)
    params = 8
    ps = [sim.alloc(16 * MiB, S_PARAM) for _ in range(params)]
    gs = [sim.alloc(16 * MiB, S_GRAD) for _ in range(params)]
    os_ = [sim.alloc(16 * MiB, S_ADAM_STATE) for _ in range(2 * params)]
    bk = [sim.alloc(25 * MiB, S_BUCKET) for _ in range(5)]
    sim.alloc(8 * MiB, S_BATCH)
    d = os.path.join(out, "ddp")
    snap = sim.snapshot()
    snap["device_traces"] = [[]]
    write(os.path.join(d, "snapshot.pickle"), snap, protocol=4)
    plant(d, {"pattern": "ddp_replication",
              "parameters": sum(sim.blocks[a].size for a in ps),
              "gradients": sum(sim.blocks[a].size for a in gs),
              "optimizer_state": sum(sim.blocks[a].size for a in os_),
              "communication": sum(sim.blocks[a].size for a in bk)})


def scenario_leak_diff(out):
    """Two snapshots of one run, 5 and 50 steps in: one site leaks a block per step,
    one buffer is resized once (one-time growth), one cache shrinks."""
    d = os.path.join(out, "leak_diff")
    s_leak = py_stack((TRAIN, 77, "train_step"))
    s_buf = py_stack((PT + "/comm/buffers.py", 12, "ensure_capacity"), F_STEP)
    s_cache = py_stack((PT + "/data/cache.py", 33, "put"), F_STEP)
    facts = {}
    for steps in (5, 50):
        sim = Sim(record=False)
        [sim.alloc(8 * MiB, S_PARAM) for _ in range(4)]
        [sim.alloc(600 * KiB, s_leak) for _ in range(steps)]
        sim.alloc((4 if steps == 5 else 12) * MiB, s_buf)
        [sim.alloc(1 * MiB, s_cache) for _ in range(6 if steps == 5 else 2)]
        write(os.path.join(d, f"snapshot_step_{steps:03d}.pickle"), sim.snapshot(), protocol=4)
        facts[str(steps)] = {"leak": sim.live_by_stack(s_leak), "buffer": sim.live_by_stack(s_buf),
                             "cache": sim.live_by_stack(s_cache), "totals": sim.totals()}
    plant(d, {"leak_site": site((TRAIN, 77, "train_step")), "buffer_site": site((PT + "/comm/buffers.py", 12, "ensure_capacity")),
              "cache_site": site((PT + "/data/cache.py", 33, "put")), "param_site": site(F_BUILD),
              "before": facts["5"], "after": facts["50"], "pattern": "growing_python_container"})


def scenario_multi_rank(out):
    """Four ranks with different file-name styles; rank 3 routes more tokens to its experts."""
    d = os.path.join(out, "multi_rank")
    names = {0: "snapshot-rank00000.pickle", 1: "memory_snapshot_rank1_step0.pickle",
             2: "rank2_memory_snapshot.pickle", 3: "snapshot-rank00003.pickle"}
    facts = {"ranks": {}, "standout": 3, "standout_site": site(F_MOE_FWD), "skipped": ["planted.json", "summary.pickle"]}
    for r, name in names.items():
        sim = Sim(device=r % 2)
        training(sim, steps=2, act=(12 if r == 3 else 6) * MiB, optimizer=False)
        [sim.alloc((24 if r == 3 else 8) * MiB, S_MOE) for _ in range(3)]
        write(os.path.join(d, name), sim.snapshot(), protocol=4)
        facts["ranks"][name] = {"rank": r, "totals": sim.totals(), "device": r % 2}
    # a snapshot without a rank in its name is listed and skipped
    sim = Sim()
    sim.alloc(MiB, S_BATCH)
    write(os.path.join(d, "summary.pickle"), sim.snapshot(), protocol=4)
    plant(d, facts)


def scenario_legacy(out):
    """The old layout: block history instead of frames, no requested_size, no time_us,
    no allocator_settings, 'active_awaiting_free', protocol 2."""
    sim = Sim(time_us=False, extra_keys=False)
    a = [sim.alloc(3 * MiB + 5, S_MOE) for _ in range(3)]
    b = sim.alloc(700 * KiB, S_ATTN, stream=SIDE_STREAM)
    sim.free(b, delayed=True)
    sim.free(a[1])
    d = os.path.join(out, "legacy")
    write(os.path.join(d, "snapshot.pickle"), sim.snapshot(layout="legacy"), protocol=2)
    plant(d, {"totals": sim.totals(), "top_site": dict(site(F_MOE_FWD), **sim.live_by_stack(S_MOE))})


def scenario_multi_device(out):
    """Segments on device 1; device_traces has two lists, only the second has events."""
    sim = Sim(device=1)
    training(sim, steps=2, optimizer=False)
    d = os.path.join(out, "multi_device")
    write(os.path.join(d, "snapshot.pickle"), sim.snapshot(traces_for=2), protocol=4)
    plant(d, {"device": 1, "totals": sim.totals(), "events": len(sim.trace)})


def scenario_long_trace(out):
    """A longer trace (several APPENDS batches of 1000 entries, protocol-4 FRAMEs
    inside entries) for the reader's split read; also written with protocol 2."""
    sim = Sim()
    training(sim, steps=250, layers=2, act=2 * MiB)
    d = os.path.join(out, "long_trace")
    snap = sim.snapshot()
    write(os.path.join(d, "snapshot_p4.pickle"), snap, protocol=4)
    write(os.path.join(d, "snapshot_p2.pickle"), snap, protocol=2)
    plant(d, {"events": len(sim.trace), "counts": count_actions(sim.trace), "totals": sim.totals()})


def scenario_refused(out):
    d = os.path.join(out, "refused")
    os.makedirs(d, exist_ok=True)

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned-by-pickle",))

    with open(os.path.join(d, "os_system.pickle"), "wb") as f:
        pickle.dump({"segments": [], "device_traces": [[Evil()]]}, f, protocol=4)
    with open(os.path.join(d, "os_system_p0.pickle"), "wb") as f:
        pickle.dump(Evil(), f, protocol=0)
    good = open(os.path.join(out, "allocator", "snapshot_p4.pickle"), "rb").read()
    with open(os.path.join(d, "truncated.pickle"), "wb") as f:
        f.write(good[: len(good) // 2])
    bad = {"segments": [{"device": 0, "address": 1, "total_size": "lots", "stream": 0, "blocks": []}],
           "device_traces": []}
    write(os.path.join(d, "wrong_types.pickle"), bad)
    write(os.path.join(d, "not_snapshot.pickle"), {"hello": [1, 2, 3]})
    with open(os.path.join(d, "garbage.pickle"), "wb") as f:
        f.write(b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\xff\xfe")
    with open(os.path.join(d, "truncated.json"), "w") as f:
        f.write('{"segments": [{"device": 0, "address": 1')
    plant(d, {"refused": {"os_system.pickle": "STACK_GLOBAL", "os_system_p0.pickle": "GLOBAL"},
              "marker": "pwned-by-pickle", "truncated_at": len(good) // 2})


def generate_fixtures(out):
    scenario_allocator(out)
    scenario_oom(out)
    scenario_retained_graph(out)
    scenario_growing_container(out)
    scenario_optimizer(out)
    scenario_reference_cycles(out)
    scenario_ddp(out)
    scenario_leak_diff(out)
    scenario_multi_rank(out)
    scenario_legacy(out)
    scenario_multi_device(out)
    scenario_long_trace(out)
    scenario_refused(out)


def generate_bench(path, events, seed=0):
    """A long training trace: about `events` trace entries, deep shared stacks."""
    random.seed(seed)
    sim = Sim()
    # Deep, realistic stacks: many distinct call sites through a few dozen modules.
    stacks = []
    for m in range(48):
        user = [(PT + f"/models/layer_{m % 12}.py", 100 + m, "forward"), F_DECODER, F_STEP]
        for depth in range(3):
            stacks.append(py_stack(*user, module=("linear.py", 125 + depth)))
    params = [sim.alloc(4 * MiB, S_PARAM) for _ in range(64)]
    step = 0
    while len(sim.trace) < events:
        step += 1
        x = sim.alloc(2 * MiB, S_BATCH)
        live = []
        for i in range(400):
            live.append(sim.alloc(random.choice((64 * KiB, 256 * KiB, 2 * MiB, 6 * MiB)), stacks[i % len(stacks)]))
            if len(live) > 40:
                sim.free(live.pop(random.randrange(len(live))))
        for a in live:
            sim.free(a)
        sim.free(x)
        if len(sim.trace) // 50000 != (len(sim.trace) - 1600) // 50000:
            print(f"  {len(sim.trace)} events", file=sys.stderr)
    with open(path, "wb") as f:
        pickle.dump(sim.snapshot(), f, protocol=4)
    return len(sim.trace), step


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default="fixtures/snapshots")
    ap.add_argument("--bench", metavar="FILE", help="write one large snapshot for the benchmark")
    ap.add_argument("--events", type=int, default=6_000_000)
    a = ap.parse_args()
    if a.bench:
        n, steps = generate_bench(a.bench, a.events)
        print(json.dumps({"events": n, "steps": steps, "bytes": os.path.getsize(a.bench)}))
        return
    generate_fixtures(a.out)


if __name__ == "__main__":
    main()
