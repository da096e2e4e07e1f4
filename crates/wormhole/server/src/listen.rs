//! The server's main process: it accepts connections and starts one tenant
//! process per client (the published design's fork per client), so that one
//! tenant's crash or bad input cannot reach another. It never loads the
//! OpenCL library itself; each tenant does, after exec.

use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use wormhole_transport::auth::Token;

#[derive(Debug, Error)]
pub enum ListenError {
    #[error("binding {path}: {err}")]
    Bind { path: String, err: std::io::Error },
    #[error("another server is listening on {0}")]
    InUse(PathBuf),
    #[error("{path} is taken by a socket of uid {owner}, which is listening: not ours to replace (choose another --socket)")]
    TakenBy { path: PathBuf, owner: u32 },
    #[error("no group named {0:?} (socket_group)")]
    NoGroup(String),
    #[error("giving {path} its mode and group: {err}")]
    Access { path: PathBuf, err: std::io::Error },
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Who may connect to the Unix socket: its file's mode and group.
#[derive(Debug, Clone)]
pub struct SocketAccess {
    pub mode: u32,
    pub group: Option<String>,
}

/// The file descriptor a tenant process finds its connection on.
pub const TENANT_FD: RawFd = 3;

/// Set in tenant processes: our own client libraries, if the system has
/// them registered, then offer no platform, so a server never forwards to
/// itself.
pub use wormhole_transport::client::IN_SERVER_ENV;

/// The binary tenants are started from: this server's own, held open from
/// the start, so that rebuilding or upgrading it under a running server
/// neither breaks new tenants nor gives them another version than the
/// listener's. Executed through `/proc/self/fd`, which names it in the
/// child too; without /proc, the path it was started from.
struct TenantExe {
    /// Keeps the inode alive after the path is replaced or removed.
    _file: Option<std::fs::File>,
    path: PathBuf,
}

impl TenantExe {
    fn open() -> std::io::Result<TenantExe> {
        match std::fs::File::open("/proc/self/exe").and_then(above_tenant_fd) {
            Ok(f) => Ok(TenantExe {
                path: PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())),
                _file: Some(f),
            }),
            Err(e) => {
                log::warn!("holding this binary open ({e}): tenants start from its path");
                Ok(TenantExe {
                    _file: None,
                    path: std::env::current_exe()?,
                })
            }
        }
    }
}

/// `f` on a descriptor above every number a tenant finds one on (its
/// connection, its configuration, residency's link and store): those are
/// placed in the child before exec, which would replace the binary if it
/// were there (a server started with stdin closed can get one).
fn above_tenant_fd(f: std::fs::File) -> std::io::Result<std::fs::File> {
    const LAST_PLACED: RawFd = max_fd(max_fd(TENANT_FD, CONFIG_FD), crate::residency::STORE_FD);
    if f.as_raw_fd() > LAST_PLACED {
        return Ok(f);
    }
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own returns a new one (or
    // -1), which nothing else owns.
    let fd = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_DUPFD_CLOEXEC, LAST_PLACED + 1) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned to us and is owned by nothing else.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

const fn max_fd(a: RawFd, b: RawFd) -> RawFd {
    if a > b {
        a
    } else {
        b
    }
}

/// How many tenant processes live, against the most that may.
pub struct Tenants {
    live: AtomicUsize,
    /// 0: no limit.
    max: usize,
    /// Clients refused since the last tenant ended: the first refusal of
    /// a full spell is logged, and the count when it ends, not each one.
    refused: AtomicUsize,
    /// The live tenants' process ids. An id leaves under this lock before
    /// its process is reaped, so a signal sent under it never reaches a
    /// process that reused the number.
    pids: std::sync::Mutex<std::collections::BTreeSet<u32>>,
}

impl Tenants {
    pub fn new(max: usize) -> Tenants {
        Tenants {
            live: AtomicUsize::new(0),
            max,
            refused: AtomicUsize::new(0),
            pids: Default::default(),
        }
    }

    /// Logs how many tenants live and sends each `SIGUSR1`, for its own
    /// report (see `report`).
    pub fn ask_for_reports(&self) {
        let pids = self.pids.lock().unwrap_or_else(|e| e.into_inner());
        log::warn!(
            "serving {} tenants (max_tenants {}); asking each for its report",
            pids.len(),
            self.max
        );
        for &pid in pids.iter() {
            // SAFETY: kill takes no pointers; `pid` is a child not yet
            // reaped (it leaves the set, under this lock, first).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGUSR1) };
        }
    }

    /// Takes a place for a new tenant, if one is free.
    fn admit(&self) -> bool {
        if self.max == 0 {
            self.live.fetch_add(1, Ordering::SeqCst);
            return true;
        }
        let taken = self
            .live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            });
        taken.is_ok()
    }

    /// Gives back a tenant's place.
    fn leave(&self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
        let refused = self.refused.swap(0, Ordering::SeqCst);
        if refused > 0 {
            log::warn!("a client's place is free again; {refused} refused while all were taken");
        }
    }

    /// Tells a client there is no place for it; the caller then drops the
    /// connection.
    fn refuse(&self, fd: RawFd) {
        if self.refused.fetch_add(1, Ordering::SeqCst) == 0 {
            log::warn!(
                "serving {} clients, the most allowed (max_tenants): refusing new ones until one ends",
                self.max
            );
        }
        let limit = u32::try_from(self.max).unwrap_or(u32::MAX);
        let b = wormhole_transport::hello::full_bytes(limit);
        // Non-blocking: a fresh connection's send buffer has room, and if it
        // has not, the client only learns less (it sees the connection
        // closed).
        use nix::sys::socket::{send, MsgFlags};
        if let Err(e) = send(fd, &b, MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT) {
            log::debug!("telling a client the server is full: {e}");
        }
    }
}

