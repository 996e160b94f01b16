//! The pickle machine: the data part of protocols 0 to 5 (ints, floats, strings,
//! bytes, lists, dicts, tuples, sets, the memo, FRAME), and a refusal for every opcode
//! that would import or call (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ,
//! NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID) and for out-of-band buffers. Values go
//! straight to a [`Builder`], which folds them into the typed snapshot as they complete.

use super::PickleError;
use super::builder::{BuildError, Builder};
use super::fast::WINDOW;
use super::input::{Input, Source};
use super::shape::FastPath;
use super::split::SplitMain;
use super::value::*;
use crate::snapshot::model::{Layout, Snapshot};

pub(crate) type PResult<T> = Result<T, PickleError>;

fn refused(op: u8) -> Option<&'static str> {
    Some(match op {
        b'c' => "GLOBAL (imports a name)",
        0x93 => "STACK_GLOBAL (imports a name)",
        b'R' => "REDUCE (calls a function)",
        b'b' => "BUILD (calls __setstate__)",
        b'i' => "INST (instantiates a class)",
        b'o' => "OBJ (instantiates a class)",
        0x81 => "NEWOBJ (instantiates a class)",
        0x92 => "NEWOBJ_EX (instantiates a class)",
        0x82..=0x84 => "EXT (imports a registered name)",
        b'P' => "PERSID (persistent load)",
        b'Q' => "BINPERSID (persistent load)",
        0x97 => "NEXT_BUFFER (out-of-band buffer)",
        0x98 => "READONLY_BUFFER (out-of-band buffer)",
        _ => return None,
    })
}

pub(crate) struct Vm<'a, R: Source> {
    pub(crate) inp: Input<R>,
    pub(crate) b: &'a mut Builder,
    pub(crate) stack: Vec<PV>,
    pub(crate) marks: Vec<usize>,
    pub(crate) op_offset: u64,
    pub(crate) protocol: Option<u8>,
    pub(crate) fast: bool,
    pub(crate) split: Option<&'a mut SplitMain>,
    pub(crate) fast_path: FastPath,
}

