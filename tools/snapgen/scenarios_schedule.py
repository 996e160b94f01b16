"""A marked DualPipeV step: the profiled step of one pipeline rank, recorded the way
`instrument add`'s recipe records it (history started at the profiled step, after the
model's parameters were on the GPU, so they are the snapshot's unrecorded static state),
with every chunk call of ``DualPipeV.step`` inside a ``record_function`` range named as
pithtrain's memory estimator names the event (tools/memory_estimator/schedule_simulator.py
at 889a408: ``S3.i1 bwd(p1,zb=True) c1``, ``S4.i0.last_rank fwd(p0) c2``, ...) and one detail
layer's stage ranges inside the forwards (``layer2.stage1_f``).

The schedule is DualPipeV's eight steps as pithtrain runs them for ``pp_rank`` of
``pp_size`` with ``num_chunks`` micro-batches. What each chunk call allocates and frees is
the program's own, and so is the truth planted per event: the live bytes (requested, as the
trace records them) at its start and end, the peak inside it and the allocation that made
it, and what was allocated and freed inside it by category, in the categories of the
schedule conventions table.
"""

from . import program as P
from .allocator import MiB, Process
from .frames import CallSite, PITH, op, py

# A P2P receive buffer of DualPipeV (dualpipe/comm.py), freed when the chunk is done with it.
# (The generic reader names it by its first user frame and, knowing no pithtrain file, calls
# it "other"; the schedule conventions table calls dualpipe/comm.py communication buffers.)
_RECV_FRAMES = [py(f"{PITH}/dualpipe/comm.py", 30, "<listcomp>"),
                py(f"{PITH}/dualpipe/dualpipev.py", 410, "_recv_forward")] + P.FWD[2:]
P2P_RECV = CallSite(py=_RECV_FRAMES, cpp=op("empty", binding=False), site=P.site(_RECV_FRAMES[0]),
                    category="other")

COMM = "communication buffers"
SAVED = "saved activations"
TEMP = "temporaries"
GRAD = "gradients"
DEFERRED = "deferred weight gradients"

ACT_MIB = {"attn": 2, "experts": 8}
RECV_MIB = 1
TEMP_MIB = 4
WGRAD_MIB = 3
GRAD_MIB = 6
PARAM_MIB = 4


class Step:
    """Runs the schedule on allocator `a`, marking it and keeping the truth per event."""

    def __init__(self, a, pp_rank, pp_size, detail_layer=2):
        self.a = a
        self.pp_rank, self.pp_size = pp_rank, pp_size
        self.last = pp_rank == pp_size - 1
        self.detail_layer = detail_layer
        self.live = 0  # requested bytes live since history began (the params come on top)
        self.base = 0
        self.fwd_id = [0, 0]
        self.bwd_id = [0, 0]
        self.saved = {}  # (phase, chunk) -> blocks held for the backward
        self.store = []  # the WeightGradStore's deferred tensors
        self.grads = set()  # modules whose .grad exists
        self.events = []
        self.cur = None
        self.ranges = []

    # --- the allocator, with the truth kept beside it
    def alloc(self, mib, site, category):
        b = self.a.malloc(mib * MiB, site)
        self.live += mib * MiB
        e = self.cur
        if e is not None:
            e["allocated"][category] = e["allocated"].get(category, 0) + mib * MiB
            total = self.base + self.live
            if total > e["peak_bytes"]:
                e["peak_bytes"] = total
                e["peak_by"] = {"bytes": mib * MiB, "category": category}
        return (b, mib, category)

    def free(self, held, category=None):
        b, mib, born = held
        self.a.free(b)
        self.live -= mib * MiB
        if self.cur is not None:
            c = category or born
            self.cur["freed"][c] = self.cur["freed"].get(c, 0) + mib * MiB

    def mark(self, name, stage):
        self.a.annotate(name, stage)

    def begin(self, name, step, op_):
        assert self.cur is None
        self.mark(name, "START")
        live = self.base + self.live
        self.cur = {"name": name, "step": step, "op": op_, "live_start_bytes": live, "peak_bytes": live,
                    "peak_by": None, "allocated": {}, "freed": {}}

    def end(self):
        self.cur["live_end_bytes"] = self.base + self.live
        self.mark(self.cur["name"], "END")
        self.events.append(self.cur)
        self.cur = None

    # --- what a chunk call does
    def _fwd(self, phase):
        cid = self.fwd_id[phase]
        self.fwd_id[phase] += 1
        recv = self.alloc(RECV_MIB, P2P_RECV, COMM)
        held = []
        detail = phase == 0 and cid == 0
        if detail:
            self.mark(f"layer{self.detail_layer}.stage1_f", "START")
        held.append(self.alloc(ACT_MIB["attn"], P.ATTN_PROJ, SAVED))
        if detail:
            self.mark(f"layer{self.detail_layer}.stage1_f", "END")
        held.append(self.alloc(ACT_MIB["experts"], P.EXPERT_GEMM, SAVED))
        self.free(recv)
        self.saved[(phase, cid)] = held
        return cid

    def _bwd(self, phase, zb):
        cid = self.bwd_id[phase]
        self.bwd_id[phase] += 1
        for h in self.saved.pop((phase, cid), []):
            self.free(h)
        t = self.alloc(TEMP_MIB, P.MM_BACKWARD, TEMP)
        self.free(t)
        if zb:
            self.store.append(self.alloc(WGRAD_MIB, P.SILU_BWD, DEFERRED))
        elif phase not in self.grads:
            self.grads.add(phase)
            self.alloc(GRAD_MIB, P.ACCUM, GRAD)
        return cid

    def fwd(self, prefix, phase, step):
        cid = self.fwd_id[phase]
        self.begin(f"{prefix} fwd(p{phase}) c{cid}", step, "fwd")
        self._fwd(phase)
        self.end()

    def bwd(self, prefix, phase, zb, step):
        cid = self.bwd_id[phase]
        self.begin(f"{prefix} bwd(p{phase},zb={zb}) c{cid}", step, "bwd")
        self._bwd(phase, zb)
        self.end()

    def fwd_bwd(self, prefix, p0, p1, step):
        f, b = self.fwd_id[p0], self.bwd_id[p1]
        self.begin(f"{prefix} fwd_bwd(p{p0},p{p1}) fc{f}/bc{b}", step, "fwd_bwd")
        self._fwd(p0)
        self._bwd(p1, False)
        self.end()

    def weight(self, prefix, step):
        self.begin(f"{prefix} weight_chunk", step, "weight_chunk")
        if self.store:
            self.free(self.store.pop(0))
        if 0 not in self.grads:
            self.grads.add(0)
            self.alloc(GRAD_MIB, P.ACCUM, GRAD)
        self.end()

    def run(self, num_chunks):
        """DualPipeV.step's eight steps (pithtrain 889a408), as the estimator names them."""
        r, n = self.pp_rank, self.pp_size
        for i in range((n - r - 1) * 2):
            self.fwd(f"S1.i{i}", 0, 1)
        for i in range(r + 1):
            self.fwd(f"S2.i{i}", 0, 2)
            self.fwd(f"S2.i{i}", 1, 2)
        for i in range(n - r - 1):
            self.bwd(f"S3.i{i}", 1, True, 3)
            self.weight(f"S3.i{i}", 3)
            self.fwd(f"S3.i{i}", 1, 3)
        for i in range(num_chunks - n * 2 + r + 1):
            if i == 0 and self.last:
                self.fwd("S4.i0.last_rank", 0, 4)
                self.bwd("S4.i0.last_rank", 1, False, 4)
            else:
                self.fwd_bwd(f"S4.i{i}", 0, 1, 4)
            self.fwd_bwd(f"S4.i{i}", 1, 0, 4)
        for i in range(n - r - 1):
            self.bwd(f"S5.i{i}", 1, False, 5)
            self.fwd_bwd(f"S5.i{i}", 1, 0, 5)
        zb = False
        for i in range(r + 1):
            if i == (r + 1) // 2 and r % 2 == 1:
                zb = True
            self.bwd(f"S6.i{i}", 1, zb, 6)
            if i == (r + 1) // 2 and r % 2 == 0:
                zb = True
            self.bwd(f"S6.i{i}", 0, zb, 6)
        for i in range(n - r - 1):
            self.weight(f"S7.i{i}", 7)
            self.bwd(f"S7.i{i}", 0, True, 7)
        for i in range(r + 1):
            self.weight(f"S8.i{i}", 8)


