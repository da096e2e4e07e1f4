//! The listener's half: starting a tenant in namespaces of its own, with
//! its own uid where the listener may give one, inside its own cgroup.
//!
//! `clone(2)` rather than `fork` and `unshare`: a process can only make
//! its *children* members of a new pid namespace, and the tenant itself
//! must be that namespace's first process, so that when it ends the kernel
//! ends everything it started (a shell a kernel forked, say). The child
//! waits on a pipe until the listener has written its uid and gid maps and
//! put it in its cgroup, then execs the tenant; a CLOEXEC pipe carries
//! `execve`'s error back, as `std::process::Command` does.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::sched::CloneFlags;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use crate::cgroup::{CgroupParent, TenantCgroup};
use crate::uids::{UidLease, UidPool, UidRange};
use crate::{ConfineError, Policy, TMP_ENV};

/// Namespaces every confined tenant gets, where the host allows them.
const NAMESPACES: CloneFlags = CloneFlags::CLONE_NEWUSER
    .union(CloneFlags::CLONE_NEWPID)
    .union(CloneFlags::CLONE_NEWNS)
    .union(CloneFlags::CLONE_NEWNET)
    .union(CloneFlags::CLONE_NEWIPC)
    .union(CloneFlags::CLONE_NEWUTS);

/// What the child writes on the error pipe once it may be set up.
const READY: u8 = b'R';

/// Most descriptors a tenant is handed.
const MAX_FDS: usize = 8;

/// Most read paths handed to a tenant as descriptors (the rest it must
/// reach by path).
const MAX_PATH_FDS: usize = 32;

/// The first descriptor number of the read paths in the tenant.
const PATH_FD_BASE: RawFd = 64;

/// What to run as a tenant.
#[derive(Debug, Clone)]
pub struct TenantCommand {
    /// The binary (the listener holds it open and passes `/proc/self/fd/N`).
    pub exe: PathBuf,
    pub argv0: String,
    pub args: Vec<String>,
    /// Set on top of the listener's environment.
    pub env: Vec<(String, String)>,
    /// Descriptors to hand over: (the listener's, the number in the tenant).
    pub fds: Vec<(RawFd, RawFd)>,
    /// Files the child opens read-only, before it takes its uid, at the
    /// given descriptor numbers (a configuration file its uid may not
    /// reach by path).
    pub open_files: Vec<(PathBuf, RawFd)>,
    /// The client's user on this host, when known (a Unix socket's peer):
    /// its tenants share a compiled-kernel cache.
    pub client_uid: Option<u32>,
}

/// What this host lets the listener do for its tenants, found at start.
#[derive(Debug, Clone)]
pub struct Support {
    /// Confinement asked for at all.
    pub enabled: bool,
    pub namespaces: Result<(), String>,
    /// A uid per tenant (the listener is root and has a range).
    pub uids: Result<UidRange, String>,
    pub cgroup: Result<String, String>,
    pub landlock: Result<String, String>,
}

impl std::fmt::Display for Support {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.enabled {
            return write!(f, "off (confine = false): tenants are only non-dumpable");
        }
        let mut have = vec!["non-dumpable".to_string(), "seccomp".to_string()];
        let mut lack = Vec::new();
        let mut note = |r: Result<String, String>, what: &str| match r {
            Ok(s) => have.push(s),
            Err(e) => lack.push(format!("{what} ({e})")),
        };
        note(
            self.namespaces.clone().map(|()| {
                "user, pid, mount, network and IPC namespaces with a root of their own".into()
            }),
            "namespaces",
        );
        note(
            self.uids
                .clone()
                .map(|r| format!("a uid per tenant from {r}")),
            "a uid per tenant",
        );
        note(self.cgroup.clone(), "a cgroup per tenant");
        note(self.landlock.clone(), "Landlock");
        write!(f, "{}", have.join(", "))?;
        if !lack.is_empty() {
            write!(f, "; without {}", lack.join(", "))?;
        }
        Ok(())
    }
}

