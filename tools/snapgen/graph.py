"""The Python object graph torch builds for a snapshot, object for object.

``build`` does what torch/csrc/cuda/Module.cpp ``THCPModule_memorySnapshot`` does (or,
for ``version="cpp"``, torch/csrc/cuda/memory_snapshot.cpp ``_memory_snapshot_pickled``)
on the state of ``allocator.Allocator`` objects:

- the key strings are created once (``py::str device_s = "device"``) and shared by
  every dict, so pickle memoizes them; so are the action names, block states and
  segment types;
- every dict that has a context gets its ``frames`` key last, after the whole
  structure is built, from ``symbolize`` (``py_symbolize``): one list object per
  unique traceback, shared by every entry with that traceback (a block and its
  ``alloc`` entry, ``free_requested`` and its ``free_completed``, a ``segment_alloc``
  and the ``alloc`` after it, a segment and its first malloc), and one dict per
  unique frame, shared by every list that holds it, several times in one list when a
  frame recurs (nested ``nn.Module`` calls, the interpreter frames);
- a dict without a context gets the one shared ``empty_frames`` list (segments and
  blocks) or no ``frames`` key (trace entries);
- strings converted from C++ (file and function names, ``compile_context``,
  ``user_metadata``) are new objects each time (equal content, different identity:
  pickle writes them again), except the empty string, which CPython shares.

Versions: ``"1.13"`` (blocks carry a ``history`` list, no ``requested_size``),
``"2.0"`` (``history`` and ``requested_size``), ``"2.1"`` (``frames`` on blocks and
segments, no ``time_us``), ``"2.5"`` (``time_us``, ``allocator_settings``,
``external_annotations``), ``"2.9"`` (``compile_context``, ``user_metadata``, ``pool_id``,
``host_segments``, ``host_traces``, ``forward_frames``), ``"cpp"`` (the C++ API's dict).
"""

from .frames import cpp_stack

VERSIONS = ("1.13", "2.0", "2.1", "2.5", "2.9", "cpp")


def _fresh(s):
    """A new str object equal to `s` (what pybind makes of a std::string)."""
    return s.encode("utf-8").decode("utf-8")


def _pool_id():
    """A new (0, 0) tuple (pybind makes one per std::pair; a literal would be one
    shared constant)."""
    return tuple([0, 0])


def traceback_frames(tb, stacks):
    """A traceback's frames innermost first, as torch's ``symbolize`` orders them:
    the C++ unwind with each Python frame placed before the interpreter frame that
    ran it; Python frames only with ``stacks="python"``."""
    site = tb.site
    py = site.py if tb.kind == "malloc" else (site.free_py or site.py)
    if stacks == "python":
        return list(py)
    out = []
    it = iter(py)
    for f in cpp_stack(site, "malloc" if tb.kind == "malloc" else "free"):
        if "PyEval_EvalFrame" in f.name:
            nxt = next(it, None)
            if nxt is not None:
                out.append(nxt)
        out.append(f)
    out.extend(it)
    return out


def symbolize(tracebacks, stacks):
    """py_symbolize: one list per unique traceback, one dict per unique frame."""
    frame_dicts = {}
    lists = {}
    result = []
    for tb in tracebacks:
        lst = lists.get(tb.id)
        if lst is None:
            lst = []
            for f in traceback_frames(tb, stacks):
                k = f.key()
                d = frame_dicts.get(k)
                if d is None:
                    d = {"name": _fresh(f.name), "filename": _fresh(f.filename), "line": f.line}
                    frame_dicts[k] = d
                lst.append(d)
            lists[tb.id] = lst
        result.append(lst)
    return result


def allocator_settings(version, expandable=False):
    s = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True" if expandable else "", "max_split_size": -1,
         "garbage_collection_threshold": 0.0, "expandable_segments": expandable, "pinned_num_register_threads": 1,
         "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False}
    if version == "2.9":
        s.update({"graph_capture_record_stream_reuse": False, "max_round_threshold": 0,
                  "max_cached_size": -1})
    s["roundup_power2_divisions"] = {str(1 << i): 0 for i in range(16)}
    return s


FORWARD_FRAME = '  File "/workspace/pith-train/pithtrain/dualpipe/execution.py", line 83, in stage1_f\n'


