//! The data plane: reader threads for TAP interfaces, bridges and the UDP socket, and the
//! send paths to each kind of port. Decisions come from [`vnet_core::switch::Switch`]; this
//! module only moves bytes.

use crate::sys;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use vnet_core::frame::EthHeader;
use vnet_core::gro::{self, Run};
use vnet_core::gso::{self, Segment};
use vnet_core::route::Endpoint;
use vnet_core::switch::{Switch, Verdict};
use vnet_core::vnethdr::{VnetHdr, F_DATA_VALID, F_NEEDS_CSUM, VNET_HDR_LEN};
use vnet_core::vxlan;

/// How long an idle worker sleeps in `poll` before it looks at its stop flag.
const POLL: Duration = Duration::from_millis(200);
/// Largest UDP payload we put in one GSO send.
const MAX_GSO_BYTES: usize = 65_000;
/// Receive buffer size: a full GRO train.
const RX_BUF: usize = 65_536 + 4096;

/// A device the worker reads frames from: a TAP or an AF_PACKET socket.
#[derive(Debug)]
pub struct Device {
    /// The file descriptor (TAP file or packet socket).
    fd: DeviceFd,
    /// Human-readable name.
    pub name: String,
}

#[derive(Debug)]
enum DeviceFd {
    Tap(File),
    Packet(OwnedFd),
}

impl Device {
    /// A TAP device.
    pub fn tap(name: String, f: File) -> Device {
        Device {
            fd: DeviceFd::Tap(f),
            name,
        }
    }

    /// A packet socket on a host NIC.
    pub fn packet(name: String, fd: OwnedFd) -> Device {
        Device {
            fd: DeviceFd::Packet(fd),
            name,
        }
    }

    fn raw(&self) -> RawFd {
        match &self.fd {
            DeviceFd::Tap(f) => f.as_raw_fd(),
            DeviceFd::Packet(s) => s.as_raw_fd(),
        }
    }
}

/// Where an endpoint's frames are written.
#[derive(Clone, Debug)]
pub enum Port {
    /// A TAP interface or a bridged NIC (both take a virtio-net header before the frame).
    Device(Arc<Device>),
    /// A VXLAN peer.
    Link {
        /// The peer's UDP address.
        addr: SocketAddr,
        /// VNI used towards it.
        vni: u32,
    },
}

/// Everything the control plane changes, swapped as a whole by atomic batches.
#[derive(Clone, Debug, Default)]
pub struct Tables {
    /// Endpoints and routes.
    pub sw: Switch,
    /// I/O handles of endpoints.
    pub ports: HashMap<Endpoint, Port>,
    /// Links by (peer address, VNI), for demultiplexing received datagrams.
    pub peers: HashMap<(IpAddr, u32), Endpoint>,
}

/// Data-path statistics that show whether batching and offloads work.
#[derive(Debug, Default)]
pub struct Stats {
    /// Datagrams received (a GRO train counts once).
    pub rx_datagrams: AtomicU64,
    /// VXLAN packets received.
    pub rx_packets: AtomicU64,
    /// Coalesced frames written to TAPs.
    pub rx_coalesced: AtomicU64,
    /// TSO frames segmented.
    pub tx_tso: AtomicU64,
    /// UDP messages sent.
    pub tx_messages: AtomicU64,
}

/// State shared by all threads.
pub struct Shared {
    /// The tables.
    pub tables: Mutex<Tables>,
    /// The underlay socket.
    pub udp: UdpSocket,
    /// Datagrams that were not VXLAN or held a malformed frame.
    pub malformed: AtomicU64,
    /// VXLAN datagrams from unknown peers or VNIs.
    pub unknown_peer: AtomicU64,
    /// Data-path statistics.
    pub stats: Stats,
    /// Verify inner TCP checksums before coalescing even where an outer UDP checksum
    /// covered them.
    pub verify_all: bool,
    /// Cleared when the kernel refuses UDP GSO; we then send datagram by datagram.
    pub gso_ok: AtomicBool,
    /// Set to stop the worker.
    pub stop: AtomicBool,
    /// Bumped by every applied batch, so the worker re-reads its set of devices.
    pub generation: AtomicU64,
    /// Wakes the worker out of `poll` after a batch.
    pub wake: OwnedFd,
    /// How long the worker keeps polling without sleeping after it last had work.
    pub spin: Duration,
}

