//! The tenant's half: run first thing after exec, while the process has one
//! thread, before any client byte is read or any driver loaded.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nix::fcntl::{open, OFlag};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::stat::Mode;

use crate::spawn::present;
use crate::{ConfineError, Policy, DEVICE_NODES, GPU_NODE_PREFIXES, SYSTEM_PATHS, TMP_ENV};

/// Set by the listener when the tenant is in a cgroup with its limits, so
/// the tenant does not also set `RLIMIT_DATA`.
pub(crate) const CGROUP_ENV: &str = "WORMHOLE_TENANT_CGROUP";

/// Size of a tenant's private `/tmp` (PoCL's compiled kernels go there).
const TMP_SIZE: &str = "size=4g";

/// What [`enter`] did and could not do.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub applied: Vec<String>,
    pub missing: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.applied.join(", "))?;
        if !self.missing.is_empty() {
            write!(f, "; without {}", self.missing.join("; "))?;
        }
        Ok(())
    }
}

impl Report {
    fn note(&mut self, what: &str, r: Result<String, ConfineError>) {
        match r {
            Ok(s) => self.applied.push(s),
            Err(e) => self.missing.push(format!("{what} ({e})")),
        }
    }
}

static HOST_PID: OnceLock<u32> = OnceLock::new();

/// Set by a tenant for itself when it starts again inside its new root:
/// that the root is built, and its pid as the host sees it.
const STAGE_ENV: &str = "WORMHOLE_TENANT_IN_ROOT";
const HOST_PID_ENV: &str = "WORMHOLE_TENANT_HOST_PID";

/// This process's id as the host sees it (in a pid namespace of its own a
/// tenant is process 1 to itself): what logs and reports should show.
pub fn host_pid() -> u32 {
    *HOST_PID.get_or_init(|| {
        if let Some(pid) = std::env::var(HOST_PID_ENV)
            .ok()
            .and_then(|p| p.parse().ok())
        {
            return pid;
        }
        // The last pid namespace's number is ours, the first the host's:
        // read before /proc is replaced by the namespace's own.
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("NSpid:"))
                    .and_then(|v| v.split_whitespace().next()?.parse().ok())
            })
            .unwrap_or_else(std::process::id)
    })
}

/// Confines this process as `policy` asks and the host allows. Call it
/// while the process has one thread (the mount namespace, Landlock and
/// seccomp apply to the calling thread and what it starts afterwards).
pub fn enter(policy: &Policy) -> Report {
    let mut report = Report::default();
    host_pid();
    report.note("non-dumpable", non_dumpable());
    if !policy.enabled {
        return report;
    }
    let skip = Skip::from_env();
    for layer in &skip.0 {
        report
            .missing
            .push(format!("{layer} (skipped: {SKIP_ENV})"));
    }
    // In a pid namespace of its own, the tenant is its first process.
    let in_namespaces = std::process::id() == 1;
    let cache = std::env::var_os(crate::CACHE_ENV).map(PathBuf::from);
    let in_root = std::env::var_os(STAGE_ENV).is_some();
    let tmp = if in_root {
        std::env::remove_var(STAGE_ENV);
        report.applied.push(
            "a root of its own (system libraries, /sys, its own /proc, /dev and /tmp)".into(),
        );
        Some(PathBuf::from("/tmp"))
    } else if in_namespaces && !skip.has("root") {
        match new_root(&policy.read_paths, cache.as_deref()) {
            // Started again inside it: the dynamic loader took the library
            // directories it could not reach before (a path closed to this
            // uid above them) for missing, and would never look there again.
            Ok(()) => start_again(),
            Err(e) => {
                report.missing.push(format!("a root of its own ({e})"));
                None
            }
        }
    } else {
        std::env::var_os(TMP_ENV).map(PathBuf::from)
    };
    // Under its own root the shared cache is bound at /tmp/cache.
    let cache = match (&tmp, cache) {
        (Some(t), Some(_)) if in_namespaces => Some(t.join("cache")),
        (_, c) => c,
    };
    if let Some(t) = &tmp {
        private_caches(t, cache.as_deref());
    }
    if !skip.has("limits") {
        report.note("resource limits", limits(policy));
    }
    report.note("dropping capabilities", drop_capabilities());
    if !skip.has("landlock") {
        report.note(
            "Landlock",
            crate::landlock_rules::restrict(
                &policy.read_paths,
                tmp.as_deref(),
                cache.as_deref(),
                in_namespaces && !skip.has("root"),
            ),
        );
    }
    if !skip.has("seccomp") {
        report.note("seccomp", crate::seccomp::install());
    }
    report
}

