//! What each frame of a stack is, as data: the frames that never name a site (the
//! unwinder, the caching allocator, tensor factories and the dispatcher, the CPython
//! interpreter, process start), torch's own Python files, and the frames that say
//! what kind of memory a stack allocates.
//!
//! The never-a-site list extends torch's own viewer (torch/cuda/_memory_viz.py,
//! `_frame_filter`, whose function and file lists are copied here verbatim) with the
//! allocator and ATen plumbing a memory engineer skips when reading a C++-only stack
//! from the autograd engine's thread: what allocated there is the autograd node
//! (`torch::autograd::AccumulateGrad::apply`), not `torch::unwind::unwind()`.

/// How a pattern matches a frame's function name or file name.
#[derive(Clone, Copy, Debug)]
pub enum Match {
    /// The name contains this text.
    Contains(&'static str),
    /// The name starts with this text.
    Prefix(&'static str),
}

impl Match {
    pub fn test(self, s: &str) -> bool {
        match self {
            Match::Contains(t) => s.contains(t),
            Match::Prefix(t) => s.starts_with(t),
        }
    }
}

use Match::*;

/// Why a frame is never the site of an allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// torch's C++ unwinder and traceback gathering.
    Unwinder,
    /// The caching allocator and storage machinery.
    Allocator,
    /// Empty-tensor factories, the dispatcher's wrappers, ATen operator plumbing.
    Plumbing,
    /// The CPython interpreter and its call machinery.
    Interpreter,
    /// Process and thread start.
    Process,
}

/// Function names (first) and file names (second) of frames that are never a site.
/// The first rows are `_memory_viz._frame_filter`'s `omit_functions` and
/// `omit_filenames`.
pub const NEVER_A_SITE: &[(Skip, &[Match], &[Match])] = &[
    (
        Skip::Unwinder,
        &[
            Contains("unwind::unwind"),
            Contains("CapturedTraceback::gather"),
            Contains("gather_with_cpp"),
        ],
        &[],
    ),
    (
        Skip::Process,
        &[
            Contains("_start"),
            Contains("__libc_start_main"),
            Prefix("start_thread"),
            Prefix("clone"),
            Prefix("execute_native_thread_routine"),
        ],
        &[],
    ),
    (
        Skip::Interpreter,
        &[
            Contains("PyEval_"),
            Contains("PyObject_"),
            Contains("PyFunction_"),
            Prefix("_Py"),
            Prefix("Py"),
            Prefix("cfunction_"),
            Prefix("method_vectorcall"),
            Prefix("slot_tp_"),
            Prefix("pymain_"),
        ],
        &[
            Contains("pythonrun.c"),
            Contains("Modules/main.c"),
            Contains("Objects/call.c"),
            Contains("Objects/methodobject.c"),
            Contains("pycore_ceval.h"),
            Contains("ceval.c"),
            Contains("cpython/abstract.h"),
        ],
    ),
    (
        Skip::Allocator,
        &[
            Contains("CUDACachingAllocator"),
            Contains("CachingDeviceAllocator"),
            Prefix("c10::StorageImpl"),
            Prefix("c10::TensorImpl"),
            Prefix("c10::"),
            Contains("THPVariable_subclass_dealloc"),
        ],
        &[Contains("CUDACachingAllocator")],
    ),
    (
        Skip::Plumbing,
        &[
            Prefix("at::detail::empty"),
            Contains("at::detail::_empty"),
            Prefix("at::TensorBase at::detail::"),
            Prefix("at::empty"),
            Prefix("at::native::empty"),
            Prefix("at::_ops::"),
            Prefix("at::("),
            Prefix("c10::impl::"),
            Contains("wrap_kernel_functor"),
            Prefix("torch::autograd::VariableType::"),
            Prefix("torch::autograd::THPVariable_"),
            Prefix("torch::autograd::Node::operator()"),
            Prefix("torch::autograd::call_function"),
            Prefix("torch::autograd::Engine::"),
            Prefix("torch::autograd::python::PythonEngine::"),
        ],
        &[
            Contains("core/boxing"),
            Contains("/Register"),
            Contains("/Redispatch"),
            Prefix("Register"),
        ],
    ),
];

/// ATen operator frames (`at::native::mm`, `at::cuda::blas::...`): a site only when
/// nothing better is on the stack.
pub const OPERATOR: &[Match] = &[Prefix("at::")];

/// Python files that are framework code, not the user's: skipped when looking for the
/// first user frame (`--internal GLOB` adds more). Matched as globs against the whole
/// path or any part of it after a `/`.
pub const INTERNAL_FILES: &[&str] = &[
    "torch/nn/modules/*",
    "torch/autograd/*",
    "torch/optim/*",
    "torch/utils/*",
    "torch/*",
    "*/torchinductor_*/*",
];

/// Standard-library files (`/usr/lib/python3.11/runpy.py`): never the user's code,
/// unlike the site-packages of other libraries next to them.
pub fn is_stdlib(file: &str) -> bool {
    let Some(i) = file.find("/lib/python3") else {
        return false;
    };
    let rest = &file[i + 1..];
    !rest.contains("site-packages/") && !rest.contains("dist-packages/")
}

/// The kinds of memory a stack can show (the report's categories).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, serde::Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Parameters,
    Gradients,
    OptimizerState,
    Activations,
    Temporary,
    Communication,
    Other,
}

