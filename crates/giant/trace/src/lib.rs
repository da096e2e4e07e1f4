//! Reading and generating Google's clusterdata-2011-2 trace.
//!
//! The trace is a set of gzip CSV files without header, one table per file family
//! (`task_events-part-NNNNN-of-00500.csv.gz`, `task_usage-...`). This crate parses the
//! two tables the GiantVM simulator needs, fast (a byte-level splitter and number
//! parser, no per-line allocation), and reports a malformed line with its file and line
//! number, or skips and counts it when asked. [`synth`] writes synthetic traces in the
//! same schema at the full trace's scale for benchmarks.
//!
//! ```
//! use giant_trace::{OnError, TaskEvent, TraceReader};
//! let data = b"0,,3418314,0,3938719206,0,u=,3,9,0.125,0.07446,0.0004244,0\n";
//! let mut r = TraceReader::<_, TaskEvent>::new(&data[..], "inline", OnError::Fail);
//! let ev = r.next_row().unwrap().unwrap();
//! assert_eq!(ev.cpu_request, Some(0.125));
//! ```

pub mod census;
pub mod num;
mod quick;
mod reader;
mod record;
mod source;
pub mod synth;

use std::path::{Path, PathBuf};

pub use census::{Census, UsageSurvey};
pub use reader::{
    open_maybe_gz, read_all, JobFilter, LineReader, OnError, ReadAll, TraceReader, MAX_LINE,
};
pub use record::{
    EventType, FieldError, FieldErrorKind, Record, TaskEvent, TaskUsage, TIME_AFTER_TRACE,
    TRACE_START_US,
};
pub use source::{Chain, IterSource, RowSource};

/// Errors of this crate; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A line does not match the schema.
    #[error("{}:{line}: {table} {field}", file.display())]
    Parse {
        /// File being read.
        file: PathBuf,
        /// 1-based line number.
        line: u64,
        /// Table name.
        table: &'static str,
        /// Column and problem.
        field: FieldError,
    },
    /// Reading or decompressing failed.
    #[error("{}{}: {err}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Io {
        /// File being read.
        file: PathBuf,
        /// Line being read, when known.
        line: Option<u64>,
        /// Underlying error (in the message, so not also a `source()`).
        err: std::io::Error,
    },
}

/// The parts of one table found in a trace directory, sorted by name (= time order).
pub fn table_files(dir: &Path, table: &str) -> Result<Vec<PathBuf>, TraceError> {
    let rd = std::fs::read_dir(dir).map_err(|err| TraceError::Io {
        file: dir.to_path_buf(),
        line: None,
        err,
    })?;
    let prefix = format!("{table}-");
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with(&prefix) && (n.ends_with(".csv.gz") || n.ends_with(".csv"))
            })
        })
        .collect();
    out.sort();
    Ok(out)
}
