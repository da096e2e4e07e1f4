//! Streaming reader: split decompressed bytes into lines, parse, attach file and line.

use std::fs::File;
use std::io::{self, Read};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use crate::record::Record;
use crate::TraceError;

/// Longest line accepted; longer input is an error rather than unbounded buffering.
pub const MAX_LINE: usize = 64 * 1024;
/// First buffer size (small inputs stay cheap) and the size it grows to on the second
/// refill (large files read in big chunks). Both exceed `MAX_LINE`, so a full buffer
/// always holds a complete line or proves the line too long.
const BUF_START: usize = 128 * 1024;
const BUF: usize = 1 << 20;

/// Splits a byte stream into lines without copying them.
///
/// A lending reader (each line borrows the internal buffer) because an owned
/// `Vec` per line would cost more than parsing it.
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    line_no: u64,
    refills: u32,
}

impl<R: Read> LineReader<R> {
    /// Wraps a reader.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            buf: vec![0; BUF_START],
            start: 0,
            end: 0,
            eof: false,
            line_no: 0,
            refills: 0,
        }
    }

    /// Lines of bytes already in memory, read in place: `bytes` becomes the buffer (no
    /// copy into a buffer of its own), every line is complete from the start.
    /// [`Self::into_vec`] gives the bytes back for reuse.
    pub fn from_vec(bytes: Vec<u8>) -> LineReader<io::Empty> {
        LineReader {
            inner: io::empty(),
            end: bytes.len(),
            buf: bytes,
            start: 0,
            eof: true,
            line_no: 0,
            refills: 2,
        }
    }

    /// The buffer (for a reader made by [`Self::from_vec`]: the bytes it was given).
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }

    /// 1-based number of the line last returned.
    pub fn line_no(&self) -> u64 {
        self.line_no
    }

    /// The buffered bytes not yet returned as lines (the next line starts here, possibly
    /// incomplete).
    #[inline]
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Marks the first `n` buffered bytes, one whole line with its `\n`, as read (a
    /// caller that found the line's end itself, see [`Record::parse_first_line_into`]).
    #[inline]
    pub fn consume_line(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.start);
        self.start = (self.start + n).min(self.end);
        self.line_no += 1;
    }

    /// Next line without its `\n` (and without a trailing `\r`), `None` at end of input.
    ///
    /// Errors: I/O errors, or [`io::ErrorKind::InvalidData`] for a line over [`MAX_LINE`].
    #[inline]
    pub fn next_line(&mut self) -> io::Result<Option<&[u8]>> {
        loop {
            if let Some(p) = memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                let s = self.start;
                self.start += p + 1;
                self.line_no += 1;
                let mut line = &self.buf[s..s + p];
                if let [rest @ .., b'\r'] = line {
                    line = rest;
                }
                return Ok(Some(line));
            }
            if self.end - self.start > MAX_LINE {
                self.line_no += 1;
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("line longer than {MAX_LINE} bytes"),
                ));
            }
            if self.eof {
                if self.start == self.end {
                    return Ok(None);
                }
                let s = self.start;
                self.start = self.end;
                self.line_no += 1;
                return Ok(Some(&self.buf[s..self.end]));
            }
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            self.refills += 1;
            if self.refills == 2 && self.buf.len() < BUF {
                self.buf.resize(BUF, 0);
            }
            loop {
                match self.inner.read(&mut self.buf[self.end..]) {
                    Ok(0) => {
                        self.eof = true;
                        break;
                    }
                    Ok(n) => {
                        self.end += n;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
        }
    }
}

/// What to do with a malformed line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Stop at the first malformed line with an error naming file and line.
    #[default]
    Fail,
    /// Skip malformed lines and count them (see [`TraceReader::skipped`]).
    Skip,
}

/// Reads typed rows of one table from one file (or any reader).
pub struct TraceReader<R, T> {
    lines: LineReader<R>,
    file: PathBuf,
    on_error: OnError,
    skipped: u64,
    first_skip: Option<TraceError>,
    rows: u64,
    filtered: u64,
    failed: bool,
    job_filter: Option<JobFilter>,
    _t: PhantomData<T>,
}

/// Keeps the rows of the jobs for which it returns true (see [`TraceReader::with_job_filter`]).
pub type JobFilter = Box<dyn Fn(u64) -> bool + Send>;

