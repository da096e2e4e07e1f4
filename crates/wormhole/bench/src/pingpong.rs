//! Raw ping-pongs between two processes: the lower bounds a forwarded call's
//! round trip is judged against.
//!
//! * `futex` / `spin`: one word per direction in shared memory (a memfd), with
//!   the same waiting protocol as Wormhole's rings (`ring/`): the waiter
//!   announces itself in a `waiting` word, the poster wakes only if someone
//!   sleeps. `spin` polls up to `polls` times before sleeping, as the
//!   server's spin mode does; `futex` sleeps at once. The futex calls are
//!   wormhole-transport's own.
//! * `tcp`: 30-byte messages each way over loopback with TCP_NODELAY.
//! * `shm-futex` / `shm-spin`: Wormhole's real `ShmChannel` (rings, length
//!   prefixes, copies) carrying 30-byte frames each way: the transport alone,
//!   without OpenCL.
//!
//! The parent process measures; the child (this program, re-executed with
//! [`CHILD_ARG`]) answers.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use thiserror::Error;
use wormhole_transport::shm::{Layout, Region, ShmChannel, Side};
use wormhole_transport::{futex, Channel, Handoff, TransportError};

/// First argument of the re-executed child.
pub const CHILD_ARG: &str = "pingpong-child";

/// Bytes of a request and of a reply: the size of a `clGetEventInfo` frame.
pub const MSG_BYTES: usize = 30;

/// No single wait may take longer than this: a stuck peer is an error.
const STUCK: Duration = Duration::from_secs(20);

#[derive(Debug, Error)]
pub enum PingError {
    #[error("system call: {0}")]
    Sys(#[from] nix::Error),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("transport: {0}")]
    Transport(#[from] TransportError),
    #[error("the peer did not answer within {0:?}")]
    Stuck(Duration),
    #[error("bad child arguments: {0}")]
    Args(String),
}

/// Which primitive to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prim {
    /// Shared-memory words; sleep on a futex after `polls` polls (0: at once).
    Word {
        polls: u32,
    },
    Tcp,
    /// Wormhole's ShmChannel with this handoff.
    Channel(Handoff),
}

impl Prim {
    fn to_args(self) -> Vec<String> {
        match self {
            Prim::Word { polls } => vec!["word".into(), polls.to_string()],
            Prim::Tcp => vec!["tcp".into(), "0".into()],
            Prim::Channel(h) => vec!["chan".into(), handoff_arg(h)],
        }
    }
}

fn handoff_arg(h: Handoff) -> String {
    match h {
        Handoff::Futex => "futex".into(),
        Handoff::Spin { polls } => format!("spin:{polls}"),
        Handoff::SameCore => "same-core".into(),
    }
}

fn parse_handoff(s: &str) -> Option<Handoff> {
    match s {
        "futex" => Some(Handoff::Futex),
        "same-core" => Some(Handoff::SameCore),
        _ => s
            .strip_prefix("spin:")?
            .parse()
            .ok()
            .map(|polls| Handoff::Spin { polls }),
    }
}

/// One direction's mailbox, on its own cache line.
#[repr(C, align(64))]
struct Mailbox {
    seq: AtomicU32,
    waiting: AtomicU32,
}

/// The shared page: parent-to-child and child-to-parent mailboxes.
#[repr(C)]
struct Page {
    ping: Mailbox,
    pong: Mailbox,
}

impl Mailbox {
    fn post(&self, v: u32) {
        self.seq.store(v, Ordering::Release);
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) != 0 {
            futex::wake(&self.seq, 1);
        }
    }

