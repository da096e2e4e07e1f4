//! Over TCP between hosts, a peer that vanishes from the network (its host
//! down, a switch gone) is given up on both sides: the client's waiting call
//! returns an error instead of waiting for ever, and its tenant ends,
//! freeing what it held. An idle connection is given up after the dead-peer
//! time (keepalive probes); one with data left unacknowledged at the
//! kernel's retransmission limit, which these hosts shorten from about 15
//! minutes to seconds (`net.ipv4.tcp_retries2` = 3, per namespace). The two
//! hosts are network namespaces joined by a bridge in a third; the cut takes
//! the server's port off the bridge, so no packet is refused, they are only
//! lost. Needs root (CAP_NET_ADMIN); without it the test says why and passes.

use std::process::Command;
use std::time::{Duration, Instant};

use wormhole_it::{
    compile, is_tenant, live_tenants, tenant_ended, the_live_tenant, use_wormhole, Artifacts,
    Running, Server, TempDir,
};

/// What both sides are told: give a silent peer up after this long.
const DEAD_PEER_SECS: u64 = 2;
/// Far more than the dead-peer time (probes and retransmissions included),
/// far less than the kernel's own limits (hours idle, ~15 min unacknowledged).
const GIVE_UP_WITHIN: Duration = Duration::from_secs(30);

/// Three namespaces: server, client and the bridge between them; deleted on
/// drop.
struct Hosts {
    server: String,
    client: String,
    switch: String,
}

impl Hosts {
    fn new(tag: &str) -> Hosts {
        let base = format!("whp{}{tag}", std::process::id());
        let h = Hosts {
            server: format!("{base}s"),
            client: format!("{base}c"),
            switch: format!("{base}m"),
        };
        let (s, c, m) = (&h.server, &h.client, &h.switch);
        let script = format!(
            "set -e
             for n in {s} {c} {m}; do ip netns add $n; ip -n $n link set lo up; done
             ip -n {m} link add br0 type bridge && ip -n {m} link set br0 up
             ip -n {m} link add tos type veth peer name eth0 netns {s}
             ip -n {m} link add toc type veth peer name eth0 netns {c}
             for p in tos toc; do ip -n {m} link set $p master br0 up; done
             ip -n {s} addr add 10.78.0.1/24 dev eth0 && ip -n {s} link set eth0 up
             ip -n {c} addr add 10.78.0.2/24 dev eth0 && ip -n {c} link set eth0 up
             for n in {s} {c}; do
               ip netns exec $n sh -c 'echo 3 > /proc/sys/net/ipv4/tcp_retries2'
             done
             ip netns exec {c} ping -c 1 -W 5 10.78.0.1 >/dev/null"
        );
        let out = Command::new("sh")
            .args(["-c", &script])
            .output()
            .expect("sh");
        assert!(
            out.status.success(),
            "setting up the hosts: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        h
    }

    /// Unplugs the server's cable from the switch.
    fn cut(&self) {
        let st = Command::new("ip")
            .args(["-n", &self.switch, "link", "set", "tos", "nomaster"])
            .status()
            .expect("ip");
        assert!(st.success(), "cutting the link");
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for n in [&self.server, &self.client, &self.switch] {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let ok = unsafe { libc::geteuid() } == 0;
    if !ok {
        eprintln!("SKIPPED: the partition test needs root to make network namespaces (CI has it)");
    }
    ok
}

/// Kills a tenant that outlived a failed test.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !is_tenant(self.0) {
            return;
        }
        if let Ok(pid) = i32::try_from(self.0) {
            // SAFETY: kill has no memory preconditions; the pid was a tenant
            // a moment ago.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// `stranded MODE` on the client host waits on the server on the other;
/// the network is cut under it.
fn cut_while_waiting(mode: &str) {
    let a = Artifacts::get().expect("artifacts");
    let dir = TempDir::new(&format!("partition-{mode}")).expect("scratch");
    let bin = compile("stranded", dir.path()).expect("compile");
    let hosts = Hosts::new(&mode[..1]);
    let dead = DEAD_PEER_SECS.to_string();
    let server = Server::start_in_netns(
        a,
        dir.path(),
        &hosts.server,
        &["--tcp", "10.78.0.1:7700", "--tcp-dead-peer", &dead],
    )
    .expect("server");

    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &hosts.client])
        .arg(&bin)
        .arg(mode);
    use_wormhole(&mut cmd, dir.path(), "tcp:10.78.0.1:7700").expect("client env");
    cmd.env("WORMHOLE_TCP_DEAD_PEER", &dead)
        .env("WORMHOLE_LOG", "1");
    let mut client = Running::start(cmd, dir.path()).expect("client");
    if client.line("waiting", Duration::from_secs(120)).is_none() {
        panic!(
            "the client never waited: {:?}\n{}\nserver log:\n{}",
            client.seen,
            client.stderr(),
            server.log_text()
        );
    }
    let tenant = the_live_tenant(&server).unwrap_or_else(|| {
        panic!(
            "live tenants {:?}\n{}",
            live_tenants(&server),
            server.log_text()
        )
    });
    let _reap = KillOnDrop(tenant);

    hosts.cut();
    let cut = Instant::now();
    let Some(returned) = client.line("wait returned", GIVE_UP_WITHIN) else {
        panic!(
            "the client still waits {GIVE_UP_WITHIN:?} after the cut: {:?}",
            client.seen
        );
    };
    let took = cut.elapsed();
    let status = client.wait();
    let err = client.stderr();
    assert!(
        returned != "wait returned 0",
        "the wait succeeded with the server cut off"
    );
    assert!(
        status.is_some_and(|s| s.success()),
        "client: {status:?}\n{err}"
    );
    assert!(err.contains("lost the server"), "client stderr: {err}");
    assert!(
        took >= Duration::from_secs(1),
        "gave up {took:?} after the cut: sooner than any probe could tell"
    );
    assert!(
        tenant_ended(&server, tenant, GIVE_UP_WITHIN),
        "tenant {tenant} still runs {GIVE_UP_WITHIN:?} after the client was cut off\n{}",
        server.log_text()
    );
    server.assert_logged("client lost");
    eprintln!("{mode}: the client gave up {took:?} after the cut; {returned}");
}

#[test]
fn a_server_cut_off_mid_wait_is_an_error_and_its_tenant_ends() {
    if !root() {
        return;
    }
    // A wait on a user event polls the server (its last poll is left
    // unacknowledged: the retransmission limit); a clFinish behind a long
    // kernel sends nothing (keepalive probes).
    for mode in ["event", "kernel"] {
        cut_while_waiting(mode);
    }
}