/// Names layers of the tenant's confinement to leave out (`root`, `limits`,
/// `landlock`, `seccomp`, comma-separated; and of Landlock's rules:
/// `landlock-scope` no scoping, `landlock-ioctl` device ioctls not
/// handled, `landlock-dev`, `-proc`, `-sys` those trees writable,
/// `landlock-all-read` every path readable): for finding which one a driver
/// cannot live with, on a machine whose driver we cannot test here. Each
/// left out is reported as missing, so the listener warns of it.
pub const SKIP_ENV: &str = "WORMHOLE_CONFINE_SKIP";

pub(crate) struct Skip(Vec<String>);

impl Skip {
    pub(crate) fn from_env() -> Skip {
        const LAYERS: [&str; 10] = [
            "root",
            "limits",
            "landlock",
            "seccomp",
            // Landlock's parts, one at a time.
            "landlock-scope",
            "landlock-ioctl",
            "landlock-dev",
            "landlock-proc",
            "landlock-sys",
            "landlock-all-read",
        ];
        let v = std::env::var(SKIP_ENV).unwrap_or_default();
        Skip(
            v.split(',')
                .map(str::trim)
                .filter(|l| LAYERS.contains(l))
                .map(String::from)
                .collect(),
        )
    }

    pub(crate) fn has(&self, layer: &str) -> bool {
        self.0.iter().any(|l| l == layer)
    }
}

/// Executes this program again, inside its new root, with the same
/// arguments and descriptors (the client's connection has no
/// close-on-exec). Returns only if that fails.
fn start_again() -> ! {
    use std::os::unix::process::CommandExt;
    std::env::set_var(STAGE_ENV, "1");
    std::env::set_var(HOST_PID_ENV, host_pid().to_string());
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    let err = std::process::Command::new("/proc/self/exe")
        .arg0(argv0)
        .args(args)
        .exec();
    // Nothing sound to go on with: the root is half what the tenant expects.
    log::error!("starting again inside the tenant's root: {err}");
    std::process::exit(111)
}

fn non_dumpable() -> Result<String, ConfineError> {
    // Not dumpable: no core file, and /proc/PID/{mem,fd,environ,...} and
    // ptrace are closed to processes of the same uid without
    // CAP_SYS_PTRACE (exec makes a process dumpable again: so here).
    nix::sys::prctl::set_dumpable(false).map_err(|e| ConfineError::sys("PR_SET_DUMPABLE", e))?;
    Ok("non-dumpable".into())
}

/// Caches and temporary files go to the tenant's own directory, and
/// compiled kernels to its client user's cache when it has one: a cache
/// shared between users (PoCL's in the server's ~/.cache) would let one
/// plant code that another loads.
fn private_caches(tmp: &Path, shared: Option<&Path>) {
    let cache = shared.map_or_else(|| tmp.join("cache"), Path::to_path_buf);
    let _ = std::fs::create_dir_all(&cache);
    // What this tenant compiles, the next tenant of its user (another uid,
    // the same group) may extend.
    nix::sys::stat::umask(Mode::from_bits_truncate(0o002));
    // SAFETY-free: set_var is sound while this process has one thread,
    // which `enter`'s contract guarantees.
    std::env::set_var("TMPDIR", tmp);
    std::env::set_var("HOME", tmp);
    std::env::set_var("XDG_CACHE_HOME", &cache);
    std::env::set_var("POCL_CACHE_DIR", cache.join("pocl"));
}