def scenario_pipeline_step(out):
    """Rank 14 of a pp=2 run (pp rank 1, the last: its first steady-state iteration runs
    forward and backward apart, `S4.i0.last_rank`), 6 micro-batches, one profiled step."""
    proc = Process()
    a = proc.devices[0]
    params = [a.malloc(PARAM_MIB * MiB, P.EXPERT_WEIGHT) for _ in range(3)]
    proc.record_memory_history(max_entries=1_048_576, stacks="python")
    s = Step(a, pp_rank=1, pp_size=2)
    s.base = sum(PARAM_MIB * MiB for _ in params)
    s.run(num_chunks=6)
    f = out.take("pipeline_step", "snapshot.pickle", proc)[a.device]
    f["schedule"] = {"pp_rank": 1, "pp_size": 2, "num_chunks": 6, "static_bytes": s.base,
                     "events": [dict(e, allocated=sorted_amounts(e["allocated"]), freed=sorted_amounts(e["freed"]))
                                for e in s.events]}
    out.plant("pipeline_step", f)


def scenario_pipeline_oom(out):
    """Out of memory inside a chunk call: pp rank 1 of pp=4 on a device too small for its
    warm-up forwards. The range of the event it died in was opened and never closed."""
    proc = Process(capacity=80 * MiB)
    a = proc.devices[0]
    [a.malloc(PARAM_MIB * MiB, P.EXPERT_WEIGHT) for _ in range(2)]
    proc.record_memory_history(max_entries=1_048_576, stacks="python")
    s = Step(a, pp_rank=1, pp_size=4)
    s.base = 2 * PARAM_MIB * MiB
    from .allocator import OutOfMemory
    died = None
    try:
        s.run(num_chunks=8)
    except OutOfMemory:
        died = s.cur["name"]
    assert died is not None, "the capacity lets the step finish"
    f = out.take("pipeline_oom", "snapshot.pickle", proc)[a.device]
    f["schedule"] = {"died_inside": died, "closed_events": len(s.events)}
    out.plant("pipeline_oom", f)


def sorted_amounts(m):
    return [{"name": k, "bytes": v} for k, v in sorted(m.items(), key=lambda kv: (-kv[1], kv[0])) if v > 0]


ALL = [scenario_pipeline_step, scenario_pipeline_oom]
