//! The limit on clients served at once (`max_tenants`): a client beyond it
//! is told the server is full, in one line, and loses nothing else; the
//! place comes back when a client ends. Over Unix sockets and TCP alike.
//! And the memory each tenant may hold (`tenant_memory`).

use std::io::Read;
use std::time::Duration;

use wormhole_it::{
    compile, eventually, live_tenants, program_and_server, run, use_wormhole, Artifacts, Route,
    RunOutput, Running, Server, TempDir,
};

/// A client that connects and stays, once it gets a place: the harness's
/// readiness probes (one per listening socket) take one each for a moment,
/// so a refusal is retried, within bounds.
fn hold<S: Read>(connect: impl Fn() -> S) -> S {
    let mut held = None;
    let got = eventually(Duration::from_secs(10), || {
        let mut s = connect();
        let mut hello = [0u8; 48];
        s.read_exact(&mut hello).expect("a greeting or a refusal");
        match &hello[..4] {
            b"WHOL" => held = Some(s),
            b"WHFL" => {}
            other => panic!("neither a greeting nor a refusal: {other:?}"),
        }
        held.is_some()
    });
    assert!(got, "no place for a client in 10 s");
    held.expect("held")
}

fn refused_for_fullness(out: &RunOutput, limit: u32) {
    assert!(
        !out.ok(),
        "a client beyond the limit was served:\n{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains(&format!("already serves the most clients it may ({limit})")),
        "the refused client was not told why:\n{}",
        out.stderr
    );
}

/// Runs `bin` until it is served (a place freed a moment ago may take
/// the tenant's end to come back), within 20 s.
fn served_again(bin: &std::path::Path, route: Route, server: &Server, dir: &std::path::Path) {
    let mut last = None;
    let back = eventually(Duration::from_secs(20), || {
        let out = run(bin, route, Some(server), dir).expect("run");
        let ok = served(&out);
        last = Some(out);
        ok
    });
    assert!(back, "the freed place was not given again: {last:?}");
}

fn served(out: &RunOutput) -> bool {
    // 0² + 1² + ... + 63²
    out.ok() && out.stdout.contains("sum of squares: 85344")
}

#[test]
fn a_client_beyond_the_limit_is_told_so_and_its_place_comes_back() {
    let (dir, bin, server) =
        program_and_server("limits-unix", "which_device", &["--max-tenants", "2"]);
    let connect = || std::os::unix::net::UnixStream::connect(&server.socket).expect("connect");
    let first = hold(connect);
    let _second = hold(connect);
    assert_eq!(
        live_tenants(&server).len(),
        2,
        "two held clients, two tenants"
    );

    let out = run(&bin, Route::Wormhole, Some(&server), dir.path()).expect("run");
    refused_for_fullness(&out, 2);
    assert_eq!(
        live_tenants(&server).len(),
        2,
        "the refusal started a tenant"
    );

    // One held client goes: its tenant ends and the next client is served.
    drop(first);
    served_again(&bin, Route::Wormhole, &server, dir.path());
    server.assert_logged("refused while all were taken");
}

#[test]
fn tcp_clients_count_against_the_same_limit() {
    let a = Artifacts::get().expect("artifacts");
    let dir = TempDir::new("limits-tcp").expect("scratch");
    let bin = compile("which_device", dir.path()).expect("compile");
    let (server, port) =
        Server::start_tcp_args(a, dir.path(), &["--max-tenants", "1"]).expect("server");
    let held = hold(|| std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect"));

    let out = run(&bin, Route::WormholeTcp(port), Some(&server), dir.path()).expect("run");
    refused_for_fullness(&out, 1);
    // A Unix client is refused too: the limit is the server's, not a port's.
    let out = run(&bin, Route::Wormhole, Some(&server), dir.path()).expect("run");
    refused_for_fullness(&out, 1);

    drop(held);
    served_again(&bin, Route::WormholeTcp(port), &server, dir.path());
    server.assert_logged("started for tcp client 127.0.0.1:");
}

/// What `tests/opencl/quota.c` prints through a server with a 10 MiB quota:
/// the device described as 10 MiB; two 4 MiB buffers and not a third,
/// refused at its creation, whether the sizes differ (each creation
/// answered) or not (creations of one size are batched, but not once they
/// could run out of room); the quota back after each release; an image
/// charged as the library sizes it.
const QUOTA_LINES: [&str; 8] = [
    "global memory: 10485760",
    "largest allocation: 10485760",
    "different sizes: 2 buffers, then -4",
    "one size: 2 buffers, then -4",
    "then finish: 0",
    "past the largest allocation: -61",
    "image beside a buffer: -4",
    "image alone: 0",
];

/// Asserts that a run printed every one of [`QUOTA_LINES`].
fn has_quota_lines<'a>(printed: impl Iterator<Item = &'a str>) {
    let printed: Vec<&str> = printed.collect();
    for want in QUOTA_LINES {
        assert!(printed.contains(&want), "no line {want:?} in {printed:?}");
    }
}