impl<R: Source> Vm<'_, R> {
    pub(crate) fn fail<T>(&self, msg: impl Into<String>) -> PResult<T> {
        Err(PickleError {
            offset: self.op_offset,
            msg: msg.into(),
            io: None,
            retain: false,
        })
    }

    pub(crate) fn build<T>(&self, r: Result<T, BuildError>) -> PResult<T> {
        r.map_err(|e| PickleError {
            offset: self.op_offset,
            msg: e.msg,
            io: None,
            retain: e.retain,
        })
    }

    #[inline]
    fn pop(&mut self) -> PResult<PV> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return self.fail("stack underflow (malformed pickle)");
        }
        Ok(self.stack.pop().expect("checked"))
    }

    #[inline]
    fn top(&self) -> PResult<PV> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return self.fail("stack underflow (malformed pickle)");
        }
        Ok(*self.stack.last().expect("checked"))
    }

    fn pop_mark(&mut self) -> PResult<usize> {
        match self.marks.pop() {
            Some(m) => Ok(m),
            None => self.fail("no MARK on the stack (malformed pickle)"),
        }
    }

    #[inline(always)]
    fn push_memo(&mut self, idx: u64) -> PResult<()> {
        let r = self.b.memo_get(idx);
        let v = self.build(r)?;
        self.stack.push(v);
        Ok(())
    }

    #[inline(always)]
    fn push_val(&mut self, v: Value) {
        let p = self.b.pack(v);
        self.stack.push(p);
    }

    fn push_str(&mut self, s: &str) {
        let v = self.b.str(s);
        self.stack.push(v);
    }

    fn memo_put(&mut self, idx: u64) -> PResult<()> {
        let v = self.top()?;
        let r = self.b.memo_put(idx, v);
        self.build(r)
    }

    /// Try the fast path at an EMPTY_DICT: the entry's event, parked for its list.
    fn try_trace_entry(&mut self) -> Option<PV> {
        if self.inp.end - self.inp.pos < WINDOW && self.inp.fill(WINDOW).is_err() {
            return None;
        }
        let start = self.inp.pos;
        let buf = &self.inp.buf[start..self.inp.end.min(start + WINDOW)];
        let (ev, used) = self.fast_path.read(buf, self.b)?;
        self.inp.pos = start + used;
        Some(self.b.park_event(ev))
    }

    /// The MARK of the open batch of trace entries (an event list's APPENDS), if
    /// the stack above it holds trace entries only.
    fn trace_batch(&self) -> Option<usize> {
        let &m = self.marks.last()?;
        let ok = m > 0
            && self.b.is_event_list(self.stack[m - 1])
            && self.stack[m..].iter().all(|&v| self.b.is_trace_entry(v));
        ok.then_some(m)
    }

    /// A split read at an EMPTY_DICT: publish the key strings once inside a batch;
    /// at the helper's start, take its part as if read here (the entries parked so
    /// far in this batch first). Returns false with nothing changed otherwise.
    fn take_over(&mut self) -> PResult<bool> {
        let off = self.op_offset;
        // The batch check walks the open batch: only where its answer is needed (at
        // every entry it would make reading a batch quadratic).
        if self
            .split
            .as_deref()
            .expect("checked")
            .wants_publication(off)
            && self.trace_batch().is_some_and(|m| self.stack.len() > m)
        {
            let sp = self.split.as_deref_mut().expect("checked");
            sp.publish(off, self.b);
        }
        let sp = self.split.as_deref_mut().expect("checked");
        if !sp.at_start(off) {
            return Ok(false);
        }
        let batch = self.trace_batch();
        let sp = self.split.as_deref_mut().expect("checked");
        let Some(m) = batch else {
            sp.decline();
            return Ok(false);
        };
        let Some(t) = sp.take(off, self.b) else {
            return Ok(false);
        };
        let l = self.stack[m - 1];
        let r = self.b.list_extend(l, &self.stack[m..]);
        self.build(r)?;
        self.stack.truncate(m);
        self.b.add_seen_event_keys(t.seen);
        // The helper's entries (which drop this reader's older ones first), then its
        // memo stores, read in place.
        let r = self.b.extend_events(l, t.events, t.dropped);
        self.build(r)?;
        let r = self.b.memo_overlay(t.overlay);
        self.build(r)?;
        self.inp.skip_to(t.stop)?;
        Ok(true)
    }

    pub(crate) fn run(&mut self) -> PResult<PV> {
        loop {
            self.op_offset = self.inp.offset();
            let op = self.inp.byte()?;
            // The opcodes that make up most of a snapshot (memo references to keys,
            // strings, frames and stacks) are tested first: conditional branches
            // predict better than the one indirect jump of the match.
            if op == b'h' {
                let idx = self.inp.byte()? as u64;
                self.push_memo(idx)?;
                continue;
            }
            if op == b'j' {
                let idx = u32::from_le_bytes(self.inp.array()?) as u64;
                self.push_memo(idx)?;
                continue;
            }
            match op {
                // --- containers ---
                b'}' => {
                    if self.split.is_some() && self.take_over()? {
                        continue;
                    }
                    if self.fast
                        && let Some(ev) = self.try_trace_entry()
                    {
                        self.stack.push(ev);
                        continue;
                    }
                    let d = self.b.new_dict();
                    self.stack.push(d);
                }
                b']' | 0x8f => {
                    // EMPTY_LIST, EMPTY_SET (a set is read as a list)
                    let l = self.b.new_list();
                    self.stack.push(l);
                }
                b')' => {
                    let r = self.b.new_tuple(Vec::new());
                    let t = self.build(r)?;
                    self.stack.push(t);
                }
                b'(' => self.marks.push(self.stack.len()),
                b'u' => {
                    let m = self.pop_mark()?;
                    if m == 0 || !(self.stack.len() - m).is_multiple_of(2) {
                        return self.fail("SETITEMS with an odd number of items or no dict");
                    }
                    let d = self.stack[m - 1];
                    let r = self.b.dict_set_many(d, &self.stack[m..]);
                    self.build(r)?;
                    self.stack.truncate(m);
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    let d = self.top()?;
                    let r = self.b.dict_set(d, k, v);
                    self.build(r)?;
                }
                b'e' | 0x90 => {
                    // APPENDS, ADDITEMS
                    let m = self.pop_mark()?;
                    if m == 0 {
                        return self.fail("APPENDS with no list below the MARK");
                    }
                    let l = self.stack[m - 1];
                    let r = self.b.list_extend(l, &self.stack[m..]);
                    self.build(r)?;
                    self.stack.truncate(m);
                }
                b'a' => {
                    let v = self.pop()?;
                    let l = self.top()?;
                    let r = self.b.list_append(l, v);
                    self.build(r)?;
                }
                b'l' | 0x91 => {
                    // LIST, FROZENSET
                    let m = self.pop_mark()?;
                    let l = self.b.new_list();
                    let r = self.b.list_extend(l, &self.stack[m..]);
                    self.build(r)?;
                    self.stack.truncate(m);
                    self.stack.push(l);
                }
                b'd' => {
                    let m = self.pop_mark()?;
                    if !(self.stack.len() - m).is_multiple_of(2) {
                        return self.fail("DICT with an odd number of items");
                    }
                    let d = self.b.new_dict();
                    let r = self.b.dict_set_many(d, &self.stack[m..]);
                    self.build(r)?;
                    self.stack.truncate(m);
                    self.stack.push(d);
                }
                b't' => {
                    let m = self.pop_mark()?;
                    let items: Vec<PV> = self.stack.drain(m..).collect();
                    let r = self.b.new_tuple(items);
                    let t = self.build(r)?;
                    self.stack.push(t);
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + n {
                        return self.fail("stack underflow (malformed pickle)");
                    }
                    let at = self.stack.len() - n;
                    let items: Vec<PV> = self.stack.drain(at..).collect();
                    let r = self.b.new_tuple(items);
                    let t = self.build(r)?;
                    self.stack.push(t);
                }
                // --- scalars ---
                b'N' => self.push_val(Value::None),
                0x88 => self.push_val(Value::Bool(true)),
                0x89 => self.push_val(Value::Bool(false)),
                b'K' => {
                    let v = self.inp.byte()?;
                    self.push_val(Value::Int(v as i64));
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.inp.array()?);
                    self.push_val(Value::Int(v as i64));
                }
                b'J' => {
                    let v = i32::from_le_bytes(self.inp.array()?);
                    self.push_val(Value::Int(v as i64));
                }
                0x8a => {
                    let n = self.inp.byte()? as u64;
                    if n <= 8 {
                        let v = self.inp.long_le(n as usize)?;
                        self.push_val(Value::Int(v));
                    } else {
                        let v = int_from_le(self.inp.bytes(n)?);
                        self.push_val(v);
                    }
                }
                0x8b => {
                    let n = i32::from_le_bytes(self.inp.array()?);
                    if n < 0 {
                        return self.fail("LONG4 with a negative length");
                    }
                    let v = int_from_le(self.inp.bytes(n as u64)?);
                    self.push_val(v);
                }
                b'I' => {
                    let v = match self.inp.line()? {
                        b"00" => Some(Value::Bool(false)),
                        b"01" => Some(Value::Bool(true)),
                        l => text_int(l),
                    };
                    match v {
                        Some(v) => self.push_val(v),
                        None => return self.fail("INT with a malformed argument"),
                    }
                }
                b'L' => match text_int(self.inp.line()?) {
                    Some(v) => self.push_val(v),
                    None => return self.fail("LONG with a malformed argument"),
                },
                b'G' => {
                    let v = f64::from_be_bytes(self.inp.array()?);
                    self.push_val(Value::Float(v));
                }
                b'F' => {
                    let v = std::str::from_utf8(self.inp.line()?)
                        .ok()
                        .and_then(|s| s.trim().parse::<f64>().ok());
                    match v {
                        Some(v) => self.push_val(Value::Float(v)),
                        None => return self.fail("FLOAT with a malformed argument"),
                    }
                }
                // --- strings and bytes ---
                0x8c | b'X' | 0x8d => {
                    let n = match op {
                        0x8c => self.inp.byte()? as u64,
                        b'X' => u32::from_le_bytes(self.inp.array()?) as u64,
                        _ => u64::from_le_bytes(self.inp.array()?),
                    };
                    let s = self.inp.bytes(n)?;
                    let s = String::from_utf8_lossy(s).into_owned();
                    self.push_str(&s);
                }
                b'V' => match raw_unicode_escape(self.inp.line()?) {
                    Some(s) => self.push_str(&s),
                    None => return self.fail("UNICODE with a malformed argument"),
                },
                b'S' => match unquote(self.inp.line()?) {
                    Some(s) => self.push_str(&s),
                    None => return self.fail("STRING with a malformed argument"),
                },
                b'T' | b'U' => {
                    // BINSTRING, SHORT_BINSTRING (Python 2 str): decoded as latin-1.
                    let n = if op == b'U' {
                        self.inp.byte()? as u64
                    } else {
                        let n = i32::from_le_bytes(self.inp.array()?);
                        if n < 0 {
                            return self.fail("BINSTRING with a negative length");
                        }
                        n as u64
                    };
                    let s: String = self.inp.bytes(n)?.iter().map(|&b| b as char).collect();
                    self.push_str(&s);
                }
                b'B' | b'C' | 0x8e | 0x96 => {
                    let n = match op {
                        b'B' => u32::from_le_bytes(self.inp.array()?) as u64,
                        b'C' => self.inp.byte()? as u64,
                        _ => u64::from_le_bytes(self.inp.array()?),
                    };
                    self.inp.bytes(n)?;
                    self.push_val(Value::Bytes);
                }
                // --- memo ---
                0x94 => {
                    let idx = self.b.memo_len();
                    self.memo_put(idx)?;
                }
                b'q' => {
                    let idx = self.inp.byte()? as u64;
                    self.memo_put(idx)?;
                }
                b'r' => {
                    let idx = u32::from_le_bytes(self.inp.array()?) as u64;
                    self.memo_put(idx)?;
                }
                b'p' => {
                    let idx = match text_int(self.inp.line()?) {
                        Some(Value::Int(i)) if i >= 0 => i as u64,
                        _ => return self.fail("PUT with a malformed index"),
                    };
                    self.memo_put(idx)?;
                }
                b'g' => {
                    let idx = match text_int(self.inp.line()?) {
                        Some(Value::Int(i)) if i >= 0 => i as u64,
                        _ => return self.fail("GET with a malformed index"),
                    };
                    self.push_memo(idx)?;
                }
                // --- stack and framing ---
                b'0' => {
                    let v = self.pop()?;
                    self.b.discard(v);
                }
                b'1' => {
                    let m = self.pop_mark()?;
                    for v in self.stack.drain(m..).collect::<Vec<_>>() {
                        self.b.discard(v);
                    }
                }
                b'2' => {
                    let v = self.top()?;
                    self.b.note_copy(v);
                    self.stack.push(v);
                }
                0x80 => {
                    let p = self.inp.byte()?;
                    if p > 5 {
                        return self
                            .fail(format!("unsupported pickle protocol {p} (0 to 5 are read)"));
                    }
                    if self.protocol.is_none() {
                        self.protocol = Some(p);
                    }
                }
                0x95 => {
                    // FRAME: a length hint only.
                    self.inp.array::<8>()?;
                }
                b'.' => {
                    if !self.marks.is_empty() {
                        return self.fail("STOP with an open MARK (malformed pickle)");
                    }
                    return match self.stack.pop() {
                        Some(v) => Ok(v),
                        None => self.fail("STOP with an empty stack (malformed pickle)"),
                    };
                }
                other => {
                    if let Some(what) = refused(other) {
                        return self.fail(format!(
                            "refused opcode {what}: this file asks to run code, and instrument never executes anything from a pickle"
                        ));
                    }
                    return self.fail(format!(
                        "unknown opcode 0x{other:02x} (not a pickle, or corrupted)"
                    ));
                }
            }
        }
    }
}