/// The descriptor a tenant finds its configuration file on (opened for it,
/// read-only, before it takes its own uid).
pub const CONFIG_FD: RawFd = 5;

/// Set in a tenant's environment: who its client is, as the listener saw
/// it (in its own namespaces the tenant could only see a pid of 0).
pub const CLIENT_ENV: &str = "WORMHOLE_CLIENT";

/// How tenants are started: the binary, the flags that carry the
/// configuration, and the jailer that confines each one.
pub struct Spawner {
    exe: TenantExe,
    args: Vec<String>,
    config: Option<PathBuf>,
    jailer: wormhole_confine::Jailer,
}

impl Spawner {
    pub fn new(
        args: Vec<String>,
        config: Option<PathBuf>,
        policy: wormhole_confine::Policy,
    ) -> std::io::Result<Spawner> {
        let jailer = wormhole_confine::Jailer::new(policy);
        let support = jailer.support();
        let complete = support.namespaces.is_ok()
            && support.uids.is_ok()
            && support.cgroup.is_ok()
            && support.landlock.is_ok();
        if support.enabled && !complete {
            log::warn!("tenant confinement: {support}");
        } else {
            log::info!("tenant confinement: {support}");
        }
        Ok(Spawner {
            exe: TenantExe::open()?,
            args,
            config: config.map(|p| std::fs::canonicalize(&p).unwrap_or(p)),
            jailer,
        })
    }
}

fn spawn_tenant(spawner: &Spawner, fd: RawFd, tenants: &Arc<Tenants>) -> std::io::Result<()> {
    let client = describe_client(fd);
    let mut args = spawner.args.clone();
    args.push("tenant".into());
    // Delay storing: the link to the device's ledger (and a store file).
    let link = crate::residency::spawn::TenantLink::new().map_err(std::io::Error::other)?;
    let mut fds = vec![(fd, TENANT_FD)];
    fds.extend(
        link.iter()
            .flat_map(|l| l.child_fds())
            .filter(|&(from, _)| from >= 0),
    );
    let cmd = wormhole_confine::TenantCommand {
        exe: spawner.exe.path.clone(),
        argv0: "wormhole-server".into(),
        args,
        env: vec![
            (IN_SERVER_ENV.into(), "1".into()),
            (CLIENT_ENV.into(), client.clone()),
        ],
        fds,
        open_files: spawner
            .config
            .iter()
            .map(|p| (p.clone(), CONFIG_FD))
            .collect(),
        client_uid: match peer(fd) {
            Ok(Peer::Unix { uid, .. }) => Some(uid),
            _ => None,
        },
    };
    let jailed = spawner
        .jailer
        .spawn(&cmd)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let pid = jailed.pid;
    if let Some(l) = link {
        l.started(pid);
    }
    log::info!(
        "tenant process {pid} (uid {}) started for {client}",
        jailed.uid
    );
    tenants
        .pids
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(pid);
    // Reap it when it exits (no zombies), and only then give its place
    // back. Not SIGCHLD = SIG_IGN: that is inherited across exec, and a
    // tenant's OpenCL library waits for its own children (PoCL runs the
    // linker), which then fails with ECHILD.
    let tenants = tenants.clone();
    let reaper = std::thread::Builder::new()
        .name(format!("reap-{pid}"))
        .spawn(move || {
            // Wait for the end without reaping, so that the id leaves the
            // set (under its lock) while it is still this child's.
            jailed.wait_for_end();
            let status = {
                let mut pids = tenants.pids.lock().unwrap_or_else(|e| e.into_inner());
                pids.remove(&pid);
                jailed.reap()
            };
            // Its cgroup, uid and temporary directory go back before its
            // place does.
            drop(jailed);
            tenants.leave();
            match status {
                Ok(st) => log::info!("tenant process {pid} ({client}) ended ({st:?})"),
                Err(e) => log::info!("tenant process {pid} ({client}) ended (wait: {e})"),
            }
        });
    if let Err(e) = reaper {
        // The child runs unwatched: its place stays taken (a zombie would
        // too), which errs on the side of the limit.
        log::error!("cannot watch tenant process {pid}: {e}");
    }
    Ok(())
}

