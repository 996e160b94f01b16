//! The rule format: what a rule set and a rule say, as read from TOML.
//!
//! A rule set is a folder: `ruleset.toml` (what the set is for, how to recognise the
//! checkout it applies to, its parameters) and any number of `*.toml` files holding
//! `[[rule]]` tables. Rules are applied in file-name order, then in the order they are
//! written. Their examples (self-tests) live apart, in `examples/<stem>.toml` beside rule
//! file `<stem>.toml` (`examples`). The format is documented for rule authors in the README
//! ("Rule format").
//!
//! A rule goes through three stages, each its own type (as ast-grep keeps its
//! serialisable rule apart from the compiled one):
//! - raw: `Rule`, what the TOML says, in a `RuleSet` that `load` read and checked: every
//!   field, every placeholder against what defines it, every metavariable a template uses
//!   against what the rule's patterns bind (`names`);
//! - instantiated: for one target (a model and its role classes, selected functions, the
//!   parameter values), every placeholder filled in, once (`instantiate`);
//! - compiled: `CompiledRule`, its patterns compiled and its template split into text,
//!   values and metavariables (`compiled`, `template`). Every consumer (planning, explain,
//!   the self-tests) takes this one and never substitutes again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub mod compiled;
pub mod compilers;
pub mod error;
pub mod examples;
pub mod instantiate;
pub mod load;
pub mod models;
mod names;
pub mod prints;
pub mod set;
pub mod template;

pub use compiled::{CompiledRule, CompiledSet};
pub use error::Error;
pub use examples::load_with_examples;
pub use instantiate::{FunctionTarget, On, Target, instantiate};
pub use load::{load, load_with_prints};
pub use prints::PrintDecl;
pub use set::RuleSet;

/// The rule set used when `--rules` is not given.
pub const DEFAULT_SET: &str = "memory-prints";

/// `ruleset.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Short name, written into every marker (`memory-prints`).
    pub name: String,
    pub description: String,
    /// A path (relative to the checkout root) whose presence identifies the checkout,
    /// e.g. `pithtrain/__init__.py`. Without it, the root is `--root` or the current folder.
    #[serde(default)]
    pub root_marker: Option<String>,
    /// What `add`'s positional arguments name: one model (the default) or functions
    /// (selectors such as `*.forward`, `DualPipeV.step`), for rules written `per` target.
    #[serde(default)]
    pub targets: TargetKind,
    /// What `add`'s positional arguments look like, for the message when none are given
    /// (`'*.forward' DualPipeV.step`).
    #[serde(default)]
    pub example_targets: Option<String>,
    /// The folder (relative to the root) that instrumentation may touch; `remove`,
    /// `status` and re-`add` scan it for markers.
    pub source_dir: String,
    /// Where per-model files live and how a model name maps onto one.
    #[serde(default)]
    pub models: Option<ModelsSpec>,
    /// Why code must not go where a callable of the compiled-code list
    /// (`rules/compilers.toml`) compiles: a print or synchronize breaks a full graph.
    #[serde(default)]
    pub compiled: Option<compilers::Reasons>,
    /// Every callable of the compiled-code list with what this set says of it: filled in
    /// when the manifest is read, never written in it.
    #[serde(skip)]
    pub forbid_inside: Vec<ForbiddenDecorator>,
    /// Top-level packages isort treats as first party when an import has to be added.
    #[serde(default)]
    pub first_party: Vec<String>,
    /// Parameters the templates use (`{RANKS}`), by name: what kind of value each is,
    /// which `instrument add` flag sets it and what it is when the flag is not given.
    #[serde(default)]
    pub params: BTreeMap<String, ParamSpec>,
    /// Values the engine works out from the checkout for a parameter's default, by name
    /// (`default = { computed = "NAME" }`): each says which of the engine's methods
    /// computes it and with what.
    #[serde(default)]
    pub computed: BTreeMap<String, ComputedSpec>,
    /// How a print's `line` is derived where a declaration does not write it.
    #[serde(default)]
    pub prints: prints::Naming,
    /// The `[detail_layers]` table of rule sets written before `[computed]`: read as
    /// `[computed.detail-layers]` with `method = "layer-condition"`.
    #[serde(default)]
    pub detail_layers: Option<DetailLayersSpec>,
    /// What groups need of each other, by group (`[groups.4] requires = ["7"]`): a group
    /// is applied only with the groups it requires, `--partial` included.
    #[serde(default)]
    pub groups: BTreeMap<String, GroupSpec>,
}

