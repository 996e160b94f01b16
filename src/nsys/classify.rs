//! Kernel classes as data: `kernel_classes.toml` (embedded) says, rule by rule, which kernel
//! family a demangled kernel name belongs to, its category (communication, GEMM, attention, ...)
//! and, for communication, the collective. `--kernel-classes FILE` adds rules of the same format
//! that are tried first. The same file lists the range names that name a collective: NCCL runs
//! an all-to-all as grouped sends/receives (`ncclDevKernel_SendRecv`), and the enclosing NVTX
//! range (`c10d::alltoall_base_`, `nccl:all_to_all`) says what it really was.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::nsys::error::{Error, Result};

/// The built-in table.
pub const BUILTIN: &str = include_str!("kernel_classes.toml");

/// The collective (or point-to-point) operation a communication kernel performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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

    pub fn from_index(i: usize) -> Option<CommOp> {
        Self::ALL.get(i).copied()
    }
}

/// What a kernel is: its category (index into `Classifier::categories`), the rule that decided
/// (`None`: no rule matched, category `other`) and, for communication, the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    pub category: u8,
    pub rule: Option<u16>,
    pub comm: Option<CommOp>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    #[serde(default)]
    categories: Vec<String>,
    #[serde(default)]
    rule: Vec<RuleFile>,
    #[serde(default)]
    collective_range: Vec<CollectiveFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    family: String,
    category: String,
    op: Option<CommOp>,
    #[serde(default)]
    prefix: Vec<String>,
    #[serde(default)]
    all: Vec<String>,
    #[serde(default)]
    any: Vec<String>,
    #[serde(default)]
    none: Vec<String>,
    #[serde(default)]
    examples: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CollectiveFile {
    op: CommOp,
    #[serde(default)]
    prefix: Vec<String>,
    #[serde(default)]
    all: Vec<String>,
    #[serde(default)]
    any: Vec<String>,
    #[serde(default)]
    none: Vec<String>,
    #[serde(default)]
    examples: Vec<String>,
}

/// Substring tests on a lower-cased name.
#[derive(Debug, Clone)]
struct Matcher {
    prefix: Vec<String>,
    all: Vec<String>,
    any: Vec<String>,
    none: Vec<String>,
}

impl Matcher {
    fn new(
        prefix: Vec<String>,
        all: Vec<String>,
        any: Vec<String>,
        none: Vec<String>,
    ) -> Option<Matcher> {
        let low =
            |v: Vec<String>| -> Vec<String> { v.into_iter().map(|s| s.to_lowercase()).collect() };
        let m = Matcher {
            prefix: low(prefix),
            all: low(all),
            any: low(any),
            none: low(none),
        };
        // A rule that tests nothing would match every name.
        (!m.prefix.is_empty() || !m.all.is_empty() || !m.any.is_empty()).then_some(m)
    }

    fn matches(&self, lower: &str) -> bool {
        (self.prefix.is_empty() || self.prefix.iter().any(|p| lower.starts_with(p.as_str())))
            && self.all.iter().all(|s| lower.contains(s.as_str()))
            && (self.any.is_empty() || self.any.iter().any(|s| lower.contains(s.as_str())))
            && !self.none.iter().any(|s| lower.contains(s.as_str()))
    }
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub family: String,
    pub category: u8,
    pub op: Option<CommOp>,
    matcher: Matcher,
    pub examples: Vec<String>,
    /// Where the rule came from (`built-in` or the user's file), for messages.
    pub origin: String,
}

#[derive(Debug, Clone)]
pub struct CollectiveRange {
    pub op: CommOp,
    matcher: Matcher,
    pub examples: Vec<String>,
}

/// The compiled table: categories in report order, rules in the order they are tried.
#[derive(Debug, Clone)]
pub struct Classifier {
    pub categories: Vec<String>,
    pub rules: Vec<Rule>,
    pub collectives: Vec<CollectiveRange>,
    communication: u8,
    other: u8,
}

