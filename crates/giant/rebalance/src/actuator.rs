//! Where decisions touch the system. One trait, so fixture tests can record and check
//! every write and the binary can act on a fixture tree as on a live kernel.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::cpuset::CpuSet;
use crate::procfs::{parse_status, thread_status_path};

/// Reads and changes affinities. Errors are plain `io::Error`s with the kernel's errno
/// (EINVAL for unmovable kernel threads, EIO/EPERM for IRQs that refuse, ENOENT/ESRCH
/// for things that vanished), which the agent classifies and counts.
pub trait Actuator {
    /// Current CPU affinity of thread `tid` of process `pid`.
    fn thread_affinity(&mut self, pid: u32, tid: u32) -> io::Result<CpuSet>;
    /// Sets the CPU affinity of a thread.
    fn set_thread_affinity(&mut self, pid: u32, tid: u32, cpus: &CpuSet) -> io::Result<()>;
    /// Reads a control file (IRQ affinity, workqueue cpumask).
    fn read_file(&mut self, path: &Path) -> io::Result<String>;
    /// Writes a control file.
    fn write_file(&mut self, path: &Path, text: &str) -> io::Result<()>;
}

fn errno(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// The live system: `sched_{get,set}affinity` for threads, plain file I/O for the rest.
#[derive(Debug, Default)]
pub struct SystemActuator;

impl Actuator for SystemActuator {
    fn thread_affinity(&mut self, _pid: u32, tid: u32) -> io::Result<CpuSet> {
        let tid = i32::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc_esrch()))?;
        let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(tid)).map_err(errno)?;
        let n = nix::sched::CpuSet::count() as u32;
        Ok((0..n)
            .filter(|&c| set.is_set(c as usize).unwrap_or(false))
            .collect())
    }

    fn set_thread_affinity(&mut self, _pid: u32, tid: u32, cpus: &CpuSet) -> io::Result<()> {
        let tid = i32::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc_esrch()))?;
        let mut set = nix::sched::CpuSet::new();
        for &c in &cpus.0 {
            set.set(c as usize).map_err(errno)?;
        }
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(tid), &set).map_err(errno)
    }

    fn read_file(&mut self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn write_file(&mut self, path: &Path, text: &str) -> io::Result<()> {
        // Kernel control files take one write; OpenOptions without create/truncate so a
        // missing file is ENOENT rather than a new regular file.
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
        f.write_all(text.as_bytes())
    }
}

fn libc_esrch() -> i32 {
    nix::errno::Errno::ESRCH as i32
}

/// A /proc and /sys tree on disk (a fixture, or a copy): thread affinities live in the
/// `Cpus_allowed_list` line of each thread's `status` file; setting the affinity of a
/// thread whose status says `Kthread: 1` fails with EINVAL, like the kernel's
/// PF_NO_SETAFFINITY threads. Writes to paths listed in `refuse` fail with the given
/// errno, standing in for IRQ controllers that refuse (EIO) or are managed (EPERM),
/// which a plain file cannot do.
#[derive(Debug)]
pub struct TreeActuator {
    root: PathBuf,
    refuse: HashMap<PathBuf, i32>,
}

impl TreeActuator {
    /// Acts on the tree under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            refuse: HashMap::new(),
        }
    }

    /// Makes writes to `path` fail with `errno` (refusing controller).
    pub fn refuse(mut self, path: impl Into<PathBuf>, errno: i32) -> Self {
        self.refuse.insert(path.into(), errno);
        self
    }

    /// Reads refusals from `<root>/.refuse` (lines `relative/path ERRNO_NAME`), so the
    /// binary can be run on a fixture with failing controllers.
    pub fn with_refusals_from_tree(mut self) -> Self {
        if let Ok(text) = std::fs::read_to_string(self.root.join(".refuse")) {
            for line in text.lines() {
                let mut f = line.split_whitespace();
                if let (Some(p), Some(e)) = (f.next(), f.next()) {
                    let code = match e {
                        "EIO" => nix::errno::Errno::EIO,
                        "EPERM" => nix::errno::Errno::EPERM,
                        "EINVAL" => nix::errno::Errno::EINVAL,
                        _ => continue,
                    };
                    self.refuse.insert(self.root.join(p), code as i32);
                }
            }
        }
        self
    }
}

