//! Several servers side by side, each with its own driver configuration:
//! every client gets the device of the server it names, and both serve at
//! once. PoCL's `POCL_DEVICES` stands in for two driver versions (its
//! `pthread` and `basic` devices have different names and code).

use wormhole_it::{compile, run, Artifacts, Route, Server, TempDir};

#[test]
fn two_servers_with_different_drivers_serve_their_own_clients_at_once() {
    let a = Artifacts::get().expect("artifacts");
    let dir = TempDir::new("side-by-side").expect("scratch");
    let bin = compile("which_device", dir.path()).expect("compile");
    let mut servers = Vec::new();
    for driver in ["pthread", "basic"] {
        let d = dir.path().join(driver);
        std::fs::create_dir_all(&d).expect("server folder");
        let s = Server::start_env(a, &d, &[("POCL_DEVICES", driver)]).expect("server");
        servers.push((driver, d, s));
    }
    // Both clients run at the same time, each through its own server.
    let outs: Vec<_> = std::thread::scope(|sc| {
        let runs: Vec<_> = servers
            .iter()
            .map(|(_, d, s)| sc.spawn(|| run(&bin, Route::Wormhole, Some(s), d).expect("run")))
            .collect();
        runs.into_iter()
            .map(|r| r.join().expect("client thread"))
            .collect()
    });
    for ((driver, _, server), out) in servers.iter().zip(&outs) {
        assert!(
            out.ok(),
            "{driver}:\n{}\n{}\n{}",
            out.stdout,
            out.stderr,
            server.log_text()
        );
        assert!(
            out.stdout.contains(&format!("device: {driver}-")),
            "the {driver} server's client saw another device:\n{}",
            out.stdout
        );
        // 0² + 1² + ... + 63²
        assert!(
            out.stdout.contains("sum of squares: 85344"),
            "{}",
            out.stdout
        );
    }
}
