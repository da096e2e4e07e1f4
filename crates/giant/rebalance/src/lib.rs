//! GiantVM guest rebalancer.
//!
//! A GiantVM guest sees each host as a NUMA node. When the host behind the node in use
//! is busy, the guest's vCPUs there accumulate *steal* time. Every interval (2 s) this
//! agent reads per-CPU steal from `/proc/stat`, sums it per node
//! (`/sys/devices/system/node/nodeN/cpulist`), and when the active node's steal delta
//! reaches the threshold (50 ticks) pins every movable thread, every IRQ whose affinity
//! can be set and every unbound workqueue to the least-stolen node (coarse) or spreads
//! them over the two least-stolen nodes (fine). Only pages the work touches then move,
//! instead of live-migrating a whole VM.
//!
//! Layers: [`decide`] is the rule without I/O; [`procfs`] reads the tree under a root
//! directory; [`actuator::Actuator`] is every change (live syscalls, or a fixture tree
//! with a [`actuator::Recorder`] for tests); [`agent::Rebalancer`] ties them together
//! and restores original affinities on exit.

pub mod actuator;
pub mod agent;
pub mod cpuset;
pub mod decide;
pub mod procfs;

pub use actuator::{Actuator, Op, Recorder, SystemActuator, TreeActuator};
pub use agent::{Counts, Options, Rebalancer, Step};
pub use cpuset::CpuSet;
pub use decide::{Decider, Decision, Policy};

/// Errors that stop the rebalancer (everything per-object is counted instead).
#[derive(Debug, thiserror::Error)]
pub enum RebalanceError {
    /// A file the rebalancer needs could not be read.
    #[error("{}: {err}", path.display())]
    Read {
        /// File.
        path: std::path::PathBuf,
        /// Cause (in the message, so not also a `source()`).
        err: std::io::Error,
    },
    /// A file had unexpected content.
    #[error("{}: {msg}", path.display())]
    Parse {
        /// File.
        path: std::path::PathBuf,
        /// What was wrong.
        msg: String,
    },
}
