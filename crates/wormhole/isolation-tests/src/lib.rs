//! Helpers for Wormhole's isolation tests: a real server process with its
//! own socket and ICD directory, a raw-protocol client that speaks frames
//! directly (the tool for forged input), and per-process accounting read
//! from /proc.
//!
//! The server binary and the ICD are taken from the cargo target directory
//! that holds the test binary; build them first with
//! `cargo build -p wormhole-server -p wormhole-opencl-icd`.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use thiserror::Error;
use wormhole_opencl_api::{func, CL_SUCCESS};
use wormhole_server::harness::Frame;
use wormhole_transport::hello::recv_hello;
use wormhole_transport::shm::{Layout, Region, ShmChannel, Side};
use wormhole_transport::{Channel, TransportError};
use wormhole_wire::{Decoder, ReplyHeader};

#[derive(Debug, Error)]
pub enum TestError {
    #[error(
        "{0} not found: build it with `cargo build -p wormhole-server -p wormhole-opencl-icd`"
    )]
    Missing(PathBuf),
    #[error("server did not start listening on {0}")]
    NoListen(PathBuf),
    #[error("transport: {0}")]
    Transport(#[from] TransportError),
    #[error("wire: {0}")]
    Wire(#[from] wormhole_wire::WireError),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Protocol(String),
}

/// The cargo profile directory (e.g. `target/debug`) of this test binary.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

fn artifact(name: &str) -> Result<PathBuf, TestError> {
    let p = profile_dir().join(name);
    if p.exists() {
        Ok(p)
    } else {
        Err(TestError::Missing(p))
    }
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// Compiles `c/<name>.c` of this crate (an OpenCL program in C, linked with
/// the system's libOpenCL) into a fresh temporary directory; `$CC`, or
/// `cc`. The directory goes with the returned guard.
pub fn compile_c(name: &str) -> Result<CProgram, TestError> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("c")
        .join(format!("{name}.c"));
    let dir = std::env::temp_dir().join(format!(
        "wh-isolation-c-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)?;
    let bin = dir.join(name);
    let out = Command::new(std::env::var_os("CC").unwrap_or_else(|| "cc".into()))
        .args([
            "-O1",
            "-Wall",
            "-Werror",
            "-Wno-deprecated-declarations",
            "-o",
        ])
        .arg(&bin)
        .arg(&src)
        .arg("-lOpenCL")
        .output()?;
    if !out.status.success() {
        return Err(TestError::Protocol(format!(
            "compiling {}: {}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(CProgram { dir, bin })
}

/// A compiled C program and the directory it lives in (removed on drop).
pub struct CProgram {
    dir: PathBuf,
    pub bin: PathBuf,
}

impl Drop for CProgram {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A running `wormhole-server` in a private directory; killed (with its
/// tenants) and cleaned up on drop.
pub struct Server {
    pub child: Child,
    pub dir: PathBuf,
    pub socket: PathBuf,
    /// A directory for `OCL_ICD_VENDORS` naming only our ICD.
    pub icd_dir: PathBuf,
}

/// Whether a Unix socket at `path` is listening, from /proc/net/unix,
/// without connecting (a connection would start a tenant). The file alone
/// is not enough: it exists from `bind`, and a connect before `listen` is
/// refused (CI saw that). Without /proc, the file is taken as the sign.
fn listening(path: &Path) -> bool {
    /// `__SO_ACCEPTCON` in the flags column.
    const ACCEPTING: u32 = 1 << 16;
    let Ok(table) = std::fs::read_to_string("/proc/net/unix") else {
        return path.exists();
    };
    let want = path.to_string_lossy();
    table.lines().skip(1).any(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        cols.len() >= 8
            && cols[7] == want
            && u32::from_str_radix(cols[3], 16).is_ok_and(|f| f & ACCEPTING != 0)
    })
}

impl Server {
    pub fn start() -> Result<Self, TestError> {
        Self::start_with(&[])
    }

    /// A server started with these extra flags.
    pub fn start_with(args: &[&str]) -> Result<Self, TestError> {
        let bin = artifact("wormhole-server")?;
        let icd = artifact("libwormhole_opencl.so")?;
        let dir = std::env::temp_dir().join(format!(
            "wh-isolation-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let icd_dir = dir.join("icd");
        std::fs::create_dir_all(&icd_dir)?;
        std::fs::write(icd_dir.join("wormhole.icd"), format!("{}\n", icd.display()))?;
        let socket = dir.join("wormhole.sock");
        let log = std::fs::File::create(dir.join("server.log"))?;
        let child = Command::new(bin)
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .env("RUST_LOG", "info")
            .env("WORMHOLE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        let s = Server {
            child,
            dir,
            socket,
            icd_dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if listening(&s.socket) {
                return Ok(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(TestError::NoListen(s.socket.clone()))
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The tenant processes: the server's live children.
    pub fn tenants(&self) -> Vec<i32> {
        children(self.pid())
    }

    /// Waits until a tenant not in `before` appears.
    pub fn new_tenant(&self, before: &[i32], timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(p) = self.tenants().into_iter().find(|p| !before.contains(p)) {
                return Some(p);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Environment for an application that should see only this server.
    pub fn client_env(&self, cmd: &mut Command) {
        cmd.env("OCL_ICD_VENDORS", &self.icd_dir)
            .env("WORMHOLE_SERVER", &self.socket)
            .env_remove("WORMHOLE_IN_SERVER");
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        for t in self.tenants() {
            kill9(t);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn kill9(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Fields of /proc/PID/stat after the command name (field 3 is index 0).
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Live (not zombie) children of `parent`.
pub fn children(parent: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| stat_fields(pid).is_some_and(|f| f[0] != "Z" && f[1].parse() == Ok(parent)))
        .collect()
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    stat_fields(pid).is_some_and(|f| f[0] != "Z")
}

/// CPU time (user + system, all threads) of a process, in milliseconds.
pub fn cpu_ms(pid: i32) -> Option<u64> {
    let f = stat_fields(pid)?;
    let ticks: u64 = f[11].parse::<u64>().ok()? + f[12].parse::<u64>().ok()?;
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(ticks * 1000 / hz)
}

/// Resident memory of a process in KiB.
pub fn rss_kib(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Memory in the buffer arena a process holds open (shared with its peer,
/// so not in its resident set until it touches it), in KiB.
pub fn arena_kib(pid: i32) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    rd.flatten()
        .filter(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|l| l.to_string_lossy().contains("memfd:wormhole-buffers"))
        })
        .filter_map(|e| std::fs::metadata(e.path()).ok())
        .map(|m| m.blocks() / 2)
        .sum()
}

/// A reply: its status and outputs (after the has-outputs byte).
pub struct Reply {
    pub status: i32,
    pub deferred: i32,
    pub body: Vec<u8>,
}

impl Reply {
    /// Decoder over the outputs, past the has-outputs byte.
    pub fn outputs(&self) -> Decoder<'_> {
        let mut d = Decoder::new(&self.body);
        let _ = d.u8();
        d
    }
}

/// A client that speaks the wire protocol directly over the shared-memory
/// transport, as a hostile application could.
pub struct RawClient {
    pub sock: UnixStream,
    pub chan: ShmChannel,
    /// The shared region's file, as the client received it.
    pub region_fd: OwnedFd,
    pub layout: Layout,
    buf: Vec<u8>,
}

impl RawClient {
    pub fn connect(path: &Path) -> Result<Self, TestError> {
        let sock = UnixStream::connect(path)?;
        let (hello, fds) = recv_hello(&sock)?;
        let (layout, fd) = match (hello.layout, fds.into_iter().next()) {
            (Some(l), Some(fd)) => (l, fd),
            _ => return Err(TestError::Protocol("no shared memory in greeting".into())),
        };
        let region_fd = fd.try_clone()?;
        let region = Region::open(fd, layout)?;
        let peek = sock.try_clone()?;
        let alive = move || {
            let mut b = [0u8; 1];
            // SAFETY: a non-blocking peek into a 1-byte buffer we own.
            let n = unsafe {
                libc::recv(
                    peek.as_raw_fd(),
                    b.as_mut_ptr().cast(),
                    1,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            !(n == 0
                || (n < 0
                    && std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock))
        };
        let chan = ShmChannel::new(region, Side::Client, hello.handoff, Some(Box::new(alive)));
        Ok(RawClient {
            sock,
            chan,
            region_fd,
            layout,
            buf: Vec::new(),
        })
    }

    /// Sends a frame and waits for its reply.
    pub fn call(&mut self, frame: &[u8]) -> Result<Reply, TestError> {
        self.chan.send(frame)?;
        self.chan.flush()?;
        self.chan.recv(&mut self.buf)?;
        let mut d = Decoder::new(&self.buf);
        let h = ReplyHeader::decode(&mut d)?;
        Ok(Reply {
            status: h.status,
            deferred: h.deferred_status,
            body: self.buf[8..].to_vec(),
        })
    }

    /// The status of a call.
    pub fn status(&mut self, frame: &[u8]) -> Result<i32, TestError> {
        Ok(self.call(frame)?.status)
    }

    /// Whether the server has closed our control socket (the tenant ended).
    pub fn cut_off_within(&mut self, timeout: Duration) -> bool {
        let _ = self.sock.set_read_timeout(Some(timeout));
        let mut b = [0u8; 16];
        match self.sock.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

fn expect_ok(what: &str, r: &Reply) -> Result<(), TestError> {
    if r.status == CL_SUCCESS {
        Ok(())
    } else {
        Err(TestError::Protocol(format!("{what} failed: {}", r.status)))
    }
}

/// A well-behaved tenant on the raw protocol: a context, a queue and a
/// buffer, with a write-then-read check of its contents.
pub struct Session {
    pub client: RawClient,
    pub platform: u64,
    pub device: u64,
    pub context: u64,
    pub queue: u64,
    pub buffer: u64,
    next_id: u64,
}

/// Makes the call `what` (clGetPlatformIDs, clGetDeviceIDs: its output
/// an optional list of ids) and returns the first id.
fn first_id(client: &mut RawClient, what: &str, frame: &[u8]) -> Result<u64, TestError> {
    let r = client.call(frame)?;
    expect_ok(what, &r)?;
    let mut d = r.outputs();
    let ids = if d.bool()? { d.u64s()? } else { Vec::new() };
    ids.first()
        .copied()
        .ok_or_else(|| TestError::Protocol(format!("{what} returned no id")))
}

/// A clCreateBuffer request: 64 bytes, read-write, no host pointer, in
/// `context`, under the client's new id `id`.
pub fn create_buffer_frame(context: u64, id: u64) -> Vec<u8> {
    Frame::new(func::clCreateBuffer)
        .h(context)
        .u64(1)
        .u64(64)
        .u8(0)
        .u64(id)
        .done()
}

/// A clEnqueueReadBuffer request: a blocking read of `size` bytes at
/// `offset` of `mem` on `queue`, into a host buffer, with no events.
pub fn read_buffer_frame(queue: u64, mem: u64, offset: u64, size: u64) -> Vec<u8> {
    Frame::new(func::clEnqueueReadBuffer)
        .h(queue)
        .h(mem)
        .u32(1)
        .u64(offset)
        .u64(size)
        .b(true)
        .no_events()
        .done()
}

/// A tenant beside the one under test, whose own data must keep coming
/// back exactly whatever the other does.
pub struct Neighbour {
    pub session: Session,
    round: u8,
}

impl Neighbour {
    pub fn open(path: &Path) -> Result<Self, TestError> {
        Ok(Neighbour {
            session: Session::open(path)?,
            round: 0,
        })
    }

    /// Asserts that a round trip of a fresh pattern still returns exactly it.
    #[track_caller]
    pub fn ok(&mut self) {
        self.round = self.round.wrapping_add(1);
        assert!(
            self.session.round_trip(self.round).expect("neighbour call"),
            "the neighbour got wrong data back"
        );
    }

    /// Makes a 64-byte buffer in the neighbour's context under `id` (an id
    /// the tenant under test then forges).
    #[track_caller]
    pub fn make_buffer(&mut self, id: u64) {
        let f = create_buffer_frame(self.session.context, id);
        let status = self.session.client.status(&f).expect("neighbour's buffer");
        assert_eq!(status, CL_SUCCESS);
    }
}

/// Bytes in a [`Session`]'s buffer.
pub const SESSION_BUFFER: usize = 4096;

impl Session {
    pub fn open(path: &Path) -> Result<Self, TestError> {
        let mut client = RawClient::connect(path)?;
        let platforms = Frame::new(func::clGetPlatformIDs)
            .u32(8)
            .b(true)
            .b(true)
            .done();
        let platform = first_id(&mut client, "clGetPlatformIDs", &platforms)?;
        let devices = Frame::new(func::clGetDeviceIDs)
            .h(platform)
            .u64(u64::from(u32::MAX))
            .u32(1)
            .b(true)
            .b(true)
            .done();
        let device = first_id(&mut client, "clGetDeviceIDs", &devices)?;
        let mut s = Session {
            client,
            platform,
            device,
            context: 1,
            queue: 2,
            buffer: 3,
            next_id: 100,
        };
        let f = Frame::new(func::clCreateContext)
            .b(false)
            .u32(1)
            .ids(&[device])
            // No callback, and no user data.
            .b(false)
            .b(false)
            .u64(s.context)
            .done();
        let r = s.client.call(&f)?;
        expect_ok("clCreateContext", &r)?;
        let f = Frame::new(func::clCreateCommandQueue)
            .h(s.context)
            .h(device)
            .u64(0)
            .u64(s.queue)
            .done();
        expect_ok("clCreateCommandQueue", &s.client.call(&f)?)?;
        let f = Frame::new(func::clCreateBuffer)
            .h(s.context)
            .u64(1)
            .u64(SESSION_BUFFER as u64)
            .u8(0)
            .u64(s.buffer)
            .done();
        expect_ok("clCreateBuffer", &s.client.call(&f)?)?;
        Ok(s)
    }

    /// A fresh client-side id.
    pub fn fresh(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub fn write_frame(&self, data: &[u8]) -> Vec<u8> {
        Frame::new(func::clEnqueueWriteBuffer)
            .h(self.queue)
            .h(self.buffer)
            .u32(1)
            .u64(0)
            .u64(data.len() as u64)
            .opt(Some(data))
            .no_events()
            .done()
    }

    /// An 8-byte value (a cl_ulong or a handle) that the info query `f`
    /// (one of the clGet*Info calls) answers about `handle` for `param`.
    pub fn info_u64(&mut self, f: u32, handle: u64, param: u32) -> Result<u64, TestError> {
        let r = self
            .client
            .call(&Frame::new(f).h(handle).info(param, 8).done())?;
        expect_ok("an info query", &r)?;
        let value = r
            .outputs()
            .opt_bytes()?
            .ok_or_else(|| TestError::Protocol("an info query returned no value".into()))?;
        let bytes = value
            .try_into()
            .map_err(|_| TestError::Protocol(format!("{} bytes, not 8", value.len())))?;
        Ok(u64::from_le_bytes(bytes))
    }

    pub fn read_frame(&self, offset: u64, size: u64) -> Vec<u8> {
        read_buffer_frame(self.queue, self.buffer, offset, size)
    }

    /// Writes a pattern derived from `seed` and reads it back: true when
    /// the server returned exactly what was written.
    pub fn round_trip(&mut self, seed: u8) -> Result<bool, TestError> {
        let data: Vec<u8> = (0..SESSION_BUFFER)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect();
        let f = self.write_frame(&data);
        expect_ok("clEnqueueWriteBuffer", &self.client.call(&f)?)?;
        let f = self.read_frame(0, SESSION_BUFFER as u64);
        let r = self.client.call(&f)?;
        expect_ok("clEnqueueReadBuffer", &r)?;
        let mut d = r.outputs();
        Ok(d.opt_bytes()? == Some(&data[..]))
    }
}
