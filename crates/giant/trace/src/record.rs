//! Typed rows of the two tables and their line parsers.
//!
//! Parsers take one line without its newline and return a typed row or the
//! 0-based column that failed; [`crate::TraceReader`] adds file and line.

use crate::num::{parse_f32_prefix, parse_u64_prefix, NumError};
use crate::quick::Quick;

/// Timestamp meaning "after the end of the trace" (2^63 - 1 µs), per the schema.
pub const TIME_AFTER_TRACE: u64 = i64::MAX as u64;
/// Trace time at which the observation window starts (600 s, in µs).
pub const TRACE_START_US: u64 = 600_000_000;

/// Task event types of the 2011 schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EventType {
    /// The task became eligible for scheduling.
    Submit = 0,
    /// The task was placed on a machine.
    Schedule = 1,
    /// Descheduled because of a higher-priority task or machine failure.
    Evict = 2,
    /// Terminated by a failure.
    Fail = 3,
    /// Completed normally.
    Finish = 4,
    /// Cancelled by the user or a driver program.
    Kill = 5,
    /// Presumably terminated, but the record is missing.
    Lost = 6,
    /// Requirements updated while pending.
    UpdatePending = 7,
    /// Requirements updated while running.
    UpdateRunning = 8,
}

impl EventType {
    /// Maps the numeric code; `None` for codes outside 0..=8.
    pub fn from_code(code: u64) -> Option<Self> {
        Some(match code {
            0 => Self::Submit,
            1 => Self::Schedule,
            2 => Self::Evict,
            3 => Self::Fail,
            4 => Self::Finish,
            5 => Self::Kill,
            6 => Self::Lost,
            7 => Self::UpdatePending,
            8 => Self::UpdateRunning,
            _ => return None,
        })
    }

    /// True for the events that end a task's stay on its machine.
    pub fn ends_task(self) -> bool {
        matches!(
            self,
            Self::Evict | Self::Fail | Self::Finish | Self::Kill | Self::Lost
        )
    }
}

/// One row of `task_events` (13 columns; the user hash is checked for presence only).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskEvent {
    /// Microseconds; 0 = before the trace window.
    pub time: u64,
    /// Missing-info code, if present.
    pub missing_info: Option<u8>,
    /// Job identifier.
    pub job_id: u64,
    /// Task index within its job.
    pub task_index: u32,
    /// Machine, if any.
    pub machine_id: Option<u64>,
    /// Event type.
    pub event_type: EventType,
    /// Scheduling class 0..=3 (latency sensitivity).
    pub scheduling_class: u8,
    /// Priority 0..=11.
    pub priority: u8,
    /// Normalised CPU request (cores relative to the largest machine).
    pub cpu_request: Option<f32>,
    /// Normalised memory request.
    pub memory_request: Option<f32>,
    /// Normalised local disk request.
    pub disk_request: Option<f32>,
    /// Whether the task must run on a machine different from its job's other tasks.
    pub different_machines: Option<bool>,
}

/// One row of `task_usage` (20 columns, clusterdata-2011-2 / schema 2.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskUsage {
    /// Window start, µs.
    pub start_time: u64,
    /// Window end, µs.
    pub end_time: u64,
    /// Job identifier.
    pub job_id: u64,
    /// Task index within its job.
    pub task_index: u32,
    /// Machine the task ran on.
    pub machine_id: Option<u64>,
    /// Mean CPU rate over the window (normalised cores).
    pub cpu_rate: Option<f32>,
    /// Canonical memory usage.
    pub canonical_memory: Option<f32>,
    /// Assigned memory usage.
    pub assigned_memory: Option<f32>,
    /// Unmapped page cache.
    pub unmapped_page_cache: Option<f32>,
    /// Total page cache.
    pub total_page_cache: Option<f32>,
    /// Maximum memory usage.
    pub max_memory: Option<f32>,
    /// Disk I/O time.
    pub disk_io_time: Option<f32>,
    /// Local disk space usage.
    pub local_disk: Option<f32>,
    /// Maximum CPU rate.
    pub max_cpu_rate: Option<f32>,
    /// Maximum disk I/O time.
    pub max_disk_io_time: Option<f32>,
    /// Cycles per instruction.
    pub cpi: Option<f32>,
    /// Memory accesses per instruction.
    pub mai: Option<f32>,
    /// Fraction of the window covered by samples.
    pub sample_portion: Option<f32>,
    /// Aggregation type (0 or 1).
    pub aggregation_type: Option<u8>,
    /// One randomly sampled second of CPU usage (new in version 2).
    pub sampled_cpu: Option<f32>,
}

