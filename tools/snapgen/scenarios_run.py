"""Scenarios of the files people have: a run on Windows (backslash paths, an installed
library between torch and the user's code, stacks="python"), history that started
after the model was on the GPU, steps the run marks itself (torch >= 2.6's
``external_annotations``, an optimizer that allocates in every step) next to
benchmark repetitions that look like steps, expandable segments, and the DualPipeV
schedule marked event by event (memory-prints group 8).
"""

import os
import re

from . import program as P
from .allocator import KiB, MiB, GiB, OutOfMemory, Process
from .expandable import ExpandableAllocator
from .forms import encode, write
from .frames import CallSite, op, py
from .scenarios import freed_by, oom_state

# --- a transformers fine-tune on Windows (torch 2.9, uv's Python, a .venv) ----------

WIN = "C:\\research\\optft"
WSITE = WIN + "\\.venv\\Lib\\site-packages"
WTORCH = WSITE + "\\torch"
WSTDLIB = "C:\\Users\\me\\AppData\\Roaming\\uv\\python\\cpython-3.10.19-windows-x86_64-none\\lib"
W_MODULE = WTORCH + "\\nn\\modules\\module.py"
W_CALL = [py(W_MODULE, 1786, "_call_impl"), py(W_MODULE, 1775, "_wrapped_call_impl")]
W_OPT = WSITE + "\\transformers\\models\\opt\\modeling_opt.py"
W_MAIN = py(WIN + "\\train.py", 118, "<module>")
W_SETUP = py(WIN + "\\train.py", 40, "main")
W_STEP = py(WIN + "\\train.py", 63, "train_step")
W_LOOP = [W_STEP, py(WIN + "\\train.py", 102, "main"), W_MAIN]
W_TO = [py(W_MODULE, 1357, "convert"), py(W_MODULE, 957, "_apply"), py(W_MODULE, 930, "_apply"),
        py(W_MODULE, 930, "_apply"), py(W_MODULE, 1371, "to"),
        py(WSITE + "\\transformers\\modeling_utils.py", 4343, "to")]
W_THREAD = [py(WSTDLIB + "\\threading.py", 953, "run"), py(WSTDLIB + "\\threading.py", 1016, "_bootstrap_inner"),
            py(WSTDLIB + "\\threading.py", 973, "_bootstrap")]
W_ADAMW = WTORCH + "\\optim\\adamw.py"
W_OPTIMIZER = py(WTORCH + "\\optim\\optimizer.py", 516, "wrapper")
W_OPT_STEP = py(WIN + "\\train.py", 70, "train_step")


def wsite(frames, category, **kw):
    """A call site on Windows: (site, library) as a memory engineer names them."""
    s, lib = P.attribution_with(frames, torch_prefix=WTORCH + "\\", library_dir="\\site-packages\\")
    return CallSite(py=frames, cpp=kw.pop("cpp", op("empty", binding=False)), site=s, library=lib,
                    category=category, **kw)


# model.to("cuda"): Module._apply -> convert, through transformers' PreTrainedModel.to
W_PARAM = wsite(W_TO + [W_SETUP, W_MAIN], "parameters")
# the forward of OPT's decoder layers (transformers), from the user's train_step
W_ACT = wsite([py(WTORCH + "\\nn\\modules\\linear.py", 134, "forward")] + W_CALL
              + [py(W_OPT, 160, "forward")] + W_CALL + W_LOOP, "activations")
W_ATTN = wsite([py(WTORCH + "\\nn\\functional.py", 2151, "softmax"), py(W_OPT, 212, "forward")] + W_CALL + W_LOOP,
               "activations")
# a helper of the user's own (for --internal with a backslash glob)
W_HELPER = wsite([py(WIN + "\\utils\\buffers.py", 12, "make_buffer"), W_STEP, py(WIN + "\\train.py", 102, "main"),
                  W_MAIN], "other")
W_BATCH = wsite([py(WIN + "\\data.py", 30, "to_device")] + W_LOOP, "other")
# a pin-memory thread: torch's frames and the standard library's, no user frame
W_PIN = wsite([py(WTORCH + "\\utils\\data\\_utils\\pin_memory.py", 18, "pin_memory"),
               py(WTORCH + "\\utils\\data\\_utils\\pin_memory.py", 54, "_pin_memory_loop")] + W_THREAD, "other")
