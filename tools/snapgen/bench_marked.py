"""One large marked step snapshot for bench/report: the profiled step of one pipeline rank,
recorded as the recipe records it (history started at the profiled step, context "all",
stacks "python"; every chunk call of ``DualPipeV.step`` inside a ``record_function`` range
named as pithtrain's memory estimator names the event, and two detail layers' stages inside
the forwards, named as pithtrain's NVTX ranges name them: ``layer02.stage1_f``), written
with ``pickle.dump``.

The schedule is ``scenarios_schedule.Step``'s (DualPipeV's eight steps as pithtrain runs them
for ``pp_rank`` of ``pp_size`` with ``num_chunks`` micro-batches); each chunk call runs
``layers`` decoder layers, each saving its attention and expert activations for the backward
and making short-lived temporaries (cuBLAS workspaces, the expert GEMMs' scratch). The
number of temporaries per layer is chosen so that the file reaches the target size (bytes
per entry measured on a short probe of the same program).
"""

import os
import pickle

from . import graph
from . import program as P
from .allocator import Process
from .scenarios_schedule import COMM, DEFERRED, GRAD, P2P_RECV, SAVED, TEMP, Step

PARAM_MIB = 64


class BenchStep(Step):
    """`Step` with `layers` decoder layers per chunk call and `temps` temporaries per layer."""

    def __init__(self, a, pp_rank, pp_size, layers, temps, detail=(2, 3)):
        super().__init__(a, pp_rank, pp_size)
        self.layers, self.temps, self.detail = layers, temps, detail

    def _temporaries(self, site):
        for _ in range(self.temps):
            self.free(self.alloc(1, site, TEMP))

    def _fwd(self, phase):
        cid = self.fwd_id[phase]
        self.fwd_id[phase] += 1
        recv = self.alloc(1, P2P_RECV, COMM)
        held = []
        for layer in range(self.layers):
            stage = f"layer{layer:02d}.stage1_f" if layer in self.detail else None
            if stage:
                self.mark(stage, "START")
            held.append(self.alloc(2, P.ATTN_PROJ, SAVED))
            self._temporaries(P.CUBLAS)
            if stage:
                self.mark(stage, "END")
            held.append(self.alloc(4, P.EXPERT_GEMM, SAVED))
            self._temporaries(P.SILU_OUT)
        self.free(recv)
        self.saved[(phase, cid)] = held
        return cid

    def _bwd(self, phase, zb):
        cid = self.bwd_id[phase]
        self.bwd_id[phase] += 1
        held = self.saved.pop((phase, cid), [])
        for layer in range(self.layers):
            for h in held[2 * (self.layers - 1 - layer): 2 * (self.layers - layer)]:
                self.free(h)
            self._temporaries(P.MM_BACKWARD)
            if zb:
                self.store.append(self.alloc(1, P.SILU_BWD, DEFERRED))
        if not zb and phase not in self.grads:
            self.grads.add(phase)
            self.alloc(8, P.ACCUM, GRAD)
        return cid

    def weight(self, prefix, step):
        self.begin(f"{prefix} weight_chunk", step, "weight_chunk")
        for _ in range(min(self.layers, len(self.store))):
            self.free(self.store.pop(0))
        if 0 not in self.grads:
            self.grads.add(0)
            self.alloc(8, P.ACCUM, GRAD)
        self.end()


def run(pp_rank, pp_size, num_chunks, layers, temps):
    proc = Process()
    a = proc.devices[0]
    [a.malloc(PARAM_MIB << 20, P.EXPERT_WEIGHT) for _ in range(8)]
    proc.record_memory_history(max_entries=1 << 40, stacks="python")
    s = BenchStep(a, pp_rank, pp_size, layers, temps)
    s.base = 8 * (PARAM_MIB << 20)
    s.run(num_chunks)
    return proc, s


def generate(path, target_bytes, pp_rank=1, pp_size=2, num_chunks=4, layers=24, protocol=4):
    probe, _ = run(pp_rank, pp_size, num_chunks, layers, 4)
    entries = len(probe.devices[0].trace())
    per_entry = len(pickle.dumps(graph.build(probe.devices), protocol=protocol)) / entries
    # Entries grow with the temporaries by 2 per temporary per layer per chunk call.
    per_temp = (entries - len(run(pp_rank, pp_size, num_chunks, layers, 0)[0].devices[0].trace())) / 4
    temps = max(0, round((target_bytes / per_entry - entries) / per_temp) + 4)
    proc, s = run(pp_rank, pp_size, num_chunks, layers, temps)
    with open(path, "wb") as f:
        pickle.dump(graph.build(proc.devices), f, protocol=protocol)
    return {"events": len(proc.devices[0].trace()), "bytes": os.path.getsize(path), "pp_rank": pp_rank,
            "pp_size": pp_size, "num_chunks": num_chunks, "layers": layers, "temporaries_per_layer": temps,
            "schedule_events": [e["name"] for e in s.events]}