fn limits(policy: &Policy) -> Result<String, ConfineError> {
    use nix::sys::resource::{setrlimit, Resource};
    setrlimit(Resource::RLIMIT_CORE, 0, 0).map_err(|e| ConfineError::sys("RLIMIT_CORE", e))?;
    if std::env::var_os(CGROUP_ENV).is_some() {
        return Ok("no core files".into());
    }
    match policy.memory {
        // Private writable memory only: the shared arena (MAP_SHARED) is
        // not counted, so its 64 GiB of address space does not collide.
        Some(m) => {
            setrlimit(Resource::RLIMIT_DATA, m, m)
                .map_err(|e| ConfineError::sys("RLIMIT_DATA", e))?;
            Ok(format!("RLIMIT_DATA {} MiB, no core files", m >> 20))
        }
        None => Ok("no core files".into()),
    }
}

fn drop_capabilities() -> Result<String, ConfineError> {
    use caps::CapSet;
    let err =
        |e: caps::errors::CapsError| ConfineError::sys("capabilities", std::io::Error::other(e));
    for cap in caps::all() {
        // Needs CAP_SETPCAP, held in the namespace until cleared below.
        if caps::has_cap(None, CapSet::Bounding, cap).unwrap_or(false) {
            let _ = caps::drop(None, CapSet::Bounding, cap);
        }
    }
    caps::clear(None, CapSet::Ambient).map_err(err)?;
    caps::clear(None, CapSet::Inheritable).map_err(err)?;
    caps::clear(None, CapSet::Effective).map_err(err)?;
    caps::clear(None, CapSet::Permitted).map_err(err)?;
    nix::sys::prctl::set_no_new_privs().map_err(|e| ConfineError::sys("PR_SET_NO_NEW_PRIVS", e))?;
    Ok("no capabilities, no new privileges".into())
}

fn sys<T>(what: &'static str, r: nix::Result<T>) -> Result<T, ConfineError> {
    r.map_err(|e| ConfineError::sys(what, e))
}

