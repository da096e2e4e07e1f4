//! The control plane: applies batches of [`Op`]s atomically, answers `show`, and serves the
//! JSON-lines Unix socket.

use crate::dataplane::{Device, Port, Shared, Tables};
use crate::sys;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use vnet_api::{EndpointView, Global, Op, Request, Response, RouteView, State};
use vnet_core::frame::MacAddr;
use vnet_core::route::{Endpoint, MacMatch, RouteSpec, SourceMatch};
use vnet_core::switch::EndpointKind;
use vnet_core::vxlan::{VNI_MAX, VXLAN_PORT};

/// Why a batch was refused.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// A name, id or address in the batch is wrong.
    #[error(transparent)]
    Core(#[from] vnet_core::CoreError),
    /// Creating a device failed.
    #[error("{what} {name}: {err}")]
    Io {
        /// What was being created.
        what: &'static str,
        /// Its name.
        name: String,
        /// The error.
        err: std::io::Error,
    },
    /// A field has an invalid value.
    #[error("invalid {0}")]
    Invalid(String),
}

/// Default TAP MTU: a 1500-byte underlay minus 50 bytes of IPv4 + UDP + VXLAN + Ethernet.
const DEFAULT_MTU: u32 = 1450;
/// The MTUs Linux lets a TAP have (IPv4's minimum; `ETH_MAX_MTU`).
const MIN_MTU: u32 = 68;
const MAX_MTU: u32 = 65535;

fn parse_mac_match(s: &str) -> Result<MacMatch, ControlError> {
    Ok(match s {
        "any" => MacMatch::Any,
        _ => match s.strip_prefix("not-") {
            Some(m) => MacMatch::Not(m.parse()?),
            None => MacMatch::Exact(s.parse()?),
        },
    })
}

fn show_mac_match(m: &MacMatch) -> String {
    match m {
        MacMatch::Any => "any".into(),
        MacMatch::Not(x) => format!("not-{x}"),
        MacMatch::Exact(x) => x.to_string(),
    }
}

/// Parses `IP` or `IP:PORT` (IPv6 with a port as `[IP]:PORT`).
pub fn parse_remote(s: &str) -> Result<SocketAddr, ControlError> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    s.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, VXLAN_PORT))
        .map_err(|_| ControlError::Invalid(format!("remote address {s:?}")))
}

/// Devices created before a batch takes the lock (their names → handle, MAC).
type Prepared = HashMap<String, (Arc<Device>, Option<MacAddr>)>;

fn prepare(ops: &[Op]) -> Result<Prepared, ControlError> {
    let mut out = Prepared::new();
    for op in ops {
        match op {
            Op::AddInterface(d) => {
                let tap = d.tap.clone().unwrap_or_else(|| d.name.clone());
                let io = |err| ControlError::Io {
                    what: "tap",
                    name: tap.clone(),
                    err,
                };
                let mac = d.mac.as_deref().map(str::parse::<MacAddr>).transpose()?;
                // Said here in words: the kernel only answers EADDRNOTAVAIL
                // and EINVAL.
                if let Some(m) = mac.filter(|m| m.0[0] & 1 != 0) {
                    return Err(ControlError::Invalid(format!(
                        "MAC {m} of {}: a group (multicast or broadcast) address cannot be a NIC's",
                        d.name
                    )));
                }
                let mtu = d.mtu.unwrap_or(DEFAULT_MTU);
                if !(MIN_MTU..=MAX_MTU).contains(&mtu) {
                    return Err(ControlError::Invalid(format!(
                        "MTU {mtu} of {}: a TAP takes {MIN_MTU} to {MAX_MTU}",
                        d.name
                    )));
                }
                let f = sys::open_tap(&tap).map_err(io)?;
                sys::set_mtu(&tap, mtu).map_err(io)?;
                let mac = match mac {
                    Some(m) => {
                        sys::set_mac(&tap, m.0).map_err(io)?;
                        m
                    }
                    None => MacAddr(sys::get_mac(&tap).map_err(io)?),
                };
                sys::set_up(&tap).map_err(io)?;
                out.insert(d.name.clone(), (Arc::new(Device::tap(tap, f)), Some(mac)));
            }
            Op::AddBridge(b) => {
                let io = |err| ControlError::Io {
                    what: "bridge device",
                    name: b.device.clone(),
                    err,
                };
                let fd = sys::open_packet(&b.device).map_err(io)?;
                out.insert(
                    b.name.clone(),
                    (Arc::new(Device::packet(b.device.clone(), fd)), None),
                );
            }
            _ => {}
        }
    }
    Ok(out)
}

fn endpoint(t: &Tables, name: &str) -> Result<Endpoint, ControlError> {
    Ok(t.sw.endpoint_id(name)?)
}