/// What went wrong on a line, before the reader adds file and line number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldError {
    /// 0-based column; equal to the column count when the line has too many fields.
    pub column: usize,
    /// What kind of problem.
    pub kind: FieldErrorKind,
}

/// Kind of a [`FieldError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// Fewer columns than the schema has.
    TooFewColumns,
    /// More columns than the schema has.
    TooManyColumns,
    /// A required field is empty.
    Empty,
    /// Not a number of the expected kind.
    Invalid,
    /// Does not fit the field's type or range.
    OutOfRange,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            FieldErrorKind::TooFewColumns => "too few columns",
            FieldErrorKind::TooManyColumns => "too many columns",
            FieldErrorKind::Empty => "required field is empty",
            FieldErrorKind::Invalid => "not a valid number",
            FieldErrorKind::OutOfRange => "value out of range",
        };
        write!(f, "column {}: {what}", self.column + 1)
    }
}

/// A table of the trace: its column count, name and line parser.
pub trait Record: Sized {
    /// Table name as in the file names (`task_events`).
    const TABLE: &'static str;
    /// Number of columns in the official schema.
    const COLUMNS: usize;
    /// Parses one line (no trailing newline).
    fn parse_line(line: &[u8]) -> Result<Self, FieldError>;
    /// The fast path on the start of a buffer: writes the first line's row into `slot` and
    /// returns the line's length with its `\n` when that line is complete and of the usual
    /// shapes; `None` leaves the line to [`Record::parse_line`], and `slot` may then hold
    /// a partly overwritten row: the caller must write it (the row is filled in place, so
    /// that a slot holding the previous row costs no copy). Whenever it gives a row,
    /// `parse_line` gives the same row for that line. The default never takes the fast
    /// path.
    #[inline]
    fn parse_first_line_into(buf: &[u8], slot: &mut Option<Self>) -> Option<usize> {
        let _ = (buf, slot);
        None
    }
    /// Time used to order rows of this table (µs).
    fn time(&self) -> u64;
}

/// Walks a line field by field, parsing numbers in the same pass that finds the commas
/// (a separate split would read every byte twice), tracking the column for errors.
struct Fields<'a> {
    s: &'a [u8],
    i: usize,
    column: usize,
    done: bool,
}

impl<'a> Fields<'a> {
    #[inline]
    fn new(line: &'a [u8]) -> Self {
        Self {
            s: line,
            i: 0,
            column: 0,
            done: false,
        }
    }

    #[inline]
    fn err(&self, kind: FieldErrorKind) -> FieldError {
        FieldError {
            column: self.column,
            kind,
        }
    }

    /// Fails if the line ended before this field.
    #[inline]
    fn start(&self) -> Result<(), FieldError> {
        if self.done {
            Err(self.err(FieldErrorKind::TooFewColumns))
        } else {
            Ok(())
        }
    }

    /// At the end of a field: consume the comma or note the end of the line.
    #[inline]
    fn end(&mut self) -> Result<(), FieldError> {
        match self.s.get(self.i) {
            None => self.done = true,
            Some(b',') => self.i += 1,
            Some(_) => return Err(self.err(FieldErrorKind::Invalid)),
        }
        self.column += 1;
        Ok(())
    }

    #[inline]
    fn at_empty(&self) -> bool {
        matches!(self.s.get(self.i), None | Some(b','))
    }

    #[inline]
    fn skip(&mut self) -> Result<(), FieldError> {
        self.start()?;
        match memchr::memchr(b',', &self.s[self.i..]) {
            Some(p) => self.i += p,
            None => self.i = self.s.len(),
        }
        self.end()
    }

