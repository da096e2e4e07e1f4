//! Harness for Wormhole's OpenCL integration tests.
//!
//! Each test is a plain OpenCL C program under `tests/opencl/` that prints
//! what it observes (results, error codes) and exits non-zero when an
//! assertion fails. The harness compiles it with `cc`, runs it twice —
//! natively, with only PoCL's ICD visible to the loader, and through a
//! Wormhole server it starts on a private socket, with only Wormhole's ICD
//! visible — and checks that both runs succeed and print the same lines,
//! apart from lines starting with `~` (platform-specific, e.g. the
//! platform's name).
//!
//! The server and the ICD are other packages' artifacts, which cargo does
//! not build for this package's tests, so [`Artifacts::get`] runs
//! `cargo build -p wormhole-server -p wormhole-opencl-icd` once (same
//! profile; cargo releases its build lock before running tests) and finds
//! them in the target directory the test binary itself lives in.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use thiserror::Error;

/// What can go wrong in the harness itself (as opposed to a test's
/// observed behaviour, which is an assertion in the test).
#[derive(Debug, Error)]
pub enum HarnessError {
    #[error("{what}: {err}")]
    Io { what: String, err: std::io::Error },
    #[error("{0}")]
    Setup(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let what = what.into();
    move |err| HarnessError::Io { what, err }
}

/// The workspace root (this crate is `crates/wormhole/it`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../..")
        .canonicalize()
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.."))
}

/// `target/<profile>`: the test binary lives in its `deps` folder.
fn profile_dir() -> Result<PathBuf, HarnessError> {
    let exe = std::env::current_exe().map_err(io("locating the test binary"))?;
    let deps = exe
        .parent()
        .ok_or_else(|| HarnessError::Setup("test binary has no folder".into()))?;
    let dir = if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().unwrap_or(deps)
    } else {
        deps
    };
    Ok(dir.to_path_buf())
}

/// The server binary, the client library and `wormhole-run`.
#[derive(Debug, Clone)]
pub struct Artifacts {
    pub server: PathBuf,
    pub icd: PathBuf,
    pub run: PathBuf,
}

impl Artifacts {
    /// Builds (once per test process) and locates the artifacts. Set
    /// `WORMHOLE_IT_NO_BUILD=1` to skip the build and use what is there.
    pub fn get() -> Result<&'static Artifacts, HarnessError> {
        static A: OnceLock<Result<Artifacts, String>> = OnceLock::new();
        A.get_or_init(|| Self::build().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| HarnessError::Setup(e.clone()))
    }

    fn build() -> Result<Artifacts, HarnessError> {
        let dir = profile_dir()?;
        if std::env::var_os("WORMHOLE_IT_NO_BUILD").is_none() {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.current_dir(workspace_root()).args([
                "build",
                "-p",
                "wormhole-server",
                "-p",
                "wormhole-opencl-icd",
                "-p",
                "wormhole-run",
            ]);
            if dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let st = cmd.status().map_err(io("running cargo build"))?;
            if !st.success() {
                return Err(HarnessError::Setup(format!("cargo build failed: {st}")));
            }
        }
        let a = Artifacts {
            server: dir.join("wormhole-server"),
            icd: dir.join("libwormhole_opencl.so"),
            run: dir.join("wormhole-run"),
        };
        for p in [&a.server, &a.icd, &a.run] {
            if !p.exists() {
                return Err(HarnessError::Setup(format!("{} is missing", p.display())));
            }
        }
        Ok(a)
    }
}

/// A private temporary folder, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Result<TempDir, HarnessError> {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "wormhole-it-{}-{}-{tag}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).map_err(io(format!("creating {}", p.display())))?;
        Ok(TempDir(p))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Wormhole server on a private Unix socket; killed on drop.
pub struct Server {
    child: Child,
    pub socket: PathBuf,
    log: PathBuf,
}

impl Server {
    /// Starts a server and waits (bounded) until it accepts connections.
    pub fn start(a: &Artifacts, dir: &Path) -> Result<Server, HarnessError> {
        Self::start_with(a, dir, None, &[], &[], None, None)
    }

