"""Frames as torch's unwinder and Python's interpreter produce them.

A *call site* is what the program was doing when it called the allocator: the Python
frames (innermost first, as ``PyEval_GetFrame`` walks them), the ATen/autograd C++
frames of the operator that allocates, and the thread it ran on. ``Traceback`` is
torch's ``CapturedTraceback``: one per allocator call, gathered with the recording's
``stacks`` setting, and turned into frame dicts by ``graph.symbolize`` exactly as
``py_symbolize`` does (one dict per unique frame, one list per traceback).

The C++ frames follow what real snapshots contain (see the files examined for
docs/snapshot.md): the unwinder itself, the caching allocator, the empty-tensor
factories, the dispatcher's wrappers, the operator, the Python bindings, and one
``_PyEval_EvalFrameDefault`` per Python frame (torch's ``symbolize`` inserts each Python
frame just before the interpreter frame that ran it). Names are demangled, file names
are often ``??`` or a bare file name, lines 0, as ``unwind::symbolize`` reports them in
its fast mode.
"""

import itertools

TORCH = "/usr/local/lib/python3.11/site-packages/torch"
PITH = "/workspace/pith-train/pithtrain"

_ip = itertools.count(0x7F3E10000000, 0x40)


class CppFrame:
    """One C++ return address. Two frames of the same function at different call
    sites are different addresses (different dicts in the snapshot, equal content)."""

    __slots__ = ("name", "filename", "line", "ip")

    def __init__(self, name, filename="??", line=0):
        self.name, self.filename, self.line = name, filename, line
        self.ip = next(_ip)

    def key(self):
        return ("cpp", self.ip)

    def content(self):
        return (self.filename, self.line, self.name)


class PyFrame:
    """One Python frame: a code object and an instruction offset (``lasti``)."""

    __slots__ = ("filename", "line", "name")

    def __init__(self, filename, line, name):
        self.filename, self.line, self.name = filename, line, name

    def key(self):
        return ("py", self.filename, self.line, self.name)

    def content(self):
        return (self.filename, self.line, self.name)


def py(filename, line, name):
    return PyFrame(filename, line, name)


# --- C++ frames every CUDA allocation passes through --------------------------------

