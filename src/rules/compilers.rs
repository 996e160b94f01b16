//! The compiled-code list, read from its one home, `rules/compilers.toml`: every callable
//! that compiles what it decorates or wraps (every spelling of `torch.compile` the engine
//! knows). A rule set says only why its code must not go there (`[compiled]`); function
//! selection (`nsys trace-json`, a rule set whose targets are functions) reads the same
//! list.

use std::sync::OnceLock;

use serde::Deserialize;

use super::ForbiddenDecorator;

/// The table, embedded in the binary.
const TABLE: &str = include_str!("../../rules/compilers.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    compiler: Vec<Compiler>,
}

/// One callable of the list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compiler {
    /// Its qualified name (`torch._dynamo.optimize`).
    pub callable: String,
    /// What it is, when it is not `torch.compile` itself (`the callable torch.compile is
    /// built on`): a rule set's `others` reason follows it.
    #[serde(default)]
    pub what: Option<String>,
}

/// `[compiled]` of a `ruleset.toml`: why the set's code must not go into compiled code.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reasons {
    /// Said of what `torch.compile` itself compiles.
    pub reason: String,
    /// Said of what another callable of the list compiles, after what that callable is
    /// (default: `reason`).
    #[serde(default)]
    pub others: Option<String>,
}

/// What the refusal says when a rule set gives no reason.
const DEFAULT_REASON: &str = "code there is traced into a graph";

/// Every callable of the list, in its order.
pub fn compilers() -> &'static [Compiler] {
    static LIST: OnceLock<Vec<Compiler>> = OnceLock::new();
    LIST.get_or_init(|| match toml::from_str::<Table>(TABLE) {
        Ok(t) => t.compiler,
        // The table is part of the binary, and a test reads it: it always parses.
        Err(e) => panic!("rules/compilers.toml: {e}"),
    })
}

/// The qualified names of the list.
pub fn callables() -> Vec<String> {
    compilers().iter().map(|c| c.callable.clone()).collect()
}

/// Each callable of the list with what a rule set giving `reasons` says of it.
pub fn forbidden(reasons: Option<&Reasons>) -> Vec<ForbiddenDecorator> {
    compilers()
        .iter()
        .map(|c| {
            let reason = match (reasons, &c.what) {
                (None, _) => DEFAULT_REASON.to_string(),
                (Some(r), None) => r.reason.clone(),
                (Some(r), Some(what)) => {
                    format!("{what}: {}", r.others.as_deref().unwrap_or(&r.reason))
                }
            };
            ForbiddenDecorator {
                decorator: c.callable.clone(),
                reason,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list holds torch.compile and the callable it is built on; a rule set's reasons
    /// read as the refusal says them.
    #[test]
    fn the_list_and_what_a_set_says_of_it() {
        assert_eq!(callables(), vec!["torch.compile", "torch._dynamo.optimize"]);
        let reasons = Reasons {
            reason: "it breaks".into(),
            others: Some("what it compiles breaks".into()),
        };
        let f = forbidden(Some(&reasons));
        assert_eq!(f[0].reason, "it breaks");
        assert_eq!(
            f[1].reason,
            "the callable torch.compile is built on: what it compiles breaks"
        );
        assert_eq!(forbidden(None)[0].reason, DEFAULT_REASON);
    }

    /// What the shipped sets refuse, and why, word for word.
    #[test]
    fn the_shipped_sets_refuse_every_compiler_with_their_own_reasons() {
        let of = |set: &str| -> Vec<(String, String)> {
            crate::rules::load(set)
                .unwrap()
                .manifest
                .forbid_inside
                .into_iter()
                .map(|f| (f.decorator, f.reason))
                .collect()
        };
        let pair = |d: &str, r: &str| (d.to_string(), r.to_string());
        assert_eq!(
            of("memory-prints"),
            vec![
                pair(
                    "torch.compile",
                    "a print or torch.cuda.synchronize() there breaks the graph (pithtrain compiles with fullgraph=True, where a break is an error)"
                ),
                pair(
                    "torch._dynamo.optimize",
                    "the callable torch.compile is built on: a print or torch.cuda.synchronize() in what it compiles breaks the graph"
                ),
            ]
        );
        assert_eq!(
            of("nvtx"),
            vec![
                pair(
                    "torch.compile",
                    "code there is traced into a fullgraph compile, where the range calls break the graph"
                ),
                pair(
                    "torch._dynamo.optimize",
                    "the callable torch.compile is built on: the range calls in what it compiles break the graph"
                ),
            ]
        );
    }
}
