//! What the server asks of its tenants' confinement (`wormhole-confine`),
//! from its settings and the environment it was started in: the listener
//! and each tenant compute the same policy (the tenant from the same
//! settings and environment, inherited).

use std::path::PathBuf;

use wormhole_confine::Policy;

use crate::config::{Config, TenantMemory};

/// Environment variables naming libraries or driver files a tenant loads
/// from outside the system's directories: their paths become readable.
const PATH_LISTS: &[&str] = &["LD_LIBRARY_PATH", "OCL_ICD_FILENAMES", "LD_PRELOAD"];
const PATHS: &[&str] = &["OCL_ICD_VENDORS", "OPENCL_VENDOR_PATH"];

pub fn policy(c: &Config) -> Policy {
    let mut read = c.tenant_paths.clone();
    for var in PATH_LISTS {
        if let Some(v) = std::env::var_os(var) {
            // LD_PRELOAD may separate with spaces too.
            let v = v.to_string_lossy().replace(' ', ":");
            read.extend(
                v.split(':')
                    .filter(|p| p.starts_with('/'))
                    .map(PathBuf::from),
            );
        }
    }
    for var in PATHS {
        if let Some(v) = std::env::var_os(var) {
            read.push(PathBuf::from(v));
        }
    }
    if let Some(rt) = c.cuda_runtime.as_ref().and_then(|p| p.parent()) {
        read.push(rt.to_path_buf());
    }
    read.retain(|p| p.is_absolute());
    Policy {
        enabled: c.confine,
        uids: c.tenant_uids.as_deref().and_then(|r| r.parse().ok()),
        memory: process_memory(c),
        tasks: (c.tenant_tasks > 0).then_some(c.tenant_tasks),
        read_paths: read,
        cache_root: c.shared_kernel_cache.then(|| cache_dir(c)).flatten(),
    }
}

fn cache_dir(c: &Config) -> Option<PathBuf> {
    if let Some(d) = &c.kernel_cache_dir {
        return Some(d.clone());
    }
    if nix::unistd::geteuid().is_root() {
        return Some("/var/cache/wormhole/kernels".into());
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("wormhole/kernels"))
}

/// The tenant processes' memory limit: as configured, else the memory
/// objects' quota with room for the library's own (compiled programs,
/// bookkeeping), else three quarters of the host's memory, so that one
/// tenant cannot bring the host to its OOM killer.
fn process_memory(c: &Config) -> Option<u64> {
    match c.tenant_process_memory {
        Some(0) => None,
        Some(n) => Some(n),
        None => match c.tenant_memory {
            TenantMemory::Bytes(n) if n > 0 => Some(n.saturating_add(2 << 30)),
            // The device's size is known only to the tenant, which loads
            // the driver; the listener, which sets the limit, does not.
            _ => host_memory().map(|m| m / 4 * 3),
        },
    }
}

fn host_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib << 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_limit_follows_the_quota_or_the_host() {
        let mut c = Config {
            tenant_memory: TenantMemory::Bytes(1 << 30),
            ..Default::default()
        };
        assert_eq!(process_memory(&c), Some(3 << 30));
        c.tenant_process_memory = Some(0);
        assert_eq!(process_memory(&c), None);
        c.tenant_process_memory = Some(5 << 30);
        assert_eq!(process_memory(&c), Some(5 << 30));
        c.tenant_process_memory = None;
        c.tenant_memory = TenantMemory::Bytes(0);
        let host = host_memory().expect("/proc/meminfo");
        assert_eq!(process_memory(&c), Some(host / 4 * 3));
    }

    #[test]
    fn library_paths_from_the_environment_are_readable() {
        let c = Config {
            cuda_runtime: Some("/opt/x/lib/libcudart.so.12".into()),
            tenant_paths: vec!["/srv/drivers".into(), "relative".into()],
            ..Default::default()
        };
        let p = policy(&c);
        assert!(p.read_paths.contains(&PathBuf::from("/opt/x/lib")));
        assert!(p.read_paths.contains(&PathBuf::from("/srv/drivers")));
        assert!(!p.read_paths.iter().any(|r| r.is_relative()));
        assert!(p.enabled, "confined by default");
        assert_eq!(p.tasks, Some(4096));
    }
}
