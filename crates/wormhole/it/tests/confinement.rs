//! Tenants confined from each other and from the server.
//!
//! On a CPU device a kernel is native code in its tenant's process, so a
//! client can make system calls as its tenant. A hostile kernel
//! (`tests/opencl/hostile.c`) tries to open a neighbour tenant's
//! `/proc/PID/mem` and `/proc/PID/fd`, to signal the neighbour, the listener
//! and everyone, to create a file in the socket's directory, to trace and
//! read the neighbour's memory, and to read the TCP token file. Each must be
//! refused while the neighbour's secret and results stay right: with the
//! server as root (a uid per client user), and as an unprivileged user
//! (namespaces of the server's own user). Without confinement the same
//! kernel succeeds, so the attacks are real and the tests can fail.
//!
//! Each test prints the server's line saying which protections it applied.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use wormhole_it::{
    compile, run_bounded, the_live_tenant, use_wormhole, Artifacts, Running, Server, TempDir,
};

const NOBODY: u32 = 65534;
const NOGROUP: u32 = 65534;
const LIMIT: Duration = Duration::from_secs(120);

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Starts a server (as `user` if given) that also holds a TCP token file,
/// the neighbour (victim) and then the attacker; returns the attack's
/// results by name, the victim's verdict and the server's confinement line.
fn attack(args: &[&str], user: Option<(u32, u32)>) -> (BTreeMap<String, i64>, String, String) {
    let a = Artifacts::get().expect("artifacts");
    let dir = TempDir::new("confine").expect("dir");
    let bin = compile("hostile", dir.path()).expect("compile hostile.c");
    let sdir = dir.path().join("server");
    std::fs::create_dir_all(&sdir).expect("server dir");
    let token = sdir.join("token");
    std::fs::write(&token, "a secret the tenant must not read\n").expect("token");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("token mode");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let tcp = format!("127.0.0.1:{port}");
    let token_s = token.display().to_string();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--tcp", &tcp, "--tcp-token-file", &token_s]);
    let server = match user {
        Some((uid, gid)) => {
            std::os::unix::fs::chown(&token, Some(uid), Some(gid)).expect("chown token");
            Server::start_as(a, &sdir, uid, gid, &all)
        }
        None => Server::start_args(a, &sdir, &all),
    }
    .expect("server");
    let target = format!("unix:{}", server.socket.display());
    let go = dir.path().join("go");

    let mut victim = Command::new(&bin);
    victim.arg("victim").arg(&go);
    use_wormhole(&mut victim, dir.path(), &target).expect("client env");
    let mut victim = Running::start_until(victim, dir.path(), "ready", LIMIT);
    let tenant = the_live_tenant(&server).expect("the victim's tenant");

    let mut attacker = Command::new(&bin);
    attacker
        .arg("attack")
        .arg(tenant.to_string())
        .arg(server.pid().to_string())
        .arg(&sdir)
        .arg(&token);
    use_wormhole(&mut attacker, dir.path(), &target).expect("client env");
    let out = run_bounded(attacker, LIMIT).expect("attacker");
    assert!(
        out.ok(),
        "the attacker failed: {}\n{}",
        out.stdout,
        out.stderr
    );
    let results: BTreeMap<String, i64> = out
        .stdout
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect();
    assert_eq!(results.len(), 11, "{}", out.stdout);

    std::fs::write(&go, "").expect("go");
    let verdict = victim
        .line("", LIMIT)
        .unwrap_or_else(|| format!("no verdict: {}", victim.stderr()));
    let planted = sdir.join("planted").exists();
    let line = server
        .log_text()
        .lines()
        .find(|l| l.contains("tenant confinement:"))
        .map(str::to_string)
        .unwrap_or_default();
    eprintln!("{line}");
    for (k, v) in &results {
        eprintln!("  {k:16} {v}");
    }
    assert_eq!(
        planted,
        results["write-dir"] >= 0,
        "the file in the socket's directory and the kernel's result disagree"
    );
    (results, verdict, line)
}

fn assert_all_refused(results: &BTreeMap<String, i64>, verdict: &str) {
    for (k, v) in results {
        if k != "uid" && k != "own-proc" {
            assert!(*v < 0, "{k} was allowed ({v}): {results:?}");
        }
    }
    // What a tenant keeps: its own /proc entries, writable (NVIDIA's driver
    // does not start CUDA without them; seen on an H200).
    assert!(results["own-proc"] >= 0, "own /proc refused: {results:?}");
    assert_eq!(verdict, "intact", "the neighbour's data or results changed");
}

#[test]
fn a_hostile_kernel_reaches_neither_its_neighbour_nor_the_server() {
    if !is_root() {
        eprintln!("skipped: the server gives tenants uids of their own only as root");
        return;
    }
    let (results, verdict, line) = attack(&[], None);
    assert!(line.contains("a uid per tenant"), "{line}");
    assert!(line.contains("namespaces"), "{line}");
    assert_all_refused(&results, &verdict);
}

#[test]
fn under_an_unprivileged_server_too() {
    // As root: the server runs as nobody. Otherwise it runs as us.
    let user = is_root().then_some((NOBODY, NOGROUP));
    let (results, verdict, line) = attack(&[], user);
    assert!(line.contains("without a uid per tenant"), "{line}");
    assert_all_refused(&results, &verdict);
    // Not refused by permissions alone: the socket's directory and the
    // token file (both the server user's) are not in the tenant's root.
    let enoent = -i64::from(libc::ENOENT);
    assert_eq!(results["write-dir"], enoent, "{results:?}");
    assert_eq!(results["open-token"], enoent, "{results:?}");
}

#[test]
fn unconfined_the_same_kernel_reaches_them() {
    if !is_root() {
        eprintln!("skipped: needs root to show what an unconfined root tenant can do");
        return;
    }
    let (results, _, line) = attack(&["--no-confine"], None);
    assert!(line.contains("off"), "{line}");
    // The attacks are real: an unconfined tenant (root here) signals its
    // neighbour and the listener, opens the neighbour's memory, and writes
    // beside the socket.
    for k in [
        "open-mem",
        "open-fd",
        "kill-neighbour",
        "kill-listener",
        "write-dir",
    ] {
        assert!(results[k] >= 0, "{k} was refused unconfined: {results:?}");
    }
}