/// Who is at the other end of a client's connection, for the log: a local
/// process's pid and uid (from the kernel, not the client's word), or a
/// TCP peer's address.
pub fn describe_client(fd: RawFd) -> String {
    match peer(fd) {
        Ok(Peer::Unix { pid, uid }) => format!("unix client pid {pid} uid {uid}"),
        Ok(Peer::Tcp(a)) => format!("tcp client {a}"),
        Err(e) => format!("a client ({e})"),
    }
}

enum Peer {
    Unix { pid: i32, uid: u32 },
    Tcp(String),
}

fn peer(fd: RawFd) -> nix::Result<Peer> {
    use nix::sys::socket::{getpeername, getsockopt, sockopt::PeerCredentials, SockaddrStorage};
    // SAFETY: `fd` is the accepted connection, open for this call's length.
    let sock = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    match getpeername::<SockaddrStorage>(fd) {
        // (A TCP socket answers SO_PEERCRED too, with nobody's credentials.)
        Ok(a) if a.as_unix_addr().is_some() => {
            getsockopt(&sock, PeerCredentials).map(|c| Peer::Unix {
                pid: c.pid(),
                uid: c.uid(),
            })
        }
        Ok(a) => Ok(Peer::Tcp(a.to_string())),
        Err(e) => Err(e),
    }
}

/// Starts a tenant for a connection, if the limit leaves a place; a
/// failure costs only that client.
fn start_tenant(spawner: &Spawner, fd: RawFd, tenants: &Arc<Tenants>) {
    if !tenants.admit() {
        tenants.refuse(fd);
        return;
    }
    if let Err(e) = spawn_tenant(spawner, fd, tenants) {
        tenants.live.fetch_sub(1, Ordering::SeqCst);
        log::error!("starting a tenant: {e}");
    }
}

/// Challenges a TCP client for the token, bounded in time, and starts its
/// tenant if it answers right.
fn authenticated_tenant(
    mut s: TcpStream,
    token: &Token,
    spawner: &Spawner,
    tenants: &Arc<Tenants>,
) {
    let peer = s
        .peer_addr()
        .map_or_else(|_| "?".to_string(), |a| a.to_string());
    let timed = |s: &TcpStream, t: Option<Duration>| {
        s.set_read_timeout(t).and_then(|_| s.set_write_timeout(t))
    };
    let passed = timed(&s, Some(AUTH_TIMEOUT))
        .map_err(wormhole_transport::TransportError::from)
        .and_then(|_| wormhole_transport::auth::challenge(&mut s, token));
    match passed {
        // The tenant inherits the socket and its timeouts: clear them.
        Ok(true) => match timed(&s, None) {
            Ok(()) => start_tenant(spawner, s.as_raw_fd(), tenants),
            Err(e) => log::warn!("tcp client {peer}: {e}"),
        },
        Ok(false) => log::warn!("tcp client {peer}: wrong token, refused"),
        Err(e) => log::info!("tcp client {peer}: no answer to the token challenge ({e})"),
    }
}

