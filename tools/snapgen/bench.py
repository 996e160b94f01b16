"""One large snapshot for bench/snapshot: a long pithtrain-like run recorded the way
the recipe records it (``_record_memory_history(max_entries=...)``: context "all",
stacks "all"), written with ``pickle.dump``.

The run is MoE training steps over many decoder layers: attention and expert
activations (the experts through custom autograd Functions), all-to-all buffers on
the communication stream (delayed frees), backward on the engine's thread, the
parameters' gradients and the optimizer state made in the first step, torch 2.9's
``Optimizer.step`` annotations around each optimizer step. Steps are
simulated until the file would reach the target size (bytes per entry are measured
on the first steps).
"""

import os
import pickle
import random

from . import graph
from . import program as P
from .allocator import MiB, Process
from .frames import py
from .scenarios import COMM_STREAM


def layer_sites(n):
    """Per-layer call sites: the same code for every layer (pithtrain's layers share
    it), so stacks repeat with fresh traceback objects, as in a real run; a few
    layer types differ (dense layers, the MoE layers' shared expert)."""
    out = []
    for kind in range(n):
        line = 170 + 3 * (kind % 4)
        attn = P.CallSite(py=P.fwd(P.LINEAR_FWD, *P.MODULE_CALL, py(P.ATTN_FWD.filename, line, "forward"),
                                   *P.MODULE_CALL), cpp=P.ATTN_PROJ.cpp,
                          site=P.site(py(P.ATTN_FWD.filename, line, "forward")), category="activations",
                          free_py=P.STEP_FREE)
        out.append(attn)
    return out


def run(proc, steps, layers, rng, on_step=None):
    a = proc.devices[0]
    params = [a.malloc(64 * MiB, P.EXPERT_WEIGHT) for _ in range(16)]
    attn_sites = layer_sites(4)
    grads, opt = [], []
    for step in range(steps):
        a.clock.advance(50_000)
        x = a.malloc(8 * MiB, P.BATCH)
        acts = []
        for layer in range(layers):
            acts.append(a.malloc(rng.choice((4, 6, 8)) * MiB, attn_sites[layer % 4]))
            recv = a.malloc(2 * MiB, P.A2A_RECV)
            a.record_stream(recv, COMM_STREAM)
            acts.append(recv)
            acts.append(a.malloc(rng.choice((8, 12, 16)) * MiB, P.EXPERT_GEMM))
            acts.append(a.malloc(rng.choice((4, 8)) * MiB, P.SILU_OUT))
            tmp = a.malloc(256 * 1024, P.CUBLAS)
            a.free(tmp, P.CUBLAS)
            a.clock.advance(800)
        loss = a.malloc(4096, P.LOSS)
        for layer in range(layers):
            t = a.malloc(4 * MiB, P.MM_BACKWARD)
            g = a.malloc(4 * MiB, P.SILU_BWD)
            a.clock.advance(1_600)
            a.free(t)
            a.free(g)
            for _ in range(4):
                a.free(acts.pop(), P.ATTN_PROJ)
        a.free(loss, P.LOSS)
        a.stream_done(COMM_STREAM)
        if not grads:
            grads = [a.malloc(64 * MiB, P.ACCUM) for _ in params]
        a.annotate("Optimizer.step#AdamW.step", "START")
        if not opt:
            opt = [a.malloc(64 * MiB, P.ADAM_STATE) for _ in params for _ in range(2)]
        a.annotate("Optimizer.step#AdamW.step", "END")
        a.free(x, P.BATCH)
        if on_step and on_step(step):
            break
    return a


def generate(path, target_bytes, protocol=4, seed=0, layers=48):
    rng = random.Random(seed)
    # Measure bytes per trace entry on a short run of the same program.
    probe = Process(capacity=1 << 50)
    probe.record_memory_history(max_entries=1 << 40)
    pa = run(probe, 6, layers, random.Random(seed))
    per_entry = len(pickle.dumps(graph.build(probe.devices), protocol=protocol)) / len(pa.trace())
    want = int(target_bytes / per_entry)
    proc = Process(capacity=1 << 50)
    proc.record_memory_history(max_entries=1 << 40)
    a = run(proc, 1 << 30, layers, rng, on_step=lambda s: len(proc.devices[0].ring) >= want)
    snap = graph.build(proc.devices)
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=protocol)
    live = sum(b.size for _, bl in a.segments() for b in bl if b.allocated)
    return {"events": len(a.trace()), "bytes": os.path.getsize(path), "protocol": protocol,
            "allocated_bytes": live}
