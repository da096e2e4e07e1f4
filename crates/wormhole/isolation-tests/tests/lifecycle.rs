//! Peers that die, servers that are missing, and what idling costs. The
//! applications here are real processes using libOpenCL with our ICD.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use wormhole_isolation_tests::{
    alive, arena_kib, cpu_ms, kill9, profile_dir, rss_kib, Server, Session,
};

const PROBE: &str = env!("CARGO_BIN_EXE_wormhole-probe");

/// A probe process and its stdout, line by line.
struct Probe {
    child: Child,
    out: BufReader<ChildStdout>,
    /// Where its stderr goes, when captured.
    err: Option<std::path::PathBuf>,
}

impl Probe {
    fn start(server: &Server, args: &[&str]) -> Probe {
        Self::start_env(server, args, &[])
    }

    /// Like `start`, with these variables set after the server's.
    fn start_env(server: &Server, args: &[&str], env: &[(&str, &str)]) -> Probe {
        Self::spawn(server, args, env, None)
    }

    /// Like `start`, without `WORMHOLE_LOG`, its stderr kept for
    /// [`Probe::stderr`].
    fn start_capturing(server: &Server, args: &[&str]) -> Probe {
        let err = server.dir.join(format!("probe-{}.err", args.join("-")));
        Self::spawn(server, args, &[], Some(err))
    }

    fn spawn(
        server: &Server,
        args: &[&str],
        env: &[(&str, &str)],
        err: Option<std::path::PathBuf>,
    ) -> Probe {
        let mut cmd = Command::new(PROBE);
        cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped());
        server.client_env(&mut cmd);
        cmd.envs(env.iter().copied());
        match &err {
            Some(path) => {
                let f = std::fs::File::create(path).expect("the probe's stderr file");
                cmd.stderr(f).env_remove("WORMHOLE_LOG");
            }
            None => {
                cmd.stderr(Stdio::inherit());
            }
        }
        let mut child = cmd.spawn().expect("start probe");
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        Probe { child, out, err }
    }

    /// What a capturing probe wrote on stderr so far.
    fn stderr(&self) -> String {
        self.err
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    /// Reads lines until one starts with `prefix`; panics on EOF.
    fn expect_line(&mut self, prefix: &str) -> String {
        loop {
            let mut line = String::new();
            let n = self.out.read_line(&mut line).expect("read probe");
            assert!(n > 0, "probe ended before printing `{prefix}`");
            if line.starts_with(prefix) {
                return line.trim_end().to_string();
            }
            assert!(!line.starts_with("error"), "probe failed: {line}");
        }
    }

    /// Waits for the probe to exit, at most `timeout`.
    fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sum of the resident memory of the server and all its tenants.
fn server_rss_kib(server: &Server) -> u64 {
    let mut pids = server.tenants();
    pids.push(server.pid());
    pids.into_iter().filter_map(rss_kib).sum()
}

fn wait_gone(pid: i32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

const ALLOC_MIB: u64 = 256;

#[test]
fn kill9_of_a_client_mid_call_frees_its_tenant_and_spares_the_others() {
    kill9_mid_call(&[]);
}

#[test]
fn kill9_mid_call_with_buffers_in_the_tenant_only() {
    kill9_mid_call(&["--no-shared-buffers"]);
}

fn kill9_mid_call(server_args: &[&str]) {
    let server = Server::start_with(server_args).expect("server");
    let mut other = Session::open(&server.socket).expect("other tenant");
    assert!(other.round_trip(1).expect("other"));
    let baseline = server_rss_kib(&server);

    let before = server.tenants();
    let mut probe = Probe::start(&server, &["alloc", &ALLOC_MIB.to_string()]);
    probe.expect_line("allocated");
    probe.expect_line("reading");
    let tenant = server
        .new_tenant(&before, Duration::from_secs(1))
        .expect("the probe's tenant");
    // Its buffer is in its own memory, or in the arena it shares with the
    // client (which only the two of them hold open).
    let (tenant_rss, tenant_arena) = (rss_kib(tenant).unwrap_or(0), arena_kib(tenant));
    let loaded = server_rss_kib(&server);
    eprintln!(
        "baseline {baseline} KiB, with the client {loaded} KiB (its tenant {tenant_rss} KiB \
         resident, {tenant_arena} KiB in the shared arena)"
    );
    assert!(
        tenant_rss.max(tenant_arena) >= ALLOC_MIB * 1024,
        "the tenant should hold the {ALLOC_MIB} MiB (has {tenant_rss} + {tenant_arena} KiB)"
    );
    // The probe reads 16 MiB per call back to back: a kill lands in a call.
    std::thread::sleep(Duration::from_millis(150));
    kill9(probe.child.id() as i32);
    let _ = probe.wait(Duration::from_secs(5));
    let t = Instant::now();
    assert!(
        wait_gone(tenant, Duration::from_secs(10)),
        "the tenant of a killed client is still running"
    );
    eprintln!("tenant gone {} ms after the kill", t.elapsed().as_millis());
    let after = server_rss_kib(&server);
    eprintln!("after the kill {after} KiB");
    assert!(
        after < baseline + 32 * 1024,
        "memory did not return: baseline {baseline} KiB, after {after} KiB"
    );
    // The other tenant never noticed.
    for round in 2..20 {
        assert!(other.round_trip(round).expect("other after the kill"));
    }
}

#[test]
fn a_client_blocked_in_a_call_gets_an_error_when_its_tenant_dies() {
    let server = Server::start().expect("server");
    let before = server.tenants();
    let mut probe = Probe::start_capturing(&server, &["block"]);
    probe.expect_line("blocking");
    let tenant = server
        .new_tenant(&before, Duration::from_secs(1))
        .expect("the probe's tenant");
    // Let the probe get into its wait.
    std::thread::sleep(Duration::from_millis(200));
    kill9(tenant);
    let t = Instant::now();
    let line = probe.expect_line("clWaitForEvents returned");
    let status = probe.wait(Duration::from_secs(5)).expect("probe exits");
    eprintln!("{line}; {} ms after the kill", t.elapsed().as_millis());
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "the blocked call took too long to fail"
    );
    assert!(status.success(), "the wait should fail with an error code");
    // Without WORMHOLE_LOG, one line says why, however many calls failed
    // after it (the probe releases what it held).
    let err = probe.stderr();
    let lost: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("lost the server"))
        .collect();
    assert_eq!(lost.len(), 1, "{err:?}");
    assert!(lost[0].starts_with("wormhole: "), "{err:?}");
}

