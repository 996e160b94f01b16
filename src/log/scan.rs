//! Streaming a log for prints: the file is read in fixed chunks (gzip decoded on the way),
//! the anchor every print begins with is searched with memmem, and only the lines that
//! hold it are read against the declared formats. Whatever stands before the print on its
//! line (torchrun's `[default3]:`, `[rank14]:`, srun's `14: `, a timestamp) is left aside;
//! of a line rewritten with carriage returns only the part after the last one counts.
//! Memory stays bounded by the chunk and the longest line kept.

use std::collections::HashMap;
use std::io::Read as _;
use std::sync::Arc;

use memchr::memmem;
use serde::Serialize;

use super::decl::{Catalog, Ty};
use std::cell::RefCell;

use super::matcher::{Matcher, Read, Scratch};

const CHUNK: usize = 1 << 20;
/// Lines longer than this are not prints: they are counted and skipped.
pub const MAX_LINE: usize = 64 * 1024;

/// One value as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    /// A decimal number as printed, and how many decimals it had.
    Num(f64, u8),
    Text(Arc<str>),
}

impl Value {
    /// The value as it was printed.
    pub fn printed(&self) -> String {
        match self {
            Value::Int(i) => i.to_string(),
            Value::Num(v, d) => format!("{v:.*}", *d as usize),
            Value::Text(t) => t.to_string(),
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Num(v, _) => Some(*v),
            Value::Text(_) => None,
        }
    }
}

/// One print read from a log (its values borrowed from the scanner until the next one).
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// Index of the catalog entry it reads as.
    pub entry: u32,
    /// Index of the input file, and the line (1-based).
    pub file: u32,
    pub line: u64,
    pub values: &'a [Value],
}

/// At most this many distinct texts (stage names, dtypes, shapes) are shared.
const MAX_INTERNED: usize = 1 << 16;

/// A line worth showing (the first of a kind in a file).
#[derive(Debug, Clone, Serialize)]
pub struct Example {
    pub line: u64,
    pub text: String,
}

/// What reading one file found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FileStats {
    pub bytes: u64,
    pub lines: u64,
    pub prints: u64,
    /// Lines that begin a print and stop (or are interrupted) before it ends.
    pub cut: u64,
    /// Lines that begin like a print but read as none of the declared formats.
    pub unreadable: u64,
    pub overlong_lines: u64,
    pub gzip: bool,
    /// Many NUL bytes at the start: probably not a text log.
    pub binary: bool,
    /// The file did not end with a line end (its last line is not read as a print).
    pub no_final_newline: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_cut: Option<Example>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_unreadable: Option<Example>,
    /// Why reading stopped early (a read error, corrupt gzip data).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Reads lines of many files against one catalog.
pub struct Scanner<'c> {
    catalog: &'c Catalog,
    matcher: Matcher,
    finders: Vec<memmem::Finder<'static>>,
    scratch: RefCell<Scratch>,
    values: RefCell<Vec<Value>>,
    /// Texts seen before, shared instead of allocated again for every print.
    texts: RefCell<HashMap<Box<[u8]>, Arc<str>>>,
}