/// Binds the Unix socket, replacing a stale one but never a live server's,
/// and opens it to whom `access` says: never wider, not even for a moment.
pub fn bind_unix(path: &Path, access: &SocketAccess) -> Result<UnixListener, ListenError> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            // Someone else's, in /tmp say: our clients would not use it
            // (see `foreign_default_socket`), and we cannot take it over.
            if let Some(owner) = wormhole_transport::foreign_default_socket(path) {
                return Err(ListenError::TakenBy {
                    path: path.into(),
                    owner,
                });
            }
            return Err(ListenError::InUse(path.into()));
        }
        let _ = std::fs::remove_file(path);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).ok();
    }
    let gid = match &access.group {
        Some(g) => Some(
            nix::unistd::Group::from_name(g)
                .ok()
                .flatten()
                .ok_or_else(|| ListenError::NoGroup(g.clone()))?
                .gid,
        ),
        None => None,
    };
    // Bound under a umask that leaves the file its owner's alone (the
    // process is still single-threaded here, so the umask is ours), then
    // given its group and mode.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    nix::sys::stat::umask(old);
    let listener = bound.map_err(|err| ListenError::Bind {
        path: path.display().to_string(),
        err,
    })?;
    let access_err = |err: std::io::Error| ListenError::Access {
        path: path.into(),
        err,
    };
    if gid.is_some() {
        nix::unistd::chown(path, None, gid).map_err(|e| access_err(e.into()))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(access.mode))
        .map_err(access_err)?;
    Ok(listener)
}

/// How long a TCP client may take to answer the token challenge.
const AUTH_TIMEOUT: Duration = Duration::from_secs(5);
/// Most TCP clients being challenged at once; more are dropped, so that
/// silent connections cannot pile up threads.
const MAX_PENDING_AUTH: usize = 64;

/// Paces a loop of `accept` after a failure. A connection that could not
/// be accepted for want of a resource (EMFILE, ENFILE, ENOBUFS, ENOMEM)
/// stays queued, so accepting again at once fails again: the loop would
/// spin on a CPU and flood the log. Each failure in a row waits twice as
/// long as the one before, from 5 ms up to 1 s; a success resets it.
#[derive(Default)]
struct AcceptPace {
    delay: Duration,
}

impl AcceptPace {
    const FIRST: Duration = Duration::from_millis(5);
    const MOST: Duration = Duration::from_secs(1);

    fn failed(&mut self, what: &str, e: &std::io::Error) {
        self.delay = (self.delay * 2).clamp(Self::FIRST, Self::MOST);
        log::warn!(
            "accept ({what}): {e}; trying again in {} ms",
            self.delay.as_millis()
        );
        std::thread::sleep(self.delay);
    }

    fn succeeded(&mut self) {
        self.delay = Duration::ZERO;
    }
}

/// Accepts clients forever, starting each one's tenant with `spawner`. TCP
/// clients must answer the token challenge first when there is a token.
/// At most `max_tenants` clients are served at once (0: no limit); others
/// are told so and let go.
pub fn run(
    unix: UnixListener,
    tcp: Option<(TcpListener, Option<Token>)>,
    spawner: Spawner,
    max_tenants: usize,
) -> Result<(), ListenError> {
    let spawner = Arc::new(spawner);
    let tenants = Arc::new(Tenants::new(max_tenants));
    crate::report::listener_reporter(tenants.clone());
    if let Some((tcp, token)) = tcp {
        let (spawner, tenants) = (spawner.clone(), tenants.clone());
        let token = token.map(Arc::new);
        let pending = Arc::new(AtomicUsize::new(0));
        std::thread::spawn(move || {
            let mut pace = AcceptPace::default();
            for conn in tcp.incoming() {
                let s = match conn {
                    Ok(s) => s,
                    Err(e) => {
                        pace.failed("tcp", &e);
                        continue;
                    }
                };
                pace.succeeded();
                let _ = s.set_nodelay(true);
                let Some(token) = token.clone() else {
                    start_tenant(&spawner, s.as_raw_fd(), &tenants);
                    continue;
                };
                if pending.fetch_add(1, Ordering::SeqCst) >= MAX_PENDING_AUTH {
                    pending.fetch_sub(1, Ordering::SeqCst);
                    log::warn!("too many TCP clients answering the token challenge: one dropped");
                    continue;
                }
                let (spawner, pending, tenants) =
                    (spawner.clone(), pending.clone(), tenants.clone());
                std::thread::spawn(move || {
                    authenticated_tenant(s, &token, &spawner, &tenants);
                    pending.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
    }
    let mut pace = AcceptPace::default();
    for conn in unix.incoming() {
        match conn {
            Ok(s) => {
                pace.succeeded();
                start_tenant(&spawner, s.as_raw_fd(), &tenants);
            }
            Err(e) => pace.failed("unix", &e),
        }
    }
    Ok(())
}