/// Read a snapshot pickle from `r` (`total` bytes long, 0 if unknown). `fast` turns
/// the trace-entry fast path on (the tests check that both read the same); `retain`
/// keeps every memoized object (for files that share records).
pub fn read_pickle_with<R: Source>(
    r: R,
    total: u64,
    max_events: usize,
    fast: bool,
    retain: bool,
) -> Result<Snapshot, PickleError> {
    read_with(r, total, max_events, fast, retain, None)
}

pub(crate) fn read_with<R: Source>(
    r: R,
    total: u64,
    max_events: usize,
    fast: bool,
    retain: bool,
    split: Option<&mut SplitMain>,
) -> Result<Snapshot, PickleError> {
    let mut b = Builder::new(max_events);
    b.retain = retain;
    let mut vm = Vm {
        inp: Input::new(r, total),
        b: &mut b,
        stack: Vec::new(),
        marks: Vec::new(),
        op_offset: 0,
        protocol: None,
        // The fast path releases trace entries as it reads them.
        fast: fast && !retain,
        split,
        fast_path: FastPath::default(),
    };
    let top = vm.run()?;
    let end = vm.inp.offset();
    let protocol = vm.protocol;
    let layout = Layout {
        format: "pickle".into(),
        pickle_protocol: protocol,
        ..Layout::default()
    };
    b.finish(top, layout, total).map_err(|e| PickleError {
        offset: end,
        msg: e.msg,
        io: None,
        retain: e.retain,
    })
}
