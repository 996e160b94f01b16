#!/usr/bin/env python3
"""Logs of an instrumented run, made by running the instrumented fixture on the fake torch,
with the truth the fake torch returned, for `instrument log`'s tests and benchmark.

Each rank runs in its own process (like a torchrun worker), with every stage of its pipeline
group, exchanging activations through the fake torch as tests/exec/run_fixture.py runs it. While it runs, every line it
prints is recorded together with what the fake torch reports at that moment (allocated,
reserved, free and total memory), the non-PyTorch memory around init_process_group and
init_device_mesh, the bytes of every tensor handed to a saved-tensors hook (weights told
by the module parameters), the optimizer state after a checkpoint load, and the snapshot
files the run leaves. That is `truth.json`: what the tests compare `instrument log`'s
report with, never with its own output.

The workers' output is then laid out the way launchers lay it out (from their sources):
- torchrun --tee 3 (torch/distributed/elastic/multiprocessing/tail_log.py): every line a
  worker writes goes to the console behind `[{role}{local_rank}]:`; the tailer reads with
  readline(), so a line the worker has only half written when the tailer polls comes out
  as two pieces, each behind the header, the first one not ended by a line end (other
  workers' lines can land in between);
- torchrun with TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[rank${rank}]:" (global rank), and
  the c10 logger's own `[rank14]:[W502 ...]` prefix on C++ warnings (torch >= 2.4);
- srun --label (src/common/write_labelled_message.c): `%0*d: ` with the width of the
  largest task id, and a line end added after a chunk that did not end with one;
- torchrun --log-dir (elastic/multiprocessing/api.py, DefaultLogsSpecs):
  `<log_dir>/<run_id>_<random>/attempt_<N>/<local_rank>/{stdout,stderr}.log` and
  `error.json`, the workers' raw output;
- a log collector that puts a timestamp before each line.
Noise between the prints: NCCL INFO lines, Python warnings, tqdm progress bars written
with carriage returns, torchrun's own lines, a line with U+FFFD (torchrun's tailer opens
files with errors="replace"), CRLF line ends in one file.

    python3 tools/log_fixture.py scenario --checkout DIR --example qwen3-tiny --pp 2 \\
        --ranks 3,14 --snapshot-dir DIR --out DIR [--hold-mib 14:300] [--resume-from 5]
        [--oom-in backward [--oom-request-mib 1536 --oom-free-mib 600]] [--nccl-world-gib 14:1.5]
        [--no-oom-observer] [--absolute-model] [--extra-saved LAYER:MIB]
"""

import argparse
import gzip
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAKE_TORCH = HERE.parent / "fixtures" / "fake_torch"
MIB = 1 << 20
GPUS_PER_NODE = 8
WORLD = 16


# --- one worker -------------------------------------------------------------------------