impl Shared {
    /// Locks the tables; a panic elsewhere never leaves them half-updated (batches swap
    /// whole copies), so a poisoned lock is safe to reuse.
    pub fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn decide(
        &self,
        source: Endpoint,
        eth: &EthHeader,
        frames: u64,
        bytes: u64,
    ) -> Vec<(Endpoint, Port)> {
        let mut t = self.lock();
        match t.sw.forward(source, eth, frames, bytes) {
            Verdict::Forward(dests) => dests
                .iter()
                .filter_map(|d| t.ports.get(d).map(|p| (*d, p.clone())))
                .collect(),
            Verdict::Drop(_) => Vec::new(),
        }
    }

    fn count_tx(&self, dest: Endpoint, frames: u64, bytes: u64, r: &io::Result<()>) {
        if let Err(e) = r {
            log::debug!("send to endpoint {} failed: {e}", dest.0);
        }
        self.lock().sw.count_tx(dest, frames, bytes, r.is_ok());
    }
}

/// Scratch buffers a thread reuses across frames.
#[derive(Default)]
pub struct Scratch {
    segs: Vec<Segment>,
    runs: Vec<Run>,
}

fn wire_frames(vh: &VnetHdr, len: usize) -> u64 {
    if vh.is_gso() && vh.gso_size > 0 {
        (len.saturating_sub(usize::from(vh.hdr_len))
            .div_ceil(usize::from(vh.gso_size)))
        .max(1) as u64
    } else {
        1
    }
}

/// Handles one frame read from a TAP or bridge (with its virtio-net header).
pub fn from_device(
    sh: &Shared,
    source: Endpoint,
    vh: VnetHdr,
    frame: &mut [u8],
    scratch: &mut Scratch,
) {
    let eth = match EthHeader::parse(frame) {
        Ok(e) => e,
        Err(_) => {
            sh.lock().sw.count_malformed(source, 1);
            return;
        }
    };
    let frames = wire_frames(&vh, frame.len());
    let dests = sh.decide(source, &eth, frames, frame.len() as u64);
    let mut vh = vh;
    for (dest, port) in dests {
        let r = match &port {
            Port::Device(d) => sys::writev(d.raw(), &[&vh.encode(), frame]).map(drop),
            Port::Link { addr, vni } => {
                if !vh.is_gso() && vh.flags & F_NEEDS_CSUM != 0 {
                    if gso::complete_csum(frame, &vh).is_err() {
                        sh.lock().sw.count_malformed(source, 1);
                        return;
                    }
                    // Later copies (a fan-out to a TAP) carry the finished checksum.
                    vh.flags = F_DATA_VALID;
                }
                send_link(sh, addr, *vni, &vh, frame, scratch)
            }
        };
        sh.count_tx(dest, frames, frame.len() as u64, &r);
    }
}

/// Sends a frame to a VXLAN peer, segmenting a TSO frame and sending the segments with as
/// few UDP GSO `sendmmsg` calls as the kernel's limits allow.
fn send_link(
    sh: &Shared,
    addr: &SocketAddr,
    vni: u32,
    vh: &VnetHdr,
    frame: &[u8],
    scratch: &mut Scratch,
) -> io::Result<()> {
    let vx = vxlan::header(vni);
    let fd = sh.udp.as_raw_fd();
    if !vh.is_gso() {
        let m = sys::OutMsg {
            parts: vec![&vx, frame],
            gso: None,
        };
        return sys::send_mmsg(fd, addr, &[m]);
    }
    gso::segment(frame, vh, &mut scratch.segs)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    let segs = &scratch.segs;
    let gso_ok = sh.gso_ok.load(Ordering::Relaxed);
    let mut msgs = Vec::new();
    let mut i = 0;
    while i < segs.len() {
        let size = vxlan::VXLAN_HLEN + segs[i].len();
        let per = if gso_ok {
            (MAX_GSO_BYTES / size).clamp(1, sys::UDP_MAX_SEGMENTS)
        } else {
            1
        };
        let end = (i + per).min(segs.len());
        let mut parts = Vec::with_capacity(3 * (end - i));
        for s in &segs[i..end] {
            parts.extend_from_slice(&[&vx[..], s.header(), &frame[s.payload.clone()]]);
        }
        let gso = (end - i > 1).then_some(size as u16);
        msgs.push(sys::OutMsg { parts, gso });
        i = end;
    }
    sh.stats.tx_tso.fetch_add(1, Ordering::Relaxed);
    sh.stats
        .tx_messages
        .fetch_add(msgs.len() as u64, Ordering::Relaxed);
    let r = sys::send_mmsg(fd, addr, &msgs);
    if let Err(e) = &r {
        if gso_ok
            && matches!(
                e.raw_os_error(),
                Some(libc::EINVAL) | Some(libc::EIO) | Some(libc::ENOPROTOOPT)
            )
        {
            log::warn!("UDP GSO refused ({e}); sending datagram by datagram from now on");
            sh.gso_ok.store(false, Ordering::Relaxed);
            return send_link(sh, addr, vni, vh, frame, scratch);
        }
    }
    r
}