    #[inline]
    fn finish(&self, columns: usize) -> Result<(), FieldError> {
        if self.done {
            Ok(())
        } else {
            Err(FieldError {
                column: columns,
                kind: FieldErrorKind::TooManyColumns,
            })
        }
    }

    #[inline]
    fn map(&self, e: NumError) -> FieldError {
        self.err(match e {
            NumError::Empty => FieldErrorKind::Empty,
            NumError::InvalidDigit => FieldErrorKind::Invalid,
            NumError::Overflow => FieldErrorKind::OutOfRange,
        })
    }

    #[inline]
    fn opt_u64(&mut self) -> Result<Option<u64>, FieldError> {
        self.start()?;
        if self.at_empty() {
            self.end()?;
            return Ok(None);
        }
        let (v, n) = parse_u64_prefix(&self.s[self.i..]).map_err(|e| self.map(e))?;
        if n == 0 {
            return Err(self.err(FieldErrorKind::Invalid));
        }
        self.i += n;
        self.end()?;
        Ok(Some(v))
    }

    #[inline]
    fn u64(&mut self) -> Result<u64, FieldError> {
        let col = self.column;
        self.opt_u64()?.ok_or(FieldError {
            column: col,
            kind: FieldErrorKind::Empty,
        })
    }

    #[inline]
    fn small(&mut self, max: u64) -> Result<u8, FieldError> {
        let col = self.column;
        let v = self.u64()?;
        if v > max {
            return Err(FieldError {
                column: col,
                kind: FieldErrorKind::OutOfRange,
            });
        }
        Ok(v as u8)
    }

    #[inline]
    fn opt_small(&mut self, max: u64) -> Result<Option<u8>, FieldError> {
        let col = self.column;
        match self.opt_u64()? {
            Some(v) if v > max => Err(FieldError {
                column: col,
                kind: FieldErrorKind::OutOfRange,
            }),
            Some(v) => Ok(Some(v as u8)),
            None => Ok(None),
        }
    }

    #[inline]
    fn u32(&mut self) -> Result<u32, FieldError> {
        let col = self.column;
        let v = self.u64()?;
        u32::try_from(v).map_err(|_| FieldError {
            column: col,
            kind: FieldErrorKind::OutOfRange,
        })
    }

    #[inline]
    fn opt_f32(&mut self) -> Result<Option<f32>, FieldError> {
        self.start()?;
        if self.at_empty() {
            self.end()?;
            return Ok(None);
        }
        // A value whose f64 is not finite is an Overflow: out of range.
        let (v, n) = parse_f32_prefix(&self.s[self.i..]).map_err(|e| self.map(e))?;
        self.i += n;
        self.end()?;
        Ok(Some(v))
    }
}

/// [`Record`]'s parsers for a row type with a fast path: the fast path first, the
/// checked parser (which alone reports errors) for whatever it does not take.
macro_rules! record_parsers {
    () => {
        #[inline]
        fn parse_line(line: &[u8]) -> Result<Self, FieldError> {
            match Self::parse_line_quick(line) {
                Some(r) => Ok(r),
                None => Self::parse_line_checked(line),
            }
        }

        #[inline]
        fn parse_first_line_into(buf: &[u8], slot: &mut Option<Self>) -> Option<usize> {
            Self::parse_first_line_quick_into(buf, slot)
        }
    };
}

impl Record for TaskEvent {
    const TABLE: &'static str = "task_events";
    const COLUMNS: usize = 13;

    record_parsers!();

    fn time(&self) -> u64 {
        self.time
    }
}

