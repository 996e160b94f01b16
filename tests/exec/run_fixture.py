"""Run the miniature pithtrain (clean or instrumented) on the fake torch, one process per
rank, as torchrun would.

Usage: run_fixture.py CHECKOUT [--launch RANKS] [--pp N] [--ep N] [--world N]
                      [--model NAME | --config FILE] [--max-steps N] [--resume-from STEP]
                      [--profile-start STEP --profile-stop STEP]
                      [--oom-limit GIB | --oom-in forward|backward|optimizer]

`--launch 3,14` starts the pipeline group of each listed global rank (the ranks that differ
from it only in their pipeline coordinate of the (pp, dp, cp, ep) mesh), so every pipeline
stage those ranks talk to runs. Each rank's output is printed in rank order, then one line
`RESULT <json>`: the first listed rank's losses, final step, error and the events the fake
torch recorded (memory-history calls, snapshots, NVTX and record_function ranges) at the top level, every
rank's under "ranks", and the host name the processes ran on.

`--oom-in PHASE` makes the first listed rank run out of memory at its first allocation in
that phase of the first step: the memory fraction is cut to what is allocated on entry to
the first forward chunk, backward chunk or optimizer step.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAKE_TORCH = HERE.parent.parent / "fixtures" / "fake_torch"
GPUS_PER_NODE = 8


def parse_args(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("checkout")
    ap.add_argument("--launch", default="3", help="global ranks whose pipeline groups run")
    ap.add_argument("--pp", type=int, default=2, help="pipeline_parallel_size")
    ap.add_argument("--ep", type=int, default=2, help="expert_parallel_size")
    ap.add_argument("--world", type=int, default=16, help="WORLD_SIZE")
    ap.add_argument("--model", default="qwen3-tiny", help="folder under examples/pretrain_lm")
    ap.add_argument("--config", help="a model folder (holding config.json) instead of --model")
    ap.add_argument(
        "--num-chunks", type=int, help="micro-batches per step (default max(4, 2 * pp))"
    )
    ap.add_argument("--max-steps", type=int, default=2)
    ap.add_argument("--resume-from", type=int)
    ap.add_argument("--profile-start", type=int)
    ap.add_argument("--profile-stop", type=int)
    ap.add_argument("--oom-limit", type=float)
    ap.add_argument("--oom-in", choices=["forward", "backward", "optimizer"])
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def launch_ranks(args):
    ranks = [int(r) for r in args.launch.split(",")]
    return ranks


def pipeline_group(rank, pp, world):
    """Global ranks that share `rank`'s (dp, cp, ep) coordinates: its pipeline stages."""
    inner = world // pp
    return [rank % inner + stage * inner for stage in range(pp)]


def main() -> int:
    args = parse_args(sys.argv[1:])
    if args.worker is not None:
        return worker(args)
    listed = launch_ranks(args)
    ranks = sorted({r for rank in listed for r in pipeline_group(rank, args.pp, args.world)})
    scratch = tempfile.TemporaryDirectory(prefix="fixture-run-")
    work = Path(scratch.name)
    (work / "p2p").mkdir()
    procs = {}
    for rank in ranks:
        env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(rank % GPUS_PER_NODE),
            WORLD_SIZE=str(args.world),
            FAKE_TORCH_P2P_DIR=str(work / "p2p"),
        )
        if args.oom_limit is not None:
            env["FAKE_TORCH_LIMIT_GIB"] = str(args.oom_limit)
        out = open(work / f"rank{rank}.out", "w")
        cmd = [sys.executable, __file__, *sys.argv[1:], "--worker", str(rank), "--work", str(work)]
        procs[rank] = (subprocess.Popen(cmd, env=env, stdout=out), out)
    # Like torchrun: when one rank fails, the others are stopped.
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p, _ in procs.values()):
        failed = any(p.poll() not in (None, 0) for p, _ in procs.values())
        if failed or time.monotonic() > deadline:
            for p, _ in procs.values():
                if p.poll() is None:
                    p.terminate()
                    p.wait()
            break
        time.sleep(0.005)
    results = {}
    for rank, (p, out) in procs.items():
        out.close()
        text = (work / f"rank{rank}.out").read_text()
        # rpartition gives the whole text as the tail when there is no RESULT line (a rank
        # stopped before it printed one), and a rank stopped while printing it leaves half.
        prints, found, tail = text.rpartition("RESULT ")
        result = None
        if found:
            try:
                result = json.loads(tail)
            except ValueError:
                result = None
        if result is not None:
            sys.stdout.write(prints)
            results[str(rank)] = result
        else:
            sys.stdout.write(text)
            results[str(rank)] = {"error": f"stopped (exit {p.returncode})"}
    summary = dict(results[str(listed[0])])
    summary["ranks"] = results
    summary["host"] = socket.gethostname()
    print("RESULT " + json.dumps(summary), flush=True)
    scratch.cleanup()
    return 1 if any(r.get("error") for r in results.values()) else 0