/// Reads up to a burst of frames from a TAP or bridge; returns how many it handled.
fn drain_device(
    sh: &Shared,
    ep: Endpoint,
    dev: &Device,
    buf: &mut [u8],
    scratch: &mut Scratch,
) -> usize {
    let mut n_frames = 0;
    for _ in 0..64 {
        match sys::read(dev.raw(), buf) {
            Ok(n) => {
                n_frames += 1;
                let Ok(vh) = VnetHdr::parse(&buf[..n]) else {
                    sh.lock().sw.count_malformed(ep, 1);
                    continue;
                };
                from_device(sh, ep, vh, &mut buf[VNET_HDR_LEN..n], scratch);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                log::warn!("{}: read: {e}", dev.name);
                break;
            }
        }
    }
    n_frames
}

/// Receives up to a burst of `recvmmsg` batches from the underlay; returns how many
/// datagrams it handled.
fn drain_udp(sh: &Shared, batch: &mut sys::RecvBatch, scratch: &mut Scratch) -> usize {
    let mut total = 0;
    for _ in 0..16 {
        match batch.recv(sh.udp.as_raw_fd()) {
            Ok(0) => break,
            Ok(n) => {
                total += n;
                on_batch(sh, batch, n, scratch);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                log::warn!("udp recv: {e}");
                break;
            }
        }
    }
    total
}

/// The data-plane worker: one thread that polls the underlay socket and every device.
///
/// One thread per daemon rather than one per device: a frame written to a TAP often makes
/// the kernel answer at once (an ACK, an echo reply), and the same thread then finds the
/// answer on its next poll without a wake-up of another thread. After work it keeps
/// polling without sleeping for `spin` (adaptive busy polling), which is what brings a
/// round trip close to the kernel's; when idle it sleeps in `poll`.
pub fn worker(sh: Arc<Shared>) {
    let mut batch = sys::RecvBatch::new(8, RX_BUF);
    let mut scratch = Scratch::default();
    let mut buf = vec![0u8; VNET_HDR_LEN + 65_536 + 256];
    let mut devs: Vec<(Endpoint, Arc<Device>)> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    let mut seen = u64::MAX;
    let mut last_work = Instant::now();
    while !sh.stop.load(Ordering::Relaxed) {
        let generation = sh.generation.load(Ordering::Acquire);
        if generation != seen {
            seen = generation;
            devs = sh
                .lock()
                .ports
                .iter()
                .filter_map(|(e, p)| match p {
                    Port::Device(d) => Some((*e, d.clone())),
                    Port::Link { .. } => None,
                })
                .collect();
            devs.sort_by_key(|(e, _)| *e);
            fds.clear();
            for fd in [sh.udp.as_raw_fd(), sh.wake.as_raw_fd()]
                .into_iter()
                .chain(devs.iter().map(|(_, d)| d.raw()))
            {
                fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
        }
        let timeout = if last_work.elapsed() < sh.spin {
            Duration::ZERO
        } else {
            POLL
        };
        match sys::poll(&mut fds, timeout) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(e) => {
                log::error!("poll: {e}");
                std::thread::sleep(POLL);
                continue;
            }
        }
        let mut work = 0;
        if fds[0].revents != 0 {
            work += drain_udp(&sh, &mut batch, &mut scratch);
        }
        if fds[1].revents != 0 {
            sys::drain_eventfd(sh.wake.as_raw_fd());
        }
        for (k, (ep, dev)) in devs.iter().enumerate() {
            if fds[k + 2].revents != 0 {
                work += drain_device(&sh, *ep, dev, &mut buf, &mut scratch);
            }
        }
        if work > 0 {
            last_work = Instant::now();
        }
    }
}

