"""The scenarios: programs run on the simulated allocator, each snapshot written in the
forms asked for, with ``planted.json`` holding what the program planted.

Every scenario writes its committed files (``Out.committed``); ``--all-forms`` also
writes every scenario in every form of ``forms.FORMS`` for the forms test.
"""

import json
import os

from . import program as P
from .allocator import KiB, MiB, GiB, OutOfMemory, Process
from .forms import FORMS, device_facts, encode, extension, form_of, site_key, write
from .frames import CallSite, CppFrame, PITH, TORCH, op, py

SIDE_STREAM = 0x55D0C0FFEE00
COMM_STREAM = 0x55D0C0FFEF40


class Out:
    """Where a scenario's files go, and which forms it writes."""

    def __init__(self, root, all_forms=False):
        self.root = root
        self.all_forms = all_forms

    def take(self, scenario, name, proc, forms=("p4",)):
        """Write the process's snapshot now, as `name` in `forms` (and in every form
        under forms/ with --all-forms), then record torch's `snapshot` entry."""
        d = os.path.join(self.root, scenario)
        for form in forms:
            fname = name if len(forms) == 1 else name.replace(".pickle", f"_{form}.pickle")
            write(os.path.join(d, fname), encode(proc.devices, form))
        if self.all_forms:
            stem = name.rsplit(".", 1)[0]
            expandable = any(hasattr(a, "xsegs") for a in proc.devices)
            for form in FORMS:
                if expandable and form_of(form)["version"] in ("1.13", "2.0"):
                    continue  # expandable segments came with torch 2.1
                write(os.path.join(d, "forms", f"{stem}.{form}{extension(form)}"), encode(proc.devices, form))
        # The facts of the moment the snapshot was taken (torch then records a
        # `snapshot` entry, which only the next snapshot's trace holds).
        facts = {a.device: device_facts(a) for a in proc.devices}
        for a in proc.devices:
            a.snapshot_taken()
        return facts

    def plant(self, scenario, facts):
        d = os.path.join(self.root, scenario)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "planted.json"), "w") as f:
            json.dump(facts, f, indent=1, sort_keys=True)
            f.write("\n")


def freed_by(a, blocks, site=None):
    for b in blocks:
        a.free(b, site)


# --- a training loop on pithtrain's call sites ------------------------------------

