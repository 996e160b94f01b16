#!/usr/bin/env python3
"""Cut the real snapshots in fixtures/snapshots/real/ from the files public repositories
committed (see its README.md for sources and licences), then write the second reading.

Each cut stays a valid snapshot, made of the real file's own objects and written with
Python's pickle (protocol 4, as torch's `_dump_snapshot` writes it; shared frame dicts
and frame lists stay shared):

- a subset of whole segments (each segment's blocks add up to its `total_size`, so the
  totals of the cut are the sums of its segments), and
- the newest entries of each `device_traces` list, as torch's ring buffer keeps them
  (`max_entries`); `external_annotations` and `allocator_settings` as they are.

    python3 tools/snapshot_real_fixture.py DECOMFL_memory.pickle ATTENTION_memory.pickle

The sources must be exactly the committed blobs (their sha1 is checked). The files are
unpickled only after checking that they hold no opcode that imports or calls.
"""

import hashlib
import os
import pickle
import pickletools
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "snapshots", "real")

# name -> (git blob sha1 of the source, how to cut)
SOURCES = {
    "decomfl-torch2.9-windows.pickle": ("2f29ac4ec93e1bd28664620602d5db47eb85013c", dict(trace_newest=6100)),
    "attention-torch2.2-stacks-all.pickle": ("c005a26b36b9bc7a4c029dfbc69763fccce0d871", dict(segments=60)),
}

REFUSED = {"GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "PERSID",
           "BINPERSID", "EXT1", "EXT2", "EXT4"}


def blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def load_plain(data):
    bad = {op.name for op, _, _ in pickletools.genops(data)} & REFUSED
    if bad:
        sys.exit(f"refusing to unpickle: {sorted(bad)}")
    return pickle.loads(data)


def cut(snap, trace_newest=None, segments=None):
    out = dict(snap)
    if segments is not None:
        segs = snap["segments"]
        # every segment with a stack anywhere, then the first ones in address order
        framed = [s for s in segs if any(b.get("frames") for b in s["blocks"])]
        rest = [s for s in segs if s not in framed][: max(0, segments - len(framed))]
        keep = {id(s) for s in framed + rest}
        out["segments"] = [s for s in segs if id(s) in keep]
    if trace_newest is not None:
        out["device_traces"] = [t[-trace_newest:] for t in snap["device_traces"]]
    return out


def main():
    srcs = sys.argv[1:]
    if len(srcs) != len(SOURCES):
        sys.exit(__doc__)
    os.makedirs(OUT, exist_ok=True)
    for (name, (sha, how)), src in zip(SOURCES.items(), srcs):
        data = open(src, "rb").read()
        if blob_sha1(data) != sha:
            sys.exit(f"{src}: not the committed blob {sha}")
        snap = cut(load_plain(data), **how)
        with open(os.path.join(OUT, name), "wb") as f:
            pickle.dump(snap, f, protocol=4)
    subprocess.run([sys.executable, os.path.join(HERE, "snapshot_real_reading.py")], check=True)


if __name__ == "__main__":
    main()