/// Starts tenants, confined as the policy asks and the host allows.
#[derive(Debug)]
pub struct Jailer {
    policy: Policy,
    support: Support,
    namespaces: bool,
    uids: Option<UidPool>,
    cgroups: Option<CgroupParent>,
}

/// A running tenant. Dropping it (after [`Jailed::reap`]) gives its uid
/// back and removes its cgroup and temporary directory.
#[derive(Debug)]
pub struct Jailed {
    pub pid: u32,
    /// Its uid, as the host sees it.
    pub uid: u32,
    _lease: Option<UidLease>,
    cgroup: Option<TenantCgroup>,
    tmp: Option<PathBuf>,
}

impl Jailer {
    /// Finds what the host allows (one short-lived probe child for the
    /// namespaces) and sets up the tenants' cgroup parent.
    pub fn new(policy: Policy) -> Jailer {
        let root = nix::unistd::geteuid().is_root();
        let enabled = policy.enabled;
        let namespaces = if enabled {
            probe_namespaces()
        } else {
            Err("confinement off".into())
        };
        let uids = match (enabled, root, policy.uids) {
            (false, _, _) => Err("confinement off".into()),
            (true, false, _) => Err("the server is not root".into()),
            (true, true, r) => Ok(r.unwrap_or(UidRange::DEFAULT)),
        };
        let cgroups = if enabled {
            CgroupParent::find(policy.memory, policy.tasks)
        } else {
            Err("confinement off".into())
        };
        let landlock = if enabled {
            crate::landlock_rules::probe()
        } else {
            Err("confinement off".into())
        };
        let support = Support {
            enabled,
            namespaces: namespaces.clone(),
            uids: uids.clone(),
            cgroup: cgroups
                .as_ref()
                .map(CgroupParent::describe)
                .map_err(Clone::clone),
            landlock,
        };
        Jailer {
            namespaces: namespaces.is_ok(),
            uids: uids.ok().map(UidPool::new),
            cgroups: cgroups.ok(),
            policy,
            support,
        }
    }

    pub fn support(&self) -> &Support {
        &self.support
    }

