//! What kind of memory a stack allocates, as data: the category rules, tried on each
//! frame from the innermost outwards. File names are matched with `/` (a Windows
//! frame's `\` is read as `/` first, [`super::paths::normalize`]).

use super::frames::Match::{self, *};

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
    /// The block has no stack (allocated while history was not recorded): nothing
    /// says what it is, so it is kept out of the category shares.
    NoStack,
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
            Category::NoStack => "no_stack",
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
    // Parameters made, moved or loaded: a module's construction and initialisation,
    // `model.to(device)` / `.cuda()` (`Module._apply` -> `convert`), `load_state_dict`,
    // `from_pretrained`, a checkpoint read onto the GPU (`torch.load`, safetensors).
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
            "from_pretrained",
            "set_module_tensor_to_device",
        ],
        files: &[
            Contains("torch/nn/init.py"),
            Contains("torch/nn/parameter.py"),
            Contains("torch/serialization.py"),
            Contains("/safetensors/"),
        ],
        in_file: &[
            (
                "torch/nn/modules/",
                &["__init__", "_apply", "convert", "to", "cuda"],
            ),
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
    /// `file` is normalized (`/` separators).
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

/// The category of the innermost frame with evidence (`frames`: (function, normalized
/// file) innermost first), else [`WEAK_PARAMETERS`], else `Other`.
pub fn categorize<'a>(frames: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Category {
    for (name, file) in frames.clone() {
        if let Some(r) = CATEGORY_RULES.iter().find(|r| r.matches(name, file)) {
            return r.category;
        }
    }
    if frames
        .into_iter()
        .any(|(n, _)| WEAK_PARAMETERS.contains(&n))
    {
        return Category::Parameters;
    }
    Category::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cat(frames: &[(&str, &str)]) -> Category {
        categorize(frames.iter().copied())
    }

    #[test]
    fn moved_loaded_and_windows_shaped_frames() {
        let m = "C:/r/.venv/lib/site-packages/torch/nn/modules/module.py";
        assert_eq!(
            cat(&[
                ("convert", m),
                ("_apply", m),
                (
                    "to",
                    "C:/r/.venv/lib/site-packages/transformers/modeling_utils.py"
                ),
                ("setup", "C:/r/main.py"),
            ]),
            Category::Parameters
        );
        assert_eq!(
            cat(&[
                ("load_file", "/v/site-packages/safetensors/torch.py"),
                (
                    "from_pretrained",
                    "/v/site-packages/transformers/modeling_utils.py"
                ),
            ]),
            Category::Parameters
        );
        assert_eq!(
            cat(&[(
                "_single_tensor_adam",
                "C:/v/lib/site-packages/torch/optim/adam.py"
            )]),
            Category::OptimizerState
        );
        assert_eq!(cat(&[("train", "/src/train.py")]), Category::Other);
    }
}