    fn wait_for(&self, v: u32, polls: u32) -> Result<(), PingError> {
        for _ in 0..polls {
            if self.seq.load(Ordering::Acquire) == v {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        let start = Instant::now();
        loop {
            self.waiting.store(1, Ordering::SeqCst);
            let cur = self.seq.load(Ordering::SeqCst);
            if cur == v {
                self.waiting.store(0, Ordering::Relaxed);
                return Ok(());
            }
            futex::wait(&self.seq, cur, Some(Duration::from_millis(200)));
            self.waiting.store(0, Ordering::Relaxed);
            if self.seq.load(Ordering::Acquire) == v {
                return Ok(());
            }
            if start.elapsed() > STUCK {
                return Err(PingError::Stuck(STUCK));
            }
        }
    }
}

/// A shared mapping of one page of a memfd.
struct Shared {
    page: *const Page,
    _fd: OwnedFd,
}

// SAFETY: the mapping is shared memory touched only through atomics; moving
// the pointer to another thread changes nothing about that.
unsafe impl Send for Shared {}

impl Shared {
    fn map(fd: OwnedFd) -> Result<Self, PingError> {
        let len = std::num::NonZeroUsize::new(4096).ok_or(PingError::Args("len".into()))?;
        // SAFETY: a fresh shared mapping of a page-sized file we hold; it is
        // never unmapped while `Shared` lives (we leak it: the process is
        // short-lived), and only accessed through atomics.
        let p = unsafe {
            nix::sys::mman::mmap(
                None,
                len,
                nix::sys::mman::ProtFlags::PROT_READ | nix::sys::mman::ProtFlags::PROT_WRITE,
                nix::sys::mman::MapFlags::MAP_SHARED,
                &fd,
                0,
            )?
        };
        Ok(Shared {
            page: p.as_ptr() as *const Page,
            _fd: fd,
        })
    }

    fn page(&self) -> &Page {
        // SAFETY: the mapping is a page long, page-aligned, zero-filled by
        // ftruncate, and `Page` holds only atomics.
        unsafe { &*self.page }
    }
}

/// Pins this process to one CPU (for the same-core variants).
pub fn pin(cpu: usize) -> Result<(), PingError> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)?;
    Ok(())
}

fn spawn_child(
    prim: Prim,
    handle: &str,
    n: usize,
    pin_cpu: Option<usize>,
) -> Result<Child, PingError> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.arg(CHILD_ARG)
        .args(prim.to_args())
        .arg(handle)
        .arg(n.to_string())
        .arg(pin_cpu.map_or("-".to_string(), |c| c.to_string()))
        .stdin(Stdio::null());
    Ok(cmd.spawn()?)
}

/// Kills and reaps the child whatever happens to the measurement.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Measures `n` round trips (after `warmup` unmeasured ones); returns each
/// round trip's duration in nanoseconds.
pub fn measure(
    prim: Prim,
    n: usize,
    warmup: usize,
    pin_cpu: Option<usize>,
) -> Result<Vec<f64>, PingError> {
    if let Some(c) = pin_cpu {
        pin(c)?;
    }
    let total = n + warmup;
    let mut out = Vec::with_capacity(n);
    match prim {
        Prim::Word { polls } => {
            // No MFD_CLOEXEC: the child inherits the descriptor.
            let fd = nix::sys::memfd::memfd_create(
                c"wh-bench-pingpong",
                nix::sys::memfd::MemFdCreateFlag::empty(),
            )?;
            nix::unistd::ftruncate(&fd, 4096)?;
            let handle = fd.as_raw_fd().to_string();
            let sh = Shared::map(fd)?;
            let _child = ChildGuard(spawn_child(prim, &handle, total, pin_cpu)?);
            let p = sh.page();
            for i in 0..total as u32 {
                let t = Instant::now();
                p.ping.post(i + 1);
                p.pong.wait_for(i + 1, polls)?;
                if i as usize >= warmup {
                    out.push(t.elapsed().as_nanos() as f64);
                }
            }
        }
        Prim::Tcp => {
            let l = TcpListener::bind("127.0.0.1:0")?;
            let port = l.local_addr()?.port().to_string();
            let _child = ChildGuard(spawn_child(prim, &port, total, pin_cpu)?);
            let (mut s, _) = l.accept()?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(STUCK))?;
            let msg = [7u8; MSG_BYTES];
            let mut buf = [0u8; MSG_BYTES];
            for i in 0..total {
                let t = Instant::now();
                s.write_all(&msg)?;
                s.read_exact(&mut buf)?;
                if i >= warmup {
                    out.push(t.elapsed().as_nanos() as f64);
                }
            }
        }
        Prim::Channel(handoff) => {
            let region = Region::create(Layout::default())?;
            // dup() clears close-on-exec, so the child inherits this copy.
            let fd = nix::unistd::dup(region.fd().as_raw_fd())?;
            // SAFETY: dup just returned this descriptor to us alone.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let _child = ChildGuard(spawn_child(
                prim,
                &fd.as_raw_fd().to_string(),
                total,
                pin_cpu,
            )?);
            drop(fd);
            let mut ch = ShmChannel::new(region, Side::Client, handoff, None);
            let msg = [7u8; MSG_BYTES];
            let mut buf = Vec::new();
            for i in 0..total {
                let t = Instant::now();
                ch.send(&msg)?;
                ch.flush()?;
                ch.recv(&mut buf)?;
                if i >= warmup {
                    out.push(t.elapsed().as_nanos() as f64);
                }
            }
        }
    }
    Ok(out)
}

