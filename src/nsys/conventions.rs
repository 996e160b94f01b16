//! Trainer conventions as data: `conventions.toml` (embedded) says how a trainer names its work in
//! NVTX — the setup range that carries a process's rank and mesh coordinates, the ranges whose
//! median is the steady-state window, the stage pattern, which kernels are communication, the
//! purpose markers of communication streams, the pipeline axis. `--conventions FILE` replaces
//! it. Nothing here knows a trainer's names; they are all in the table.

use std::collections::BTreeMap;
use std::path::Path;

use regex::Regex;
use serde::Deserialize;

use crate::nsys::error::{Error, Result};

/// The built-in table (pithtrain's).
pub const BUILTIN: &str = include_str!("conventions.toml");

/// The keys of a process in the report's JSON (`report::Process`), which setup fields join.
const PROCESS_KEYS: &[&str] = &[
    "global_pid",
    "pid",
    "name",
    "rank",
    "mesh",
    "setup",
    "mesh_unknown",
    "setup_note",
    "window",
    "streams",
    "stages",
    "chunks",
    "whole_capture",
    "devices",
    "first_ns",
    "last_ns",
    "gpu_ns",
    "kernel_ns",
    "kernel_count",
    "graph_ns",
    "graph_count",
    "memcpy_ns",
    "memcpy_count",
    "memset_ns",
    "memset_count",
    "categories",
    "communication",
    "overlap",
    "kernels",
    "kernels_rest",
    "nvtx",
    "nvtx_rest",
    "unattributed_ns",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    setup: SetupFile,
    window: WindowFile,
    stages: StagesFile,
    kernels: KernelsFile,
    innermost: InnermostFile,
    #[serde(default)]
    purpose: Vec<PurposeFile>,
    balance: BalanceFile,
    #[serde(default)]
    capture: CaptureFile,
}