/// Over this many milliseconds of CPU in [`IDLE_WINDOW`], a process is not
/// idle (the budget covers /proc's tick granularity).
const IDLE_BUDGET_MS: u64 = 20;
const IDLE_WINDOW: Duration = Duration::from_secs(5);

#[test]
fn an_idle_server_and_idle_tenant_use_no_cpu() {
    idle_costs_nothing(None);
}

/// The same over TCP, where a tenant also has a thread waiting for its
/// client to hang up.
#[test]
fn an_idle_tcp_tenant_uses_no_cpu() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    idle_costs_nothing(Some(port));
}

fn idle_costs_nothing(tcp: Option<u16>) {
    let addr = tcp.map(|p| format!("127.0.0.1:{p}"));
    let server = match &addr {
        Some(a) => Server::start_with(&["--tcp", a]),
        None => Server::start(),
    }
    .expect("server");
    let before = server.tenants();
    let mut probe = match &addr {
        Some(a) => Probe::start_env(
            &server,
            &["idle", "30"],
            &[("WORMHOLE_SERVER", &format!("tcp:{a}"))],
        ),
        None => Probe::start(&server, &["idle", "30"]),
    };
    probe.expect_line("ready");
    let tenant = server
        .new_tenant(&before, Duration::from_secs(1))
        .expect("the probe's tenant");
    // Let start-up work (the platform's threads) settle.
    std::thread::sleep(Duration::from_millis(500));
    let pids = [server.pid(), tenant];
    let start: Vec<u64> = pids.iter().map(|&p| cpu_ms(p).expect("stat")).collect();
    std::thread::sleep(IDLE_WINDOW);
    let end: Vec<u64> = pids.iter().map(|&p| cpu_ms(p).expect("stat")).collect();
    let used: Vec<u64> = end.iter().zip(&start).map(|(e, s)| e - s).collect();
    eprintln!(
        "CPU over {:?}: server {} ms, idle tenant {} ms",
        IDLE_WINDOW, used[0], used[1]
    );
    assert!(used[0] <= IDLE_BUDGET_MS, "idle server used {} ms", used[0]);
    assert!(used[1] <= IDLE_BUDGET_MS, "idle tenant used {} ms", used[1]);
}