/// The child's side: `ARGS = KIND PARAM HANDLE COUNT PIN`.
pub fn child_main(args: &[String]) -> Result<(), PingError> {
    let [kind, param, handle, count, pin_cpu] = args else {
        return Err(PingError::Args(args.join(" ")));
    };
    let bad = |what: &str| PingError::Args(format!("{what}: {}", args.join(" ")));
    let count: usize = count.parse().map_err(|_| bad("count"))?;
    if let Ok(c) = pin_cpu.parse::<usize>() {
        pin(c)?;
    }
    match kind.as_str() {
        "word" => {
            let polls: u32 = param.parse().map_err(|_| bad("polls"))?;
            let raw: i32 = handle.parse().map_err(|_| bad("fd"))?;
            if nix::fcntl::fcntl(raw, nix::fcntl::FcntlArg::F_GETFD).is_err() {
                return Err(bad("fd not open"));
            }
            // SAFETY: the parent left this descriptor open for us alone
            // (checked open just above).
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let sh = Shared::map(fd)?;
            let p = sh.page();
            for i in 0..count as u32 {
                p.ping.wait_for(i + 1, polls)?;
                p.pong.post(i + 1);
            }
        }
        "tcp" => {
            let port: u16 = handle.parse().map_err(|_| bad("port"))?;
            let mut s = TcpStream::connect(("127.0.0.1", port))?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(STUCK))?;
            let mut buf = [0u8; MSG_BYTES];
            for _ in 0..count {
                s.read_exact(&mut buf)?;
                s.write_all(&buf)?;
            }
        }
        "chan" => {
            let raw: i32 = handle.parse().map_err(|_| bad("fd"))?;
            if nix::fcntl::fcntl(raw, nix::fcntl::FcntlArg::F_GETFD).is_err() {
                return Err(bad("fd not open"));
            }
            // SAFETY: the parent passed this descriptor (the channel's
            // region) to us alone and nothing else here owns it; fcntl
            // just above showed it open.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            let region = Region::open(fd, Layout::default())?;
            let handoff = parse_handoff(param).ok_or_else(|| bad("handoff"))?;
            // The parent's death shows as our parent changing.
            let parent = nix::unistd::getppid();
            let alive = Box::new(move || nix::unistd::getppid() == parent);
            let mut ch = ShmChannel::new(region, Side::Server, handoff, Some(alive));
            let reply = [9u8; MSG_BYTES];
            let mut buf = Vec::new();
            for _ in 0..count {
                ch.recv(&mut buf)?;
                ch.send(&reply)?;
                ch.flush()?;
            }
        }
        _ => return Err(bad("kind")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_rejects_bad_arguments() {
        assert!(child_main(&["word".into()]).is_err());
        let a: Vec<String> = ["word", "x", "3", "1", "-"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(matches!(child_main(&a), Err(PingError::Args(_))));
        let a: Vec<String> = ["word", "0", "987", "1", "-"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(matches!(child_main(&a), Err(PingError::Args(_))));
    }

    #[test]
    fn mailbox_handoff_between_threads() {
        let fd = nix::sys::memfd::memfd_create(c"t", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)
            .expect("memfd");
        nix::unistd::ftruncate(&fd, 4096).expect("truncate");
        let a = Shared::map(fd.try_clone().expect("dup")).expect("map");
        let b = Shared::map(fd).expect("map");
        let b = std::sync::Arc::new(std::sync::Mutex::new(b));
        let t = std::thread::spawn(move || {
            let g = b.lock().expect("lock");
            for i in 1..=100u32 {
                g.page().ping.wait_for(i, 0).expect("wait");
                g.page().pong.post(i);
            }
        });
        for i in 1..=100u32 {
            a.page().ping.post(i);
            a.page().pong.wait_for(i, 10).expect("wait");
        }
        t.join().expect("join");
    }
}