# transformers' code on a worker thread (no user frame): named by the library
W_LIB_ONLY = wsite([py(WSITE + "\\transformers\\generation\\utils.py", 2410, "_sample")] + W_THREAD, "other")
# AdamW (foreach): its state on the first step, temporaries in every step
W_ADAM_STATE = wsite([py(W_ADAMW, 160, "_init_group"), py(W_ADAMW, 221, "step"), W_OPTIMIZER, W_OPT_STEP,
                      py(WIN + "\\train.py", 102, "main"), W_MAIN],
                     "optimizer_state", cpp=op("zeros_like", binding=False))
W_ADAM_TMP = wsite([py(W_ADAMW, 531, "_multi_tensor_adamw"), py(W_ADAMW, 237, "step"), W_OPTIMIZER, W_OPT_STEP,
                    py(WIN + "\\train.py", 102, "main"), W_MAIN],
                   "optimizer_state", cpp=op("_foreach_sqrt", binding=False))


def scenario_windows(out):
    """An OPT fine-tune on Windows, recorded with stacks="python" (torch's only choice
    there) from the start: parameters moved by model.to() through transformers,
    activations in transformers' modules, a pin-memory thread, a transformers worker
    thread, the user's helper, AdamW (foreach) with temporaries in every step, the
    autograd thread's gradients (no Python frame)."""
    proc = Process()
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576, stacks="python")
    params = [a.malloc(12 * MiB, W_PARAM) for _ in range(6)]
    a.malloc(512 * KiB, W_PIN)
    a.malloc(3 * MiB, W_LIB_ONLY)
    state, grads, steps = [], [], 4
    for step in range(1, steps + 1):
        a.clock.advance(30_000)
        x = a.malloc(1 * MiB, W_BATCH)
        acts = [a.malloc(6 * MiB, W_ACT) for _ in range(3)] + [a.malloc(2 * MiB, W_ATTN)]
        h = a.malloc(256 * KiB, W_HELPER)
        for _ in range(2):  # backward on the engine's thread
            t = a.malloc(4 * MiB, P.MM_BACKWARD)
            a.free(t)
        if not grads:
            grads = [a.malloc(b.req, P.ACCUM) for b in params]
        freed_by(a, reversed(acts))
        a.free(h, W_HELPER)
        if step == steps:
            a.malloc(768 * KiB, W_HELPER)  # the helper's buffer, kept
        # optimizer.step(): the state the first time, foreach temporaries every time
        if not state:
            state = [a.malloc(b.req, W_ADAM_STATE) for b in params for _ in range(2)]
        tmp = [a.malloc(b.req, W_ADAM_TMP) for b in params]
        freed_by(a, tmp, W_ADAM_TMP)
        a.free(x, W_BATCH)
    f = out.take("windows", "snapshot.pickle", proc, forms=("python",))[a.device]
    f.update({
        "steps": steps, "step_method": "optimizer_step",
        "param_site": W_PARAM.site, "param_library": W_PARAM.library,
        "act_site": W_ACT.site, "act_library": W_ACT.library,
        "pin_site": dict(W_PIN.site, origin="torch"),
        "library_only_site": dict(W_LIB_ONLY.site, origin="library", package="transformers"),
        "helper_site": W_HELPER.site, "helper_glob": "utils\\*",
        "helper_caller": P.site(W_STEP),
        "optimizer_bytes": sum(b.size for b in state),
    })
    out.plant("windows", f)


# --- history that started after the model was on the GPU -----------------------------

def scenario_late_history(out):
    """The model is built and moved to the GPU, then `_record_memory_history` starts
    (a notebook's usual order): the parameters, the gradients and the optimizer state
    of a warm-up step have no stack; two steps are recorded."""
    proc = Process()
    a = proc.devices[0]
    params = [a.malloc(16 * MiB, P.EXPERT_WEIGHT) for _ in range(6)]
    P_facts, _ = _warm_up(a, params)
    proc.record_memory_history(max_entries=1_048_576)
    from .scenarios import training
    training(a, steps=2, params=params, optimizer=False)
    f = out.take("late_history", "snapshot.pickle", proc, forms=("p4", "python"))[a.device]
    f["before_history_bytes"] = sum(b.size for b in params) + P_facts
    out.plant("late_history", f)