    /// The client user's kernel cache, made if need be: only where the
    /// tenant cannot reach other users' caches (a mount namespace of its
    /// own, or Landlock), else none.
    fn cache_for(&self, client: Option<u32>, gid: u32) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let root = self.policy.cache_root.as_ref()?;
        let client = client?;
        if !self.policy.enabled || !(self.namespaces || self.support.landlock.is_ok()) {
            return None;
        }
        let dir = root.join(format!("uid-{client}"));
        let made = std::fs::create_dir_all(&dir).and_then(|()| {
            // Group-writable and setgid: tenants of a root listener are
            // uids of their own in one group, and each writes what the
            // others compiled (tenants write with umask 002).
            nix::unistd::chown(&dir, None, Some(nix::unistd::Gid::from_raw(gid)))?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o2770))
        });
        match made {
            Ok(()) => Some(dir),
            Err(e) => {
                log::warn!(
                    "the kernel cache {}: {e}; the tenant compiles alone",
                    dir.display()
                );
                None
            }
        }
    }

    /// Starts a tenant. Its descriptors other than `cmd.fds` are closed
    /// (everything the listener opens is close-on-exec).
    pub fn spawn(&self, cmd: &TenantCommand) -> Result<Jailed, ConfineError> {
        let lease = self
            .uids
            .as_ref()
            .map(|p| p.take(cmd.client_uid))
            .transpose()?;
        let uid = lease
            .as_ref()
            .map_or_else(|| nix::unistd::geteuid().as_raw(), |l| l.uid);
        // One group for every tenant of a root listener: the kernel caches
        // (shared by one client user's tenants, each a uid of its own) are
        // the group's to write. Nothing else a tenant can reach is group's.
        let gid = match (&lease, &self.uids) {
            (Some(_), Some(pool)) => pool.group(),
            _ => nix::unistd::getegid().as_raw(),
        };
        let cgroup = match &self.cgroups {
            Some(p) => match p.make() {
                Ok(c) => Some(c),
                Err(e) => {
                    log::warn!("a tenant's cgroup: {e}; it runs without one");
                    None
                }
            },
            None => None,
        };
        let mut jailed = Jailed {
            pid: 0,
            uid,
            _lease: lease,
            cgroup,
            tmp: None,
        };
        let mut env = cmd.env.clone();
        if self.policy.enabled && !self.namespaces {
            // No private /tmp: a directory of its own, writable by it alone.
            let dir = private_tmp(uid, gid)?;
            env.push((TMP_ENV.into(), dir.display().to_string()));
            jailed.tmp = Some(dir);
        }
        if jailed.cgroup.is_some() {
            env.push((crate::jail::CGROUP_ENV.into(), "1".into()));
        }
        if let Some(dir) = self.cache_for(cmd.client_uid, gid) {
            env.push((crate::CACHE_ENV.into(), dir.display().to_string()));
        }
        // The read paths, opened by the child before it takes its uid (as
        // the listener's user it may walk paths the tenant's uid could not:
        // a venv in root's home, a directory from mktemp), in its own mount
        // namespace (a descriptor of another namespace's mount cannot be
        // bound there).
        let held = if self.namespaces && self.policy.enabled {
            resolved_paths(&self.policy.read_paths)
        } else {
            Vec::new()
        };
        if !held.is_empty() {
            let list: String = held
                .iter()
                .enumerate()
                .map(|(i, p)| format!("{}\t{}\n", PATH_FD_BASE + i as RawFd, p.display()))
                .collect();
            env.push((crate::PATHS_ENV.into(), list));
        }
        let setuid = if self.namespaces {
            // Root in its namespace: mapped to `uid` outside, and able to
            // build its root before it drops every capability.
            Some((0, false))
        } else {
            (self.uids.is_some()).then_some((uid, true))
        };
        let flags = if self.namespaces {
            NAMESPACES
        } else {
            CloneFlags::empty()
        };
        let pid = start(cmd, &env, &held, flags, setuid, |pid| {
            if self.namespaces {
                write_maps(pid, uid, gid)?;
            }
            if let Some(c) = &jailed.cgroup {
                c.admit(pid.as_raw() as u32)
                    .map_err(|e| ConfineError::sys("moving a tenant into its cgroup", e))?;
            }
            Ok(())
        })?;
        jailed.pid = pid.as_raw() as u32;
        Ok(jailed)
    }
}

impl Jailed {
    /// Waits until the tenant has ended, without reaping it: its pid stays
    /// its own (no other process can take the number) until [`reap`].
    ///
    /// [`reap`]: Jailed::reap
    pub fn wait_for_end(&self) {
        let _ = nix::sys::wait::waitid(
            nix::sys::wait::Id::Pid(Pid::from_raw(self.pid as i32)),
            nix::sys::wait::WaitPidFlag::WEXITED | nix::sys::wait::WaitPidFlag::WNOWAIT,
        );
    }

    /// Reaps the ended tenant.
    pub fn reap(&self) -> nix::Result<WaitStatus> {
        nix::sys::wait::waitpid(Pid::from_raw(self.pid as i32), None)
    }
}

impl Drop for Jailed {
    fn drop(&mut self) {
        if let Some(c) = &self.cgroup {
            c.remove();
        }
        if let Some(d) = &self.tmp {
            if let Err(e) = std::fs::remove_dir_all(d) {
                log::warn!("removing a tenant's {}: {e}", d.display());
            }
        }
    }
}

/// The read paths that exist, resolved, without repeats, at most
/// [`MAX_PATH_FDS`].
fn resolved_paths(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut held: Vec<PathBuf> = Vec::new();
    for p in paths {
        let Ok(real) = std::fs::canonicalize(p) else {
            continue;
        };
        if held.contains(&real) {
            continue;
        }
        if held.len() == MAX_PATH_FDS {
            log::warn!(
                "more than {MAX_PATH_FDS} tenant paths: {} is reached by path",
                real.display()
            );
            continue;
        }
        held.push(real);
    }
    held
}