/// The job ID (third column in both tables), read without parsing the rest of the line;
/// `None` when it is not there or not a number (the full parser then reports the line).
#[inline]
fn job_id_of(line: &[u8]) -> Option<u64> {
    let a = memchr::memchr(b',', line)?;
    let b = a + 1 + memchr::memchr(b',', &line[a + 1..])?;
    let rest = &line[b + 1..];
    let (v, n) = crate::num::parse_u64_prefix(rest).ok()?;
    (n > 0 && rest.get(n) == Some(&b',')).then_some(v)
}

/// Opens a file, decompressing it when its name ends in `.gz` (streaming, flate2 with
/// the zlib-rs backend: the fastest of those measured in docs/benchmarks-giant.md).
pub fn open_maybe_gz(path: &Path) -> Result<Box<dyn Read + Send>, TraceError> {
    let file = File::open(path).map_err(|err| TraceError::Io {
        file: path.to_path_buf(),
        line: None,
        err,
    })?;
    let file = io::BufReader::with_capacity(256 * 1024, file);
    if path.extension().is_some_and(|e| e == "gz") {
        Ok(Box::new(flate2::bufread::MultiGzDecoder::new(file)))
    } else {
        Ok(Box::new(file))
    }
}

impl<T: Record> TraceReader<Box<dyn Read + Send>, T> {
    /// Opens a trace file (`.gz` or plain).
    pub fn open(path: &Path, on_error: OnError) -> Result<Self, TraceError> {
        Ok(Self::new(open_maybe_gz(path)?, path, on_error))
    }
}

impl<T: Record> TraceReader<io::Empty, T> {
    /// Reads rows from bytes already in memory, in place (no copy into a buffer of the
    /// reader's own, unlike `new(&bytes[..])`, which reads the same rows); `into_vec` gives
    /// the bytes back. Lines that end in a newline are not limited to [`MAX_LINE`] here
    /// (all are in memory); a last line without one is, as when streaming.
    pub fn from_vec(bytes: Vec<u8>, file: impl Into<PathBuf>, on_error: OnError) -> Self {
        Self::with_lines(LineReader::<io::Empty>::from_vec(bytes), file, on_error)
    }

    /// The bytes given to [`Self::from_vec`].
    pub fn into_vec(self) -> Vec<u8> {
        self.lines.into_vec()
    }
}

impl<R: Read, T: Record> TraceReader<R, T> {
    /// Reads from `inner`; `file` is only used in error messages.
    pub fn new(inner: R, file: impl Into<PathBuf>, on_error: OnError) -> Self {
        Self::with_lines(LineReader::new(inner), file, on_error)
    }

    fn with_lines(lines: LineReader<R>, file: impl Into<PathBuf>, on_error: OnError) -> Self {
        Self {
            lines,
            file: file.into(),
            on_error,
            skipped: 0,
            first_skip: None,
            rows: 0,
            filtered: 0,
            failed: false,
            job_filter: None,
            _t: PhantomData,
        }
    }

    /// Skips rows of jobs the filter rejects after reading only their job ID (a consumer
    /// that samples jobs, like the simulator, then parses only the rows it uses). Such
    /// rows are checked for a numeric job ID only; every other row is fully validated.
    pub fn with_job_filter(mut self, filter: JobFilter) -> Self {
        self.job_filter = Some(filter);
        self
    }

    /// Rows skipped by the job filter.
    pub fn filtered(&self) -> u64 {
        self.filtered
    }

    /// Malformed lines skipped so far (only in [`OnError::Skip`] mode).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The first skipped line's error, to show the user an example.
    pub fn first_skip(&self) -> Option<&TraceError> {
        self.first_skip.as_ref()
    }

    /// Rows returned so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Lines read so far (rows, skipped and blank).
    pub fn lines(&self) -> u64 {
        self.lines.line_no()
    }

    /// Next row; `Ok(None)` at end of file. After an error in `Fail` mode, returns `Ok(None)`.
    #[inline]
    pub fn next_row(&mut self) -> Result<Option<T>, TraceError> {
        let mut slot = None;
        self.next_into(&mut slot)?;
        Ok(slot)
    }