def scenario_recipe_step(out):
    """What the recipe (add-memory-prints) writes: the model is built and on the GPU, then
    `_record_memory_history(max_entries=1048576)` starts at the profiled step (the first
    training step), on purpose; the snapshot is taken at its end. The parameters are the
    static state from before history began: alive, no stack, no trace entry; the trace holds
    the step only."""
    proc = Process()
    a = proc.devices[0]
    params = [a.malloc(16 * MiB, P.EXPERT_WEIGHT) for _ in range(6)]
    proc.record_memory_history(max_entries=1_048_576)
    from .scenarios import training
    training(a, steps=1, params=params)
    f = out.take("recipe_step", "snapshot.pickle", proc)[a.device]
    f["before_history_bytes"] = sum(b.size for b in params)
    f["before_history_blocks"] = len(params)
    out.plant("recipe_step", f)


def _warm_up(a, params):
    """A step before recording: .grad and AdamW's state stay live."""
    kept = [a.malloc(b.req, P.ACCUM) for b in params] + [a.malloc(b.req, P.ADAM_STATE) for b in params
                                                         for _ in range(2)]
    return sum(b.size for b in kept), kept


# --- steps the run marks: external_annotations ---------------------------------------

ANN_SCRIPT = "/workspace/tune/train.py"
ANN_LOOP = [py(ANN_SCRIPT, 88, "train"), py(ANN_SCRIPT, 131, "<module>")]
TRITON = f"{P.SITE_PKG}/triton/testing.py"
# an autotuned kernel benchmarked with triton's do_bench in each step (its output once
# per repetition: a stack at a regular interval with memory rising and falling)
BENCH_OUT = CallSite(py=[py(f"{ANN_SCRIPT[:-8]}kernels.py", 40, "fused_op"), py(TRITON, 117, "do_bench"),
                         py(f"{ANN_SCRIPT[:-8]}kernels.py", 77, "autotune")] + ANN_LOOP,
                     cpp=op("empty", binding=False), site=P.site(py(f"{ANN_SCRIPT[:-8]}kernels.py", 40, "fused_op")),
                     library=P.site(py(TRITON, 117, "do_bench")), category="other")
ANN_BATCH = CallSite(py=[py(ANN_SCRIPT, 80, "train")] + ANN_LOOP[1:], cpp=op("to", binding=False),
                     site=P.site(py(ANN_SCRIPT, 80, "train")), category="other")
ANN_ACT = CallSite(py=[P.LINEAR_FWD] + P.MODULE_CALL + [py(ANN_SCRIPT, 84, "train")] + ANN_LOOP[1:],
                   cpp=op("addmm"), site=P.site(py(ANN_SCRIPT, 84, "train")), category="activations")
ANN_ADAM = CallSite(py=[P.ADAMW_INIT, P.ADAMW_STEP, P.OPT_WRAPPER, py(ANN_SCRIPT, 92, "train")] + ANN_LOOP[1:],
                    cpp=op("zeros_like", binding=False), site=P.site(py(ANN_SCRIPT, 92, "train")),
                    category="optimizer_state")
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def scenario_annotated_steps(out):
    """Four optimizer steps of two micro-batches each (gradient accumulation), recorded
    on torch 2.9: the run's record_function ranges are in `external_annotations`
    (`Optimizer.step#AdamW.step`, `Optimizer.zero_grad#AdamW.zero_grad`, the
    DataLoader's `__next__` once per micro-batch). Every micro-batch also benchmarks a
    kernel with triton's do_bench (eight repetitions). AdamW is fused: only its first
    step allocates. The same run without annotations (`snapshot_no_annotations`) has
    only guesses."""
    proc = Process()
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576)
    params = [a.malloc(8 * MiB, P.EXPERT_WEIGHT) for _ in range(4)]
    grads, state, steps, micro = [], [], 4, 2
    bounds = []
    for step in range(1, steps + 1):
        for m in range(micro):
            a.clock.advance(10_000)
            a.annotate(LOADER, "START")
            x = a.malloc(2 * MiB, ANN_BATCH)
            a.annotate(LOADER, "END")
            acts = [a.malloc(4 * MiB, ANN_ACT) for _ in range(3)]
            for _ in range(8):  # do_bench: one output per repetition
                o = a.malloc(3 * MiB, BENCH_OUT)
                a.clock.advance(50)
                a.free(o, BENCH_OUT)
            for _ in range(2):
                t = a.malloc(4 * MiB, P.MM_BACKWARD)
                a.free(t)
            if not grads:
                grads = [a.malloc(b.req, P.ACCUM) for b in params]
            freed_by(a, reversed(acts))
            a.free(x, ANN_BATCH)
        a.annotate("Optimizer.step#AdamW.step", "START")
        if not state:
            state = [a.malloc(b.req, ANN_ADAM) for b in params for _ in range(2)]
        a.annotate("Optimizer.step#AdamW.step", "END")
        bounds.append(len(a.trace()))
        a.annotate("Optimizer.zero_grad#AdamW.zero_grad", "START")
        a.annotate("Optimizer.zero_grad#AdamW.zero_grad", "END")
    # the same state without the annotations (no `snapshot` entry between the two)
    write(os.path.join(out.root, "annotated_steps", "snapshot_no_annotations.pickle"),
          encode(proc.devices, "p4-noann"))
    f = out.take("annotated_steps", "snapshot.pickle", proc, forms=("p4",))[a.device]
    # each step ends where Optimizer.step ends: the next one starts at the next entry
    # (the trace index after it); the last step's end is the window's end
    f.update({"steps": steps, "annotation": "Optimizer.step#AdamW.step", "edge": "end",
              "step_starts": [0] + bounds[:-1], "micro_batches": steps * micro,
              "bench_site": BENCH_OUT.site, "bench_library": BENCH_OUT.library})
    out.plant("annotated_steps", f)


