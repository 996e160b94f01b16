"""The call sites of a pithtrain-like MoE training step, with what each one is.

Each ``CallSite`` carries the Python frames a real run shows (pithtrain 889a408's
file and function names, torch's module-call frames between them), the C++ frames of
the operator, the thread, and the truth the tests compare with: the frame a memory
engineer names the allocation by and its category. Nested ``nn.Module`` calls repeat
``_call_impl``/``_wrapped_call_impl`` (the same frame dicts several times in one stack).
"""

from .frames import (ACCUMULATE_GRAD, CUBLAS_WS, FACTORY_STRIDED, NCCL, CallSite, CppFrame, TORCH, PITH,
                     backward_node, op, py)


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


# --- a peft LoRA fine-tune of a Llama model -----------------------------------------
# transformers' LlamaForCausalLM with 4-bit base weights (bitsandbytes), LoRA adapters on
# q_proj and v_proj (peft), loaded with device_map="auto": accelerate's hook
# (hooks.py new_forward) sits in most module calls. As in a real snapshot of such a run,
# every decoder layer runs the same Python lines (`for decoder_layer in self.layers`),
# so each of a layer's stacks is the same in every layer; its backward on the engine's
# thread is C++ only, except bitsandbytes' custom Function (through PyNode).
SITE_PKG = TORCH.rsplit("/", 1)[0]
LLAMA = f"{SITE_PKG}/transformers/models/llama/modeling_llama.py"
HOOK = py(f"{SITE_PKG}/accelerate/hooks.py", 166, "new_forward")
FT_SCRIPT = "/workspace/ftcourse/train_lora.py"
FT_OUTER = [py(FT_SCRIPT, 41, "train"), py(FT_SCRIPT, 63, "<module>")]


def hooked(f):
    """`f` called as an nn.Module with accelerate's hook: forward, new_forward, the call."""
    return [f, HOOK] + MODULE_CALL


def is_library(f):
    """An installed package's frame (transformers, accelerate, peft, bitsandbytes)."""
    return "/site-packages/" in f.filename and not f.filename.startswith(TORCH + "/")


def attribution(frames):
    """(site, library) as a memory engineer names an allocation: the first frame in
    the user's own files, and the innermost library frame below it (the library code
    that allocated for it); without a user frame, that library frame for both."""
    return attribution_with(frames)


def attribution_with(frames, torch_prefix=TORCH + "/", library_dir="/site-packages/", stdlib=None):
    """`attribution` for another layout (Windows: backslashes). Standard-library
    frames (`stdlib` prefix, else any `lib` folder with no site-packages) are never
    the user's; without a user or library frame the site is the first torch frame."""
    lib = torch = None
    for f in frames:
        if f.filename.startswith(torch_prefix):
            torch = torch or f
            continue
        if library_dir in f.filename:
            lib = lib or f
            continue
        if "\\lib\\" in f.filename.lower() or "/lib/python3" in f.filename:
            continue
        return site(f), site(lib)
    if lib is not None:
        return site(lib), site(lib)
    return site(torch), None


def lib_site(frames, cpp, category, **kw):
    s, lib = attribution(frames)
    return CallSite(py=frames, cpp=cpp, site=s, library=lib, category=category, **kw)


FT_MODEL = (hooked(py(LLAMA, 1164, "forward")) + [py(f"{SITE_PKG}/peft/tuners/tuners_utils.py", 179, "forward")]
            + MODULE_CALL + [py(f"{SITE_PKG}/peft/peft_model.py", 1430, "forward")] + MODULE_CALL + FT_OUTER)
FT_LAYERS = hooked(py(LLAMA, 968, "forward")) + FT_MODEL


def ft_site(inner, line, cpp):
    """An allocation inside decoder layer code called at LlamaDecoderLayer.forward `line`
    (712 input_layernorm, 713 self_attn, 726 post_attention_layernorm, 727 mlp)."""
    frames = list(inner) + hooked(py(LLAMA, line, "forward")) + FT_LAYERS
    return lib_site(frames, cpp, "activations")