/// With no server, an application sees no Wormhole platform, promptly, and
/// (with logging on) one clear line on stderr.
#[test]
fn no_server_means_no_platform_and_one_line() {
    let server = Server::start().expect("server (for its ICD directory)");
    let missing = server.dir.join("nobody-listens-here.sock");
    for log in [true, false] {
        let mut cmd = Command::new(PROBE);
        cmd.arg("platforms");
        server.client_env(&mut cmd);
        cmd.env("WORMHOLE_SERVER", &missing);
        if log {
            cmd.env("WORMHOLE_LOG", "1");
        } else {
            cmd.env_remove("WORMHOLE_LOG");
        }
        let t = Instant::now();
        let out = cmd.output().expect("run probe");
        let took = t.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("log={log}: {took:?}\n{stdout}{stderr}");
        assert!(out.status.success(), "probe failed: {stdout}");
        assert!(stdout.starts_with("platforms 0 "), "{stdout}");
        assert!(took < Duration::from_secs(5), "took {took:?}");
        let lines: Vec<&str> = stderr.lines().collect();
        if log {
            assert_eq!(lines.len(), 1, "expected one line: {stderr:?}");
            assert!(lines[0].starts_with("wormhole: "), "{stderr:?}");
            assert!(lines[0].contains("no Wormhole server"), "{stderr:?}");
        } else {
            assert!(lines.is_empty(), "unexpected output: {stderr:?}");
        }
    }
}

