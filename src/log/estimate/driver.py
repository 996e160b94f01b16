# `instrument log --estimate`: run a checkout's memory estimator through its Python API, as
# its own tests (tools/tests/test_memory_estimator.py) do, and write what it estimates as
# one line of JSON. Reads one JSON request on standard input:
#   {"root", "package", "model", "fragmentation",
#    "parallel": {pp_size, ep_size, dp_size, cp_size, micro_batch_size, global_batch_size,
#                 sequence_length}, "pp_ranks": [...]}
# Writes {"ranks": [{"pp_rank", "static_bytes", "non_pytorch_bytes", "peak_index",
#   "peak_event", "peak_model_bytes", "peak_fragmentation_bytes", "peak_total_bytes",
#   "events": [[name, model_bytes], ...], "components": [{component: bytes}, ...]}]}
#   or {"error": "one line"}.
# The components are the estimator's own buckets at each event (static, activations,
# autograd, gradients, comm_buffers, weight_grad_store, pp_transfer), as far as its
# MemorySnapshot has them.
# Model tensors are static + dynamic memory (what PyTorch's allocator holds); the total
# adds non-PyTorch memory and fragmentation, as the estimator's report adds them.
import importlib
import json
import sys
import traceback


def fail(message):
    print(json.dumps({"error": message}))
    sys.exit(0)


def components(s):
    """The estimator's buckets of one MemorySnapshot, in bytes: those its version has."""
    out = {"static": s.static_bytes}
    acts = getattr(s, "activation_bytes", None)
    if acts is None:
        acts = sum(v if isinstance(v, int) else v.total_bytes for v in s.activations.values())
    out["activations"] = acts
    if hasattr(s, "autograd_bytes"):
        out["autograd"] = s.autograd_bytes
    for name, attr in (("gradients", "gradients"), ("comm_buffers", "comm_buffers"),
                       ("weight_grad_store", "weight_grad_store"),
                       ("pp_transfer", "pp_transfer_buffers")):
        bucket = getattr(s, attr, None)
        if bucket is not None and hasattr(bucket, "total_bytes"):
            out[name] = bucket.total_bytes
    return out


def main():
    req = json.load(sys.stdin)
    sys.path.insert(0, req["root"])
    package = req["package"]
    try:
        model_profile = importlib.import_module(package + ".model_profile")
        activation_profile = importlib.import_module(package + ".activation_profile")
        schedule_simulator = importlib.import_module(package + ".schedule_simulator")
        cli = importlib.import_module(package + ".__main__")
    except Exception as e:
        fail("cannot import %s from %s: %s: %s" % (package, req["root"], type(e).__name__, e))
    try:
        model_cfg = model_profile.ModelConfig.from_json(req["model"])
    except Exception as e:
        fail("%s: the estimator cannot read this model config: %s: %s" % (req["model"], type(e).__name__, e))
    p = req["parallel"]
    # The checks the estimator's command line makes before it simulates.
    chunk_divisor = p["micro_batch_size"] * p["dp_size"] * p["ep_size"]
    if chunk_divisor <= 0 or p["global_batch_size"] % chunk_divisor != 0:
        fail("global batch size %d is not a multiple of micro-batch size x dp x ep (%d)"
             % (p["global_batch_size"], chunk_divisor))
    num_chunks = p["global_batch_size"] // chunk_divisor
    if num_chunks < p["pp_size"] * 2:
        fail("%d micro-batches per step, fewer than 2 x pp (%d): the estimator does not simulate it"
             % (num_chunks, p["pp_size"] * 2))
    parallel_cfg = model_profile.ParallelismConfig(**p)
    out = []
    for pp_rank in req["pp_ranks"]:
        profile = model_profile.ModelMemoryProfile(model_cfg, parallel_cfg, pp_rank)
        tc = activation_profile.compute_token_counts(model_cfg, parallel_cfg)
        act = activation_profile.ActivationEstimator(model_cfg, parallel_cfg, profile, tc)
        non_pytorch = cli.estimate_non_pytorch_bytes(parallel_cfg)
        sim = schedule_simulator.ScheduleSimulator(
            model_cfg=model_cfg,
            parallel_cfg=parallel_cfg,
            profile=profile,
            activation_est=act,
            token_counts=tc,
            pp_rank=pp_rank,
            fragmentation_factor=req["fragmentation"],
            non_pytorch_bytes=non_pytorch,
        )
        result = sim.simulate()
        peak = result.timeline[result.peak_event_idx].snapshot
        out.append({
            "pp_rank": pp_rank,
            "static_bytes": result.static_bytes,
            "non_pytorch_bytes": peak.non_pytorch_bytes,
            "peak_index": result.peak_event_idx,
            "peak_event": result.timeline[result.peak_event_idx].name,
            "peak_model_bytes": peak.static_bytes + peak.dynamic_bytes,
            "peak_fragmentation_bytes": peak.fragmentation_bytes,
            "peak_total_bytes": peak.total_bytes,
            "events": [[e.name, e.snapshot.static_bytes + e.snapshot.dynamic_bytes] for e in result.timeline],
            "components": [components(e.snapshot) for e in result.timeline],
        })
    print(json.dumps({"ranks": out}))


try:
    main()
except SystemExit:
    raise
except BaseException as e:
    last = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    where = " (%s:%d)" % (last.filename, last.lineno) if last else ""
    fail("the estimator failed: %s: %s%s" % (type(e).__name__, e, where))
