//! Delay storing (docs/delay-storing.md): a device shared by more tenants
//! than it holds. The integration suite's programs, and `pressure.c`
//! instances that hold more than the whole budget between them, run at once
//! through one server whose device budget is far smaller than what they
//! hold together, over Unix sockets and TCP: every output must be the
//! native one, and the server's own report must show that objects were
//! evicted, saved and restored. Then the eager baseline, the hard limit of
//! `residency = off`, and `kill -9` of a tenant in the middle of an
//! eviction to disk, which must leave no store space and no share of the
//! device behind.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wormhole_it::{
    check_pair, compile, eventually, live_tenants, program_and_server, run_env, Artifacts, Route,
    RunOutput, Running, Server, TempDir,
};

/// The suite's programs (tests/opencl.rs) and how many `pressure`
/// instances run beside them.
const SUITE: &[&str] = &[
    "buffers", "images", "programs", "kernels", "events", "gated", "errors", "platform", "large",
    "info", "waits",
];

/// Each pressure instance holds about 11 MiB with this; four of them alone
/// hold more than the budget below, and `large` needs 24 MiB at once.
const PRESSURE_MB: &str = "16";
const BUDGET: &str = "40M";

/// The device's ledger, as the listener reports it on SIGUSR1.
#[derive(Debug, Default)]
struct Ledger {
    used: u64,
    asks: u64,
    saved: u64,
    restored: u64,
    refusals: u64,
    tenants: usize,
}

/// The number after `key` in `line` (`key` ends with a space).
fn field(line: &str, key: &str) -> u64 {
    line.split(key)
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {key:?} in {line:?}"))
}

/// Asks the listener for its report and reads the ledger from it.
fn ledger(server: &Server) -> Ledger {
    let before = server
        .log_text()
        .matches("residency: device budget")
        .count();
    // SAFETY: kill takes no pointers; the server is our child, alive.
    unsafe { libc::kill(server.pid() as i32, libc::SIGUSR1) };
    let mut line = None;
    let seen = eventually(Duration::from_secs(5), || {
        let log = server.log_text();
        line = log
            .lines()
            .filter(|l| l.contains("residency: device budget"))
            .nth(before)
            .map(str::to_string);
        line.is_some()
    });
    assert!(seen, "no residency report:\n{}", server.log_text());
    let line = line.unwrap_or_default();
    let log = server.log_text();
    let tenants = log
        .lines()
        .rev()
        .take_while(|l| !l.contains("residency: device budget"))
        .filter(|l| l.contains("residency: tenant "))
        .count();
    Ledger {
        used: field(&line, "bytes, "),
        asks: field(&line, "asks "),
        saved: field(&line, " saved "),
        restored: field(&line, "restored "),
        refusals: field(&line, "refusals "),
        tenants,
    }
}

fn pressure_env(mb: &str) -> Vec<(&'static str, std::ffi::OsString)> {
    vec![
        ("WH_PRESSURE_MB", mb.into()),
        ("WH_PRESSURE_ROUNDS", "4".into()),
    ]
}

/// A command that runs `bin` through `server`'s Unix socket.
fn through(server: &Server, bin: &Path, scratch: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(bin);
    wormhole_it::use_wormhole(
        &mut cmd,
        scratch,
        &format!("unix:{}", server.socket.display()),
    )
    .expect("env");
    cmd
}

/// Runs `bin` under pressure `penv` to its end, in `scratch`: through
/// `server`, or natively without one.
fn run_pressure(
    bin: &Path,
    server: Option<&Server>,
    scratch: &Path,
    penv: &[(&'static str, std::ffi::OsString)],
) -> RunOutput {
    let route = if server.is_some() {
        Route::Wormhole
    } else {
        Route::Native
    };
    run_env(bin, route, server, scratch, &env_refs(penv)).expect("run")
}

fn env_refs<'a>(
    e: &'a [(&'static str, std::ffi::OsString)],
) -> Vec<(&'static str, &'a std::ffi::OsStr)> {
    e.iter().map(|(k, v)| (*k, v.as_os_str())).collect()
}