/// How the trainer opens the capture window: said when an export holds no GPU work although
/// cuda was traced.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaptureFile {
    hint: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetupFile {
    pattern: String,
    rank: String,
    #[serde(default)]
    fields: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WindowFile {
    like: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StagesFile {
    pattern: String,
    name: String,
    #[serde(default)]
    describe: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KernelsFile {
    communication_like: String,
    not_compute_prefix: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InnermostFile {
    #[serde(default)]
    ignore_prefixes: Vec<String>,
    scan: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PurposeFile {
    name: String,
    needles: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BalanceFile {
    axis: String,
}

/// A purpose of communication streams and the range-name needles that mark it.
#[derive(Debug, Clone)]
pub struct Purpose {
    pub name: String,
    pub needles: Vec<String>,
}

/// The compiled table.
#[derive(Debug, Clone)]
pub struct Conventions {
    /// `built-in` or the file it was read from, for messages and the report.
    pub origin: String,
    pub setup: Regex,
    /// The setup pattern as written (for messages).
    pub setup_text: String,
    pub rank_field: String,
    pub fields: Vec<String>,
    pub window: Like,
    stage_pattern: Regex,
    stage_name: String,
    pub describe: BTreeMap<String, String>,
    pub communication: Like,
    pub not_compute_prefix: String,
    pub ignore_prefixes: Vec<String>,
    pub scan: usize,
    pub purposes: Vec<Purpose>,
    pub balance_axis: String,
    /// What to set so the trainer's capture window holds work (`[capture] hint`).
    pub capture_hint: Option<String>,
}

impl Conventions {
    pub fn builtin() -> Conventions {
        Self::parse(BUILTIN, "built-in").expect("the built-in conventions table is valid")
    }

    pub fn from_file(path: &Path) -> Result<Conventions> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Table(format!("--conventions {}: {e}", path.display())))?;
        Self::parse(&text, &path.display().to_string())
    }

    fn parse(text: &str, origin: &str) -> Result<Conventions> {
        let bad = |what: &str, why: String| Error::Table(format!("{origin}: {what}: {why}"));
        let f: File = toml::from_str(text).map_err(|e| {
            Error::Table(format!(
                "{origin}: not a conventions table: {}",
                e.to_string()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
        })?;
        let regex = |what: &str, p: &str| {
            Regex::new(p).map_err(|e| bad(what, e.to_string().lines().last().unwrap_or("").into()))
        };
        let setup = regex("[setup] pattern", &f.setup.pattern)?;
        let stage_pattern = regex("[stages] pattern", &f.stages.pattern)?;
        let groups = stage_pattern.captures_len() - 1;
        for n in placeholders(&f.stages.name) {
            if n == 0 || n > groups {
                return Err(bad(
                    "[stages] name",
                    format!("{{{n}}} names no group of the pattern (it has {groups})"),
                ));
            }
        }
        // The setup fields become keys of each process in the JSON: none may be one already.
        for field in &f.setup.fields {
            if PROCESS_KEYS.contains(&field.as_str()) {
                return Err(bad(
                    "[setup] fields",
                    format!("{field:?} is a key the report already gives each process"),
                ));
            }
        }
        if f.innermost.scan == 0 {
            return Err(bad("[innermost] scan", "must be at least 1".into()));
        }
        for (i, p) in f.purpose.iter().enumerate() {
            if p.name.is_empty() || p.needles.iter().any(|n| n.is_empty()) || p.needles.is_empty() {
                return Err(bad(
                    &format!("purpose {}", i + 1),
                    "needs a name and non-empty needles".into(),
                ));
            }
            if matches!(p.name.as_str(), "mixed" | "unknown" | "compute") {
                return Err(bad(
                    &format!("purpose {}", i + 1),
                    format!("{:?} is what the report itself says", p.name),
                ));
            }
        }
        Ok(Conventions {
            origin: origin.to_string(),
            setup,
            setup_text: f.setup.pattern,
            rank_field: f.setup.rank,
            fields: f.setup.fields,
            window: Like::new(&f.window.like),
            stage_pattern,
            stage_name: f.stages.name,
            describe: f.stages.describe,
            communication: Like::new(&f.kernels.communication_like),
            not_compute_prefix: f.kernels.not_compute_prefix,
            ignore_prefixes: f.innermost.ignore_prefixes,
            scan: f.innermost.scan,
            purposes: f
                .purpose
                .into_iter()
                .map(|p| Purpose {
                    name: p.name,
                    needles: p.needles,
                })
                .collect(),
            balance_axis: f.balance.axis,
            capture_hint: f.capture.hint,
        })
    }

    /// Whether a range is the setup range.
    pub fn is_setup(&self, name: &str) -> bool {
        self.setup.is_match(name)
    }

    /// Whether a range can be a kernel's innermost range.
    pub fn can_enclose(&self, name: &str) -> bool {
        !name.is_empty()
            && !self.is_setup(name)
            && !self
                .ignore_prefixes
                .iter()
                .any(|p| name.starts_with(p.as_str()))
    }

    /// The stage a range name marks: the last match of the pattern, written as `[stages] name`.
    pub fn stage_of(&self, name: &str) -> Option<String> {
        let caps = self.stage_pattern.captures_iter(name).last()?;
        let mut out = String::new();
        let mut rest = self.stage_name.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            match after.find('}').and_then(|close| {
                let n: usize = after[..close].parse().ok()?;
                Some((n, close))
            }) {
                Some((n, close)) => {
                    out.push_str(caps.get(n).map_or("", |m| m.as_str()));
                    rest = &after[close + 1..];
                }
                None => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        Some(out)
    }

    /// The purpose (index into `purposes`) a range name marks: the first whose needle it
    /// contains.
    pub fn purpose_of(&self, name: &str) -> Option<usize> {
        self.purposes
            .iter()
            .position(|p| p.needles.iter().any(|n| name.contains(n.as_str())))
    }
}

/// The `{N}` placeholders of a template.
fn placeholders(template: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        if let Some(close) = after.find('}')
            && let Ok(n) = after[..close].parse()
        {
            out.push(n);
            rest = &after[close + 1..];
        } else {
            rest = after;
        }
    }
    out
}

/// An SQL LIKE pattern as SQLite applies it: `%` any run of characters, `_` one character,
/// ASCII letters compared in either case (other characters exactly), no escape character.
#[derive(Debug, Clone)]
pub struct Like {
    pub pattern: String,
    chars: Vec<char>,
    /// The literal ASCII start of the pattern: a cheap first test for the many names that
    /// cannot match.
    lead: Vec<u8>,
}

impl Like {
    pub fn new(pattern: &str) -> Like {
        let chars: Vec<char> = pattern.chars().collect();
        let lead = chars
            .iter()
            .take_while(|&&c| c != '%' && c != '_' && c.is_ascii())
            .map(|&c| c as u8)
            .collect();
        Like {
            pattern: pattern.to_string(),
            chars,
            lead,
        }
    }

    pub fn matches(&self, text: &str) -> bool {
        let tb = text.as_bytes();
        if tb.len() < self.lead.len() || !tb[..self.lead.len()].eq_ignore_ascii_case(&self.lead) {
            return false;
        }
        let p = &self.chars;
        let eq = |a: char, b: char| a == b || a.eq_ignore_ascii_case(&b);
        let next = |i: usize| text[i..].chars().next().map_or(1, char::len_utf8);
        // Wildcard matching with one backtrack point (the last `%`), by byte offsets.
        let (mut i, mut j) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while i < text.len() {
            let c = text[i..].chars().next().unwrap_or('\0');
            if j < p.len() && p[j] == '%' {
                star = Some((j, i));
                j += 1;
            } else if j < p.len() && (p[j] == '_' || eq(p[j], c)) {
                i += c.len_utf8();
                j += 1;
            } else if let Some((sj, si)) = star {
                let ni = si + next(si);
                (j, i) = (sj + 1, ni);
                star = Some((sj, ni));
            } else {
                return false;
            }
        }
        p[j..].iter().all(|&c| c == '%')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_reads_pithtrains_names() {
        let c = Conventions::builtin();
        assert!(c.is_setup("rank=3; pp=0/2 dp=0/1 cp=0/1 ep=3/4; mbs=1 seq=2048"));
        // Python's `$` matches before a final newline; so does the built-in pattern.
        assert!(c.is_setup("rank=3; pp=0/2 dp=0/1 cp=0/1 ep=3/4; mbs=1 seq=2048\n"));
        assert!(!c.is_setup("rank=3; pp=0/2 dp=0/1 cp=0/1 ep=3/4; mbs=1 seq=2048 extra"));
        assert!(!c.can_enclose("ncclGroupEnd"));
        assert!(
            c.can_enclose("Ncclsomething"),
            "the prefix test is exact, as in the skill"
        );
        assert!(!c.can_enclose(""));
        assert_eq!(
            c.stage_of("layer05_stage5_b_layer06_stage1_b").as_deref(),
            Some("stage1_b")
        );
        assert_eq!(c.stage_of("layer13.stage3_w").as_deref(), Some("stage3_w"));
        assert_eq!(c.stage_of("layer13.stage6_f"), None);
        assert_eq!(c.stage_of("pipeline send/recv"), None);
        let p = |n: &str| c.purpose_of(n).map(|i| c.purposes[i].name.as_str());
        assert_eq!(p("layer02.stage4_b"), Some("ep_a2a"));
        assert_eq!(p("layer05_stage5_f_layer06_stage1_f"), Some("cp_ring"));
        assert_eq!(p("pipeline send/recv"), Some("pp_p2p"));
        assert_eq!(p("layer02.stage3_w"), None);
        assert!(
            c.window
                .matches("forward chunk 3 (phase0) backward chunk 1 (phase1)")
        );
        assert!(c.window.matches("FORWARD CHUNK 3 BACKWARD CHUNK"));
        assert!(!c.window.matches("forward chunk 3 (phase0)"));
        assert!(c.communication.matches("ncclDevKernel_SendRecv"));
        assert!(
            c.communication.matches("NCCLKernel"),
            "LIKE ignores ASCII case"
        );
    }

    #[test]
    fn like_is_sqlites() {
        let l = Like::new("a_c%x");
        assert!(l.matches("abcx") && l.matches("aBcyyx") && l.matches("aécx"));
        assert!(!l.matches("acx") && !l.matches("abcxy"));
        assert!(Like::new("%").matches(""));
        assert!(Like::new("%%b%").matches("aab"));
        assert!(Like::new("forward chunk%backward chunk%").matches("Forward chunkbackward chunk"));
        assert!(!Like::new("forward chunk%").matches("forward"));
    }

    #[test]
    fn a_table_that_does_not_check_is_one_line() {
        let base = BUILTIN.to_string();
        for (from, to, needle) in [
            (
                "stage([1-5])_([fbw])'",
                "stage([1-5]_([fbw])'",
                "[stages] pattern",
            ),
            (
                "name = \"stage{1}_{2}\"",
                "name = \"stage{3}\"",
                "{3} names no group",
            ),
            ("scan = 256", "scan = 0", "[innermost] scan"),
            (
                "name = \"ep_a2a\"",
                "name = \"mixed\"",
                "what the report itself says",
            ),
            ("[balance]", "[balanse]", "not a conventions table"),
            (
                "fields = [\"mbs\", \"seq\"]",
                "fields = [\"pid\"]",
                "a key the report already gives",
            ),
        ] {
            let t = base.replace(from, to);
            assert_ne!(t, base, "{from}");
            let e = Conventions::parse(&t, "mine.toml").unwrap_err().to_string();
            assert!(e.starts_with("mine.toml: ") && e.contains(needle), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }
}
