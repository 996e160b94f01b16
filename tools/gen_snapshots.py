#!/usr/bin/env python3
"""Generate PyTorch CUDA memory snapshots for instrument's tests and benchmark.

The files are what torch writes, object for object (tools/snapgen/): a caching
allocator that behaves like c10/cuda/CUDACachingAllocator.cpp runs pithtrain-like
programs; the snapshot dict is built like torch/csrc/cuda/Module.cpp builds it (shared
key strings, one frame dict per unique frame and one frame list per traceback, shared
between blocks, segments and trace entries, frames recurring inside a stack, the C++
unwinder's and interpreter's frames with stacks="all"); it is written with the
standard `pickle` module (protocols 0-5), with torch::jit::Pickler's protocol 2 (the
C++ API), or as JSON. Each scenario writes `planted.json`, the facts the program
planted, which the Rust tests compare every report with.

    python3 tools/gen_snapshots.py fixtures/snapshots            # the committed fixtures
    python3 tools/gen_snapshots.py --all-forms DIR               # + every scenario in every form
    python3 tools/gen_snapshots.py --random 40 --seed 1 DIR      # randomly shared graphs, pickle + JSON
    python3 tools/gen_snapshots.py --bench OUT.pickle --mb 500   # one large stacks="all" snapshot
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from snapgen import bench, bench_marked, randomized, scenarios, scenarios_run, scenarios_schedule, scenarios_stages  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default="fixtures/snapshots")
    ap.add_argument("--all-forms", action="store_true", help="also write every scenario in every form")
    ap.add_argument("--random", type=int, metavar="N", help="write N random shared graphs as pickle and JSON")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bench", metavar="FILE", help="write one large snapshot for the benchmark")
    ap.add_argument("--mb", type=float, default=500, help="size of the --bench file in MB")
    ap.add_argument("--protocol", type=int, default=4)
    ap.add_argument("--bench-marked", metavar="FILE",
                    help="write one large marked DualPipeV step snapshot for bench/report (--mb, --pp-rank)")
    ap.add_argument("--pp-rank", type=int, default=1, help="the pipeline rank of the --bench-marked step (of pp=2)")
    a = ap.parse_args()
    if a.bench_marked:
        print(json.dumps(bench_marked.generate(a.bench_marked, a.mb * 1e6, pp_rank=a.pp_rank, protocol=a.protocol)))
    elif a.bench:
        facts = bench.generate(a.bench, a.mb * 1e6, a.protocol, a.seed)
        print(json.dumps(facts))
    elif a.random is not None:
        randomized.generate(a.out, a.random, a.seed)
    else:
        scenarios.generate(a.out, a.all_forms, extra=scenarios_run.ALL + scenarios_schedule.ALL + scenarios_stages.ALL)


if __name__ == "__main__":
    main()
