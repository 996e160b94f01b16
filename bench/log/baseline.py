#!/usr/bin/env python3
"""Baseline for `instrument log`: what a person does today. `grep -a -F '[rank='` picks
the print lines out of the log, and this script reads them with regular expressions
written for today's memory prints, computing the same facts the benchmark compares:
per rank (the last run it printed), the number of schedule points, the peak allocation
of the profiled step (schedule points and layer probes), the CUDA-context, NCCL and
device-mesh costs, and the snapshot path (the print says HOST:PATH).

    grep -a -F '[rank=' LOG | python3 bench/log/baseline.py
"""

import json
import re
import sys

PREFIXED = re.compile(r"\[rank=(\d+)(?: pp=(\d+))?\](.*)$")
INIT = re.compile(r" init_process_group \| cuda_ctx=([-\d.]+) after_nccl_world=([-\d.]+) nccl_world_cost=([-\d.]+)$")
MESH = re.compile(r" init_device_mesh \| non-pt=([-\d.]+) mesh_cost=([-\d.]+)$")
POINT = re.compile(r" [^:]+: ([-\d.]+) GiB (?:\(.*\) )?\| alloc=[-\d.]+ cached=[-\d.]+ non-pt=[-\d.]+$")
PROBE = re.compile(r": alloc=([-\d.]+)$")
SNAPSHOT = re.compile(r" Memory snapshot saved to [^:\s]+:(\S.*)$")  # HOST:PATH


def main() -> int:
    ranks = {}
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        line = line.rsplit("\r", 1)[-1]
        i = line.find("[rank=")
        if i < 0:
            continue
        m = PREFIXED.match(line, i)
        if not m:
            continue
        rank, pp, rest = int(m.group(1)), m.group(2), m.group(3)
        if pp is None:
            init = INIT.match(rest)
            if init:
                # Setup again: a new run of this rank.
                ranks[rank] = {"points": 0, "peak": None, "in_step": False, "snapshot": None,
                               "cuda_ctx": float(init.group(1)), "nccl_world": float(init.group(3))}
                continue
            st = ranks.get(rank)
            if st is None:
                continue
            mesh = MESH.match(rest)
            if mesh:
                st["mesh"] = float(mesh.group(2))
                continue
            snap = SNAPSHOT.match(rest)
            if snap:
                st["snapshot"] = snap.group(1)
                continue
            probe = PROBE.search(rest)
            if probe and st["in_step"] and not st.get("done"):
                v = float(probe.group(1))
                st["peak"] = v if st["peak"] is None else max(st["peak"], v)
            continue
        st = ranks.get(rank)
        if st is None:
            continue
        point = POINT.match(rest)
        if point and not st.get("done"):
            v = float(point.group(1))
            st["points"] += 1
            st["in_step"] = True
            st["peak"] = v if st["peak"] is None else max(st["peak"], v)
            if rest.startswith(" After Step8"):
                st["done"] = True
    facts = {
        str(r): {
            "points": st["points"],
            "peak_gib": "%.2f" % st["peak"] if st["peak"] is not None else None,
            "cuda_ctx_gib": "%.2f" % st["cuda_ctx"],
            "nccl_world_gib": "%.2f" % st["nccl_world"],
            "mesh_gib": "%.2f" % st.get("mesh", 0.0),
            "snapshot": st["snapshot"],
        }
        for r, st in sorted(ranks.items())
    }
    json.dump(facts, sys.stdout, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