fn apply_op(
    t: &mut Tables,
    listen: SocketAddr,
    op: &Op,
    prepared: &mut Prepared,
    route_ids: &mut Vec<u64>,
) -> Result<(), ControlError> {
    match op {
        Op::AddInterface(d) => {
            let (dev, mac) = prepared.remove(&d.name).ok_or_else(|| {
                ControlError::Invalid(format!("duplicate interface {:?} in batch", d.name))
            })?;
            let mac = mac.ok_or_else(|| ControlError::Invalid("interface without MAC".into()))?;
            let id =
                t.sw.add_endpoint(&d.name, EndpointKind::Interface { mac })?;
            t.ports.insert(id, Port::Device(dev));
        }
        Op::AddBridge(b) => {
            let (dev, _) = prepared.remove(&b.name).ok_or_else(|| {
                ControlError::Invalid(format!("duplicate bridge {:?} in batch", b.name))
            })?;
            let id = t.sw.add_endpoint(&b.name, EndpointKind::Bridge)?;
            t.ports.insert(id, Port::Device(dev));
        }
        Op::AddLink(l) => {
            if l.vni > VNI_MAX {
                return Err(ControlError::Invalid(format!(
                    "vni {} (max {VNI_MAX})",
                    l.vni
                )));
            }
            let mut addr = parse_remote(&l.remote)?;
            addr.set_ip(addr.ip().to_canonical());
            let ip = addr.ip();
            let group = match ip {
                IpAddr::V4(v4) => v4.is_multicast() || v4.is_broadcast(),
                IpAddr::V6(v6) => v6.is_multicast(),
            };
            // Each would take traffic and deliver it nowhere, or back here.
            let wrong = if addr.port() == 0 {
                Some("has port 0".to_string())
            } else if ip.is_unspecified() {
                Some("is the unspecified address, no host's".to_string())
            } else if group {
                Some("is a group address; a link goes to one host".to_string())
            } else if addr.port() == listen.port()
                && (ip == listen.ip() || (listen.ip().is_unspecified() && ip.is_loopback()))
            {
                Some(format!("is this vnetd itself (it listens on {listen})"))
            } else {
                None
            };
            if let Some(why) = wrong {
                return Err(ControlError::Invalid(format!(
                    "link {}: remote {addr} {why}",
                    l.name
                )));
            }
            if addr.is_ipv6() && listen.is_ipv4() {
                return Err(ControlError::Invalid(format!(
                    "link {}: remote {addr} is IPv6, but vnetd listens on IPv4 ({listen}); \
                     listen on [::]:PORT to reach both",
                    l.name
                )));
            }
            if t.peers.contains_key(&(addr.ip(), l.vni)) {
                return Err(ControlError::Invalid(format!(
                    "a link to {} with vni {} exists",
                    addr.ip(),
                    l.vni
                )));
            }
            let id =
                t.sw.add_endpoint(&l.name, EndpointKind::Link { vni: l.vni })?;
            t.ports.insert(id, Port::Link { addr, vni: l.vni });
            t.peers.insert((addr.ip(), l.vni), id);
        }
        Op::Delete { name } => {
            let info = t.sw.remove_endpoint(name)?;
            t.ports.remove(&info.id);
            t.peers.retain(|_, e| *e != info.id);
        }
        Op::AddRoute(r) => {
            let source = match r.from.as_deref() {
                None | Some("any") => SourceMatch::Any,
                Some(n) => SourceMatch::Is(endpoint(t, n)?),
            };
            let spec = RouteSpec {
                name: r.name.clone(),
                src: parse_mac_match(&r.src)?,
                dst: parse_mac_match(&r.dst)?,
                source,
                dest: endpoint(t, &r.to)?,
            };
            route_ids.push(t.sw.add_route(spec)?.0);
        }
        Op::DelRoute { route } => {
            t.sw.remove_route(route)?;
        }
        Op::SetLearning { on } => t.sw.set_learning(*on),
    }
    Ok(())
}

/// Applies a batch: all ops or none. Devices are created first, outside the lock; the
/// tables are changed on a copy that replaces the live ones in one step, so the data path
/// never sees half a batch.
pub fn apply(sh: &Arc<Shared>, ops: &[Op]) -> Response {
    let mut prepared = match prepare(ops) {
        Ok(p) => p,
        Err(e) => return Response::error(e.to_string()),
    };
    let mut route_ids = Vec::new();
    let listen = match sh.udp.local_addr() {
        Ok(a) => a,
        Err(e) => return Response::error(format!("the underlay socket: {e}")),
    };
    {
        let mut live = sh.lock();
        let mut t = live.clone();
        for (i, op) in ops.iter().enumerate() {
            if let Err(e) = apply_op(&mut t, listen, op, &mut prepared, &mut route_ids) {
                return Response::error(format!("op {i}: {e}; nothing applied"));
            }
        }
        *live = t;
        if let Some(fp) = &sh.fast {
            fp.sync(&mut live);
        }
    }
    // The worker picks up added and removed devices; removed ones close when it lets go.
    sh.generation.fetch_add(1, Ordering::Release);
    sys::notify_eventfd(sh.wake.as_raw_fd());
    Response {
        ok: true,
        route_ids,
        ..Response::default()
    }
}

