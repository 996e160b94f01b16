//! A run's shape as a trainer labels it: `key=value` fields such as
//! `rank=3; pp=0/2 dp=0/1 cp=0/1 ep=3/4; mbs=1 seq=2048`, where a `R/S` value is a coordinate
//! on a mesh axis (rank R of S) and anything else a plain field.
//!
//! One reading for every reader: `instrument nsys` finds such a label in an NVTX range, `instrument
//! log` in a print. Which keys matter (which is the rank, which axes exist) is the caller's data
//! (a conventions table, a print declaration); this module knows no trainer's names.

use std::cmp::Ordering;
use std::fmt;

use serde::Serialize;
use serde::ser::SerializeMap;

/// One parsed label: its fields in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub key: String,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `R/S`: rank R of an axis of size S.
    Coord { rank: u32, size: u32 },
    /// A decimal integer.
    Int(u64),
    /// Anything else (a path, a name), as written.
    Text(String),
}

impl Label {
    /// Read `key=value` fields separated by spaces and `;`. A word without `=` continues the
    /// previous value (a path with a space in it), so nothing written is lost. `None` when no
    /// field is found, or a key repeats (two labels run together are not one shape).
    pub fn parse(text: &str) -> Option<Label> {
        let mut raw: Vec<(String, String)> = Vec::new();
        for word in text.split(' ').filter(|w| !w.is_empty()) {
            let word = word.strip_suffix(';').unwrap_or(word);
            match word.split_once('=') {
                Some((key, value)) if is_key(key) => {
                    if raw.iter().any(|(k, _)| k == key) {
                        return None;
                    }
                    raw.push((key.to_string(), value.to_string()));
                }
                _ => {
                    let (_, value) = raw.last_mut()?;
                    value.push(' ');
                    value.push_str(word);
                }
            }
        }
        if raw.is_empty() {
            return None;
        }
        let fields = raw
            .into_iter()
            .map(|(key, value)| Field {
                value: Value::read(&value),
                key,
            })
            .collect();
        Some(Label { fields })
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|f| f.key == key).map(|f| &f.value)
    }

    /// The integer field `key` (`None` when absent or not an integer).
    pub fn int(&self, key: &str) -> Option<u64> {
        match self.get(key)? {
            Value::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// The field `key` as written.
    pub fn text(&self, key: &str) -> Option<String> {
        self.get(key).map(Value::to_string)
    }

    /// The coordinate fields, in the order written.
    pub fn mesh(&self) -> Mesh {
        Mesh {
            axes: self
                .fields
                .iter()
                .filter_map(|f| match f.value {
                    Value::Coord { rank, size } => Some(Axis {
                        name: f.key.clone(),
                        rank,
                        size,
                    }),
                    _ => None,
                })
                .collect(),
        }
    }
}

fn is_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

impl Value {
    fn read(value: &str) -> Value {
        if let Some((r, s)) = value.split_once('/')
            && let (Ok(rank), Ok(size)) = (r.parse::<u32>(), s.parse::<u32>())
            && rank < size
            && is_decimal(r)
            && is_decimal(s)
        {
            return Value::Coord { rank, size };
        }
        if is_decimal(value)
            && let Ok(n) = value.parse()
        {
            return Value::Int(n);
        }
        Value::Text(value.to_string())
    }
}

fn is_decimal(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Coord { rank, size } => write!(f, "{rank}/{size}"),
            Value::Int(n) => write!(f, "{n}"),
            Value::Text(t) => f.write_str(t),
        }
    }
}

/// A position on the parallelism mesh: one coordinate per axis, in the label's order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Mesh {
    pub axes: Vec<Axis>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Axis {
    pub name: String,
    pub rank: u32,
    pub size: u32,
}

impl Mesh {
    pub fn is_empty(&self) -> bool {
        self.axes.is_empty()
    }

    /// `(rank, size)` on the axis `name`.
    pub fn get(&self, name: &str) -> Option<(u32, u32)> {
        self.axes
            .iter()
            .find(|a| a.name == name)
            .map(|a| (a.rank, a.size))
    }