def training(a, steps, layers=2, act=8 * MiB, retain=False, container=None, gc_every=0,
             optimizer=True, params=None, oom_at=None, side_stream=False):
    """Simulate `steps` training steps on allocator `a`; returns what it planted."""
    facts = {"steps": steps}
    if params is None:
        params = [a.malloc(4 * MiB, P.EXPERT_WEIGHT) for _ in range(4)]
    grads, opt, kept, feats, cyc = [], [], [], [], []
    for step in range(1, steps + 1):
        a.clock.advance(20_000)
        x = a.malloc(2 * MiB, P.BATCH)
        acts = []
        for _ in range(layers):
            acts.append(a.malloc(act // 4, P.ATTN_PROJ))
            recv = a.malloc(act // 8, P.A2A_RECV)
            if side_stream:
                a.record_stream(recv, COMM_STREAM)
            acts.append(recv)
            acts.append(a.malloc(act, P.EXPERT_GEMM))
            acts.append(a.malloc(act // 2, P.SILU_OUT))
            a.clock.advance(1_500)  # the layer's forward kernels
        if oom_at == step:
            facts["oom_step"] = step
            try:
                a.malloc(oom_at_size(a, act), P.EXPERT_GEMM)
            except OutOfMemory:
                pass
            return facts, acts + [x]
        loss = a.malloc(4 * KiB, P.LOSS)
        if container is not None:
            feats.append(a.malloc(256 * KiB, container))
        if gc_every:
            cyc.append(a.malloc(512 * KiB, P.user(f"{PITH}/utils/metrics.py", 44, "record",
                                                   py(f"{PITH}/utils/metrics.py", 80, "update"))))
        # backward on the engine's thread: temporaries, custom-Function grads,
        # the parameters' .grad the first time (AccumulateGrad)
        for _ in range(layers):
            t = a.malloc(act // 4, P.MM_BACKWARD)
            g = a.malloc(act // 2, P.SILU_BWD)
            a.clock.advance(3_000)  # the layer's backward kernels
            a.free(t)
            a.free(g)
        if not grads:
            grads = [a.malloc(b.req, P.ACCUM) for b in params]
        if retain:
            kept.extend(acts)
            kept.append(loss)
        else:
            freed_by(a, reversed(acts), P.ATTN_PROJ)
            a.free(loss, P.LOSS)
        if side_stream:
            a.stream_done(COMM_STREAM)
        if optimizer and not opt:
            opt = [a.malloc(b.req, P.ADAM_STATE) for b in params for _ in range(2)]
            facts["optimizer_step"] = step
        a.free(x, P.BATCH)
        if gc_every and step % gc_every == 0:
            freed_by(a, cyc)
            cyc = []
    facts.update(params=params, grads=grads, opt=opt, feats=feats)
    return facts, []


def oom_at_size(a, act):
    return 4 * act


# --- scenarios ---------------------------------------------------------------

def scenario_allocator(out):
    """Totals, streams, sites and categories of live memory, attribution without a
    user frame, delayed frees on a side stream, --internal; every pickle protocol
    and JSON."""
    proc = Process()
    a = proc.devices[0]
    before = [a.malloc(6 * MiB, P.ATTN_WEIGHT) for _ in range(2)]  # before recording: no stack
    proc.record_memory_history(max_entries=100_000)
    params = [a.malloc(4 * MiB + 100, P.EXPERT_WEIGHT) for _ in range(6)]
    acts = [a.malloc(300 * KiB + 7, P.EXPERT_GEMM) for _ in range(20)]
    freed_by(a, acts[::2], P.EXPERT_GEMM)
    [a.malloc(64 * KiB, P.ATTN_PROJ) for _ in range(3)]
    pin = CallSite(py=[py(f"{TORCH}/utils/data/_utils/pin_memory.py", 18, "pin_memory"),
                       py(f"{TORCH}/utils/data/dataloader.py", 733, "__next__")],
                   cpp=op("copy_"), site={"file": f"{TORCH}/utils/data/_utils/pin_memory.py", "line": 18,
                                           "function": "pin_memory"}, category="other")
    a.malloc(512 * KiB, pin)
    a.malloc(1536, P.CUBLAS)
    [a.malloc(2 * MiB, P.MM_BACKWARD) for _ in range(2)]
    a.malloc(3 * MiB, P.ACCUM)
    helper = P.user(f"{PITH}/utils/buffers.py", 30, "alloc_buffer", py(f"{PITH}/models/moe.py", 300, "dispatch"))
    a.malloc(2 * MiB, helper)
    side = [a.malloc(256 * KiB, P.A2A_RECV, stream=SIDE_STREAM) for _ in range(3)]
    for b in side[:2]:
        a.record_stream(b, COMM_STREAM)
        a.free(b, P.A2A_RECV)
    f = out.take("allocator", "snapshot.pickle", proc, forms=("p0", "p1", "p2", "p3", "p4", "p5"))[a.device]
    f.update({
        "helper_site": P.site(helper.py[0]),
        "helper_site_internal": P.site(helper.py[1]),
        "helper_glob": "pithtrain/utils/*",
        "torch_fallback_site": dict(pin.site, origin="torch"),
        "pending": {"stream": SIDE_STREAM, "blocks": 2, "bytes": sum(b.req for b in side[:2]),
                    "block_bytes": sum(b.size for b in side[:2])},
        "streams": sorted({h.stream for h, _ in a.segments()}),
        "no_stack_bytes": sum(b.size for b in before),
    })
    out.plant("allocator", f)


def scenario_oom(out):
    """A genuine OOM: live memory fills the device. pithtrain's handler takes the
    snapshot in `except`, after the step's locals were freed, so the live memory at
    the OOM is only in the trace."""
    proc = Process(capacity=160 * MiB)
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576)
    facts, held = training(a, steps=3, oom_at=3, act=16 * MiB)
    oom = [te for te in a.trace() if te.action == "oom"][0]
    at_oom = oom_state(a, oom)
    # the except clause: the step's activations die before the snapshot
    freed_by(a, held, P.ATTN_PROJ)
    f = out.take("oom", "snapshot.pickle", proc)[a.device]
    f.update({"oom": dict(at_oom, site=P.site(P.GROUPED_FUNC_FWD)), "top_holder": at_oom["holders"][0]})
    assert at_oom["cause"] == "out_of_memory"
    out.plant("oom", f)


def oom_state(a, oom):
    """What the allocator held when `oom` was recorded: live requested bytes by
    site, and in the segments of the request's pool and stream (the only ones it
    could use) the cached free memory, its largest block, and why the malloc failed."""
    holders = {}
    for _, blocks in a.segments():
        for b in blocks:
            if b.allocated:
                k = site_key(b.ctx.site.site) if b.ctx else None
                holders[k] = holders.get(k, 0) + b.req
    small = oom.size <= 1 << 20
    free = largest = reserved = n = with_free = 0
    for h, blocks in a.segments():
        if h.small != small or h.stream != oom.stream:
            continue
        n += 1
        reserved += sum(b.size for b in blocks)
        seg_free = sum(b.size for b in blocks if a.state(b) == "inactive")
        free += seg_free
        with_free += seg_free > 0
        largest = max([largest] + [b.size for b in blocks if a.state(b) == "inactive"])
    frag = free >= oom.size and largest < oom.size
    return {"size_bytes": oom.size, "device_free_bytes": oom.addr,
            "event_index": a.trace().index(oom), "live_bytes_before": oom.live_before,
            "cached_free_bytes": free, "largest_free_block_bytes": largest, "reserved_bytes": reserved,
            "segments": n, "segments_with_free": with_free,
            "cause": "fragmentation" if frag else "out_of_memory",
            "holders": [{"file": k[0], "line": k[1], "function": k[2], "bytes": v}
                        for k, v in sorted(holders.items(), key=lambda kv: -kv[1]) if k]}


def scenario_fragmentation(out):
    """An OOM with enough cached memory free, but no free block large enough: the
    freed activations left holes between long-lived tensors in every segment."""
    proc = Process(capacity=185 * MiB)
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576)
    keep, holes = [], []
    for _ in range(9):  # nine 20 MiB segments: 4 MiB holes between 2 MiB keepers
        for _ in range(3):
            holes.append(a.malloc(4 * MiB, P.EXPERT_GEMM))
            keep.append(a.malloc(2 * MiB + 512 * KiB, P.ATTN_PROJ))
    freed_by(a, holes, P.EXPERT_GEMM)
    try:
        a.malloc(12 * MiB, P.SILU_OUT)
    except OutOfMemory:
        pass
    oom = [te for te in a.trace() if te.action == "oom"][0]
    at_oom = oom_state(a, oom)
    assert at_oom["cause"] == "fragmentation", at_oom
    f = out.take("fragmentation", "snapshot.pickle", proc)[a.device]
    f.update({"oom": dict(at_oom, site=P.site(P.SILU_FUNC_FWD)), "pattern": "allocator_fragmentation"})
    out.plant("fragmentation", f)


def scenario_retained_graph(out):
    proc = Process()
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576)
    training(a, steps=6, retain=True)
    f = out.take("retained_graph", "snapshot.pickle", proc, forms=("p5",))[a.device]
    f.update({"steps": 6, "pattern": "retained_autograd_graph",
              "activation_sites": [P.site(P.GROUPED_FUNC_FWD), P.site(P.SILU_FUNC_FWD)],
              "loss_site": P.site(P.CRITERION),
              "absent": ["python_reference_cycles", "allocator_fragmentation"]})
    out.plant("retained_graph", f)


def scenario_growing_container(out):
    proc = Process()
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576)
    feat = P.user(f"{PITH}/tasks/pretrain_lm.py", 448, "train_step", category="other")
    feat.py = feat.py[:1] + feat.py[2:]
    facts, _ = training(a, steps=8, container=feat)
    f = out.take("growing_container", "snapshot.pickle", proc)[a.device]
    f.update({"steps": 8, "pattern": "growing_python_container", "site": feat.site,
              "blocks_live": len(facts["feats"]), "block_bytes": 256 * KiB,
              "absent": ["retained_autograd_graph", "python_reference_cycles"]})
    out.plant("growing_container", f)


def scenario_optimizer(out):
    proc = Process()
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576)
    facts, _ = training(a, steps=5)
    f = out.take("optimizer_first_step", "snapshot.pickle", proc, forms=("p2",))[a.device]
    layers, act = 2, 8 * MiB
    f.update({"pattern": "first_step_optimizer_state",
              # forward activations of every layer (attention, experts, SiLU) and the
              # loss are live at the step's peak and freed later in the step; the
              # all-to-all buffers are communication
              "activation_at_peak_bytes": layers * (act // 4 + act + act // 2) + 4 * KiB,
              "optimizer_bytes": sum(b.size for b in facts["opt"]),
              "optimizer_step": facts["optimizer_step"], "also": "activation_checkpointing",
              "absent": ["retained_autograd_graph", "growing_python_container", "python_reference_cycles"]})
    out.plant("optimizer_first_step", f)


def scenario_reference_cycles(out):
    proc = Process()
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576)
    training(a, steps=9, gc_every=3)
    f = out.take("reference_cycles", "snapshot.pickle", proc)[a.device]
    f.update({"pattern": "python_reference_cycles", "bursts": 3, "burst_blocks": 2,
              "burst_bytes": 2 * 512 * KiB, "site": P.site(py(f"{PITH}/utils/metrics.py", 44, "record")),
              "absent": ["retained_autograd_graph", "growing_python_container"]})
    out.plant("reference_cycles", f)


def scenario_ddp(out):
    """Recording with enabled="state": stacks for live blocks, a trace of one entry."""
    proc = Process()
    a = proc.devices[0]
    proc.record_memory_history(enabled="state")
    ps = [a.malloc(16 * MiB, P.EXPERT_WEIGHT) for _ in range(8)]
    gs = [a.malloc(16 * MiB, P.ACCUM) for _ in range(8)]
    os_ = [a.malloc(16 * MiB, P.ADAM_STATE) for _ in range(16)]
    bucket = CallSite(py=[py(f"{TORCH}/nn/parallel/distributed.py", 1190, "_ddp_init_helper"),
                          py(f"{TORCH}/nn/parallel/distributed.py", 870, "__init__"), P.SETUP_MODEL] + P.OUTER[1:],
                      cpp=[CppFrame("c10d::Reducer::initialize_buckets(std::vector<c10d::Reducer::BucketIndices>)", "reducer.cpp")] + op("empty", binding=False),
                      site=P.site(P.SETUP_MODEL), category="communication")
    bk = [a.malloc(25 * MiB, bucket) for _ in range(5)]
    a.malloc(8 * MiB, P.BATCH)
    f = out.take("ddp", "snapshot.pickle", proc)[a.device]
    f.update({"pattern": "ddp_replication",
              "parameters": sum(b.size for b in ps), "gradients": sum(b.size for b in gs),
              "optimizer_state": sum(b.size for b in os_), "communication": sum(b.size for b in bk)})
    out.plant("ddp", f)


def scenario_leak_diff(out):
    """Two snapshots of one run, 5 and 50 steps in: a site leaks a block per step, a
    buffer grows once, a cache shrinks. The second one's trace holds the first's
    `snapshot` entry."""
    proc = Process()
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576)
    leak = P.user(f"{PITH}/tasks/pretrain_lm.py", 447, "train_step")
    leak.py = leak.py[:1] + leak.py[2:]
    buf = P.user(f"{PITH}/dualpipe/comm.py", 12, "ensure_capacity", P.STAGE2)
    cache = P.user(f"{PITH}/modules/dataset.py", 33, "put")
    [a.malloc(8 * MiB, P.EXPERT_WEIGHT) for _ in range(4)]
    facts = {}
    buffer = a.malloc(4 * MiB, buf)
    cached = [a.malloc(1 * MiB, cache) for _ in range(6)]
    for step in range(1, 51):
        a.malloc(600 * KiB, leak)
        if step == 20:
            a.free(buffer, buf)
            buffer = a.malloc(12 * MiB, buf)
            freed_by(a, cached[2:], cache)
        if step in (5, 50):
            f = out.take("leak_diff", f"snapshot_step_{step:03d}.pickle", proc)[0]
            f.update(leak=live_of(a, leak), buffer=live_of(a, buf), cache=live_of(a, cache))
            facts[str(step)] = f
    out.plant("leak_diff", {"leak_site": leak.site, "buffer_site": buf.site, "cache_site": cache.site,
                            "param_site": P.EXPERT_WEIGHT.site, "before": facts["5"], "after": facts["50"],
                            "pattern": "growing_python_container"})


def live_of(a, cs):
    """Live bytes and blocks allocated from call site `cs`."""
    bl = [b for _, blocks in a.segments() for b in blocks
          if b.allocated and b.ctx is not None and b.ctx.site is cs]
    return {"bytes": sum(b.size for b in bl), "blocks": len(bl)}


def scenario_multi_rank(out):
    """Four ranks (file-name styles of pithtrain, the recipe and other tools); each
    process sees four devices and uses its local rank's. Rank 3 routes more tokens to
    its experts."""
    names = {0: "snapshot-rank00000.pickle", 1: "memory_snapshot_rank1_step0.pickle",
             2: "rank2_memory_snapshot.pickle", 3: "snapshot-rank00003.pickle"}
    facts = {"ranks": {}, "standout": 3, "standout_site": P.site(P.GROUPED_FUNC_FWD),
             "skipped": ["planted.json", "summary.pickle"]}
    for r, name in names.items():
        proc = Process(devices=4)
        a = proc.devices[r]
        proc.record_memory_history(max_entries=1_048_576)
        training(a, steps=2, act=(12 if r == 3 else 6) * MiB, optimizer=False)
        [a.malloc((24 if r == 3 else 8) * MiB, P.EXPERT_GEMM) for _ in range(3)]
        facts["ranks"][name] = dict(out.take("multi_rank", name, proc)[r], rank=r)
    proc = Process()
    proc.record_memory_history()
    proc.devices[0].malloc(MiB, P.BATCH)
    out.take("multi_rank", "summary.pickle", proc)
    out.plant("multi_rank", facts)


def scenario_legacy(out):
    """Old schemas: torch 1.13 (block `history` with `real_size`, no
    `requested_size`, no `time_us`) and torch 2.0 (`history` and `requested_size`);
    the docstring's `active_awaiting_free` and torch's `active_pending_free`."""
    proc = Process()
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576)
    xs = [a.malloc(3 * MiB + 5, P.EXPERT_GEMM) for _ in range(3)]
    b = a.malloc(700 * KiB, P.ATTN_PROJ, stream=SIDE_STREAM)
    a.record_stream(b, COMM_STREAM)
    a.free(b, P.ATTN_PROJ)
    a.free(xs[1], P.EXPERT_GEMM)
    f = out.take("legacy", "snapshot.pickle", proc, forms=("v1.13-awaiting", "v2.0"))[a.device]
    f["top_site"] = f["sites_all"][0]
    out.plant("legacy", f)