    /// Like [`Server::start`], with extra command-line arguments.
    pub fn start_args(a: &Artifacts, dir: &Path, args: &[&str]) -> Result<Server, HarnessError> {
        Self::start_with(a, dir, None, args, &[], None, None)
    }

    /// Like [`Server::start`], with extra variables in the server's
    /// environment (its driver's configuration, say).
    pub fn start_env(
        a: &Artifacts,
        dir: &Path,
        env: &[(&str, &str)],
    ) -> Result<Server, HarnessError> {
        Self::start_with(a, dir, None, &[], env, None, None)
    }

    /// Like [`Server::start`], also listening on TCP on loopback; returns
    /// the port too.
    pub fn start_tcp(a: &Artifacts, dir: &Path) -> Result<(Server, u16), HarnessError> {
        Self::start_tcp_args(a, dir, &[])
    }

    /// Like [`Server::start_tcp`], with extra command-line arguments.
    pub fn start_tcp_args(
        a: &Artifacts,
        dir: &Path,
        args: &[&str],
    ) -> Result<(Server, u16), HarnessError> {
        // A port the kernel just handed out is free with high probability.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(io("finding a free port"))?
            .port();
        let s = Self::start_with(a, dir, Some(port), args, &[], None, None)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(HarnessError::Setup(format!("no TCP listener on {port}")));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok((s, port))
    }

    /// Like [`Server::start_args`], in network namespace `netns` (the
    /// Unix socket, a path, stays reachable from outside it).
    pub fn start_in_netns(
        a: &Artifacts,
        dir: &Path,
        netns: &str,
        args: &[&str],
    ) -> Result<Server, HarnessError> {
        Self::start_with(a, dir, None, args, &[], Some(netns), None)
    }

    /// Like [`Server::start_args`], run as another user (`uid`, `gid`; the
    /// caller must be root): from a copy of the binary in `dir`, which is
    /// given to that user (the build's own directory may be closed to it),
    /// with `dir` as its home.
    pub fn start_as(
        a: &Artifacts,
        dir: &Path,
        uid: u32,
        gid: u32,
        args: &[&str],
    ) -> Result<Server, HarnessError> {
        Self::start_with(a, dir, None, args, &[], None, Some((uid, gid)))
    }