/// Whether this process may make the namespaces: one child that exits at
/// once.
fn probe_namespaces() -> Result<(), String> {
    let mut stack = vec![0u8; 16 << 10];
    // SAFETY: the child runs only `_exit`, which is async-signal-safe; it
    // has its own copy of the address space (no CLONE_VM), so the stack
    // buffer is its alone.
    let child = unsafe {
        nix::sched::clone(
            Box::new(|| {
                libc::_exit(0);
            }),
            &mut stack,
            NAMESPACES,
            Some(libc::SIGCHLD),
        )
    };
    match child {
        Ok(pid) => {
            let _ = nix::sys::wait::waitpid(pid, None);
            Ok(())
        }
        Err(e) => Err(format!("clone: {e}")),
    }
}

fn write_maps(pid: Pid, uid: u32, gid: u32) -> Result<(), ConfineError> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let put = |file: &str, text: String| {
        std::fs::write(proc.join(file), text)
            .map_err(|e| ConfineError::path("writing", proc.join(file), e))
    };
    // The tenant is root in its namespace (so it can build its root and
    // then drop every capability), and `uid` outside it.
    put("setgroups", "deny".into())?;
    put("uid_map", format!("0 {uid} 1\n"))?;
    put("gid_map", format!("0 {gid} 1\n"))
}

fn private_tmp(uid: u32, gid: u32) -> Result<PathBuf, ConfineError> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "wormhole-tenant-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| ConfineError::path("making", &dir, e))?;
    if uid != nix::unistd::geteuid().as_raw() {
        nix::unistd::chown(
            &dir,
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(gid)),
        )
        .map_err(|e| ConfineError::path("giving the tenant", &dir, e))?;
    }
    Ok(dir)
}

fn cstring(s: &[u8]) -> Result<CString, ConfineError> {
    CString::new(s).map_err(|e| ConfineError::Exec(std::io::Error::other(e)))
}