/// One `[groups.NAME]` table.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// Groups that must be applied for this one to be: without them its code would run
    /// where it must not (prints nothing switches off) or read what is not there.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Why, in one clause, for `instrument rules` and the reason a group is skipped.
    #[serde(default)]
    pub why: Option<String>,
}

impl Manifest {
    /// The groups `group` requires, as declared.
    pub fn requires(&self, group: &str) -> &[String] {
        self.groups
            .get(group)
            .map_or(&[], |g| g.requires.as_slice())
    }
}

/// How a computed value is worked out: the engine's method, and what the rule set tells it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "method", rename_all = "kebab-case")]
pub enum ComputedSpec {
    /// The first `count` layer indices for which a decoder layer's `__init__` decides
    /// what the condition patterns say (evaluated with the model config).
    LayerCondition(DetailLayersSpec),
}

/// One template parameter, as `[params.NAME]` declares it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ParamSpec {
    pub kind: ParamKind,
    /// The `instrument add` flag that sets it, without the dashes (`ranks`). Without one,
    /// only `--param NAME=VALUE` sets it.
    #[serde(default)]
    pub flag: Option<String>,
    /// The value when the flag is not given: text as the user would type it (`"0"`), or
    /// `{ computed = "detail-layers" }` for a value the engine works out, or
    /// `{ run_time = "how", preview = "detail-layers" }` for one the inserted code works out.
    #[serde(default)]
    pub default: Option<ParamDefault>,
    /// Python `None` when no value is given (and, with a computed default, when that
    /// cannot be worked out: the inserted code then decides at run time).
    #[serde(default)]
    pub optional: bool,
    /// For `kind = "choice"`: the values allowed.
    #[serde(default)]
    pub choices: Vec<String>,
    /// One line for `instrument rules` and the error messages.
    pub help: String,
}

/// What a parameter holds, and so how its text is checked and written as Python.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ParamKind {
    /// Distinct non-negative integers, `3,14` -> `{3, 14}`.
    IntSet,
    /// Distinct non-negative integers in order, `5,6` -> `(5, 6)`.
    IntTuple,
    /// One non-negative integer.
    Int,
    /// A folder or file path, written as a string literal.
    Path,
    /// Any text without control characters, written as a string literal.
    String,
    /// One of `choices`, written as a string literal.
    Choice,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ParamDefault {
    Text(String),
    /// Worked out by the engine: the name of a `[computed.NAME]` table.
    Computed {
        computed: String,
    },
    /// `None` in the code, which decides at run time (`run_time` says how, for the user).
    /// `preview` names a `[computed]` value: what a rank holding the whole model would
    /// choose, for the note; a given value is checked against the checkout with it.
    RunTime {
        run_time: String,
        #[serde(default)]
        preview: Option<String>,
    },
}

impl ParamDefault {
    /// The `[computed]` value this default works out or previews.
    pub fn computed(&self) -> Option<&str> {
        match self {
            ParamDefault::Computed { computed } => Some(computed),
            ParamDefault::RunTime { preview, .. } => preview.as_deref(),
            ParamDefault::Text(_) => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    #[default]
    Model,
    Functions,
}

/// For rule sets whose targets are functions: what one rule is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Per {
    /// Once per file that holds a selected function (`{FILE}` in the rule).
    File,
    /// Once per selected function (`{FILE}`, `{CLASS_SCOPE}`, `{FUNCTION}`, `{NAME}`).
    Function,
}

/// A callable of the compiled-code list, with why a rule set's code must not go where it
/// compiles (`compilers::forbidden`).
#[derive(Debug, Clone)]
pub struct ForbiddenDecorator {
    /// The qualified name of a callable that compiles what it decorates or wraps, e.g.
    /// `torch.compile`: found through imports, aliases and `X.f = torch.compile(X.f)`.
    pub decorator: String,
    /// Why code must not go there, shown in the error.
    pub reason: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelsSpec {
    /// Folder of model files, relative to the root (`pithtrain/models`).
    pub dir: String,
    /// File stems in that folder that are not models (`__init__`, `interface`).
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Extra names users type, mapped to file stems (`qwen3.5-moe` -> `qwen35_moe`).
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
    /// The classes rules scope into (`class {EXPERTS}`), by role: found in any model file
    /// by their structure, so that rules are written once for every model.
    #[serde(default)]
    pub roles: BTreeMap<String, RoleSpec>,
    /// What is known of particular models, by file stem (how their rule ids read, their
    /// config's `model_type`, a role's class where structure does not find it).
    #[serde(default)]
    pub known: BTreeMap<String, KnownModel>,
}

impl ModelsSpec {
    /// What the rule ids of `model`'s rules carry in markers: `qwen35-moe` in
    /// `5B.qwen35-moe.flags`; empty for a model whose ids are the rules' own.
    pub fn id_tag(&self, model: &str) -> String {
        match self.known.get(model).and_then(|k| k.id_tag.clone()) {
            Some(tag) => tag,
            None => model.replace('_', "-"),
        }
    }
}

/// How a role's class is recognised in a model file. Every criterion given must hold,
/// and exactly one class of the file may fit.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RoleSpec {
    /// What the class is, for messages (`the grouped-GEMM experts`).
    pub about: String,
    /// Methods the class defines itself (`forward_stage1`, `forward_stage3`, ...).
    #[serde(default)]
    pub defines: Vec<String>,
    /// A method of the class and a parameter it takes: `takes = "forward(grouped_mm_offs)"`.
    #[serde(default)]
    pub takes: Option<String>,
    /// A statement one of the class's methods holds (a pattern; `{ROLE}` names another
    /// role's class): `self.experts = {EXPERTS}($$$)`.
    #[serde(default)]
    pub holds: Option<String>,
}

/// One model's entry in `[models.known]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KnownModel {
    /// What its rule ids carry in markers (default: the model's name, `gpt-oss` in
    /// `5B.gpt-oss.flags`; `""` keeps the rules' own ids).
    #[serde(default)]
    pub id_tag: Option<String>,
    /// The `model_type` of its configs, to find its example configs.
    #[serde(default)]
    pub model_type: Option<String>,
    /// Roles whose class is named here instead of found by structure.
    #[serde(default)]
    pub roles: BTreeMap<String, String>,
}