/// The fast path's entry points, the same for every row type: each type gives its
/// `BLANK` row and its `fill`, which sets every field from a line.
macro_rules! quick_paths {
    () => {
        /// The fast path of [`Record::parse_line`]: a row for a well-formed line of the usual
        /// shapes, `None` for anything else (then the checked parser decides).
        #[doc(hidden)]
        #[inline]
        pub fn parse_line_quick(line: &[u8]) -> Option<Self> {
            Self::quick(&mut Quick::<false>::new(line))
        }

        /// The fast path on the start of a buffer: the row of its first line and the length
        /// of that line with its `\n`, when the line ends in `\n` and the fast path accepts
        /// it (then the row equals [`Self::parse_line_quick`] of the line without its `\n`).
        #[doc(hidden)]
        #[inline]
        pub fn parse_first_line_quick(buf: &[u8]) -> Option<(Self, usize)> {
            let mut slot = None;
            let n = Self::parse_first_line_quick_into(buf, &mut slot)?;
            Some((slot?, n))
        }

        /// [`Self::parse_first_line_quick`] writing the row into `slot` in place (partly
        /// written on `None`, see [`Record::parse_first_line_into`]).
        #[doc(hidden)]
        #[inline]
        pub fn parse_first_line_quick_into(buf: &[u8], slot: &mut Option<Self>) -> Option<usize> {
            let mut q = Quick::<true>::new(buf);
            Self::fill(&mut q, slot.get_or_insert_with(|| Self::BLANK))?;
            Some(q.pos())
        }

        #[inline(always)]
        fn quick<const NL: bool>(q: &mut Quick<'_, NL>) -> Option<Self> {
            let mut r = Self::BLANK;
            Self::fill(q, &mut r)?;
            Some(r)
        }
    };
}

impl TaskEvent {
    quick_paths!();

    /// Placeholder row, overwritten field by field by [`Self::fill`].
    const BLANK: Self = Self {
        time: 0,
        missing_info: None,
        job_id: 0,
        task_index: 0,
        machine_id: None,
        event_type: EventType::Submit,
        scheduling_class: 0,
        priority: 0,
        cpu_request: None,
        memory_request: None,
        disk_request: None,
        different_machines: None,
    };

    /// Sets every field of `r` from the line (`None`: gave up, `r` partly written).
    #[inline(always)]
    fn fill<const NL: bool>(q: &mut Quick<'_, NL>, r: &mut Self) -> Option<()> {
        r.time = q.u64::<false>()?;
        r.missing_info = q.opt_small::<false>(255)?;
        r.job_id = q.u64::<false>()?;
        r.task_index = u32::try_from(q.u64::<false>()?).ok()?;
        r.machine_id = q.opt_u64::<false>()?;
        r.event_type = EventType::from_code(u64::from(q.small::<false>(8)?))?;
        q.skip()?; // user (hashed name)
        r.scheduling_class = q.small::<false>(255)?;
        r.priority = q.small::<false>(255)?;
        r.cpu_request = q.opt_f32::<false>()?;
        r.memory_request = q.opt_f32::<false>()?;
        r.disk_request = q.opt_f32::<false>()?;
        r.different_machines = q.opt_small::<true>(1)?.map(|v| v == 1);
        Some(())
    }

    /// The checked parser: every error with its column (the reference for the fast path).
    #[doc(hidden)]
    #[inline(never)]
    pub fn parse_line_checked(line: &[u8]) -> Result<Self, FieldError> {
        let mut f = Fields::new(line);
        let time = f.u64()?;
        let missing_info = f.opt_small(255)?;
        let job_id = f.u64()?;
        let task_index = f.u32()?;
        let machine_id = f.opt_u64()?;
        let col = f.column;
        let code = f.u64()?;
        let event_type = EventType::from_code(code).ok_or(FieldError {
            column: col,
            kind: FieldErrorKind::OutOfRange,
        })?;
        f.skip()?; // user (hashed name)
        let scheduling_class = f.small(255)?;
        let priority = f.small(255)?;
        let cpu_request = f.opt_f32()?;
        let memory_request = f.opt_f32()?;
        let disk_request = f.opt_f32()?;
        let different_machines = f.opt_small(1)?.map(|v| v == 1);
        f.finish(Self::COLUMNS)?;
        Ok(Self {
            time,
            missing_info,
            job_id,
            task_index,
            machine_id,
            event_type,
            scheduling_class,
            priority,
            cpu_request,
            memory_request,
            disk_request,
            different_machines,
        })
    }
}

impl Record for TaskUsage {
    const TABLE: &'static str = "task_usage";
    const COLUMNS: usize = 20;

    record_parsers!();

    fn time(&self) -> u64 {
        self.start_time
    }
}

impl TaskUsage {
    quick_paths!();

