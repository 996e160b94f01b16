//! The reader's input: a bounded buffer over any [`Source`], keeping the absolute
//! offset (for error messages) and the file length (to refuse lengths that run past
//! the end before allocating anything).

use std::io::{Read, Seek, SeekFrom};

use super::PickleError;
use super::value::{Value, int_from_le};

pub const BUF: usize = 1 << 20;

type PResult<T> = Result<T, PickleError>;

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
pub struct Input<R: Source> {
    pub r: R,
    pub buf: Vec<u8>,
    pub pos: usize,
    pub end: usize,
    pub base: u64,
    pub total: u64,
    scratch: Vec<u8>,
}

impl<R: Source> Input<R> {
    pub fn new(r: R, total: u64) -> Self {
        Self::at(r, total, 0)
    }

    /// An input whose reader is positioned at byte `base` of the file.
    pub fn at(r: R, total: u64, base: u64) -> Self {
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
    pub fn skip_to(&mut self, target: u64) -> PResult<()> {
        let end = self.base + self.end as u64;
        if target <= end {
            self.pos = (target - self.base) as usize;
            return Ok(());
        }
        self.r.skip_to(end, target).map_err(|e| PickleError {
            offset: target,
            msg: format!("read failed: {e}"),
            io: Some(e.kind()),
            retain: false,
        })?;
        self.base = target;
        self.pos = 0;
        self.end = 0;
        Ok(())
    }

    #[inline(always)]
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub fn truncated(&self, need: u64) -> PickleError {
        PickleError {
            offset: self.offset(),
            msg: format!(
                "truncated: needed {need} more byte(s) but the file ends at byte {}",
                self.total.max(self.base + self.end as u64)
            ),
            io: None,
            retain: false,
        }
    }

    /// Refill so that at least `n` (<= BUF) bytes are buffered; false at EOF.
    pub fn fill(&mut self, n: usize) -> PResult<bool> {
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
                        io: Some(e.kind()),
                        retain: false,
                    });
                }
            }
        }
        Ok(true)
    }

    #[inline(always)]
    pub fn byte(&mut self) -> PResult<u8> {
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
    pub fn array<const N: usize>(&mut self) -> PResult<[u8; N]> {
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
    pub fn long_le(&mut self, n: usize) -> PResult<i64> {
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
    pub fn bytes(&mut self, n: u64) -> PResult<&[u8]> {
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
                io: None,
                retain: false,
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
                        io: Some(e.kind()),
                        retain: false,
                    });
                }
            }
        }
        Ok(&self.scratch[..n])
    }

    /// A protocol-0 text argument, up to and excluding the newline.
    pub fn line(&mut self) -> PResult<&[u8]> {
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
                    io: None,
                    retain: false,
                });
            }
            let want = self.end - self.pos + 1;
            if !self.fill(want)? {
                return Err(self.truncated(1));
            }
        }
    }
}