/// Runs the suite and `pressures` pressure instances (one of them over TCP
/// when `tcp` is given) through `server` all at once; checks each against
/// its native run.
fn suite_at_once(dir: &Path, server: &Server, tcp: Option<u16>, pressures: usize) {
    let mut bins: Vec<(String, PathBuf)> = SUITE
        .iter()
        .chain(std::iter::once(&"pressure"))
        .map(|n| {
            (
                n.to_string(),
                compile(n, dir).unwrap_or_else(|e| panic!("{e}")),
            )
        })
        .collect();
    let penv = pressure_env(PRESSURE_MB);
    let native: Vec<RunOutput> = bins
        .iter()
        .map(|(n, b)| {
            let env = if n == "pressure" {
                env_refs(&penv)
            } else {
                Vec::new()
            };
            run_env(b, Route::Native, None, dir, &env).unwrap_or_else(|e| panic!("{n}: {e}"))
        })
        .collect();
    let pressure = bins.pop().expect("pressure");
    let pressure_native = native.last().expect("native pressure");
    let mut jobs: Vec<(String, PathBuf, Route, bool)> = bins
        .iter()
        .map(|(n, b)| (n.clone(), b.clone(), Route::Wormhole, false))
        .collect();
    for i in 0..pressures {
        let route = match (i, tcp) {
            (0, Some(port)) => Route::WormholeTcp(port),
            _ => Route::Wormhole,
        };
        jobs.push((format!("pressure #{i}"), pressure.1.clone(), route, true));
    }
    let remote: Vec<(String, bool, RunOutput)> = std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .iter()
            .map(|(name, bin, route, is_pressure)| {
                let penv = &penv;
                s.spawn(move || {
                    let env = if *is_pressure {
                        env_refs(penv)
                    } else {
                        Vec::new()
                    };
                    // Its own folder: each run writes its ICD file there.
                    let own = TempDir::new("client").expect("dir");
                    let out = run_env(bin, *route, Some(server), own.path(), &env)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                    (name.clone(), *is_pressure, out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a client thread"))
            .collect()
    });
    let log = server.log_text();
    for (i, (name, is_pressure, out)) in remote.iter().enumerate() {
        let n = if *is_pressure {
            pressure_native
        } else {
            &native[i]
        };
        check_pair(name, n, out, &log);
    }
}

#[test]
fn the_suite_passes_under_pressure_with_several_clients_at_once() {
    let a = Artifacts::get().expect("artifacts");
    let dir = TempDir::new("residency-delay").expect("dir");
    let (server, port) = Server::start_tcp_args(
        a,
        dir.path(),
        &["--oversubscribe", "--device-memory", BUDGET],
    )
    .expect("server");
    suite_at_once(dir.path(), &server, Some(port), 4);
    let l = ledger(&server);
    // Pressure happened: idle tenants were asked for room, and objects
    // went out to the store and came back.
    assert!(l.asks > 10, "{l:?}");
    assert!(l.saved > 40 << 20, "more was saved than the budget: {l:?}");
    assert!(l.restored > 40 << 20, "{l:?}");
    assert_eq!(l.refusals, 0, "nobody was refused room: {l:?}");
    // Every client is gone: nothing is left on the device.
    let empty = eventually(Duration::from_secs(10), || ledger(&server).used == 0);
    assert!(
        empty,
        "the device still counts memory: {:?}",
        ledger(&server)
    );
    eprintln!("delay storing under pressure: {l:?}");
}

#[test]
fn the_eager_baseline_passes_too() {
    let eager = [
        "--oversubscribe",
        "--residency",
        "eager",
        "--device-memory",
        BUDGET,
    ];
    let (dir, bin, server) = program_and_server("residency-eager", "pressure", &eager);
    let penv = pressure_env("8");
    let native = run_pressure(&bin, None, dir.path(), &penv);
    let outs: Vec<RunOutput> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let (bin, penv, server) = (&bin, &penv, &server);
                s.spawn(move || {
                    let own = TempDir::new("client").expect("dir");
                    run_pressure(bin, Some(server), own.path(), penv)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    for o in &outs {
        check_pair("pressure (eager)", &native, o, &server.log_text());
    }
    // The clients fit together (3 x ~6 MiB in 40 MiB), yet eager saved
    // and restored at the switches between them.
    let l = ledger(&server);
    assert!(l.saved > 0 && l.restored > 0, "{l:?}");
}

#[test]
fn without_oversubscription_the_budget_is_a_hard_limit() {
    let (dir, bin, server) =
        program_and_server("residency-off", "pressure", &["--device-memory", "10M"]);
    // The first holds about 9.6 MiB, and keeps it.
    let mut cmd = through(&server, &bin, dir.path());
    cmd.env("WH_PRESSURE_MB", "16").env("WH_PRESSURE_HOLD", "1");
    let mut first = Running::start_until(cmd, dir.path(), "~holding", Duration::from_secs(60));
    // The second does not fit beside it: its creation fails as out of
    // memory, as on a full device.
    let penv = pressure_env("16");
    let second = run_pressure(&bin, Some(&server), dir.path(), &penv);
    assert!(
        !second.ok(),
        "the second client was served: {}",
        second.stdout
    );
    assert!(
        second.stderr.contains("failed: -4"),
        "CL_MEM_OBJECT_ALLOCATION_FAILURE expected: {}",
        second.stderr
    );
    assert!(ledger(&server).refusals > 0);
    // Once the first is gone, its share is back and the second fits.
    first.kill();
    let native = run_pressure(&bin, None, dir.path(), &penv);
    let mut last = None;
    let served = eventually(Duration::from_secs(20), || {
        let o = run_pressure(&bin, Some(&server), dir.path(), &penv);
        let ok = o.ok();
        last = Some(o);
        ok
    });
    assert!(served, "never served after the first left: {last:?}");
    check_pair(
        "pressure after the first left",
        &native,
        last.as_ref().expect("ran"),
        &server.log_text(),
    );
}

/// Descriptors of `pid` open on files in `dir` (store files, which are
/// unlinked: the link reads "DIR/#INODE (deleted)").
fn store_files(pid: u32, dir: &Path) -> Vec<PathBuf> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let prefix = dir.to_string_lossy().to_string();
    fds.filter_map(|e| {
        let p = e.ok()?.path();
        let target = std::fs::read_link(&p).ok()?;
        target.to_string_lossy().starts_with(&prefix).then_some(p)
    })
    .collect()
}

/// Blocks allocated to the file behind a `/proc/PID/fd/N` link.
fn blocks(fd_link: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(fd_link).map_or(0, |m| m.blocks())
}

#[test]
fn kill_9_during_an_eviction_leaves_no_store_space_or_device_memory_behind() {
    let a = Artifacts::get().expect("artifacts");
    let dir = TempDir::new("residency-kill").expect("dir");
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).expect("store dir");
    let server = Server::start_args(
        a,
        dir.path(),
        &[
            "--oversubscribe",
            "--device-memory",
            "320M",
            "--store-dir",
            store.to_str().expect("utf-8 path"),
        ],
    )
    .expect("server");
    let bin = compile("pressure", dir.path()).expect("compile");
    let holder = |mb: &str| {
        let mut cmd = through(&server, &bin, dir.path());
        cmd.env("WH_PRESSURE_MB", mb).env("WH_PRESSURE_HOLD", "1");
        Running::start_until(cmd, dir.path(), "~holding", Duration::from_secs(120))
    };
    // The victim holds about 240 MiB, most of it dirty.
    let _victim = holder("320");
    let victim_tenant = {
        let mut t = live_tenants(&server);
        assert_eq!(t.len(), 1, "one tenant: {t:?}");
        t.remove(0)
    };
    let listener_files = store_files(server.pid(), &store);
    assert!(listener_files.is_empty(), "the listener holds store files");
    assert_eq!(store_files(victim_tenant, &store).len(), 1);
    let before = ledger(&server).used;
    assert!(before > 180 << 20, "the victim holds its 192 MiB: {before}");
    // A second client needs room: the victim is asked to evict; it is
    // killed while it writes its store.
    let _taker = std::thread::scope(|s| {
        let taker = s.spawn(|| holder("320"));
        let link = store_files(victim_tenant, &store)
            .pop()
            .expect("the victim's store");
        let deadline = Instant::now() + Duration::from_secs(60);
        while blocks(&link) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        let written = blocks(&link) * 512;
        assert!(written > 0, "the victim never started saving");
        // SAFETY: kill takes no pointers; the victim's tenant is the
        // server's child, alive a moment ago.
        unsafe { libc::kill(victim_tenant as i32, libc::SIGKILL) };
        eprintln!("killed the tenant with {written} bytes of its store written");
        taker.join().expect("the taker")
    });
    // Its share came back (the taker got the room it asked for), its store
    // is gone with it, and nothing else holds a store file but the taker.
    let gone = eventually(Duration::from_secs(10), || {
        !live_tenants(&server).contains(&victim_tenant)
    });
    assert!(gone, "the killed tenant is still there");
    let l = ledger(&server);
    assert_eq!(l.tenants, 1, "only the taker is in the ledger: {l:?}");
    assert!(
        l.used < 250 << 20,
        "the victim's 192 MiB are not counted: {l:?}"
    );
    let holders: Vec<u32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&p| !store_files(p, &store).is_empty())
        .collect();
    assert_eq!(holders.len(), 1, "store files held by {holders:?}");
    assert!(store_files(server.pid(), &store).is_empty());
}

/// Regression: the server asked a tenant whose read waits on a user event
/// whether it had work in flight (a marker behind the read) and released
/// the marker's event when it had not completed; the client then set the
/// event to an error, the marker failed behind the read, and PoCL 3.1
/// aborted the tenant (found by the suite under pressure, `gated.c`).
#[test]
fn a_gate_that_fails_while_the_server_looks_for_room_costs_the_tenant_nothing() {
    let budget = ["--oversubscribe", "--device-memory", "12M"];
    let (dir, gate, server) = program_and_server("residency-gate", "gate_fail", &budget);
    let pressure = compile("pressure", dir.path()).expect("compile");
    let native = run_env(&gate, Route::Native, None, dir.path(), &[]).expect("native");
    let mut cmd = through(&server, &gate, dir.path());
    cmd.env("WH_GATE_SLEEP_MS", "3000");
    let mut gated = Running::start_until(cmd, dir.path(), "~gated", Duration::from_secs(60));
    // Another client needs room: the gated tenant is asked (and is busy:
    // its read waits) until its gate fails and its queue drains.
    let penv = pressure_env("8");
    let own = TempDir::new("client").expect("dir");
    let other = run_pressure(&pressure, Some(&server), own.path(), &penv);
    assert!(other.ok(), "{}\n{}", other.stdout, other.stderr);
    let mut lines = Vec::new();
    while let Some(l) = gated.line("", Duration::from_secs(60)) {
        let done = l.ends_with(": done");
        lines.push(l);
        if done {
            break;
        }
    }
    let status = gated.wait();
    assert!(
        status.is_some_and(|s| s.success()),
        "the gated client failed ({status:?}): {}\n{}",
        gated.stderr(),
        server.log_text()
    );
    let want: Vec<&str> = native.compared_lines();
    let got: Vec<&str> = gated
        .seen
        .iter()
        .map(String::as_str)
        .filter(|l| !l.starts_with('~'))
        .collect();
    assert_eq!(got, want, "as natively");
    assert!(
        !server.log_text().contains("SIGABRT"),
        "{}",
        server.log_text()
    );
    assert!(
        ledger(&server).asks > 0,
        "the gated tenant was asked for room"
    );
}