    /// Placeholder row, overwritten field by field by [`Self::fill`].
    const BLANK: Self = Self {
        start_time: 0,
        end_time: 0,
        job_id: 0,
        task_index: 0,
        machine_id: None,
        cpu_rate: None,
        canonical_memory: None,
        assigned_memory: None,
        unmapped_page_cache: None,
        total_page_cache: None,
        max_memory: None,
        disk_io_time: None,
        local_disk: None,
        max_cpu_rate: None,
        max_disk_io_time: None,
        cpi: None,
        mai: None,
        sample_portion: None,
        aggregation_type: None,
        sampled_cpu: None,
    };

    /// Sets every field of `r` from the line (`None`: gave up, `r` partly written).
    #[inline(always)]
    fn fill<const NL: bool>(q: &mut Quick<'_, NL>, r: &mut Self) -> Option<()> {
        r.start_time = q.u64::<false>()?;
        r.end_time = q.u64::<false>()?;
        r.job_id = q.u64::<false>()?;
        r.task_index = u32::try_from(q.u64::<false>()?).ok()?;
        r.machine_id = q.opt_u64::<false>()?;
        r.cpu_rate = q.opt_f32::<false>()?;
        r.canonical_memory = q.opt_f32::<false>()?;
        r.assigned_memory = q.opt_f32::<false>()?;
        r.unmapped_page_cache = q.opt_f32::<false>()?;
        r.total_page_cache = q.opt_f32::<false>()?;
        r.max_memory = q.opt_f32::<false>()?;
        r.disk_io_time = q.opt_f32::<false>()?;
        r.local_disk = q.opt_f32::<false>()?;
        r.max_cpu_rate = q.opt_f32::<false>()?;
        r.max_disk_io_time = q.opt_f32::<false>()?;
        r.cpi = q.opt_f32::<false>()?;
        r.mai = q.opt_f32::<false>()?;
        r.sample_portion = q.opt_f32::<false>()?;
        r.aggregation_type = q.opt_small::<false>(1)?;
        r.sampled_cpu = q.opt_f32::<true>()?;
        Some(())
    }