UNWIND = [
    CppFrame("torch::unwind::unwind()", "??"),
    CppFrame("torch::CapturedTraceback::gather(bool, bool, bool)", "??"),
    CppFrame("torch::(anonymous namespace)::gather_with_cpp()", "Module.cpp"),
]
MALLOC = [
    CppFrame("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)",
             "CUDACachingAllocator.cpp"),
    CppFrame("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, unsigned long, CUstream_st*)", ""),
    CppFrame("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)", ""),
]
FACTORY = [
    CppFrame("at::TensorBase at::detail::_empty_generic<long>(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)", ""),
    CppFrame("at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)", "??"),
    CppFrame("at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, std::optional<c10::MemoryFormat>)", "??"),
    CppFrame("at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)", "??"),
]
# The strided factory (at::empty_strided: an operator whose output keeps its input's
# strides, e.g. a TensorIterator op on a transposed view): the same call stack above
# it, a different one below, so torch records a different stack.
FACTORY_STRIDED = [
    CppFrame("at::TensorBase at::detail::_empty_strided_generic<c10::ArrayRef<long> >(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType)", ""),
    CppFrame("at::detail::empty_strided_generic(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType)", "??"),
    CppFrame("at::detail::empty_strided_cuda(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>)", "??"),
    CppFrame("at::detail::empty_strided_cuda(c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions const&)", "??"),
]
FREE = [
    CppFrame("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::free(c10::cuda::CUDACachingAllocator::Native::Block*)",
             "CUDACachingAllocator.cpp"),
    CppFrame("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::free(void*)", ""),
    CppFrame("c10::cuda::CUDACachingAllocator::Native::local_raw_delete(void*)", ""),
    CppFrame("c10::StorageImpl::~StorageImpl()", "??"),
    CppFrame("c10::TensorImpl::~TensorImpl()", "??"),
    CppFrame("THPVariable_subclass_dealloc(_object*)", "python_variable.cpp"),
]
# One interpreter frame per Python frame (CPython 3.11 runs nested Python calls in one
# _PyEval_EvalFrameDefault, but each call from C re-enters it: torch's frames alternate).
EVAL = [CppFrame("_PyEval_EvalFrameDefault", "??") for _ in range(8)]
CALL_GLUE = [
    CppFrame("_PyObject_MakeTpCall", "??"),
    CppFrame("_PyFunction_Vectorcall", "??"),
    CppFrame("PyObject_Call", "??"),
    CppFrame("method_vectorcall", "??"),
    CppFrame("cfunction_call", "Objects/methodobject.c"),
    CppFrame("_PyObject_Call_Prepend", "Objects/call.c"),
]
MAIN_TAIL = [
    CppFrame("pymain_run_python", "Modules/main.c"),
    CppFrame("Py_RunMain", "Modules/main.c"),
    CppFrame("__libc_start_main", "??"),
    CppFrame("_start", "??"),
]
AUTOGRAD_THREAD = [
    CppFrame("torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "??"),
    CppFrame("torch::autograd::call_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&)", "engine.cpp"),
    CppFrame("torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)", "engine.cpp"),
    CppFrame("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", "engine.cpp"),
    CppFrame("torch::autograd::Engine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)", "engine.cpp"),
    CppFrame("torch::autograd::python::PythonEngine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)", "python_engine.cpp"),
    CppFrame("execute_native_thread_routine", "??"),
    CppFrame("start_thread", "??"),
    CppFrame("clone3", "??"),
]


def op(name, binding=None, kernel=None):
    """The C++ frames of one ATen operator called from Python: kernel, dispatcher
    wrappers, autograd's VariableType, the Python binding."""
    kernel = kernel or f"at::native::{name}"
    frames = [
        CppFrame(f"{kernel}(at::Tensor const&, at::Tensor const&)", "??"),
        CppFrame(f"at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA__{name}(at::Tensor const&, at::Tensor const&)", "RegisterCUDA.cpp"),
        CppFrame(f"c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor (at::Tensor const&, at::Tensor const&), &at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA__{name}>, at::Tensor, c10::guts::typelist::typelist<at::Tensor const&, at::Tensor const&> >, at::Tensor (at::Tensor const&, at::Tensor const&)>::call(c10::OperatorKernel*, c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)",
                 "RegisterCUDA.cpp"),
        CppFrame(f"at::_ops::{name}::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)", "??"),
        CppFrame(f"torch::autograd::VariableType::(anonymous namespace)::{name}(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)", "VariableType_0.cpp"),
        CppFrame(f"at::_ops::{name}::call(at::Tensor const&, at::Tensor const&)", "??"),
    ]
    if binding is not False:
        frames.append(CppFrame(binding or f"torch::autograd::THPVariable_{name}(_object*, _object*, _object*)",
                               "python_torch_functions_0.cpp"))
    return frames


def backward_node(node):
    """C++ frames of an autograd node's apply on the engine's device thread."""
    return [CppFrame(f"torch::autograd::generated::{node}::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
                     "Functions.cpp")]


ACCUMULATE_GRAD = [
    CppFrame("at::_ops::clone::call(at::Tensor const&, std::optional<c10::MemoryFormat>)", "??"),
    CppFrame("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "accumulate_grad.cpp"),
]
PY_NODE = [
    CppFrame("torch::autograd::PyNode::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)", "python_function.cpp"),
]
NCCL = [
    CppFrame("c10d::ProcessGroupNCCL::alltoall_base(at::Tensor&, at::Tensor&, std::vector<long, std::allocator<long> >&, std::vector<long, std::allocator<long> >&, c10d::AllToAllOptions const&)", "ProcessGroupNCCL.cpp"),
    CppFrame("c10d::ops::(anonymous namespace)::alltoall_base_CUDA(at::Tensor&, at::Tensor&, c10::intrusive_ptr<c10d::ProcessGroup> const&, std::vector<long>, std::vector<long>, long)", "Ops.cpp"),
]
CUBLAS_WS = [
    CppFrame("at::cuda::getCUDABlasLtWorkspace()", "CublasHandlePool.cpp"),
    CppFrame("at::cuda::blas::gemm_and_bias<c10::BFloat16>(bool, bool, long, long, long, c10::BFloat16, c10::BFloat16 const*, long, c10::BFloat16 const*, long, c10::BFloat16 const*, c10::BFloat16*, long, at::cuda::blas::GEMMAndBiasActivationEpilogue)", "Blas.cpp"),
]


class CallSite:
    """What the program was doing at an allocator call.

    ``py`` are Python frames innermost first; ``cpp`` the operator's C++ frames
    (innermost first, above the allocator); ``thread`` is "main" or "autograd".
    ``site``/``category`` are what a memory engineer names this allocation: the
    truth the tests compare with (``site_python`` when ``stacks="python"`` loses the
    frame that names it)."""

    def __init__(self, py=(), cpp=(), thread="main", site=None, category="other", site_python="same",
                 free_py=None, category_python=None, factory=None, library=None):
        self.py = list(py)
        # The library frame that allocated on the site's behalf (site-packages), if any.
        self.library = library
        self.cpp = list(cpp)
        self.thread = thread
        self.site = site
        self.site_python = site if site_python == "same" else site_python
        self.category = category
        # Without C++ frames the evidence can differ (a cuBLAS workspace is only
        # named in C++; in Python it is the forward that asked for it).
        self.category_python = category_python or category
        # Where tensors from here usually die (the free's own Python frames).
        self.free_py = free_py
        # The empty-tensor factory below the operator (FACTORY unless it asks for
        # strided output).
        self.factory = factory

    def site_for(self, stacks):
        return self.site if stacks == "all" else self.site_python

    def library_for(self, stacks):
        return self.library if self.site_for(stacks) is not None else None

    def category_for(self, stacks):
        return self.category if stacks == "all" else self.category_python


def cpp_stack(site, kind="malloc"):
    """The C++ unwind of an allocator call from `site`, innermost first: the
    interpreter frames are where torch's symbolize puts the Python frames."""
    frames = list(UNWIND)
    frames += MALLOC if kind == "malloc" else FREE
    if kind == "malloc":
        frames += site.factory or FACTORY
    frames += site.cpp if kind == "malloc" else []
    py_frames = site.py if kind == "malloc" else (site.free_py or site.py)
    frames += [CALL_GLUE[0], CALL_GLUE[4]] if py_frames else []
    for i in range(len(py_frames)):
        frames.append(EVAL[i % len(EVAL)])
        frames.append(CALL_GLUE[1 + (i % 3)])
    if site.thread == "autograd":
        # The engine's device thread: a Python custom Function's backward re-enters
        # the interpreter through PyNode; nothing outside the engine is Python.
        frames += (PY_NODE if py_frames else []) + AUTOGRAD_THREAD
    else:
        frames += MAIN_TAIL
    return frames