fn parse(text: &str, origin: &str) -> Result<TableFile> {
    toml::from_str(text).map_err(|e| {
        Error::Table(format!(
            "{origin}: not a kernel-classes table: {}",
            one_line(&e.to_string())
        ))
    })
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Classifier {
    /// The embedded table.
    pub fn builtin() -> Classifier {
        Self::build(None).expect("the built-in kernel-classes table is valid")
    }

    /// The embedded table with the rules of `path` tried first.
    pub fn with_file(path: &Path) -> Result<Classifier> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Table(format!("--kernel-classes {}: {e}", path.display())))?;
        Self::build(Some((&path.display().to_string(), &text)))
    }

    fn build(user: Option<(&str, &str)>) -> Result<Classifier> {
        let builtin = parse(BUILTIN, "built-in kernel-classes table")?;
        let user_table = match user {
            Some((origin, text)) => Some((origin, parse(text, origin)?)),
            None => None,
        };
        let mut categories = builtin.categories.clone();
        if let Some((_, t)) = &user_table {
            for c in &t.categories {
                if !categories.contains(c) {
                    let at = categories.len() - 1; // before "other"
                    categories.insert(at, c.clone());
                }
            }
        }
        let communication = categories
            .iter()
            .position(|c| c == "communication")
            .expect("builtin has communication") as u8;
        let other = categories
            .iter()
            .position(|c| c == "other")
            .expect("builtin has other") as u8;
        if categories.len() > 250 {
            return Err(Error::Table(
                "kernel-classes: more than 250 categories".into(),
            ));
        }
        let mut rules = Vec::new();
        let mut collectives = Vec::new();
        let mut tables: Vec<(String, TableFile)> = Vec::new();
        if let Some((origin, t)) = user_table {
            tables.push((origin.to_string(), t));
        }
        tables.push(("built-in kernel-classes table".to_string(), builtin));
        for (origin, t) in tables {
            for (i, r) in t.rule.into_iter().enumerate() {
                let at = format!("{origin}: rule {} ({:?})", i + 1, r.family);
                let Some(category) = categories.iter().position(|c| *c == r.category) else {
                    return Err(Error::Table(format!(
                        "{at}: category {:?} is not declared (categories: {})",
                        r.category,
                        categories.join(", ")
                    )));
                };
                let is_comm = category as u8 == communication;
                if is_comm != r.op.is_some() {
                    return Err(Error::Table(format!(
                        "{at}: {}",
                        if is_comm {
                            "a communication rule needs `op` (SendRecv, AllToAll, AllGather, ReduceScatter, AllReduce, Broadcast, Reduce, Other)"
                        } else {
                            "`op` is only for communication rules"
                        }
                    )));
                }
                let Some(matcher) = Matcher::new(r.prefix, r.all, r.any, r.none) else {
                    return Err(Error::Table(format!(
                        "{at}: give at least one of `prefix`, `all`, `any`"
                    )));
                };
                rules.push(Rule {
                    family: r.family,
                    category: category as u8,
                    op: r.op,
                    matcher,
                    examples: r.examples,
                    origin: origin.clone(),
                });
            }
            for (i, c) in t.collective_range.into_iter().enumerate() {
                let Some(matcher) = Matcher::new(c.prefix, c.all, c.any, c.none) else {
                    return Err(Error::Table(format!(
                        "{origin}: collective_range {}: give at least one of `prefix`, `all`, `any`",
                        i + 1
                    )));
                };
                collectives.push(CollectiveRange {
                    op: c.op,
                    matcher,
                    examples: c.examples,
                });
            }
        }
        if rules.len() > u16::MAX as usize {
            return Err(Error::Table("kernel-classes: too many rules".into()));
        }
        let classifier = Classifier {
            categories,
            rules,
            collectives,
            communication,
            other,
        };
        // Every example of the user's rules must land on its own rule (the built-in ones are
        // checked by the unit tests).
        if user.is_some() {
            for (i, r) in classifier.rules.iter().enumerate() {
                if r.origin.starts_with("built-in") {
                    continue;
                }
                for e in &r.examples {
                    let got = classifier.classify(e);
                    if got.rule != Some(i as u16) {
                        return Err(Error::Table(format!(
                            "{}: rule {:?}: example {:?} is decided by {}",
                            r.origin,
                            r.family,
                            e,
                            got.rule.map_or("no rule (other)".to_string(), |j| format!(
                                "rule {:?}",
                                classifier.rules[j as usize].family
                            ))
                        )));
                    }
                }
            }
        }
        Ok(classifier)
    }

    /// The category index of `communication`.
    pub fn communication(&self) -> u8 {
        self.communication
    }

    pub fn category_name(&self, i: u8) -> &str {
        &self.categories[i as usize]
    }

    /// Classify one kernel by its demangled name.
    pub fn classify(&self, demangled: &str) -> Class {
        let lower = demangled.to_lowercase();
        for (i, r) in self.rules.iter().enumerate() {
            if r.matcher.matches(&lower) {
                return Class {
                    category: r.category,
                    rule: Some(i as u16),
                    comm: r.op,
                };
            }
        }
        Class {
            category: self.other,
            rule: None,
            comm: None,
        }
    }

    /// The family (rule) name of a class, or `None` when no rule matched.
    pub fn family(&self, class: &Class) -> Option<&str> {
        class.rule.map(|r| self.rules[r as usize].family.as_str())
    }

    /// The collective an NVTX range name names, if any (innermost such range wins; the caller
    /// keeps track of nesting).
    pub fn collective_of_range(&self, name: &str) -> Option<CommOp> {
        let lower = name.to_lowercase();
        self.collectives
            .iter()
            .find(|c| c.matcher.matches(&lower))
            .map(|c| c.op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every example of the built-in table is decided by its own rule: a rule placed after a
    /// broader one, or a name that slips into another family, fails here, name by name.
    #[test]
    fn every_builtin_example_lands_on_its_rule() {
        let c = Classifier::builtin();
        let mut checked = 0;
        for (i, r) in c.rules.iter().enumerate() {
            assert!(!r.examples.is_empty(), "rule {:?} has no example", r.family);
            for e in &r.examples {
                let got = c.classify(e);
                assert_eq!(
                    got.rule,
                    Some(i as u16),
                    "{e:?} should be {:?}, got {:?}",
                    r.family,
                    c.family(&got)
                );
                checked += 1;
            }
        }
        assert!(checked > 60);
        for r in &c.collectives {
            for e in &r.examples {
                assert_eq!(c.collective_of_range(e), Some(r.op), "{e}");
            }
        }
    }

    /// The names the issue reported as misclassified, and what they are.
    #[test]
    fn reported_misclassifications() {
        let c = Classifier::builtin();
        let cat = |n: &str| c.category_name(c.classify(n).category).to_string();
        assert_eq!(cat("triton_tem_fused_mm_0"), "gemm");
        assert_eq!(cat("triton_tem_fused_addmm_1"), "gemm");
        assert_eq!(cat("_scatter_for_grouped_gemm_kernel"), "memory");
        assert_eq!(
            c.classify("void vllm::cross_device_reduce_1stage<__nv_bfloat16, (int)8>(vllm::RankData *, vllm::RankSignals, vllm::Signal *, __nv_bfloat16 *, int, int)").comm,
            Some(CommOp::AllReduce)
        );
        // A cutlass kernel's short name says nothing; the demangled name is what is classified.
        assert_eq!(cat("Kernel2"), "other");
        // Point-to-point inside PyTorch's all-to-all names the collective through the range.
        assert_eq!(
            c.collective_of_range("c10d::alltoall_base_"),
            Some(CommOp::AllToAll)
        );
        assert_eq!(c.collective_of_range("pipeline send/recv"), None);
        assert_eq!(c.collective_of_range("layer05.stage2_f"), None);
    }

    #[test]
    fn user_rules_come_first_and_are_checked() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("mine.toml");
        std::fs::write(
            &p,
            r#"categories = ["moe-routing"]
[[rule]]
family = "our routing"
category = "moe-routing"
any = ["_build_expert_idxs", "_compute_group_offsets"]
examples = ["_build_expert_idxs_kernel"]
"#,
        )
        .unwrap();
        let c = Classifier::with_file(&p).unwrap();
        let k = c.classify("_build_expert_idxs_kernel");
        assert_eq!(c.category_name(k.category), "moe-routing");
        assert_eq!(c.categories.last().unwrap(), "other");
        // A user example another rule decides is refused, naming the file and the rule.
        std::fs::write(
            &p,
            "[[rule]]\nfamily = \"late\"\ncategory = \"gemm\"\nany = [\"zzz\"]\nexamples = [\"nvjet_tst_1\"]\n",
        )
        .unwrap();
        let e = Classifier::with_file(&p).unwrap_err().to_string();
        assert!(
            e.contains("mine.toml") && e.contains("\"late\"") && e.contains("example"),
            "{e}"
        );
        std::fs::write(
            &p,
            "[[rule]]\nfamily = \"x\"\ncategory = \"nope\"\nany = [\"a\"]\n",
        )
        .unwrap();
        let e = Classifier::with_file(&p).unwrap_err().to_string();
        assert!(
            e.contains("rule 1") && e.contains("\"nope\" is not declared"),
            "{e}"
        );
        std::fs::write(
            &p,
            "[[rule]]\nfamily = \"x\"\ncategory = \"communication\"\nany = [\"a\"]\n",
        )
        .unwrap();
        let e = Classifier::with_file(&p).unwrap_err().to_string();
        assert!(e.contains("needs `op`"), "{e}");
        std::fs::write(&p, "[[rule]\n").unwrap();
        let e = Classifier::with_file(&p).unwrap_err().to_string();
        assert!(
            e.contains("not a kernel-classes table") && !e.contains('\n'),
            "{e}"
        );
    }
}
