//! JSON snapshots (`json.dump` of the same dict): streamed through serde into the same
//! [`Builder`] the pickle reader uses, so no generic JSON tree is ever built.

use std::fmt;
use std::io::Read;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};

use super::builder::Builder;
use super::value::{PV, Value};
use crate::snapshot::model::{Layout, Snapshot};

struct Seed<'a>(&'a mut Builder);

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = PV;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<PV, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = PV;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<PV, E> {
        Ok(self.0.pack(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<PV, E> {
        Ok(self.0.pack(Value::Int(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<PV, E> {
        Ok(self.0.pack(if v <= i64::MAX as u64 {
            Value::Int(v as i64)
        } else {
            Value::UInt(v)
        }))
    }
    fn visit_f64<E>(self, v: f64) -> Result<PV, E> {
        Ok(self.0.pack(Value::Float(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<PV, E> {
        Ok(self.0.str(v))
    }
    fn visit_unit<E>(self) -> Result<PV, E> {
        Ok(PV::NONE)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PV, A::Error> {
        let list = self.0.new_list();
        while let Some(v) = seq.next_element_seed(Seed(self.0))? {
            self.0
                .list_append(list, v)
                .map_err(|e| A::Error::custom(e.msg))?;
        }
        Ok(list)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PV, A::Error> {
        let dict = self.0.new_dict();
        while let Some(k) = map.next_key_seed(Seed(self.0))? {
            let v = map.next_value_seed(Seed(self.0))?;
            self.0
                .dict_set(dict, k, v)
                .map_err(|e| A::Error::custom(e.msg))?;
        }
        Ok(dict)
    }
}

/// Why a JSON snapshot was not read: the reading failed (the system's), or the text is not a
/// snapshot (serde_json's line and column, or what the snapshot lacks).
#[derive(Debug)]
pub enum JsonError {
    Io(std::io::Error),
    Invalid(String),
}

impl From<serde_json::Error> for JsonError {
    fn from(e: serde_json::Error) -> JsonError {
        if e.is_io() {
            JsonError::Io(e.into())
        } else {
            JsonError::Invalid(e.to_string())
        }
    }
}

/// Read a JSON snapshot.
pub fn read_json<R: Read>(r: R, total: u64, max_events: usize) -> Result<Snapshot, JsonError> {
    let mut b = Builder::new(max_events);
    let mut de = serde_json::Deserializer::from_reader(r);
    let top = Seed(&mut b).deserialize(&mut de)?;
    de.end()?;
    let layout = Layout {
        format: "json".into(),
        ..Layout::default()
    };
    b.finish(top, layout, total)
        .map_err(|e| JsonError::Invalid(e.msg))
}
