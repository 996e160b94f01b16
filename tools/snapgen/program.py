"""The call sites of a pithtrain-like MoE training step, with what each one is.

Each ``CallSite`` carries the Python frames a real run shows (pithtrain 889a408's
file and function names, torch's module-call frames between them), the C++ frames of
the operator, the thread, and the truth the tests compare with: the frame a memory
engineer names the allocation by and its category. Nested ``nn.Module`` calls repeat
``_call_impl``/``_wrapped_call_impl`` (the same frame dicts several times in one stack).
"""

from .frames import (ACCUMULATE_GRAD, CUBLAS_WS, NCCL, CallSite, TORCH, PITH, backward_node, op,
                     py)


def site(f):
    return {"file": f.filename, "line": f.line, "function": f.name} if f is not None else None


def cpp_site(frames, name_part):
    f = next(f for f in frames if name_part in f.name)
    return {"file": f.filename, "line": f.line, "function": f.name}


CALL_IMPL = py(f"{TORCH}/nn/modules/module.py", 1784, "_call_impl")
WRAPPED_CALL = py(f"{TORCH}/nn/modules/module.py", 1773, "_wrapped_call_impl")
MODULE_CALL = [CALL_IMPL, WRAPPED_CALL]
FUNCTION_APPLY = py(f"{TORCH}/autograd/function.py", 575, "apply")
BACKWARD_APPLY = py(f"{TORCH}/autograd/function.py", 307, "apply")

TRAIN_STEP = py(f"{PITH}/tasks/pretrain_lm.py", 420, "train_step")
OUTER = [
    TRAIN_STEP,
    py(f"{PITH}/tasks/pretrain_lm.py", 540, "launch"),
    py("/workspace/pith-train/examples/pretrain_lm/qwen3-30b-a3b/script.py", 31, "<module>"),
    py("/usr/lib/python3.11/runpy.py", 88, "_run_code"),
    py("/usr/lib/python3.11/runpy.py", 198, "_run_module_as_main"),
]
DUALPIPE_STEP = py(f"{PITH}/dualpipe/dualpipev.py", 590, "step")
FWD = [py(f"{PITH}/dualpipe/dualpipev.py", 214, "_forward_compute_chunk"),
       py(f"{PITH}/dualpipe/dualpipev.py", 362, "_forward_chunk"), DUALPIPE_STEP] + OUTER
STAGE1 = py(f"{PITH}/dualpipe/execution.py", 83, "stage1_f")
STAGE2 = py(f"{PITH}/dualpipe/execution.py", 131, "stage2_f")
STAGE3 = py(f"{PITH}/dualpipe/execution.py", 200, "stage3_f")
LAYER_STAGE1 = py(f"{PITH}/models/qwen3_moe.py", 207, "forward_stage1")
ATTN_FWD = py(f"{PITH}/models/qwen3_moe.py", 170, "forward")
EXPERTS_FWD = py(f"{PITH}/models/qwen3_moe.py", 62, "forward")
EXPERTS_SILU = py(f"{PITH}/models/qwen3_moe.py", 64, "forward")
LAYER_STAGE3 = py(f"{PITH}/models/qwen3_moe.py", 225, "forward_stage3")
LINEAR_FWD = py(f"{TORCH}/nn/modules/linear.py", 125, "forward")
GROUPED_FUNC_FWD = py(f"{PITH}/operators/grouped_linear.py", 36, "forward")
GROUPED_MOD_FWD = py(f"{PITH}/operators/grouped_linear.py", 85, "forward")
SILU_FUNC_FWD = py(f"{PITH}/operators/silu_mul.py", 103, "forward")
SILU_CALL = py(f"{PITH}/operators/silu_mul.py", 143, "silu_mul")
SILU_FUNC_BWD = py(f"{PITH}/operators/silu_mul.py", 119, "backward")
GROUPED_FUNC_BWD = py(f"{PITH}/operators/grouped_linear.py", 44, "backward")
A2A = py(f"{PITH}/operators/all_to_all.py", 48, "all_to_all")
A2A_CALL = py(f"{PITH}/operators/all_to_all.py", 55, "all_to_all")
DIST_A2A = py(f"{TORCH}/distributed/distributed_c10d.py", 4421, "all_to_all_single")
C10D_LOGGER = py(f"{TORCH}/distributed/c10d_logger.py", 81, "wrapper")
GET_BATCH = py(f"{PITH}/tasks/pretrain_lm.py", 80, "get_global_batch")
CRITERION = py(f"{PITH}/tasks/pretrain_lm.py", 118, "criterion")
FREE_TENSORS = py(f"{PITH}/dualpipe/dualpipev.py", 404, "_free_tensors")
GROUPED_INIT = py(f"{PITH}/operators/grouped_linear.py", 70, "__init__")
EXPERTS_INIT = py(f"{PITH}/models/qwen3_moe.py", 50, "__init__")
ATTN_INIT = py(f"{PITH}/models/qwen3_moe.py", 130, "__init__")
LINEAR_INIT = py(f"{TORCH}/nn/modules/linear.py", 106, "__init__")
DECODER_INIT = py(f"{PITH}/models/qwen3_moe.py", 185, "__init__")
MODEL_INIT = py(f"{PITH}/models/qwen3_moe.py", 280, "__init__")
SETUP_MODEL = py(f"{PITH}/modules/training.py", 212, "setup_model")
OPT_STEP = py(f"{PITH}/tasks/pretrain_lm.py", 462, "train_step")
ADAMW_INIT = py(f"{TORCH}/optim/adamw.py", 160, "_init_group")
ADAMW_STEP = py(f"{TORCH}/optim/adamw.py", 221, "step")
OPT_WRAPPER = py(f"{TORCH}/optim/optimizer.py", 493, "wrapper")
STEP_FREE = [FREE_TENSORS, DUALPIPE_STEP] + OUTER

