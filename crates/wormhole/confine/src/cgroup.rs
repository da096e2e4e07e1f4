//! A cgroup per tenant with memory and task limits, where the listener may
//! create one: cgroup v2 when its own cgroup can delegate the memory
//! controller, else the v1 memory (and pids) hierarchies.
//!
//! The tenant is put in its groups by the listener between `clone` and the
//! child's `execve` (the child waits), so nothing it runs escapes them. When
//! the tenant is reaped, whatever is left in them is killed and they are
//! removed.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where the tenants' groups go, found at the listener's start.
#[derive(Debug)]
pub(crate) struct CgroupParent {
    version: Version,
    /// v2: one directory; v1: the memory hierarchy's, then the pids one's
    /// (when mounted and writable).
    dirs: Vec<(Controller, PathBuf)>,
    memory: Option<u64>,
    tasks: Option<u64>,
    next: AtomicU64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    /// v2: both controllers in one directory.
    Both,
    Memory,
    Pids,
}

/// One tenant's groups.
#[derive(Debug)]
pub(crate) struct TenantCgroup {
    dirs: Vec<PathBuf>,
    version: Version,
}

/// A line of `/proc/self/mountinfo` that mounts a cgroup file system.
struct CgroupMount {
    root: String,
    point: PathBuf,
    fstype: String,
    options: String,
}

fn mounts() -> Vec<CgroupMount> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let mut post = post.split(' ');
            let fstype = post.next()?.to_string();
            let _source = post.next()?;
            let options = post.next().unwrap_or("").to_string();
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some(CgroupMount {
                root: (*pre.get(3)?).to_string(),
                point: PathBuf::from(unescape(pre.get(4)?)),
                fstype,
                options,
            })
        })
        .collect()
}

/// mountinfo escapes spaces and a few other bytes as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// This process's cgroup in the hierarchy whose `/proc/self/cgroup` line
/// `matches`, as a directory under `mount`.
fn own_dir(mount: &CgroupMount, matches: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    let text = fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (id, ctl, path) = (f.next()?, f.next()?, f.next()?);
        matches(id, ctl).then(|| path.to_string())
    })?;
    let rel = path
        .strip_prefix(mount.root.as_str())
        .unwrap_or(&path)
        .trim_start_matches('/');
    Some(mount.point.join(rel))
}

/// Whether groups can be made in `dir` (one is made and removed).
fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!("probe-{}", std::process::id()));
    let ok = fs::create_dir(&probe).is_ok();
    let _ = fs::remove_dir(&probe);
    ok
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(value.as_bytes())
}