#[test]
fn a_tenant_holds_no_more_memory_than_its_quota_and_others_have_their_own() {
    let (dir, bin, server) =
        program_and_server("limits-memory", "quota", &["--tenant-memory", "10M"]);

    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("hold");
    use_wormhole(&mut cmd, dir.path(), &server.socket.to_string_lossy()).expect("env");
    let mut holder = Running::start(cmd, dir.path()).expect("start");
    let held = holder.line("holding:", Duration::from_secs(60));
    assert_eq!(
        held.as_deref(),
        Some("holding: 2 buffers, then -4"),
        "{:?}\n{}",
        holder.seen,
        holder.stderr()
    );
    has_quota_lines(holder.seen.iter().map(String::as_str));

    // While the first tenant holds 8 MiB, a second has 10 MiB of its own.
    let out = run(&bin, Route::Wormhole, Some(&server), dir.path()).expect("run");
    assert!(out.ok(), "{out:?}");
    has_quota_lines(out.stdout.lines());
    // Its tenant is named for what it is in ps and top.
    let tenants = live_tenants(&server);
    assert!(!tenants.is_empty(), "no tenant for the holder");
    for t in tenants {
        let comm = std::fs::read_to_string(format!("/proc/{t}/comm")).unwrap_or_default();
        assert_eq!(comm.trim(), "wormhole-tenant", "tenant {t}");
    }
    let pid = holder.pid();
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    // SIGUSR1 asks the listener and every tenant for a report: the holder's
    // tenant names its client and the 8 MiB it holds of its 10.
    // SAFETY: kill takes no pointers; the pid is the server's.
    unsafe { libc::kill(server.pid() as libc::pid_t, libc::SIGUSR1) };
    let want = format!("(unix client pid {pid} uid {uid}): ");
    let reported = eventually(Duration::from_secs(10), || {
        let log = server.log_text();
        log.contains("asking each for its report")
            && log
                .lines()
                .any(|l| l.contains(&want) && l.contains("memory 8392704 of 10485760 bytes"))
    });
    assert!(reported, "no report:\n{}", server.log_text());
    holder.kill();
    // The log names each tenant's client, as the kernel knows it.
    server.assert_logged(&format!("started for unix client pid {pid} uid {uid}"));
    server.assert_logged("memory quota refused");
}

/// Reports on SIGUSR1 leave the calls in flight alone: a program served
/// while the listener is asked for reports every few milliseconds runs to
/// its correct end, and its tenant reports (a tenant that did not take the
/// signal in its own thread would be ended by it, or see calls fail).
#[test]
fn reports_leave_the_calls_in_flight_alone() {
    let (dir, bin, server) = program_and_server("limits-reports", "which_device", &[]);
    let listener = server.pid() as libc::pid_t;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let asker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // Bounded: at most 2,000 signals, 5 ms apart.
            for _ in 0..2000 {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                // SAFETY: kill takes no pointers; the pid is the server's.
                unsafe { libc::kill(listener, libc::SIGUSR1) };
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let outs: Vec<RunOutput> = (0..3)
        .map(|_| run(&bin, Route::Wormhole, Some(&server), dir.path()).expect("run"))
        .collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    asker.join().expect("asker");
    for out in &outs {
        assert!(
            served(out),
            "a program asked about mid-call failed: {out:?}"
        );
    }
    let log = server.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains("(unix client pid ") && l.contains(" calls in ")),
        "no tenant reported:\n{log}"
    );
}