    fn start_with(
        a: &Artifacts,
        dir: &Path,
        tcp: Option<u16>,
        args: &[&str],
        env: &[(&str, &str)],
        netns: Option<&str>,
        user: Option<(u32, u32)>,
    ) -> Result<Server, HarnessError> {
        let socket = dir.join("server.sock");
        let log = dir.join("server.log");
        let logf = std::fs::File::create(&log).map_err(io("creating the server log"))?;
        let mut exe = a.server.clone();
        if let Some((uid, gid)) = user {
            exe = dir.join("wormhole-server");
            std::fs::copy(&a.server, &exe).map_err(io("copying the server"))?;
            for p in [dir, &exe, &log] {
                std::os::unix::fs::chown(p, Some(uid), Some(gid))
                    .map_err(io(format!("giving {} to uid {uid}", p.display())))?;
            }
        }
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        if let Some((uid, gid)) = user {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid)
                .gid(gid)
                .env("HOME", dir)
                .env_remove("XDG_CACHE_HOME");
        }
        // The server offers what the native runs use (WORMHOLE_IT_NATIVE_ICD).
        cmd.env("OCL_ICD_VENDORS", native_icd()?);
        cmd.args(args).envs(env.iter().copied());
        if let Some(port) = tcp {
            cmd.arg("--tcp").arg(format!("127.0.0.1:{port}"));
        }
        let child = cmd
            .arg("--socket")
            .arg(&socket)
            .env("WORMHOLE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(logf)
            .spawn()
            .map_err(io(format!("starting {}", a.server.display())))?;
        let mut s = Server { child, socket, log };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if UnixStream::connect(&s.socket).is_ok() {
                return Ok(s);
            }
            if let Ok(Some(st)) = s.child.try_wait() {
                return Err(HarnessError::Setup(format!(
                    "server exited ({st}): {}",
                    s.log_text()
                )));
            }
            if Instant::now() > deadline {
                return Err(HarnessError::Setup("server did not start in 20 s".into()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the server logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Asserts that the server has logged `what`; the failure shows the log.
    #[track_caller]
    pub fn assert_logged(&self, what: &str) {
        let log = self.log_text();
        assert!(
            log.contains(what),
            "the server's log lacks {what:?}:\n{log}"
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One run of a test program.
#[derive(Debug)]
pub struct RunOutput {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

impl RunOutput {
    pub fn ok(&self) -> bool {
        !self.timed_out && self.status.is_some_and(|s| s.success())
    }

    /// The lines both runs must agree on.
    pub fn compared_lines(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| !l.starts_with('~'))
            .collect()
    }
}

/// Runs `cmd` to completion or until `limit`, collecting its output.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Result<RunOutput, HarnessError> {
    let dir = TempDir::new("run")?;
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let of = std::fs::File::create(&out).map_err(io("creating stdout file"))?;
    let ef = std::fs::File::create(&err).map_err(io("creating stderr file"))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(of)
        .stderr(ef)
        .spawn()
        .map_err(io("starting a test program"))?;
    let deadline = Instant::now() + limit;
    let (status, timed_out) = loop {
        match child.try_wait().map_err(io("waiting for a test program"))? {
            Some(st) => break (Some(st), false),
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break (None, true);
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let read = |p: &Path| -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(p) {
            let mut b = Vec::new();
            let _ = f.read_to_end(&mut b);
            s = String::from_utf8_lossy(&b).into_owned();
        }
        s
    };
    Ok(RunOutput {
        status,
        stdout: read(&out),
        stderr: read(&err),
        timed_out,
    })
}

/// The native PoCL ICD file (`WORMHOLE_IT_NATIVE_ICD` overrides).
pub fn native_icd() -> Result<PathBuf, HarnessError> {
    let p = std::env::var_os("WORMHOLE_IT_NATIVE_ICD")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/OpenCL/vendors/pocl.icd"));
    if p.exists() {
        Ok(p)
    } else {
        Err(HarnessError::Setup(format!(
            "{} not found: install pocl-opencl-icd",
            p.display()
        )))
    }
}

/// Compiles `tests/opencl/<name>.c` into `dir`.
pub fn compile(name: &str, dir: &Path) -> Result<PathBuf, HarnessError> {
    let src_dir = workspace_root().join("tests/opencl");
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
        .arg(src_dir.join(format!("{name}.c")))
        .args(["-lOpenCL", "-lpthread"])
        .output()
        .map_err(io("running cc"))?;
    if !out.status.success() {
        return Err(HarnessError::Setup(format!(
            "compiling {name}.c failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(bin)
}

/// A test's usual start: a scratch directory named after `tag`,
/// `tests/opencl/<program>.c` compiled into it, and a Wormhole server
/// started there with `server_args`. Panics (a test failure) when any of
/// it fails.
pub fn program_and_server(
    tag: &str,
    program: &str,
    server_args: &[&str],
) -> (TempDir, PathBuf, Server) {
    let go = || -> Result<_, HarnessError> {
        let a = Artifacts::get()?;
        let dir = TempDir::new(tag)?;
        let bin = compile(program, dir.path())?;
        let server = Server::start_args(a, dir.path(), server_args)?;
        Ok((dir, bin, server))
    };
    go().unwrap_or_else(|e| panic!("harness setup for {program}: {e}"))
}

/// How a program reaches OpenCL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Native,
    /// Through a Wormhole server on a Unix socket (shared memory).
    Wormhole,
    /// Through a Wormhole server over TCP on loopback.
    WormholeTcp(u16),
    /// Through a Wormhole server on a Unix socket, with the client's
    /// address space too small to map the shared buffer arena (and
    /// `WORMHOLE_LOG=1`, so that it says so).
    WormholeNoArena,
}

/// Limit on one run of one program.
pub const RUN_LIMIT: Duration = Duration::from_secs(180);

/// Runs a compiled program by the given route.
pub fn run(
    bin: &Path,
    route: Route,
    server: Option<&Server>,
    scratch: &Path,
) -> Result<RunOutput, HarnessError> {
    run_env(bin, route, server, scratch, &[])
}

/// Leaves none of the test runner's own `WORMHOLE_*` settings to `cmd`.
fn scrub_wormhole_env(cmd: &mut Command) {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("WORMHOLE_") {
            cmd.env_remove(k);
        }
    }
}

/// Makes `cmd` see only Wormhole's OpenCL platform, served at `target`
/// (as `WORMHOLE_SERVER` names it); the ICD file goes in `scratch`.
pub fn use_wormhole(cmd: &mut Command, scratch: &Path, target: &str) -> Result<(), HarnessError> {
    scrub_wormhole_env(cmd);
    let a = Artifacts::get()?;
    let vendors = scratch.join("vendors");
    std::fs::create_dir_all(&vendors).map_err(io("creating the ICD folder"))?;
    std::fs::write(
        vendors.join("wormhole.icd"),
        format!("{}\n", a.icd.display()),
    )
    .map_err(io("writing wormhole.icd"))?;
    cmd.env("OCL_ICD_VENDORS", &vendors)
        .env("WORMHOLE_SERVER", target);
    Ok(())
}

/// Like [`run`], with extra variables in the program's environment.
pub fn run_env(
    bin: &Path,
    route: Route,
    server: Option<&Server>,
    scratch: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<RunOutput, HarnessError> {
    let mut cmd = if route == Route::WormholeNoArena {
        // 8 GB: room for the program, not for the 64 GiB arena.
        let mut c = Command::new("sh");
        c.arg("-c").arg("ulimit -v 8000000 && exec \"$0\"").arg(bin);
        c
    } else {
        Command::new(bin)
    };
    match route {
        Route::Native => {
            scrub_wormhole_env(&mut cmd);
            cmd.env("OCL_ICD_VENDORS", native_icd()?);
        }
        Route::Wormhole | Route::WormholeTcp(_) | Route::WormholeNoArena => {
            let s = server.ok_or_else(|| HarnessError::Setup("no server".into()))?;
            let target = match route {
                Route::WormholeTcp(port) => format!("tcp:127.0.0.1:{port}"),
                _ => format!("unix:{}", s.socket.display()),
            };
            use_wormhole(&mut cmd, scratch, &target)?;
            if route == Route::WormholeNoArena {
                cmd.env("WORMHOLE_LOG", "1");
            }
        }
    }
    cmd.envs(env.iter().copied());
    run_bounded(cmd, RUN_LIMIT)
}

/// Runs `tests/opencl/<name>.c` natively and through Wormhole, and returns
/// both outputs after checking that both succeeded and agree. Panics (a
/// test failure) with both outputs otherwise.
pub fn native_vs_wormhole(name: &str) -> (RunOutput, RunOutput) {
    let setup = || -> Result<_, HarnessError> {
        let a = Artifacts::get()?;
        let dir = TempDir::new(name)?;
        let bin = compile(name, dir.path())?;
        let server = Server::start(a, dir.path())?;
        Ok((dir, bin, server))
    };
    let (dir, bin, server) = match setup() {
        Ok(v) => v,
        Err(e) => panic!("harness setup for {name}: {e}"),
    };
    let native = run(&bin, Route::Native, None, dir.path())
        .unwrap_or_else(|e| panic!("running {name} natively: {e}"));
    let remote = run(&bin, Route::Wormhole, Some(&server), dir.path())
        .unwrap_or_else(|e| panic!("running {name} through Wormhole: {e}"));
    check_pair(name, &native, &remote, &server.log_text());
    (native, remote)
}

/// Runs each program natively and through `server` by `route` (all in
/// `dir`), checking each pair as [`native_vs_wormhole`] does; `how` names
/// the remoted run in failures, and `also` checks it further.
fn each_native_vs(
    names: &[&str],
    dir: &Path,
    server: &Server,
    route: Route,
    how: &str,
    also: impl Fn(&RunOutput),
) {
    for name in names {
        let bin = compile(name, dir).unwrap_or_else(|e| panic!("{e}"));
        let native = run(&bin, Route::Native, None, dir)
            .unwrap_or_else(|e| panic!("running {name} natively: {e}"));
        let remote = run(&bin, route, Some(server), dir)
            .unwrap_or_else(|e| panic!("running {name} {how}: {e}"));
        also(&remote);
        check_pair(
            &format!("{name} ({how})"),
            &native,
            &remote,
            &server.log_text(),
        );
    }
}

/// Runs each program natively and through Wormhole over TCP on loopback
/// (one server for all), checking each pair as [`native_vs_wormhole`] does.
pub fn native_vs_wormhole_tcp(names: &[&str]) {
    let setup = || -> Result<_, HarnessError> {
        let a = Artifacts::get()?;
        let dir = TempDir::new("tcp")?;
        let (server, port) = Server::start_tcp(a, dir.path())?;
        Ok((dir, server, port))
    };
    let (dir, server, port) = setup().unwrap_or_else(|e| panic!("harness setup for TCP: {e}"));
    let route = Route::WormholeTcp(port);
    each_native_vs(names, dir.path(), &server, route, "over TCP", |_| ());
}

/// Runs programs natively and through Wormhole with a client that cannot
/// map the shared buffer arena: every transfer and map streams.
pub fn native_vs_wormhole_without_client_arena(names: &[&str]) {
    let setup = || -> Result<_, HarnessError> {
        let a = Artifacts::get()?;
        let dir = TempDir::new("no-arena")?;
        let server = Server::start(a, dir.path())?;
        Ok((dir, server))
    };
    let (dir, server) = setup().unwrap_or_else(|e| panic!("harness setup: {e}"));
    let how = "client without the arena";
    each_native_vs(
        names,
        dir.path(),
        &server,
        Route::WormholeNoArena,
        how,
        |remote| {
            assert!(
                remote.stderr.contains("no shared buffers"),
                "the client should have said it could not map the arena: {}",
                remote.stderr
            );
        },
    );
}

/// Runs each program natively and through one Wormhole server started
/// with `server_args` (e.g. another handoff mode), checking each pair.
pub fn native_vs_wormhole_server_args(names: &[&str], server_args: &[&str]) {
    let setup = || -> Result<_, HarnessError> {
        let a = Artifacts::get()?;
        let dir = TempDir::new("args")?;
        let server = Server::start_args(a, dir.path(), server_args)?;
        Ok((dir, server))
    };
    let (dir, server) =
        setup().unwrap_or_else(|e| panic!("harness setup for {server_args:?}: {e}"));
    let how = format!("through Wormhole {server_args:?}");
    each_native_vs(names, dir.path(), &server, Route::Wormhole, &how, |_| ());
}

/// Runs one program through Wormhole over TCP only (for behaviour that
/// differs from native by design).
pub fn wormhole_tcp_only(name: &str) -> RunOutput {
    let go = || -> Result<_, HarnessError> {
        let a = Artifacts::get()?;
        let dir = TempDir::new("tcp-only")?;
        let (server, port) = Server::start_tcp(a, dir.path())?;
        let bin = compile(name, dir.path())?;
        run(&bin, Route::WormholeTcp(port), Some(&server), dir.path())
    };
    go().unwrap_or_else(|e| panic!("running {name} over TCP: {e}"))
}

/// Asserts that both runs succeeded and print the same compared lines.
pub fn check_pair(name: &str, native: &RunOutput, remote: &RunOutput, server_log: &str) {
    let show = |o: &RunOutput| {
        format!(
            "status {:?}{}\n--- stdout\n{}--- stderr\n{}",
            o.status,
            if o.timed_out { " (timed out)" } else { "" },
            o.stdout,
            o.stderr
        )
    };
    assert!(native.ok(), "{name} failed natively: {}", show(native));
    assert!(
        remote.ok(),
        "{name} failed through Wormhole: {}\n--- server log\n{server_log}",
        show(remote)
    );
    let (n, r) = (native.compared_lines(), remote.compared_lines());
    if n != r {
        let mut diff = String::new();
        for i in 0..n.len().max(r.len()) {
            let (a, b) = (n.get(i).copied(), r.get(i).copied());
            if a != b {
                diff.push_str(&format!(
                    "line {}:\n  native:   {}\n  wormhole: {}\n",
                    i + 1,
                    a.unwrap_or("<none>"),
                    b.unwrap_or("<none>")
                ));
            }
        }
        panic!("{name}: native and Wormhole outputs differ:\n{diff}");
    }
    assert!(
        n.last().is_some_and(|l| l.ends_with(": done")),
        "{name}: output does not end with its 'done' line"
    );
}

/// A test program left running while the test acts on it: its stdout is
/// read line by line as it comes, its stderr goes to a file. Killed on drop.
pub struct Running {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    /// Every line read so far.
    pub seen: Vec<String>,
    stderr: PathBuf,
}

impl Running {
    /// Starts `cmd`, with its stderr in `scratch`.
    pub fn start(mut cmd: Command, scratch: &Path) -> Result<Running, HarnessError> {
        let stderr = scratch.join("running.err");
        let ef = std::fs::File::create(&stderr).map_err(io("creating stderr file"))?;
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(ef)
            .spawn()
            .map_err(io("starting a test program"))?;
        let out = child
            .stdout
            .take()
            .ok_or_else(|| HarnessError::Setup("no stdout pipe".into()))?;
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Running {
            child,
            lines,
            seen: Vec::new(),
            stderr,
        })
    }

    /// Starts `cmd` as [`Running::start`] does and waits up to `limit` for
    /// its line starting with `ready`. Panics (a test failure) with what the
    /// program printed when it fails to start or that line does not come.
    #[track_caller]
    pub fn start_until(cmd: Command, scratch: &Path, ready: &str, limit: Duration) -> Running {
        let mut r = Running::start(cmd, scratch).unwrap_or_else(|e| panic!("starting: {e}"));
        if r.line(ready, limit).is_none() {
            panic!(
                "no line {ready:?} within {limit:?}: {:?}\n{}",
                r.seen,
                r.stderr()
            );
        }
        r
    }

    /// Waits up to `limit` for a line starting with `prefix`; returns it.
    pub fn line(&mut self, prefix: &str, limit: Duration) -> Option<String> {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let l = self.lines.recv_timeout(left).ok()?;
            self.seen.push(l.clone());
            if l.starts_with(prefix) {
                return Some(l);
            }
        }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the exit (bounded by the caller's earlier waits: call it
    /// once the program said it is done).
    pub fn wait(&mut self) -> Option<ExitStatus> {
        self.child.wait().ok()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Server {
    /// The server's (listener's) process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// The processes whose parent is `parent` now (zombies included).
pub fn children(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // The parent's pid is the second field after the parenthesised name.
            let ppid = stat
                .rfind(')')
                .and_then(|i| stat[i + 2..].split(' ').nth(1)?.parse::<u32>().ok());
            ppid == Some(parent)
        })
        .collect()
}

/// The server's tenants alive now (its children that run `tenant`).
pub fn live_tenants(server: &Server) -> Vec<u32> {
    children(server.pid())
        .into_iter()
        .filter(|&pid| is_tenant(pid))
        .collect()
}

/// The server's one live tenant, once the tenants of the harness's own
/// readiness probes have ended (bounded wait); None if there is not exactly
/// one.
pub fn the_live_tenant(server: &Server) -> Option<u32> {
    let mut live = Vec::new();
    eventually(Duration::from_secs(10), || {
        live = live_tenants(server);
        live.len() == 1
    });
    match live[..] {
        [t] => Some(t),
        _ => None,
    }
}

/// Whether process `pid` is still a Wormhole tenant (not gone, nor a
/// process that reused the pid).
pub fn is_tenant(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).ends_with("tenant\0"))
}

/// Waits (bounded) until the server has reaped tenant `pid`, which it logs
/// only after the tenant's own last words. Firmer than `!is_tenant(pid)`: a
/// process whose leader thread is gone reads as no tenant while the rest of
/// it may still run (and log).
pub fn tenant_ended(server: &Server, pid: u32, limit: Duration) -> bool {
    let started = format!("tenant process {pid} (");
    eventually(limit, || {
        server
            .log_text()
            .lines()
            .any(|l| l.contains(&started) && l.contains(") ended ("))
    })
}

/// Waits (bounded) until `f` holds.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}