/// Says so in `show` when a device failed for good (see `Device::is_gone`).
fn gone_note(d: &Device) -> &'static str {
    if d.is_gone() {
        " (gone: not read; delete it, then add it again)"
    } else {
        ""
    }
}

/// The state and counters.
pub fn show(sh: &Shared) -> State {
    let mut t = sh.lock();
    let offloaded_flows = sh.fast.as_ref().map_or(0, |f| f.fold(&mut t));
    let name = |e: Endpoint| {
        t.sw.endpoint(e)
            .map_or_else(|| format!("#{}", e.0), |i| i.name.clone())
    };
    let endpoints =
        t.sw.endpoints()
            .map(|i| {
                let (kind, detail) = match (&i.kind, t.ports.get(&i.id)) {
                    (EndpointKind::Interface { mac }, Some(Port::Device(d))) => (
                        "interface",
                        format!("mac {mac} tap {}{}", d.name, gone_note(d)),
                    ),
                    (EndpointKind::Link { vni }, Some(Port::Link { addr, .. })) => {
                        ("link", format!("remote {addr} vni {vni}"))
                    }
                    (EndpointKind::Bridge, Some(Port::Device(d))) => {
                        ("bridge", format!("device {}{}", d.name, gone_note(d)))
                    }
                    _ => ("unknown", String::new()),
                };
                EndpointView {
                    id: i.id.0,
                    name: i.name.clone(),
                    kind: kind.into(),
                    detail,
                    counters: i.counters,
                }
            })
            .collect();
    let routes =
        t.sw.table()
            .routes()
            .iter()
            .map(|r| RouteView {
                id: r.id.0,
                name: r.spec.name.clone(),
                src: show_mac_match(&r.spec.src),
                dst: show_mac_match(&r.spec.dst),
                from: match r.spec.source {
                    SourceMatch::Any => "any".into(),
                    SourceMatch::Is(e) => name(e),
                },
                to: name(r.spec.dest),
                learned: r.learned,
                frames: r.counters.frames,
                bytes: r.counters.bytes,
            })
            .collect();
    let c = t.sw.table().cache_stats();
    State {
        learning: t.sw.learning(),
        endpoints,
        routes,
        global: Global {
            malformed: sh.malformed.load(Ordering::Relaxed),
            unknown_peer: sh.unknown_peer.load(Ordering::Relaxed),
            cache_hits: c.hits,
            cache_misses: c.misses,
            cache_invalidated: c.invalidated,
            cache_entries: c.entries,
            rx_datagrams: sh.stats.rx_datagrams.load(Ordering::Relaxed),
            rx_packets: sh.stats.rx_packets.load(Ordering::Relaxed),
            rx_coalesced_frames: sh.stats.rx_coalesced.load(Ordering::Relaxed),
            tx_tso_frames: sh.stats.tx_tso.load(Ordering::Relaxed),
            tx_messages: sh.stats.tx_messages.load(Ordering::Relaxed),
            fast_path: sh.fast.is_some(),
            offloaded_flows,
        },
    }
}

/// Longest request line accepted.
const MAX_LINE: u64 = 1 << 20;

fn serve_conn(sh: &Arc<Shared>, s: UnixStream) -> std::io::Result<()> {
    let mut w = s.try_clone()?;
    let mut r = BufReader::new(s.take(MAX_LINE * 64));
    loop {
        let mut line = String::new();
        if (&mut r).take(MAX_LINE).read_line(&mut line)? == 0 {
            return Ok(());
        }
        let resp = match serde_json::from_str::<Request>(&line) {
            Ok(Request::Apply { ops }) => apply(sh, &ops),
            Ok(Request::Show) => Response {
                ok: true,
                state: Some(show(sh)),
                ..Response::default()
            },
            Err(e) => Response::error(format!("bad request: {e}")),
        };
        let mut out = serde_json::to_vec(&resp).map_err(std::io::Error::other)?;
        out.push(b'\n');
        w.write_all(&out)?;
    }
}

/// Serves the control socket forever (one thread per client).
pub fn serve(sh: Arc<Shared>, listener: UnixListener) {
    for conn in listener.incoming() {
        match conn {
            Ok(s) => {
                let sh = sh.clone();
                let r = std::thread::Builder::new()
                    .name("ctl".into())
                    .spawn(move || {
                        if let Err(e) = serve_conn(&sh, s) {
                            log::debug!("control client: {e}");
                        }
                    });
                if let Err(e) = r {
                    log::error!("cannot start control thread: {e}");
                }
            }
            // A client that could not be accepted for want of a
            // descriptor or of memory stays queued, and accepting again at
            // once fails again: pause, or the loop spins on a CPU. Control
            // is not latency-critical, so a fixed pause does.
            Err(e) => {
                log::warn!("control accept: {e}; trying again in 100 ms");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}