    /// [`Self::next_row`] written into `slot` (unspecified after an error).
    #[inline]
    pub fn next_into(&mut self, slot: &mut Option<T>) -> Result<(), TraceError> {
        // Fast path: parse straight from the buffer, the parser finds the line's end (no
        // separate newline search). Anything it does not take (an incomplete line at the
        // buffer's end, a blank or malformed line, `\r\n`) goes the checked way.
        if !self.failed && self.job_filter.is_none() {
            if let Some(n) = T::parse_first_line_into(self.lines.buffered(), slot) {
                self.lines.consume_line(n);
                self.rows += 1;
                return Ok(());
            }
        }
        *slot = self.next_row_checked()?;
        Ok(())
    }

    /// One line at a time: newline search, then the line parser (fast path, else the
    /// checked parser, which reports errors).
    #[inline(never)]
    fn next_row_checked(&mut self) -> Result<Option<T>, TraceError> {
        if self.failed {
            return Ok(None);
        }
        loop {
            let line = match self.lines.next_line() {
                Ok(Some(l)) => l,
                Ok(None) => return Ok(None),
                Err(err) => {
                    self.failed = true;
                    return Err(TraceError::Io {
                        file: self.file.clone(),
                        line: Some(self.lines.line_no()),
                        err,
                    });
                }
            };
            if line.is_empty() {
                continue;
            }
            if let Some(keep) = &self.job_filter {
                if let Some(job) = job_id_of(line) {
                    if !keep(job) {
                        self.filtered += 1;
                        continue;
                    }
                }
            }
            match T::parse_line(line) {
                Ok(r) => {
                    self.rows += 1;
                    return Ok(Some(r));
                }
                Err(field) => {
                    let err = TraceError::Parse {
                        file: self.file.clone(),
                        line: self.lines.line_no(),
                        table: T::TABLE,
                        field,
                    };
                    match self.on_error {
                        OnError::Fail => {
                            self.failed = true;
                            return Err(err);
                        }
                        OnError::Skip => {
                            self.skipped += 1;
                            if self.first_skip.is_none() {
                                self.first_skip = Some(err);
                            }
                        }
                    }
                }
            }
        }
    }
}

impl<R: Read, T: Record> Iterator for TraceReader<R, T> {
    type Item = Result<T, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_row().transpose()
    }
}

/// Reads every row of a table from several files in order (the parts of one table).
pub fn read_all<T: Record>(paths: &[PathBuf], on_error: OnError) -> Result<ReadAll<T>, TraceError> {
    let mut out = ReadAll {
        rows: Vec::new(),
        skipped: 0,
        first_skip: None,
    };
    for p in paths {
        let mut r = TraceReader::<_, T>::open(p, on_error)?;
        while let Some(row) = r.next_row()? {
            out.rows.push(row);
        }
        out.skipped += r.skipped;
        if out.first_skip.is_none() {
            out.first_skip = r.first_skip.take();
        }
    }
    Ok(out)
}

/// Rows of a table read into memory, with the skip count.
pub struct ReadAll<T> {
    /// The rows in file order.
    pub rows: Vec<T>,
    /// Malformed lines skipped.
    pub skipped: u64,
    /// The first skipped line's error.
    pub first_skip: Option<TraceError>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{TaskEvent, TaskUsage};

    #[test]
    fn lines_split_across_refills_and_crlf() {
        let mut data = Vec::new();
        for i in 0..200_000u32 {
            data.extend_from_slice(format!("line{i}\r\n").as_bytes());
        }
        data.extend_from_slice(b"last");
        let mut r = LineReader::new(&data[..]);
        let mut n = 0u32;
        while let Some(l) = r.next_line().unwrap() {
            if n < 200_000 {
                assert_eq!(l, format!("line{n}").as_bytes());
            } else {
                assert_eq!(l, b"last");
            }
            n += 1;
        }
        assert_eq!(n, 200_001);
    }

    #[test]
    fn overlong_line_is_an_error() {
        let data = vec![b'1'; MAX_LINE * 3];
        let mut r = LineReader::new(&data[..]);
        assert!(r.next_line().is_err());
    }

    const GOOD: &str = "5611824441,,6251812952,1761,1306108,4,u=,0,2,0.02499,0.07959,0.0003862,1\n";

    #[test]
    fn error_names_file_and_line() {
        let data = format!("{GOOD}{GOOD}1,,2,3,4,1,u,0,0,0.5,bad,,\n{GOOD}");
        let mut r = TraceReader::<_, TaskEvent>::new(
            data.as_bytes(),
            "x/task_events-7.csv.gz",
            OnError::Fail,
        );
        assert!(r.next_row().unwrap().is_some());
        assert!(r.next_row().unwrap().is_some());
        let e = r.next_row().unwrap_err();
        assert_eq!(
            e.to_string(),
            "x/task_events-7.csv.gz:3: task_events column 11: not a valid number"
        );
        assert!(r.next_row().unwrap().is_none());
    }