/// `method = "layer-condition"`: the rule set names the patterns of a decoder layer's
/// decision (MoE versus dense, say), the engine finds and evaluates it with the model
/// config and takes the first layers it holds for.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DetailLayersSpec {
    /// How many layers to pick, starting at the first MoE layer.
    pub count: usize,
    /// The statement that records a decoder layer's index, binding `$LAYER` to the name
    /// of the index variable (e.g. `self.idx = $LAYER`). Its function is searched below.
    pub index: String,
    /// Patterns of the decision, binding `$COND` (e.g. `self.mlp = $_ if $COND else $_`).
    /// When `$COND` is a plain name, its assignment earlier in the function is used.
    #[serde(default)]
    pub conditions: Vec<String>,
    /// Patterns that, found with no condition, mean every layer has experts.
    #[serde(default)]
    pub always_moe: Vec<String>,
    /// Glob (one `*` folder) of example configs, matched on `model_type`.
    #[serde(default)]
    pub example_configs: Option<String>,
    /// Model file stem -> the config's `model_type`.
    #[serde(default)]
    pub model_types: BTreeMap<String, String>,
}

/// Where a rule's code goes relative to its anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Position {
    /// Above the anchor statement (and above the comments attached to it).
    Before,
    /// Below the anchor statement (below its whole block when it is compound).
    After,
    /// Instead of the anchor statement; the original is kept in the marker and restored
    /// by `remove`. `{ORIGINAL}` in the template stands for the original statement.
    Replace,
    /// Like `replace`, but the template must contain `{ORIGINAL}`.
    Wrap,
    /// At the top of the scope's body (below a docstring and `from __future__` imports).
    BodyStart,
    /// At the end of the scope's body.
    BodyEnd,
    /// Adds the template (one parameter, e.g. `flag: bool = False`) to the parameter list
    /// of the scope's function, before any `*args` / `**kwargs`.
    AddParameter,
}

impl Position {
    /// The name as written in rule files.
    pub fn name(self) -> &'static str {
        match self {
            Position::Before => "before",
            Position::After => "after",
            Position::Replace => "replace",
            Position::Wrap => "wrap",
            Position::BodyStart => "body-start",
            Position::BodyEnd => "body-end",
            Position::AddParameter => "add-parameter",
        }
    }

    pub fn needs_anchor(self) -> bool {
        matches!(
            self,
            Position::Before | Position::After | Position::Replace | Position::Wrap
        )
    }

    pub fn replaces(self) -> bool {
        matches!(
            self,
            Position::Replace | Position::Wrap | Position::AddParameter
        )
    }
}

/// An anchor: one pattern, or alternatives.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Anchor {
    One(String),
    Any(Vec<String>),
}

impl Anchor {
    pub fn patterns(&self) -> Vec<&str> {
        match self {
            Anchor::One(p) => vec![p.as_str()],
            Anchor::Any(ps) => ps.iter().map(String::as_str).collect(),
        }
    }

