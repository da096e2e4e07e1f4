//! The data plane: reader threads for TAP interfaces, bridges and the UDP socket, and the
//! send paths to each kind of port. Decisions come from [`vnet_core::switch::Switch`]; this
//! module only moves bytes.

use crate::fastpath::FastPath;
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

/// How long an idle worker sleeps in `epoll_wait` before it looks at its stop flag.
const POLL: Duration = Duration::from_millis(200);
/// Datagrams per `recvmmsg`.
const RX_BATCH: usize = 8;
/// After bulk traffic (TSO frames, GRO trains) the worker does not busy-poll for this long:
/// a bulk flow keeps the queues full anyway, and a spinning worker would only take CPU time
/// from the applications on a small machine.
const BULK_QUIET: Duration = Duration::from_millis(2);
/// A `sched_yield` that takes longer than this means another task wanted this CPU; the
/// worker then stops busy-polling and sleeps, so that it never competes for a busy CPU.
const YIELD_CONTENDED: Duration = Duration::from_micros(20);
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
    /// Set when reading it failed for good (the TAP was deleted under us, as when a
    /// container's namespace goes away with its TAP): the worker stops watching it, since
    /// the dead fd stays ready and would keep it spinning.
    gone: AtomicBool,
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
            gone: AtomicBool::new(false),
        }
    }

    /// A packet socket on a host NIC.
    pub fn packet(name: String, fd: OwnedFd) -> Device {
        Device {
            fd: DeviceFd::Packet(fd),
            name,
            gone: AtomicBool::new(false),
        }
    }

    pub(crate) fn is_tap(&self) -> bool {
        matches!(self.fd, DeviceFd::Tap(_))
    }

    /// Whether the device failed for good (see `gone`).
    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
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
    /// The kernel fast path, when enabled (`--offload`).
    pub fast: Option<FastPath>,
}

impl Shared {
    /// Locks the tables; a panic elsewhere never leaves them half-updated (batches swap
    /// whole copies), so a poisoned lock is safe to reuse.
    pub fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Routes a frame (or coalesced run) and puts its destinations' ports in `out`.
    fn decide(
        &self,
        source: Endpoint,
        eth: &EthHeader,
        frames: u64,
        bytes: u64,
        out: &mut Vec<(Endpoint, Port)>,
    ) {
        out.clear();
        let mut t = self.lock();
        if let Verdict::Forward(dests) = t.sw.forward(source, eth, frames, bytes) {
            out.extend(
                dests
                    .iter()
                    .filter_map(|d| t.ports.get(d).map(|p| (*d, p.clone()))),
            );
            if let Some(fp) = &self.fast {
                fp.offer(&mut t, source, eth, &dests);
            }
        }
    }

    fn count_tx(&self, dest: Endpoint, frames: u64, bytes: u64, r: &io::Result<()>) {
        if let Err(e) = r {
            log::debug!("send to endpoint {} failed: {e}", dest.0);
        }
        self.lock().sw.count_tx(dest, frames, bytes, r.is_ok());
    }
}

/// Scratch buffers the worker reuses across frames, so the per-packet path does not
/// allocate once they have grown to their working size.
#[derive(Default)]
pub struct Scratch {
    segs: Vec<Segment>,
    runs: Vec<Run>,
    dests: Vec<(Endpoint, Port)>,
    send: sys::SendBufs,
    iovs: Vec<libc::iovec>,
}

/// What one pass of the worker did, for the busy-poll policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Frames or datagrams handled.
    pub items: usize,
    /// True when some of them were bulk (a TSO frame or a GRO train).
    pub bulk: bool,
}

impl Work {
    fn add(&mut self, o: Work) {
        self.items += o.items;
        self.bulk |= o.bulk;
    }
}

/// The adaptive busy-poll policy. After work the worker keeps looking for more without
/// sleeping for `window`, because the answer to what it just forwarded (an echo reply, an
/// ACK, the next request) usually follows within a round trip and finding it without a
/// wake-up saves the most expensive step of the path (a cross-CPU wake-up; in a VM an IPI
/// to a halted vCPU). It is bounded three ways: never longer than `window` after the last
/// work (an idle daemon sleeps and burns no CPU), never while bulk traffic keeps the queues
/// full anyway, and never on a CPU another task wants (each empty look ends with a
/// `sched_yield`; a yield that takes long means the CPU is contended, and the worker sleeps).
/// Times are passed in, so the policy is tested without a clock.
#[derive(Clone, Debug)]
pub struct SpinPolicy {
    window: Duration,
    spin_until: Option<Instant>,
    bulk_until: Option<Instant>,
}

