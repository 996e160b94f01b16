#!/usr/bin/env python3
"""Generate a schema-faithful Nsight Systems SQLite export with known truth.

Writes OUT (the .sqlite) and, unless --no-expected, OUT with `.expected.json` in place of
`.sqlite`: the figures `instrument nsys report` must find, taken from the generator's own
bookkeeping (which range was open on the launching thread at each launch, which category each
kernel name was drawn from, ...), not recomputed from the tables.

Tables and columns follow `nsys export --type sqlite` (2024.x): StringIds, META_DATA_EXPORT,
TARGET_INFO_GPU, TARGET_INFO_SESSION_START_TIME, PROCESSES, ThreadNames,
CUPTI_ACTIVITY_KIND_RUNTIME / _KERNEL / _MEMCPY / _MEMSET, NVTX_EVENTS, ENUM_NSYS_EVENT_TYPE.
globalTid = (1 << 48) | pid << 24 | tid; globalPid = globalTid with the tid bits cleared.

The workload looks like a mixture-of-experts training step run by several ranks: per layer an
attention block and an MoE block (all-to-all dispatch, grouped GEMMs, combine), gradient
reduce-scatter/all-reduce on a communication stream that overlaps compute. It also plants what
real exports contain:
  * ranges ended on another thread (StartEnd rows whose endGlobalTid differs) — not projected;
  * a range never closed (end NULL) — closed at the last NVTX timestamp;
  * names via textId (registered strings) and via the text column;
  * a named NVTX domain (the functions-trace domain) with its domain-create event;
  * negative timestamps (events before the capture range started);
  * correlation ids restarting at 1 in every process, and stream ids reused across processes,
    two of which share device 0;
  * graph launches (several kernels under one correlation id), memcpy and memset operations,
    a launch with no runtime row, a thread launching outside every range, a range name nested
    in itself, NVTX marks (ignored), cutlass kernels whose short name is just "Kernel2",
    legacy ncclKernel_* names.

Usage: gen_nsys_sqlite.py --out DIR/x.sqlite [--kernels N] [--ranks R] [--seed S] [--no-expected]
"""

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys

PUSHPOP, STARTEND, MARK, DOMAIN_CREATE = 59, 60, 34, 75
EVENT_TYPES = [
    (34, "NvtxMark", "NVTX Mark"),
    (59, "NvtxPushPopRange", "NVTX PushPop Range"),
    (60, "NvtxStartEndRange", "NVTX StartEnd Range"),
    (75, "NvtxDomainCreate", "NVTX Domain Create"),
]

# (demangled name, short name, category, communication op)
KERNELS = {
    "flash": ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>>, false, true, false, false, true, true, false, false>(flash::Flash_fwd_params)",
              "flash_fwd_kernel", "attention", None),
    "fmha": ("fmha_cutlassB_bf16_aligned_64x64_k128_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<cutlass::arch::Sm80, cutlass::bfloat16_t, true, false, true, 64, 64, 128, false>::Params)",
             "fmha_cutlassB_bf16_aligned_64x64_k128_sm80", "attention", None),
    "cutlass": ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)",
                "Kernel2", "gemm", None),
    "nvjet": ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNT", "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNT", "gemm", None),
    "xmma": ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
             "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", "gemm", None),
    "ampere": ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "gemm", None),
    "add": ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>>(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
            "vectorized_elementwise_kernel", "elementwise", None),
    "silu": ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1})",
             "elementwise_kernel", "elementwise", None),
    "rmsnorm": ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
                "vectorized_layer_norm_kernel", "other", None),
    "topk": ("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float, unsigned int>, unsigned int, unsigned int, bool, unsigned int, unsigned int, at::cuda::detail::TensorInfo<float, unsigned int>, unsigned int, at::cuda::detail::TensorInfo<long, unsigned int>, unsigned int)",
             "gatherTopK", "other", None),
    "sendrecv": ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "ncclDevKernel_SendRecv", "communication", "SendRecv"),
    "allgather": ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "ncclDevKernel_AllGather_RING_LL", "communication", "AllGather"),
    "reducescatter": ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "communication", "ReduceScatter"),
    "allreduce_legacy": ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "ncclKernel_AllReduce_RING_LL_Sum_float", "communication", "AllReduce"),
    "alltoall": ("void deep_ep::internode::dispatch<true, 8, 768, 8, 16>(int4*, float*, int*, long*, float*, int*, int*, int*, int*, int*, int const*, int4 const*, float const*, long const*, float const*, int*, int*, int*, int, int, int, int, int, int, int, int, void*, int, int, int)",
                 "dispatch", "communication", "AllToAll"),
}