/// An O_PATH descriptor of `path`, taken before anything is mounted over
/// it (a library directory under /tmp, say).
fn hold(path: &Path) -> Result<OwnedFd, ConfineError> {
    let fd = open(
        path,
        OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::empty(),
    )
    .map_err(|e| ConfineError::path("opening", path, e))?;
    // SAFETY: `open` returned a new descriptor nobody else owns.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

fn via(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Flags a remount in a user namespace must keep: the kernel locks those
/// the mount had when it came from a more privileged namespace.
fn locked_flags(path: &Path) -> MsFlags {
    use nix::sys::statvfs::{statvfs, FsFlags};
    let Ok(s) = statvfs(path) else {
        return MsFlags::empty();
    };
    let f = s.flags();
    let mut m = MsFlags::empty();
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if f.contains(fs) {
            m |= ms;
        }
    }
    m
}

/// Binds `src` (held) at `target`, recursively, read-only at its top.
fn bind(src: &OwnedFd, target: &Path, read_only: bool) -> Result<(), ConfineError> {
    let flags = MsFlags::MS_BIND | MsFlags::MS_REC;
    sys(
        "bind mount",
        mount(Some(&via(src)), target, None::<&str>, flags, None::<&str>),
    )
    .map_err(|e| ConfineError::path("binding", target, std::io::Error::other(e)))?;
    if read_only {
        let flags = MsFlags::MS_BIND
            | MsFlags::MS_REMOUNT
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | locked_flags(target);
        set_mount_flags("read-only remount", target, flags)?;
    }
    Ok(())
}

/// Changes the mount at `target` (its propagation, or with MS_REMOUNT its
/// flags): no source, file system type or data.
fn set_mount_flags<P: ?Sized + nix::NixPath>(
    what: &'static str,
    target: &P,
    flags: MsFlags,
) -> Result<(), ConfineError> {
    sys(
        what,
        mount(None::<&str>, target, None::<&str>, flags, None::<&str>),
    )
}

/// What a path to show in the new root is, read before anything is
/// mounted over it.
enum Shape {
    Dir,
    /// A file or a device node: an empty file is bound over.
    File,
    Link(PathBuf),
}

/// A path to show, held open (O_PATH) from before the staging mount.
struct Source {
    path: PathBuf,
    shape: Shape,
    read_only: bool,
    fd: OwnedFd,
}

fn source(path: PathBuf, read_only: bool) -> Option<Source> {
    let meta = path.symlink_metadata().ok()?;
    let shape = if meta.file_type().is_symlink() {
        Shape::Link(std::fs::read_link(&path).ok()?)
    } else if meta.is_dir() {
        Shape::Dir
    } else {
        Shape::File
    };
    Some(Source {
        fd: hold(&path).ok()?,
        path,
        shape,
        read_only,
    })
}

/// The read paths the listener opened for us (see `crate::PATHS_ENV`): a
/// descriptor reaches its directory even where this uid could not walk
/// the path to it.
fn handed_paths() -> Option<Vec<Source>> {
    use std::os::fd::FromRawFd;
    let list = std::env::var(crate::PATHS_ENV).ok()?;
    std::env::remove_var(crate::PATHS_ENV);
    let mut v = Vec::new();
    for line in list.lines() {
        let Some((n, path)) = line.split_once('\t') else {
            continue;
        };
        let Ok(n) = n.parse::<i32>() else {
            continue;
        };
        // SAFETY: the listener put an O_PATH descriptor at `n` for us alone
        // (spawn.rs); it is owned by nothing else in this process.
        let fd = unsafe { OwnedFd::from_raw_fd(n) };
        let shape = match std::fs::metadata(format!("/proc/self/fd/{n}")) {
            Ok(m) if m.is_dir() => Shape::Dir,
            Ok(_) => Shape::File,
            Err(_) => continue,
        };
        v.push(Source {
            path: PathBuf::from(path),
            shape,
            read_only: true,
            fd,
        });
    }
    Some(v)
}

/// Makes `target` (inside the new root) like `src` and binds it there; a
/// link is made again instead.
fn show(src: &Source, target: &Path) -> Result<(), ConfineError> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| ConfineError::path("making", parent, e))?;
    }
    match &src.shape {
        Shape::Link(to) => {
            return std::os::unix::fs::symlink(to, target)
                .map_err(|e| ConfineError::path("linking", target, e));
        }
        Shape::Dir => {
            std::fs::create_dir_all(target).map_err(|e| ConfineError::path("making", target, e))?
        }
        Shape::File => {
            std::fs::File::create(target).map_err(|e| ConfineError::path("making", target, e))?;
        }
    }
    bind(&src.fd, target, src.read_only)
}

fn tmpfs(target: &Path, options: &str) -> Result<(), ConfineError> {
    std::fs::create_dir_all(target).map_err(|e| ConfineError::path("making", target, e))?;
    sys(
        "mounting a tmpfs",
        mount(
            Some("tmpfs"),
            target,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(options),
        ),
    )
}

/// The device nodes to show: the basic ones and every GPU driver's.
fn device_nodes() -> Vec<PathBuf> {
    let mut nodes: Vec<PathBuf> = DEVICE_NODES.iter().map(PathBuf::from).collect();
    if let Ok(dir) = std::fs::read_dir("/dev") {
        for e in dir.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if GPU_NODE_PREFIXES.iter().any(|p| name.starts_with(p)) {
                nodes.push(e.path());
            }
        }
    }
    nodes.retain(|p| present(p));
    nodes
}

