//! The kernel fast path (`--offload`): copies of the switch's decisions that two tc eBPF
//! programs (`bpf/fastpath.bpf.c`) apply to a flow's later frames, so that they cross
//! neither user space nor a second copy. The user-space path stays the reference: it
//! takes every frame the programs do not know, decides it as without the fast path, and
//! offers the decision here. Only decisions with one destination, between TAPs and IPv4
//! links, for IP frames, are copied; broadcasts, bridges, ARP and IPv6 underlays stay in
//! user space.
//!
//! Consistency: every copy is checked again, by [`Switch::decision`], whenever the table
//! changed (a control batch, a learned route), and removed unless the table still decides
//! its key the same way, so a rule change takes effect for offloaded flows as for the
//! others. Counters: the programs count per flow; [`FastPath::fold`] adds what they
//! counted to the route and endpoint counters.
//!
//! Locking: [`FastPath`]'s own lock is only taken with the tables' lock held, so a copy is
//! always made from, and checked against, the tables in force.
//!
//! [`Switch::decision`]: vnet_core::switch::Switch::decision

use crate::dataplane::{Port, Tables};
use crate::sys;
use aya::maps::{HashMap as BpfMap, MapData};
use aya::programs::tc::{self, SchedClassifierLinkId};
use aya::programs::{SchedClassifier, TcAttachType};
use aya::util::KernelVersion;
use aya::Ebpf;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};
use vnet_core::frame::EthHeader;
use vnet_core::route::{Endpoint, RouteId};
use vnet_core::switch::Decision;

#[cfg(not(vnet_no_fastpath))]
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/fastpath.bpf.o"));
#[cfg(vnet_no_fastpath)]
static OBJECT: &[u8] = &[];

/// Why the fast path could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum FastPathError {
    /// The build had no clang for the BPF target.
    #[error("vnetd was built without its kernel fast path (clang and libbpf-dev were missing)")]
    NotBuilt,
    /// The kernel refused the object or a map.
    #[error("loading the eBPF object: {0}")]
    Load(#[from] aya::EbpfError),
    /// The kernel refused a program (verifier, missing helper) or its attachment.
    #[error("eBPF program: {0}")]
    Program(#[from] aya::programs::ProgramError),
    /// A map could not be opened.
    #[error("eBPF map: {0}")]
    Map(#[from] aya::maps::MapError),
    /// The object lacks a program or map this code expects.
    #[error("the eBPF object has no {0}")]
    Missing(&'static str),
    /// No netlink socket to follow TAPs that leave the namespace.
    #[error("netlink link events: {0}")]
    LinkEvents(std::io::Error),
}

/// Most decisions copied at once (the `flows` map's size).
const MAX_FLOWS: usize = 16_384;

const TO_TAP: u32 = 1;
const TO_LINK: u32 = 2;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;

/// `struct flow_key` of the programs.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FlowKey {
    ep: u32,
    src: [u8; 6],
    dst: [u8; 6],
}

/// `struct flow_value` of the programs (addresses and port in network order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct FlowValue {
    kind: u32,
    ifindex: u32,
    local_ip: u32,
    remote_ip: u32,
    vni: u32,
    port: u16,
    pad: u16,
    frames: u64,
    bytes: u64,
}

/// `struct endpoint` of the programs.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct EpValue {
    ep: u32,
}

/// `struct link_key` of the programs.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct LinkKey {
    remote_ip: u32,
    vni: u32,
}

// SAFETY: #[repr(C)] u32 and two [u8; 6]: 16 bytes with no padding, so every bit pattern
// is a valid value and the kernel's copies match `struct flow_key` byte for byte.
unsafe impl aya::Pod for FlowKey {}
// SAFETY: #[repr(C)] 5 × u32, 2 × u16, 2 × u64 in that order: 40 bytes, each field at its
// natural alignment, no padding; integers only, so any bits the kernel writes are valid.
unsafe impl aya::Pod for FlowValue {}
// SAFETY: #[repr(C)] one u32: 4 bytes, no padding, any bit pattern valid.
unsafe impl aya::Pod for EpValue {}
// SAFETY: #[repr(C)] two u32: 8 bytes, no padding, any bit pattern valid.
unsafe impl aya::Pod for LinkKey {}

/// An IPv4 address as the programs compare it (network byte order in memory).
fn be_ip(ip: Ipv4Addr) -> u32 {
    u32::from_ne_bytes(ip.octets())
}