GLOBAL_BIT = 1 << 48


def gpid_of(pid):
    return GLOBAL_BIT | (pid << 24)


def gtid_of(pid, tid):
    return gpid_of(pid) | tid


class Strings:
    def __init__(self):
        self.ids = {}

    def id(self, s):
        if s not in self.ids:
            self.ids[s] = len(self.ids) + 1
        return self.ids[s]


class Export:
    """Rows being built, and the truth being planted alongside."""

    def __init__(self, rng):
        self.rng = rng
        self.s = Strings()
        self.kernels, self.memcpy, self.memset, self.runtime, self.nvtx = [], [], [], [], []
        self.threads = []  # (nameId, priority, globalTid)
        self.processes = []  # (globalPid, pid, name)
        self.domains = {}  # (pid, domain) -> domainId
        # truth
        self.ops = []  # dicts: pid, device, start, end, cls, comm, name, ranges(list of instance ids), innermost
        self.instances = []  # dicts: pid, key, start, end (None until closed), ops, cross
        self.negative = 0

    # ---- processes, threads, domains
    def process(self, pid, name, device):
        self.processes.append((gpid_of(pid), pid, name))
        p = {"pid": pid, "device": device, "corr": 0, "streams": {}}
        return p

    def thread(self, proc, tid, name, t0):
        self.threads.append((self.s.id(name), 0, gtid_of(proc["pid"], tid)))
        return {"proc": proc, "tid": tid, "gtid": gtid_of(proc["pid"], tid), "t": t0, "stack": [], "open": []}

    def domain(self, th, name):
        key = (th["proc"]["pid"], name)
        if key not in self.domains:
            did = len([k for k in self.domains if k[0] == key[0]]) + 1
            self.domains[key] = did
            self.nvtx_row(th["t"], None, DOMAIN_CREATE, th["gtid"], None, name, via="text", domain_id=did, count_negative=False)
        return self.domains[key]

    # ---- NVTX
    def nvtx_row(self, start, end, etype, gtid, end_gtid, text, via, domain_id, count_negative=True):
        text_col, text_id = (text, None) if via == "text" else (None, self.s.id(text))
        self.nvtx.append([start, end, etype, None, None, None, text_col, gtid, end_gtid, text_id, domain_id])
        if count_negative and start < 0:
            self.negative += 1
        return len(self.nvtx) - 1

    def _open(self, th, text, style, via, domain, cross=False):
        did = self.domain(th, domain) if domain else 0
        dom = domain or ""
        row = self.nvtx_row(th["t"], None, PUSHPOP if style == "PushPop" else STARTEND, th["gtid"], None, text, via, did)
        inst = {"pid": th["proc"]["pid"], "key": f"{dom}:{text}|{style}", "start": th["t"], "end": None,
                "ops": [], "cross": cross, "row": row, "gtid": th["gtid"]}
        self.instances.append(inst)
        th["t"] += self.rng.randint(50, 400)
        return len(self.instances) - 1

    def push(self, th, text, via="text", domain=None):
        i = self._open(th, text, "PushPop", via, domain)
        th["stack"].append(i)
        th["open"].append(i)
        return i

    def pop(self, th):
        i = th["stack"].pop()
        self._close(th, i)

    def _close(self, th, i, end_th=None):
        th["t"] += self.rng.randint(50, 400)
        inst = self.instances[i]
        inst["end"] = th["t"]
        self.nvtx[inst["row"]][1] = th["t"]
        if end_th is not None:
            self.nvtx[inst["row"]][8] = end_th["gtid"]
        if i in th["open"]:
            th["open"].remove(i)

    def start_range(self, th, text, via="text", domain=None, cross=False):
        i = self._open(th, text, "StartEnd", via, domain, cross=cross)
        if not cross:
            th["open"].append(i)
        return i

    def end_range(self, th, i, end_th=None):
        self._close(th, i, end_th)

    def mark(self, th, text):
        self.nvtx_row(th["t"], None, MARK, th["gtid"], None, text, "text", 0, count_negative=False)

    # ---- launches
    def _stream_free(self, proc, stream):
        return proc["streams"].get(stream, -10**18)

    def launch(self, th, items, api="cudaLaunchKernel_v7000", runtime_row=True):
        """items: list of (kind, key_or_bytes, stream, duration). One runtime call, one correlation id."""
        proc = th["proc"]
        proc["corr"] += 1
        corr = proc["corr"]
        r0 = th["t"]
        r1 = r0 + self.rng.randint(2000, 6000)
        th["t"] = r1 + self.rng.randint(100, 1500)
        if runtime_row:
            self.runtime.append((r0, r1, 1, th["gtid"], corr, self.s.id(api), 0, None))
        opened = [i for i in th["open"]]
        innermost = max(opened, key=lambda i: (self.instances[i]["start"], i)) if opened else None
        for kind, key, stream, dur in items:
            start = max(self._stream_free(proc, stream), r0 + self.rng.randint(1000, 4000))
            end = start + dur
            proc["streams"][stream] = end + self.rng.randint(200, 1500)
            op = {"pid": proc["pid"], "device": proc["device"], "stream": stream, "start": start, "end": end,
                  "corr": corr, "kind": kind, "ranges": opened if runtime_row else [],
                  "innermost": innermost if runtime_row else None}
            row_common = (start, end, proc["device"], 1, None, stream, corr, gpid_of(proc["pid"]))
            if kind == "kernel":
                dem, short, cls, comm = KERNELS[key]
                op.update(name=dem, cls=cls, comm=comm)
                self.kernels.append(row_common + (self.s.id(dem), self.s.id(short), None, 1, 0, 128, 132, 1, 1, 256, 1, 1, 0, 49152, 0, 0, len(self.kernels), None, None, None))
            elif kind == "memcpy":
                op.update(cls="memcpy")
                self.memcpy.append(row_common + (key, 1, None, 0, 2, None, None, None, None, None, None, None))
            else:
                op.update(cls="memset")
                self.memset.append(row_common + (0, key, None, 2))
            if start < 0:
                self.negative += 1
            self.ops.append(op)
        return corr