/// Builds the tenant's root on a tmpfs and pivots into it. The listener's
/// mounts (its socket's directory, its token file, other tenants' files,
/// the users' homes) are gone from this mount namespace afterwards.
fn new_root(read_paths: &[PathBuf], cache: Option<&Path>) -> Result<(), ConfineError> {
    set_mount_flags(
        "making mounts private",
        "/",
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
    )?;
    let mut sources: Vec<Source> = SYSTEM_PATHS
        .iter()
        .map(PathBuf::from)
        .filter_map(|p| source(p, true))
        .collect();
    match handed_paths() {
        Some(handed) => sources.extend(handed),
        None => sources.extend(
            read_paths
                .iter()
                .filter_map(|p| std::fs::canonicalize(p).ok())
                .filter_map(|p| source(p, true)),
        ),
    }
    sources.extend(device_nodes().into_iter().filter_map(|p| source(p, false)));
    let proc_fd = hold(Path::new("/proc"))?;
    let cache_fd = cache.map(hold).transpose()?;
    let root = Path::new("/tmp");
    tmpfs(root, "mode=0755,size=16m")?;
    // Past this point a failure takes the staging tmpfs away again, so
    // that the tenant, running on without a root of its own, sees the
    // paths under /tmp (its libraries, say) as before.
    let built = fill_root(root, &sources, &proc_fd, cache_fd.as_ref());
    if built.is_err() {
        let _ = umount2(root, MntFlags::MNT_DETACH);
    }
    built
}

/// Binds the sources, the kernel cache, /dev's links, /proc and a private
/// /tmp into the staging root, and pivots into it.
fn fill_root(
    root: &Path,
    sources: &[Source],
    proc_fd: &OwnedFd,
    cache_fd: Option<&OwnedFd>,
) -> Result<(), ConfineError> {
    // The private /tmp first, so that a read path under /tmp is bound on it.
    tmpfs(&root.join("tmp"), &format!("mode=1777,{TMP_SIZE}"))?;
    for src in sources {
        let target = root.join(src.path.strip_prefix("/").unwrap_or(&src.path));
        if present(&target) {
            // Already shown by an earlier bind (a read path under /usr).
            continue;
        }
        show(src, &target)?;
    }
    if let Some(fd) = cache_fd {
        let target = root.join("tmp/cache");
        std::fs::create_dir_all(&target).map_err(|e| ConfineError::path("making", &target, e))?;
        bind(fd, &target, false)?;
    }
    dev_links(root)?;
    let proc = root.join("proc");
    std::fs::create_dir_all(&proc).map_err(|e| ConfineError::path("making", &proc, e))?;
    let fresh = mount(
        Some("proc"),
        &proc,
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    );
    if let Err(e) = fresh {
        // Some hosts refuse a new proc in a user namespace (a container
        // whose /proc has paths masked): the host's, then. Other
        // processes' entries show there, but closed (non-dumpable, not
        // signalable from this pid namespace).
        log::debug!("a proc of the tenant's own: {e}; binding the host's");
        bind(proc_fd, &proc, false)?;
    }
    let old = root.join(".old");
    std::fs::create_dir_all(&old).map_err(|e| ConfineError::path("making", &old, e))?;
    sys("pivot_root", nix::unistd::pivot_root(root, &old))?;
    sys("chdir", nix::unistd::chdir("/"))?;
    sys(
        "unmounting the old root",
        umount2("/.old", MntFlags::MNT_DETACH),
    )?;
    let _ = std::fs::remove_dir("/.old");
    // The skeleton itself read-only: nothing can be added beside the binds.
    set_mount_flags(
        "read-only root",
        "/",
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID,
    )?;
    Ok(())
}

/// /dev's usual links, and a private /dev/shm.
fn dev_links(root: &Path) -> Result<(), ConfineError> {
    let dev = root.join("dev");
    std::fs::create_dir_all(&dev).map_err(|e| ConfineError::path("making", &dev, e))?;
    for (name, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let _ = std::os::unix::fs::symlink(to, dev.join(name));
    }
    tmpfs(&dev.join("shm"), "mode=1777,size=64m")
}
