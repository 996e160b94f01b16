//! A pickle reader that never executes anything.
//!
//! It runs the data part of the pickle machine (protocols 0 to 5: ints, floats,
//! strings, bytes, lists, dicts, tuples, sets, the memo, frames) and refuses every
//! opcode that would import or call (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ,
//! NEWOBJ, NEWOBJ_EX, EXT1/2/4, PERSID, BINPERSID) and out-of-band buffers. Values go
//! straight to a [`Builder`], which folds them into the typed snapshot as they
//! complete; the input is read in a bounded buffer, never whole.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};

use super::builder::{BuildError, Builder, PV, Value};
use super::model::{Event, Layout, Snapshot};

/// Why a pickle could not be read: a message and the byte offset of the opcode.
#[derive(Debug)]
pub struct PickleError {
    pub offset: u64,
    pub msg: String,
}

type PResult<T> = Result<T, PickleError>;

const BUF: usize = 1 << 20;

/// What the reader reads from: any `Read`, plus a way to jump forward (over the part
/// of a file a helper thread already read).
pub trait Source: Read {
    /// Move from offset `cur` to `target` (> `cur`).
    fn skip_to(&mut self, cur: u64, target: u64) -> std::io::Result<()>;
}

impl Source for &[u8] {
    fn skip_to(&mut self, cur: u64, target: u64) -> std::io::Result<()> {
        let n = ((target - cur) as usize).min(self.len());
        *self = &self[n..];
        Ok(())
    }
}

impl Source for std::fs::File {
    fn skip_to(&mut self, _cur: u64, target: u64) -> std::io::Result<()> {
        self.seek(SeekFrom::Start(target)).map(|_| ())
    }
}

impl<R: Read + Seek> Source for std::io::BufReader<R> {
    fn skip_to(&mut self, _cur: u64, target: u64) -> std::io::Result<()> {
        self.seek(SeekFrom::Start(target)).map(|_| ())
    }
}

/// A buffered reader that keeps the absolute offset and knows the input length.
struct Input<R: Source> {
    r: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    base: u64,
    total: u64,
    scratch: Vec<u8>,
}

impl<R: Source> Input<R> {
    fn new(r: R, total: u64) -> Self {
        Self::at(r, total, 0)
    }

    /// An input whose reader is positioned at byte `base` of the file.
    fn at(r: R, total: u64, base: u64) -> Self {
        Input {
            r,
            buf: vec![0; BUF],
            pos: 0,
            end: 0,
            base,
            total,
            scratch: Vec::new(),
        }
    }

    /// Continue reading at `target` (at or after the current offset).
    fn skip_to(&mut self, target: u64) -> PResult<()> {
        let end = self.base + self.end as u64;
        if target <= end {
            self.pos = (target - self.base) as usize;
            return Ok(());
        }
        self.r.skip_to(end, target).map_err(|e| PickleError {
            offset: target,
            msg: format!("read failed: {e}"),
        })?;
        self.base = target;
        self.pos = 0;
        self.end = 0;
        Ok(())
    }

    #[inline(always)]
    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    fn truncated(&self, need: u64) -> PickleError {
        PickleError {
            offset: self.offset(),
            msg: format!(
                "truncated: needed {need} more byte(s) but the file ends at byte {}",
                self.total.max(self.base + self.end as u64)
            ),
        }
    }