def k(key, stream, lo, hi, rng):
    return ("kernel", key, stream, rng.randint(lo, hi))


def build_mixed(rng, kernels_target, ranks):
    ex = Export(rng)
    COMPUTE, COMM = 7, 20  # the same stream ids in every process
    procs, mains, bwds, loaders = [], [], [], []
    for r in range(ranks):
        # Ranks 0 and the last share device 0 when there are 3+ ranks (stream ids collide there).
        device = 0 if (r == ranks - 1 and ranks >= 3) else r
        p = ex.process(1000 + r, "python3", device)
        procs.append(p)
        t0 = -300_000 + r * 7_000  # capture started after the first events: negative timestamps
        mains.append(ex.thread(p, 1000 + r, "pt_main_thread", t0))
        bwds.append(ex.thread(p, 5000 + r, "pt_autograd_0", t0))
        loaders.append(ex.thread(p, 6000 + r, "dataloader", t0))

    # A window range opened on every main thread and never closed.
    for th in mains:
        ex.start_range(th, "profile_window", via="textId")

    n = 0
    step = 0
    while n < kernels_target:
        for r, p in enumerate(procs):
            th, bwd, loader = mains[r], bwds[r], loaders[r]
            ex.mark(th, f"step {step} begins")
            ex.push(th, "step", via="text")
            # Data wait: started on the main thread, ended by the loader thread.
            wait = ex.start_range(th, "data_wait", via="text", cross=True)
            ex.launch(th, [("memcpy", 1 << 20, COMPUTE, rng.randint(3000, 9000))], api="cudaMemcpyAsync_v3020")
            loader["t"] = max(loader["t"], th["t"])
            ex.end_range(loader, wait, end_th=loader)
            ex.launch(th, [("memset", 4096, COMPUTE, rng.randint(500, 1500))], api="cudaMemsetAsync_v3020")
            for layer in range(4):
                ex.push(th, f"layer{layer:02d}", via="textId")
                ex.push(th, "MoELayer.forward", via="textId", domain="pithtrain")
                # The same name via the text column and via a registered string (textId).
                ex.push(th, "attention", via="textId" if layer % 2 else "text")
                ex.launch(th, [k("rmsnorm", COMPUTE, 2000, 5000, rng)])
                ex.launch(th, [k(rng.choice(["nvjet", "cutlass", "xmma"]), COMPUTE, 20000, 60000, rng)])
                ex.launch(th, [k("flash", COMPUTE, 30000, 90000, rng)])
                ex.pop(th)
                ex.push(th, "moe", via="text")
                ex.launch(th, [k("topk", COMPUTE, 3000, 8000, rng)])
                ex.launch(th, [k("alltoall", COMM, 20000, 70000, rng)], api="cudaLaunchKernelExC_v11060")
                ex.push(th, "experts", via="textId")
                # A graph launch: three kernels under one correlation id.
                ex.launch(th, [k("cutlass", COMPUTE, 10000, 40000, rng), k("silu", COMPUTE, 2000, 6000, rng),
                               k("cutlass", COMPUTE, 10000, 40000, rng)], api="cudaGraphLaunch_v10000")
                # A range name nested in itself.
                ex.push(th, "experts", via="textId")
                ex.launch(th, [k("ampere", COMPUTE, 8000, 30000, rng)])
                ex.pop(th)
                ex.pop(th)
                ex.launch(th, [k("sendrecv", COMM, 15000, 50000, rng)])
                ex.launch(th, [k("add", COMPUTE, 2000, 5000, rng)])
                ex.pop(th)
                ex.pop(th)
                ex.pop(th)
            # Backward on the autograd thread: launches outside every range.
            bwd["t"] = max(bwd["t"], th["t"])
            for _ in range(3):
                ex.launch(bwd, [k("fmha", COMPUTE, 30000, 80000, rng)])
                ex.launch(bwd, [k("cutlass", COMPUTE, 10000, 40000, rng)])
            th["t"] = max(th["t"], bwd["t"])
            ex.push(th, "grad_sync", via="text")
            ex.launch(th, [k("reducescatter", COMM, 30000, 90000, rng)])
            ex.launch(th, [k("allgather", COMM, 20000, 60000, rng)])
            ex.launch(th, [k("allreduce_legacy", COMM, 5000, 20000, rng)])
            # A launch whose runtime row is missing from the export.
            if step % 5 == 0:
                ex.launch(th, [k("add", COMPUTE, 1000, 3000, rng)], runtime_row=False)
            ex.pop(th)
            ex.pop(th)  # step
        n = len(ex.kernels)
        step += 1
    # Every thread's clock ends before this closing range, so the unclosed window ends at the
    # last NVTX timestamp after all launches.
    end_t = max(max(t["t"] for t in mains + bwds + loaders), max(o["end"] for o in ex.ops)) + 10_000
    for th in mains:
        th["t"] = end_t
        ex.push(th, "shutdown", via="text")
        ex.pop(th)
    return ex