def scenario_multi_device(out):
    proc = Process(devices=2)
    a = proc.devices[1]
    proc.record_memory_history(max_entries=1_048_576)
    training(a, steps=2, optimizer=False)
    f = out.take("multi_device", "snapshot.pickle", proc)[1]
    out.plant("multi_device", dict(f, events=f["trace_events"]))


def scenario_long_trace(out):
    """A longer trace (many APPENDS batches) for the reader's split read."""
    proc = Process()
    a = proc.devices[0]
    proc.record_memory_history(max_entries=1_048_576, stacks="python")
    training(a, steps=100, layers=2, act=2 * MiB)
    f = out.take("long_trace", "snapshot.pickle", proc, forms=("python", "python-p2"))[0]
    out.plant("long_trace", dict(f, events=f["trace_events"]))


def scenario_ring_buffer(out):
    """max_entries smaller than the run: the trace starts mid-step (frees of blocks
    allocated before it, `free_completed` without their `free_requested`)."""
    proc = Process()
    a = proc.devices[0]
    proc.record_memory_history(max_entries=700)
    training(a, steps=12, layers=3, act=4 * MiB, side_stream=True)
    first = a.trace()[0]
    f = out.take("ring_buffer", "snapshot.pickle", proc)[a.device]
    f.update({"max_entries": 700, "first_time_us": first.time_us,
              "window_start_live_bytes": first.live_before})
    out.plant("ring_buffer", f)