impl<'c> Scanner<'c> {
    pub fn new(catalog: &'c Catalog) -> Scanner<'c> {
        let matcher = Matcher::new(catalog);
        let finders = matcher
            .anchors
            .iter()
            .map(|a| memmem::Finder::new(a).into_owned())
            .collect();
        Scanner {
            catalog,
            matcher,
            finders,
            scratch: RefCell::new(Scratch::default()),
            values: RefCell::new(Vec::new()),
            texts: RefCell::new(HashMap::new()),
        }
    }

    /// The next place at or after `from` in `hay` where a print may begin.
    fn next_anchor(&self, hay: &[u8], from: usize) -> Option<usize> {
        self.finders
            .iter()
            .filter_map(|f| f.find(&hay[from..]).map(|i| from + i))
            .min()
    }

    /// Read all of `input`, giving each print to `sink`.
    pub fn scan(
        &self,
        file: u32,
        input: &mut dyn std::io::Read,
        sink: &mut dyn FnMut(Record<'_>),
    ) -> FileStats {
        let mut stats = FileStats::default();
        let mut head = [0u8; 2];
        let n = read_full(input, &mut head);
        let mut reader: Box<dyn std::io::Read> =
            Box::new(std::io::Cursor::new(head[..n].to_vec()).chain(input));
        if n == 2 && head == [0x1f, 0x8b] {
            stats.gzip = true;
            reader = Box::new(flate2::read::MultiGzDecoder::new(reader));
        }
        // One buffer for the whole file: the carried part of a line, then a chunk read
        // behind it (allocated and zeroed once).
        let mut store = vec![0u8; CHUNK + MAX_LINE + 1];
        let mut len = 0;
        // Skipping the rest of an over-long line.
        let mut skipping = false;
        let mut first = true;
        loop {
            let got = match reader.read(&mut store[len..len + CHUNK]) {
                Ok(g) => g,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    stats.error = Some(if stats.gzip {
                        format!("the gzip data is corrupt or ends early ({e}); read up to there")
                    } else {
                        format!("read failed: {e}; read up to there")
                    });
                    break;
                }
            };
            len += got;
            stats.bytes += got as u64;
            if first && len > 0 {
                let probe = &store[..len.min(65536)];
                stats.binary = probe.iter().filter(|&&b| b == 0).count() * 100 > probe.len();
                first = false;
            }
            if got == 0 {
                break;
            }
            let mut start = 0;
            if skipping {
                match memchr::memchr(b'\n', &store[..len]) {
                    Some(i) => {
                        start = i + 1;
                        stats.lines += 1;
                        skipping = false;
                    }
                    None => {
                        len = 0;
                        continue;
                    }
                }
            }
            let Some(last_nl) = memchr::memrchr(b'\n', &store[start..len]).map(|i| start + i)
            else {
                if len - start > MAX_LINE {
                    stats.overlong_lines += 1;
                    skipping = true;
                    len = 0;
                } else {
                    store.copy_within(start..len, 0);
                    len -= start;
                }
                continue;
            };
            self.lines(file, &store[start..=last_nl], &mut stats, sink);
            store.copy_within(last_nl + 1..len, 0);
            len -= last_nl + 1;
            if len > MAX_LINE {
                stats.overlong_lines += 1;
                skipping = true;
                len = 0;
            }
        }
        let buf = &store[..len];
        if !buf.is_empty() && !skipping {
            // The last line has no line end: a print there was cut off (a killed process
            // or a copy in progress), so it is counted, not read.
            stats.no_final_newline = true;
            let mut text = buf.to_vec();
            text.push(b'\n');
            let before = stats.prints;
            self.lines(file, &text, &mut stats, &mut |_| {});
            if stats.prints > before {
                stats.prints = before;
                stats.cut += 1;
                if stats.first_cut.is_none() {
                    stats.first_cut = Some(Example {
                        line: stats.lines,
                        text: shorten(buf),
                    });
                }
            }
            // `lines` counted the line; it was not a whole line of the file.
        }
        stats
    }

    /// Read a run of whole lines (`region` ends with a line end).
    fn lines(&self, file: u32, region: &[u8], stats: &mut FileStats, sink: &mut dyn FnMut(Record)) {
        let mut counted = 0;
        let mut cursor = 0;
        while let Some(hit) = self.next_anchor(region, cursor) {
            let line_start = memchr::memrchr(b'\n', &region[..hit]).map_or(0, |i| i + 1);
            let line_end = memchr::memchr(b'\n', &region[hit..]).map_or(region.len(), |i| hit + i);
            stats.lines += memchr::memchr_iter(b'\n', &region[counted..line_start]).count() as u64;
            counted = line_start;
            let number = stats.lines + 1;
            self.line(file, number, &region[line_start..line_end], stats, sink);
            cursor = (line_end + 1).min(region.len());
            if cursor >= region.len() {
                break;
            }
        }
        stats.lines += memchr::memchr_iter(b'\n', &region[counted..]).count() as u64;
    }

    fn line(
        &self,
        file: u32,
        number: u64,
        line: &[u8],
        stats: &mut FileStats,
        sink: &mut dyn FnMut(Record<'_>),
    ) {
        if line.len() > MAX_LINE {
            stats.overlong_lines += 1;
            return;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // What a terminal shows of a line rewritten with `\r`: the part after the last one.
        let visible = match memchr::memrchr(b'\r', line) {
            Some(i) => &line[i + 1..],
            None => line,
        };
        let mut at = self.next_anchor(visible, 0);
        while let Some(start) = at {
            let next = if start + 1 < visible.len() {
                self.next_anchor(visible, start + 1)
            } else {
                None
            };
            let text = &visible[start..next.unwrap_or(visible.len())];
            let mut scratch = self.scratch.borrow_mut();
            match self.matcher.read(text, &mut scratch) {
                Read::Print { entry } => match self.values(entry, text, &scratch.spans) {
                    true => {
                        stats.prints += 1;
                        sink(Record {
                            entry: entry as u32,
                            file,
                            line: number,
                            values: &self.values.borrow(),
                        });
                    }
                    false => note(
                        &mut stats.unreadable,
                        &mut stats.first_unreadable,
                        number,
                        text,
                    ),
                },
                Read::Cut => note(&mut stats.cut, &mut stats.first_cut, number, text),
                Read::Unreadable => note(
                    &mut stats.unreadable,
                    &mut stats.first_unreadable,
                    number,
                    text,
                ),
            }
            at = next;
        }
    }

    /// Parse the values of a line read as `entry` into the scanner's value buffer; false
    /// when one does not parse (an integer too large, say).
    fn values(&self, entry: usize, text: &[u8], spans: &[(usize, usize)]) -> bool {
        let e = &self.catalog.entries[entry];
        let mut values = self.values.borrow_mut();
        values.clear();
        for (f, &(a, b)) in e.fields.iter().zip(spans) {
            let raw = &text[a..b];
            let v = match f.ty {
                Ty::Int | Ty::Number | Ty::Bytes { .. } => parse_value(f.ty, raw),
                _ => Some(Value::Text(self.intern(raw))),
            };
            match v {
                Some(v) => values.push(v),
                None => return false,
            }
        }
        true
    }

    fn intern(&self, raw: &[u8]) -> Arc<str> {
        let mut texts = self.texts.borrow_mut();
        if let Some(t) = texts.get(raw) {
            return t.clone();
        }
        let t: Arc<str> = String::from_utf8_lossy(raw).into();
        if texts.len() < MAX_INTERNED {
            texts.insert(raw.into(), t.clone());
        }
        t
    }
}

fn note(count: &mut u64, first: &mut Option<Example>, line: u64, text: &[u8]) {
    *count += 1;
    if first.is_none() {
        *first = Some(Example {
            line,
            text: shorten(text),
        });
    }
}

fn shorten(text: &[u8]) -> String {
    let s = String::from_utf8_lossy(&text[..text.len().min(160)]).to_string();
    s.trim_end_matches(['\n', '\r']).to_string()
}

/// A value's text as its type reads it.
pub fn parse_value(ty: Ty, text: &[u8]) -> Option<Value> {
    let s = std::str::from_utf8(text).ok();
    match ty {
        Ty::Int => s?.trim_start_matches('+').parse().ok().map(Value::Int),
        Ty::Number | Ty::Bytes { .. } => {
            let s = s?;
            let v: f64 = s.trim_start_matches('+').parse().ok()?;
            let decimals = s
                .split_once('.')
                .map_or(0, |(_, f)| f.bytes().take_while(u8::is_ascii_digit).count());
            Some(Value::Num(v, decimals.min(255) as u8))
        }
        _ => Some(Value::Text(String::from_utf8_lossy(text).into())),
    }
}

fn read_full(input: &mut dyn std::io::Read, buf: &mut [u8]) -> usize {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::decl::{test_catalog, test_decl};

    fn catalog() -> Catalog {
        test_catalog(&[test_decl(
            "timeline",
            "[rank={rank}] Step {i}: {allocated} GiB",
            "Step {i}",
            &[("i", "int"), ("allocated", "GiB")],
        )])
    }

    fn scan(bytes: &[u8]) -> (FileStats, Vec<(u64, String)>) {
        let c = catalog();
        let s = Scanner::new(&c);
        let mut got = Vec::new();
        let stats = s.scan(0, &mut &bytes[..], &mut |r: Record<'_>| {
            got.push((
                r.line,
                r.values
                    .iter()
                    .map(Value::printed)
                    .collect::<Vec<_>>()
                    .join(" "),
            ))
        });
        (stats, got)
    }

    #[test]
    fn prefixes_carriage_returns_and_crlf() {
        let log = b"noise\n[default3]:[rank=3] Step 0: 0.08 GiB\n 50%|##  |\r100%|####|\r14: [rank=14] Step 1: 1.25 GiB\r\n2025-01-01 00:00:00 [rank=3] Step 2: 0.10 GiB\n[rank=3] Step 3: 0.11 GiB\r 99%\n";
        let (stats, got) = scan(log);
        assert_eq!(
            got,
            vec![
                (2, "3 0 0.08".to_string()),
                (3, "14 1 1.25".to_string()),
                (4, "3 2 0.10".to_string())
            ]
        );
        assert_eq!(stats.lines, 5);
        assert_eq!(stats.prints, 3);
        assert_eq!(
            stats.cut + stats.unreadable,
            0,
            "the overwritten print does not count"
        );
    }

    #[test]
    fn cut_prints_and_a_last_line_without_end_are_counted() {
        let log =
            b"[rank=3] Step 0: 0.0[default5]:x\n[rank=3] Step 1: 0.08 GiB\n[rank=3] Step 2: 0.1";
        let (stats, got) = scan(log);
        assert_eq!(got, vec![(2, "3 1 0.08".to_string())]);
        assert_eq!(stats.cut, 2);
        assert!(stats.no_final_newline);
        assert_eq!(stats.first_cut.as_ref().unwrap().line, 1);
    }

    #[test]
    fn any_bytes_read_without_a_panic() {
        // Pieces of prints, prefixes, carriage returns, NULs and invalid UTF-8, shuffled.
        let pieces: [&[u8]; 12] = [
            b"[rank=3] Step ",
            b"7",
            b": ",
            b"0.08 GiB",
            b"\n",
            b"\r",
            b"[default3]:",
            b"\xff\xfe",
            b"\0",
            b"[rank=",
            b"-",
            b"99999999999999999999",
        ];
        let c = catalog();
        let s = Scanner::new(&c);
        let mut seed = 0x9E3779B97F4A7C15u64;
        for _ in 0..300 {
            let mut bytes = Vec::new();
            for _ in 0..200 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                bytes.extend_from_slice(pieces[(seed % pieces.len() as u64) as usize]);
            }
            let mut n = 0;
            let stats = s.scan(0, &mut &bytes[..], &mut |r: Record<'_>| {
                assert_eq!(r.values.len(), 3);
                n += 1;
            });
            assert_eq!(stats.prints, n);
            assert!(stats.lines as usize <= bytes.iter().filter(|&&b| b == b'\n').count() + 1);
        }
    }

    #[test]
    fn gzip_overlong_and_binary() {
        use std::io::Write;
        let mut text = b"[rank=3] Step 0: 0.08 GiB\n[rank=3] ".to_vec();
        text.extend(vec![b'x'; MAX_LINE * 3]);
        text.extend(b"\n");
        text.extend(vec![b'y'; CHUNK * 2]);
        text.extend(b"\n[rank=3] Step 1: 0.09 GiB\n");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&text).unwrap();
        let gz = gz.finish().unwrap();
        let (stats, got) = scan(&gz);
        assert!(stats.gzip);
        assert_eq!(got.len(), 2);
        assert_eq!(stats.overlong_lines, 2);
        assert_eq!(stats.lines, 4);
        // Corrupt gzip: what came before the damage is read, and the damage is named.
        let (stats, _) = scan(&gz[..gz.len() / 2]);
        assert!(stats.error.unwrap().contains("gzip"));
        let (stats, got) = scan(&[0u8; 4096]);
        assert!(stats.binary && got.is_empty());
    }
}