    /// The same axes with the same sizes (two ranks of one run).
    pub fn same_shape(&self, other: &Mesh) -> bool {
        self.axes.len() == other.axes.len()
            && self
                .axes
                .iter()
                .zip(&other.axes)
                .all(|(a, b)| a.name == b.name && a.size == b.size)
    }

    /// For people: the axes that have more than one rank, `pp 1, ep 6` (every axis when all are
    /// of size one, so a single-GPU run still says where it is).
    pub fn short(&self) -> String {
        let wide: Vec<&Axis> = self.axes.iter().filter(|a| a.size > 1).collect();
        let shown = if wide.is_empty() {
            self.axes.iter().collect()
        } else {
            wide
        };
        shown
            .iter()
            .map(|a| format!("{} {}", a.name, a.rank))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// As the label writes it: `pp=1/2 dp=0/1 cp=0/1 ep=6/8`.
    pub fn full(&self) -> String {
        self.axes
            .iter()
            .map(|a| format!("{}={}/{}", a.name, a.rank, a.size))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Meshes sort by their coordinates in axis order (pp first in pithtrain's label), so a table
/// keyed by them reads stage by stage.
impl Ord for Mesh {
    fn cmp(&self, other: &Self) -> Ordering {
        let key = |m: &Mesh| {
            m.axes
                .iter()
                .map(|a| (a.name.clone(), a.rank, a.size))
                .collect::<Vec<_>>()
        };
        key(self).cmp(&key(other))
    }
}

impl PartialOrd for Mesh {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// JSON: `{"pp": [rank, size], "dp": [rank, size], ...}` in axis order.
impl Serialize for Mesh {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.axes.len()))?;
        for a in &self.axes {
            map.serialize_entry(&a.name, &[a.rank, a.size])?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PITHTRAIN: &str = "rank=3; pp=0/2 dp=0/1 cp=0/1 ep=3/4; mbs=1 seq=2048";

    #[test]
    fn reads_pithtrains_setup_label() {
        let label = Label::parse(PITHTRAIN).unwrap();
        assert_eq!(label.int("rank"), Some(3));
        assert_eq!(label.int("mbs"), Some(1));
        assert_eq!(label.int("seq"), Some(2048));
        let mesh = label.mesh();
        assert_eq!(mesh.get("pp"), Some((0, 2)));
        assert_eq!(mesh.get("ep"), Some((3, 4)));
        assert_eq!(mesh.full(), "pp=0/2 dp=0/1 cp=0/1 ep=3/4");
        assert_eq!(mesh.short(), "pp 0, ep 3");
        assert_eq!(
            serde_json::to_string(&mesh).unwrap(),
            r#"{"pp":[0,2],"dp":[0,1],"cp":[0,1],"ep":[3,4]}"#
        );
    }

    #[test]
    fn a_path_with_spaces_stays_one_value() {
        let label =
            Label::parse("rank=0; pp=0/1; gbs=8 world=1 model=/data/my models/qwen").unwrap();
        assert_eq!(label.text("model").as_deref(), Some("/data/my models/qwen"));
        assert_eq!(label.int("world"), Some(1));
    }

    #[test]
    fn not_a_label() {
        assert_eq!(Label::parse(""), None);
        assert_eq!(Label::parse("forward chunk 0"), None);
        // Two labels run together are refused, not merged.
        assert_eq!(Label::parse("rank=1 rank=2"), None);
        // A rank outside its axis is not a coordinate.
        assert_eq!(
            Label::parse("pp=2/2").unwrap().get("pp"),
            Some(&Value::Text("2/2".into()))
        );
    }

    #[test]
    fn meshes_sort_by_coordinates_and_compare_shapes() {
        let a = Label::parse("pp=0/2 ep=3/4").unwrap().mesh();
        let b = Label::parse("pp=1/2 ep=0/4").unwrap().mesh();
        let c = Label::parse("pp=1/2 ep=0/8").unwrap().mesh();
        assert!(a < b);
        assert!(a.same_shape(&b));
        assert!(!b.same_shape(&c));
        assert_eq!(
            Label::parse("pp=0/1 ep=0/1").unwrap().mesh().short(),
            "pp 0, ep 0"
        );
    }
}
