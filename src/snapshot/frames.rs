//! What each frame of a stack is, as data: the frames that never name a site (the
//! unwinder, the caching allocator, tensor factories and the dispatcher, the CPython
//! interpreter, process start), torch's own Python files, installed libraries and the
//! standard library. What kind of memory a stack allocates is `categories`.
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

/// torch's own Python files: skipped when looking for the first user frame, the site
/// (`origin: "torch"`) only when no user or library frame is on the stack. Matched as
/// globs against the whole path or any part of it after a separator.
pub const INTERNAL_FILES: &[&str] = &[
    "torch/nn/modules/*",
    "torch/autograd/*",
    "torch/optim/*",
    "torch/utils/*",
    "torch/*",
    "*/torchinductor_*/*",
];

/// Where installed packages live (lower case, `/` separators): a frame under one is a
/// library's (`origin: "library"`), never the user's own code.
pub const LIBRARY_DIRS: &[&str] = &["/site-packages/", "/dist-packages/"];

/// Python's standard-library modules (`sys.stdlib_module_names` of CPython 3.11,
/// sorted): a Windows install keeps them in `Lib\<module>` with no version folder.
pub const STDLIB_MODULES: &[&str] = &[
    "__future__",
    "_abc",
    "_aix_support",
    "_ast",
    "_asyncio",
    "_bisect",
    "_blake2",
    "_bootsubprocess",
    "_bz2",
    "_codecs",
    "_codecs_cn",
    "_codecs_hk",
    "_codecs_iso2022",
    "_codecs_jp",
    "_codecs_kr",
    "_codecs_tw",
    "_collections",
    "_collections_abc",
    "_compat_pickle",
    "_compression",
    "_contextvars",
    "_crypt",
    "_csv",
    "_ctypes",
    "_curses",
    "_curses_panel",
    "_datetime",
    "_dbm",
    "_decimal",
    "_elementtree",
    "_frozen_importlib",
    "_frozen_importlib_external",
    "_functools",
    "_gdbm",
    "_hashlib",
    "_heapq",
    "_imp",
    "_io",
    "_json",
    "_locale",
    "_lsprof",
    "_lzma",
    "_markupbase",
    "_md5",
    "_msi",
    "_multibytecodec",
    "_multiprocessing",
    "_opcode",
    "_operator",
    "_osx_support",
    "_overlapped",
    "_pickle",
    "_posixshmem",
    "_posixsubprocess",
    "_py_abc",
    "_pydecimal",
    "_pyio",
    "_queue",
    "_random",
    "_scproxy",
    "_sha1",
    "_sha256",
    "_sha3",
    "_sha512",
    "_signal",
    "_sitebuiltins",
    "_socket",
    "_sqlite3",
    "_sre",
    "_ssl",
    "_stat",
    "_statistics",
    "_string",
    "_strptime",
    "_struct",
    "_symtable",
    "_thread",
    "_threading_local",
    "_tkinter",
    "_tokenize",
    "_tracemalloc",
    "_typing",
    "_uuid",
    "_warnings",
    "_weakref",
    "_weakrefset",
    "_winapi",
    "_zoneinfo",
    "abc",
    "aifc",
    "antigravity",
    "argparse",
    "array",
    "ast",
    "asynchat",
    "asyncio",
    "asyncore",
    "atexit",
    "audioop",
    "base64",
    "bdb",
    "binascii",
    "bisect",
    "builtins",
    "bz2",
    "cProfile",
    "calendar",
    "cgi",
    "cgitb",
    "chunk",
    "cmath",
    "cmd",
    "code",
    "codecs",
    "codeop",
    "collections",
    "colorsys",
    "compileall",
    "concurrent",
    "configparser",
    "contextlib",
    "contextvars",
    "copy",
    "copyreg",
    "crypt",
    "csv",
    "ctypes",
    "curses",
    "dataclasses",
    "datetime",
    "dbm",
    "decimal",
    "difflib",
    "dis",
    "distutils",
    "doctest",
    "email",
    "encodings",
    "ensurepip",
    "enum",
    "errno",
    "faulthandler",
    "fcntl",
    "filecmp",
    "fileinput",
    "fnmatch",
    "fractions",
    "ftplib",
    "functools",
    "gc",
    "genericpath",
    "getopt",
    "getpass",
    "gettext",
    "glob",
    "graphlib",
    "grp",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http",
    "idlelib",
    "imaplib",
    "imghdr",
    "imp",
    "importlib",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "keyword",
    "lib2to3",
    "linecache",
    "locale",
    "logging",
    "lzma",
    "mailbox",
    "mailcap",
    "marshal",
    "math",
    "mimetypes",
    "mmap",
    "modulefinder",
    "msilib",
    "msvcrt",
    "multiprocessing",
    "netrc",
    "nis",
    "nntplib",
    "nt",
    "ntpath",
    "nturl2path",
    "numbers",
    "opcode",
    "operator",
    "optparse",
    "os",
    "ossaudiodev",
    "pathlib",
    "pdb",
    "pickle",
    "pickletools",
    "pipes",
    "pkgutil",
    "platform",
    "plistlib",
    "poplib",
    "posix",
    "posixpath",
    "pprint",
    "profile",
    "pstats",
    "pty",
    "pwd",
    "py_compile",
    "pyclbr",
    "pydoc",
    "pydoc_data",
    "pyexpat",
    "queue",
    "quopri",
    "random",
    "re",
    "readline",
    "reprlib",
    "resource",
    "rlcompleter",
    "runpy",
    "sched",
    "secrets",
    "select",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "site",
    "smtpd",
    "smtplib",
    "sndhdr",
    "socket",
    "socketserver",
    "spwd",
    "sqlite3",
    "sre_compile",
    "sre_constants",
    "sre_parse",
    "ssl",
    "stat",
    "statistics",
    "string",
    "stringprep",
    "struct",
    "subprocess",
    "sunau",
    "symtable",
    "sys",
    "sysconfig",
    "syslog",
    "tabnanny",
    "tarfile",
    "telnetlib",
    "tempfile",
    "termios",
    "textwrap",
    "this",
    "threading",
    "time",
    "timeit",
    "tkinter",
    "token",
    "tokenize",
    "tomllib",
    "trace",
    "traceback",
    "tracemalloc",
    "tty",
    "turtle",
    "turtledemo",
    "types",
    "typing",
    "unicodedata",
    "unittest",
    "urllib",
    "uu",
    "uuid",
    "venv",
    "warnings",
    "wave",
    "weakref",
    "webbrowser",
    "winreg",
    "winsound",
    "wsgiref",
    "xdrlib",
    "xml",
    "xmlrpc",
    "zipapp",
    "zipfile",
    "zipimport",
    "zlib",
    "zoneinfo",
];

/// How a Python frame's file name reads when it is not a file: frozen modules are the
/// standard library's, torch.fx's generated `forward` is torch's, anything else in
/// angle brackets (`<string>`, `<stdin>`, `<ipython-input-3-...>`) is the user's.
pub const PSEUDO_FILES: &[(&str, PseudoFile)] = &[
    ("<frozen ", PseudoFile::Stdlib),
    ("<eval_with_key>", PseudoFile::Torch),
    ("<", PseudoFile::User),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PseudoFile {
    Stdlib,
    Torch,
    User,
}

/// Python frames: a source file, or a pseudo file name (the C++ frames' files are
/// `??`, `Module.cpp`, `Objects/call.c`, ...).
pub fn is_python_file(file: &str) -> bool {
    file.ends_with(".py") || file.ends_with(".pyx") || file.starts_with('<')
}

/// What a pseudo file name is, if `file` is one.
pub fn pseudo_file(file: &str) -> Option<PseudoFile> {
    PSEUDO_FILES
        .iter()
        .find(|(p, _)| file.starts_with(p))
        .map(|(_, k)| *k)
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