impl Actuator for TreeActuator {
    fn thread_affinity(&mut self, pid: u32, tid: u32) -> io::Result<CpuSet> {
        let text = std::fs::read_to_string(thread_status_path(&self.root, pid, tid))?;
        parse_status(&text)
            .map(|s| s.cpus)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Cpus_allowed_list line"))
    }

    fn set_thread_affinity(&mut self, pid: u32, tid: u32, cpus: &CpuSet) -> io::Result<()> {
        let path = thread_status_path(&self.root, pid, tid);
        if let Some(&e) = self.refuse.get(&path) {
            return Err(io::Error::from_raw_os_error(e));
        }
        let text = std::fs::read_to_string(&path)?;
        let status = parse_status(&text).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "no Cpus_allowed_list line")
        })?;
        if status.kthread {
            return Err(io::Error::from_raw_os_error(
                nix::errno::Errno::EINVAL as i32,
            ));
        }
        let out: Vec<String> = text
            .lines()
            .map(|l| {
                if l.starts_with("Cpus_allowed_list:") {
                    format!("Cpus_allowed_list:\t{}", cpus.to_list())
                } else {
                    l.to_string()
                }
            })
            .collect();
        std::fs::write(&path, out.join("\n") + "\n")
    }

    fn read_file(&mut self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn write_file(&mut self, path: &Path, text: &str) -> io::Result<()> {
        if let Some(&e) = self.refuse.get(path) {
            return Err(io::Error::from_raw_os_error(e));
        }
        if !path.is_file() {
            return Err(io::Error::from_raw_os_error(
                nix::errno::Errno::ENOENT as i32,
            ));
        }
        std::fs::write(path, text)
    }
}

/// One call made through a [`Recorder`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `set_thread_affinity` and its errno (0 = success).
    SetThread {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// CPUs written.
        cpus: String,
        /// errno, 0 on success.
        errno: i32,
    },
    /// `write_file` and its errno.
    Write {
        /// File.
        path: PathBuf,
        /// Text written.
        text: String,
        /// errno, 0 on success.
        errno: i32,
    },
}

/// Wraps an actuator and records every change it is asked to make.
#[derive(Debug)]
pub struct Recorder<A> {
    inner: A,
    /// Calls in order.
    pub ops: Vec<Op>,
}

impl<A> Recorder<A> {
    /// Records calls to `inner`.
    pub fn new(inner: A) -> Self {
        Self {
            inner,
            ops: Vec::new(),
        }
    }
}

fn code(r: &io::Result<()>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.raw_os_error().unwrap_or(-1),
    }
}

impl<A: Actuator> Actuator for Recorder<A> {
    fn thread_affinity(&mut self, pid: u32, tid: u32) -> io::Result<CpuSet> {
        self.inner.thread_affinity(pid, tid)
    }

    fn set_thread_affinity(&mut self, pid: u32, tid: u32, cpus: &CpuSet) -> io::Result<()> {
        let r = self.inner.set_thread_affinity(pid, tid, cpus);
        self.ops.push(Op::SetThread {
            pid,
            tid,
            cpus: cpus.to_list(),
            errno: code(&r),
        });
        r
    }

    fn read_file(&mut self, path: &Path) -> io::Result<String> {
        self.inner.read_file(path)
    }

    fn write_file(&mut self, path: &Path, text: &str) -> io::Result<()> {
        let r = self.inner.write_file(path, text);
        self.ops.push(Op::Write {
            path: path.to_path_buf(),
            text: text.to_string(),
            errno: code(&r),
        });
        r
    }
}
