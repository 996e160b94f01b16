"""The forms a snapshot reaches a user in, and the facts planted in it.

A form is a torch version's schema, the recording's ``stacks`` setting and an
encoding: ``pickle.dump`` with a protocol (torch's ``_dump_snapshot`` uses the default:
4, or 5 from Python 3.14), the C++ API's ``torch::jit::Pickler`` (protocol 2), or
``json.dump`` of the same dict.
"""

import json
import os
import pickle
import pickletools
import struct

from . import graph, jit_pickle

FORMS = {
    "p4": dict(version="2.9", stacks="all", enc="pickle", protocol=4),
    "p5": dict(version="2.9", stacks="all", enc="pickle", protocol=5),
    "p2": dict(version="2.9", stacks="all", enc="pickle", protocol=2),
    "python": dict(version="2.9", stacks="python", enc="pickle", protocol=4),
    "cpp": dict(version="cpp", stacks="all", enc="jit"),
    "json": dict(version="2.9", stacks="all", enc="json"),
    "v2.5": dict(version="2.5", stacks="all", enc="pickle", protocol=4),
    "v2.1": dict(version="2.1", stacks="python", enc="pickle", protocol=4),
    "v2.0": dict(version="2.0", stacks="all", enc="pickle", protocol=4),
    "v1.13": dict(version="1.13", stacks="python", enc="pickle", protocol=2),
    "awaiting": dict(version="2.9", stacks="all", enc="pickle", protocol=4,
                     pending_name="active_awaiting_free"),
    "python-p2": dict(version="2.9", stacks="python", enc="pickle", protocol=2),
    "python-p5": dict(version="2.9", stacks="python", enc="pickle", protocol=5),
    # Legal pickles no standard writer makes (see `relabel`): protocol 4 without FRAME,
    # memo indices skipped, MEMOIZE after BINPUT.
    "noframe": dict(version="2.9", stacks="all", enc="pickle", protocol=4, relabel="noframe"),
    "sparse": dict(version="2.9", stacks="all", enc="pickle", protocol=2, relabel="sparse"),
    "mixed": dict(version="2.9", stacks="all", enc="pickle", protocol=4, relabel="mixed"),
}


# Forms only some committed fixtures use (text protocols are large with deep stacks).
EXTRA = {
    **{f"p{p}": dict(version="2.9", stacks="all", enc="pickle", protocol=p) for p in (0, 1, 3)},
    "v1.13-awaiting": dict(version="1.13", stacks="python", enc="pickle", protocol=2,
                           pending_name="active_awaiting_free"),
    # torch 2.1-2.4's schema (no time_us) recorded with stacks="all": what the real
    # notebook snapshots we examined are
    "v2.1-all": dict(version="2.1", stacks="all", enc="pickle", protocol=4),
    # torch 2.9 with no annotation recorded (no record_function range ran)
    "p4-noann": dict(version="2.9", stacks="all", enc="pickle", protocol=4, annotations=False),
}


def form_of(name):
    return FORMS.get(name) or EXTRA[name]


def encode(devices, form):
    f = form_of(form) if isinstance(form, str) else form
    holders = {} if f["enc"] == "jit" else None
    g = graph.build(devices, f["version"], f["stacks"], f.get("pending_name", "active_pending_free"),
                    holders=holders, annotations=f.get("annotations", True))
    if f["enc"] == "pickle":
        data = pickle.dumps(g, protocol=f["protocol"])
        return relabel(data, f["relabel"]) if "relabel" in f else data
    if f["enc"] == "jit":
        return jit_pickle.dumps(g, holders)
    return json.dumps(g).encode()


