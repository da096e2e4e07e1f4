//! Integration tests: real network namespaces, veth underlays, real vnetd processes and TAP
//! devices, a real kernel VXLAN peer. They need root (CAP_NET_ADMIN); without it each test
//! prints why it is skipped and passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vnet_api::{call, InterfaceDef, LinkDef, Op, Request, Response, RouteDef, State};

static SEQ: AtomicU32 = AtomicU32::new(0);

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let ok = unsafe { libc::geteuid() } == 0 && Path::new("/dev/net/tun").exists();
    if !ok {
        eprintln!(
            "SKIPPED: vnetd integration tests need root and /dev/net/tun (run as root, as CI does)"
        );
    }
    ok
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("spawn");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn unique(tag: &str) -> String {
    format!(
        "vt{}{}{}",
        std::process::id(),
        tag,
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// A network namespace deleted on drop.
struct Ns(String);

impl Ns {
    fn new(tag: &str) -> Ns {
        let n = unique(tag);
        sh(&["ip", "netns", "add", &n]);
        let ns = Ns(n);
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    fn ip(&self, args: &[&str]) {
        let mut v = vec!["ip", "-n", &self.0];
        v.extend_from_slice(args);
        sh(&v);
    }

    fn exec(&self, args: &[&str]) -> std::process::Output {
        Command::new("ip")
            .args(["netns", "exec", &self.0])
            .args(args)
            .output()
            .expect("spawn")
    }

    fn ping(&self, addr: &str) -> bool {
        self.exec(&["ping", "-c", "2", "-i", "0.2", "-W", "1", addr])
            .status
            .success()
    }

    /// Runs `f` on a thread that has joined this namespace.
    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let path = format!("/var/run/netns/{}", self.0);
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).expect("open netns");
            // SAFETY: setns on a valid namespace fd only changes this thread's namespace.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Joins namespaces with a veth pair carrying `a_ip`/`b_ip` (/24).
fn veth(a: &Ns, a_if: &str, a_ip: &str, b: &Ns, b_if: &str, b_ip: &str) {
    sh(&[
        "ip", "link", "add", "vtmp", "netns", &a.0, "type", "veth", "peer", "name", "vtmp2",
        "netns", &b.0,
    ]);
    a.ip(&["link", "set", "vtmp", "name", a_if]);
    b.ip(&["link", "set", "vtmp2", "name", b_if]);
    for (ns, ifn, ip) in [(a, a_if, a_ip), (b, b_if, b_ip)] {
        if !ip.is_empty() {
            ns.ip(&["addr", "add", &format!("{ip}/24"), "dev", ifn]);
        }
        ns.ip(&["link", "set", ifn, "up"]);
    }
}

/// Two namespaces joined by an underlay veth `u0`, 10.200.0.1 and 10.200.0.2.
fn two_hosts() -> (Ns, Ns) {
    let h1 = Ns::new("a");
    let h2 = Ns::new("b");
    veth(&h1, "u0", "10.200.0.1", &h2, "u0", "10.200.0.2");
    (h1, h2)
}

/// A vnetd process in a namespace, killed on drop.
struct Daemon {
    child: Child,
    sock: PathBuf,
}

impl Daemon {
    fn start(ns: &Ns, listen: &str, config_body: &str) -> Daemon {
        let base = std::env::temp_dir().join(unique("d"));
        let sock = base.with_extension("sock");
        let cfg = base.with_extension("toml");
        let text = format!(
            "listen = \"{listen}\"\nsocket = \"{}\"\n{config_body}",
            sock.display()
        );
        std::fs::write(&cfg, text).expect("write config");
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.0, env!("CARGO_BIN_EXE_vnetd"), "-c"])
            .arg(&cfg)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn vnetd");
        let d = Daemon { child, sock };
        let t0 = Instant::now();
        while call(&d.sock, &Request::Show).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "vnetd did not come up"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    fn apply(&self, ops: Vec<Op>) -> Response {
        call(&self.sock, &Request::Apply { ops }).expect("control call")
    }

    fn state(&self) -> State {
        call(&self.sock, &Request::Show)
            .expect("show")
            .state
            .expect("state")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.sock);
    }
}

fn mac(i: usize) -> String {
    format!("02:00:00:00:00:{i:02x}")
}

/// Config for host `i` of `n`: one interface `vif` with MAC mac(i), a link to every other
/// host, unicast routes per MAC and broadcast routes to all.
fn mesh_config(i: usize, n: usize, vni: u32) -> String {
    let mut c = format!("[[interface]]\nname = \"vif\"\nmac = \"{}\"\n", mac(i));
    c += &format!(
        "[[route]]\nname = \"local\"\nsrc = \"any\"\ndst = \"{}\"\nto = \"vif\"\n",
        mac(i)
    );
    c += "[[route]]\nname = \"bcast-local\"\nsrc = \"any\"\ndst = \"ff:ff:ff:ff:ff:ff\"\nto = \"vif\"\n";
    for j in (1..=n).filter(|j| *j != i) {
        c += &format!("[[link]]\nname = \"h{j}\"\nremote = \"10.200.0.{j}\"\nvni = {vni}\n");
        c += &format!(
            "[[route]]\nname = \"to-h{j}\"\nsrc = \"any\"\ndst = \"{}\"\nto = \"h{j}\"\n",
            mac(j)
        );
        c += &format!("[[route]]\nname = \"bcast-h{j}\"\nsrc = \"any\"\ndst = \"ff:ff:ff:ff:ff:ff\"\nto = \"h{j}\"\n");
    }
    c
}

/// `n` hosts on one underlay LAN (a Linux bridge in its own namespace), each with a vnetd
/// and overlay address 192.168.77.i on its TAP.
struct Mesh {
    hosts: Vec<Ns>,
    daemons: Vec<Daemon>,
    _lan: Ns,
}

/// vnetd's paths: every frame in user space, or established flows in the kernel.
const MODES: [&str; 2] = ["off", "on"];

/// Runs `check` once in each fast-path mode, as root (skipped otherwise).
fn as_root_in_every_mode(check: fn(&str)) {
    if !root() {
        return;
    }
    for mode in MODES {
        check(mode);
    }
}

impl Mesh {
    /// With vnetd's default path (the kernel fast path where the kernel allows it).
    fn new(n: usize) -> Mesh {
        Mesh::with(n, "auto")
    }

    /// With `offload` set to `mode` (auto, on or off).
    fn with(n: usize, mode: &str) -> Mesh {
        let lan = Ns::new("l");
        lan.ip(&["link", "add", "br0", "type", "bridge"]);
        lan.ip(&["link", "set", "br0", "up"]);
        let mut hosts = Vec::new();
        let mut daemons = Vec::new();
        for i in 1..=n {
            let h = Ns::new("h");
            veth(
                &h,
                "u0",
                &format!("10.200.0.{i}"),
                &lan,
                &format!("p{i}"),
                "",
            );
            lan.ip(&["link", "set", &format!("p{i}"), "master", "br0"]);
            hosts.push(h);
        }
        for (k, h) in hosts.iter().enumerate() {
            let i = k + 1;
            let cfg = format!("offload = \"{mode}\"\n{}", mesh_config(i, n, 42));
            let d = Daemon::start(h, &format!("10.200.0.{i}:4789"), &cfg);
            h.ip(&["addr", "add", &format!("192.168.77.{i}/24"), "dev", "vif"]);
            daemons.push(d);
        }
        Mesh {
            hosts,
            daemons,
            _lan: lan,
        }
    }
}

/// Sends `len` bytes over TCP from `from` to `to_ns` at `addr:port` and checks that every
/// byte arrived intact. `during` runs while the transfer is in flight.
fn tcp_transfer(from: &Ns, to_ns: &Ns, addr: &str, len: usize, during: impl FnOnce()) {
    let target: SocketAddr = format!("{addr}:5201").parse().expect("addr");
    let ready = Arc::new(AtomicBool::new(false));
    let r2 = ready.clone();
    let server = to_ns.run(move || {
        let l = TcpListener::bind(target).expect("bind");
        r2.store(true, Ordering::SeqCst);
        let (mut s, _) = l.accept().expect("accept");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0usize;
        let mut bad = 0usize;
        loop {
            let n = s.read(&mut buf).expect("read (session dropped?)");
            if n == 0 {
                break;
            }
            for (k, b) in buf[..n].iter().enumerate() {
                if *b != ((got + k) % 251) as u8 {
                    bad += 1;
                }
            }
            got += n;
        }
        (got, bad)
    });
    while !ready.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let client = from.run(move || {
        let mut s = TcpStream::connect_timeout(&target, Duration::from_secs(5)).expect("connect");
        s.set_write_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let chunk: Vec<u8> = (0..251 * 261).map(|i| (i % 251) as u8).collect();
        let mut sent = 0;
        while sent < len {
            let n = chunk.len().min(len - sent);
            s.write_all(&chunk[..n]).expect("write (session dropped?)");
            sent += n;
        }
    });
    during();
    client.join().expect("client");
    let (got, bad) = server.join().expect("server");
    assert_eq!((got, bad), (len, 0), "bytes received, corrupted");
}

fn route(name: &str, src: &str, dst: &str, to: &str) -> Op {
    Op::AddRoute(RouteDef {
        name: Some(name.into()),
        src: src.into(),
        dst: dst.into(),
        from: None,
        to: to.into(),
    })
}

/// The user-space path: TSO frames are segmented on the way out and coalesced on the way in.
#[test]
fn two_hosts_unicast_broadcast_and_tcp() {
    if !root() {
        return;
    }
    let m = Mesh::with(2, "off");
    // The first ping needs ARP, i.e. the broadcast routes.
    assert!(m.hosts[0].ping("192.168.77.2"));
    tcp_transfer(&m.hosts[0], &m.hosts[1], "192.168.77.2", 64 << 20, || {});
    let s = m.daemons[0].state();
    let to_h2 = s
        .routes
        .iter()
        .find(|r| r.name.as_deref() == Some("to-h2"))
        .expect("route");
    assert!(to_h2.frames > 1000, "unicast route counted {to_h2:?}");
    assert!(
        s.global.tx_tso_frames > 0,
        "TSO frames crossed user space: {:?}",
        s.global
    );
    let s2 = m.daemons[1].state();
    assert!(
        s2.global.rx_coalesced_frames > 0,
        "receive coalescing: {:?}",
        s2.global
    );
    assert_eq!(s2.global.malformed, 0);
}

/// The kernel fast path: after the first frames of a flow, which user space decides, the
/// tc programs forward the rest (whole TSO frames, both ways) and count them into the same
/// route and endpoint counters.
#[test]
fn the_fast_path_forwards_established_flows_in_the_kernel() {
    if !root() {
        return;
    }
    let m = Mesh::with(2, "on");
    assert!(m.hosts[0].ping("192.168.77.2"));
    tcp_transfer(&m.hosts[0], &m.hosts[1], "192.168.77.2", 64 << 20, || {});
    let (s1, s2) = (m.daemons[0].state(), m.daemons[1].state());
    let route = |s: &State, name: &str| {
        s.routes
            .iter()
            .find(|r| r.name.as_deref() == Some(name))
            .cloned()
            .expect("route")
    };
    for s in [&s1, &s2] {
        assert!(s.global.fast_path, "{:?}", s.global);
        assert!(s.global.offloaded_flows >= 1, "{:?}", s.global);
    }
    // Everything was counted, by segments as in user space...
    let out = route(&s1, "to-h2");
    assert!(out.bytes >= 64 << 20 && out.frames > 1000, "{out:?}");
    let inn = route(&s2, "local");
    assert!(inn.bytes >= 64 << 20 && inn.frames > 1000, "{inn:?}");
    let vif2 = s2.endpoints.iter().find(|e| e.name == "vif").expect("vif");
    assert!(vif2.counters.tx_bytes >= 64 << 20, "{:?}", vif2.counters);
    // ...but hardly any of it crossed user space.
    assert!(s1.global.tx_tso_frames < 10, "{:?}", s1.global);
    assert!(s2.global.rx_datagrams < 100, "{:?}", s2.global);
    assert_eq!(s2.global.malformed, 0);
    // IPv6 inside: the same MAC pair's copies carry it (static neighbours, since the mesh
    // routes only broadcast, not IPv6's multicast neighbour discovery).
    for (i, h) in m.hosts.iter().enumerate() {
        let (me, peer) = (i + 1, 2 - i);
        h.ip(&[
            "addr",
            "add",
            &format!("fd00::{me}/64"),
            "dev",
            "vif",
            "nodad",
        ]);
        h.ip(&[
            "-6",
            "neigh",
            "add",
            &format!("fd00::{peer}"),
            "lladdr",
            &mac(peer),
            "dev",
            "vif",
        ]);
    }
    let before = m.daemons[1].state().global.rx_datagrams;
    let o = m.hosts[0].exec(&["ping", "-6", "-c", "3", "-i", "0.2", "-W", "1", "fd00::2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let after = m.daemons[1].state().global.rx_datagrams;
    assert_eq!(after, before, "IPv6 frames crossed user space");
}

#[test]
fn three_hosts_broadcast_fans_out() {
    if !root() {
        return;
    }
    let m = Mesh::new(3);
    assert!(m.hosts[0].ping("192.168.77.2"));
    assert!(m.hosts[0].ping("192.168.77.3"));
    assert!(m.hosts[1].ping("192.168.77.3"));
    // An ARP request from host 1 matched both tied broadcast routes and went to both links.
    let s = m.daemons[0].state();
    for r in ["bcast-h2", "bcast-h3"] {
        let v = s
            .routes
            .iter()
            .find(|x| x.name.as_deref() == Some(r))
            .expect("route");
        assert!(v.frames >= 1, "{r} did not fan out: {v:?}");
    }
    let l = m.hosts[0].exec(&["ip", "neigh", "show", "dev", "vif"]);
    let neigh = String::from_utf8_lossy(&l.stdout);
    assert!(
        neigh.contains(&mac(2)) && neigh.contains(&mac(3)),
        "{neigh}"
    );
    // No relays between links: each broadcast reaches each host once, rather than going
    // round the mesh for ever (which it did at thousands of frames a second).
    let broadcasts = |d: &Daemon| -> u64 {
        d.state()
            .routes
            .iter()
            .filter(|r| r.name.as_deref().is_some_and(|n| n.starts_with("bcast")))
            .map(|r| r.frames)
            .sum()
    };
    for d in &m.daemons {
        let before = broadcasts(d);
        std::thread::sleep(Duration::from_secs(1));
        let grew = broadcasts(d) - before;
        assert!(
            grew <= 8,
            "{grew} broadcast frames in a quiet second: a loop"
        );
    }
}

#[test]
fn route_changes_apply_under_load_without_dropping_tcp() {
    as_root_in_every_mode(route_changes_under_load);
}

fn route_changes_under_load(mode: &str) {
    let m = Mesh::with(2, mode);
    assert!(m.hosts[0].ping("192.168.77.2"));
    let d = &m.daemons[0];
    tcp_transfer(&m.hosts[0], &m.hosts[1], "192.168.77.2", 256 << 20, || {
        // Replace the unicast route 40 times while data flows: each batch removes the route
        // in use and adds an equivalent one under another name, atomically.
        for k in 0..40 {
            let (old, new) = if k % 2 == 0 {
                ("to-h2", "to-h2-b")
            } else {
                ("to-h2-b", "to-h2")
            };
            let r = d.apply(vec![
                Op::DelRoute { route: old.into() },
                route(new, "any", &mac(2), "h2"),
            ]);
            assert!(r.ok, "{r:?}");
            // An unrelated route change must not disturb the cached flow.
            let extra = d.apply(vec![route("unrelated", "any", "02:00:00:00:00:99", "h2")]);
            assert!(extra.ok);
            assert!(
                d.apply(vec![Op::DelRoute {
                    route: "unrelated".into()
                }])
                .ok
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    // Deleting the route really cuts the path; restoring it heals it.
    let cur = d
        .state()
        .routes
        .iter()
        .find(|r| r.dst == mac(2))
        .and_then(|r| r.name.clone())
        .expect("route");
    assert!(d.apply(vec![Op::DelRoute { route: cur }]).ok);
    m.hosts[0].exec(&["ip", "neigh", "flush", "dev", "vif"]);
    assert!(!m.hosts[0].ping("192.168.77.2"));
    assert!(d.apply(vec![route("again", "any", &mac(2), "h2")]).ok);
    assert!(m.hosts[0].ping("192.168.77.2"));
}

#[test]
fn interoperates_with_kernel_vxlan() {
    as_root_in_every_mode(kernel_vxlan_peer);
}

fn kernel_vxlan_peer(mode: &str) {
    let (h1, h2) = two_hosts();
    // On a real wire every checksum is complete. A veth lets the kernel VXLAN device hand
    // over inner frames whose TCP checksum is still pending (CHECKSUM_PARTIAL); switching off
    // the underlay's tx checksum offload makes the kernel finish them as a NIC would.
    let o = h2.exec(&["ethtool", "-K", "u0", "tx", "off"]);
    assert!(
        o.status.success(),
        "ethtool: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let cfg = format!("offload = \"{mode}\"\n{}", mesh_config(1, 2, 42));
    let d = Daemon::start(&h1, "10.200.0.1:4789", &cfg);
    h1.ip(&["addr", "add", "192.168.77.1/24", "dev", "vif"]);
    h2.ip(&[
        "link",
        "add",
        "vx0",
        "address",
        &mac(2),
        "type",
        "vxlan",
        "id",
        "42",
        "remote",
        "10.200.0.1",
        "local",
        "10.200.0.2",
        "dstport",
        "4789",
        "dev",
        "u0",
    ]);
    h2.ip(&["addr", "add", "192.168.77.2/24", "dev", "vx0"]);
    h2.ip(&["link", "set", "vx0", "up"]);
    assert!(h1.ping("192.168.77.2"));
    assert!(h2.ping("192.168.77.1"));
    // Both directions of bulk TCP: vnet segments for the kernel, and coalesces what it sends.
    tcp_transfer(&h1, &h2, "192.168.77.2", 32 << 20, || {});
    tcp_transfer(&h2, &h1, "192.168.77.1", 32 << 20, || {});
    let s = d.state();
    assert_eq!(s.global.malformed, 0);
    let link = s.endpoints.iter().find(|e| e.name == "h2").expect("h2");
    assert!(
        link.counters.rx_bytes >= 32 << 20 && link.counters.tx_bytes >= 32 << 20,
        "{mode}: {:?}",
        link.counters
    );
    assert_eq!(s.global.offloaded_flows > 0, mode == "on", "{:?}", s.global);
}

#[test]
fn spoofed_source_mac_is_dropped_and_counted() {
    as_root_in_every_mode(spoofed_source_mac);
}

fn spoofed_source_mac(mode: &str) {
    let m = Mesh::with(2, mode);
    assert!(m.hosts[0].ping("192.168.77.2"));
    // The guest changes its MAC: vnetd must drop what it sends.
    m.hosts[0].ip(&["link", "set", "vif", "address", "02:00:00:00:00:66"]);
    assert!(!m.hosts[0].ping("192.168.77.2"));
    let c = m.daemons[0]
        .state()
        .endpoints
        .iter()
        .find(|e| e.name == "vif")
        .expect("vif")
        .counters;
    assert!(c.drop_spoofed >= 2, "{c:?}");
    m.hosts[0].ip(&["link", "set", "vif", "address", &mac(1)]);
    assert!(m.hosts[0].ping("192.168.77.2"));
}

/// A daemon listening on `[::]` (both families) serves IPv4 peers, whose datagrams reach
/// it from IPv4-mapped addresses; one listening on an IPv4 address refuses an IPv6 link,
/// which it could never reach, with a message that says so.
#[test]
fn dual_stack_listening_serves_ipv4_peers() {
    if !root() {
        return;
    }
    let (h1, h2) = two_hosts();
    let config = |i: usize, peer: &str| {
        format!(
            "[[interface]]\nname = \"vif\"\nmac = \"{}\"\n\
             [[link]]\nname = \"peer\"\nremote = \"{peer}\"\nvni = 42\n\
             [[route]]\nsrc = \"any\"\ndst = \"any\"\nfrom = \"vif\"\nto = \"peer\"\n\
             [[route]]\nsrc = \"any\"\ndst = \"any\"\nfrom = \"peer\"\nto = \"vif\"\n",
            mac(i)
        )
    };
    let d1 = Daemon::start(&h1, "[::]:4789", &config(1, "10.200.0.2"));
    let d2 = Daemon::start(&h2, "10.200.0.2:4789", &config(2, "10.200.0.1"));
    h1.ip(&["addr", "add", "192.168.77.1/24", "dev", "vif"]);
    h2.ip(&["addr", "add", "192.168.77.2/24", "dev", "vif"]);
    assert!(h1.ping("192.168.77.2"), "{:?}", d1.state().global);
    assert_eq!(d1.state().global.unknown_peer, 0);
    let r = d2.apply(vec![Op::AddLink(LinkDef {
        name: "v6".into(),
        remote: "[fd00::1]:4789".into(),
        vni: 7,
    })]);
    assert!(!r.ok, "an IPv6 link on an IPv4 socket was accepted");
    let e = r.error.unwrap_or_default();
    assert!(e.contains("is IPv6, but vnetd listens on IPv4"), "{e}");
}

#[test]
fn malformed_datagrams_are_counted_never_fatal() {
    as_root_in_every_mode(malformed_datagrams);
}

fn malformed_datagrams(mode: &str) {
    let m = Mesh::with(2, mode);
    let sent = m.hosts[0]
        .run(|| {
            let s = UdpSocket::bind("10.200.0.1:0").expect("bind");
            let dst = "10.200.0.2:4789";
            let mut vx = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
            let cases: Vec<Vec<u8>> = vec![
                vec![],
                vec![0xff; 3],
                vec![0; 30], // I flag clear
                vx.clone(),  // no inner frame
                {
                    vx.extend_from_slice(&[1; 10]);
                    vx.clone()
                }, // truncated inner frame
                {
                    let mut v = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
                    v.extend_from_slice(&[0xff; 6]);
                    v.extend_from_slice(&[3; 6]);
                    v.extend_from_slice(&[0x08, 0]);
                    v
                }, // multicast source
                {
                    let mut v = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
                    v.extend_from_slice(&mac_bytes(1));
                    v.extend_from_slice(&mac_bytes(2));
                    v.extend_from_slice(&[0x08, 0, 0x45]);
                    v.extend_from_slice(&[0xee; 40]);
                    v
                }, // bad IPv4 inside
                {
                    let mut v = vec![0x08, 0, 0, 0, 0, 0, 7, 0];
                    v.extend_from_slice(&[2; 60]);
                    v
                }, // unknown VNI
            ];
            for _ in 0..50 {
                for c in &cases {
                    let _ = s.send_to(c, dst);
                }
            }
            let mut x: u64 = 0x9e3779b97f4a7c15;
            for _ in 0..2000 {
                let len = (x % 1500) as usize;
                let v: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                let _ = s.send_to(&v, dst);
            }
            true
        })
        .join()
        .expect("sender");
    assert!(sent);
    std::thread::sleep(Duration::from_millis(300));
    let s = m.daemons[1].state();
    assert!(s.global.malformed > 0, "{:?}", s.global);
    assert!(s.global.unknown_peer > 0, "{:?}", s.global);
    // Still forwarding.
    assert!(m.hosts[0].ping("192.168.77.2"));
}

/// CPU time (user + system) of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the parenthesised name; utime and stime are the 14th and 15th.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime")
}

/// A TAP deleted under the daemon (as when a container's namespace goes away with it) is
/// no longer read: the daemon neither spins on the dead descriptor nor floods its log, says
/// so in `show`, keeps forwarding for the others, and takes the endpoint back once deleted
/// and added again.
#[test]
fn a_tap_deleted_under_the_daemon_is_dropped_not_spun_on() {
    if !root() {
        return;
    }
    let m = Mesh::new(2);
    let spare = || {
        Op::AddInterface(InterfaceDef {
            name: "spare".into(),
            mac: Some(mac(9)),
            tap: None,
            mtu: None,
        })
    };
    let r = m.daemons[0].apply(vec![spare()]);
    assert!(r.ok, "{:?}", r.error);
    m.hosts[0].ip(&["link", "del", "spare"]);
    std::thread::sleep(Duration::from_millis(300));
    let pid = m.daemons[0].child.id();
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(pid) - before;
    // 100 ticks a second: a daemon spinning on the dead descriptor uses ~200 here.
    assert!(
        used <= 10,
        "the daemon used {used} ticks in 2 s after its TAP was deleted"
    );
    let shown = m.daemons[0].state();
    let ep = shown
        .endpoints
        .iter()
        .find(|e| e.name == "spare")
        .expect("the endpoint stays until deleted");
    assert!(ep.detail.contains("gone"), "{}", ep.detail);
    assert!(
        m.hosts[0].ping("192.168.77.2"),
        "forwarding for the others stopped"
    );
    let r = m.daemons[0].apply(vec![
        Op::Delete {
            name: "spare".into(),
        },
        spare(),
    ]);
    assert!(r.ok, "{:?}", r.error);
    let shown = m.daemons[0].state();
    let ep = shown
        .endpoints
        .iter()
        .find(|e| e.name == "spare")
        .expect("re-added");
    assert!(!ep.detail.contains("gone"), "{}", ep.detail);
}

fn mac_bytes(i: u8) -> [u8; 6] {
    [2, 0, 0, 0, 0, i]
}

#[test]
fn batches_are_atomic_and_objects_are_named() {
    if !root() {
        return;
    }
    let m = Mesh::new(2);
    let d = &m.daemons[0];
    let before = d.state();
    // A good op followed by a bad one: nothing may change.
    let r = d.apply(vec![
        Op::AddLink(LinkDef {
            name: "extra".into(),
            remote: "10.200.0.9".into(),
            vni: 5,
        }),
        route("r-extra", "any", "any", "extra"),
        route("broken", "any", "not-zz", "extra"),
    ]);
    assert!(
        !r.ok && r.error.as_deref().unwrap_or("").contains("op 2"),
        "{r:?}"
    );
    assert_eq!(d.state().endpoints.len(), before.endpoints.len());
    assert_eq!(d.state().routes.len(), before.routes.len());
    // The same batch without the bad op applies; routes come back with ids.
    let r = d.apply(vec![
        Op::AddLink(LinkDef {
            name: "extra".into(),
            remote: "10.200.0.9".into(),
            vni: 5,
        }),
        route("r-extra", "any", "02:00:00:00:00:42", "extra"),
    ]);
    assert!(r.ok && r.route_ids.len() == 1, "{r:?}");
    // Delete by id, then the endpoint by name (which also removes its routes).
    assert!(
        d.apply(vec![Op::DelRoute {
            route: r.route_ids[0].to_string()
        }])
        .ok
    );
    assert!(
        d.apply(vec![route(
            "r2",
            "not-02:00:00:00:00:01",
            "02:00:00:00:00:43",
            "extra"
        )])
        .ok
    );
    assert!(
        d.apply(vec![Op::Delete {
            name: "extra".into()
        }])
        .ok
    );
    let s = d.state();
    assert!(s.routes.iter().all(|r| r.to != "extra"));
    assert!(!d.apply(vec![Op::DelRoute { route: "r2".into() }]).ok);
    // Duplicate names are refused.
    assert!(!d.apply(vec![route("local", "any", "any", "vif")]).ok);
    assert!(m.hosts[0].ping("192.168.77.2"));
}

#[test]
fn learning_mode_fills_unicast_routes() {
    if !root() {
        return;
    }
    let (h1, h2) = two_hosts();
    let mut ds = Vec::new();
    for (i, h) in [(1, &h1), (2, &h2)] {
        let o = 3 - i;
        // Only flooding routes: unicast paths must be learned from traffic.
        let cfg = format!(
            "learning = true\n[[interface]]\nname = \"vif\"\nmac = \"{}\"\n[[link]]\nname = \"peer\"\nremote = \"10.200.0.{o}\"\nvni = 9\n\
             [[route]]\nname = \"flood-out\"\nsrc = \"any\"\ndst = \"any\"\nfrom = \"vif\"\nto = \"peer\"\n\
             [[route]]\nname = \"flood-in\"\nsrc = \"any\"\ndst = \"any\"\nfrom = \"peer\"\nto = \"vif\"\n",
            mac(i)
        );
        ds.push(Daemon::start(h, &format!("10.200.0.{i}:4789"), &cfg));
        h.ip(&["addr", "add", &format!("192.168.77.{i}/24"), "dev", "vif"]);
    }
    assert!(h1.ping("192.168.77.2"));
    let s = ds[0].state();
    let learned: Vec<_> = s.routes.iter().filter(|r| r.learned).collect();
    assert!(
        learned.iter().any(|r| r.dst == mac(2) && r.to == "peer"),
        "{learned:?}"
    );
    assert!(
        learned.iter().any(|r| r.dst == mac(1) && r.to == "vif"),
        "{learned:?}"
    );
}

#[test]
fn direct_bridge_on_a_host_nic() {
    if !root() {
        return;
    }
    let h1 = Ns::new("a");
    let h2 = Ns::new("b");
    // A second, address-less LAN between the hosts carries raw overlay frames.
    veth(&h1, "lan0", "", &h2, "lan0", "");
    // The TAP and the bridged NIC share a namespace here (in production the overlay
    // addresses belong to guests): keep the host kernel from answering ARP for the TAP's
    // address on the NIC.
    for h in [&h1, &h2] {
        assert!(h
            .exec(&["sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1"])
            .status
            .success());
    }
    let mut ds = Vec::new();
    for (i, h) in [(1, &h1), (2, &h2)] {
        let o = 3 - i;
        let cfg = format!(
            "[[interface]]\nname = \"vif\"\nmac = \"{}\"\n[[bridge]]\nname = \"lan\"\ndevice = \"lan0\"\n\
             [[route]]\nsrc = \"any\"\ndst = \"{}\"\nto = \"vif\"\n[[route]]\nsrc = \"any\"\ndst = \"ff:ff:ff:ff:ff:ff\"\nto = \"vif\"\n\
             [[route]]\nsrc = \"any\"\ndst = \"{}\"\nto = \"lan\"\n[[route]]\nsrc = \"any\"\ndst = \"ff:ff:ff:ff:ff:ff\"\nto = \"lan\"\n",
            mac(i),
            mac(i),
            mac(o)
        );
        ds.push(Daemon::start(h, &format!("127.0.0.1:{}", 4789 + i), &cfg));
        h.ip(&["addr", "add", &format!("192.168.77.{i}/24"), "dev", "vif"]);
    }
    assert!(h1.ping("192.168.77.2"));
    tcp_transfer(&h1, &h2, "192.168.77.2", 16 << 20, || {});
    let s = ds[0].state();
    let lan = s.endpoints.iter().find(|e| e.name == "lan").expect("lan");
    assert!(
        lan.counters.tx_frames > 100 && lan.counters.rx_frames > 10,
        "{:?}",
        lan.counters
    );
}

/// A second daemon given a live daemon's control socket refuses to start, and the first
/// stays controllable.
#[test]
fn a_live_daemons_control_socket_is_not_taken_over() {
    if !root() {
        return;
    }
    let h = Ns::new("s");
    let first = Daemon::start(&h, "127.0.0.1:4789", "");
    let cfg = first.sock.with_extension("second.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:4790\"\nsocket = \"{}\"\n",
            first.sock.display()
        ),
    )
    .expect("config");
    let err_path = cfg.with_extension("err");
    let mut second = Command::new("ip")
        .args(["netns", "exec", &h.0, env!("CARGO_BIN_EXE_vnetd"), "-c"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("second vnetd");
    // Bounded: a daemon that does start would run until killed.
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = second.try_wait().expect("wait") {
            break Some(st);
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = second.kill();
            let _ = second.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_file(&cfg);
    let _ = std::fs::remove_file(&err_path);
    assert!(
        status.is_some_and(|s| !s.success()),
        "a second daemon ran on the same socket ({status:?})"
    );
    assert!(err.contains("another vnetd listens"), "{err}");
    assert!(
        first.state().endpoints.is_empty(),
        "the first daemon still answers"
    );
}

/// Only the daemon's owner may use its control socket, even when it was started with a
/// permissive umask.
#[test]
fn the_control_socket_is_its_owners_alone() {
    if !root() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let h = Ns::new("u");
    // SAFETY: umask has no preconditions; the daemon inherits 000, put back below.
    let old = unsafe { libc::umask(0) };
    let d = Daemon::start(&h, "127.0.0.1:4789", "");
    // SAFETY: umask takes no pointer and cannot fail; this puts back the test's own mask.
    unsafe { libc::umask(old) };
    let mode = std::fs::metadata(&d.sock)
        .expect("socket")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "control socket mode {mode:o}");
}

#[test]
fn vnetctl_drives_the_daemon() {
    if !root() {
        return;
    }
    let exe = std::env::current_exe().expect("exe");
    let Some(ctl) = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("vnetctl"))
        .filter(|p| p.exists())
    else {
        eprintln!("SKIPPED: vnetctl binary not built next to the tests (cargo build -p vnetctl)");
        return;
    };
    let m = Mesh::new(2);
    let run = |args: &[&str]| {
        let o = Command::new(&ctl)
            .arg("-s")
            .arg(&m.daemons[0].sock)
            .args(args)
            .output()
            .expect("vnetctl");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr),
        )
    };
    let (ok, out) = run(&["add-link", "far", "--remote", "10.200.0.7", "--vni", "3"]);
    assert!(ok, "{out}");
    let (ok, out) = run(&[
        "add-route",
        "--dst",
        "not-02:00:00:00:00:01",
        "--to",
        "far",
        "--name",
        "viafar",
    ]);
    assert!(ok && out.contains("route ids"), "{out}");
    let (ok, out) = run(&["show"]);
    assert!(
        ok && out.contains("viafar") && out.contains("not-02:00:00:00:00:01"),
        "{out}"
    );
    let (ok, _) = run(&["del-route", "viafar"]);
    assert!(ok);
    let (ok, out) = run(&["del-route", "viafar"]);
    assert!(!ok && out.contains("no such route"), "{out}");
    let (ok, out) = run(&["delete", "far"]);
    assert!(ok, "{out}");
}

/// A control client the daemon cannot accept for want of a descriptor stays queued; the
/// daemon pauses between tries instead of failing the same accept in a loop, and answers
/// once descriptors are back.
#[test]
fn a_daemon_out_of_descriptors_pauses_its_control_accepts() {
    if !root() {
        return;
    }
    let h = Ns::new("f");
    let d = Daemon::start(&h, "127.0.0.1:4789", "");
    let pid = d.child.id() as i32;
    let open: std::collections::BTreeSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the daemon's descriptors")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let lowest_free = (0..).find(|n| !open.contains(n)).expect("a free number");
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a null new limit only reads the limits into `old`, which lives
    // across the call.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
    assert_eq!(r, 0, "reading the daemon's limit");
    let low = libc::rlimit {
        rlim_cur: lowest_free,
        rlim_max: old.rlim_max,
    };
    // SAFETY: a live rlimit value for the call.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &low, std::ptr::null_mut()) };
    assert_eq!(r, 0, "lowering the daemon's limit");
    // The accept under way already holds a descriptor: the first client gets it.
    let _first = std::os::unix::net::UnixStream::connect(&d.sock).expect("connect");
    std::thread::sleep(Duration::from_millis(100));
    let _queued = std::os::unix::net::UnixStream::connect(&d.sock).expect("queued");
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_ticks(pid as u32);
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(pid as u32) - before;
    // SAFETY: a live rlimit value for the call.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &old, std::ptr::null_mut()) };
    assert_eq!(r, 0, "restoring the daemon's limit");
    // 100 ticks a second: a daemon failing accept in a loop uses ~100 here.
    assert!(used <= 10, "the daemon used {used} ticks in 1 s");
    let t0 = Instant::now();
    while call(&d.sock, &Request::Show).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the daemon did not answer once descriptors were back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An interface the kernel would refuse with a bare errno is refused first, in words, and
/// leaves no device behind.
#[test]
fn a_group_mac_or_an_mtu_out_of_range_is_refused_in_words() {
    if !root() {
        return;
    }
    let h = Ns::new("m");
    let d = Daemon::start(&h, "127.0.0.1:4789", "");
    let iface = |name: &str, mac: Option<&str>, mtu: Option<u32>| {
        Op::AddInterface(InterfaceDef {
            name: name.into(),
            mac: mac.map(str::to_string),
            tap: None,
            mtu,
        })
    };
    for (op, says) in [
        (iface("bc", Some("ff:ff:ff:ff:ff:ff"), None), "group"),
        (iface("mc", Some("01:00:5e:00:00:01"), None), "group"),
        (iface("small", None, Some(10)), "68 to 65535"),
        (iface("big", None, Some(100_000)), "68 to 65535"),
    ] {
        let r = d.apply(vec![op]);
        assert!(!r.ok, "accepted");
        let err = r.error.unwrap_or_default();
        assert!(err.contains(says), "{err}");
    }
    let links = h.exec(&["ip", "-o", "link"]);
    let links = String::from_utf8_lossy(&links.stdout);
    assert_eq!(links.lines().count(), 1, "devices left behind:\n{links}");
    assert!(d.state().endpoints.is_empty());
    let r = d.apply(vec![iface("fine", Some("02:00:00:00:00:07"), Some(68))]);
    assert!(r.ok, "{:?}", r.error);
}

/// A link whose remote can be no peer (port 0, the unspecified address, a group address,
/// or this daemon itself, which would hand every frame back to its sender) is refused.
#[test]
fn a_link_that_can_reach_no_peer_is_refused() {
    if !root() {
        return;
    }
    let h = Ns::new("r");
    let d = Daemon::start(&h, "0.0.0.0:4789", "");
    let link = |remote: &str| {
        Op::AddLink(LinkDef {
            name: "l".into(),
            remote: remote.into(),
            vni: 5,
        })
    };
    for (remote, says) in [
        ("10.0.0.2:0", "port 0"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "group address"),
        ("255.255.255.255", "group address"),
        ("[ff02::1]:4789", "group address"),
        ("127.0.0.1:4789", "this vnetd itself"),
    ] {
        let r = d.apply(vec![link(remote)]);
        assert!(!r.ok, "{remote} accepted");
        let err = r.error.unwrap_or_default();
        assert!(err.contains(says), "{remote}: {err}");
    }
    assert!(d.state().endpoints.is_empty());
    let r = d.apply(vec![link("127.0.0.1:4790")]);
    assert!(r.ok, "{:?}", r.error);
}

/// A packet socket on `dev` (in the calling thread's namespace), bound to all protocols.
fn packet_socket(dev: &str) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: socket() has no memory-safety preconditions; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto as libc::c_int) };
    assert!(
        fd >= 0,
        "packet socket: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: fd is fresh and owned by the returned value only.
    let sock = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let name = std::ffi::CString::new(dev).unwrap();
    // SAFETY: a valid NUL-terminated name.
    let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
    assert!(idx > 0, "{dev}: {}", std::io::Error::last_os_error());
    // SAFETY: sockaddr_ll is plain old data; zero is valid.
    let mut ll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    ll.sll_family = libc::AF_PACKET as u16;
    ll.sll_protocol = proto;
    ll.sll_ifindex = idx as i32;
    // SAFETY: a valid sockaddr_ll and its size.
    let r = unsafe {
        libc::bind(
            fd,
            (&ll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    assert_eq!(r, 0, "bind {dev}: {}", std::io::Error::last_os_error());
    let tv = libc::timeval {
        tv_sec: 0,
        tv_usec: 200_000,
    };
    // SAFETY: a live timeval and its size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as u32,
        )
    };
    sock
}

/// Sends `n` IPv4-typed frames from MAC 1 to MAC 2 out of `from` (in namespace `tx`) and
/// counts those that arrive on `to` (in namespace `rx`), told apart by a marker.
fn frames_across(tx: &Ns, from: &'static str, rx: &Ns, to: &'static str, n: u32) -> u32 {
    let marker: [u8; 8] = *b"vnet-tap";
    let ready = Arc::new(AtomicBool::new(false));
    let r2 = ready.clone();
    let counter = rx.run(move || {
        let s = packet_socket(to);
        r2.store(true, Ordering::SeqCst);
        let mut buf = [0u8; 2048];
        let mut got = 0;
        // Bounded: one quiet 200 ms read timeout, or 10 s, ends it.
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            // SAFETY: `buf` is valid for writes of its length.
            let len = unsafe { libc::recv(s.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if len < 0 {
                break;
            }
            let f = &buf[..len as usize];
            if f.len() >= 22 && f[..6] == mac_bytes(2) && f[14..22] == marker {
                got += 1;
            }
        }
        got
    });
    while !ready.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(10));
    }
    tx.run(move || {
        let s = packet_socket(from);
        let mut f = Vec::new();
        f.extend_from_slice(&mac_bytes(2));
        f.extend_from_slice(&mac_bytes(1));
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&marker);
        f.resize(60, 0);
        for _ in 0..n {
            // SAFETY: `f` is valid for reads of its length.
            let r = unsafe { libc::send(s.as_raw_fd(), f.as_ptr().cast(), f.len(), 0) };
            assert_eq!(
                r,
                f.len() as isize,
                "send: {}",
                std::io::Error::last_os_error()
            );
            std::thread::sleep(Duration::from_micros(200));
        }
    })
    .join()
    .expect("sender");
    counter.join().expect("receiver")
}

/// Between two TAPs of one vnetd the fast path forwards in the kernel, TAP to TAP. When a
/// TAP moves into another namespace (as into a container), its index there is not the one
/// the programs know: its flows go back to user space, and frames still arrive.
#[test]
fn tap_to_tap_in_the_kernel_and_back_to_user_space_when_a_tap_leaves() {
    if !root() {
        return;
    }
    let h = Ns::new("t");
    let g = Ns::new("g");
    let cfg = format!(
        "offload = \"on\"\n\
         [[interface]]\nname = \"t1\"\nmac = \"{}\"\n[[interface]]\nname = \"t2\"\nmac = \"{}\"\n\
         [[route]]\nname = \"to-t1\"\nsrc = \"any\"\ndst = \"{}\"\nto = \"t1\"\n\
         [[route]]\nname = \"to-t2\"\nsrc = \"any\"\ndst = \"{}\"\nto = \"t2\"\n",
        mac(1),
        mac(2),
        mac(1),
        mac(2)
    );
    let d = Daemon::start(&h, "127.0.0.1:4790", &cfg);
    assert_eq!(frames_across(&h, "t1", &h, "t2", 200), 200);
    let s = d.state();
    let to_t2 = s
        .routes
        .iter()
        .find(|r| r.name.as_deref() == Some("to-t2"))
        .expect("route");
    assert_eq!(to_t2.frames, 200, "{to_t2:?}");
    assert_eq!(s.global.offloaded_flows, 1, "{:?}", s.global);
    // User space decided the first frame (and the TAPs' own IPv6 chatter) only: through it,
    // the other 199 would each have been a cache hit.
    assert!(s.global.cache_hits < 20, "{:?}", s.global);

    h.ip(&["link", "set", "t2", "netns", &g.0]);
    g.ip(&["link", "set", "t2", "up"]);
    let t0 = Instant::now();
    while d.state().global.offloaded_flows != 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the flow stayed in the kernel"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(frames_across(&h, "t1", &g, "t2", 200), 200);
    let s = d.state();
    assert_eq!(s.global.offloaded_flows, 0, "{:?}", s.global);
    assert!(s.global.cache_hits >= 199, "{:?}", s.global);
}