    /// Refill so that at least `n` (<= BUF) bytes are buffered; false at EOF.
    fn fill(&mut self, n: usize) -> PResult<bool> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        while self.end < n {
            match self.r.read(&mut self.buf[self.end..]) {
                Ok(0) => return Ok(false),
                Ok(k) => self.end += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(PickleError {
                        offset: self.offset(),
                        msg: format!("read failed: {e}"),
                    });
                }
            }
        }
        Ok(true)
    }

    #[inline(always)]
    fn byte(&mut self) -> PResult<u8> {
        if self.pos < self.end {
            let b = self.buf[self.pos];
            self.pos += 1;
            return Ok(b);
        }
        if !self.fill(1)? {
            return Err(self.truncated(1));
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Ok(b)
    }

    #[inline(always)]
    fn array<const N: usize>(&mut self) -> PResult<[u8; N]> {
        if self.end - self.pos < N && !self.fill(N)? {
            return Err(self.truncated((N - (self.end - self.pos)) as u64));
        }
        let mut a = [0u8; N];
        a.copy_from_slice(&self.buf[self.pos..self.pos + N]);
        self.pos += N;
        Ok(a)
    }

    /// A little-endian two's-complement integer of `n` (<= 8) bytes (LONG1's body),
    /// read as one unaligned word when the buffer holds 8 bytes.
    #[inline(always)]
    fn long_le(&mut self, n: usize) -> PResult<i64> {
        if n == 0 {
            return Ok(0);
        }
        if self.end - self.pos >= 8 {
            let mut a = [0u8; 8];
            a.copy_from_slice(&self.buf[self.pos..self.pos + 8]);
            self.pos += n;
            let shift = 64 - 8 * n as u32;
            return Ok((i64::from_le_bytes(a) << shift) >> shift);
        }
        match int_from_le(self.bytes(n as u64)?) {
            Value::Int(i) => Ok(i),
            _ => unreachable!("n <= 8 bytes always fit in an i64"),
        }
    }

    /// `n` bytes; the slice lives until the next read.
    #[inline]
    fn bytes(&mut self, n: u64) -> PResult<&[u8]> {
        let avail = (self.end - self.pos) as u64;
        if n <= avail {
            let s = self.pos;
            self.pos += n as usize;
            return Ok(&self.buf[s..s + n as usize]);
        }
        // Refuse lengths past the end of the input before allocating anything.
        // (A length the file cannot hold is refused before allocating anything.)
        if self.offset().saturating_add(n) > self.total.max(1) && (self.total > 0 || n > 1 << 30) {
            return Err(PickleError {
                offset: self.offset(),
                msg: format!(
                    "truncated: a length of {n} bytes runs past the end of the file at byte {}",
                    self.total
                ),
            });
        }
        if n <= BUF as u64 {
            if !self.fill(n as usize)? {
                return Err(self.truncated(n - (self.end - self.pos) as u64));
            }
            let s = self.pos;
            self.pos += n as usize;
            return Ok(&self.buf[s..s + n as usize]);
        }
        let n = n as usize;
        self.scratch.clear();
        self.scratch
            .extend_from_slice(&self.buf[self.pos..self.end]);
        self.base += self.end as u64;
        self.pos = 0;
        self.end = 0;
        while self.scratch.len() < n {
            let want = (n - self.scratch.len()).min(BUF);
            match self.r.read(&mut self.buf[..want]) {
                Ok(0) => {
                    let missing = (n - self.scratch.len()) as u64;
                    return Err(self.truncated(missing));
                }
                Ok(k) => {
                    self.scratch.extend_from_slice(&self.buf[..k]);
                    self.base += k as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(PickleError {
                        offset: self.offset(),
                        msg: format!("read failed: {e}"),
                    });
                }
            }
        }
        Ok(&self.scratch[..n])
    }

    /// A protocol-0 text argument, up to and excluding the newline.
    fn line(&mut self) -> PResult<&[u8]> {
        const MAX_LINE: usize = 64 * 1024;
        loop {
            if let Some(i) = self.buf[self.pos..self.end]
                .iter()
                .position(|&b| b == b'\n')
            {
                let s = self.pos;
                self.pos += i + 1;
                return Ok(&self.buf[s..s + i]);
            }
            if self.end - self.pos >= MAX_LINE {
                return Err(PickleError {
                    offset: self.offset(),
                    msg: "text argument longer than 64 KiB".into(),
                });
            }
            let want = self.end - self.pos + 1;
            if !self.fill(want)? {
                return Err(self.truncated(1));
            }
        }
    }
}

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