# --- expandable segments ---------------------------------------------------------------

def scenario_expandable(out):
    """expandable_segments:True on a 1 GiB device: pages mapped as the run grows,
    an OOM whose malloc first unmaps the free pages (segment_unmap) then fails to map
    more, and the snapshot taken in `except`, after the step's tensors were freed: the
    reserved memory is mapped pages, mostly free, which is not fragmentation."""
    proc = Process()
    proc.devices = [ExpandableAllocator(0, GiB, clock=proc.clock)]
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576)
    params = [a.malloc(40 * MiB, P.EXPERT_WEIGHT) for _ in range(4)]
    small = [a.malloc(300 * KiB, P.ATTN_PROJ) for _ in range(5)]
    held = []
    try:
        for step in range(1, 4):
            a.clock.advance(20_000)
            # longer sequences each step: the freed activations leave holes too small
            acts = [a.malloc((60 + 40 * step) * MiB + 3 * KiB, P.EXPERT_GEMM) for _ in range(step + 1)]
            if step < 3:
                freed_by(a, acts[::2], P.EXPERT_GEMM)
                held += acts[1::2]
            else:
                held += acts
                a.malloc(400 * MiB, P.SILU_OUT)
    except OutOfMemory:
        pass
    oom = [te for te in a.trace() if te.action == "oom"][0]
    at_oom = oom_state(a, oom)
    freed_by(a, held, P.EXPERT_GEMM)  # the except clause
    freed_by(a, small[1:4], P.ATTN_PROJ)
    f = out.take("expandable", "snapshot.pickle", proc, forms=("p4",))[a.device]
    f.update({"oom": dict(at_oom, expandable=True, site=P.site(P.SILU_FUNC_FWD)),
              "capacity": GiB, "params_bytes": sum(b.size for b in params),
              "peak_reserved_bytes": a.peak_reserved,
              "absent": ["allocator_fragmentation"]})
    assert at_oom["cause"] == "out_of_memory"
    assert f["trace_counts"].get("segment_unmap", 0) > 0, f["trace_counts"]
    out.plant("expandable", f)


# --- the DualPipeV schedule, marked (memory-prints group 8, docs/schedule-marks.md) ------

PINNED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                      "schedule_marks.pinned")
# What one micro-batch's forward keeps until its backward, per phase; a backward's
# transient; a zero-bubble backward's deferred weight gradient, freed by its W
MARK_ACT = (6 * MiB, 10 * MiB)
MARK_TMP = 2 * MiB
MARK_WGRAD = 3 * MiB


def pinned_events(pp, rank, chunks):
    """The estimator's names for one pipeline rank (tests/schedule_marks.pinned, from
    pithtrain's own ScheduleSimulator)."""
    head, names = f"[pp={pp} rank={rank} chunks={chunks}]", None
    with open(PINNED) as f:
        for line in f.read().splitlines():
            if line == head:
                names = []
            elif names is not None and not line:
                break
            elif names is not None:
                names.append(line)
    return names


