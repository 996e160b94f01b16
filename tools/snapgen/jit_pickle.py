"""torch::jit::Pickler, as torch/csrc/cuda/memory_snapshot.cpp drives it.

``_memory_snapshot_pickled()`` (the C++ API's snapshot) writes its dict with
``Pickler(writer, nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false)``:
protocol 2, no type tags. What it writes differs from Python's pickle:

- a dict is ``EMPTY_DICT MARK key value ... SETITEMS`` (the MARK even when empty), a
  list ``EMPTY_LIST MARK item ... APPENDS``, a tuple ``TUPLE1/2/3`` (``MARK ... TUPLE``
  above three);
- strings are memoized by *value* (every distinct string once, ``BINUNICODE`` then
  ``BINPUT``; the same text again is a ``BINGET``);
- a dict, list or tuple is memoized by identity only when something else also holds
  it (``use_count() > 1``), and its ``BINPUT`` comes after its contents, not before;
- ints are ``BININT1``/``BININT2``/``BININT`` or an 8-byte ``LONG1``; bools
  ``NEWTRUE``/``NEWFALSE``; floats ``BINFLOAT``.
"""

import struct


def refcounts(obj):
    """How many containers hold each container (by id), and every container once."""
    refs = {}
    seen = set()
    stack = [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        items = o.values() if isinstance(o, dict) else o
        if isinstance(o, dict):
            items = [*o.keys(), *o.values()]
        for v in items:
            if isinstance(v, (dict, list, tuple)):
                refs[id(v)] = refs.get(id(v), 0) + 1
                stack.append(v)
    return refs


def dumps(obj, holders=None):
    """Pickle `obj` as torch::jit::Pickler does. `holders` adds, per id, the
    references that live outside the graph (locals and vectors of the C++ code)."""
    holders = holders or {}
    refs = refcounts(obj)
    out = bytearray(b"\x80\x02")
    memo_ptr, memo_str = {}, {}
    next_id = [0]

    def put():
        i = next_id[0]
        out.extend(b"q" + bytes([i]) if i <= 0xFF else b"r" + struct.pack("<I", i))
        next_id[0] += 1
        return i

    def get(i):
        out.extend(b"h" + bytes([i]) if i <= 0xFF else b"j" + struct.pack("<I", i))

    def push_int(n):
        if 0 <= n <= 0xFF:
            out.extend(b"K" + bytes([n]))
        elif 0 <= n <= 0xFFFF:
            out.extend(b"M" + struct.pack("<H", n))
        elif -(1 << 31) <= n < (1 << 31):
            out.extend(b"J" + struct.pack("<i", n))
        else:
            out.extend(b"\x8a\x08" + struct.pack("<q", n))

    def push(v):
        if isinstance(v, (dict, list, tuple)) and refs.get(id(v), 0) + holders.get(id(v), 0) > 1:
            if id(v) in memo_ptr:
                get(memo_ptr[id(v)])
                return
            impl(v)
            memo_ptr[id(v)] = put()
        else:
            impl(v)

    def impl(v):
        if v is None:
            out.extend(b"N")
        elif isinstance(v, bool):
            out.extend(b"\x88" if v else b"\x89")
        elif isinstance(v, int):
            push_int(v)
        elif isinstance(v, float):
            out.extend(b"G" + struct.pack(">d", v))
        elif isinstance(v, str):
            if v in memo_str:
                get(memo_str[v])
                return
            b = v.encode("utf-8")
            out.extend(b"X" + struct.pack("<I", len(b)) + b)
            memo_str[v] = put()
        elif isinstance(v, tuple):
            if len(v) == 0:
                out.extend(b")")
            elif len(v) <= 3:
                for x in v:
                    push(x)
                out.extend(b"\x85\x86\x87"[len(v) - 1:len(v)])
            else:
                out.extend(b"(")
                for x in v:
                    push(x)
                out.extend(b"t")
        elif isinstance(v, dict):
            out.extend(b"}(")
            for k, x in v.items():
                push(k)
                push(x)
            out.extend(b"u")
        elif isinstance(v, list):
            out.extend(b"](")
            for x in v:
                push(x)
            out.extend(b"e")
        else:
            raise TypeError(f"cannot pickle {type(v).__name__}")

    push(obj)
    out.extend(b".")
    return bytes(out)
