#!/usr/bin/env python3
"""The second reading of the real snapshots in fixtures/snapshots/real/: plain
`pickle.load` and a few lines per fact, written to reading.json, which
tests/it/snapshot_real.rs compares `instrument snapshot` with (and reruns this to check
that reading.json is what it says).

    python3 tools/snapshot_real_reading.py            # write reading.json
    python3 tools/snapshot_real_reading.py --print    # print it instead
"""

import bisect
import json
import os
import pickle
import pickletools
import sys

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "snapshots", "real")
REFUSED = {"GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "PERSID",
           "BINPERSID", "EXT1", "EXT2", "EXT4"}


def load(path):
    data = open(path, "rb").read()
    assert not ({op.name for op, _, _ in pickletools.genops(data)} & REFUSED), path
    return pickle.loads(data)


def kind(frame):
    """torch, library, stdlib, user or native, from the file name alone."""
    f = frame["filename"].replace("\\", "/")
    if not f.endswith(".py"):
        return "native"
    if "/site-packages/torch/" in f:
        return "torch"
    if "/site-packages/" in f or "/dist-packages/" in f:
        return "library"
    if "/lib/python3" in f or "/python/cpython-" in f:
        return "stdlib"
    return "user"


def key(frame):
    return None if frame is None else [frame["filename"], frame["line"], frame["name"]]


def reading(path):
    s = load(path)
    live = [b for seg in s["segments"] for b in seg["blocks"] if b["state"] == "active_allocated"]
    facts = {
        "segments": len(s["segments"]),
        "reserved_bytes": sum(seg["total_size"] for seg in s["segments"]),
        "allocated_bytes": sum(b["size"] for b in live),
        "allocated_blocks": len(live),
        "inactive_bytes": sum(b["size"] for seg in s["segments"] for b in seg["blocks"] if b["state"] == "inactive"),
        "trace_events": [len(t) for t in s["device_traces"]],
    }
    counts = {}
    for t in s["device_traces"]:
        for e in t:
            counts[e["action"]] = counts.get(e["action"], 0) + 1
    facts["trace_counts"] = counts
    nostack = [b for b in live if not b.get("frames")]
    facts["no_stack"] = {"bytes": sum(b["size"] for b in nostack), "blocks": len(nostack)}
    # live bytes by (first user frame, first library frame before it)
    sites = {}
    for b in live:
        user = lib = None
        for fr in b.get("frames") or []:
            k = kind(fr)
            if k == "user":
                user = fr
                break
            if k == "library" and lib is None:
                lib = fr
        if user is None:
            continue
        e = sites.setdefault(json.dumps([key(user), key(lib)]), {"site": key(user), "library": key(lib),
                                                                 "bytes": 0, "blocks": 0})
        e["bytes"] += b["size"]
        e["blocks"] += 1
    facts["user_sites"] = sorted(sites.values(), key=lambda e: (-e["bytes"], e["site"]))[:6]
    # model.to(): blocks whose innermost Python frame is torch's Module.convert
    facts["convert_bytes"] = sum(
        b["size"] for b in live
        if [fr for fr in (b.get("frames") or []) if kind(fr) != "native"][:1]
        and [fr for fr in b["frames"] if kind(fr) != "native"][0]["name"] == "convert")
    anns = s.get("external_annotations") or []
    facts["annotations"] = {}
    for a in anns:
        k = f'{a["name"]} {a["stage"]}'
        facts["annotations"][k] = facts["annotations"].get(k, 0) + 1
    # the entries of device 0's trace where a zero_grad starts, inside the window
    t = s["device_traces"][0] if s["device_traces"] else []
    times = [e["time_us"] for e in t]
    facts["zero_grad_starts"] = sorted({
        bisect.bisect_left(times, a["time_us"]) for a in anns
        if a["name"].startswith("Optimizer.zero_grad#") and a["stage"] == "START" and times
        and times[0] <= a["time_us"] <= times[-1]})
    return facts


def main():
    out = {name: reading(os.path.join(DIR, name)) for name in sorted(os.listdir(DIR)) if name.endswith(".pickle")}
    text = json.dumps(out, indent=1, sort_keys=True) + "\n"
    if "--print" in sys.argv:
        sys.stdout.write(text)
    else:
        with open(os.path.join(DIR, "reading.json"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