impl SpinPolicy {
    /// A policy with the given window (zero: never spin).
    pub fn new(window: Duration) -> SpinPolicy {
        SpinPolicy {
            window,
            spin_until: None,
            bulk_until: None,
        }
    }

    /// How long the next wait may sleep: zero while spinning.
    pub fn timeout(&self, now: Instant) -> Duration {
        let spinning =
            self.spin_until.is_some_and(|t| now < t) && self.bulk_until.is_none_or(|t| now >= t);
        if spinning {
            Duration::ZERO
        } else {
            POLL
        }
    }

    /// Records a pass that did `w` at `now`.
    pub fn on_work(&mut self, now: Instant, w: Work) {
        if w.items == 0 || self.window.is_zero() {
            return;
        }
        self.spin_until = Some(now + self.window);
        if w.bulk {
            self.bulk_until = Some(now + BULK_QUIET);
        }
    }

    /// Records an empty look that ended with a `sched_yield` taking `took`.
    pub fn on_yield(&mut self, took: Duration) {
        if took > YIELD_CONTENDED {
            self.spin_until = None;
        }
    }
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
    let mut dests = std::mem::take(&mut scratch.dests);
    sh.decide(source, &eth, frames, frame.len() as u64, &mut dests);
    let mut vh = vh;
    for (dest, port) in dests.drain(..) {
        let r = match &port {
            Port::Device(d) => {
                let vnet = vh.encode();
                sys::writev(d.raw(), &mut scratch.iovs, [&vnet[..], &frame[..]]).map(drop)
            }
            Port::Link { addr, vni } => {
                if !vh.is_gso() && vh.flags & F_NEEDS_CSUM != 0 {
                    if gso::complete_csum(frame, &vh).is_err() {
                        sh.lock().sw.count_malformed(source, 1);
                        break;
                    }
                    // Later copies (a fan-out to a TAP) carry the finished checksum.
                    vh.flags = F_DATA_VALID;
                }
                send_link(sh, addr, *vni, &vh, frame, scratch)
            }
        };
        sh.count_tx(dest, frames, frame.len() as u64, &r);
    }
    dests.clear();
    scratch.dests = dests;
}

/// Sends a frame to a VXLAN peer, segmenting a TSO frame and sending the segments with as
/// few UDP GSO messages (in one `sendmmsg`) as the kernel's limits allow. Each segment goes
/// out as an iovec of (VXLAN header, segment header, payload slice of the frame as read
/// from the TAP): the payload is not copied in user space.
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
        let mut b = scratch.send.batch();
        b.message(None);
        b.part(&vx);
        b.part(frame);
        return b.send(fd, addr);
    }
    gso::segment(frame, vh, &mut scratch.segs)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    let segs = &scratch.segs;
    let gso_ok = sh.gso_ok.load(Ordering::Relaxed);
    let mut b = scratch.send.batch();
    let mut i = 0;
    while i < segs.len() {
        let size = vxlan::VXLAN_HLEN + segs[i].len();
        let per = if gso_ok {
            (MAX_GSO_BYTES / size).clamp(1, sys::UDP_MAX_SEGMENTS)
        } else {
            1
        };
        let end = (i + per).min(segs.len());
        b.message((end - i > 1).then_some(size as u16));
        for s in &segs[i..end] {
            b.part(&vx);
            b.part(s.header());
            b.part(&frame[s.payload.clone()]);
        }
        i = end;
    }
    sh.stats.tx_tso.fetch_add(1, Ordering::Relaxed);
    sh.stats
        .tx_messages
        .fetch_add(b.messages() as u64, Ordering::Relaxed);
    let r = b.send(fd, addr);
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

/// Reads up to a burst of frames from a TAP or bridge.
fn drain_device(
    sh: &Shared,
    ep: Endpoint,
    dev: &Device,
    buf: &mut [u8],
    scratch: &mut Scratch,
) -> Work {
    let mut w = Work::default();
    for _ in 0..64 {
        match sys::read(dev.raw(), buf) {
            Ok(n) => {
                w.items += 1;
                let Ok(vh) = VnetHdr::parse(&buf[..n]) else {
                    sh.lock().sw.count_malformed(ep, 1);
                    continue;
                };
                w.bulk |= vh.is_gso();
                from_device(sh, ep, vh, &mut buf[VNET_HDR_LEN..n], scratch);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // A TAP whose device was deleted reads EBADFD, and polls as ready, for ever:
            // stop watching it, once, rather than wake for it in a loop. Its endpoint and
            // routes stay until deleted. (A packet socket reports a NIC going down once,
            // and works again when it comes back up: below.)
            Err(e) if dev.is_tap() && e.raw_os_error() == Some(libc::EBADFD) => {
                if !dev.gone.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "{}: read: {e}; no longer read (delete the endpoint, then add it again)",
                        dev.name
                    );
                }
                break;
            }
            Err(e) => {
                log::warn!("{}: read: {e}", dev.name);
                break;
            }
        }
    }
    w
}