def marked_step(a, events, oom_in=None):
    """Run one pipeline rank's chunk calls as DualPipeV.step runs them, each inside its
    record_function range (START, the chunk's allocations and frees, END), and return the
    truth of each: its trace entries, bytes allocated and freed inside, live bytes at START,
    at END and at the peak inside. `oom_in`: that event runs out of memory inside its
    range (raises OutOfMemory with the range open)."""
    acts, wgrads, truth = {}, [], []

    def fwd(p, c):
        acts[(p, c)] = a.malloc(MARK_ACT[p], P.EXPERT_GEMM)

    def bwd(p, c, zb):
        t = a.malloc(MARK_TMP, P.MM_BACKWARD)
        if zb:
            wgrads.append(a.malloc(MARK_WGRAD, P.GROUPED_BWD))
        a.free(t)
        a.free(acts.pop((p, c)))

    for name in events:
        a.clock.advance(1_000)
        a.annotate(name, "START")
        first, live = len(a.trace()), a.live_req
        what = name.split(" ", 1)[1]
        if m := re.fullmatch(r"fwd\(p(\d)\) c(\d+)", what):
            fwd(int(m[1]), int(m[2]))
        elif m := re.fullmatch(r"bwd\(p(\d),zb=(True|False)\) c(\d+)", what):
            bwd(int(m[1]), int(m[3]), m[2] == "True")
        elif m := re.fullmatch(r"fwd_bwd\(p(\d),p(\d)\) fc(\d+)/bc(\d+)", what):
            fwd(int(m[1]), int(m[3]))
            bwd(int(m[2]), int(m[4]), False)
        else:
            assert what == "weight_chunk", name
            a.free(wgrads.pop(0))
        if name == oom_in:
            a.malloc(2 * a.capacity, P.SILU_OUT)
        entries = a.trace()[first:]
        allocated = sum(te.size for te in entries if te.action == "alloc")
        freed = sum(te.size for te in entries if te.action == "free_requested")
        peak = max([live] + [te.live_before + te.size for te in entries if te.action == "alloc"])
        a.annotate(name, "END")
        truth.append({"name": name, "trace_entries": len(entries), "allocated_bytes": allocated,
                      "freed_bytes": freed, "live_at_start": live, "live_at_end": a.live_req,
                      "peak_inside": peak})
    assert not acts and not wgrads, (acts, wgrads)
    return truth


def scenario_schedule_marks(out):
    """The profiled step of pipeline rank 0 of 2 with 4 micro-batches, each chunk call of
    DualPipeV.step inside the record_function range memory-prints group 8 opens, named as
    pithtrain's estimator names the event (`S3.i0 bwd(p1,zb=True) c0`); planted per event:
    what it allocated, freed and kept. The same step running out of memory inside
    `S4.i0 fwd_bwd(p1,p0) fc2/bc0` (`snapshot_oom.pickle`, taken at the OOM as torch's OOM
    observer takes it) leaves that range open: START and no END."""
    events = pinned_events(2, 0, 4)
    proc = Process()
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576, stacks="python")
    params = [a.malloc(8 * MiB, P.EXPERT_WEIGHT) for _ in range(4)]
    marks = marked_step(a, events)
    f = out.take("schedule_marks", "snapshot.pickle", proc, forms=("p4",))[a.device]

    oom_in = "S4.i0 fwd_bwd(p1,p0) fc2/bc0"
    proc = Process()
    b = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576, stacks="python")
    for _ in params:
        b.malloc(8 * MiB, P.EXPERT_WEIGHT)
    try:
        marked_step(b, events, oom_in=oom_in)
        raise AssertionError("no OOM")
    except OutOfMemory:
        pass
    write(os.path.join(out.root, "schedule_marks", "snapshot_oom.pickle"), encode(proc.devices, "p4"))
    f.update({"pp": 2, "pp_rank": 0, "micro_batches": 4, "marks": marks,
              "oom": {"file": "snapshot_oom.pickle", "open": oom_in,
                      "closed": events[:events.index(oom_in)]}})
    out.plant("schedule_marks", f)


ALL = [scenario_windows, scenario_late_history, scenario_recipe_step, scenario_annotated_steps, scenario_expandable,
       scenario_schedule_marks]