def worker(args) -> int:
    """Run one rank of the instrumented checkout, recording the truth (child process)."""
    checkout = Path(args.checkout).resolve()
    sys.path[:0] = [str(FAKE_TORCH), str(checkout)]
    rank = int(os.environ["RANK"])
    import builtins

    import torch

    truth = {"rank": rank, "pp_rank": None, "mesh": {}, "prints": [], "saved": [], "setup": {}}
    real_print = builtins.print

    def non_pt():
        free, total = torch.cuda.mem_get_info()
        return total - free - torch.cuda.memory_reserved()

    def recording_print(*a, **k):
        sep, end = k.get("sep", " "), k.get("end", "\n")
        text = sep.join(str(x) for x in a)
        free, total = torch.cuda.mem_get_info()
        truth["prints"].append(
            {
                "text": text,
                "allocated": torch.cuda.memory_allocated(),
                "reserved": torch.cuda.memory_reserved(),
                "free": free,
                "total": total,
            }
        )
        k.pop("file", None)
        real_print(*a, **k)
        assert end == "\n"

    builtins.print = recording_print

    def around(obj, name, before=None, after=None):
        inner = getattr(obj, name)

        def wrapped(*a, **k):
            if before:
                before(*a, **k)
            out = inner(*a, **k)
            if after:
                after(out, *a, **k)
            return out

        setattr(obj, name, wrapped)

    setup = truth["setup"]
    around(
        torch.distributed,
        "init_process_group",
        before=lambda *a, **k: setup.__setitem__("non_pt_before_init", non_pt()),
        after=lambda *a, **k: setup.__setitem__("non_pt_after_init", non_pt()),
    )
    around(
        torch.distributed,
        "init_device_mesh",
        before=lambda *a, **k: setup.__setitem__("non_pt_before_mesh", non_pt()),
        after=lambda *a, **k: setup.__setitem__("non_pt_after_mesh", non_pt()),
    )

    # This rank's pipeline stage, as the device mesh tells pithtrain.
    get_local_rank = torch.distributed.DeviceMesh.get_local_rank

    def recording_local_rank(self, name):
        out = get_local_rank(self, name)
        if name == "pp":
            truth["pp_rank"] = out
        # Every coordinate the mesh gives this rank, with the size of its dimension.
        truth["mesh"][name] = [out, self.shape[self.names.index(name)]]
        return out

    torch.distributed.DeviceMesh.get_local_rank = recording_local_rank

    # Saved tensors: group what each hook context is handed, weight or not by the
    # parameters of the modules.
    weights = set()
    current = []
    Hooks = torch.autograd.graph.saved_tensors_hooks

    class RecordingHooks(Hooks):
        def __init__(self, pack, unpack):
            prof = getattr(pack, "__self__", None)
            self._group = {
                "layer": getattr(prof, "_layer_idx", None),
                "stage": getattr(prof, "_stage_name", None),
                "activation_bytes": 0,
                "weight_bytes": 0,
                "count": 0,
            }
            super().__init__(pack, unpack)

        def __enter__(self):
            truth["saved"].append(self._group)
            current.append(self._group)
            return super().__enter__()

        def __exit__(self, *a):
            current.pop()
            return super().__exit__(*a)

    torch.autograd.graph.saved_tensors_hooks = RecordingHooks
    save = torch._save

    def recording_save(*tensors):
        if current:
            for t in tensors:
                key = "weight_bytes" if t.data_ptr() in weights else "activation_bytes"
                current[-1][key] += t.nbytes()
                current[-1]["count"] += 1
        return save(*tensors)

    torch._save = recording_save

    from pithtrain.dualpipe import dualpipev

    step = dualpipev.DualPipeV.step
    held = {}

    def recording_step(self, *a, **k):
        weights.clear()
        for m in self.module:
            weights.update(p.data_ptr() for p in m.parameters())
        if args.hold_mib:
            held["t"] = torch.Tensor([0.0] * args.hold_mib)
            truth["held_bytes"] = held["t"].nbytes()
        out = step(self, *a, **k)
        held.pop("t", None)
        return out

    dualpipev.DualPipeV.step = recording_step

    # A planted change: one layer saves MIB more for backward in its first stage, in every
    # forward (kept with the stage's outputs until that chunk's backward).
    if args.extra_saved:
        layer_id, mib = (int(x) for x in args.extra_saved.split(":"))
        from pithtrain.models import deepseek_v2, gpt_oss, qwen3_moe, qwen35_moe

        layers = [
            deepseek_v2.DeepSeekV2DecoderLayer,
            gpt_oss.GptOssDecoderLayer,
            qwen3_moe.Qwen3MoeDecoderLayer,
            qwen35_moe.Qwen35MoeDecoderLayer,
        ]
        for cls in layers:
            inner_stage1 = cls.forward_stage1

            def planted_stage1(self, *a, _inner=inner_stage1, **k):
                out = _inner(self, *a, **k)
                if self.idx == layer_id:
                    extra = torch.Tensor([0.0] * mib)
                    torch._save(extra)
                    out[1]._planted = extra
                    truth["planted_bytes"] = truth.get("planted_bytes", 0) + extra.nbytes()
                return out

            cls.forward_stage1 = planted_stage1

    from pithtrain.contexts import training
    from pithtrain.tasks import pretrain_lm
    from pithtrain.tasks.pretrain_lm import PretrainLMCfg, launch

    load = pretrain_lm.load_checkpoint

    def recording_load(cfg):
        load(cfg)
        if args.resume_from is None:
            return
        state = 0
        for opt in training.optimizers:
            for st in opt.state.values():
                for s in st.values():
                    if isinstance(s, torch.Tensor):
                        state += s.nbytes()
        setup["optimizer_state_bytes"] = state

    pretrain_lm.load_checkpoint = recording_load

    # As tests/exec/run_fixture.py runs it: expert parallel 2, max(4, 2 * pp) micro-batches.
    cfg = PretrainLMCfg()
    cfg.distributed.pipeline_parallel_size = args.pp
    cfg.distributed.expert_parallel_size = 2
    if args.absolute_model:
        cfg.training.model = checkout / "examples" / "pretrain_lm" / args.example
    else:
        # As pithtrain's example scripts run: from the checkout, the model relative to it.
        os.chdir(checkout)
        cfg.training.model = Path("examples") / "pretrain_lm" / args.example
    # max(4, 2 * pp) micro-batches: global_batch_size // (micro_batch_size * dp * ep), as
    # pithtrain's train_step divides it.
    dp = WORLD // (args.pp * cfg.distributed.expert_parallel_size)
    cfg.training.global_batch_size = max(4, 2 * args.pp) * cfg.training.micro_batch_size * dp * 2
    cfg.training.max_steps = 2
    work = Path(args.work)
    cfg.training.memory_profile_output = work
    if args.resume_from is not None:
        cfg.training.save_location = work
        (work / "torch-dcp" / ("step-%08d" % args.resume_from)).mkdir(parents=True, exist_ok=True)
        cfg.training.max_steps = args.resume_from + 2
    # What the allocator tells the out-of-memory observers the instrumented run attaches.
    truth["oom"] = []
    if args.no_oom_observer:
        # A torch without the OOM observer hook (older releases have none).
        del torch._C._cuda_attach_out_of_memory_observer
    else:
        attach = torch._C._cuda_attach_out_of_memory_observer

        def recording_attach(observer):
            def recording_observer(device, size, allowed, free):
                truth["oom"].append({"requested": size, "allowed": allowed, "free": free})
                return observer(device, size, allowed, free)

            return attach(recording_observer)

        torch._C._cuda_attach_out_of_memory_observer = recording_attach
    if args.oom_in:
        # Nothing more can be allocated from the first forward (or backward) chunk on; with
        # --oom-request-mib the chunk begins by asking for that much (a large buffer) while
        # --oom-free-mib is left free, so the allocator's figures are large enough to print.
        owner = dualpipev.DualPipeV
        name = {"forward": "_forward_compute_chunk", "backward": "_backward_compute_chunk"}[args.oom_in]
        inner_chunk = getattr(owner, name)
        cut = {"done": False}

        def cut_on_entry(*a, **k):
            if not cut["done"]:
                cut["done"] = True
                room = args.oom_free_mib * MIB
                torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_allocated() + room) / torch.TOTAL)
                if args.oom_request_mib:
                    torch.Tensor([0.0] * args.oom_request_mib)
            return inner_chunk(*a, **k)

        setattr(owner, name, cut_on_entry)
    truth["max_steps"] = cfg.training.max_steps
    truth["run"] = {
        "mbs": cfg.training.micro_batch_size,
        "seq": cfg.training.sequence_length,
        "gbs": cfg.training.global_batch_size,
        "world": WORLD,
        "model": str(cfg.training.model),
    }
    truth["oom_observer"] = hasattr(torch._C, "_cuda_attach_out_of_memory_observer")
    code = 0
    try:
        launch(cfg)
    except torch.OutOfMemoryError:
        code = 1
    builtins.print = real_print
    Path(args.truth).write_text(json.dumps(truth, indent=1))
    return code