/// A server address the user named that can be no server's (a Unix path
/// too long for a socket, a malformed TCP address) is a mistake, said in
/// one line without `WORMHOLE_LOG`, unlike a server that is simply not
/// running, or an unusable default socket.
#[test]
fn an_address_that_cannot_be_a_server_is_pointed_out() {
    let server = Server::start().expect("server (for its ICD directory)");
    let too_long = format!("{}/{}.sock", server.dir.display(), "x".repeat(120));
    for target in [too_long.as_str(), "tcp:not an address"] {
        let mut cmd = Command::new(PROBE);
        cmd.arg("platforms");
        server.client_env(&mut cmd);
        cmd.env("WORMHOLE_SERVER", target)
            .env_remove("WORMHOLE_LOG");
        let out = cmd.output().expect("run probe");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{target}: {stdout}{stderr}");
        assert!(stdout.starts_with("platforms 0 "), "{stdout}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "expected one line: {stderr:?}");
        assert!(lines[0].contains("no Wormhole server at"), "{stderr:?}");
        assert_eq!(
            lines[0].matches("no Wormhole platform").count(),
            1,
            "{stderr:?}"
        );
    }
    // The default socket is not the user's choice: however unusable its
    // path, no server there is no server, said only with WORMHOLE_LOG.
    let mut cmd = Command::new(PROBE);
    cmd.arg("platforms");
    server.client_env(&mut cmd);
    cmd.env_remove("WORMHOLE_SERVER")
        .env_remove("WORMHOLE_LOG")
        .env("XDG_RUNTIME_DIR", server.dir.join("r".repeat(120)));
    let out = cmd.output().expect("run probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.starts_with("platforms 0 "), "{stdout}");
    assert!(
        stderr.is_empty(),
        "the default socket's path was reported: {stderr:?}"
    );
}

/// A socket that accepts and then says something that is not a greeting
/// (or nothing at all) must not hang or crash the application either.
#[test]
fn a_bad_greeting_means_no_platform() {
    let server = Server::start().expect("server (for its ICD directory)");
    for garbage in [
        &b"HTTP/1.1 400 Bad Request\r\n\r\n"[..],
        &[0u8; 40][..],
        &[][..],
    ] {
        let path = server.dir.join("fake.sock");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let g = garbage.to_vec();
        let fake = std::thread::spawn(move || {
            use std::io::Write;
            if let Ok((mut s, _)) = listener.accept() {
                let _ = s.write_all(&g);
                // Hang up after a moment (an empty greeting is a hang-up).
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut cmd = Command::new(PROBE);
        cmd.arg("platforms");
        server.client_env(&mut cmd);
        cmd.env("WORMHOLE_SERVER", &path).env("WORMHOLE_LOG", "1");
        let t = Instant::now();
        let out = cmd.output().expect("run probe");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{stdout}{stderr}");
        assert!(out.status.success(), "{stdout}");
        assert!(stdout.starts_with("platforms 0 "), "{stdout}");
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
        let _ = fake.join();
    }
}

/// clinfo, an unmodified application, with no server: no Wormhole
/// platform, and it returns promptly. Skipped when clinfo is not installed.
#[test]
fn clinfo_with_no_server() {
    if Command::new("clinfo").arg("--version").output().is_err() {
        eprintln!("clinfo not installed: skipped");
        return;
    }
    let server = Server::start().expect("server (for its ICD directory)");
    let mut cmd = Command::new("clinfo");
    cmd.arg("-l");
    server.client_env(&mut cmd);
    cmd.env("WORMHOLE_SERVER", server.dir.join("missing.sock"))
        .env("WORMHOLE_LOG", "1");
    let t = Instant::now();
    let out = cmd.output().expect("clinfo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}{stderr}");
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(!stdout.contains("Wormhole"), "{stdout}");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with("wormhole: "))
            .count(),
        1,
        "{stderr:?}"
    );
}

/// The server sends, and writes back, exactly the bytes an image mapping
/// spans (it used to read past the mapping): a real application maps part
/// of an image, writes through the mapping, and reads the image back.
#[test]
fn an_image_mapping_round_trips_exactly_its_region() {
    let server = Server::start().expect("server");
    let mut probe = Probe::start(&server, &["map-image"]);
    probe.expect_line("map-image ok");
    let status = probe.wait(Duration::from_secs(10)).expect("probe exits");
    assert!(status.success());
}

/// The main process only accepts: when it dies, connected tenants keep
/// serving their clients, and a new application sees no platform, promptly.
#[test]
fn the_main_process_dying_leaves_tenants_serving() {
    let mut server = Server::start().expect("server");
    let mut s = Session::open(&server.socket).expect("tenant");
    assert!(s.round_trip(1).expect("before"));
    let tenants = server.tenants();
    let _ = server.child.kill();
    let _ = server.child.wait();
    for round in 2..10 {
        assert!(s.round_trip(round).expect("after the main process died"));
    }
    let mut cmd = Command::new(PROBE);
    cmd.arg("platforms");
    server.client_env(&mut cmd);
    cmd.env("WORMHOLE_LOG", "1");
    let t = Instant::now();
    let out = cmd.output().expect("probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("platforms 0 "), "{stdout}");
    assert!(t.elapsed() < Duration::from_secs(5));
    // The tenants are no longer the server's children: end them here.
    for p in tenants {
        kill9(p);
    }
}

/// The lowest descriptor number `pid` has free: the one its next `accept`
/// would get.
fn lowest_free_fd(pid: i32) -> u64 {
    let open: std::collections::BTreeSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the listener's descriptors")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    (0..).find(|n| !open.contains(n)).expect("a free number")
}

/// Sets `pid`'s soft limit on open files; returns the limits it had.
fn set_open_files(pid: i32, soft: u64) -> libc::rlimit {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a null new-limit pointer only reads the limits into `old`,
    // which lives across the call.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
    assert_eq!(r, 0, "reading the listener's limit");
    let new = libc::rlimit {
        rlim_cur: soft,
        rlim_max: old.rlim_max,
    };
    // SAFETY: both pointers are to live rlimit values for the call.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &new, std::ptr::null_mut()) };
    assert_eq!(r, 0, "lowering the listener's limit");
    old
}

/// A listener that runs out of file descriptors leaves the client queued
/// and waits before trying again, instead of failing the same `accept` in a
/// loop (a CPU at 100 % and a flood of log lines); once descriptors are
/// back, the queued client is served.
#[test]
fn a_listener_out_of_descriptors_waits_and_then_serves() {
    use std::io::Read;
    let server = Server::start().expect("server");
    let pid = server.pid();
    let old = set_open_files(pid, lowest_free_fd(pid));
    let connect =
        || std::os::unix::net::UnixStream::connect(&server.socket).expect("queued by the kernel");
    // The listener waits in `accept` with a descriptor it took before the
    // limit came down: the first client gets that one, and then the tenant
    // cannot be started for want of others, so it is let go (logged). The
    // next accepts fail at once, which is the case at hand.
    let _first = connect();
    std::thread::sleep(Duration::from_millis(100));
    let mut client = connect();
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_ms(pid).expect("stat");
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ms(pid).expect("stat") - before;
    let failures = server.log().matches("accept (unix)").count();
    // SAFETY: `old` is a live rlimit for the call.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &old, std::ptr::null_mut()) };
    assert_eq!(r, 0, "restoring the listener's limit");
    assert!(used < 100, "the listener used {used} ms of CPU in 1 s");
    assert!(
        (1..=20).contains(&failures),
        "{failures} failed accepts logged in 1.3 s:\n{}",
        server.log().lines().take(5).collect::<Vec<_>>().join("\n")
    );
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut hello = [0u8; 4];
    let got = client.read_exact(&mut hello);
    assert!(
        got.is_ok() && &hello == b"WHOL",
        "no greeting for the queued client once descriptors were back ({got:?}):\n{}",
        server.log()
    );
}

/// The default socket's name can be taken first by anyone where it lies in
/// /tmp; a client does not connect to one that belongs to another user (it
/// would hand that user its calls and data), and says so. Needs root (to
/// give the socket away); without it the test says why and passes.
#[test]
fn a_default_socket_of_another_user_is_not_used() {
    use std::os::unix::net::UnixListener;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: giving a socket to another user needs root (CI has it)");
        return;
    }
    let server = Server::start().expect("server (for its ICD directory)");
    let runtime = server.dir.join("runtime");
    std::fs::create_dir_all(&runtime).expect("runtime dir");
    let path = runtime.join("wormhole.sock");
    let squatter = UnixListener::bind(&path).expect("bind");
    squatter.set_nonblocking(true).expect("non-blocking");
    let probe = |tag: &str| {
        let mut cmd = Command::new(PROBE);
        cmd.arg("platforms");
        server.client_env(&mut cmd);
        cmd.env_remove("WORMHOLE_SERVER")
            .env_remove("WORMHOLE_LOG")
            .env("XDG_RUNTIME_DIR", &runtime);
        let out = cmd.output().expect("run probe");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        eprintln!("{tag}: {stdout}{stderr}");
        (stdout, stderr)
    };

    std::os::unix::fs::chown(&path, Some(65534), Some(65534)).expect("chown");
    let (stdout, stderr) = probe("another user's socket");
    assert!(stdout.starts_with("platforms 0 "), "{stdout}");
    assert!(stderr.contains("belongs to uid 65534"), "{stderr:?}");
    assert!(
        squatter.accept().is_err(),
        "the client connected to another user's socket"
    );
    // A server meant for that path says who holds it, rather than that
    // "another server" (as if one of ours) listens there.
    let out = Command::new(profile_dir().join("wormhole-server"))
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run a server");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a server started on a taken socket");
    assert!(err.contains("taken by a socket of uid 65534"), "{err}");

    // The same socket, ours: the client connects. Nothing answers (the
    // squatter never accepts): after the greeting's 10 s the client gives
    // up, with a line, instead of waiting at its first call for ever.
    std::os::unix::fs::chown(&path, Some(0), Some(0)).expect("chown back");
    let t = Instant::now();
    let (stdout, stderr) = probe("our socket, silent");
    assert!(stdout.starts_with("platforms 0 "), "{stdout}");
    assert!(
        stderr.contains("sent no Wormhole greeting within 10 s"),
        "{stderr:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    assert!(squatter.accept().is_ok(), "the client did not connect");
}

/// The socket's mode and group decide which users may connect: by default
/// only the server's own; with `--socket-mode 0660 --socket-group G`,
/// members of G too, and still nobody else.
#[test]
fn the_socket_admits_only_the_users_its_mode_and_group_name() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: running clients as other users needs root (CI has it)");
        return;
    }
    // (uid, gid) of a client, with no supplementary groups (std drops
    // root's when it changes the uid).
    let probe_as = |server: &Server, uid: u32, gid: u32| {
        let mut cmd = Command::new(PROBE);
        cmd.arg("platforms");
        server.client_env(&mut cmd);
        cmd.uid(uid).gid(gid).env("RUST_BACKTRACE", "0");
        let out = cmd.output().expect("run probe");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("uid {uid} gid {gid}: {text}");
        text
    };
    const NOBODY: u32 = 65534;
    const NOGROUP: u32 = 65534;
    const STRANGER: u32 = 65533;

    let own = Server::start().expect("server");
    let meta = std::fs::metadata(&own.socket).expect("socket");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let text = probe_as(&own, NOBODY, NOGROUP);
    assert!(text.starts_with("platforms 0 "), "{text}");
    assert!(
        text.contains("does not let this user connect"),
        "not told why: {text}"
    );

    let shared = Server::start_with(&["--socket-mode", "0660", "--socket-group", "nogroup"])
        .expect("server");
    let meta = std::fs::metadata(&shared.socket).expect("socket");
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    assert_eq!(meta.gid(), NOGROUP);
    let text = probe_as(&shared, NOBODY, NOGROUP);
    assert!(
        text.starts_with("platforms 1 "),
        "a member of the group: {text}"
    );
    let text = probe_as(&shared, STRANGER, STRANGER);
    assert!(text.starts_with("platforms 0 "), "a stranger: {text}");
}