#[inline]
fn int_from_le(bytes: &[u8]) -> Value {
    let n = bytes.len();
    if n == 0 {
        return Value::Int(0);
    }
    if n <= 8 {
        // Two's complement, little-endian: sign-extend from the top byte.
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(bytes);
        let shift = 64 - 8 * n as u32;
        let v = (i64::from_le_bytes(a) << shift) >> shift;
        return Value::Int(v);
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

fn text_int(s: &[u8]) -> Option<Value> {
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
fn unquote(s: &[u8]) -> Option<String> {
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
fn raw_unicode_escape(s: &[u8]) -> Option<String> {
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

struct Vm<'a, R: Source> {
    inp: Input<R>,
    b: &'a mut Builder,
    stack: Vec<PV>,
    marks: Vec<usize>,
    op_offset: u64,
    protocol: Option<u8>,
    fast: bool,
    split: Option<&'a mut SplitMain>,
}

impl<R: Source> Vm<'_, R> {
    fn fail<T>(&self, msg: impl Into<String>) -> PResult<T> {
        Err(PickleError {
            offset: self.op_offset,
            msg: msg.into(),
        })
    }

    fn build<T>(&self, r: Result<T, BuildError>) -> PResult<T> {
        r.map_err(|e| PickleError {
            offset: self.op_offset,
            msg: e.0,
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
        match self.b.memo_get(idx) {
            Ok(v) => {
                self.stack.push(v);
                Ok(())
            }
            Err(e) => self.fail(e.0),
        }
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

    /// The fast path for trace entries, tried at each EMPTY_DICT: when the dict's
    /// bytes are all buffered and follow the shape Python writes for a trace entry
    /// (memoize, MARK, `action` first, keys and values that are memo references,
    /// ints, bools, None or short strings, SETITEMS), decode it straight into an
    /// [`Event`] without the generic stack. On anything else it undoes its memo
    /// stores, rewinds, and the generic machine reads the dict instead.
    fn try_trace_entry(&mut self) -> Option<PV> {
        const WINDOW: usize = 1024;
        if self.inp.end - self.inp.pos < WINDOW && self.inp.fill(WINDOW).is_err() {
            return None;
        }
        // Near the end of the file the window is shorter: an entry cut by it is
        // simply left to the generic machine.
        let start = self.inp.pos;
        let buf = &self.inp.buf[start..self.inp.end.min(start + WINDOW)];
        let b: &mut Builder = self.b;
        let mut undo = [0u64; 8];
        let mut n_undo = 0usize;
        let r = fast_entry(buf, b, &mut undo, &mut n_undo);
        match r {
            Some((ev, used)) => {
                self.inp.pos = start + used;
                Some(self.b.park_event(ev))
            }
            None => {
                for &i in undo[..n_undo].iter().rev() {
                    self.b.memo_unset(i);
                }
                None
            }
        }
    }

    /// After an APPENDS: publish the stable memo to the helper once a trace is under
    /// way, and give up on the helper's part if this reader went past its start.
    fn split_after_appends(&mut self, l: PV) {
        let offset = self.inp.offset();
        let Some(sp) = self.split.as_deref_mut() else {
            return;
        };
        if sp.tx.is_some() && offset >= sp.publish_after && self.b.is_event_list(l) {
            let entries = self.b.publishable_memo();
            sp.published = entries.iter().map(|(i, v, _)| (*i, *v)).collect();
            let target = sp.target.max(offset);
            sp.target = target;
            if let Some(tx) = sp.tx.take() {
                let _ = tx.send(Publication { entries, target });
            }
        }
        let start = sp.start.load(Ordering::Acquire);
        if !sp.done && (start == GAVE_UP || (start != NOT_YET && offset > start)) {
            sp.done = true;
            sp.cancel.store(true, Ordering::Release);
        }
    }

    /// At a MARK: is this where the helper started? The first MARK past the helper's
    /// target waits (briefly) for the helper to say where it starts, so that the
    /// outcome does not depend on which thread is faster.
    fn at_split_start(&mut self) -> bool {
        let off = self.op_offset;
        let Some(sp) = self.split.as_deref_mut() else {
            return false;
        };
        if sp.done {
            return false;
        }
        if !sp.waited && sp.tx.is_none() && off >= sp.target {
            sp.waited = true;
            let t0 = std::time::Instant::now();
            while sp.start.load(Ordering::Acquire) == NOT_YET
                && t0.elapsed() < std::time::Duration::from_secs(5)
            {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        let start = sp.start.load(Ordering::Acquire);
        if start == GAVE_UP || (start != NOT_YET && off > start) {
            sp.done = true;
            sp.cancel.store(true, Ordering::Release);
            return false;
        }
        start == off
    }

    /// At the helper's start offset: if this reader is in the state the helper
    /// assumed (just after an APPENDS to a trace list, the published memo entries
    /// unchanged), take the helper's trace entries and memo entries as if read here,
    /// and continue after them. Returns false (nothing changed) otherwise.
    fn take_over(&mut self) -> PResult<bool> {
        let Some(sp) = self.split.as_deref_mut() else {
            return Ok(false);
        };
        sp.done = true;
        let Ok(res) = sp.rx.recv() else {
            return Ok(false);
        };
        if res.start != self.op_offset || res.stop <= res.start {
            return Ok(false);
        }
        let floor = self.marks.last().copied().unwrap_or(0);
        let Some(&l) = self.stack.last() else {
            return Ok(false);
        };
        if self.stack.len() <= floor || !self.b.is_event_list(l) {
            return Ok(false);
        }
        if sp
            .published
            .iter()
            .any(|&(i, v)| self.b.memo_raw(i as u64) != v)
        {
            return Ok(false);
        }
        if res.memo_base != HELPER_MEMO_BASE && res.memo_base != self.b.memo_len() {
            return Ok(false);
        }
        sp.taken_events = res.events.len() as u64 + res.dropped;
        self.b.append_memo(res.memo_n, &res.memo_strings);
        self.b.add_seen_event_keys(res.seen);
        let r = self.b.extend_events(l, res.events, res.dropped);
        self.build(r)?;
        self.inp.skip_to(res.stop)?;
        Ok(true)
    }

    /// The helper's loop: only batches of trace entries (`(` entries `e`) into `list`,
    /// each entry through the fast path. Stops at anything else; returns the offset
    /// after the last complete batch and the memo length there.
    fn run_follower(
        &mut self,
        list: PV,
        start: &AtomicU64,
        cancel: &AtomicBool,
    ) -> (u64, u64, u64) {
        let first = self.inp.offset();
        let mut commit = (first, self.b.memo_len());
        let mut posted = false;
        while let Ok(op) = self.inp.byte() {
            match op {
                b'(' => self.marks.push(self.stack.len()),
                0x95 => {
                    if self.inp.array::<8>().is_err() {
                        break;
                    }
                }
                b'}' => match self.try_trace_entry() {
                    Some(ev) => {
                        if !posted {
                            // The candidate decodes: tell the main reader where we start.
                            posted = true;
                            start.store(first, Ordering::Release);
                        }
                        self.stack.push(ev)
                    }
                    None => break,
                },
                b'e' => {
                    let Some(m) = self.marks.pop() else { break };
                    if m != 1 || self.stack[0] != list {
                        break;
                    }
                    if self.b.list_extend(list, &self.stack[1..]).is_err() {
                        break;
                    }
                    self.stack.truncate(1);
                    commit = (self.inp.offset(), self.b.memo_len());
                    if cancel.load(Ordering::Acquire) {
                        break;
                    }
                }
                _ => break,
            }
        }
        let base = self.b.memo_calibration().unwrap_or(HELPER_MEMO_BASE);
        (commit.0, commit.1.max(base), base)
    }

    fn run(&mut self) -> PResult<PV> {
        loop {
            self.op_offset = self.inp.offset();
            let op = self.inp.byte()?;
            // The opcodes that make up most of a snapshot (memo references to keys,
            // strings and stacks) are tested first: conditional branches predict
            // better than the one indirect jump of the match.
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
                    if self.fast
                        && let Some(ev) = self.try_trace_entry()
                    {
                        self.stack.push(ev);
                        continue;
                    }
                    let d = self.b.new_dict();
                    self.stack.push(d);
                }
                b']' => {
                    let l = self.b.new_list();
                    self.stack.push(l);
                }
                0x8f => {
                    // EMPTY_SET: kept as a list.
                    let l = self.b.new_list();
                    self.stack.push(l);
                }
                b')' => {
                    let t = self.b.new_tuple(Vec::new());
                    self.stack.push(t);
                }
                b'(' => {
                    if self.split.is_some() && self.at_split_start() && self.take_over()? {
                        continue;
                    }
                    self.marks.push(self.stack.len())
                }
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
                    if self.split.is_some() {
                        self.split_after_appends(l);
                    }
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
                    let t = self.b.new_tuple(items);
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
                    let t = self.b.new_tuple(items);
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
                    let line = self.inp.line()?;
                    let v = match line {
                        b"00" => Some(Value::Bool(false)),
                        b"01" => Some(Value::Bool(true)),
                        l => text_int(l),
                    };
                    match v {
                        Some(v) => self.push_val(v),
                        None => return self.fail("INT with a malformed argument"),
                    }
                }
                b'L' => {
                    let v = text_int(self.inp.line()?);
                    match v {
                        Some(v) => self.push_val(v),
                        None => return self.fail("LONG with a malformed argument"),
                    }
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.inp.array()?);
                    self.push_val(Value::Float(v));
                }
                b'F' => {
                    let line = self.inp.line()?;
                    let v = std::str::from_utf8(line)
                        .ok()
                        .and_then(|s| s.trim().parse::<f64>().ok());
                    match v {
                        Some(v) => self.push_val(Value::Float(v)),
                        None => return self.fail("FLOAT with a malformed argument"),
                    }
                }
                // --- strings and bytes ---
                0x8c => {
                    let n = self.inp.byte()? as u64;
                    let s = self.inp.bytes(n)?;
                    let s = String::from_utf8_lossy(s).into_owned();
                    self.push_str(&s);
                }
                b'X' => {
                    let n = u32::from_le_bytes(self.inp.array()?) as u64;
                    let s = self.inp.bytes(n)?;
                    let s = String::from_utf8_lossy(s).into_owned();
                    self.push_str(&s);
                }
                0x8d => {
                    let n = u64::from_le_bytes(self.inp.array()?);
                    let s = self.inp.bytes(n)?;
                    let s = String::from_utf8_lossy(s).into_owned();
                    self.push_str(&s);
                }
                b'V' => {
                    let line = self.inp.line()?;
                    match raw_unicode_escape(line) {
                        Some(s) => self.push_str(&s),
                        None => return self.fail("UNICODE with a malformed argument"),
                    }
                }
                b'S' => {
                    let line = self.inp.line()?;
                    match unquote(line) {
                        Some(s) => self.push_str(&s),
                        None => return self.fail("STRING with a malformed argument"),
                    }
                }
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
                b'B' => {
                    let n = u32::from_le_bytes(self.inp.array()?) as u64;
                    self.inp.bytes(n)?;
                    self.push_val(Value::Bytes);
                }
                b'C' => {
                    let n = self.inp.byte()? as u64;
                    self.inp.bytes(n)?;
                    self.push_val(Value::Bytes);
                }
                0x8e | 0x96 => {
                    let n = u64::from_le_bytes(self.inp.array()?);
                    self.inp.bytes(n)?;
                    self.push_val(Value::Bytes);
                }
                // --- memo ---
                0x94 => {
                    let v = self.top()?;
                    let idx = self.b.memo_len();
                    let r = self.b.memo_put(idx, v);
                    self.build(r)?;
                }
                b'q' => {
                    let idx = self.inp.byte()? as u64;
                    let v = self.top()?;
                    let r = self.b.memo_put(idx, v);
                    self.build(r)?;
                }
                b'r' => {
                    let idx = u32::from_le_bytes(self.inp.array()?) as u64;
                    let v = self.top()?;
                    let r = self.b.memo_put(idx, v);
                    self.build(r)?;
                }
                b'p' => {
                    let idx = match text_int(self.inp.line()?) {
                        Some(Value::Int(i)) if i >= 0 => i as u64,
                        _ => return self.fail("PUT with a malformed index"),
                    };
                    let v = self.top()?;
                    let r = self.b.memo_put(idx, v);
                    self.build(r)?;
                }
                b'h' => {
                    let idx = self.inp.byte()? as u64;
                    let r = self.b.memo_get(idx);
                    let v = self.build(r)?;
                    self.stack.push(v);
                }
                b'j' => {
                    let idx = u32::from_le_bytes(self.inp.array()?) as u64;
                    let r = self.b.memo_get(idx);
                    let v = self.build(r)?;
                    self.stack.push(v);
                }
                b'g' => {
                    let idx = match text_int(self.inp.line()?) {
                        Some(Value::Int(i)) if i >= 0 => i as u64,
                        _ => return self.fail("GET with a malformed index"),
                    };
                    let r = self.b.memo_get(idx);
                    let v = self.build(r)?;
                    self.stack.push(v);
                }
                // --- stack and framing ---
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    let m = self.pop_mark()?;
                    self.stack.truncate(m);
                }
                b'2' => {
                    let v = self.top()?;
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

/// A memo store right after a value (MEMOIZE, or PUT at the next index): returns the
/// bytes it took, or None for anything else the fast path does not handle.
#[inline(always)]
fn fast_memo(buf: &[u8], p: usize, b: &mut Builder) -> Option<(usize, Option<u64>)> {
    let next = b.memo_len();
    let (i, used) = match *buf.get(p)? {
        0x94 => return Some((1, Some(next))),
        b'q' => (*buf.get(p + 1)? as u64, 2),
        b'r' => (
            u32::from_le_bytes(buf.get(p + 1..p + 5)?.try_into().ok()?) as u64,
            5,
        ),
        _ => return Some((0, None)),
    };
    (i == next || b.calibrate_memo(i)).then_some((used, Some(i)))
}

/// One value of a trace entry at `buf[p]`: (value, bytes used).
#[inline(always)]
fn fast_value(
    buf: &[u8],
    p: usize,
    b: &mut Builder,
    undo: &mut [u64; 8],
    n_undo: &mut usize,
) -> Option<(PV, usize)> {
    let mut op = *buf.get(p)?;
    // Memo references first: most keys and many values are.
    if op == b'h' {
        let v = b.memo_raw(*buf.get(p + 1)? as u64);
        return (!v.is_missing()).then_some((v, 2));
    }
    if op == b'j' {
        let idx = u32::from_le_bytes(buf.get(p + 1..p + 5)?.try_into().ok()?) as u64;
        let v = b.memo_raw(idx);
        return (!v.is_missing()).then_some((v, 5));
    }
    // FRAME (protocol 4 framing) may sit between any two opcodes.
    let start = p;
    let mut p = p;
    if op == 0x95 {
        p = skip_frames(buf, p)?;
        op = *buf.get(p)?;
    }
    let skipped = p - start;
    let (v, used) = match op {
        b'h' => (b.memo_raw(*buf.get(p + 1)? as u64), 2),
        b'j' => (
            b.memo_raw(u32::from_le_bytes(buf.get(p + 1..p + 5)?.try_into().ok()?) as u64),
            5,
        ),
        b'K' => (b.int_pv(*buf.get(p + 1)? as i64), 2),
        b'M' => (
            b.int_pv(u16::from_le_bytes(buf.get(p + 1..p + 3)?.try_into().ok()?) as i64),
            3,
        ),
        b'J' => (
            b.int_pv(i32::from_le_bytes(buf.get(p + 1..p + 5)?.try_into().ok()?) as i64),
            5,
        ),
        0x8a => {
            let n = *buf.get(p + 1)? as usize;
            if n > 8 {
                return None;
            }
            let v = if n == 0 {
                0
            } else {
                let mut a = [0u8; 8];
                a.copy_from_slice(buf.get(p + 2..p + 10)?);
                let shift = 64 - 8 * n as u32;
                (i64::from_le_bytes(a) << shift) >> shift
            };
            (b.int_pv(v), 2 + n)
        }
        0x88 => (PV::bool(true), 1),
        0x89 => (PV::bool(false), 1),
        b'N' => (PV::NONE, 1),
        0x8c => {
            let n = *buf.get(p + 1)? as usize;
            let bytes = buf.get(p + 2..p + 2 + n)?;
            let v = match std::str::from_utf8(bytes) {
                Ok(s) => b.str(s),
                Err(_) => b.str(&String::from_utf8_lossy(bytes)),
            };
            let (m, idx) = fast_memo(buf, p + 2 + n, b)?;
            if let Some(idx) = idx {
                if *n_undo == undo.len() {
                    return None;
                }
                b.memo_put(idx, v).ok()?;
                undo[*n_undo] = idx;
                *n_undo += 1;
            }
            (v, 2 + n + m)
        }
        _ => return None,
    };
    if v.is_missing() {
        return None;
    }
    Some((v, skipped + used))
}

/// Past any FRAME opcodes at `p`.
#[inline(always)]
fn skip_frames(buf: &[u8], mut p: usize) -> Option<usize> {
    while *buf.get(p)? == 0x95 {
        p += 9;
    }
    Some(p)
}

/// A whole trace-entry dict after its EMPTY_DICT: (event, bytes used) or None.
fn fast_entry(
    buf: &[u8],
    b: &mut Builder,
    undo: &mut [u64; 8],
    n_undo: &mut usize,
) -> Option<(super::model::Event, usize)> {
    let (m, idx) = fast_memo(buf, 0, b)?;
    let mut p = skip_frames(buf, m)?;
    if *buf.get(p)? != b'(' {
        return None;
    }
    p += 1;
    if let Some(idx) = idx {
        // The dict itself is folded: its memo entry is released (before any string
        // inside it takes the next index).
        b.memo_release(idx);
        undo[*n_undo] = idx;
        *n_undo += 1;
    }
    let mut ev = Builder::fresh_event();
    let mut have_action = false;
    let mut first = true;
    loop {
        p = skip_frames(buf, p)?;
        if *buf.get(p)? == b'u' {
            p += 1;
            break;
        }
        let (k, used) = fast_value(buf, p, b, undo, n_undo)?;
        // The first key must be `action`, as torch writes it.
        if first && k != PV::ACTION_KEY {
            return None;
        }
        first = false;
        p += used;
        let (v, used) = fast_value(buf, p, b, undo, n_undo)?;
        p += used;
        have_action |= b.event_field(&mut ev, k, v).ok()?;
    }
    have_action.then_some((ev, p))
}

/// Read a snapshot pickle from `r` (`total` bytes long, 0 if unknown).
pub fn read_pickle<R: Source>(
    r: R,
    total: u64,
    max_events: usize,
) -> Result<Snapshot, PickleError> {
    read_pickle_with(r, total, max_events, true)
}

/// [`read_pickle`], with the trace-entry fast path on or off (the tests check that
/// both read every snapshot the same).
pub fn read_pickle_with<R: Source>(
    r: R,
    total: u64,
    max_events: usize,
    fast: bool,
) -> Result<Snapshot, PickleError> {
    read_with(r, total, max_events, fast, None)
}

fn read_with<R: Source>(
    r: R,
    total: u64,
    max_events: usize,
    fast: bool,
    split: Option<&mut SplitMain>,
) -> Result<Snapshot, PickleError> {
    let mut b = Builder::new(max_events);
    let mut vm = Vm {
        inp: Input::new(r, total),
        b: &mut b,
        stack: Vec::new(),
        marks: Vec::new(),
        op_offset: 0,
        protocol: None,
        fast,
        split,
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
        msg: e.0,
    })
}

// --- split reads: a helper thread reads the second half of a long trace ---

/// The stable memo entries the main reader publishes to the helper, and where the
/// helper should start looking for a batch of trace entries.
pub struct Publication {
    entries: Vec<(u32, PV, Option<String>)>,
    target: u64,
}

/// What the helper read: the trace entries of whole batches from `start` (a MARK)
/// to `stop` (after an APPENDS), and the memo entries those bytes made.
pub struct HelperResult {
    start: u64,
    stop: u64,
    events: std::collections::VecDeque<Event>,
    dropped: u64,
    /// The index of the helper's first memo entry: the real one when the file's PUTs
    /// told it, else HELPER_MEMO_BASE (whatever the main reader's length is).
    memo_base: u64,
    memo_n: u64,
    memo_strings: Vec<(u64, String)>,
    seen: (bool, bool, bool),
}

/// The main reader's side of a split read.
pub struct SplitMain {
    publish_after: u64,
    target: u64,
    tx: Option<Sender<Publication>>,
    rx: Receiver<HelperResult>,
    start: Arc<AtomicU64>,
    cancel: Arc<AtomicBool>,
    published: Vec<(u32, PV)>,
    done: bool,
    waited: bool,
    taken_events: u64,
}

/// `start` before the helper has decided, and after it gave up.
const NOT_YET: u64 = u64::MAX;
const GAVE_UP: u64 = u64::MAX - 1;

/// Tells the main reader the helper gave up unless it posted a start.
struct GiveUpOnDrop<'a>(&'a AtomicU64);

impl Drop for GiveUpOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self
            .0
            .compare_exchange(NOT_YET, GAVE_UP, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// Where a helper's own memo entries start: far above any index a file can use
/// before the helper's part, so references to them are never resolved by mistake.
const HELPER_MEMO_BASE: u64 = 1 << 31;

/// The helper thread: wait for the publication, find a batch boundary after the
/// target, read batches of trace entries with the fast path, send what it read.
fn helper(
    path: &Path,
    total: u64,
    max_events: usize,
    rx: Receiver<Publication>,
    tx: Sender<HelperResult>,
    start: &AtomicU64,
    cancel: &AtomicBool,
) {
    let _give_up = GiveUpOnDrop(start);
    let Ok(publication) = rx.recv() else { return };
    let Ok(mut f) = std::fs::File::open(path) else {
        return;
    };
    let target = publication.target;
    if f.seek(SeekFrom::Start(target)).is_err() {
        return;
    }
    let mut window = vec![0u8; 1 << 20];
    let mut n = 0;
    while n < window.len() {
        match f.read(&mut window[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    // Candidates: APPENDS, MARK, EMPTY_DICT: a new batch of dicts after a batch.
    let candidates = window[..n]
        .windows(3)
        .enumerate()
        .filter(|(_, w)| w == b"e(}")
        .map(|(i, _)| target + i as u64 + 1)
        .take(32);
    for c in candidates {
        if cancel.load(Ordering::Acquire) {
            return;
        }
        let mut b = Builder::new(max_events);
        for (idx, v, text) in &publication.entries {
            b.seed_memo(*idx, *v, text.as_deref());
        }
        b.set_memo_len(HELPER_MEMO_BASE);
        let list = b.new_list();
        let Ok(mut file) = std::fs::File::open(path) else {
            return;
        };
        if file.seek(SeekFrom::Start(c)).is_err() {
            return;
        }
        let mut vm = Vm {
            inp: Input::at(file, total, c),
            b: &mut b,
            stack: vec![list],
            marks: Vec::new(),
            op_offset: c,
            protocol: None,
            fast: true,
            split: None,
        };
        let (stop, memo_len, memo_base) = vm.run_follower(list, start, cancel);
        if stop > c {
            let memo_n = memo_len - memo_base;
            let memo_strings = b.memo_strings_from(memo_base, memo_n);
            let (events, dropped) = b.take_events(list);
            let _ = tx.send(HelperResult {
                start: c,
                stop,
                events,
                dropped,
                memo_base,
                memo_n,
                memo_strings,
                seen: b.seen_event_keys(),
            });
            return;
        }
    }
}

/// Read a large snapshot file with a helper thread that reads the second half of
/// its trace (from about `at` of the file) at the same time. The main reader takes
/// the helper's part only when it reaches the helper's start in the state the helper
/// assumed; otherwise it reads everything itself, so the result is always what
/// [`read_pickle`] gives. Returns the snapshot and how many trace entries came from
/// the helper.
pub fn read_pickle_split(
    path: &Path,
    total: u64,
    max_events: usize,
    at: f64,
) -> Result<(Snapshot, u64), PickleError> {
    let file = std::fs::File::open(path).map_err(|e| PickleError {
        offset: 0,
        msg: format!("cannot open: {e}"),
    })?;
    let (pub_tx, pub_rx) = channel();
    let (res_tx, res_rx) = channel();
    let start = Arc::new(AtomicU64::new(NOT_YET));
    let cancel = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        let (start2, cancel2) = (start.clone(), cancel.clone());
        s.spawn(move || helper(path, total, max_events, pub_rx, res_tx, &start2, &cancel2));
        let mut sp = SplitMain {
            publish_after: total / 50,
            target: (total as f64 * at) as u64,
            tx: Some(pub_tx),
            rx: res_rx,
            start,
            cancel: cancel.clone(),
            published: Vec::new(),
            done: false,
            waited: false,
            taken_events: 0,
        };
        let r = read_with(file, total, max_events, true, Some(&mut sp));
        cancel.store(true, Ordering::Release);
        let taken = sp.taken_events;
        drop(sp);
        r.map(|mut snap| {
            snap.read_ahead_events = taken;
            (snap, taken)
        })
    })
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
}