    /// As written, alternatives joined by ` or `.
    pub fn describe(&self) -> String {
        self.patterns().join(" or ")
    }
}

/// Which match of the anchor is meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Occurrence {
    /// Exactly one match, else an error (the default: ambiguity is a bug in the rule).
    #[default]
    Only,
    First,
    Last,
}

/// One `[[rule]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Unique id, conventionally `<group><letter>.<what>` (`4B.step1-before-forward`).
    pub id: String,
    /// The group the rule belongs to; `--partial` applies or skips whole groups.
    pub group: String,
    /// Target file relative to the root; `{MODEL}` is the model's file stem.
    pub file: String,
    /// Only for these models (file stems); empty means every model.
    #[serde(default)]
    pub models: Vec<String>,
    /// For a rule of some `models`: the rule it stands in for, inheriting every field it
    /// does not set (but the examples, and the prints when it sets its own template). Its
    /// id is the rule's with the model's id tag (`5B.qwen35-moe.after-compute`).
    #[serde(default)]
    pub extends: Option<String>,
    /// For a rule of some `models`: rules it stands in for; it takes the first one's place.
    #[serde(default)]
    pub replaces: Vec<String>,
    /// For a rule of some `models` that adds an insertion: the rule it follows.
    #[serde(default)]
    pub after: Option<String>,
    /// In a rule set whose targets are functions: the rule is a template, written once
    /// per file or per selected function.
    #[serde(default)]
    pub per: Option<Per>,
    /// One line for reviewers and `instrument rules`.
    pub summary: String,
    /// Enclosing structure, outermost first: `class Name`, `def name`, `for $I in range(n)`,
    /// `if cond`, `with ...`, `while cond`, `try`. Metavariables (`$X`) match any node.
    #[serde(default)]
    pub scope: Vec<String>,
    /// The statement the edit is placed against (a code pattern with metavariables), or a
    /// list of patterns any of which may match (`["class $_", "def $_"]`).
    #[serde(default)]
    pub anchor: Option<Anchor>,
    /// When set, only anchors that hold a statement matching this pattern count (e.g. the
    /// `if self.is_first_pp_rank` block that contains `self.criterion = criterion`).
    #[serde(default)]
    pub contains: Option<String>,
    /// When set, the anchor is the first match after this (unique) statement.
    #[serde(default)]
    pub following: Option<String>,
    #[serde(default)]
    pub occurrence: Occurrence,
    pub position: Position,
    /// Extra patterns matched in the scope only to bind metavariables for the template.
    #[serde(default)]
    pub capture: Vec<String>,
    /// The code to insert, indented as if at column 0 (the engine indents it).
    #[serde(default)]
    pub template: String,
    /// Module-level imports the template needs; each is added (in isort's place) only when
    /// the names it binds are not already bound in the module.
    #[serde(default)]
    pub imports: Vec<String>,
    /// Why the rule departs from the written recipe, if it does (shown by `instrument rules`).
    #[serde(default)]
    pub note: Option<String>,
    /// Self-tests: input snippet and the expected output (checked by `instrument test-rules`).
    /// Written inline (`[[rule.examples]]`) or, usually, in the rule file's examples file
    /// (`examples/<stem>.toml`), which only `load_with_examples` reads: a set loaded with
    /// `load` has its inline examples only.
    #[serde(default)]
    pub examples: Vec<Example>,
    /// How the lines the template prints read (for `instrument log`); see `prints.rs`.
    #[serde(default)]
    pub prints: Vec<PrintDecl>,
}

impl Rule {
    /// Whether the rule is for `model`: a rule that names no model is for every model; one that
    /// names models is for those only, and for none when no model is chosen. The one definition
    /// every consumer (planning, explain, selftest, status) uses.
    pub fn applies_to(&self, model: Option<&str>) -> bool {
        self.models.is_empty() || model.is_some_and(|m| self.models.iter().any(|x| x == m))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// Parameter values for the example (defaults otherwise).
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Source before the rule is applied (the rule's file is taken to hold exactly this).
    pub before: String,
    /// Expected source after the rule alone is applied, markers included; omit to only
    /// require that the rule applies and round-trips.
    #[serde(default)]
    pub after: Option<String>,
    /// Expected error text fragment instead of an output.
    #[serde(default)]
    pub error: Option<String>,
    /// Role classes for a snippet that does not hold what finds them by structure.
    #[serde(default)]
    pub roles: BTreeMap<String, String>,
}
