//! Trace-driven simulator of GiantVM-style cluster rebalancing.
//!
//! A GiantVM aggregates several hosts into one VM whose guest sees each host as a NUMA
//! node; rebalancing inside the guest (re-pinning work to another node) replaces live
//! migration of whole VMs. This crate models a cluster of machines grouped into cells of
//! 4 (one aggregated VM each), replays Google's clusterdata-2011-2 task events and usage
//! through it, and compares rebalancing policies on balance (Gini of per-machine CPU),
//! overcommit, task duration and migration traffic.
//!
//! Pieces: [`Config`] (every parameter, published defaults), [`model::Simulation`] (the
//! cluster state machine, fed rows in time order), [`policy::PolicyKind`] (pure
//! decision functions), [`usage::UsageModel`] (usage where the trace has none),
//! [`driver`] (loading, merged replay, rayon sweeps), [`plot`] (PNG figures).

mod config;
pub mod driver;
pub mod input;
pub mod metrics;
pub mod model;
pub mod output;
pub mod plot;
pub mod policy;
pub mod usage;
mod usage_excerpt;
pub mod verdict;
pub mod warm;

pub use config::{Config, TRACE_MACHINES};
pub use driver::Trace;
pub use metrics::{OrphanCounts, Summary};
pub use policy::PolicyKind;

/// CPU time consumed by the calling thread, seconds: throughput per core that other
/// processes on a shared machine cannot distort the way they distort wall time.
pub fn thread_cpu_seconds() -> f64 {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
        .unwrap_or(0.0)
}

/// Errors of the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Reading the trace failed (names file and line).
    #[error(transparent)]
    Trace(#[from] giant_trace::TraceError),
    /// No task_events files in the directory.
    #[error("no task_events-*.csv[.gz] files in {}", .0.display())]
    NoTrace(std::path::PathBuf),
    /// A parameter is out of range.
    #[error("bad configuration: {0}")]
    Config(String),
    /// Writing an output failed.
    #[error("{}: {err}", path.display())]
    Output {
        /// File being written.
        path: std::path::PathBuf,
        /// Cause (in the message, so not also a `source()`).
        err: std::io::Error,
    },
    /// Drawing a plot failed.
    #[error("plot {}: {msg}", path.display())]
    Plot {
        /// File being drawn.
        path: std::path::PathBuf,
        /// Cause.
        msg: String,
    },
}