impl Category {
    pub fn name(self) -> &'static str {
        match self {
            Category::Parameters => "parameters",
            Category::Gradients => "gradients",
            Category::OptimizerState => "optimizer_state",
            Category::Activations => "activations",
            Category::Temporary => "temporary",
            Category::Communication => "communication",
            Category::Other => "other",
        }
    }
}

/// One category rule: a frame whose function matches any of `names` (matched in
/// lower case for `Lower`) or whose file matches any of `files`, and, for rules
/// limited to a file, both.
pub struct CategoryRule {
    pub category: Category,
    pub names: &'static [Match],
    /// Case-insensitive function-name matches.
    pub lower: &'static [&'static str],
    pub files: &'static [Match],
    /// (file, functions): the function must match inside that file.
    pub in_file: &'static [(&'static str, &'static [&'static str])],
}

/// Evidence, read from the innermost frame outwards: the first frame any rule
/// matches decides (the allocation's closest context: an optimizer step's
/// temporaries are optimizer memory, a checkpoint's recomputation in backward is
/// activations, a custom autograd.Function's forward is activations although its file
/// is torch/autograd). Rules are tried in this order on each frame.
pub const CATEGORY_RULES: &[CategoryRule] = &[
    CategoryRule {
        category: Category::Communication,
        names: &[
            Prefix("c10d::"),
            Contains("ProcessGroup"),
            Contains("Reducer::"),
        ],
        lower: &[
            "all_reduce",
            "allreduce",
            "all_gather",
            "allgather",
            "reduce_scatter",
            "reducescatter",
            "all_to_all",
            "alltoall",
            "broadcast",
            "nccl",
        ],
        files: &[
            Contains("torch/distributed/"),
            Contains("/c10d/"),
            Contains("torch/nn/parallel/"),
        ],
        in_file: &[],
    },
    CategoryRule {
        category: Category::OptimizerState,
        names: &[],
        lower: &[],
        files: &[Contains("torch/optim/")],
        in_file: &[],
    },
    CategoryRule {
        category: Category::Gradients,
        names: &[
            Contains("Backward"),
            Contains("AccumulateGrad"),
            Contains("autograd::Engine"),
            Contains("autograd::PyNode"),
            Prefix("backward"),
        ],
        lower: &[],
        files: &[],
        in_file: &[
            ("torch/autograd/graph.py", &["_engine_run_backward"]),
            ("torch/autograd/__init__.py", &["backward", "grad"]),
            ("torch/_tensor.py", &["backward"]),
        ],
    },
    CategoryRule {
        category: Category::Parameters,
        names: &[],
        lower: &[
            "reset_parameters",
            "load_state_dict",
            "_load_from_state_dict",
            "to_empty",
            "init_weights",
            "_init_weights",
        ],
        files: &[
            Contains("torch/nn/init.py"),
            Contains("torch/nn/parameter.py"),
        ],
        in_file: &[
            ("torch/nn/modules/", &["__init__", "_apply", "to", "cuda"]),
            (
                "torch/distributed/fsdp/",
                &["_init_param_handle_from_module"],
            ),
        ],
    },
    CategoryRule {
        category: Category::Activations,
        names: &[Prefix("forward")],
        lower: &[],
        files: &[
            Contains("torch/nn/functional.py"),
            Contains("torch/utils/checkpoint.py"),
        ],
        in_file: &[
            (
                "torch/nn/modules/module.py",
                &["_call_impl", "_wrapped_call_impl"],
            ),
            ("torch/autograd/function.py", &["apply"]),
        ],
    },
    CategoryRule {
        category: Category::Temporary,
        names: &[],
        lower: &["workspace", "scratch"],
        files: &[],
        in_file: &[],
    },
];