def relabel(data, how):
    """`data` (a pickle) re-encoded as a legal pickle that reads to the same objects
    in Python's unpickler but that no standard writer makes:

    - ``noframe``: without its FRAME opcodes (framing is optional in protocol 4);
    - ``sparse``: every memo store a ``LONG_BINPUT`` at a skipped index (``7 + 4099 i``),
      every reference a ``LONG_BINGET``;
    - ``mixed``: the first 64 stores ``LONG_BINPUT`` at skipped indices from 10**6
      up, the rest ``MEMOIZE``, which stores at ``len(memo)`` (64, 65, ...: where the
      original's MEMOIZE stored them), a second ``MEMOIZE`` of every 5th object
      after it, which shifts every later index by one, and every 7th stored with
      ``LONG_BINPUT`` over the index of an empty list stored and popped just before.
    """
    ops = list(pickletools.genops(data))
    out = bytearray()
    index = {}  # the original's memo index -> the index in `out`
    memo_len = 0  # len(memo) in `out`'s unpickler
    stored = 0  # the original's stores so far
    for i, (op, arg, pos) in enumerate(ops):
        raw = data[pos:ops[i + 1][2] if i + 1 < len(ops) else len(data)]
        name = op.name
        if name == "FRAME":
            continue
        if how == "noframe":
            out += raw
        elif name in ("MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT"):
            orig = stored if name == "MEMOIZE" else arg
            stored += 1
            if how == "sparse" or (how == "mixed" and orig < 64):
                at = 7 + 4099 * orig if how == "sparse" else 10**6 + orig
                out += b"r" + struct.pack("<I", at)
            elif how == "mixed" and orig % 7 == 3:
                at = memo_len
                out += b"]r" + struct.pack("<I", at) + b"0"  # a decoy at the same index
                out += b"r" + struct.pack("<I", at)
            else:
                at = memo_len
                out += b"\x94"
                if orig % 5 == 0:
                    out += b"\x94"  # the same object again, at the next index
                    memo_len += 1
            index[orig] = at
            memo_len += 1
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            out += b"j" + struct.pack("<I", index[arg])
        else:
            out += raw
    out = bytes(out)
    assert pickle.loads(out) == pickle.loads(data), how
    return out


def extension(form):
    return ".json" if form_of(form)["enc"] == "json" else ".pickle"


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


# --- planted facts -------------------------------------------------------------

def site_key(s):
    return (s["file"], s["line"], s["function"]) if s else None


CATEGORY_ORDER = ["parameters", "gradients", "optimizer_state", "activations", "temporary",
                  "communication", "other", "no_stack"]


def category_of(b, stacks):
    """What a live block's stack says it is: "no_stack" when the snapshot shows it no
    frame (allocated before history was recorded, or, with stacks="python", on a
    thread with no Python frame: the autograd engine's)."""
    if b.ctx is None or b.ctx.site.site_for(stacks) is None:
        return "no_stack"
    return b.ctx.site.category_for(stacks)


def live_sites(alloc, stacks):
    """Live (active_allocated) blocks grouped by the site a memory engineer names them
    by and the library frame below it: bytes, blocks and category (the one holding
    most of its bytes) per site, largest first."""
    by = {}
    for _, blocks in alloc.segments():
        for b in blocks:
            if not b.allocated:
                continue
            s = b.ctx.site.site_for(stacks) if b.ctx is not None else None
            lib = b.ctx.site.library_for(stacks) if b.ctx is not None else None
            cat = category_of(b, stacks)
            e = by.setdefault((site_key(s), site_key(lib)),
                              {"site": s, "library": lib, "bytes": 0, "blocks": 0, "by_category": {}})
            e["bytes"] += b.size
            e["blocks"] += 1
            e["by_category"][cat] = e["by_category"].get(cat, 0) + b.size
    for e in by.values():
        cats = e.pop("by_category")
        e["category"] = max(cats, key=lambda c: (cats[c], -CATEGORY_ORDER.index(c)))
    return sorted(by.values(), key=lambda e: (-e["bytes"], -e["blocks"], str(site_key(e["site"])),
                                              str(site_key(e["library"]))))


def categories(alloc, stacks):
    """Live bytes per category; blocks without a stack are not in any."""
    out = {}
    for _, blocks in alloc.segments():
        for b in blocks:
            c = category_of(b, stacks)
            if b.allocated and c != "no_stack":
                out[c] = out.get(c, 0) + b.size
    return out


def no_stack(alloc, stacks):
    """Live blocks the snapshot shows no frame for: bytes, blocks, and the bytes
    allocated while history was recorded (a thread with no Python frame)."""
    out = {"bytes": 0, "blocks": 0, "no_python_frame_bytes": 0}
    for _, blocks in alloc.segments():
        for b in blocks:
            if b.allocated and category_of(b, stacks) == "no_stack":
                out["bytes"] += b.size
                out["blocks"] += 1
                if b.ctx is not None:
                    out["no_python_frame_bytes"] += b.size
    return out


def counts(trace):
    c = {}
    for te in trace:
        c[te.action] = c.get(te.action, 0) + 1
    return c


def device_facts(alloc):
    return {
        "device": alloc.device,
        "totals": alloc.totals(),
        "sites_all": live_sites(alloc, "all"),
        "sites_python": live_sites(alloc, "python"),
        "categories_all": categories(alloc, "all"),
        "categories_python": categories(alloc, "python"),
        "no_stack_all": no_stack(alloc, "all"),
        "no_stack_python": no_stack(alloc, "python"),
        "trace_counts": counts(alloc.trace()),
        "trace_events": len(alloc.trace()),
    }