/// Receives up to a burst of `recvmmsg` batches from the underlay. A batch that comes back
/// short means the socket queue is empty, so no further call (that would only fail with
/// `EAGAIN`) is made.
fn drain_udp(sh: &Shared, batch: &mut sys::RecvBatch, scratch: &mut Scratch) -> Work {
    let mut w = Work::default();
    for _ in 0..16 {
        match batch.recv(sh.udp.as_raw_fd()) {
            Ok(0) => break,
            Ok(n) => {
                w.add(on_batch(sh, batch, n, scratch));
                if n < batch.capacity() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                log::warn!("udp recv: {e}");
                break;
            }
        }
    }
    w
}

/// Epoll token of the underlay socket; the eventfd is 1, the fast path's device events 2,
/// device `k` is `DEV_TOKEN + k`.
const UDP_TOKEN: u64 = 0;
const WAKE_TOKEN: u64 = 1;
const LINKS_TOKEN: u64 = 2;
const DEV_TOKEN: u64 = 3;

/// Builds the worker's epoll set: the underlay socket, the wake-up eventfd, every device.
fn watch(sh: &Shared, devs: &[(Endpoint, Arc<Device>)]) -> io::Result<sys::Epoll> {
    let ep = sys::Epoll::new()?;
    ep.add(sh.udp.as_raw_fd(), UDP_TOKEN)?;
    ep.add(sh.wake.as_raw_fd(), WAKE_TOKEN)?;
    if let Some(fp) = &sh.fast {
        ep.add(fp.events_fd(), LINKS_TOKEN)?;
    }
    for (k, (_, d)) in devs.iter().enumerate() {
        ep.add(d.raw(), DEV_TOKEN + k as u64)?;
    }
    Ok(ep)
}

/// The data-plane worker: one thread that waits on the underlay socket and every device.
///
/// One thread per daemon rather than one per device: a frame written to a TAP often makes
/// the kernel answer at once (an ACK, an echo reply), in this thread's context, and the
/// same thread forwards the answer on its next pass without a wake-up of another thread.
/// Every packet is handled on the thread that received it, start to finish. Between passes
/// it follows [`SpinPolicy`]; otherwise it sleeps in `epoll_wait`.
pub fn worker(sh: Arc<Shared>) {
    let mut batch = sys::RecvBatch::new(RX_BATCH, RX_BUF);
    let mut scratch = Scratch::default();
    let mut buf = vec![0u8; VNET_HDR_LEN + 65_536 + 256];
    let mut devs: Vec<(Endpoint, Arc<Device>)> = Vec::new();
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 16];
    let mut ep: Option<sys::Epoll> = None;
    let mut seen = u64::MAX;
    let mut spin = SpinPolicy::new(sh.spin);
    while !sh.stop.load(Ordering::Relaxed) {
        let generation = sh.generation.load(Ordering::Acquire);
        if generation != seen || ep.is_none() {
            seen = generation;
            devs = sh
                .lock()
                .ports
                .iter()
                .filter_map(|(e, p)| match p {
                    Port::Device(d) if !d.is_gone() => Some((*e, d.clone())),
                    Port::Device(_) | Port::Link { .. } => None,
                })
                .collect();
            devs.sort_by_key(|(e, _)| *e);
            ep = match watch(&sh, &devs) {
                Ok(e) => Some(e),
                Err(e) => {
                    log::error!("epoll: {e}");
                    std::thread::sleep(POLL);
                    continue;
                }
            };
        }
        let Some(epoll) = &ep else { continue };
        let timeout = spin.timeout(Instant::now());
        let n = match epoll.wait(&mut events, timeout) {
            Ok(n) => n,
            Err(e) => {
                log::error!("epoll_wait: {e}");
                std::thread::sleep(POLL);
                continue;
            }
        };
        if n == 0 {
            if timeout.is_zero() {
                let t0 = Instant::now();
                sys::sched_yield();
                spin.on_yield(t0.elapsed());
            }
            continue;
        }
        let mut work = Work::default();
        for ev in &events[..n] {
            match ev.u64 {
                UDP_TOKEN => work.add(drain_udp(&sh, &mut batch, &mut scratch)),
                WAKE_TOKEN => sys::drain_eventfd(sh.wake.as_raw_fd()),
                LINKS_TOKEN => {
                    if let Some(fp) = &sh.fast {
                        fp.recheck(&mut sh.lock());
                    }
                }
                t => {
                    let k = (t - DEV_TOKEN) as usize;
                    if let Some((e, dev)) = devs.get(k) {
                        work.add(drain_device(&sh, *e, dev, &mut buf, &mut scratch));
                        if dev.is_gone() {
                            // Rebuild the watched set without it.
                            seen = u64::MAX;
                        }
                    }
                }
            }
        }
        spin.on_work(Instant::now(), work);
    }
}