ATTN_Q = hooked(py(LLAMA, 615, "forward"))  # query_states = self.q_proj(hidden_states)
ATTN_K = hooked(py(LLAMA, 616, "forward"))
ATTN_V = hooked(py(LLAMA, 617, "forward"))
ATTN_ROPE = hooked(py(LLAMA, 630, "forward"))
ATTN_SDPA = hooked(py(LLAMA, 649, "forward"))
ATTN_O = hooked(py(LLAMA, 660, "forward"))
MLP = hooked(py(LLAMA, 216, "forward"))  # down_proj(act_fn(gate_proj(x)) * up_proj(x))
BNB_DEQ = py(f"{SITE_PKG}/bitsandbytes/functional.py", 1349, "dequantize_4bit")
BNB_FN = f"{SITE_PKG}/bitsandbytes/autograd/_functions.py"
BNB_MATMUL = [py(BNB_FN, 509, "forward"), FUNCTION_APPLY, py(BNB_FN, 579, "matmul_4bit")] + hooked(
    py(f"{SITE_PKG}/bitsandbytes/nn/modules.py", 468, "forward"))
LORA = f"{SITE_PKG}/peft/tuners/lora/bnb.py"
LORA_ADAPT = [py(LORA, 474, "forward")] + MODULE_CALL  # lora_B(lora_A(dropout(x))) * scaling
LORA_ADD = [py(LORA, 480, "forward")] + MODULE_CALL  # result = result + output
DROPOUT = [py(f"{TORCH}/nn/functional.py", 1425, "dropout"), py(f"{TORCH}/nn/modules/dropout.py", 70, "forward")]
ROTATE_HALF = py(LLAMA, 157, "rotate_half")
ROPE_Q = py(LLAMA, 182, "apply_rotary_pos_emb")


def ft_linear4bit(caller, line):
    """One 4-bit projection called from `caller`: (the dequantized weight, a temporary;
    the matmul's output)."""
    deq = ft_site([BNB_DEQ] + BNB_MATMUL + caller, line, op("empty", binding=False))
    out = ft_site(BNB_MATMUL + caller, line, op("mm", binding=False))
    return deq, out


def ft_lora(proj):
    """A LoRA layer on `proj` (saved for backward: dropout(x) for lora_A's gradient;
    `result = result + lora_B(lora_A(dropout(x))) * scaling` for the rotary embedding
    or attention)."""
    drop = ft_site(DROPOUT + MODULE_CALL + LORA_ADAPT + proj, 713, op("native_dropout", binding=False))
    res = ft_site(LORA_ADD + proj, 713, op("add", binding=False))
    return drop, res


RMS_FWD = [py(LLAMA, 89, "forward"), HOOK] + MODULE_CALL
FT_RMS1 = ft_site(RMS_FWD, 712, op("mul", binding=False))
FT_RMS2 = ft_site(RMS_FWD, 726, op("mul", binding=False))
FT_Q = ft_lora(ATTN_Q)
FT_K = ft_linear4bit(ATTN_K, 713)[1]
FT_V = ft_lora(ATTN_V)
FT_ROT_CAT = ft_site([ROTATE_HALF, ROPE_Q] + ATTN_ROPE, 713, op("cat", binding=False))
FT_SDPA = ft_site([py(f"{TORCH}/nn/functional.py", 5900, "scaled_dot_product_attention")] + ATTN_SDPA, 713,
                  op("_scaled_dot_product_efficient_attention", binding=False))
FT_O = ft_linear4bit(ATTN_O, 713)[1]
FT_GATE = ft_linear4bit(MLP, 727)
FT_SILU = ft_site([py(f"{TORCH}/nn/functional.py", 2380, "silu"),
                   py(f"{SITE_PKG}/transformers/activations.py", 56, "forward")] + MODULE_CALL + MLP, 727,
                  op("silu", binding=False))
FT_MUL = ft_site(MLP, 727, op("mul", binding=False))
FT_DOWN = ft_linear4bit(MLP, 727)[1]
# LlamaModel's final norm, after the layers
FT_NORM = lib_site(RMS_FWD + [py(LLAMA, 1006, "forward")] + FT_LAYERS[1:], op("mul", binding=False),
                   "activations")
FT_EMBED = lib_site([py(f"{TORCH}/nn/functional.py", 2551, "embedding"), py(f"{TORCH}/nn/modules/sparse.py", 190, "forward"),
                     HOOK] + MODULE_CALL + [py(LLAMA, 934, "forward")] + FT_LAYERS[1:],
                    op("embedding", binding=False), "activations")
# lm_head (a plain Linear with accelerate's hook): the user's training loop, by way of
# the hook, the first frame outside torch.
FT_LOGITS = lib_site([LINEAR_FWD, HOOK] + MODULE_CALL + [py(LLAMA, 1183, "forward")] + FT_MODEL[1:],
                     op("mm", binding=False), "activations")
_CE = [py(f"{TORCH}/nn/functional.py", 3494, "cross_entropy"), py(f"{TORCH}/nn/modules/loss.py", 1310, "forward")]
FT_LOSS = lib_site(_CE + MODULE_CALL + [py(LLAMA, 1197, "forward")] + FT_MODEL[1:], op("nll_loss_forward", binding=False),
                   "activations")
