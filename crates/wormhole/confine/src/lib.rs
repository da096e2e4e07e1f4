//! Confining Wormhole's tenant processes, in the manner of Firecracker's
//! jailer: each tenant gets an identity of its own and the least it needs.
//!
//! A tenant serves one client and, on a CPU device, runs that client's
//! kernels as native code in its own process. So the boundary between
//! clients must hold at the operating system's level, not only in the
//! server's decoders. Two halves:
//!
//! - [`Jailer`] (the listener): starts each tenant with `clone(2)` in new
//!   user, pid, mount, network, IPC and UTS namespaces, maps it to a uid of
//!   its own when the listener runs as root (else to the listener's uid),
//!   and puts it in a cgroup of its own with memory and task limits where
//!   the listener may create one.
//! - [`enter`] (the tenant, first thing after exec, single-threaded): builds
//!   a root holding only the system's libraries, configuration, `/sys`, a
//!   fresh `/proc`, the device nodes drivers use and a private `/tmp`;
//!   makes the process non-dumpable; drops every capability; restricts the
//!   file system with Landlock and system calls with seccomp.
//!
//! Every layer that needs something the host does not give (a privilege, a
//! kernel feature) is skipped with a line saying so; the rest still apply.
//! [`Support`] says, once at the listener's start, what this host allows.

mod cgroup;
mod jail;
mod landlock_rules;
mod seccomp;
mod spawn;
mod uids;

pub use jail::{enter, host_pid, Report};
pub use spawn::{Jailed, Jailer, Support, TenantCommand};
pub use uids::UidRange;

use std::path::PathBuf;

use thiserror::Error;

/// Set in a tenant's environment when it has a compiled-kernel cache shared
/// with the other tenants of the same client user: the cache's directory.
pub const CACHE_ENV: &str = "WORMHOLE_TENANT_CACHE";

/// Set in a tenant's environment when the listener hands it its read paths
/// as descriptors: lines of "FD<tab>PATH".
pub const PATHS_ENV: &str = "WORMHOLE_TENANT_PATHS";

/// Set in a tenant's environment where it runs without its own mount
/// namespace: the private directory the listener made for its temporary
/// files (compiled kernels), the only place it may write.
pub const TMP_ENV: &str = "WORMHOLE_TENANT_TMP";

#[derive(Debug, Error)]
pub enum ConfineError {
    #[error("{what}: {err}")]
    Sys {
        what: &'static str,
        err: std::io::Error,
    },
    #[error("{what} {path}: {err}")]
    Path {
        what: &'static str,
        path: PathBuf,
        err: std::io::Error,
    },
    #[error("no uid left for a tenant (tenant_uids holds {0}, all in use)")]
    NoUid(u32),
    #[error("the tenant could not be started: {0}")]
    Exec(std::io::Error),
    #[error("{0:?} is not a uid range (FIRST-LAST, e.g. 1879048192-1879113727)")]
    BadRange(String),
}

impl ConfineError {
    fn sys(what: &'static str, err: impl Into<std::io::Error>) -> Self {
        ConfineError::Sys {
            what,
            err: err.into(),
        }
    }
    fn path(what: &'static str, path: impl Into<PathBuf>, err: impl Into<std::io::Error>) -> Self {
        ConfineError::Path {
            what,
            path: path.into(),
            err: err.into(),
        }
    }
}

/// What the listener asks for each tenant.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Confine at all. Off, a tenant is still non-dumpable, nothing more.
    pub enabled: bool,
    /// Uids for tenants, one each, when the listener runs as root. Without
    /// it (or when not root) every tenant is the listener's own uid, kept
    /// apart from the others by namespaces, seccomp and Landlock.
    pub uids: Option<UidRange>,
    /// Bytes all of a tenant's processes may use (a cgroup's memory limit,
    /// else `RLIMIT_DATA`, which does not count the shared arena).
    pub memory: Option<u64>,
    /// Most threads and processes a tenant may have (a cgroup's pids limit).
    pub tasks: Option<u64>,
    /// Paths a tenant may read besides the system's own (`/usr`, `/etc`,
    /// ...): directories of drivers and libraries outside them.
    pub read_paths: Vec<PathBuf>,
    /// Where compiled-kernel caches live, one directory per client user
    /// (`uid-N`), shared by that user's tenants only: compiling a kernel
    /// takes seconds on a CPU device, and a cache shared between users
    /// would let one plant code another loads. None: each tenant's cache
    /// is its own and ends with it.
    pub cache_root: Option<PathBuf>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            enabled: true,
            uids: None,
            memory: None,
            tasks: Some(4096),
            read_paths: Vec::new(),
            cache_root: None,
        }
    }
}

/// The system's paths a tenant may read (and execute from) in every mode:
/// libraries, the dynamic loader's and OpenCL's configuration, and what
/// drivers and hwloc read about the machine.
pub(crate) const SYSTEM_PATHS: &[&str] = &[
    "/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/sys",
];

/// Device nodes a tenant may open (besides GPU ones, found by prefix).
pub(crate) const DEVICE_NODES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// Prefixes under `/dev` of GPU drivers' nodes: NVIDIA's, DRM's, AMD's KFD.
pub(crate) const GPU_NODE_PREFIXES: &[&str] = &["nvidia", "dri", "kfd"];
