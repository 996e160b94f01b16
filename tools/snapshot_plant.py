#!/usr/bin/env python3
"""Plant a known change into a marked step snapshot, for `instrument report --diff`'s tests.

    python3 tools/snapshot_plant.py SNAPSHOT EVENT BYTES [--file F] [--function FN]

Rewrites SNAPSHOT (a pickle as torch's `_snapshot()` returns it, with the schedule marks in
`external_annotations`) so that one allocation of exactly BYTES, made by a frame in F
(default: torch/optim/adamw.py, the conventions table's "optimizer state"), is live at the
end of the schedule event EVENT and at no other event's end: it is allocated after every
trace entry inside EVENT and freed after EVENT's END, before the next mark. Nothing else
changes: to make room on the clock, every `time_us` (trace and marks) is multiplied by 10,
which keeps their order.

Prints what it planted as JSON: the event, the bytes, the address, the category's frame.
"""

import argparse
import json
import pickle
import sys

SCALE = 10


def plant(snap, event, size, filename, function):
    notes = snap["external_annotations"]
    ends = [a for a in notes if a["name"] == event and a["stage"] == "END"]
    if len(ends) != 1:
        raise SystemExit(f"{event!r}: {len(ends)} END marks in the snapshot, want 1")
    device = ends[0].get("device", 0)
    for a in notes:
        a["time_us"] *= SCALE
    trace = snap["device_traces"][device]
    for e in trace:
        e["time_us"] *= SCALE
    t_end = ends[0]["time_us"]
    used = {e["addr"] for e in trace}
    for seg in snap["segments"]:
        used.add(seg["address"])
    addr = max(used) + (1 << 30)
    frames = [{"filename": filename, "line": 100, "name": function}]
    new = [
        {"action": "alloc", "addr": addr, "size": size, "stream": 0, "frames": frames, "time_us": t_end - 1},
        {"action": "free_requested", "addr": addr, "size": size, "stream": 0, "frames": frames, "time_us": t_end + 1},
        {"action": "free_completed", "addr": addr, "size": size, "stream": 0, "frames": frames, "time_us": t_end + 2},
    ]
    for e in new:
        at = next((i for i, x in enumerate(trace) if x["time_us"] > e["time_us"]), len(trace))
        trace.insert(at, e)
    return {"event": event, "bytes": size, "addr": addr, "device": device, "file": filename}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("snapshot")
    ap.add_argument("event")
    ap.add_argument("bytes", type=int)
    ap.add_argument("--file", default="/usr/lib/python3/site-packages/torch/optim/adamw.py")
    ap.add_argument("--function", default="_init_group")
    a = ap.parse_args()
    with open(a.snapshot, "rb") as f:
        snap = pickle.load(f)
    done = plant(snap, a.event, a.bytes, a.file, a.function)
    with open(a.snapshot, "wb") as f:
        pickle.dump(snap, f)
    json.dump(done, sys.stdout)
    print()


if __name__ == "__main__":
    main()
