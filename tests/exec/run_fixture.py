"""Run the miniature pithtrain (clean or instrumented) on the fake torch.

Usage: run_fixture.py CHECKOUT [--resume-from STEP] [--profile-start STEP --profile-stop STEP]
                      [--oom-limit GIB]

Prints what the training prints, then one line `RESULT <json>` with the losses, the
final step and the events the fake torch recorded (memory-history calls, snapshots).
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAKE_TORCH = HERE.parent.parent / "fixtures" / "fake_torch"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkout")
    ap.add_argument("--resume-from", type=int)
    ap.add_argument("--profile-start", type=int)
    ap.add_argument("--profile-stop", type=int)
    ap.add_argument("--oom-limit", type=float)
    ap.add_argument("--max-steps", type=int, default=2)
    ap.add_argument("--model", default="qwen3-tiny", help="folder under examples/pretrain_lm")
    args = ap.parse_args()

    checkout = Path(args.checkout).resolve()
    sys.path[:0] = [str(FAKE_TORCH), str(checkout)]
    os.environ.update(RANK="3", LOCAL_RANK="3", WORLD_SIZE="16")
    if args.oom_limit is not None:
        os.environ["FAKE_TORCH_LIMIT_GIB"] = str(args.oom_limit)

    import torch
    from pithtrain.contexts import training
    from pithtrain.tasks.pretrain_lm import PretrainLMCfg, launch

    cfg = PretrainLMCfg()
    cfg.training.model = checkout / "examples" / "pretrain_lm" / args.model
    cfg.training.max_steps = args.max_steps
    scratch = tempfile.TemporaryDirectory(prefix="fixture-run-")
    work = Path(scratch.name)
    cfg.training.memory_profile_output = work
    cfg.training.memory_profile_start = args.profile_start
    cfg.training.memory_profile_stop = args.profile_stop
    if args.resume_from is not None:
        cfg.training.save_location = work
        (work / "torch-dcp" / ("step-%08d" % args.resume_from)).mkdir(parents=True)
        cfg.training.max_steps = args.resume_from + args.max_steps

    error = None
    try:
        launch(cfg)
    except torch.OutOfMemoryError as e:
        error = f"OutOfMemoryError: {e}"
    result = {
        "losses": training.losses,
        "step": training.step,
        "error": error,
        "history": [d for (w, d) in torch.EVENTS if w == "history"],
        "set_device_before_init": [not d[1] for (w, d) in torch.EVENTS if w == "set_device"],
        # NVTX ranges opened per name, and whether every push was popped.
        "nvtx": {
            name: sum(1 for (w, d) in torch.EVENTS if w == "nvtx_push" and d == name)
            for name in sorted({d for (w, d) in torch.EVENTS if w == "nvtx_push"})
        },
        "nvtx_balanced": not torch._nvtx_stack,
    }
    print("RESULT " + json.dumps(result), flush=True)
    scratch.cleanup()
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
