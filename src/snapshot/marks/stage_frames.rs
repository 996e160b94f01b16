//! Which DualPipeV layer stage an allocation was made in, read from the Python frames torch
//! records with it (`[[stage_frame]]` in `conventions.toml`): no range needs to be inserted
//! around a stage, because the stage's own functions (`stage3_f`, `forward_stage3`, ...) are on
//! the stack of every allocation made inside it.
//!
//! The rules are tried in order; each looks at the frames innermost first, and the first rule
//! that matches a frame names the stage. Rule order is what decides when two stage functions
//! are on one stack (a fused `stage5_and_stage1_f` calls `forward_stage5`: the fused rule comes
//! first so that the allocation counts as Nsight Systems counts the fused range).

use regex::Regex;
use serde::Deserialize;
use toml::Spanned;

/// One `[[stage_frame]]` as written.
#[derive(Deserialize, Debug)]
pub struct RawStageFrame {
    /// A regex on the frame's function name (Rust `regex` syntax).
    function: Spanned<String>,
    /// A suffix of the frame's file (`/` separators); any file when absent.
    #[serde(default)]
    file: Option<String>,
    /// The stage's name; `{N}` is the function pattern's group N (`stage{1}_{2}`).
    stage: Spanned<String>,
}

/// Why the `[[stage_frame]]` table does not load: the table's author's to fix.
#[derive(Debug, thiserror::Error)]
pub enum StageFrameError {
    #[error("conventions.toml line {line}: [[stage_frame]] {rule} function `{pattern}`: {source}")]
    Regex {
        line: usize,
        rule: usize,
        pattern: String,
        #[source]
        source: regex::Error,
    },
    #[error(
        "conventions.toml line {line}: [[stage_frame]] {rule} stage `{template}`: {why}; write the \
         name with `{{N}}` for the function pattern's group N, as `stage{{1}}_{{2}}`"
    )]
    Template {
        line: usize,
        rule: usize,
        template: String,
        why: TemplateFault,
    },
}

/// What is wrong with a stage name's template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateFault {
    #[error("a `}}` with no `{{`")]
    CloseWithoutOpen,
    #[error("a `{{` that is never closed")]
    NeverClosed,
    #[error("`{{{0}}}` is not a group number")]
    NotAGroup(String),
    #[error("`{{{group}}}` names group {group}, but the function pattern has {groups} group(s)")]
    NoSuchGroup { group: usize, groups: usize },
    #[error("an empty name")]
    Empty,
}

/// A piece of a stage name's template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Group(usize),
}

#[derive(Debug, Clone)]
pub struct StageFrameRule {
    pub function: Regex,
    pub file: Option<String>,
    pieces: Vec<Piece>,
}

impl StageFrameRule {
    /// The stage this frame names, when it matches.
    pub fn stage(&self, file: &str, function: &str) -> Option<String> {
        if self.file.as_deref().is_some_and(|f| !file.ends_with(f)) {
            return None;
        }
        let c = self.function.captures(function)?;
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Group(g) => out.push_str(c.get(*g).map_or("", |m| m.as_str())),
            }
        }
        Some(out)
    }
}

/// The ordered rules.
#[derive(Debug, Clone, Default)]
pub struct StageFrames {
    pub rules: Vec<StageFrameRule>,
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// `stage{1}_{2}` -> text and group pieces; groups must exist in a pattern of `groups` groups.
fn template(t: &str, groups: usize) -> Result<Vec<Piece>, TemplateFault> {
    let mut pieces = Vec::new();
    let mut rest = t;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return Err(TemplateFault::CloseWithoutOpen);
        }
        if open > 0 {
            pieces.push(Piece::Text(rest[..open].to_string()));
        }
        let close = rest[open..].find('}').ok_or(TemplateFault::NeverClosed)? + open;
        let inner = &rest[open + 1..close];
        let g: usize = inner
            .parse()
            .map_err(|_| TemplateFault::NotAGroup(inner.to_string()))?;
        if g == 0 || g > groups {
            return Err(TemplateFault::NoSuchGroup { group: g, groups });
        }
        pieces.push(Piece::Group(g));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest.to_string()));
    }
    if pieces.is_empty() {
        return Err(TemplateFault::Empty);
    }
    Ok(pieces)
}

impl StageFrames {
    /// The rules of `raw`, checked; `text` is the table they were read from (for line numbers).
    pub fn new(raw: Vec<RawStageFrame>, text: &str) -> Result<StageFrames, StageFrameError> {
        let mut rules = Vec::new();
        for (i, r) in raw.into_iter().enumerate() {
            let rule = i + 1;
            let function =
                Regex::new(r.function.get_ref()).map_err(|source| StageFrameError::Regex {
                    line: line_of(text, r.function.span().start),
                    rule,
                    pattern: r.function.get_ref().clone(),
                    source,
                })?;
            let pieces =
                template(r.stage.get_ref(), function.captures_len() - 1).map_err(|why| {
                    StageFrameError::Template {
                        line: line_of(text, r.stage.span().start),
                        rule,
                        template: r.stage.get_ref().clone(),
                        why,
                    }
                })?;
            rules.push(StageFrameRule {
                function,
                file: r.file,
                pieces,
            });
        }
        Ok(StageFrames { rules })
    }

