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
            ("torch::(anonymous namespace)::gather_with_cpp()", "Module.cpp"),
            ("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)", ""),
            ("at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)", "??"),
            ("_PyEval_EvalFrameDefault", "??"),
            ("PyObject_Call", "??"),
            ("at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", "??"),
            ("start_thread", "??"),
        ] {
            assert!(never_a_site(n, f).is_some(), "{n}");
        }
        for (n, f) in [
            ("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "accumulate_grad.cpp"),
            ("torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "Functions.cpp"),
            ("forward", "/src/model.py"),
        ] {
            assert!(never_a_site(n, f).is_none(), "{n}");
        }
    }

    #[test]
    fn stdlib_is_not_site_packages() {
        assert!(is_stdlib("/usr/lib/python3.11/runpy.py"));
        assert!(!is_stdlib("/venv/lib/python3.11/site-packages/flash_attn/x.py"));
        assert!(!is_stdlib("/src/train.py"));
    }

    #[test]
    fn short_names() {
        assert_eq!(
            short_function("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
            "torch::autograd::AccumulateGrad::apply"
        );
        assert_eq!(
            short_function("at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>)"),
            "at::detail::_empty_generic"
        );
        assert_eq!(short_function("forward"), "forward");
    }
}
