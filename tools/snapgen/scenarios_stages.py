"""Memory per DualPipeV layer stage, by the Python frames torch records with each
allocation (`instrument report`'s `stage_memory`): a marked step whose allocations are made
inside pithtrain 889a408's stage functions (dualpipe/execution.py's overlapped ``stage3_f``,
``stage3_b``, ``stage3_w``, the fused ``stage5_and_stage1_f``/``_b``, the plain path's
``layer_forward_dispatch``/``layer_forward_combine``, the model methods
``forward_stage1``/``forward_stage1_compute``/``forward_stage3``/``forward_stage5``), with
sizes of its own choosing. Planted per stage, as pithtrain's NVTX ranges name the stage that
the function runs in (the fused function counts as its stage 1, as Nsight Systems counts
``layer05_stage5_b_layer06_stage1_b``): bytes and allocations made inside it during the
schedule, of those the bytes still live when the schedule ends, and the site (the stage's
innermost pithtrain frame) that allocated the most. Also planted: what no stage function is
on the stack of (the bytes with no Python frame at all among them), and what lies outside the
schedule's marks (not counted).
"""

from . import program as P
from .allocator import KiB, MiB, Process
from .frames import CallSite, PITH, TORCH, op, py

EXEC = f"{PITH}/dualpipe/execution.py"
MODEL = f"{PITH}/models/qwen3_moe.py"
LINEAR = py(f"{TORCH}/nn/functional.py", 2151, "linear")
# The chunk call around every stage: DualPipeV.step's forward and backward chunk frames.
CHUNK = P.FWD
LAYER_FORWARD = py(EXEC, 571, "layer_forward")


def frame_label(f):
    return f"{f.filename}:{f.line} in {f.name}"


class Program:
    """Allocates and frees as the step does, keeping the truth per stage."""

    def __init__(self, a):
        self.a = a
        self.stages = {}
        self.unattributed = 0
        self.no_python = 0
        self.in_schedule = False
        self.live = {}  # block -> stage, for what the schedule allocated inside a stage

    def alloc(self, size, inner, callers, stage, cpp=False):
        """`inner`: the stage's innermost pithtrain frame (the site), under a torch op;
        `callers`: the frames outside it; `stage`: the stage it counts in (None: none)."""
        frames = ([LINEAR, inner] if inner else []) + callers
        # What the generic reader calls it, where it is still live in the snapshot: a forward
        # stage's tensor is an activation (only those outlive the program below).
        category = "activations" if stage and stage.endswith("_f") else "other"
        site = CallSite(py=frames, cpp=op("empty", binding=False), thread="autograd" if cpp else "main",
                        site=P.site(inner) if inner else None, category=category)
        b = self.a.malloc(size, site)
        if not self.in_schedule:
            return b
        if stage is None:
            self.unattributed += size
            if not frames:
                self.no_python += size
            return b
        s = self.stages.setdefault(stage, {"stage": stage, "allocated_bytes": 0, "allocations": 0,
                                           "kept_bytes": 0, "sites": {}})
        s["allocated_bytes"] += size
        s["allocations"] += 1
        site_bytes = s["sites"].setdefault(frame_label(inner), [0, 0])
        site_bytes[0] += size
        site_bytes[1] += 1
        self.live[id(b)] = (stage, size)
        return b

    def free(self, b):
        if self.in_schedule:
            self.live.pop(id(b), None)
        self.a.free(b)

    def end_schedule(self):
        """What the schedule allocated in a stage and is live now is kept at the step's end."""
        for stage, size in self.live.values():
            self.stages[stage]["kept_bytes"] += size
        self.in_schedule = False

    def truth(self):
        out = []
        for name in sorted(self.stages):
            s = dict(self.stages[name])
            sites = s.pop("sites")
            site, (b, n) = max(sites.items(), key=lambda kv: kv[1][0])
            assert sum(1 for v in sites.values() if v[0] == b) == 1, (name, sites)  # no tie to break
            s["largest_site"] = {"site": site, "bytes": b, "allocations": n}
            out.append(s)
        return out