/// `fd` moved to a number above `floor`, close-on-exec.
fn above(fd: OwnedFd, floor: RawFd) -> Result<OwnedFd, ConfineError> {
    if fd.as_raw_fd() > floor {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own returns a new one
    // (or -1), owned by nothing else.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, floor + 1) };
    if n < 0 {
        return Err(ConfineError::sys(
            "moving a descriptor",
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: just returned to us, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

fn pipe_above(floor: RawFd) -> Result<(OwnedFd, OwnedFd), ConfineError> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| ConfineError::sys("pipe", e))?;
    Ok((above(r, floor)?, above(w, floor)?))
}

/// Everything the child needs, made before `clone`: after it, the child
/// may not allocate (another of the listener's threads may hold the
/// allocator's lock).
struct Prepared {
    exe: CString,
    _argv: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp: Vec<*const libc::c_char>,
    fds: [(RawFd, RawFd); MAX_FDS],
    nfds: usize,
    top: RawFd,
    /// Read paths the child opens at `PATH_FD_BASE` onwards.
    paths: Vec<CString>,
    /// Files the child opens read-only, and where.
    files: Vec<(CString, RawFd)>,
}

fn prepare(
    cmd: &TenantCommand,
    extra_env: &[(String, String)],
    paths: &[PathBuf],
) -> Result<Prepared, ConfineError> {
    if cmd.fds.len() > MAX_FDS {
        return Err(ConfineError::Exec(std::io::Error::other("too many fds")));
    }
    let exe = cstring(cmd.exe.as_os_str().as_bytes())?;
    let mut argv_c = vec![cstring(cmd.argv0.as_bytes())?];
    for a in &cmd.args {
        argv_c.push(cstring(a.as_bytes())?);
    }
    let overridden = |k: &OsStr| extra_env.iter().any(|(n, _)| OsStr::new(n) == k);
    let mut env_c = Vec::new();
    for (k, v) in std::env::vars_os().filter(|(k, _)| !overridden(k)) {
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        if let Ok(c) = CString::new(kv) {
            env_c.push(c);
        }
    }
    for (k, v) in extra_env {
        env_c.push(cstring(format!("{k}={v}").as_bytes())?);
    }
    let ptrs = |v: &[CString]| {
        let mut p: Vec<*const libc::c_char> = v.iter().map(|c| c.as_ptr()).collect();
        p.push(std::ptr::null());
        p
    };
    let mut fds = [(-1, -1); MAX_FDS];
    fds[..cmd.fds.len()].copy_from_slice(&cmd.fds);
    let top = cmd
        .fds
        .iter()
        .map(|&(_, to)| to)
        .chain(cmd.open_files.iter().map(|&(_, to)| to))
        .max()
        .unwrap_or(2);
    Ok(Prepared {
        argv: ptrs(&argv_c),
        envp: ptrs(&env_c),
        exe,
        _argv: argv_c,
        _envp: env_c,
        fds,
        nfds: cmd.fds.len(),
        top,
        paths: paths
            .iter()
            .map(|p| cstring(p.as_os_str().as_bytes()))
            .collect::<Result<_, _>>()?,
        files: cmd
            .open_files
            .iter()
            .map(|(p, n)| Ok((cstring(p.as_os_str().as_bytes())?, *n)))
            .collect::<Result<_, ConfineError>>()?,
    })
}

/// Clones the child, runs `setup` on it while it waits, lets it exec, and
/// reports exec's failure.
fn start(
    cmd: &TenantCommand,
    env: &[(String, String)],
    paths: &[PathBuf],
    flags: CloneFlags,
    setuid: Option<(u32, bool)>,
    setup: impl FnOnce(Pid) -> Result<(), ConfineError>,
) -> Result<Pid, ConfineError> {
    let p = prepare(cmd, env, paths)?;
    // The pipes above every number the child places a descriptor at.
    let floor = p.top.max(PATH_FD_BASE + p.paths.len() as RawFd);
    let (go_r, go_w) = pipe_above(floor)?;
    let (err_r, err_w) = pipe_above(floor)?;
    let (go_r_fd, go_w_fd, err_w_fd) = (go_r.as_raw_fd(), go_w.as_raw_fd(), err_w.as_raw_fd());
    let mut stack = vec![0u8; 64 << 10];
    // SAFETY: the child has its own copy of the address space (no
    // CLONE_VM) and runs only `child`, which makes async-signal-safe
    // system calls on memory prepared before the clone and never returns.
    let pid = unsafe {
        nix::sched::clone(
            Box::new(|| child(&p, go_r_fd, go_w_fd, err_w_fd, setuid)),
            &mut stack,
            flags,
            Some(libc::SIGCHLD),
        )
    }
    .map_err(|e| ConfineError::sys("clone", e))?;
    drop(go_r);
    drop(err_w);
    let abandon = |e: ConfineError| {
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(pid, None);
        e
    };
    // The child says it is dumpable again (so that an unprivileged
    // listener may write its maps), or fails.
    let mut ready = [0u8; 1];
    match nix::unistd::read(err_r.as_raw_fd(), &mut ready) {
        Ok(1) if ready[0] == READY => {}
        Ok(_) => {
            return Err(abandon(ConfineError::Exec(std::io::Error::other(
                "the child failed",
            ))))
        }
        Err(e) => return Err(abandon(ConfineError::sys("starting the tenant", e))),
    }
    if let Err(e) = setup(pid) {
        return Err(abandon(e));
    }
    if let Err(e) = nix::unistd::write(&go_w, &[1]) {
        return Err(abandon(ConfineError::sys("starting the tenant", e)));
    }
    drop(go_w);
    // EOF: exec succeeded (the pipe was close-on-exec); four bytes: errno.
    let mut errno = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match nix::unistd::read(err_r.as_raw_fd(), &mut errno[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(abandon(ConfineError::sys("starting the tenant", e))),
        }
    }
    if got == 4 {
        let _ = nix::sys::wait::waitpid(pid, None);
        return Err(ConfineError::Exec(std::io::Error::from_raw_os_error(
            i32::from_ne_bytes(errno),
        )));
    }
    Ok(pid)
}

/// Reports `errno` to the listener and exits: exec did not happen.
///
/// # Safety
/// Only in the child, as [`child`].
unsafe fn fail(err_w: RawFd) -> ! {
    // SAFETY: errno of this thread; a write of 4 bytes from the stack.
    unsafe {
        let b = (*libc::__errno_location()).to_ne_bytes();
        libc::write(err_w, b.as_ptr().cast(), 4);
        libc::_exit(127)
    }
}

/// The child between `clone` and `execve`. Only async-signal-safe calls,
/// on memory prepared before the clone; exits, never returns.
///
/// `setuid`: the ids to take, and whether to drop supplementary groups
/// (not possible, nor needed, in a user namespace whose `setgroups` is
/// denied).
fn child(
    p: &Prepared,
    go_r: RawFd,
    go_w: RawFd,
    err_w: RawFd,
    setuid: Option<(u32, bool)>,
) -> isize {
    // SAFETY: plain system calls on descriptors and memory this process
    // owns (its copy of the listener's, prepared before the clone), made
    // while it has one thread; none of them allocates.
    unsafe {
        libc::close(go_w);
        // A non-dumpable listener's child is non-dumpable, and its /proc
        // files then belong to root: an unprivileged listener could not
        // write its uid map. It becomes dumpable until its exec (which
        // makes it dumpable anyway; the tenant turns that off first thing);
        // in its own pid namespace no other tenant can name it.
        if libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) != 0 {
            fail(err_w);
        }
        let ready = [READY];
        if libc::write(err_w, ready.as_ptr().cast(), 1) != 1 {
            libc::_exit(126);
        }
        let mut b = [0u8; 1];
        loop {
            let n = libc::read(go_r, b.as_mut_ptr().cast(), 1);
            if n == 1 && b[0] == 1 {
                break;
            }
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            // The listener gave up on us.
            libc::_exit(126);
        }
        libc::close(go_r);
        // A session of its own: a signal to the listener's process group
        // does not reach it, and it has no controlling terminal.
        libc::setsid();
        // Sources first moved above every target, so that no dup2 below
        // overwrites a source not yet placed.
        let mut moved = [-1; MAX_FDS];
        for (i, &(from, _)) in p.fds[..p.nfds].iter().enumerate() {
            moved[i] = libc::fcntl(from, libc::F_DUPFD_CLOEXEC, p.top.max(err_w) + 1);
            if moved[i] < 0 {
                fail(err_w);
            }
        }
        // Before the uid changes: see `Jailer::spawn`. A path that will not
        // open leaves its number closed; the tenant skips it.
        for (i, path) in p.paths.iter().enumerate() {
            let fd = libc::open(path.as_ptr(), libc::O_PATH);
            let to = PATH_FD_BASE + i as RawFd;
            if fd >= 0 && fd != to {
                libc::dup2(fd, to);
                libc::close(fd);
            }
        }
        for (path, to) in &p.files {
            let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
            if fd < 0 {
                fail(err_w);
            }
            if fd != *to {
                libc::dup2(fd, *to);
                libc::close(fd);
            }
        }
        if let Some((id, groups)) = setuid {
            // Raw system calls: glibc's wrappers would try to change every
            // thread's ids, and this process has one thread glibc does not
            // know of.
            if (groups
                && libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0)
                || libc::syscall(libc::SYS_setresgid, id, id, id) != 0
                || libc::syscall(libc::SYS_setresuid, id, id, id) != 0
            {
                fail(err_w);
            }
        }
        for (i, &(_, to)) in p.fds[..p.nfds].iter().enumerate() {
            // dup2 leaves the new descriptor without close-on-exec.
            if libc::dup2(moved[i], to) < 0 {
                fail(err_w);
            }
        }
        // As std's Command: a clean signal state. SIGCHLD in particular
        // must not stay ignored (PoCL waits for the linker it runs).
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        libc::execve(p.exe.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
        fail(err_w)
    }
}

/// Whether `path` names something (a device node, a directory).
pub(crate) fn present(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}