def scenario_pithtrain_moe(out):
    """A pithtrain step as the recipe records it: parameters and optimizer state made
    before recording started (no stack), custom autograd Functions, backward on the
    engine's thread (C++ frames only), all-to-all buffers used on the comm stream."""
    proc = Process()
    a = proc.devices[0]
    params = [a.malloc(8 * MiB, P.EXPERT_WEIGHT) for _ in range(4)] + [a.malloc(2 * MiB, P.ATTN_WEIGHT) for _ in range(4)]
    training(a, steps=1, params=params)  # warm-up step: grads, optimizer state
    proc.record_memory_history(max_entries=1_048_576)
    training(a, steps=2, params=params, side_stream=True, optimizer=False)
    nccl = a.malloc(3 * MiB, P.NCCL_BUF)
    f = out.take("pithtrain_moe", "snapshot.pickle", proc, forms=("p4", "python"))[a.device]
    f["nccl_site"] = P.NCCL_BUF.site
    out.plant("pithtrain_moe", f)
    del nccl


def scenario_refused(out):
    import pickle
    d = os.path.join(out.root, "refused")
    os.makedirs(d, exist_ok=True)

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned-by-pickle",))

    with open(os.path.join(d, "os_system.pickle"), "wb") as f:
        pickle.dump({"segments": [], "device_traces": [[Evil()]]}, f, protocol=4)
    with open(os.path.join(d, "os_system_p0.pickle"), "wb") as f:
        pickle.dump(Evil(), f, protocol=0)
    good = open(os.path.join(out.root, "allocator", "snapshot_p4.pickle"), "rb").read()
    with open(os.path.join(d, "truncated.pickle"), "wb") as f:
        f.write(good[: len(good) // 2])
    bad = {"segments": [{"device": 0, "address": 1, "total_size": "lots", "stream": 0, "blocks": []}],
           "device_traces": []}
    write(os.path.join(d, "wrong_types.pickle"), pickle.dumps(bad, protocol=4))
    write(os.path.join(d, "not_snapshot.pickle"), pickle.dumps({"hello": [1, 2, 3]}, protocol=4))
    with open(os.path.join(d, "garbage.pickle"), "wb") as f:
        f.write(b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\xff\xfe")
    with open(os.path.join(d, "truncated.json"), "w") as f:
        f.write('{"segments": [{"device": 0, "address": 1')
    out.plant("refused", {"refused": {"os_system.pickle": "STACK_GLOBAL", "os_system_p0.pickle": "GLOBAL"},
                          "marker": "pwned-by-pickle", "truncated_at": len(good) // 2})


# --- a LoRA fine-tune: per-layer stacks in backward ---------------------------------

def lora_finetune(a, steps, layers, h=2 * MiB, i=5632 * KiB):
    """`steps` steps of a peft LoRA fine-tune of a 4-bit Llama (program.FT_*): forward
    through `layers` decoder layers, backward layer by layer on the engine's thread
    (each layer frees its saved activations and leaves its four LoRA weight gradients
    as .grad), then optimizer.step() and zero_grad(), except after the last step's
    backward, where the snapshot is taken (a notebook's `_dump_snapshot` after
    `loss.backward()`). Returns the blocks the last backward left as .grad and the
    optimizer state. A layer is cut to what shapes memory (its large saved tensors,
    the dequantized weights, the gradients): the stacks are deep, the file small."""
    deq_attn, deq_mlp, lora_grad = 4 * MiB, 15 * MiB, 128 * KiB
    step_free = P.CallSite(py=P.FT_OUTER)
    held, adam, grads = [], [], []

    def bnb_bwd(deq_size, size_in):
        """MatMul4Bit.backward: dequantize the weight again, the input's gradient."""
        deq = a.malloc(deq_size, P.FT_BWD_DEQ)
        d = a.malloc(size_in, P.FT_BWD_DGRAD)
        a.free(deq)
        return d

    def lora_bwd(d_out):
        """An adapter's backward: lora_B's and lora_A's weight gradients (kept: .grad,
        AccumulateGrad takes them), the input's gradient; then the base layer's."""
        grads.append(a.malloc(lora_grad, P.FT_LORA_GRAD))
        grads.append(a.malloc(lora_grad, P.FT_LORA_GRAD))
        dd = a.malloc(h, P.FT_LORA_DGRAD)
        d = bnb_bwd(deq_attn, h)
        freed_by(a, [d_out, dd])  # dd accumulated into d
        return d

    for step in range(1, steps + 1):
        a.clock.advance(50_000)
        x = a.malloc(8 * KiB, P.FT_BATCH)
        hidden = a.malloc(h, P.FT_EMBED)
        saved = []
        for _ in range(layers):
            # what backward needs (each freed when the node that saved it has run)
            k = {"in": hidden, "rms1": a.malloc(h, P.FT_RMS1)}
            k["q"] = [a.malloc(h, P.FT_Q[0]), a.malloc(h, P.FT_Q[1])]  # dropout(x), result
            k["k"] = a.malloc(h, P.FT_K)
            k["v"] = [a.malloc(h, P.FT_V[0]), a.malloc(h, P.FT_V[1])]
            k["cat"], k["sdpa"] = a.malloc(h, P.FT_ROT_CAT), a.malloc(h, P.FT_SDPA)
            k["o"] = a.malloc(h, P.FT_O)
            k["mlp"] = [a.malloc(h, P.FT_RMS2)]
            deq = a.malloc(deq_mlp, P.FT_GATE[0])  # gate_proj's base weight, dequantized
            a.free(deq, P.FT_GATE[0])
            k["mlp"] += [a.malloc(i, P.FT_GATE[1]), a.malloc(i, P.FT_SILU), a.malloc(i, P.FT_MUL)]
            hidden = a.malloc(h, P.FT_DOWN)
            saved.append(k)
            a.clock.advance(2_000)  # the layer's forward kernels
        norm = a.malloc(h, P.FT_NORM)
        logits = a.malloc(16 * MiB, P.FT_LOGITS)
        loss = a.malloc(512, P.FT_LOSS)
        # `outputs = model(**batch)` rebinds: the previous step's outputs and batch die
        freed_by(a, held, step_free)
        held = [logits, loss, x]
        # loss.backward() on the engine's thread, layer by layer from the top
        dl = a.malloc(16 * MiB, P.FT_CE_BWD)
        g = a.malloc(h, P.FT_LORA_DGRAD)  # lm_head (bf16, frozen): its input's gradient
        a.free(dl)
        p = a.malloc(2 * h, P.FT_POW_BWD)  # the final norm
        gn = a.malloc(h, P.FT_MUL_BWD)
        freed_by(a, [p, g, norm])
        g = gn
        a.free(hidden)
        for k in reversed(saved):
            # the MLP: down_proj, act(gate) * up, up_proj and gate_proj back to back
            d = bnb_bwd(deq_mlp, i)
            m = a.malloc(i, P.FT_MUL_BWD)
            a.free(d)
            s = a.malloc(i, P.FT_SILU_BWD)
            du = bnb_bwd(deq_mlp, h)
            a.free(m)
            dg = bnb_bwd(deq_mlp, h)
            freed_by(a, [s, du] + k["mlp"])
            # post_attention_layernorm (RMSNorm: pow, mul) and its input, the residual
            p = a.malloc(2 * h, P.FT_POW_BWD)
            r = a.malloc(h, P.FT_MUL_BWD)
            freed_by(a, [p, dg, k["o"]])
            # o_proj, attention, the rotary embedding (rotate_half: neg, slices)
            do = bnb_bwd(deq_attn, h)
            a.free(k["sdpa"])
            dq, dk, dv = (a.malloc(h, P.FT_SDPA_BWD) for _ in range(3))
            freed_by(a, [do, k["v"][1], k["cat"]])
            nk = a.malloc(h // 2, P.FT_NEG_K)
            sk = a.malloc(h, P.FT_SLICE_BWD)
            freed_by(a, [nk, dk, k["k"]])
            nq = a.malloc(h // 2, P.FT_NEG_Q)
            sq = a.malloc(h, P.FT_SLICE_BWD)
            freed_by(a, [nq, dq, k["q"][1]])
            # v_proj, k_proj, q_proj (LoRA on v and q), their input
            dv = lora_bwd(dv)
            a.free(k["v"][0])
            dk = bnb_bwd(deq_attn, h)
            a.free(sk)
            dq = lora_bwd(sq)
            freed_by(a, [k["q"][0], k["rms1"]])
            # input_layernorm, plus the residual: the gradient of the layer's input
            p = a.malloc(2 * h, P.FT_POW_BWD)
            g2 = a.malloc(h, P.FT_MUL_BWD)
            freed_by(a, [p, dv, dk, dq, r, g, k["in"]])
            g = g2
            a.clock.advance(4_000)  # the layer's backward kernels
        a.free(g)
        if step == steps:
            break
        # optimizer.step(): AdamW's state on the first step; zero_grad() frees .grad
        if not adam:
            adam = [a.malloc(b.req, P.FT_ADAM) for b in grads for _ in range(2)]
        freed_by(a, grads, P.CallSite(py=P.FT_FREE_ZERO_GRAD))
        grads = []
    return grads, adam


def lora_scenario(out, name, steps, layers):
    proc = Process()
    a = proc.devices[0]
    # the 4-bit base model and the adapters, loaded before recording started (no stack)
    a.malloc(24 * MiB * layers, P.EXPERT_WEIGHT)
    [a.malloc(128 * KiB, P.EXPERT_WEIGHT) for _ in range(4 * layers)]
    proc.record_memory_history(max_entries=1_048_576)
    grads, adam = lora_finetune(a, steps, layers)
    f = out.take(name, "snapshot.pickle", proc, forms=("v2.1-all",))[a.device]
    f.update({
        "steps": steps, "layers": layers,
        # a step starts where the batch is moved to the device; with one step there is
        # no recurring marker (one forward and backward is all the window holds)
        "step_marker": P.FT_BATCH.site if steps > 1 else None,
        # once per layer in backward, the same stack in every layer: not a step
        "per_layer_sites": [P.FT_NEG_Q.site, P.FT_POW_BWD.site, P.FT_SILU_BWD.site],
        "grad_site": P.FT_LORA_GRAD.site, "grad_blocks": len(grads),
        "grad_bytes": sum(b.size for b in grads),
        "absent": ["growing_python_container", "retained_autograd_graph", "python_reference_cycles"],
    })
    if adam:
        f["optimizer_bytes"] = sum(b.size for b in adam)
    out.plant(name, f)


def scenario_lora_layers(out):
    """One forward and backward of a LoRA fine-tune, as a notebook records it (torch
    2.1's schema, stacks="all"): in backward, stacks that recur once or twice per layer
    (NegBackward0, RMSNorm's PowBackward0, SiluBackward0) at a regular interval over
    more than half the window, while each layer frees its activations and keeps its
    LoRA gradients. Not steps. (A real one had 22 layers; 8 keep the file small.)"""
    lora_scenario(out, "lora_layers", steps=1, layers=8)


def scenario_lora_steps(out):
    """Three steps of the same fine-tune, optimizer.step() and zero_grad() between
    them (3 layers, to keep the file small): the steps start at the batch."""
    lora_scenario(out, "lora_steps", steps=3, layers=3)


ALL = [scenario_allocator, scenario_oom, scenario_fragmentation, scenario_retained_graph,
       scenario_growing_container, scenario_optimizer, scenario_reference_cycles, scenario_ddp,
       scenario_leak_diff, scenario_multi_rank, scenario_legacy, scenario_multi_device,
       scenario_long_trace, scenario_ring_buffer, scenario_pithtrain_moe, scenario_lora_layers,
       scenario_lora_steps, scenario_refused]


def generate(root, all_forms=False, extra=()):
    out = Out(root, all_forms)
    for s in ALL + list(extra):
        s(out)