def scenario_stage_frames(out):
    """One pipeline rank's marked step (two chunk calls of DualPipeV.step inside their
    record_function ranges) whose allocations pass through pithtrain's stage functions."""
    proc = Process()
    a = proc.devices[0]
    params = [a.malloc(8 * MiB, P.EXPERT_WEIGHT) for _ in range(2)]
    proc.record_memory_history(max_entries=1_048_576)
    p = Program(a)
    # Before the schedule: a stage function allocates (a warm-up of the step's own), not counted.
    early = p.alloc(8 * MiB, py(MODEL, 208, "forward_stage1"), [LAYER_FORWARD] + CHUNK, "stage1_f")

    fwd, bwd = "S1.i0 fwd(p0) c0", "S6.i0 bwd(p0,zb=False) c0"
    a.clock.advance(1_000)
    a.annotate(fwd, "START")
    p.in_schedule = True
    # The plain path (layer_forward): the model methods and the two all-to-alls.
    s1 = [p.alloc(3 * MiB, py(MODEL, 70, "forward_stage1_compute"),
                  [py(MODEL, 80, "forward_stage1"), LAYER_FORWARD] + CHUNK, "stage1_f") for _ in range(2)]
    t = p.alloc(1 * MiB, py(MODEL, 84, "forward_stage1"), [LAYER_FORWARD] + CHUNK, "stage1_f")
    p.free(t)
    s2 = p.alloc(5 * MiB, py(EXEC, 534, "layer_forward_dispatch"), [LAYER_FORWARD] + CHUNK, "stage2_f")
    s3 = [p.alloc(7 * MiB, py(MODEL, 95, "forward_stage3"), [LAYER_FORWARD] + CHUNK, "stage3_f")
          for _ in range(3)]
    s4 = p.alloc(2 * MiB, py(EXEC, 549, "layer_forward_combine"), [LAYER_FORWARD] + CHUNK, "stage4_f")
    s5 = p.alloc(4 * MiB, py(MODEL, 110, "forward_stage5"), [LAYER_FORWARD] + CHUNK, "stage5_f")
    # layer_forward's own allocation: no stage function on the stack.
    own = p.alloc(512 * KiB, py(EXEC, 640, "layer_forward"), CHUNK, None)
    # The overlapped path: stage3_f calls forward_stage3; the fused stage 5 + stage 1 calls
    # forward_stage5, and counts as stage 1.
    o3 = p.alloc(6 * MiB, py(MODEL, 99, "forward_stage3"), [py(EXEC, 201, "stage3_f")] + CHUNK, "stage3_f")
    fused = p.alloc(5 * MiB, py(MODEL, 112, "forward_stage5"),
                    [py(EXEC, 377, "stage5_and_stage1_f")] + CHUNK, "stage1_f")
    # A function named as a stage in a file that is not pithtrain's execution.py: no stage.
    other = p.alloc(1536 * KiB, py("/workspace/other/execution.py", 9, "stage1_f"), CHUNK, None)
    a.annotate(fwd, "END")

    a.clock.advance(1_000)
    a.annotate(bwd, "START")
    grad = p.alloc(9 * MiB, py(EXEC, 399, "stage5_and_stage1_b"), [py(EXEC, 700, "_backward_chunk")] + CHUNK,
                   "stage1_b")
    t = p.alloc(2 * MiB, py(EXEC, 225, "stage3_b"), [py(EXEC, 700, "_backward_chunk")] + CHUNK, "stage3_b")
    p.free(t)
    # The autograd engine's own thread: no Python frame at all.
    eng = p.alloc(10 * MiB, None, [], None, cpp=True)
    p.free(eng)
    w = p.alloc(3 * MiB, py(EXEC, 240, "stage3_w"), [py(EXEC, 720, "_weight_chunk")] + CHUNK, "stage3_w")
    for b in s1 + [s2, s4, s5, o3, fused, own, other] + s3[:2]:
        p.free(b)
    a.annotate(bwd, "END")
    p.end_schedule()
    # After the schedule: the fused backward's and the weight step's tensors are freed (kept at
    # the step's end all the same), and a stage function allocates again (not counted).
    p.free(grad)
    p.free(w)
    late = p.alloc(1 * MiB, py(EXEC, 241, "stage3_w"), CHUNK, "stage3_w")
    p.free(late)
    f = out.take("stage_frames", "snapshot.pickle", proc)[a.device]
    f.update({"stage_memory": {"window": "schedule", "stages": p.truth(),
                               "unattributed_bytes": p.unattributed,
                               "without_python_frames_bytes": p.no_python,
                               "allocated_bytes": p.unattributed + sum(s["allocated_bytes"]
                                                                       for s in p.stages.values())},
              "not_counted_bytes": [early.req, 1 * MiB], "live_at_the_end_bytes": [s3[2].req],
              "params": len(params)})
    out.plant("stage_frames", f)


ALL = [scenario_stage_frames]