def cut_memory_on_entry(torch, owner, name):
    """Wrap owner.name so that, on its first call, nothing more can be allocated."""
    original = getattr(owner, name)
    state = {"done": False}

    def wrapper(*a, **kw):
        if not state["done"]:
            state["done"] = True
            torch.cuda.set_per_process_memory_fraction(torch.cuda.memory_allocated() / torch.TOTAL)
        return original(*a, **kw)

    setattr(owner, name, wrapper)


def worker(args) -> int:
    checkout = Path(args.checkout).resolve()
    sys.path[:0] = [str(FAKE_TORCH), str(checkout)]
    import torch
    from pithtrain.contexts import training
    from pithtrain.tasks.pretrain_lm import PretrainLMCfg, launch

    cfg = PretrainLMCfg()
    cfg.distributed.pipeline_parallel_size = args.pp
    cfg.distributed.expert_parallel_size = args.ep
    if args.config:
        cfg.training.model = Path(args.config).resolve()
    else:
        # As pithtrain's example scripts run: from the checkout, the model relative to it.
        os.chdir(checkout)
        cfg.training.model = Path("examples/pretrain_lm") / args.model
    # As pithtrain does, the step runs global_batch_size // (micro_batch_size * dp * ep)
    # micro-batches.
    dp = args.world // (args.pp * args.ep)
    chunks = args.num_chunks or max(4, 2 * args.pp)
    cfg.training.global_batch_size = chunks * cfg.training.micro_batch_size * dp * args.ep
    cfg.training.max_steps = args.max_steps
    work = Path(args.work)
    cfg.training.memory_profile_output = work / "pithtrain-profile"
    cfg.training.memory_profile_start = args.profile_start
    cfg.training.memory_profile_stop = args.profile_stop
    if args.resume_from is not None:
        cfg.training.save_location = work
        (work / "torch-dcp" / ("step-%08d" % args.resume_from)).mkdir(parents=True, exist_ok=True)
        cfg.training.max_steps = args.resume_from + args.max_steps
    if args.oom_in is not None and args.worker == launch_ranks(args)[0]:
        from pithtrain.dualpipe.dualpipev import DualPipeV
        from pithtrain.modules.training import AdamW

        owner, name = {
            "forward": (DualPipeV, "_forward_compute_chunk"),
            "backward": (DualPipeV, "_backward_compute_chunk"),
            "optimizer": (AdamW, "step"),
        }[args.oom_in]
        cut_memory_on_entry(torch, owner, name)

    error = None
    try:
        launch(cfg)
    except torch.OutOfMemoryError as e:
        error = f"OutOfMemoryError: {e}"
    except Exception as e:
        traceback.print_exc()
        error = f"{type(e).__name__}: {e}"
    sys.stdout.flush()
    result = {
        "losses": training.losses,
        "step": training.step,
        "error": error,
        "history": [d for (w, d) in torch.EVENTS if w == "history"],
        "snapshots": sum(1 for (w, _) in torch.EVENTS if w == "snapshot"),
        "set_device_before_init": [not d[1] for (w, d) in torch.EVENTS if w == "set_device"],
        # NVTX ranges opened per name, and whether every push was popped.
        "nvtx": {
            name: sum(1 for (w, d) in torch.EVENTS if w == "nvtx_push" and d == name)
            for name in sorted({d for (w, d) in torch.EVENTS if w == "nvtx_push"})
        },
        "nvtx_balanced": not torch._nvtx_stack,
        # record_function ranges opened, in order.
        "record_function": [d for (w, d) in torch.EVENTS if w == "record_function"],
    }
    print("RESULT " + json.dumps(result), flush=True)
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