    /// The stage a stack names: `frames` (file with `/` separators, function) innermost first.
    pub fn stage_of<'a>(&self, frames: &[(&'a str, &'a str)]) -> Option<String> {
        self.rules
            .iter()
            .find_map(|r| frames.iter().find_map(|(file, f)| r.stage(file, f)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::marks::Conventions;

    const EXEC: &str = "/w/pithtrain/dualpipe/execution.py";
    const MODEL: &str = "/w/pithtrain/models/qwen3_moe.py";

    /// The built-in table names pithtrain 889a408's stage functions as its NVTX ranges (and
    /// so `nsys report`) name the stages; the fused stage counts as its stage 1, as nsys
    /// counts `layer05_stage5_b_layer06_stage1_b`.
    #[test]
    fn the_builtin_rules_name_pithtrains_stage_functions() {
        let s = &Conventions::builtin().stage_frames;
        let of = |frames: &[(&str, &str)]| s.stage_of(frames);
        for (function, stage) in [
            ("stage1_f", "stage1_f"),
            ("stage2_b", "stage2_b"),
            ("stage3_w", "stage3_w"),
            ("stage5_b", "stage5_b"),
            ("stage5_and_stage1_f", "stage1_f"),
            ("stage5_and_stage1_b", "stage1_b"),
            ("layer_forward_dispatch", "stage2_f"),
            ("layer_forward_combine", "stage4_f"),
        ] {
            assert_eq!(
                of(&[("/t/torch/x.py", "empty"), (EXEC, function)]).as_deref(),
                Some(stage),
                "{function}"
            );
        }
        for (method, stage) in [
            ("forward_stage1", "stage1_f"),
            ("forward_stage1_compute", "stage1_f"),
            ("forward_stage3", "stage3_f"),
            ("forward_stage5", "stage5_f"),
        ] {
            assert_eq!(of(&[(MODEL, method)]).as_deref(), Some(stage), "{method}");
        }
        // The fused function wins over the model method it calls (rule order).
        assert_eq!(
            of(&[(MODEL, "forward_stage5"), (EXEC, "stage5_and_stage1_f")]).as_deref(),
            Some("stage1_f")
        );
        // A function of that name in another file is not pithtrain's stage.
        assert_eq!(of(&[("/w/other/execution.py", "stage1_f")]), None);
        assert_eq!(of(&[(EXEC, "layer_backward"), (EXEC, "step")]), None);
    }

    fn load(rule: &str) -> Result<StageFrames, StageFrameError> {
        let text = format!("x = 1\n{rule}");
        #[derive(Deserialize)]
        struct T {
            stage_frame: Vec<RawStageFrame>,
        }
        let t: T = toml::from_str(&text).unwrap();
        StageFrames::new(t.stage_frame, &text)
    }

    #[test]
    fn a_bad_pattern_or_name_is_one_line_naming_the_line_and_rule() {
        let e = load("[[stage_frame]]\nfunction = '^stage('\nstage = 'x'\n").unwrap_err();
        let line = e.to_string();
        assert!(
            line.starts_with("conventions.toml line 3: [[stage_frame]] 1 function `^stage(`: "),
            "{line}"
        );
        let e =
            load("[[stage_frame]]\nfunction = '^stage(\\d)$'\nstage = 'stage{2}_f'\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "conventions.toml line 4: [[stage_frame]] 1 stage `stage{2}_f`: `{2}` names group 2, \
             but the function pattern has 1 group(s); write the name with `{N}` for the function \
             pattern's group N, as `stage{1}_{2}`"
        );
        for (bad, why) in [
            ("stage{1", "a `{` that is never closed"),
            ("stage}1", "a `}` with no `{`"),
            ("stage{a}", "`{a}` is not a group number"),
            ("", "an empty name"),
        ] {
            let e = load(&format!(
                "[[stage_frame]]\nfunction = '^s(\\d)$'\nstage = '{bad}'\n"
            ))
            .unwrap_err();
            assert!(
                matches!(&e, StageFrameError::Template { why: w, .. } if w.to_string() == why),
                "{e}"
            );
        }
        // Through the whole table: the same line, among the other conventions.
        let bad = crate::snapshot::marks::conventions::BUILTIN
            .replace("stage = 'stage{1}_{2}'", "stage = 'stage{3}_{2}'");
        let e = Conventions::parse(&bad).err().unwrap().to_string();
        assert!(
            e.contains("[[stage_frame]] 2 stage `stage{3}_{2}`: `{3}` names group 3"),
            "{e}"
        );
        let ok =
            load("[[stage_frame]]\nfunction = '^s(\\d)_(f|b)$'\nstage = 'stage{1}_{2}'\n").unwrap();
        assert_eq!(
            ok.stage_of(&[("a.py", "s4_b")]).as_deref(),
            Some("stage4_b")
        );
    }
}