/// What the programs know of an endpoint.
enum Reg {
    /// A TAP in vnetd's namespace whose egress runs `vnet_tx`.
    Tap {
        name: String,
        ifindex: u32,
        tx: SchedClassifierLinkId,
    },
    /// An IPv4 link, reached through an underlay device whose ingress runs `vnet_rx`.
    Link { key: LinkKey, to: FlowValue },
    /// Stays on the user-space path (a bridge, an IPv6 or loopback link, or a failure).
    None,
}

/// A decision copied into `flows`, and what the programs had counted at the last fold.
struct Installed {
    source: Endpoint,
    dest: Endpoint,
    routes: Arc<[RouteId]>,
    frames: u64,
    bytes: u64,
}

struct State {
    bpf: Ebpf,
    flows: BpfMap<MapData, FlowKey, FlowValue>,
    taps: BpfMap<MapData, u32, EpValue>,
    links: BpfMap<MapData, LinkKey, EpValue>,
    locals: BpfMap<MapData, u32, u16>,
    listen: SocketAddr,
    regs: HashMap<Endpoint, Reg>,
    /// Underlay devices running `vnet_rx`, by name.
    rx_devices: HashMap<String, SchedClassifierLinkId>,
    installed: HashMap<FlowKey, Installed>,
    /// The table's version the copies were last checked against.
    version: u64,
}

/// The loaded programs and the copies of decisions (see the module's doc).
pub struct FastPath {
    st: Mutex<State>,
    /// Readable when a device of this namespace changed (see [`FastPath::recheck`]).
    events: OwnedFd,
}