    /// The checked parser: every error with its column (the reference for the fast path).
    #[doc(hidden)]
    #[inline(never)]
    pub fn parse_line_checked(line: &[u8]) -> Result<Self, FieldError> {
        let mut f = Fields::new(line);
        let r = Self {
            start_time: f.u64()?,
            end_time: f.u64()?,
            job_id: f.u64()?,
            task_index: f.u32()?,
            machine_id: f.opt_u64()?,
            cpu_rate: f.opt_f32()?,
            canonical_memory: f.opt_f32()?,
            assigned_memory: f.opt_f32()?,
            unmapped_page_cache: f.opt_f32()?,
            total_page_cache: f.opt_f32()?,
            max_memory: f.opt_f32()?,
            disk_io_time: f.opt_f32()?,
            local_disk: f.opt_f32()?,
            max_cpu_rate: f.opt_f32()?,
            max_disk_io_time: f.opt_f32()?,
            cpi: f.opt_f32()?,
            mai: f.opt_f32()?,
            sample_portion: f.opt_f32()?,
            aggregation_type: f.opt_small(1)?,
            sampled_cpu: f.opt_f32()?,
        };
        f.finish(Self::COLUMNS)?;
        Ok(r)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_event_rows() {
        let e = TaskEvent::parse_line(
            b"0,2,3418309,0,4155527081,0,70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=,3,9,,,,",
        )
        .unwrap();
        assert_eq!(e.missing_info, Some(2));
        assert_eq!(e.machine_id, Some(4_155_527_081));
        assert_eq!(e.event_type, EventType::Submit);
        assert_eq!(e.priority, 9);
        assert_eq!(e.cpu_request, None);
        let e = TaskEvent::parse_line(
            b"5611824441,,6251812952,1761,1306108,4,fJYe=,0,2,0.02499,0.07959,0.0003862,1",
        )
        .unwrap();
        assert_eq!(e.time, 5_611_824_441);
        assert_eq!(e.event_type, EventType::Finish);
        assert_eq!(e.cpu_request, Some(0.02499));
        assert_eq!(e.different_machines, Some(true));
        let e =
            TaskEvent::parse_line(b"10623199551,,6126024662,0,,0,pU=,3,9,0.125,0.0159,9.537e-06,0")
                .unwrap();
        assert_eq!(e.machine_id, None);
        assert_eq!(e.disk_request, Some(9.537e-06));
    }

    #[test]
    fn parses_real_usage_row() {
        let u = TaskUsage::parse_line(b"600000000,900000000,3418309,0,4155527081,0.001562,0.06787,0.07568,0.001156,0.001503,0.06787,2.861e-06,0.0001869,0.03967,0.0003567,2.445,0.007243,0,1,0").unwrap();
        assert_eq!(u.start_time, 600_000_000);
        assert_eq!(u.end_time, 900_000_000);
        assert_eq!(u.cpu_rate, Some(0.001562));
        assert_eq!(u.cpi, Some(2.445));
        assert_eq!(u.aggregation_type, Some(1));
        assert_eq!(u.sampled_cpu, Some(0.0));
    }

    #[test]
    fn reports_the_failing_column() {
        let e = TaskEvent::parse_line(b"1,,2,3,4,9,u,0,0,,,,").unwrap_err();
        assert_eq!((e.column, e.kind), (5, FieldErrorKind::OutOfRange));
        let e = TaskEvent::parse_line(b"1,,2,3,4,1,u,0,0,,,").unwrap_err();
        assert_eq!(e.kind, FieldErrorKind::TooFewColumns);
        let e = TaskEvent::parse_line(b"1,,2,3,4,1,u,0,0,,,,,").unwrap_err();
        assert_eq!((e.column, e.kind), (13, FieldErrorKind::TooManyColumns));
        let e = TaskEvent::parse_line(b"x,,2,3,4,1,u,0,0,,,,").unwrap_err();
        assert_eq!((e.column, e.kind), (0, FieldErrorKind::Invalid));
        let e = TaskEvent::parse_line(b"1,,2,3,4,1,u,0,0,0.5,abc,,").unwrap_err();
        assert_eq!((e.column, e.kind), (10, FieldErrorKind::Invalid));
        assert_eq!(e.to_string(), "column 11: not a valid number");
        let e = TaskUsage::parse_line(b"").unwrap_err();
        assert_eq!((e.column, e.kind), (0, FieldErrorKind::Empty));
    }

    /// Every row the fast path returns must be the checked parser's row.
    fn same_as_checked(line: &[u8]) -> (bool, bool) {
        let qe = TaskEvent::parse_line_quick(line);
        let ce = TaskEvent::parse_line_checked(line);
        if let Some(q) = qe {
            assert_eq!(Ok(q), ce, "{}", String::from_utf8_lossy(line));
        }
        let qu = TaskUsage::parse_line_quick(line);
        let cu = TaskUsage::parse_line_checked(line);
        if let Some(q) = qu {
            assert_eq!(Ok(q), cu, "{}", String::from_utf8_lossy(line));
        }
        assert_eq!(TaskEvent::parse_line(line), ce);
        assert_eq!(TaskUsage::parse_line(line), cu);
        // From a buffer: the row of the first line (up to its '\n') or nothing.
        for tail in [
            &b"\n"[..],
            b"\n5611824441,,6251812952,1761,1306108,4,fJYe=,0,2,0.02499,0.07959,0.0003862,1\n",
            b"\n0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n",
            b"\r\n",
            b"",
            b",\n",
            b"0",
        ] {
            let mut buf = line.to_vec();
            buf.extend_from_slice(tail);
            let first = buf.split(|&c| c == b'\n').next().unwrap_or_default();
            let nl = buf.contains(&b'\n');
            let want = |ok: bool| nl && ok;
            let e = TaskEvent::parse_first_line_quick(&buf);
            let qe = TaskEvent::parse_line_quick(first);
            assert_eq!(
                e.is_some(),
                want(qe.is_some()),
                "{}",
                String::from_utf8_lossy(&buf)
            );
            if let Some((r, n)) = e {
                assert_eq!((Some(r), n), (qe, first.len() + 1));
            }
            let u = TaskUsage::parse_first_line_quick(&buf);
            let qu = TaskUsage::parse_line_quick(first);
            assert_eq!(
                u.is_some(),
                want(qu.is_some()),
                "{}",
                String::from_utf8_lossy(&buf)
            );
            if let Some((r, n)) = u {
                assert_eq!((Some(r), n), (qu, first.len() + 1));
            }
        }
        (qe.is_some(), qu.is_some())
    }

    #[test]
    fn quick_path_agrees_with_the_checked_parser() {
        let lines: [&[u8]; 6] = [
            b"0,2,3418309,0,4155527081,0,70s3v5qRyCO/1PCdI6fVXnrW8FU/w+5CKRSa72xgcIo=,3,9,,,,",
            b"5611824441,,6251812952,1761,1306108,4,fJYe=,0,2,0.02499,0.07959,0.0003862,1",
            b"10623199551,,6126024662,0,,0,pU=,3,9,0.125,0.0159,9.537e-06,0",
            b"600000000,900000000,3418309,0,4155527081,0.001562,0.06787,0.07568,0.001156,0.001503,0.06787,2.861e-06,0.0001869,0.03967,0.0003567,2.445,0.007243,0,1,0",
            b"600000000,900000000,3418314,0,3938719206,0.0003071,0.08044,0.09521,0.0002823,0.0006704,0.08044,4.768e-06,0.0001841,0.02377,0.0007858,5.588,0.0208,0,1,",
            b"600000000,900000000,1,2,,,,,,,,,,,,,,,,",
        ];
        // The real shapes take the fast path.
        assert_eq!(same_as_checked(lines[0]), (true, false));
        assert_eq!(same_as_checked(lines[1]), (true, false));
        assert_eq!(same_as_checked(lines[2]), (true, false));
        assert_eq!(same_as_checked(lines[3]), (false, true));
        assert_eq!(same_as_checked(lines[4]), (false, true));
        assert_eq!(same_as_checked(lines[5]), (false, true));
        // Every single-byte change, deletion and insertion of the lines above, with bytes
        // that matter to the parsers: rows agree, errors come from the checked parser.
        let bytes = b"0159.,eE+-x \n\r";
        let mut rng = crate::synth::SplitMix64::new(3);
        for line in lines {
            for i in 0..=line.len() {
                for &b in bytes {
                    let mut v = line.to_vec();
                    if i < v.len() {
                        v[i] = b;
                        same_as_checked(&v);
                        v.remove(i);
                        same_as_checked(&v);
                    }
                    let mut v = line.to_vec();
                    v.insert(i, b);
                    same_as_checked(&v);
                }
            }
            // Random runs of digits in every field: long mantissas and exponents.
            for _ in 0..2000 {
                let mut v = Vec::new();
                for (k, field) in line.split(|&c| c == b',').enumerate() {
                    if k > 0 {
                        v.push(b',');
                    }
                    if rng.below(3) == 0 {
                        for _ in 0..rng.below(24) {
                            v.push(bytes[rng.below(bytes.len() as u64) as usize]);
                        }
                    } else {
                        v.extend_from_slice(field);
                    }
                }
                same_as_checked(&v);
            }
        }
        for s in [
            "1,,2,3,4,1,u,0,0,12345678901234567890,,,",
            "1,,2,3,4,1,u,0,0,1234567890123456789,,,",
            "1,,2,3,4,1,u,0,0,0.00000000000000000001,,,",
            "1,,2,3,4,1,u,0,0,1e-45,1e39,1e400,",
            "1,,2,3,4,1,u,0,0,16777217,9007199254740993,3.4028236e38,1",
            "18446744073709551615,,2,3,4,1,u,0,0,,,,",
            "18446744073709551616,,2,3,4,1,u,0,0,,,,",
            "1,,2,4294967296,4,1,u,0,0,,,,",
            "1,256,2,3,4,1,u,0,0,,,,",
            "1,,2,3,4,8,,255,0,,,,1",
            "1,,2,3,4,9,u,0,0,,,,2",
            "1,,2,3,4,1,u,0,0,,,,\r",
        ] {
            same_as_checked(s.as_bytes());
        }
    }
}
