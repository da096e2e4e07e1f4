//! The same programs through Wormhole's TCP transport (no shared memory).
//! `events` includes event and memory-destructor callbacks, which over TCP
//! come back in band on the call stream; `gated`, `gated_maps` and
//! `callbacks`, transfers and maps that complete after the call returns,
//! which such a callback carries out.

#[test]
fn tcp_matches_native() {
    wormhole_it::native_vs_wormhole_tcp(&[
        "buffers",
        "images",
        "kernels",
        "programs",
        "errors",
        "platform",
        "events",
        "gated",
        "gated_maps",
        "callbacks",
        "image_host_ptr",
        "local_answers",
        "waits",
    ]);
}

/// With a token file, a TCP server serves only clients that prove they
/// know its secret: the right token computes, a wrong one and none are
/// refused with a message that says why, and the server logs the refusal.
#[test]
fn a_tcp_token_admits_only_clients_that_know_it() {
    use std::os::unix::fs::PermissionsExt;
    use wormhole_it::{compile, run_env, Artifacts, Route, Server, TempDir};
    let a = Artifacts::get().expect("artifacts");
    let dir = TempDir::new("tcp-token").expect("scratch");
    let bin = compile("which_device", dir.path()).expect("compile");
    let write_token = |name: &str, secret: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, secret).expect("token file");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        p
    };
    let good = write_token("good", "the shared secret of this test\n");
    let bad = write_token("bad", "some other secret, as long as it\n");
    let flag = good.to_string_lossy().into_owned();
    let (server, port) =
        Server::start_tcp_args(a, dir.path(), &["--tcp-token-file", &flag]).expect("server");
    let log = std::ffi::OsStr::new("1");
    let through = |token: Option<&std::path::Path>| {
        let mut env = vec![("WORMHOLE_LOG", log)];
        if let Some(t) = token {
            env.push(("WORMHOLE_TOKEN_FILE", t.as_os_str()));
        }
        run_env(
            &bin,
            Route::WormholeTcp(port),
            Some(&server),
            dir.path(),
            &env,
        )
        .expect("run")
    };
    let ok = through(Some(&good));
    assert!(ok.ok(), "with the token:\n{}\n{}", ok.stdout, ok.stderr);
    assert!(ok.stdout.contains("sum of squares: 85344"), "{}", ok.stdout);
    let wrong = through(Some(&bad));
    assert!(!wrong.ok(), "a wrong token was served:\n{}", wrong.stdout);
    assert!(
        wrong.stderr.contains("refused our token"),
        "{}",
        wrong.stderr
    );
    let none = through(None);
    assert!(!none.ok(), "no token was served:\n{}", none.stdout);
    assert!(none.stderr.contains("asks for a token"), "{}", none.stderr);
    server.assert_logged("wrong token, refused");
}

/// A port that accepts and says nothing (not a Wormhole server) is an
/// error within the connect timeout, not a program stuck in its first
/// OpenCL call.
#[test]
fn a_port_that_never_greets_is_an_error_not_a_hang() {
    use wormhole_it::{compile, run_bounded, use_wormhole, TempDir};
    let dir = TempDir::new("tcp-silent").expect("scratch");
    let bin = compile("which_device", dir.path()).expect("compile");
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    // Accept, hold every connection open, never write.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().take(8).flatten() {
            held.push(s);
        }
        std::thread::sleep(std::time::Duration::from_secs(120));
    });
    let mut cmd = std::process::Command::new(&bin);
    use_wormhole(&mut cmd, dir.path(), &format!("tcp:127.0.0.1:{port}")).expect("env");
    cmd.env("WORMHOLE_LOG", "1");
    let started = std::time::Instant::now();
    let out = run_bounded(cmd, std::time::Duration::from_secs(60)).expect("run");
    assert!(!out.timed_out, "still waiting after 60 s:\n{}", out.stderr);
    assert!(!out.ok(), "served by a silent port?\n{}", out.stdout);
    assert!(
        out.stderr.contains("sent no Wormhole greeting within 10 s"),
        "{}",
        out.stderr
    );
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(9),
        "gave up before the timeout: {:?}",
        started.elapsed()
    );
}

/// `tests/opencl/stranded.c ARGS`, set to reach a fresh server over TCP on
/// loopback (started with `server_args`), with its scratch folder.
fn stranded_over_tcp(
    tag: &str,
    server_args: &[&str],
    args: &[&str],
) -> (
    wormhole_it::TempDir,
    wormhole_it::Server,
    std::process::Command,
) {
    use wormhole_it::{compile, use_wormhole, Artifacts, Server, TempDir};
    let a = Artifacts::get().expect("artifacts");
    let dir = TempDir::new(tag).expect("scratch");
    let bin = compile("stranded", dir.path()).expect("compile");
    let (server, port) = Server::start_tcp_args(a, dir.path(), server_args).expect("server");
    let mut cmd = std::process::Command::new(&bin);
    cmd.args(args);
    use_wormhole(&mut cmd, dir.path(), &format!("tcp:127.0.0.1:{port}")).expect("env");
    (dir, server, cmd)
}

/// A TCP client killed in the middle of a long call ends its tenant at
/// once, as over a Unix socket: the killed program's kernel does not keep
/// the device busy until it finishes.
#[test]
fn a_killed_tcp_clients_tenant_ends_mid_kernel() {
    use std::time::Duration;
    use wormhole_it::{live_tenants, tenant_ended, the_live_tenant, Running};
    // About a minute of kernel on a CPU.
    let (dir, server, cmd) = stranded_over_tcp("tcp-killed", &[], &["kernel", "50000000000"]);
    let mut client = Running::start_until(cmd, dir.path(), "waiting", Duration::from_secs(120));
    // The client's tenant: the server's one live tenant (those of the
    // harness's readiness probes ended when the probes hung up).
    let tenant = the_live_tenant(&server).unwrap_or_else(|| {
        panic!(
            "live tenants {:?}\nclient: {:?}\n{}\nserver log:\n{}",
            live_tenants(&server),
            client.seen,
            client.stderr(),
            server.log_text()
        )
    });
    client.kill();
    assert!(
        tenant_ended(&server, tenant, Duration::from_secs(10)),
        "tenant {tenant} still runs 10 s after its client was killed\n{}",
        server.log_text()
    );
    server.assert_logged("client gone");
}

/// A tenant that stops reading because a long kernel runs ahead of a write
/// the client streams to it is busy, not gone: with a dead-peer time far
/// shorter than the kernel, the write still arrives whole. (A
/// `TCP_USER_TIMEOUT` as short would cut it: it also bounds how long a peer
/// may leave the window shut.)
#[test]
fn a_busy_tenant_is_not_taken_for_a_dead_one() {
    // Some seconds of kernel, several times the dead-peer time.
    let (_dir, _server, mut cmd) = stranded_over_tcp(
        "tcp-busy",
        &["--tcp-dead-peer", "2"],
        &["write", "6000000000"],
    );
    cmd.env("WORMHOLE_TCP_DEAD_PEER", "2");
    let t = std::time::Instant::now();
    let out = wormhole_it::run_bounded(cmd, std::time::Duration::from_secs(300)).expect("run");
    eprintln!("{:?}: {}", t.elapsed(), out.stdout);
    assert!(out.ok(), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("wait returned 0"), "{}", out.stdout);
    assert!(out.stdout.contains("data back: same"), "{}", out.stdout);
}