/// Handles the `n` datagrams of one `recvmmsg` (each possibly a GRO train). Consecutive
/// packets from the same peer and VNI are handled as one group, so a TSO frame that the
/// sender had to split over two UDP GSO messages is coalesced back into one TAP write.
pub fn on_batch(sh: &Shared, batch: &sys::RecvBatch, n: usize, scratch: &mut Scratch) -> Work {
    let mut w = Work {
        items: n,
        bulk: false,
    };
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
        w.bulk |= !lone;
        for chunk in d.data.chunks(d.seg_size) {
            let Ok((vni, inner)) = vxlan::decode(chunk) else {
                sh.malformed.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            // A socket listening on `[::]` sees IPv4 peers as `::ffff:a.b.c.d`; links
            // are keyed by the plain address.
            let k = (from.ip().to_canonical(), vni);
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
    w
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
    let mut runs = std::mem::take(&mut scratch.runs);
    let mut dests = std::mem::take(&mut scratch.dests);
    gro::coalesce(frames, verify, &mut runs);
    for run in &runs {
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
        sh.decide(source, &eth, n, bytes, &mut dests);
        for (dest, port) in dests.drain(..) {
            let r = match (&port, &run.merged) {
                (Port::Device(dev), Some(m)) => {
                    sh.stats.rx_coalesced.fetch_add(1, Ordering::Relaxed);
                    let vnet = m.vnet.encode();
                    let payloads = members
                        .iter()
                        .zip(&m.payloads)
                        .map(|(f, (a, b))| &f[*a..*b]);
                    let parts = [&vnet[..], &m.header[..]].into_iter().chain(payloads);
                    sys::writev(dev.raw(), &mut scratch.iovs, parts).map(drop)
                }
                (Port::Device(dev), None) => {
                    let none = VnetHdr::default().encode();
                    members.iter().try_for_each(|f| {
                        sys::writev(dev.raw(), &mut scratch.iovs, [&none[..], f]).map(drop)
                    })
                }
                (Port::Link { addr, vni }, _) => {
                    let vx = vxlan::header(*vni);
                    let mut b = scratch.send.batch();
                    for f in members {
                        b.message(None);
                        b.part(&vx);
                        b.part(f);
                    }
                    b.send(sh.udp.as_raw_fd(), addr)
                }
            };
            sh.count_tx(dest, n, bytes, &r);
        }
    }
    scratch.runs = runs;
    scratch.dests = dests;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(items: usize) -> Work {
        Work { items, bulk: false }
    }

    #[test]
    fn spins_only_inside_the_window_after_work() {
        let t0 = Instant::now();
        let us = Duration::from_micros;
        let mut p = SpinPolicy::new(us(200));
        assert_eq!(p.timeout(t0), POLL, "never spins before any work");
        p.on_work(t0, small(1));
        assert_eq!(p.timeout(t0 + us(10)), Duration::ZERO);
        assert_eq!(p.timeout(t0 + us(199)), Duration::ZERO);
        assert_eq!(p.timeout(t0 + us(200)), POLL, "an idle worker sleeps");
        p.on_work(t0 + us(300), small(0));
        assert_eq!(
            p.timeout(t0 + us(310)),
            POLL,
            "an empty pass does not extend it"
        );
    }

    #[test]
    fn bulk_traffic_and_a_contended_cpu_stop_spinning() {
        let t0 = Instant::now();
        let us = Duration::from_micros;
        let mut p = SpinPolicy::new(us(200));
        p.on_work(
            t0,
            Work {
                items: 1,
                bulk: true,
            },
        );
        assert_eq!(p.timeout(t0 + us(10)), POLL);
        p.on_work(t0 + BULK_QUIET + us(1), small(1));
        assert_eq!(p.timeout(t0 + BULK_QUIET + us(2)), Duration::ZERO);
        p.on_yield(us(2));
        assert_eq!(p.timeout(t0 + BULK_QUIET + us(3)), Duration::ZERO);
        p.on_yield(YIELD_CONTENDED + us(1));
        assert_eq!(p.timeout(t0 + BULK_QUIET + us(4)), POLL);
    }

    #[test]
    fn a_zero_window_never_spins() {
        let t0 = Instant::now();
        let mut p = SpinPolicy::new(Duration::ZERO);
        p.on_work(t0, small(5));
        assert_eq!(p.timeout(t0), POLL);
    }
}