def build(devices, version="2.9", stacks="all", pending_name="active_pending_free", holders=None,
          annotations=True):
    """The snapshot dict of a process (`devices`: its Allocators), as `version` of
    torch builds it. `pending_name` is the state string of delayed frees (torch
    writes active_pending_free; its docstring says active_awaiting_free)."""
    legacy = version in ("1.13", "2.0")
    to_gather, dest = [], []
    empty_frames = []
    states = {"active_allocated": "active_allocated", "active_pending_free": pending_name,
              "inactive": "inactive"}

    def add_frames(d, ctx):
        if ctx is not None:
            to_gather.append(ctx)
            dest.append(d)
        elif not legacy:
            d["frames"] = empty_frames

    segments = []
    for alloc in devices:
        for head, blocks in alloc.segments():
            seg = {"device": alloc.device, "address": head.ptr,
                   "total_size": sum(b.size for b in blocks),
                   "allocated_size": sum(b.size for b in blocks if b.allocated),
                   "active_size": sum(b.size for b in blocks if alloc.state(b) != "inactive"),
                   "requested_size": sum(b.req for b in blocks if alloc.state(b) != "inactive"),
                   "stream": head.stream, "segment_type": "small" if head.small else "large",
                   "segment_pool_id": _pool_id()}
            if not legacy:
                seg["is_expandable"] = hasattr(head, "mapped")
                add_frames(seg, head.seg_ctx)
            blist = []
            addr = head.ptr
            for b in blocks:
                state = alloc.state(b)
                if legacy:
                    bd = {"size": b.size}
                    if version == "2.0":
                        bd["requested_size"] = b.req if state != "inactive" else 0
                    bd["state"] = states[state]
                    if state != "inactive":
                        h = {"addr": b.ptr, "real_size": b.req}
                        if b.ctx is not None:
                            to_gather.append(b.ctx)
                            dest.append(h)
                        bd["history"] = [h]
                else:
                    bd = {"address": addr, "size": b.size,
                          "requested_size": b.req if state != "inactive" else 0,
                          "state": states[state]}
                    add_frames(bd, b.ctx)
                blist.append(bd)
                addr += b.size
            seg["blocks"] = blist
            segments.append(seg)

    traces = []
    for alloc in devices:
        trace = []
        for te in alloc.trace():
            e = {"action": te.action}
            e["device_free" if te.action == "oom" else "addr"] = te.addr
            e["size"] = te.size
            e["stream"] = te.stream
            if version in ("2.5", "2.9", "cpp"):
                e["time_us"] = te.time_us
            if version == "2.9":
                e["compile_context"] = _fresh("")
                e["user_metadata"] = _fresh(te.user_metadata)
                e["pool_id"] = _pool_id()
            if te.ctx is not None:
                to_gather.append(te.ctx)
                dest.append(e)
            trace.append(e)
        traces.append(trace)

    result = {"segments": segments, "device_traces": traces}
    if version in ("2.5", "2.9", "cpp"):
        result["allocator_settings"] = allocator_settings(
            version, any(hasattr(a, "xsegs") for a in devices))
    if version in ("2.5", "2.9"):
        # THCPModule_memorySnapshot: the annotation's metadata pairs (torch 2.9 writes
        # name first; 2.6-2.8 stage first), then device and time_us
        result["external_annotations"] = [
            ({"name": _fresh(n), "stage": _fresh(st)} if version == "2.9" else {"stage": _fresh(st), "name": _fresh(n)})
            | {"device": a.device, "time_us": t}
            for a in devices for n, st, t in (a.annotations if annotations else [])]
    if version == "2.9":
        result["host_segments"] = []
        result["host_traces"] = []
    for d, frames, tb in zip(dest, symbolize(to_gather, stacks), to_gather):
        d["frames"] = frames
        if version == "2.9" and tb.site.thread == "autograd" and tb.kind == "malloc" and tb.site.py == []:
            # The forward traceback of the node that runs (torch >= 2.9 keeps it).
            d["forward_frames"] = [_fresh(FORWARD_FRAME)]
    if holders is not None:
        # What keeps each object alive while memory_snapshot.cpp pickles it (the
        # C++ pickler memoizes a container only when its use_count is above 1):
        # the locals, the frame_dict vector (dicts with a context), the frames vector.
        for o in (segments, traces, result.get("allocator_settings"), empty_frames):
            if o is not None:
                holders[id(o)] = holders.get(id(o), 0) + 1
        if "allocator_settings" in result:
            rs = result["allocator_settings"]["roundup_power2_divisions"]
            holders[id(rs)] = holders.get(id(rs), 0) + 1
        for d in dest:
            holders[id(d)] = holders.get(id(d), 0) + 1
            holders[id(d["frames"])] = holders.get(id(d["frames"]), 0) + 1
    return result
