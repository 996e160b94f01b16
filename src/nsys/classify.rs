//! Kernel categories, decided on the demangled kernel name.
//!
//! Short names say too little (a cutlass GEMM's short name is `Kernel` or `Kernel2`), so the
//! report always classifies `demangledName`. The rules, in order (first match wins):
//!
//! 1. communication — NCCL device kernels (`ncclDevKernel_*`, legacy `ncclKernel_*`,
//!    `ncclSendRecvKernel*`, ...) and DeepEP dispatch/combine kernels; split further by collective;
//! 2. attention — flash-attention (`flash_fwd`, `flash::`), fused MHA (`fmha`), SDPA and
//!    anything naming attention;
//! 3. GEMM — cutlass, cuBLAS (`gemm`, `nvjet`, `cublas`), xmma, `matmul`;
//! 4. elementwise — PyTorch's `elementwise_kernel` family;
//! 5. other — the rest (reductions, norms, copies inside kernels, ...).
//!
//! Attention is tested before GEMM because flash-attention kernels are built on cutlass and
//! carry `cutlass::` in their template arguments.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Communication,
    Gemm,
    Attention,
    Elementwise,
    Other,
}

impl Category {
    pub const ALL: [Category; 5] = [
        Category::Communication,
        Category::Gemm,
        Category::Attention,
        Category::Elementwise,
        Category::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Communication => "communication",
            Category::Gemm => "gemm",
            Category::Attention => "attention",
            Category::Elementwise => "elementwise",
            Category::Other => "other",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// The collective (or point-to-point) operation a communication kernel performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum CommOp {
    SendRecv,
    AllGather,
    AllReduce,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
    Other,
}

impl CommOp {
    pub const ALL: [CommOp; 8] = [
        CommOp::SendRecv,
        CommOp::AllGather,
        CommOp::AllReduce,
        CommOp::ReduceScatter,
        CommOp::AllToAll,
        CommOp::Broadcast,
        CommOp::Reduce,
        CommOp::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CommOp::SendRecv => "SendRecv",
            CommOp::AllGather => "AllGather",
            CommOp::AllReduce => "AllReduce",
            CommOp::ReduceScatter => "ReduceScatter",
            CommOp::AllToAll => "AllToAll",
            CommOp::Broadcast => "Broadcast",
            CommOp::Reduce => "Reduce",
            CommOp::Other => "Other",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// What a kernel is: its category and, for communication, the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    pub category: Category,
    pub comm: Option<CommOp>,
}

fn comm_op(lower: &str) -> CommOp {
    // Order matters: "allreduce" and "reducescatter" contain "reduce".
    if lower.contains("sendrecv") || lower.contains("send_recv") {
        CommOp::SendRecv
    } else if lower.contains("alltoall") || lower.contains("all_to_all") {
        CommOp::AllToAll
    } else if lower.contains("allgather") || lower.contains("all_gather") {
        CommOp::AllGather
    } else if lower.contains("reducescatter") || lower.contains("reduce_scatter") {
        CommOp::ReduceScatter
    } else if lower.contains("allreduce") || lower.contains("all_reduce") {
        CommOp::AllReduce
    } else if lower.contains("broadcast") || lower.contains("bcast") {
        CommOp::Broadcast
    } else if lower.contains("reduce") {
        CommOp::Reduce
    } else if lower.contains("send") || lower.contains("recv") {
        CommOp::SendRecv
    } else {
        CommOp::Other
    }
}

/// Classify one kernel by its demangled name.
pub fn classify(demangled: &str) -> Class {
    let lower = demangled.to_ascii_lowercase();
    let l = lower.as_str();
    if l.contains("nccl") {
        return Class {
            category: Category::Communication,
            comm: Some(comm_op(l)),
        };
    }
    if l.contains("deep_ep") || l.contains("deepep") {
        // DeepEP's MoE dispatch/combine kernels are an all-to-all exchange.
        return Class {
            category: Category::Communication,
            comm: Some(CommOp::AllToAll),
        };
    }
    let is = |c| Class {
        category: c,
        comm: None,
    };
    if l.contains("flash_fwd")
        || l.contains("flash_bwd")
        || l.contains("flash::")
        || l.contains("flashattn")
        || l.contains("flash_attn")
        || l.contains("fmha")
        || l.contains("attention")
        || l.contains("sdpa")
        || l.contains("_attn")
    {
        return is(Category::Attention);
    }
    if l.contains("gemm")
        || l.contains("cutlass")
        || l.contains("cublas")
        || l.contains("nvjet")
        || l.contains("xmma")
        || l.contains("matmul")
        || l.contains("gemv")
    {
        return is(Category::Gemm);
    }
    if l.contains("elementwise") {
        return is(Category::Elementwise);
    }
    is(Category::Other)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat(name: &str) -> Category {
        classify(name).category
    }

    #[test]
    fn nccl_kernels_new_and_legacy() {
        let cases = [
            (
                "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
                CommOp::SendRecv,
            ),
            (
                "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                CommOp::AllGather,
            ),
            (
                "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                CommOp::ReduceScatter,
            ),
            (
                "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
                CommOp::AllReduce,
            ),
            (
                "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)",
                CommOp::SendRecv,
            ),
            (
                "ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                CommOp::Broadcast,
            ),
            (
                "ncclDevKernel_Reduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                CommOp::Reduce,
            ),
            (
                "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*)",
                CommOp::AllToAll,
            ),
        ];
        for (name, op) in cases {
            let c = classify(name);
            assert_eq!(c.category, Category::Communication, "{name}");
            assert_eq!(c.comm, Some(op), "{name}");
        }
    }

    #[test]
    fn gemm_attention_elementwise_other() {
        assert_eq!(
            cat(
                "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x1_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x1_tn_align8::Params)"
            ),
            Category::Gemm
        );
        assert_eq!(
            cat("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"),
            Category::Gemm
        );
        assert_eq!(
            cat("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"),
            Category::Gemm
        );
        assert_eq!(
            cat("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn"),
            Category::Gemm
        );
        assert_eq!(
            cat(
                "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, true>(Flash_fwd_params)"
            ),
            Category::Attention
        );
        assert_eq!(
            cat(
                "fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t>::Params)"
            ),
            Category::Attention
        );
        assert_eq!(
            cat(
                "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>>(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)"
            ),
            Category::Elementwise
        );
        assert_eq!(
            cat(
                "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>>(at::native::ReduceOp<float>)"
            ),
            Category::Other
        );
        // A cutlass kernel's short name says nothing.
        assert_eq!(cat("Kernel2"), Category::Other);
    }
}