/// Handles the `n` datagrams of one `recvmmsg` (each possibly a GRO train). Consecutive
/// packets from the same peer and VNI are handled as one group, so a TSO frame that the
/// sender had to split over two UDP GSO messages is coalesced back into one TAP write.
pub fn on_batch(sh: &Shared, batch: &sys::RecvBatch, n: usize, scratch: &mut Scratch) {
    let mut group: Vec<&[u8]> = Vec::new();
    let mut verify: Vec<bool> = Vec::new();
    let mut key: Option<(IpAddr, u32)> = None;
    for i in 0..n {
        let d = batch.get(i);
        let Some(from) = d.from else { continue };
        sh.stats.rx_datagrams.fetch_add(1, Ordering::Relaxed);
        sh.stats
            .rx_packets
            .fetch_add(d.data.len().div_ceil(d.seg_size) as u64, Ordering::Relaxed);
        // The kernel builds a GRO train only from datagrams with a non-zero UDP checksum,
        // which it has verified, and a UDP GSO sender always sets one; a lone datagram may
        // carry checksum 0 (kernel VXLAN's default), so its inner frame is verified.
        let lone = d.data.len() <= d.seg_size;
        for chunk in d.data.chunks(d.seg_size) {
            let Ok((vni, inner)) = vxlan::decode(chunk) else {
                sh.malformed.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let k = (from.ip(), vni);
            if let Some(prev) = key.filter(|p| *p != k) {
                deliver_group(sh, prev.0, prev.1, &group, &verify, scratch);
                group.clear();
                verify.clear();
            }
            key = Some(k);
            group.push(inner);
            verify.push(lone || sh.verify_all);
        }
    }
    if let Some((ip, vni)) = key {
        deliver_group(sh, ip, vni, &group, &verify, scratch);
    }
}

/// Routes inner frames from one peer and VNI, coalescing TCP runs for TAP destinations.
fn deliver_group(
    sh: &Shared,
    peer: IpAddr,
    vni: u32,
    frames: &[&[u8]],
    verify: &[bool],
    scratch: &mut Scratch,
) {
    let Some(source) = sh.lock().peers.get(&(peer, vni)).copied() else {
        sh.unknown_peer
            .fetch_add(frames.len() as u64, Ordering::Relaxed);
        return;
    };
    gro::coalesce(frames, verify, &mut scratch.runs);
    for run in &scratch.runs {
        let members = &frames[run.start..run.start + run.count];
        let eth = match EthHeader::parse(members[0]) {
            Ok(e) => e,
            Err(_) => {
                sh.malformed.fetch_add(1, Ordering::Relaxed);
                sh.lock().sw.count_malformed(source, 1);
                continue;
            }
        };
        let bytes: u64 = members.iter().map(|f| f.len() as u64).sum();
        let n = run.count as u64;
        for (dest, port) in sh.decide(source, &eth, n, bytes) {
            let r = match (&port, &run.merged) {
                (Port::Device(dev), Some(m)) => {
                    sh.stats.rx_coalesced.fetch_add(1, Ordering::Relaxed);
                    let vnet = m.vnet.encode();
                    let mut parts: Vec<&[u8]> = Vec::with_capacity(2 + members.len());
                    parts.push(&vnet);
                    parts.push(&m.header);
                    for (f, (a, b)) in members.iter().zip(&m.payloads) {
                        parts.push(&f[*a..*b]);
                    }
                    sys::writev(dev.raw(), &parts).map(drop)
                }
                (Port::Device(dev), None) => {
                    let none = VnetHdr::default().encode();
                    members
                        .iter()
                        .try_for_each(|f| sys::writev(dev.raw(), &[&none, f]).map(drop))
                }
                (Port::Link { addr, vni }, _) => {
                    let vx = vxlan::header(*vni);
                    let msgs: Vec<sys::OutMsg<'_>> = members
                        .iter()
                        .map(|f| sys::OutMsg {
                            parts: vec![&vx[..], f],
                            gso: None,
                        })
                        .collect();
                    sys::send_mmsg(sh.udp.as_raw_fd(), addr, &msgs)
                }
            };
            sh.count_tx(dest, n, bytes, &r);
        }
    }
}