INIT_OUTER = [DECODER_INIT, MODEL_INIT, SETUP_MODEL,
              py(f"{PITH}/tasks/pretrain_lm.py", 508, "launch")] + OUTER[2:]


def fwd(*inner, stage=STAGE1, layer=LAYER_STAGE1):
    return list(inner) + [layer, stage] + FWD


# Forward activations through an nn.Linear inside the attention module.
ATTN_PROJ = CallSite(
    py=fwd(LINEAR_FWD, *MODULE_CALL, ATTN_FWD, *MODULE_CALL), cpp=op("addmm"),
    site=site(ATTN_FWD), category="activations", free_py=STEP_FREE)
# A custom autograd.Function's forward (torch/autograd/function.py apply): activations.
EXPERT_GEMM = CallSite(
    py=fwd(GROUPED_FUNC_FWD, FUNCTION_APPLY, GROUPED_MOD_FWD, *MODULE_CALL, EXPERTS_FWD, *MODULE_CALL,
           stage=STAGE3, layer=LAYER_STAGE3),
    cpp=op("_grouped_mm"), site=site(GROUPED_FUNC_FWD), category="activations", free_py=STEP_FREE)
SILU_OUT = CallSite(
    py=fwd(SILU_FUNC_FWD, FUNCTION_APPLY, SILU_CALL, EXPERTS_SILU, *MODULE_CALL, stage=STAGE3,
           layer=LAYER_STAGE3),
    cpp=op("empty_like", binding="torch::autograd::THPVariable_empty_like(_object*, _object*, _object*)"),
    site=site(SILU_FUNC_FWD), category="activations", free_py=STEP_FREE)
# The all-to-all receive buffer pithtrain allocates before dispatching tokens.
A2A_RECV = CallSite(py=[A2A, STAGE2] + FWD, cpp=op("empty", binding="torch::autograd::THPVariable_empty(_object*, _object*, _object*)"),
                    site=site(A2A), category="communication", free_py=STEP_FREE)
NCCL_BUF = CallSite(py=[DIST_A2A, C10D_LOGGER, A2A_CALL, STAGE2] + FWD, cpp=NCCL + op("empty", binding=False),
                    site=site(A2A_CALL), category="communication", free_py=STEP_FREE)
BATCH = CallSite(py=[GET_BATCH, TRAIN_STEP] + OUTER[1:], cpp=op("to", binding="torch::autograd::THPVariable_to(_object*, _object*, _object*)"),
                 site=site(GET_BATCH), category="other")
LOSS = CallSite(py=[py(f"{TORCH}/nn/functional.py", 3494, "cross_entropy"), CRITERION,
                    py(f"{PITH}/dualpipe/dualpipev.py", 378, "_forward_chunk"), DUALPIPE_STEP] + OUTER,
                cpp=op("log_softmax"), site=site(CRITERION), category="activations")
CUBLAS = CallSite(py=fwd(LINEAR_FWD, *MODULE_CALL, ATTN_FWD, *MODULE_CALL), cpp=CUBLAS_WS + op("addmm", binding=False),
                  site=site(ATTN_FWD), category="temporary", category_python="activations")

# Backward on the autograd engine's device thread: only C++ frames (empty with
# stacks="python"), except a Python custom Function's backward.
MM_BWD_FRAMES = op("mm", binding=False) + backward_node("MmBackward0")
MM_BACKWARD = CallSite(cpp=MM_BWD_FRAMES, thread="autograd", site=cpp_site(MM_BWD_FRAMES, "MmBackward0"),
                       site_python=None, category="gradients")
ACCUM = CallSite(cpp=ACCUMULATE_GRAD, thread="autograd",
                 site=cpp_site(ACCUMULATE_GRAD, "AccumulateGrad::apply"), site_python=None,
                 category="gradients")
SILU_BWD = CallSite(py=[SILU_FUNC_BWD, BACKWARD_APPLY], thread="autograd",
                    cpp=op("empty_like", binding=False), site=site(SILU_FUNC_BWD), category="gradients")
GROUPED_BWD = CallSite(py=[GROUPED_FUNC_BWD, BACKWARD_APPLY], thread="autograd",
                       cpp=op("_grouped_mm", binding=False), site=site(GROUPED_FUNC_BWD),
                       category="gradients")

# Parameters made in a module's __init__ (nn.Parameter(torch.empty(...))).
EXPERT_WEIGHT = CallSite(py=[GROUPED_INIT, EXPERTS_INIT] + INIT_OUTER,
                         cpp=op("empty", binding="torch::autograd::THPVariable_empty(_object*, _object*, _object*)"),
                         site=site(GROUPED_INIT), category="parameters")
ATTN_WEIGHT = CallSite(py=[LINEAR_INIT, ATTN_INIT] + INIT_OUTER,
                       cpp=op("empty", binding="torch::autograd::THPVariable_empty(_object*, _object*, _object*)"),
                       site=site(ATTN_INIT), category="parameters")
ADAM_STATE = CallSite(py=[ADAMW_INIT, ADAMW_STEP, OPT_WRAPPER, OPT_STEP] + OUTER[1:],
                      cpp=op("zeros_like", binding="torch::autograd::THPVariable_zeros_like(_object*, _object*, _object*)"),
                      site=site(OPT_STEP), category="optimizer_state")

# Things the fixtures need beyond pithtrain's step.
def user(path, line, name, *callers, category="other", cpp=None):
    frames = [py(path, line, name), *callers]
    return CallSite(py=frames + [TRAIN_STEP] + OUTER[1:], cpp=cpp or op("empty", binding="torch::autograd::THPVariable_empty(_object*, _object*, _object*)"),
                    site=site(frames[0]), category=category)