# --- the noise a real run prints around the memory prints --------------------------------

WARNING = (
    "/usr/local/lib/python3.11/site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_state.py:98: "
    "UserWarning: The reduce-scatter of this module's gradients runs in float32.",
    "  warnings.warn(",
)


def nccl_info(host: str, local: int, rng: random.Random) -> str:
    pid = 41000 + local
    kinds = [
        f"NCCL INFO Bootstrap : Using eth0:10.1.0.{local + 2}<0>",
        f"NCCL INFO Channel {rng.randrange(32):02d}/32 :    0   1   2   3   4   5   6   7",
        f"NCCL INFO comm 0x55{rng.randrange(1 << 24):06x} rank {local} nranks {WORLD} cudaDev {local} busId {local + 1}0000 - Init COMPLETE",
        "NCCL INFO Connected all rings",
    ]
    return f"{host}:{pid}:{pid + rng.randrange(90)} [{local}] {rng.choice(kinds)}"


def progress_chunks(rng: random.Random):
    """What tqdm writes: one chunk per update, each starting with a carriage return."""
    total = rng.choice([4, 8, 20])
    out = []
    for i in range(total + 1):
        bar = "#" * (10 * i // total)
        out.append(f"\rLoading shards: {100 * i // total:3d}%|{bar:<10}| {i}/{total} [00:0{i % 10}<00:00]")
    out[-1] += "\n"
    return out


def step_line(step: int) -> str:
    return f"step {step:>6d} | loss {10.8 - step * 0.01:.4f} | lr 3.00e-04 | grad_norm 2.13 | 1.24s/it"


def worker_writes(prints, rng: random.Random, host: str, local: int):
    """The worker's output as write() calls: (stream, text) in order, prints among noise."""
    writes = [("stderr", l + "\n") for l in WARNING]
    writes += [("stdout", nccl_info(host, local, rng) + "\n") for _ in range(3)]
    for i, p in enumerate(prints):
        if i == 7:
            writes += [("stderr", c) for c in progress_chunks(rng)]
        if i % 9 == 4:
            writes.append(("stdout", nccl_info(host, local, rng) + "\n"))
        if i % 31 == 30:
            writes.append(("stderr", step_line(i) + "\n"))
        writes.append(("stdout", p["text"] + "\n"))
    writes.append(("stderr", "This line holds a replacement character: \ufffd (torchrun reads with errors=replace)\n"))
    writes.append(("stdout", "[rank=%d] loss=10.79 this user line starts like a print\n" % prints[0]["rank"]))
    return writes


# --- launchers -----------------------------------------------------------------------------


def torchrun_tee(streams, header_of, rng: random.Random, split_print=None):
    """The console of one node under torchrun --tee 3: each worker's lines behind its
    header, workers interleaved write by write. `split_print` (worker, write index) is a
    print the tailer catches half written: its first part comes out behind the header
    without a line end, one line of another worker follows, then the rest of the print
    behind the header again."""
    queues = {w: list(ws) for w, ws in streams.items()}
    out = []
    index = {w: 0 for w in streams}
    while any(queues.values()):
        w = rng.choice([k for k, q in queues.items() if q])
        stream, text = queues[w].pop(0)
        i = index[w]
        index[w] += 1
        h = header_of(w)
        if split_print != (w, i):
            out.append(h + text)
            continue
        cut = len(text) * 2 // 5
        out.append(h + text[:cut])
        others = [k for k, q in queues.items() if q and k != w]
        if others:
            o = rng.choice(others)
            out.append(header_of(o) + queues[o].pop(0)[1])
            index[o] += 1
        out.append(h + text[cut:])
    return "".join(out)


def srun_label(streams, rng: random.Random):
    """srun --label: `%0*d: ` (width of the largest task id) before each line, and a
    line end after a chunk that had none."""
    width = len(str(WORLD - 1))
    queues = {w: list(ws) for w, ws in streams.items()}
    out = []
    while any(queues.values()):
        w = rng.choice([k for k, q in queues.items() if q])
        _, text = queues[w].pop(0)
        for piece in text.splitlines(keepends=True):
            out.append("%0*d: " % (width, w) + piece + ("" if piece.endswith("\n") else "\n"))
    return "".join(out)


def scenario(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ranks = [int(r) for r in args.ranks.split(",")]
    holds = dict((int(a), int(b)) for a, b in (h.split(":") for h in args.hold_mib)) if args.hold_mib else {}
    nccl = dict((int(a), float(b)) for a, b in (h.split(":") for h in args.nccl_world_gib or []))
    truths = {}
    procs = []
    # Like torchrun: one process per rank, every stage of each listed rank's pipeline
    # group (the ranks it sends to and receives from), exchanging through the fake torch.
    inner = WORLD // args.pp
    everyone = sorted({r % inner + stage * inner for r in ranks for stage in range(args.pp)})
    p2p = out / "p2p"
    p2p.mkdir(exist_ok=True)
    for rank in everyone:
        work = out / f"work-rank{rank}"
        work.mkdir(exist_ok=True)
        cmd = [
            sys.executable, str(Path(__file__).resolve()), "worker",
            "--checkout", args.checkout, "--example", args.example, "--pp", str(args.pp),
            "--work", str(work), "--truth", str(out / f"truth-rank{rank}.json"),
        ]
        if rank in holds:
            cmd += ["--hold-mib", str(holds[rank])]
        if args.resume_from is not None:
            cmd += ["--resume-from", str(args.resume_from)]
        if args.oom_in and rank == ranks[0]:
            cmd += ["--oom-in", args.oom_in]
            cmd += ["--oom-request-mib", str(args.oom_request_mib), "--oom-free-mib", str(args.oom_free_mib)]
        if args.no_oom_observer:
            cmd += ["--no-oom-observer"]
        if args.absolute_model:
            cmd += ["--absolute-model"]
        if args.extra_saved:
            cmd += ["--extra-saved", args.extra_saved]
        env = dict(
            os.environ,
            PYTHONDONTWRITEBYTECODE="1",
            RANK=str(rank),
            LOCAL_RANK=str(rank % GPUS_PER_NODE),
            WORLD_SIZE=str(WORLD),
            FAKE_TORCH_P2P_DIR=str(p2p),
        )
        if rank in nccl:
            env["FAKE_TORCH_NCCL_WORLD_GIB"] = str(nccl[rank])
        procs.append((rank, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)))
    # A rank that runs out of memory stops its pipeline partners waiting; torchrun would
    # stop them too.
    deadline = time.monotonic() + 120
    while any(p.poll() is None for _, p in procs):
        failed = not args.oom_in and any(p.poll() not in (None, 0) for _, p in procs)
        if failed or time.monotonic() > deadline:
            for _, p in procs:
                if p.poll() is None:
                    p.terminate()
            break
        time.sleep(0.01)
    for rank, p in procs:
        stdout, stderr = p.communicate()
        if rank not in ranks:
            continue
        if p.returncode != 0 and not args.oom_in:
            sys.stderr.write(stderr)
            return p.returncode
        truths[rank] = json.loads((out / f"truth-rank{rank}.json").read_text())
        truths[rank]["stdout"] = stdout
    rng = random.Random(args.seed)
    # What each worker writes, with each print's index among its writes.
    writes = {}
    for rank in ranks:
        prints = [dict(p, rank=rank) for p in truths[rank]["prints"]]
        host = "node%d" % (rank // GPUS_PER_NODE)
        writes[rank] = worker_writes(prints, rng, host, rank % GPUS_PER_NODE)
    cut = {}
    files = {}
    # One console per node: torchrun --tee 3; node 0 with the default headers and one print
    # caught half written, node 1 with a global-rank header template, gzipped.
    nodes = sorted({r // GPUS_PER_NODE for r in ranks})
    for node in nodes:
        mine = {r: writes[r] for r in ranks if r // GPUS_PER_NODE == node}
        others = {}
        for local in (0, 5):
            g = node * GPUS_PER_NODE + local
            if g not in mine:
                others[g] = [("stdout", nccl_info("node%d" % node, local, rng) + "\n") for _ in range(4)]
        streams = {**mine, **others}
        split = None
        if node == nodes[0]:
            w = min(mine)
            # Split the 12th print (a schedule or layer line, never the last).
            idxs = [i for i, (s, t) in enumerate(mine[w]) if t.startswith("[rank=")]
            split = (w, idxs[min(11, len(idxs) - 2)])
            printed = [i for i, (s, t) in enumerate(mine[w]) if t.startswith("[rank=") and not t.startswith("[rank=%d] loss" % w)]
            cut[w] = printed.index(split[1])
        if node == nodes[0]:
            header = lambda w: "[default%d]:" % (w % GPUS_PER_NODE)
            text = (
                "W0502 14:06:50.123000 140 torch/distributed/run.py:793] \n"
                "W0502 14:06:50.123000 140 torch/distributed/run.py:793] *****************************************\n"
                "W0502 14:06:50.123000 140 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. \n"
            )
            text += torchrun_tee(streams, header, rng, split)
            name = "node%d.console.log" % node
            (out / name).write_text(text)
        else:
            header = lambda w: "[rank%d]:" % w
            text = torchrun_tee(streams, header, rng)
            # The c10 logger's own prefix on a C++ warning (global rank).
            text += "".join(
                "[rank%d]:[W502 14:06:55.821964708 ProcessGroupNCCL.cpp:1113] Warning: WARNING: process group has NOT been destroyed before it is being destructed.\n" % r
                for r in mine
            )
            name = "node%d.console.log.gz" % node
            with gzip.open(out / name, "wt") as f:
                f.write(text)
        files[name] = {"node": node, "cut": {str(w): c for w, c in cut.items() if w // GPUS_PER_NODE == node}}
    # Every rank under srun --label, in one file, with CRLF line ends as a Windows copy.
    text = srun_label(writes, rng)
    (out / "srun.log").write_bytes(text.replace("\n", "\r\n").encode())
    files["srun.log"] = {"cut": {}}
    # torchrun --log-dir on each node: raw worker output, stdout and stderr apart.
    for rank in ranks:
        node = rank // GPUS_PER_NODE
        d = out / "logdir" / ("node%d" % node) / "none_k3j2h1x0" / "attempt_0" / str(rank % GPUS_PER_NODE)
        d.mkdir(parents=True, exist_ok=True)
        for stream in ("stdout", "stderr"):
            (d / ("%s.log" % stream)).write_text("".join(t for s, t in writes[rank] if s == stream))
        (d / "error.json").write_text("{}")
    files["logdir"] = {"cut": {}}
    # A collector's timestamps.
    lines = []
    for rank in ranks:
        for s, t in writes[rank]:
            for piece in t.splitlines():
                lines.append("2025-05-02T14:06:%02d.%06dZ %s" % (len(lines) // 1000 % 60, len(lines) % 1000000, piece))
    (out / "collected.log").write_text("\n".join(lines) + "\n")
    files["collected.log"] = {"cut": {}}
    snapshots = {}
    for rank in ranks:
        snapshots[rank] = sorted(str(p) for p in Path(args.snapshot_dir).glob("memory_snapshot_rank%d*.pickle" % rank))
    result = {
        "host": socket.gethostname(),
        "example": args.example,
        "pp": args.pp,
        "files": files,
        "ranks": {
            str(r): {
                "pp_rank": truths[r]["pp_rank"],
                "mesh": truths[r]["mesh"],
                "run": truths[r]["run"],
                "planted_bytes": truths[r].get("planted_bytes", 0),
                "prints": truths[r]["prints"],
                "saved": truths[r]["saved"],
                "setup": truths[r]["setup"],
                "held_bytes": truths[r].get("held_bytes", 0),
                "oom": truths[r]["oom"],
                "oom_observer": truths[r]["oom_observer"],
                "max_steps": truths[r]["max_steps"],
                "snapshots": snapshots[r],
            }
            for r in ranks
        },
    }
    (out / "truth.json").write_text(json.dumps(result, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker")
    s = sub.add_parser("scenario")
    for p in (w, s):
        p.add_argument("--checkout", required=True)
        p.add_argument("--example", default="qwen3-tiny")
        p.add_argument("--pp", type=int, default=2)
        p.add_argument("--resume-from", type=int)
        p.add_argument("--oom-request-mib", type=int, default=0, help="with --oom-in: the chunk first asks for this")
        p.add_argument("--oom-free-mib", type=int, default=0, help="with --oom-in: memory left free at the cut")
        p.add_argument("--no-oom-observer", action="store_true", help="a torch without the OOM observer hook")
        p.add_argument("--absolute-model", action="store_true", help="configure the model by its absolute path")
        p.add_argument("--extra-saved", help="LAYER:MIB: that layer saves MIB more in stage 1 of every forward")
    w.add_argument("--oom-in", choices=["forward", "backward"])
    w.add_argument("--work", required=True)
    w.add_argument("--truth", required=True)
    w.add_argument("--hold-mib", type=int, default=0)
    s.add_argument("--ranks", default="3,14")
    s.add_argument("--snapshot-dir", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--hold-mib", action="append", help="RANK:MIB held during the profiled step")
    s.add_argument("--oom-in", choices=["forward", "backward"], help="the first rank runs out of memory there")
    s.add_argument("--nccl-world-gib", action="append", help="RANK:GIB the NCCL world costs that rank")
    s.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    return worker(args) if args.cmd == "worker" else scenario(args)


if __name__ == "__main__":
    sys.exit(main())