    #[test]
    fn job_filter_skips_other_jobs_but_still_reports_bad_lines() {
        let other = "5611824441,,7,1761,1306108,4,u=,0,2,0.02499,0.07959,0.0003862,1\n";
        let data = format!("{GOOD}{other}{other}x,,,\n{GOOD}");
        let mut r = TraceReader::<_, TaskEvent>::new(data.as_bytes(), "f", OnError::Fail)
            .with_job_filter(Box::new(|job| job != 7));
        assert!(r.next_row().unwrap().is_some());
        let e = r.next_row().unwrap_err();
        assert!(e.to_string().starts_with("f:4: "), "{e}");
        assert_eq!(r.filtered(), 2);
        assert_eq!(job_id_of(b"1,2,33,4"), Some(33));
        assert_eq!(job_id_of(b"1,2,33"), None);
        assert_eq!(job_id_of(b"1,2,x,4"), None);
    }

    #[test]
    fn fast_and_checked_paths_give_the_same_rows_across_refills() {
        // Lines of varied length (so that lines straddle every refill), CRLF, blank lines:
        // every row equals the line parser's, line numbers stay right.
        let mut data = String::new();
        let mut want = Vec::new();
        for i in 0..40_000u64 {
            let line = format!(
                "{},,{},{},{},4,{},0,2,0.0{},0.07959,9.5e-06,{}",
                i * 7919,
                i % 1000,
                i % 97,
                i % 13,
                "u".repeat((i % 37) as usize + 1),
                i % 89,
                i % 2
            );
            want.push(TaskEvent::parse_line(line.as_bytes()).unwrap());
            data.push_str(&line);
            data.push_str(match i % 50 {
                0 => "\r\n",
                1 => "\n\n",
                _ => "\n",
            });
        }
        data.push_str("1,,2,3,4,1,u,0,0,,,,x\n");
        let mut r = TraceReader::<_, TaskEvent>::new(data.as_bytes(), "f", OnError::Fail);
        for w in &want {
            assert_eq!(r.next_row().unwrap().as_ref(), Some(w));
        }
        let e = r.next_row().unwrap_err();
        assert!(e.to_string().starts_with("f:40801: "), "{e}");
        assert_eq!(r.rows(), 40_000);
    }

    #[test]
    fn in_place_reader_gives_the_same_rows_and_errors() {
        let data = format!("{GOOD}{GOOD}\r\n\n{GOOD}1,,2,3,4,1,u,0,0,0.5,bad,,\n{GOOD}");
        for mode in [OnError::Fail, OnError::Skip] {
            let a: Vec<String> = TraceReader::<_, TaskEvent>::new(data.as_bytes(), "f", mode)
                .map(|r| format!("{r:?}"))
                .collect();
            let mut r = TraceReader::<_, TaskEvent>::from_vec(data.clone().into_bytes(), "f", mode);
            let b: Vec<String> = r.by_ref().map(|r| format!("{r:?}")).collect();
            assert_eq!(a, b);
            assert_eq!(r.into_vec(), data.as_bytes());
        }
        let mut r =
            TraceReader::<_, TaskEvent>::from_vec(GOOD.trim_end().into(), "f", OnError::Fail);
        assert!(r.next_row().unwrap().is_some());
        assert!(r.next_row().unwrap().is_none());
        let mut r = TraceReader::<_, TaskEvent>::from_vec(Vec::new(), "f", OnError::Fail);
        assert!(r.next_row().unwrap().is_none());
    }

    #[test]
    fn skip_mode_counts() {
        let data = format!("{GOOD}garbage\n\n{GOOD}1,2\n{GOOD}");
        let mut r = TraceReader::<_, TaskEvent>::new(data.as_bytes(), "f", OnError::Skip);
        let rows: Vec<_> = r.by_ref().collect::<Result<_, _>>().unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(r.skipped(), 2);
        assert!(r.first_skip().unwrap().to_string().starts_with("f:2: "));
        let usage = TraceReader::<_, TaskUsage>::new(data.as_bytes(), "f", OnError::Skip);
        assert_eq!(usage.count(), 0);
    }
}
