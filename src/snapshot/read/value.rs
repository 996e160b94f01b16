//! Values as the reader moves them: a packed 64-bit [`PV`] (4 bits of tag, 60 of
//! payload) on the VM stack, in the memo and inside containers under construction,
//! and the unpacked [`Value`] the folding code matches on.

use crate::snapshot::model::{FrameId, StackId, StrId};

/// A value after unpacking.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An integer above `i64::MAX` that fits in a `u64`.
    UInt(u64),
    /// An integer that fits in neither.
    BigInt,
    Float(f64),
    Str(StrId),
    Bytes,
    Obj(ObjRef),
    Frame(FrameId),
    Stack(StackId),
    /// Memo marker: no entry at this index.
    Unset,
    /// A record (trace entry, block, segment) folded into the snapshot and not kept.
    Released,
    /// A container whose content was not needed (a `pool_id` tuple, an unknown key's
    /// value) and was dropped.
    Discarded,
}

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::UInt(_) | Value::BigInt => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes => "bytes",
            Value::Obj(_) => "container",
            Value::Frame(_) => "frame",
            Value::Stack(_) => "list of frames",
            Value::Unset => "nothing",
            Value::Released => "a folded record",
            Value::Discarded => "a dropped container",
        }
    }
}

/// A container under construction: an arena slot and its generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjRef {
    pub id: u32,
    pub generation: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PV(pub(crate) u64);

pub const T_NONE: u64 = 0;
pub const T_BOOL: u64 = 1;
pub const T_INT: u64 = 2;
pub const T_WIDE: u64 = 3;
pub const T_FLOAT: u64 = 4;
pub const T_STR: u64 = 5;
pub const T_BYTES: u64 = 6;
pub const T_OBJ: u64 = 7;
pub const T_FRAME: u64 = 8;
pub const T_STACK: u64 = 9;
pub const T_UNSET: u64 = 10;
pub const T_RELEASED: u64 = 11;
pub const T_BIGINT: u64 = 12;
/// A trace entry decoded by the fast path, waiting on the VM stack for its list.
pub const T_EVENT: u64 = 13;
pub const T_DISCARDED: u64 = 14;
const PAYLOAD: u64 = (1 << 60) - 1;
pub const GEN_MASK: u32 = (1 << 28) - 1;

impl PV {
    pub const NONE: PV = PV(T_NONE << 60);
    pub const UNSET: PV = PV(T_UNSET << 60);
    pub const RELEASED: PV = PV(T_RELEASED << 60);
    pub const DISCARDED: PV = PV(T_DISCARDED << 60);

    #[inline(always)]
    pub const fn new(tag: u64, payload: u64) -> PV {
        PV((tag << 60) | (payload & PAYLOAD))
    }
    #[inline(always)]
    pub const fn str(id: StrId) -> PV {
        PV::new(T_STR, id as u64)
    }
    #[inline(always)]
    pub const fn stack(id: StackId) -> PV {
        PV::new(T_STACK, id as u64)
    }
    #[inline(always)]
    pub const fn frame(id: FrameId) -> PV {
        PV::new(T_FRAME, id as u64)
    }
    #[inline(always)]
    pub fn bool(b: bool) -> PV {
        PV::new(T_BOOL, b as u64)
    }
    #[inline(always)]
    pub fn obj(r: ObjRef) -> PV {
        PV::new(T_OBJ, ((r.generation as u64) << 32) | r.id as u64)
    }
    /// A small integer packed in place (None when it needs a side table).
    #[inline(always)]
    pub fn small_int(i: i64) -> Option<PV> {
        (-(1i64 << 59)..(1i64 << 59))
            .contains(&i)
            .then(|| PV::new(T_INT, i as u64))
    }
    #[inline(always)]
    pub fn tag(self) -> u64 {
        self.0 >> 60
    }
    #[inline(always)]
    pub fn payload(self) -> u64 {
        self.0 & PAYLOAD
    }
    /// Not a value the file gave: a memo hole, a folded record, a dropped container.
    #[inline(always)]
    pub fn is_missing(self) -> bool {
        matches!(self.tag(), T_UNSET | T_RELEASED | T_DISCARDED)
    }
    #[inline(always)]
    pub fn str_id(self) -> Option<StrId> {
        (self.tag() == T_STR).then_some(self.payload() as StrId)
    }
    #[inline(always)]
    pub fn frame_id(self) -> Option<FrameId> {
        (self.tag() == T_FRAME).then_some(self.payload() as FrameId)
    }
    #[inline(always)]
    pub fn stack_id(self) -> Option<StackId> {
        (self.tag() == T_STACK).then_some(self.payload() as StackId)
    }
    #[inline(always)]
    pub fn as_obj(self) -> Option<ObjRef> {
        (self.tag() == T_OBJ).then(|| ObjRef {
            id: self.payload() as u32,
            generation: (self.payload() >> 32) as u32,
        })
    }
    /// The value of a small packed integer, without unpacking.
    #[inline(always)]
    pub fn as_small_int(self) -> Option<i64> {
        (self.tag() == T_INT).then(|| ((self.payload() << 4) as i64) >> 4)
    }
}