/// Weak evidence, used only when no rule matched anywhere: allocations made in a
/// constructor (`nn.Parameter(torch.empty(...))` in a custom layer's `__init__`).
pub const WEAK_PARAMETERS: &[&str] = &["__init__"];

impl CategoryRule {
    pub fn matches(&self, name: &str, file: &str) -> bool {
        if self.names.iter().any(|m| m.test(name)) || self.files.iter().any(|m| m.test(file)) {
            return true;
        }
        if !self.lower.is_empty() {
            let n = name.to_ascii_lowercase();
            if self.lower.iter().any(|w| n.contains(w)) {
                return true;
            }
        }
        self.in_file
            .iter()
            .any(|(f, names)| file.contains(f) && names.contains(&name))
    }
}

/// Why a frame can never be a site, if it cannot.
pub fn never_a_site(name: &str, file: &str) -> Option<Skip> {
    NEVER_A_SITE
        .iter()
        .find(|(_, names, files)| {
            names.iter().any(|m| m.test(name)) || files.iter().any(|m| m.test(file))
        })
        .map(|(s, _, _)| *s)
}

/// Display form of a C++ function name: no return type, template or argument lists
/// (`torch::autograd::AccumulateGrad::apply`).
pub fn short_function(name: &str) -> String {
    if !name.contains('(') && !name.contains('<') {
        return name.to_string();
    }
    let mut out = String::new();
    let mut depth = 0i32;
    for c in name.chars() {
        match c {
            '<' | '(' => {
                if depth == 0 && c == '(' && !out.ends_with("(anonymous namespace") {
                    if out.ends_with("::") || out.is_empty() {
                        out.push('(');
                        depth += 1;
                        continue;
                    }
                    break;
                }
                depth += 1;
            }
            '>' | ')' => depth -= 1,
            ' ' if depth == 0 => out.clear(),
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    if out.is_empty() {
        name.to_string()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plumbing_is_never_a_site_and_autograd_nodes_are() {
        for (n, f) in [
            ("torch::unwind::unwind()", "??"),
            (
                "torch::(anonymous namespace)::gather_with_cpp()",
                "Module.cpp",
            ),
            (
                "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)",
                "",
            ),
            (
                "at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)",
                "??",
            ),
            ("_PyEval_EvalFrameDefault", "??"),
            ("PyObject_Call", "??"),
            (
                "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)",
                "??",
            ),
            ("start_thread", "??"),
        ] {
            assert!(never_a_site(n, f).is_some(), "{n}");
        }
        for (n, f) in [
            (
                "torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
                "accumulate_grad.cpp",
            ),
            (
                "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
                "Functions.cpp",
            ),
            ("forward", "/src/model.py"),
        ] {
            assert!(never_a_site(n, f).is_none(), "{n}");
        }
    }

    #[test]
    fn stdlib_is_not_site_packages() {
        assert!(is_stdlib("/usr/lib/python3.11/runpy.py"));
        assert!(!is_stdlib(
            "/venv/lib/python3.11/site-packages/flash_attn/x.py"
        ));
        assert!(!is_stdlib("/src/train.py"));
    }

    #[test]
    fn short_names() {
        assert_eq!(
            short_function(
                "torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"
            ),
            "torch::autograd::AccumulateGrad::apply"
        );
        assert_eq!(
            short_function("at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>)"),
            "at::detail::_empty_generic"
        );
        assert_eq!(short_function("forward"), "forward");
    }
}