impl CgroupParent {
    /// Finds where tenants' groups can be made, and makes the parent.
    /// `Err` says why there is none.
    pub fn find(memory: Option<u64>, tasks: Option<u64>) -> Result<CgroupParent, String> {
        if memory.is_none() && tasks.is_none() {
            return Err("no limits asked for".into());
        }
        let mounts = mounts();
        let v2 = mounts.iter().find(|m| m.fstype == "cgroup2");
        let v2_err = match v2 {
            Some(m) => match Self::v2(m) {
                Ok(dir) => {
                    return Ok(Self::new(
                        Version::V2,
                        vec![(Controller::Both, dir)],
                        memory,
                        tasks,
                    ))
                }
                Err(e) => e,
            },
            None => "no cgroup2 mount".to_string(),
        };
        let v1 = |ctl: &str| {
            let m = mounts
                .iter()
                .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == ctl))?;
            let own = own_dir(m, |_, c| c.split(',').any(|x| x == ctl))?;
            let dir = own.join("wormhole");
            fs::create_dir_all(&dir).ok()?;
            writable(&dir).then_some(dir)
        };
        let mut dirs = Vec::new();
        if let Some(d) = v1("memory") {
            dirs.push((Controller::Memory, d));
        }
        if let Some(d) = v1("pids") {
            dirs.push((Controller::Pids, d));
        }
        if dirs.iter().any(|(c, _)| *c == Controller::Memory) {
            return Ok(Self::new(Version::V1, dirs, memory, tasks));
        }
        Err(format!(
            "cgroup v2: {v2_err}; cgroup v1: no writable memory hierarchy"
        ))
    }

    fn new(
        version: Version,
        dirs: Vec<(Controller, PathBuf)>,
        memory: Option<u64>,
        tasks: Option<u64>,
    ) -> Self {
        CgroupParent {
            version,
            dirs,
            memory,
            tasks,
            next: AtomicU64::new(0),
        }
    }

    /// v2: a `wormhole` group beside ours, with memory and pids delegated
    /// to it. Ours must let its children have controllers: the root group
    /// always does; another only when no process is in it but in leaves.
    fn v2(m: &CgroupMount) -> Result<PathBuf, String> {
        let own = own_dir(m, |id, _| id == "0").ok_or("not in a v2 group")?;
        let controllers = fs::read_to_string(own.join("cgroup.controllers")).unwrap_or_default();
        for c in ["memory", "pids"] {
            if !controllers.split_whitespace().any(|x| x == c) {
                return Err(format!("no {c} controller in {}", own.display()));
            }
        }
        let enable = |dir: &Path| write(&dir.join("cgroup.subtree_control"), "+memory +pids");
        // Our own group holds processes (us at least) unless it is the
        // root, and a group with processes cannot delegate: so the parent
        // of the tenants' groups is ours only where that works.
        enable(&own).map_err(|e| {
            format!(
                "{} cannot delegate memory to its children ({e}); run the server in a \
                 group of its own with delegation (systemd: Delegate=yes)",
                own.display()
            )
        })?;
        let dir = own.join("wormhole");
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        enable(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if !writable(&dir) {
            return Err(format!("{} is not ours to write", dir.display()));
        }
        Ok(dir)
    }

    pub fn describe(&self) -> String {
        let what = match (self.memory, self.tasks) {
            (Some(m), Some(t)) => format!("memory {} MiB, {t} tasks", m >> 20),
            (Some(m), None) => format!("memory {} MiB", m >> 20),
            (None, Some(t)) => format!("{t} tasks"),
            (None, None) => "no limits".into(),
        };
        let at = self
            .dirs
            .iter()
            .map(|(_, d)| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let v = match self.version {
            Version::V1 => "v1",
            Version::V2 => "v2",
        };
        format!("a cgroup ({v}) per tenant under {at} ({what})")
    }

    /// Makes a tenant's groups, with their limits.
    pub fn make(&self) -> std::io::Result<TenantCgroup> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let name = format!("tenant-{}-{n}", std::process::id());
        let mut made = TenantCgroup {
            dirs: Vec::new(),
            version: self.version,
        };
        for (ctl, parent) in &self.dirs {
            let dir = parent.join(&name);
            fs::create_dir(&dir)?;
            made.dirs.push(dir.clone());
            let (mem_file, pids_file) = match self.version {
                Version::V2 => ("memory.max", "pids.max"),
                Version::V1 => ("memory.limit_in_bytes", "pids.max"),
            };
            if matches!(ctl, Controller::Both | Controller::Memory) {
                if let Some(m) = self.memory {
                    write(&dir.join(mem_file), &m.to_string())?;
                    if self.version == Version::V2 {
                        // Past the limit, reclaim and then OOM-kill inside
                        // the group; swap would only slow the tenant down.
                        let _ = write(&dir.join("memory.swap.max"), "0");
                    }
                }
            }
            if matches!(ctl, Controller::Both | Controller::Pids) {
                if let Some(t) = self.tasks {
                    write(&dir.join(pids_file), &t.to_string())?;
                }
            }
        }
        Ok(made)
    }
}

impl TenantCgroup {
    /// Moves process `pid` into every group.
    pub fn admit(&self, pid: u32) -> std::io::Result<()> {
        for d in &self.dirs {
            write(&d.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// Kills what is left in the groups and removes them. Bounded: at most
    /// a second, then the groups are left for the next start to find.
    pub fn remove(&self) {
        let deadline = Instant::now() + Duration::from_secs(1);
        for d in &self.dirs {
            loop {
                if self.version == Version::V2 && write(&d.join("cgroup.kill"), "1").is_ok() {
                } else if let Ok(procs) = fs::read_to_string(d.join("cgroup.procs")) {
                    for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                }
                match fs::remove_dir(d) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(e) if Instant::now() >= deadline => {
                        log::warn!("removing {}: {e}", d.display());
                        break;
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/sys/fs/cgroup/a\040b"), "/sys/fs/cgroup/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape(r"/odd\04"), r"/odd\04");
    }

    #[test]
    fn no_limits_needs_no_group() {
        assert!(CgroupParent::find(None, None).is_err());
    }
}