FT_BATCH = CallSite(py=[py(FT_SCRIPT, 38, "train"), FT_OUTER[1]],
                    cpp=op("to", binding="torch::autograd::THPVariable_to(_object*, _object*, _object*)"),
                    site=site(py(FT_SCRIPT, 38, "train")), category="other")


def ft_engine(cpp, node):
    frames = list(cpp) + backward_node(node)
    return CallSite(cpp=frames, thread="autograd", site=cpp_site(frames, node), site_python=None,
                    category="gradients")


def _detail(name):
    return CppFrame(f"torch::autograd::generated::details::{name}(at::Tensor const&, at::Tensor const&, "
                    "c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>, c10::Layout, c10::Scalar const&)", "")


# Backward on the engine's thread, each stack the same in every layer: bitsandbytes'
# MatMul4Bit.backward (Python, the same frames for every projection), rotate_half's neg
# (NegBackward0, once for q and once for k: in the real snapshot the two stacks differ
# only below the operator, empty vs empty_strided, so each recurs once per layer), the
# LoRA matmuls' weight gradients (mm_mat2_backward; AccumulateGrad takes them as .grad,
# four per layer, live until zero_grad), their input gradients, elementwise backward.
FT_BWD_DEQ = lib_site([BNB_DEQ, py(BNB_FN, 540, "backward"), BACKWARD_APPLY], op("empty", binding=False),
                      "gradients", thread="autograd")
FT_BWD_DGRAD = lib_site([py(BNB_FN, 540, "backward"), BACKWARD_APPLY], op("mm", binding=False), "gradients",
                        thread="autograd")
_NEG = op("neg", binding=False) + backward_node("NegBackward0")
FT_NEG_Q = CallSite(cpp=_NEG, thread="autograd", site=cpp_site(_NEG, "NegBackward0"), site_python=None,
                    category="gradients")
FT_NEG_K = CallSite(cpp=_NEG, thread="autograd", site=cpp_site(_NEG, "NegBackward0"), site_python=None,
                    category="gradients", factory=FACTORY_STRIDED)
_MM = op("mm", binding=False)
_MM2 = _MM + [_detail("mm_mat2_backward")] + backward_node("MmBackward0")
_MM1 = _MM + [_detail("mm_mat1_backward")] + _MM2[len(_MM) + 1:]
FT_LORA_GRAD = CallSite(cpp=_MM2, thread="autograd", site=cpp_site(_MM2, "mm_mat2_backward"), site_python=None,
                        category="gradients")
FT_LORA_DGRAD = CallSite(cpp=_MM1, thread="autograd", site=cpp_site(_MM1, "mm_mat1_backward"), site_python=None,
                         category="gradients")
FT_MUL_BWD = ft_engine(op("mul", binding=False) + [CppFrame(
    "at::Tensor torch::autograd::generated::details::mul_tensor_backward<at::Tensor>(at::Tensor, at::Tensor, c10::ScalarType)", "")],
    "MulBackward0")
FT_POW_BWD = ft_engine(op("pow", binding=False) + [CppFrame(
    "at::Tensor torch::autograd::generated::details::pow_backward(at::Tensor, at::Tensor const&, c10::Scalar const&)", "")],
    "PowBackward0")
FT_SLICE_BWD = ft_engine(op("zeros", binding=False) + [CppFrame(
    "at::native::slice_backward(at::Tensor const&, c10::ArrayRef<long>, long, long, long, long)", "??")],
    "SliceBackward0")
FT_SILU_BWD = ft_engine(op("silu_backward", binding=False), "SiluBackward0")
FT_SDPA_BWD = ft_engine(op("_efficient_attention_backward", binding=False), "ScaledDotProductEfficientAttentionBackward0")
FT_CE_BWD = ft_engine(op("nll_loss_backward", binding=False), "NllLossBackward0")
FT_FREE_ZERO_GRAD = [py(f"{TORCH}/optim/optimizer.py", 1010, "zero_grad"), py(FT_SCRIPT, 45, "train"), FT_OUTER[1]]
FT_ADAM = CallSite(py=[ADAMW_INIT, ADAMW_STEP, OPT_WRAPPER, py(FT_SCRIPT, 44, "train"), FT_OUTER[1]],
                   cpp=op("zeros_like", binding="torch::autograd::THPVariable_zeros_like(_object*, _object*, _object*)"),
                   site=site(py(FT_SCRIPT, 44, "train")), category="optimizer_state")