impl FastPath {
    /// Loads and verifies the programs (attached later, per endpoint). `listen` is the
    /// underlay address: datagrams to its port, at its address (or, when unspecified, at
    /// the address each link is reached from) are taken by `vnet_rx`.
    pub fn new(listen: SocketAddr) -> Result<FastPath, FastPathError> {
        if OBJECT.is_empty() {
            return Err(FastPathError::NotBuilt);
        }
        let mut bpf = Ebpf::load(OBJECT)?;
        for name in ["vnet_tx", "vnet_rx"] {
            let p: &mut SchedClassifier = bpf
                .program_mut(name)
                .ok_or(FastPathError::Missing(name))?
                .try_into()?;
            p.load()?;
        }
        let mut map = |name: &'static str| bpf.take_map(name).ok_or(FastPathError::Missing(name));
        let flows = BpfMap::try_from(map("flows")?)?;
        let taps = BpfMap::try_from(map("taps")?)?;
        let links = BpfMap::try_from(map("links")?)?;
        let mut locals: BpfMap<MapData, u32, u16> = BpfMap::try_from(map("locals")?)?;
        if let IpAddr::V4(ip) = listen.ip().to_canonical() {
            if !ip.is_unspecified() {
                locals.insert(be_ip(ip), listen.port().to_be(), 0)?;
            }
        }
        let events = sys::link_events().map_err(FastPathError::LinkEvents)?;
        Ok(FastPath {
            events,
            st: Mutex::new(State {
                bpf,
                flows,
                taps,
                links,
                locals,
                listen,
                regs: HashMap::new(),
                rx_devices: HashMap::new(),
                installed: HashMap::new(),
                version: 0,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update below leaves the state consistent between statements that can
        // fail, so a panic elsewhere does not make it unusable.
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// After a control batch: drops copies the new tables decide otherwise, then attaches
    /// the programs to new endpoints and detaches them from removed ones.
    pub fn sync(&self, t: &mut Tables) {
        let mut st = self.lock();
        st.reconcile(t);
        let gone: Vec<Endpoint> = st
            .regs
            .keys()
            .filter(|e| !t.ports.contains_key(e))
            .copied()
            .collect();
        for e in gone {
            st.unregister(e);
        }
        for (e, port) in &t.ports {
            if !st.regs.contains_key(e) {
                let reg = st.register(*e, port);
                st.regs.insert(*e, reg);
            }
        }
    }

    /// After the user-space path decided a frame from `source` (under the same lock):
    /// re-checks the copies if the table changed meanwhile (learning), and copies this
    /// decision when the programs can apply it.
    pub fn offer(&self, t: &mut Tables, source: Endpoint, eth: &EthHeader, dests: &[Endpoint]) {
        let mut st = self.lock();
        if st.version != t.sw.version() {
            st.reconcile(t);
        }
        let [dest] = dests else { return };
        if eth.ethertype != ETH_P_IP && eth.ethertype != ETH_P_IPV6 {
            return;
        }
        let key = FlowKey {
            ep: source.0,
            src: eth.src.0,
            dst: eth.dst.0,
        };
        if st.installed.contains_key(&key) || st.installed.len() >= MAX_FLOWS {
            return;
        }
        let from_tap = match st.regs.get(&source) {
            Some(Reg::Tap { .. }) => true,
            Some(Reg::Link { .. }) => false,
            _ => return,
        };
        let value = match st.regs.get(dest) {
            Some(Reg::Tap { ifindex, .. }) => FlowValue {
                kind: TO_TAP,
                ifindex: *ifindex,
                ..FlowValue::default()
            },
            // The receive program only delivers to TAPs: a frame from a link to a link is
            // relayed by the user-space path.
            Some(Reg::Link { to, .. }) if from_tap => *to,
            _ => return,
        };
        let Some(Decision { routes, .. }) = t.sw.decision(source, eth.src, eth.dst) else {
            return;
        };
        if let Err(e) = st.flows.insert(key, value, 0) {
            log::debug!("fast path: copying a decision: {e}");
            return;
        }
        st.installed.insert(
            key,
            Installed {
                source,
                dest: *dest,
                routes,
                frames: 0,
                bytes: 0,
            },
        );
    }

    /// The socket the worker watches for device changes.
    pub fn events_fd(&self) -> RawFd {
        self.events.as_raw_fd()
    }

    /// After a device change in this namespace: a TAP that left it (moved into a
    /// container's namespace, renamed or deleted) goes back to the user-space path. The
    /// programs address TAPs and the underlay by index in vnetd's namespace, where such a
    /// TAP's index is no longer its own.
    pub fn recheck(&self, t: &mut Tables) {
        sys::drain(self.events.as_raw_fd());
        let mut st = self.lock();
        let left: Vec<Endpoint> = st
            .regs
            .iter()
            .filter_map(|(e, r)| match r {
                Reg::Tap { name, ifindex, .. } if sys::if_index(name).ok() != Some(*ifindex) => {
                    log::info!("fast path: tap {name} left this namespace; user space serves it");
                    Some(*e)
                }
                _ => None,
            })
            .collect();
        for e in left {
            st.drop_flows(t, |_, _, i| i.source == e || i.dest == e);
            st.unregister(e);
            st.regs.insert(e, Reg::None);
        }
    }

    /// Adds what the programs forwarded since the last fold to the tables' counters, and
    /// says how many decisions are copied now.
    pub fn fold(&self, t: &mut Tables) -> u64 {
        let mut st = self.lock();
        let State {
            flows, installed, ..
        } = &mut *st;
        for (k, i) in installed.iter_mut() {
            if let Ok(v) = flows.get(k, 0) {
                i.count(t, &v);
            }
        }
        st.installed.len() as u64
    }
}

impl Installed {
    fn count(&mut self, t: &mut Tables, v: &FlowValue) {
        let frames = v.frames.saturating_sub(self.frames);
        let bytes = v.bytes.saturating_sub(self.bytes);
        if frames > 0 {
            t.sw.count_offloaded(self.source, &self.routes, self.dest, frames, bytes);
        }
        self.frames = v.frames;
        self.bytes = v.bytes;
    }
}

impl State {
    /// Removes every copy that the tables no longer decide the same way (counting its
    /// traffic first).
    fn reconcile(&mut self, t: &mut Tables) {
        self.drop_flows(t, |t, k, i| {
            let now = t.sw.decision(
                Endpoint(k.ep),
                vnet_core::frame::MacAddr(k.src),
                vnet_core::frame::MacAddr(k.dst),
            );
            !matches!(now, Some(d) if d.routes == i.routes && *d.dests == [i.dest])
        });
        self.version = t.sw.version();
    }

    /// Removes every copy for which `stale` holds (judged against the tables as they are
    /// before any removal), counting its traffic first.
    fn drop_flows(
        &mut self,
        t: &mut Tables,
        stale: impl Fn(&Tables, &FlowKey, &Installed) -> bool,
    ) {
        let doomed: Vec<FlowKey> = self
            .installed
            .iter()
            .filter(|(k, i)| stale(t, k, i))
            .map(|(k, _)| *k)
            .collect();
        for k in doomed {
            self.drop_flow(t, &k);
        }
    }

    fn drop_flow(&mut self, t: &mut Tables, k: &FlowKey) {
        let last = self.flows.get(k, 0).ok();
        if let Err(e) = self.flows.remove(k) {
            log::warn!("fast path: removing a stale decision: {e}");
        }
        if let Some(mut i) = self.installed.remove(k) {
            if let Some(v) = last {
                i.count(t, &v);
            }
        }
    }

    fn register(&mut self, e: Endpoint, port: &Port) -> Reg {
        let r = match port {
            Port::Device(d) if d.is_tap() => self.register_tap(e, &d.name),
            Port::Link { addr, vni } => match addr.ip().to_canonical() {
                IpAddr::V4(ip) => self.register_link(e, ip, addr.port(), *vni),
                IpAddr::V6(_) => Ok(Reg::None),
            },
            Port::Device(_) => Ok(Reg::None),
        };
        r.unwrap_or_else(|err| {
            log::warn!("fast path: endpoint {} stays in user space: {err}", e.0);
            Reg::None
        })
    }

    fn register_tap(&mut self, e: Endpoint, name: &str) -> Result<Reg, String> {
        let ifindex = sys::if_index(name).map_err(|err| format!("{name}: {err}"))?;
        let tx = attach(&mut self.bpf, "vnet_tx", name, TcAttachType::Egress)?;
        if let Err(err) = self.taps.insert(ifindex, EpValue { ep: e.0 }, 0) {
            detach(&mut self.bpf, "vnet_tx", tx);
            return Err(err.to_string());
        }
        log::info!("fast path: tap {name} (endpoint {})", e.0);
        Ok(Reg::Tap {
            name: name.to_string(),
            ifindex,
            tx,
        })
    }

    fn register_link(
        &mut self,
        e: Endpoint,
        remote: Ipv4Addr,
        port: u16,
        vni: u32,
    ) -> Result<Reg, String> {
        let (local, device) = underlay(remote, port, self.listen)?;
        let Some(device) = device else {
            return Ok(Reg::None);
        };
        let ifindex = sys::if_index(&device).map_err(|err| format!("{device}: {err}"))?;
        if !self.rx_devices.contains_key(&device) {
            let rx = attach(&mut self.bpf, "vnet_rx", &device, TcAttachType::Ingress)?;
            self.rx_devices.insert(device.clone(), rx);
        }
        self.locals
            .insert(be_ip(local), self.listen.port().to_be(), 0)
            .map_err(|err| err.to_string())?;
        let key = LinkKey {
            remote_ip: be_ip(remote),
            vni,
        };
        self.links
            .insert(key, EpValue { ep: e.0 }, 0)
            .map_err(|err| err.to_string())?;
        log::info!(
            "fast path: link to {remote} vni {vni} via {device} from {local} (endpoint {})",
            e.0
        );
        Ok(Reg::Link {
            key,
            to: FlowValue {
                kind: TO_LINK,
                ifindex,
                local_ip: be_ip(local),
                remote_ip: be_ip(remote),
                vni,
                port: port.to_be(),
                ..FlowValue::default()
            },
        })
    }

    fn unregister(&mut self, e: Endpoint) {
        match self.regs.remove(&e) {
            Some(Reg::Tap { ifindex, tx, .. }) => {
                let _ = self.taps.remove(&ifindex);
                detach(&mut self.bpf, "vnet_tx", tx);
            }
            Some(Reg::Link { key, .. }) => {
                // The underlay device keeps vnet_rx (other links may use it) and the local
                // address stays ours: both only let datagrams of known links through.
                let _ = self.links.remove(&key);
            }
            Some(Reg::None) | None => {}
        }
    }
}

/// Where datagrams to a link leave from: the local address the kernel's routes pick, and
/// the device that holds it (`None` for a loopback device, which the programs do not
/// serve).
fn underlay(
    remote: Ipv4Addr,
    port: u16,
    listen: SocketAddr,
) -> Result<(Ipv4Addr, Option<String>), String> {
    let local = match listen.ip().to_canonical() {
        IpAddr::V4(ip) if !ip.is_unspecified() => ip,
        _ => {
            // Connecting a UDP socket sends nothing; it only asks the routing table.
            let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| e.to_string())?;
            s.connect((remote, port))
                .map_err(|e| format!("no route to {remote}: {e}"))?;
            match s.local_addr().map_err(|e| e.to_string())?.ip() {
                IpAddr::V4(ip) => ip,
                IpAddr::V6(_) => return Err("an IPv6 source for an IPv4 link".into()),
            }
        }
    };
    match sys::device_with_addr(local).map_err(|e| e.to_string())? {
        Some((_, true)) => Ok((local, None)),
        Some((name, false)) => Ok((local, Some(name))),
        None => Err(format!("no device holds {local}")),
    }
}

fn program<'a>(bpf: &'a mut Ebpf, name: &str) -> Result<&'a mut SchedClassifier, String> {
    bpf.program_mut(name)
        .ok_or_else(|| format!("no program {name}"))?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| e.to_string())
}

fn attach(
    bpf: &mut Ebpf,
    name: &str,
    device: &str,
    at: TcAttachType,
) -> Result<SchedClassifierLinkId, String> {
    // Kernels before 6.6 attach through the clsact qdisc (an existing one is fine); later
    // ones through tcx links, which go away with vnetd even if it is killed.
    if KernelVersion::current().map_or(true, |v| v < KernelVersion::new(6, 6, 0)) {
        let _ = tc::qdisc_add_clsact(device);
    }
    program(bpf, name)?
        .attach(device, at)
        .map_err(|e| format!("attaching {name} to {device}: {e}"))
}

fn detach(bpf: &mut Ebpf, name: &str, link: SchedClassifierLinkId) {
    if let Err(e) = program(bpf, name).and_then(|p| p.detach(link).map_err(|e| e.to_string())) {
        log::warn!("fast path: detaching {name}: {e}");
    }
}

/// The programs run by the kernel itself (`BPF_PROG_TEST_RUN`) on random frames and on
/// random corruptions of what they encapsulate, against a model of what they must accept:
/// vnet_tx must produce exactly RFC 7348 VXLAN around the frame, vnet_rx must give the frame
/// back, and a corrupted packet must be either passed on untouched or, when the model says
/// it is still acceptable, decapsulated exactly. Root only (loading BPF); as root, as CI
/// runs, a build without the programs fails. `VNET_BPF_FUZZ_SECS=N` runs for N seconds
/// instead of a fixed number of cases.
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    const TC_ACT_REDIRECT: u32 = 7;
    const PASS: u32 = u32::MAX; // TC_ACT_UNSPEC (-1)
    const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 9, 9, 1);
    const REMOTE: Ipv4Addr = Ipv4Addr::new(10, 9, 9, 2);
    const VNI: u32 = 42;
    const PORT: u16 = 4789;
    const TAP_EP: u32 = 1;
    const LINK_EP: u32 = 2;
    /// The loopback device: the test runner's default device, standing in for the TAP.
    const LO: u32 = 1;
    const ME: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const PEER: [u8; 6] = [2, 0, 0, 0, 0, 2];

    /// Runs a program once on `data` with `skb->ifindex = ifindex`; (return value, output).
    fn test_run(p: &SchedClassifier, ifindex: u32, data: &[u8]) -> (u32, Vec<u8>) {
        let fd = p.fd().expect("loaded").as_fd().as_raw_fd();
        let mut out = vec![0u8; data.len() + 256];
        // struct __sk_buff: every field zero but ifindex (offset 40), which the runner
        // accepts from user space.
        let mut ctx = [0u8; 192];
        ctx[40..44].copy_from_slice(&ifindex.to_ne_bytes());
        // The `test` member of union bpf_attr.
        #[repr(C)]
        #[derive(Default)]
        struct TestAttr {
            prog_fd: u32,
            retval: u32,
            data_size_in: u32,
            data_size_out: u32,
            data_in: u64,
            data_out: u64,
            repeat: u32,
            duration: u32,
            ctx_size_in: u32,
            ctx_size_out: u32,
            ctx_in: u64,
            ctx_out: u64,
            flags: u32,
            cpu: u32,
            batch_size: u32,
            pad: u32,
        }
        let mut a = TestAttr {
            prog_fd: fd as u32,
            data_size_in: data.len() as u32,
            data_size_out: out.len() as u32,
            data_in: data.as_ptr() as u64,
            data_out: out.as_mut_ptr() as u64,
            repeat: 1,
            ctx_size_in: ctx.len() as u32,
            ctx_in: ctx.as_mut_ptr() as u64,
            ..TestAttr::default()
        };
        // SAFETY: `a` is a valid BPF_PROG_TEST_RUN attribute whose pointers refer to
        // `data`, `out` and `ctx`, all alive and of the sizes given, for the whole call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                10, // BPF_PROG_TEST_RUN
                &mut a as *mut TestAttr,
                std::mem::size_of::<TestAttr>(),
            )
        };
        assert_eq!(r, 0, "test run: {}", std::io::Error::last_os_error());
        out.truncate(a.data_size_out as usize);
        (a.retval, out)
    }

    fn csum_ok(h: &[u8]) -> bool {
        let mut sum: u32 = h
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum == 0xffff
    }

    /// What vnet_rx must decapsulate (outer IPv4 + UDP + VXLAN from the known link to our
    /// address and port, for a copied flow); `None`: the kernel may refuse it either way
    /// (too short for bpf_skb_adjust_room to leave an IP header behind).
    fn rx_accepts(p: &[u8]) -> Option<bool> {
        if p.len() < 64 {
            return Some(false);
        }
        let ip = &p[14..34];
        let accept = p[..6] == [0; 6] // PACKET_HOST on the loopback device
            && p[12..14] == [0x08, 0x00]
            && ip[0] == 0x45
            && ip[9] == 17
            && u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff == 0
            && ip[16..20] == LOCAL.octets()
            && p[36..38] == PORT.to_be_bytes()
            && p[42] & 0x08 != 0
            && (p[62..64] == [0x08, 0x00] || p[62..64] == [0x86, 0xdd])
            && csum_ok(ip)
            && ip[12..16] == REMOTE.octets()
            && p[46..49] == VNI.to_be_bytes()[1..]
            && p[56..62] == PEER
            && p[50..56] == ME;
        if accept && p.len() < 64 + 40 {
            return None;
        }
        Some(accept)
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// The tables for one copied flow each way between ME (on the loopback device, standing
    /// in for the TAP) and PEER (behind the link to REMOTE).
    fn copy_one_flow_each_way(st: &mut State) {
        st.taps.insert(LO, EpValue { ep: TAP_EP }, 0).unwrap();
        let link = LinkKey {
            remote_ip: be_ip(REMOTE),
            vni: VNI,
        };
        st.links.insert(link, EpValue { ep: LINK_EP }, 0).unwrap();
        let to_link = FlowValue {
            kind: TO_LINK,
            ifindex: LO,
            local_ip: be_ip(LOCAL),
            remote_ip: be_ip(REMOTE),
            vni: VNI,
            port: PORT.to_be(),
            ..FlowValue::default()
        };
        let to_tap = FlowValue {
            kind: TO_TAP,
            ifindex: LO,
            ..FlowValue::default()
        };
        // ME to PEER goes from the TAP into the tunnel; PEER to ME from the link to the TAP.
        for (ep, src, dst, value) in [(TAP_EP, ME, PEER, to_link), (LINK_EP, PEER, ME, to_tap)] {
            st.flows.insert(FlowKey { ep, src, dst }, value, 0).unwrap();
        }
    }

    /// Checks that `out` is `f` in VXLAN over UDP over IPv4 from LOCAL to REMOTE, with the
    /// headers the kernel's own VXLAN device would write.
    fn check_encapsulated(f: &[u8], out: &[u8]) {
        assert_eq!(out.len(), f.len() + 50);
        assert_eq!(out[12..14], [0x08, 0x00]);
        let ip = &out[14..34];
        assert!(csum_ok(ip), "outer IP checksum");
        assert_eq!(ip[0], 0x45);
        assert_eq!(
            usize::from(u16::from_be_bytes([ip[2], ip[3]])),
            f.len() + 36
        );
        assert_eq!(ip[6..8], [0x40, 0], "DF, no fragments");
        assert_eq!((ip[8], ip[9]), (64, 17));
        assert_eq!(ip[12..16], LOCAL.octets());
        assert_eq!(ip[16..20], REMOTE.octets());
        let udp = &out[34..42];
        assert!(u16::from_be_bytes([udp[0], udp[1]]) >= 49152);
        assert_eq!(udp[2..4], PORT.to_be_bytes());
        assert_eq!(
            usize::from(u16::from_be_bytes([udp[4], udp[5]])),
            f.len() + 16
        );
        assert_eq!(udp[6..8], [0, 0], "no outer UDP checksum, as kernel VXLAN");
        let (vni, inner) = vnet_core::vxlan::decode(&out[42..]).unwrap();
        assert_eq!((vni, inner), (VNI, f));
    }

    /// `p` corrupted on the way: a few bits of its first 70 bytes flipped, sometimes cut
    /// short (but never below a whole IPv4 header, which the test runner insists on).
    fn corrupted(rng: &mut Rng, p: &[u8]) -> Vec<u8> {
        let mut c = p.to_vec();
        for _ in 0..=rng.below(3) {
            let i = rng.below(70.min(c.len() as u64)) as usize;
            c[i] ^= 1 << rng.below(8);
        }
        if rng.below(4) == 0 {
            c.truncate(34 + rng.below(c.len() as u64 - 33) as usize);
        }
        c
    }

    #[test]
    fn the_programs_encapsulate_and_decapsulate_exactly_and_pass_the_rest() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: loading eBPF programs needs root");
            return;
        }
        let fp = FastPath::new(SocketAddr::from((LOCAL, PORT))).expect("the fast path loads");
        let mut st = fp.lock();
        copy_one_flow_each_way(&mut st);
        let tx: &SchedClassifier = st.bpf.program("vnet_tx").unwrap().try_into().unwrap();
        let rx: &SchedClassifier = st.bpf.program("vnet_rx").unwrap().try_into().unwrap();

        let secs = std::env::var("VNET_BPF_FUZZ_SECS")
            .ok()
            .and_then(|s| s.parse::<u64>().ok());
        let t0 = std::time::Instant::now();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut cases, mut decapsulated, mut passed) = (0u64, 0u64, 0u64);
        loop {
            match secs {
                Some(s) if t0.elapsed().as_secs() >= s => break,
                None if cases >= 20_000 => break,
                _ => {}
            }
            cases += 1;
            // A frame from the guest: usually the copied flow, sometimes another MAC pair
            // or protocol, which must pass untouched.
            // At least an IPv6 header, which the test runner insists on.
            let len = 14 + 40 + rng.below(1446) as usize;
            let mut f: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let kind = rng.below(8);
            f[..6].copy_from_slice(&PEER);
            f[6..12].copy_from_slice(&ME);
            f[12..14].copy_from_slice(match kind {
                0 => &[0x08, 0x06],
                1..=3 => &[0x86, 0xdd],
                _ => &[0x08, 0x00],
            });
            if kind == 7 {
                f[5] ^= 0x10; // another destination: no copy
            }
            let (r, out) = test_run(tx, LO, &f);
            if kind == 0 || kind == 7 {
                assert_eq!(
                    (r, &out),
                    (PASS, &f),
                    "vnet_tx took what it has no copy for"
                );
                continue;
            }
            assert_eq!(
                r, TC_ACT_REDIRECT,
                "vnet_tx refused a copied flow ({len} bytes)"
            );
            check_encapsulated(&f, &out);

            // The peer's side: the same packet as it arrives, addressed to us.
            let mut p = out;
            p[..6].fill(0);
            // From the remote to us: swapping the addresses keeps the checksum valid.
            let (src, dst) = p[26..34].split_at_mut(4);
            src.swap_with_slice(dst);
            p[56..62].copy_from_slice(&PEER);
            p[50..56].copy_from_slice(&ME);
            let (r, back) = test_run(rx, LO, &p);
            assert_eq!(r, TC_ACT_REDIRECT, "vnet_rx refused its own peer's packet");
            let mut want = f.clone();
            want[..6].copy_from_slice(&ME);
            want[6..12].copy_from_slice(&PEER);
            assert_eq!(back, want);
            decapsulated += 1;

            let c = corrupted(&mut rng, &p);
            let (r, got) = test_run(rx, LO, &c);
            match (rx_accepts(&c), r) {
                (Some(true) | None, TC_ACT_REDIRECT) => assert_eq!(got, c[50..].to_vec()),
                (Some(false) | None, PASS) => {
                    assert_eq!(got, c, "a packet passed on was changed");
                    passed += 1;
                }
                (want, r) => panic!(
                    "vnet_rx returned {r} for a packet the model says {want:?}: {:02x?}",
                    &c[..70]
                ),
            }
        }
        eprintln!(
            "{cases} cases in {:.1} s: {decapsulated} round trips, {passed} corrupted packets passed on",
            t0.elapsed().as_secs_f64()
        );
        assert!(decapsulated > cases / 2 && passed > 100);
    }
}