/// Decode a little-endian two's-complement integer (LONG1/LONG4's body).
#[inline]
pub fn int_from_le(bytes: &[u8]) -> Value {
    let n = bytes.len();
    if n == 0 {
        return Value::Int(0);
    }
    if n <= 8 {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(bytes);
        let shift = 64 - 8 * n as u32;
        return Value::Int((i64::from_le_bytes(a) << shift) >> shift);
    }
    let neg = bytes[n - 1] & 0x80 != 0;
    // Strip redundant sign bytes.
    let mut n = n;
    while n > 1 {
        let top = bytes[n - 1];
        let next_sign = bytes[n - 2] & 0x80 != 0;
        if (top == 0x00 && !next_sign && !neg) || (top == 0xff && next_sign && neg) {
            n -= 1;
        } else {
            break;
        }
    }
    if n <= 8 {
        let mut a = if neg { [0xffu8; 8] } else { [0u8; 8] };
        a[..n].copy_from_slice(&bytes[..n]);
        return Value::Int(i64::from_le_bytes(a));
    }
    if !neg && n == 9 && bytes[8] == 0 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&bytes[..8]);
        return Value::UInt(u64::from_le_bytes(a));
    }
    Value::BigInt
}

/// A protocol-0 INT/LONG argument.
pub fn text_int(s: &[u8]) -> Option<Value> {
    let t = std::str::from_utf8(s).ok()?.trim();
    let t = t.strip_suffix('L').unwrap_or(t);
    if let Ok(i) = t.parse::<i64>() {
        return Some(Value::Int(i));
    }
    if let Ok(u) = t.parse::<u64>() {
        return Some(Value::UInt(u));
    }
    let digits = t.strip_prefix('-').unwrap_or(t);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Value::BigInt);
    }
    None
}

/// Decode a protocol-0 STRING argument (a Python repr in quotes).
pub fn unquote(s: &[u8]) -> Option<String> {
    let q = *s.first()?;
    if s.len() < 2 || (q != b'\'' && q != b'"') || s[s.len() - 1] != q {
        return None;
    }
    let inner = &s[1..s.len() - 1];
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let c = inner[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        i += 1;
        let e = *inner.get(i)?;
        i += 1;
        match e {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'\\' => out.push(b'\\'),
            b'\'' => out.push(b'\''),
            b'"' => out.push(b'"'),
            b'x' => {
                let h = std::str::from_utf8(inner.get(i..i + 2)?).ok()?;
                out.push(u8::from_str_radix(h, 16).ok()?);
                i += 2;
            }
            _ => {
                out.push(b'\\');
                out.push(e);
            }
        }
    }
    Some(out.iter().map(|&b| b as char).collect())
}

/// Decode a protocol-0 UNICODE argument (raw-unicode-escape).
pub fn raw_unicode_escape(s: &[u8]) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\\' && i + 1 < s.len() && (s[i + 1] == b'u' || s[i + 1] == b'U') {
            let n = if s[i + 1] == b'u' { 4 } else { 8 };
            let h = std::str::from_utf8(s.get(i + 2..i + 2 + n)?).ok()?;
            let cp = u32::from_str_radix(h, 16).ok()?;
            out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
            i += 2 + n;
        } else {
            out.push(s[i] as char);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_decode_like_python() {
        assert_eq!(int_from_le(&[]), Value::Int(0));
        assert_eq!(int_from_le(&[0xff]), Value::Int(-1));
        assert_eq!(int_from_le(&[0x80, 0x00]), Value::Int(128));
        assert_eq!(int_from_le(&[0x00, 0x80]), Value::Int(-32768));
        assert_eq!(
            int_from_le(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00]),
            Value::UInt(u64::MAX)
        );
        assert_eq!(int_from_le(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), Value::BigInt);
    }

    #[test]
    fn protocol0_strings() {
        assert_eq!(unquote(b"'a\\nb'").as_deref(), Some("a\nb"));
        assert_eq!(unquote(b"\"x\\x41\"").as_deref(), Some("xA"));
        assert_eq!(
            raw_unicode_escape(b"caf\\u00e9").as_deref(),
            Some("caf\u{e9}")
        );
    }

    #[test]
    fn packing_round_trips() {
        let r = ObjRef {
            id: 7,
            generation: GEN_MASK,
        };
        assert_eq!(PV::obj(r).as_obj(), Some(r));
        assert_eq!(PV::small_int(-5).unwrap().as_small_int(), Some(-5));
        assert!(PV::small_int(1 << 60).is_none());
        assert!(PV::RELEASED.is_missing() && PV::DISCARDED.is_missing());
    }
}
