//! The tenant's file-system rules with Landlock: read (and execute) the
//! system's files and the configured library paths, write only its own
//! temporary directory and the device nodes drivers open. Where the kernel
//! offers it (ABI 6), signals and abstract Unix sockets are scoped to the
//! tenant too. Under a root of its own this repeats what the mount
//! namespace shows; without one (no user namespaces) it is what keeps the
//! tenant from the listener's socket directory and the users' files.

use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use crate::spawn::present;
use crate::{ConfineError, DEVICE_NODES, GPU_NODE_PREFIXES, SYSTEM_PATHS};

/// The newest ABI these rules were written and tested for.
const ABI_USED: ABI = ABI::V6;

fn err(e: impl std::fmt::Display) -> ConfineError {
    ConfineError::sys("Landlock", std::io::Error::other(e.to_string()))
}

/// The kernel's Landlock ABI, for the listener's summary.
pub(crate) fn probe() -> Result<String, String> {
    // The crate keeps its own probe private; this is the documented way to
    // ask (landlock_create_ruleset(2), LANDLOCK_CREATE_RULESET_VERSION).
    // SAFETY: with a NULL attribute, size 0 and this flag the call reads
    // and writes no memory; it returns the ABI version or -1.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    if v < 1 {
        return Err(format!(
            "not offered by this kernel ({})",
            std::io::Error::last_os_error()
        ));
    }
    Ok(format!("Landlock (ABI {v})"))
}

fn gpu_nodes() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/dev") {
        for e in dir.flatten() {
            let n = e.file_name();
            if GPU_NODE_PREFIXES
                .iter()
                .any(|p| n.to_string_lossy().starts_with(p))
            {
                v.push(e.path());
            }
        }
    }
    v
}

/// Restricts this thread (and what it starts) to the rules above.
///
/// `private_shm`: /dev/shm is the tenant's own (a tmpfs in its mount
/// namespace); the host's, shared by every process of its uid, stays
/// read-only.
pub(crate) fn restrict(
    read_paths: &[PathBuf],
    tmp: Option<&Path>,
    cache: Option<&Path>,
    private_shm: bool,
) -> Result<String, ConfineError> {
    let skip = crate::jail::Skip::from_env();
    let abi = ABI_USED;
    let read = AccessFs::from_read(abi);
    let mut all = AccessFs::from_all(abi);
    let mut device = AccessFs::from_file(abi);
    if skip.has("landlock-ioctl") {
        all.remove(AccessFs::IoctlDev);
        device.remove(AccessFs::IoctlDev);
    }
    let handled = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(err)?;
    let handled = if skip.has("landlock-scope") {
        handled
    } else {
        handled.scope(Scope::from_all(abi)).map_err(err)?
    };
    let mut ruleset = handled.create().map_err(err)?;
    let mut readable: Vec<PathBuf> = SYSTEM_PATHS
        .iter()
        .map(PathBuf::from)
        .chain(["/proc", "/dev"].iter().map(PathBuf::from))
        .chain(read_paths.iter().cloned())
        .collect();
    if skip.has("landlock-all-read") {
        readable.push("/".into());
    }
    for p in readable.iter().filter(|p| present(p)) {
        let writable = ["dev", "proc", "sys"]
            .iter()
            .any(|t| skip.has(&format!("landlock-{t}")) && p == Path::new("/").join(t).as_path());
        if let Ok(fd) = PathFd::new(p) {
            let access = if writable { all } else { read };
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(err)?;
        }
    }
    let devices = DEVICE_NODES
        .iter()
        .map(PathBuf::from)
        .chain(gpu_nodes())
        .filter(|p| present(p));
    for p in devices {
        if let Ok(fd) = PathFd::new(&p) {
            let access = if p.is_dir() { all } else { device };
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(err)?;
        }
    }
    // Its own process's entries writable (/proc/PID: NVIDIA's driver 580
    // fails to start CUDA, cudaErrorOperatingSystem, when they are
    // read-only; seen on an H200). Nothing of another process: /proc/self
    // resolves to this one's directory now, and the tenant's later threads
    // are beneath it.
    let own = std::fs::canonicalize("/proc/self").ok();
    if let Some(fd) = own.as_deref().and_then(|p| PathFd::new(p).ok()) {
        ruleset = ruleset.add_rule(PathBeneath::new(fd, all)).map_err(err)?;
    }
    let shm = private_shm.then_some(Path::new("/dev/shm"));
    for p in tmp.into_iter().chain(cache).chain(shm) {
        if present(p) {
            if let Ok(fd) = PathFd::new(p) {
                ruleset = ruleset.add_rule(PathBeneath::new(fd, all)).map_err(err)?;
            }
        }
    }
    let status = ruleset.restrict_self().map_err(err)?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(format!("Landlock (ABI {})", abi as i32)),
        RulesetStatus::PartiallyEnforced => Ok("Landlock (partly: an older kernel)".into()),
        RulesetStatus::NotEnforced => Err(err("not enforced by this kernel")),
    }
}