def build_edge(rng):
    """A few hand-placed events. Process 1 (device 0) runs a long GEMM on stream 7 from 0 to
    100_000 while process 2, also on device 0 and also using streams 7 and 20, runs an
    all-gather on stream 20 from 20_000 to 60_000 with no compute of its own then: process 2's
    communication is fully exposed (hidden 0) even though device 0 and stream ids are shared.
    Process 1's own all-reduce (stream 20) runs from 90_000 to 130_000: 10_000 ns hidden,
    30_000 ns exposed. Both processes number their launches from correlation id 1."""
    ex = Export(rng)
    p1 = ex.process(2001, "python3", 0)
    p2 = ex.process(2002, "python3", 0)
    a = ex.thread(p1, 2001, "main", -5_000)
    b = ex.thread(p2, 2002, "main", -5_000)

    def place(th, key, stream, start, dur, api="cudaLaunchKernel_v7000"):
        proc = th["proc"]
        proc["streams"][stream] = start
        assert th["t"] + 4_000 <= start, "the launch must precede the planted start"
        ex.launch(th, [("kernel", key, stream, dur)], api=api)

    ex.push(a, "trunk", via="textId")
    place(a, "cutlass", 7, 0, 100_000)
    ex.push(a, "diffusion", via="text")
    place(a, "allreduce_legacy", 20, 90_000, 40_000)
    ex.pop(a)
    ex.pop(a)
    ex.push(b, "trunk", via="text")
    place(b, "allgather", 20, 20_000, 40_000)
    ex.pop(b)
    a["t"] = b["t"] = max(a["t"], b["t"], 200_000)
    ex.push(a, "tail", via="text")
    ex.pop(a)
    return ex


# ---------------------------------------------------------------- writing

SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER, ctxId INTEGER);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL REFERENCES StringIds(id), priority INTEGER, globalTid INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL REFERENCES StringIds(id), returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL REFERENCES StringIds(id), shortName INTEGER NOT NULL REFERENCES StringIds(id), mangledName INTEGER REFERENCES StringIds(id), launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER REFERENCES StringIds(id), domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
"""


def write_sqlite(ex, path):
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.executescript(SCHEMA)
    db.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?,?,?)", EVENT_TYPES)
    db.execute("INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.17.0')")
    db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1700000000000000000, '2023-11-14 22:13:20', '2023-11-14 22:13:20')")
    devices = sorted({o["device"] for o in ex.ops})
    db.executemany("INSERT INTO TARGET_INFO_GPU VALUES (0,?,?,?,1,52428800,150000000000,4800000000000,1980000000,132,?,?,0,'GH100',?,1)",
                   [(d, "NVIDIA H100 80GB HBM3", f"0000:{d + 0x18:02x}:00.0", d, f"GPU-0000{d}", d) for d in devices])
    db.executemany("INSERT INTO PROCESSES VALUES (?,?,?)", ex.processes)
    db.executemany("INSERT INTO ThreadNames VALUES (?,?,?)", ex.threads)
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)", ex.runtime)
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (" + ",".join("?" * 28) + ")", ex.kernels)
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (" + ",".join("?" * 20) + ")", ex.memcpy)
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (" + ",".join("?" * 12) + ")", ex.memset)
    db.executemany("INSERT INTO NVTX_EVENTS VALUES (" + ",".join("?" * 20) + ")", [r + [None] * 9 for r in ex.nvtx])
    db.executemany("INSERT INTO StringIds VALUES (?,?)", [(i, s) for s, i in ex.s.ids.items()])
    db.commit()
    db.close()


# ---------------------------------------------------------------- truth

def covered_length(intervals_a, intervals_b=None):
    """Length covered by the union of intervals_a (and, if given, also by intervals_b):
    a sweep over boundary events with coverage counters."""
    events = []
    for s, e in intervals_a:
        if e > s:
            events += [(s, 0, 1), (e, 0, -1)]
    for s, e in intervals_b or []:
        if e > s:
            events += [(s, 1, 1), (e, 1, -1)]
    events.sort()
    cnt = [0, 0]
    total, last = 0, None
    for t, which, d in events:
        if last is not None and cnt[0] > 0 and (intervals_b is None or cnt[1] > 0):
            total += t - last
        cnt[which] += d
        last = t
    return total


def summary(durs):
    n = len(durs)
    return {"total": sum(durs), "count": n, "avg": sum(durs) / n, "med": float(statistics.median(durs)),
            "min": min(durs), "max": max(durs), "stddev": statistics.stdev(durs) if n > 1 else 0.0}


def truth(ex):
    cats = ["communication", "gemm", "attention", "elementwise", "other"]
    range_max = max(max(r[0], r[1] if r[1] is not None else r[0]) for r in ex.nvtx if r[2] in (PUSHPOP, STARTEND))
    procs = {}
    for (_, pid, _) in ex.processes:
        procs[pid] = {"kernel_ns": 0, "kernel_count": 0, "memcpy_ns": 0, "memcpy_count": 0, "memset_ns": 0, "memset_count": 0,
                      "categories": {c: [0, 0] for c in cats}, "comm_ops": {}, "nvtx": {}, "unattributed_ns": 0}
    by_name = {}
    lanes = {}
    for op in ex.ops:
        p = procs[op["pid"]]
        d = op["end"] - op["start"]
        if op["cls"] == "memcpy":
            p["memcpy_ns"] += d
            p["memcpy_count"] += 1
        elif op["cls"] == "memset":
            p["memset_ns"] += d
            p["memset_count"] += 1
        else:
            p["kernel_ns"] += d
            p["kernel_count"] += 1
            p["categories"][op["cls"]][0] += d
            p["categories"][op["cls"]][1] += 1
            if op["comm"]:
                c = p["comm_ops"].setdefault(op["comm"], [0, 0])
                c[0] += d
                c[1] += 1
            by_name.setdefault(op["name"], []).append(d)
            lane = lanes.setdefault((op["pid"], op["device"]), ([], []))
            lane[0 if op["cls"] == "communication" else 1].append((op["start"], op["end"]))
    for pid, p in procs.items():
        comm = compute = hidden = 0
        for (lp, _dev), (cm, cp) in lanes.items():
            if lp != pid:
                continue
            comm += covered_length(cm)
            compute += covered_length(cp)
            hidden += covered_length(cm, cp)
        p["overlap"] = {"communication_ns": comm, "compute_ns": compute, "hidden_ns": hidden, "exposed_ns": comm - hidden}

    # NVTX: planted attribution.
    for inst in ex.instances:
        if inst["end"] is None:
            inst["end"] = range_max
    for op in ex.ops:
        inst_keys = set()
        d = op["end"] - op["start"]
        for i in op["ranges"]:
            ex.instances[i]["ops"].append(op)
            inst_keys.add(ex.instances[i]["key"])
        for key in inst_keys:
            row = procs[op["pid"]]["nvtx"].setdefault(key, {})
            row["inclusive_ns"] = row.get("inclusive_ns", 0) + d
        if op["innermost"] is not None:
            key = ex.instances[op["innermost"]]["key"]
            row = procs[op["pid"]]["nvtx"].setdefault(key, {})
            row["exclusive_ns"] = row.get("exclusive_ns", 0) + d
        else:
            procs[op["pid"]]["unattributed_ns"] += d
    proj_all = {}
    for inst in ex.instances:
        if inst["cross"]:
            continue
        row = procs[inst["pid"]]["nvtx"].setdefault(inst["key"], {})
        row["instances"] = row.get("instances", 0) + 1
        row["cpu_ns"] = row.get("cpu_ns", 0) + inst["end"] - inst["start"]
        row.setdefault("inclusive_ns", 0)
        row.setdefault("exclusive_ns", 0)
        row.setdefault("proj", [])
        row.setdefault("proj_range_ns", 0)
        row.setdefault("gpu_ops", 0)
        if inst["ops"]:
            span = max(o["end"] for o in inst["ops"]) - min(o["start"] for o in inst["ops"])
            nops = len({o["corr"] for o in inst["ops"]})
            row["proj"].append(span)
            row["proj_range_ns"] += inst["end"] - inst["start"]
            row["gpu_ops"] += nops
            name, style = inst["key"].rsplit("|", 1)
            agg = proj_all.setdefault(inst["key"], {"proj": [], "range_ns": 0, "gpu_ops": 0})
            agg["proj"].append(span)
            agg["range_ns"] += inst["end"] - inst["start"]
            agg["gpu_ops"] += nops
    for p in procs.values():
        for row in p["nvtx"].values():
            spans = row.pop("proj", [])
            row["proj_instances"] = len(spans)
            row["proj_total_ns"] = sum(spans)
    nvtx_sum = {}
    for key, agg in proj_all.items():
        s = summary(agg["proj"])
        s.update(range_ns=agg["range_ns"], gpu_ops=agg["gpu_ops"])
        nvtx_sum[key] = s
    return {
        "kernel_count": len(ex.kernels),
        "processes": {str(pid): p for pid, p in procs.items()},
        "kernel_summary": {name: summary(d) for name, d in by_name.items()},
        "nvtx_gpu_proj_sum": nvtx_sum,
        "notes": {
            "cross_thread_ranges": sum(1 for i in ex.instances if i["cross"]),
            "unclosed_ranges": sum(1 for r in ex.nvtx if r[2] in (PUSHPOP, STARTEND) and r[1] is None),
            "unmatched_gpu_ops": ex_unmatched(ex),
            "negative_timestamps": ex.negative,
        },
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--scenario", choices=["mixed", "edge"], default="mixed")
    ap.add_argument("--kernels", type=int, default=3000)
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-expected", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    ex = build_edge(rng) if a.scenario == "edge" else build_mixed(rng, a.kernels, a.ranks)
    write_sqlite(ex, a.out)
    if not a.no_expected:
        t = truth(ex)
        base = a.out[:-len(".sqlite")] if a.out.endswith(".sqlite") else a.out
        with open(base + ".expected.json", "w") as f:
            json.dump(t, f, indent=1, sort_keys=True)
    print(f"{a.out}: {len(ex.kernels)} kernels, {len(ex.runtime)} runtime calls, {len(ex.nvtx)} NVTX events", file=sys.stderr)


def ex_unmatched(ex):
    """Operations launched without a runtime row."""
    rt = {(r[3] & ~0xFFFFFF, r[4]) for r in ex.runtime}
    return sum(1 for o in ex.ops if (gpid_of(o["pid"]), o["corr"]) not in rt)


if __name__ == "__main__":
    main()
