//! The table of which schedule event a print reads (`points.toml`, embedded): the one place
//! that knows how the memory prints' labels and the estimator's event names meet.

use std::sync::OnceLock;

use regex::Regex;
use serde::Deserialize;

const BUILTIN: &str = include_str!("points.toml");

#[derive(Deserialize)]
struct Raw {
    point: Vec<RawPoint>,
}

#[derive(Deserialize)]
struct RawPoint {
    print: String,
    event: String,
    edge: String,
    #[serde(default)]
    which: Option<String>,
}

/// Where in an event a print reads memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Edge {
    Start,
    End,
}

pub struct PointRule {
    print: Regex,
    event: String,
    pub edge: Edge,
    last: bool,
}

pub struct Points {
    rules: Vec<PointRule>,
}

impl Points {
    pub fn parse(text: &str) -> Result<Points, String> {
        let raw: Raw = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut rules = Vec::new();
        for p in raw.point {
            let print = Regex::new(&p.print).map_err(|e| format!("print {:?}: {e}", p.print))?;
            let edge = match p.edge.as_str() {
                "start" => Edge::Start,
                "end" => Edge::End,
                e => return Err(format!("edge {e:?}: start or end")),
            };
            let last = match p.which.as_deref() {
                None | Some("first") => false,
                Some("last") => true,
                Some(w) => return Err(format!("which {w:?}: first or last")),
            };
            // Every `{group}` of the template is a group of the print's pattern.
            for g in template_groups(&p.event) {
                if !print.capture_names().any(|n| n == Some(g.as_str())) {
                    return Err(format!(
                        "event {:?}: no group {g} in {:?}",
                        p.event, p.print
                    ));
                }
            }
            rules.push(PointRule {
                print,
                event: p.event,
                edge,
                last,
            });
        }
        Ok(Points { rules })
    }

    pub fn builtin() -> &'static Points {
        static P: OnceLock<Points> = OnceLock::new();
        P.get_or_init(|| Points::parse(BUILTIN).expect("the embedded points table parses"))
    }

    /// The event (index into `events`) and edge a print labelled `label` reads, if any.
    pub fn event_of(&self, label: &str, events: &[&str]) -> Option<(usize, Edge)> {
        for r in &self.rules {
            let Some(m) = r.print.captures(label) else {
                continue;
            };
            let mut pattern = r.event.clone();
            for g in template_groups(&r.event) {
                pattern = pattern.replace(&format!("{{{g}}}"), &regex::escape(&m[g.as_str()]));
            }
            let re = Regex::new(&pattern).ok()?;
            let mut hits = events.iter().enumerate().filter(|(_, e)| re.is_match(e));
            let hit = if r.last {
                hits.next_back()
            } else {
                hits.next()
            };
            return hit.map(|(i, _)| (i, r.edge));
        }
        None
    }
}

fn template_groups(t: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = t;
    while let Some(a) = rest.find('{') {
        let Some(b) = rest[a..].find('}') else { break };
        let name = &rest[a + 1..a + b];
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push(name.to_string());
        }
        rest = &rest[a + b + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_meet_the_estimators_events() {
        let events = [
            "S1.i0 fwd(p0) c0",
            "S2.i0 fwd(p0) c1",
            "S2.i0 fwd(p1) c0",
            "S3.i0 bwd(p1,zb=True) c0",
            "S3.i0 weight_chunk",
            "S3.i0 fwd(p1) c1",
            "S4.i0.last_rank fwd(p0) c2",
            "S4.i0.last_rank bwd(p1,zb=False) c1",
            "S4.i0 fwd_bwd(p1,p0) fc2/bc0",
            "S8.i0 weight_chunk",
        ];
        let p = Points::builtin();
        let at = |l: &str| p.event_of(l, &events);
        assert_eq!(at("Step1 F0 i=0"), Some((0, Edge::End)));
        assert_eq!(at("Step2 i=0 forward_chunk(1)"), Some((2, Edge::End)));
        assert_eq!(at("Step3 i=0 before B1"), Some((3, Edge::Start)));
        assert_eq!(at("Step3 i=0 after W1"), Some((4, Edge::End)));
        assert_eq!(
            at("Step4 i=0"),
            Some((8, Edge::End)),
            "after both chunks of i=0"
        );
        assert_eq!(at("After Step2"), Some((2, Edge::End)));
        assert_eq!(at("After Step8 (end of pipeline)"), Some((9, Edge::End)));
        assert_eq!(at("Before pipeline"), None);
        assert_eq!(at("Step2 i=5 forward_chunk(0)"), None, "no such event");
    }

    #[test]
    fn a_template_group_the_print_lacks_is_refused() {
        let bad =
            "[[point]]\nprint = '^Step1 (?P<i>\\d+)$'\nevent = '^S1\\.i{j}'\nedge = \"end\"\n";
        assert!(Points::parse(bad).err().unwrap().contains("no group j"));
    }
}
