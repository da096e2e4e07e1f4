//! A shared-memory region (a memfd) holding a tenant's rings, and the framed
//! channel built on them.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;

use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};

use crate::ring::{Consumer, Handoff, HeldRecord, Liveness, Producer, HEADER_BYTES};
use crate::{Channel, TransportError};

/// Sizes of the three rings in a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Requests, client to server.
    pub request: usize,
    /// Replies, server to client.
    pub reply: usize,
    /// Notifications (event callbacks), server to client.
    pub notify: usize,
}

/// Regions up to this size are faulted in when mapped (see `Region::map`).
const POPULATE_LIMIT: usize = 64 << 20;

impl Default for Layout {
    fn default() -> Self {
        Layout {
            request: 2 << 20,
            reply: 2 << 20,
            notify: 64 << 10,
        }
    }
}

impl Layout {
    fn rings(&self) -> [usize; 3] {
        [self.request, self.reply, self.notify]
    }

    /// Total bytes, or an error if a ring is not a power of two of at least
    /// a page, or the sum overflows.
    pub fn total(&self) -> Result<usize, TransportError> {
        let mut total = 0usize;
        for cap in self.rings() {
            if !cap.is_power_of_two() || !(4096..=(1 << 32)).contains(&cap) {
                return Err(TransportError::BadLayout);
            }
            total = total
                .checked_add(HEADER_BYTES + cap)
                .ok_or(TransportError::BadLayout)?;
        }
        Ok(total)
    }

    fn offset(&self, ring: usize) -> usize {
        self.rings()[..ring].iter().map(|c| HEADER_BYTES + c).sum()
    }
}

/// A mapped region; unmapped when the last ring end that uses it is dropped.
/// A memfd of `len` zero bytes, sealed so that the peer we pass it to
/// cannot shrink it under our mapping (our next access would fault) or
/// grow it.
pub(crate) fn sealed_memfd(name: &std::ffi::CStr, len: usize) -> Result<OwnedFd, TransportError> {
    use nix::fcntl::{fcntl, FcntlArg, SealFlag};
    use nix::sys::memfd::MemFdCreateFlag;
    let fd = nix::sys::memfd::memfd_create(
        name,
        MemFdCreateFlag::MFD_CLOEXEC | MemFdCreateFlag::MFD_ALLOW_SEALING,
    )?;
    let flen = libc::off_t::try_from(len).map_err(|_| TransportError::BadLayout)?;
    nix::unistd::ftruncate(&fd, flen)?;
    fcntl(
        fd.as_raw_fd(),
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL,
        ),
    )?;
    Ok(fd)
}

/// A file from the peer must be at least as long as it says.
pub(crate) fn check_file_len(fd: &OwnedFd, len: usize) -> Result<(), TransportError> {
    let st = nix::sys::stat::fstat(fd.as_raw_fd())?;
    if len == 0 || (st.st_size as u64) < len as u64 {
        return Err(TransportError::BadLayout);
    }
    Ok(())
}

/// `len` bytes of a file mapped shared, read-write (a channel's rings, or an
/// arena); unmapped when dropped.
pub(crate) struct SharedMap {
    base: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping belongs to the process, not to the thread that made it,
// and only Drop unmaps it; the struct hands out raw pointers only, so what is
// done through them is justified where they are used (ring ends, arena users).
unsafe impl Send for SharedMap {}
// SAFETY: no `&SharedMap` method writes the struct: each reads an immutable field.
unsafe impl Sync for SharedMap {}

impl SharedMap {
    /// Maps `len` bytes of `fd`, with `extra` flags beside MAP_SHARED.
    pub(crate) fn new(fd: OwnedFd, len: usize, extra: MapFlags) -> Result<Self, TransportError> {
        let nz = std::num::NonZeroUsize::new(len).ok_or(TransportError::BadLayout)?;
        // SAFETY: a fresh shared mapping of a file we hold; no Rust object
        // aliases it, and only this struct's Drop unmaps it.
        let ptr = unsafe {
            mmap(
                None,
                nz,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED | extra,
                fd.as_fd(),
                0,
            )?
        };
        Ok(SharedMap {
            base: ptr.cast(),
            len,
            fd,
        })
    }

    /// The first byte of the mapping.
    pub(crate) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The mapped file.
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: `base` and `len` are exactly the range `new` mapped, unmapped
        // nowhere else; its users (ring ends, arena buffers) hold the Arc of the
        // Region or Arena that owns this map while they use it.
        unsafe {
            let _ = munmap(self.base.cast(), self.len);
        }
    }
}

pub struct Region {
    map: SharedMap,
    layout: Layout,
}

impl Region {
    /// Creates a fresh, zeroed memfd region (server side).
    pub fn create(layout: Layout) -> Result<Arc<Self>, TransportError> {
        let len = layout.total()?;
        let fd = sealed_memfd(c"wormhole-channel", len)?;
        Self::map(fd, layout)
    }

    /// Maps a region received from the peer, after checking that the file is
    /// as large as the layout claims (client side).
    pub fn open(fd: OwnedFd, layout: Layout) -> Result<Arc<Self>, TransportError> {
        check_file_len(&fd, layout.total()?)?;
        Self::map(fd, layout)
    }

    fn map(fd: OwnedFd, layout: Layout) -> Result<Arc<Self>, TransportError> {
        let len = layout.total()?;
        // Rings are written in order and lap after lap, so every page is
        // used soon. Faulting them in here, once, keeps the page faults
        // (and, for the first side to touch a page, zeroing it) out of the
        // calls: a call-heavy client otherwise took one fault per 4 KiB of
        // calls for the ring's first lap. Only for regions of a sane size:
        // the peer chooses the layout.
        let populate = if len <= POPULATE_LIMIT {
            MapFlags::MAP_POPULATE
        } else {
            MapFlags::empty()
        };
        Ok(Arc::new(Region {
            map: SharedMap::new(fd, len, populate)?,
            layout,
        }))
    }

    /// The file to pass to the peer.
    pub fn fd(&self) -> &OwnedFd {
        self.map.fd()
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    fn ring_base(&self, ring: usize) -> *mut u8 {
        // SAFETY: the map is `layout.total()` bytes long, and `offset(ring)`
        // (for ring < 3) is the sum of the rings before it: inside the mapping.
        unsafe { self.map.base().add(self.layout.offset(ring)) }
    }
}

/// Which end of the channel this process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// Largest frame a receiver accepts by default.
pub const DEFAULT_MAX_FRAME: u64 = 1 << 32;

/// A framed, bidirectional channel over a region's request and reply rings.
pub struct ShmChannel {
    tx: Producer,
    rx: Consumer,
    max_frame: u64,
    _region: Arc<Region>,
}

impl ShmChannel {
    pub fn new(region: Arc<Region>, side: Side, handoff: Handoff, alive: Option<Liveness>) -> Self {
        let l = region.layout();
        let (tx_ring, tx_cap, rx_ring, rx_cap) = match side {
            Side::Client => (0, l.request, 1, l.reply),
            Side::Server => (1, l.reply, 0, l.request),
        };
        // Both ends may need to check liveness; share the one check.
        let alive = alive.map(Arc::new);
        let a1 = alive.clone().map(|a| Box::new(move || a()) as Liveness);
        let a2 = alive.map(|a| Box::new(move || a()) as Liveness);
        // Same-core: the client's end of the request ring says where the
        // caller runs and the server's end follows it; the client's end of
        // the reply ring holds the caller's CPU only while it sleeps there
        // (`pin::hold_cpu_while`), so the application's threads keep their
        // affinity.
        let (tx_handoff, rx_handoff) = match (handoff, side) {
            (Handoff::SameCore, Side::Client) => (Handoff::SameCore, Handoff::Futex),
            (Handoff::SameCore, Side::Server) => (Handoff::Futex, Handoff::SameCore),
            (h, _) => (h, h),
        };
        // SAFETY: the region maps both rings with the capacities of its
        // layout and stays alive through `_region`; each side builds exactly
        // one producer and one consumer per ring.
        let (tx, mut rx) = unsafe {
            (
                Producer::new(region.ring_base(tx_ring), tx_cap, tx_handoff, a1),
                Consumer::new(region.ring_base(rx_ring), rx_cap, rx_handoff, a2),
            )
        };
        if handoff == Handoff::SameCore && side == Side::Client {
            rx.hold_cpu_while_waiting();
        }
        ShmChannel {
            tx,
            rx,
            max_frame: DEFAULT_MAX_FRAME,
            _region: region,
        }
    }

    pub fn set_max_frame(&mut self, max: u64) {
        self.max_frame = max;
    }
}

/// Reads one length-prefixed frame into `buf`, refusing oversized lengths and
/// failing cleanly, not aborting, when memory is short.
pub(crate) fn read_frame(
    max: u64,
    buf: &mut Vec<u8>,
    mut read: impl FnMut(&mut [u8]) -> Result<(), TransportError>,
) -> Result<(), TransportError> {
    let mut len = [0u8; 8];
    read(&mut len)?;
    read_body(u64::from_le_bytes(len), max, buf, read)
}

/// Reads the `len` bytes of a frame whose length prefix is already read.
pub(crate) fn read_body(
    len: u64,
    max: u64,
    buf: &mut Vec<u8>,
    mut read: impl FnMut(&mut [u8]) -> Result<(), TransportError>,
) -> Result<(), TransportError> {
    if len > max {
        return Err(TransportError::FrameTooLarge { len, max });
    }
    let len = len as usize;
    buf.clear();
    buf.try_reserve_exact(len)
        .map_err(|_| TransportError::FrameTooLarge {
            len: len as u64,
            max,
        })?;
    buf.resize(len, 0);
    read(buf)
}

impl Channel for ShmChannel {
    fn send(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        // One record: a small call crosses as one cache line or two.
        self.tx.write_frame(frame)
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        self.tx.flush();
        Ok(())
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> Result<(), TransportError> {
        let max = self.max_frame;
        self.rx.read_frame(max, buf, |rx, buf| {
            read_frame(max, buf, |b| rx.read_exact(b))
        })
    }

    fn send_raw(&mut self, data: &[u8]) -> Result<(), TransportError> {
        self.tx.write_all(data)
    }

    fn recv_raw(&mut self, dst: &mut [u8]) -> Result<(), TransportError> {
        self.rx.read_exact(dst)
    }

    fn send_held(&mut self, frame: &[u8]) -> Result<Option<HeldReply>, TransportError> {
        Ok(self.tx.write_frame_held(frame)?.map(|rec| HeldReply {
            rec,
            _region: self._region.clone(),
        }))
    }

    fn wait_for(&mut self, timeout: std::time::Duration) -> Result<bool, TransportError> {
        self.rx.wait_data_for(timeout)
    }
}

/// A reply written to the ring but not yet visible to the client
/// ([`Channel::send_held`]). It keeps the ring mapped until it is published.
pub struct HeldReply {
    rec: HeldRecord,
    _region: Arc<Region>,
}

impl HeldReply {
    /// The reply's length.
    pub fn frame_len(&self) -> u64 {
        self.rec.frame_len()
    }

    /// Overwrites reply bytes from `offset` on before it is published.
    pub fn patch(&mut self, offset: u64, bytes: &[u8]) {
        self.rec.patch(offset, bytes);
    }

    /// Makes the reply visible and wakes the client if it sleeps.
    pub fn publish(self) {
        self.rec.publish();
    }
}

/// The server's end of the notification ring; shared by callback threads.
pub struct NotifySender {
    tx: std::sync::Mutex<Producer>,
    _region: Arc<Region>,
}

impl NotifySender {
    pub fn new(region: Arc<Region>) -> Self {
        let cap = region.layout().notify;
        // SAFETY: `ring_base(2)` maps the notify ring's header and `cap`
        // bytes (`cap` from the region's own validated layout), kept mapped by
        // `_region`; the ring has one producer (this, behind a mutex) and one
        // consumer (the client's).
        let tx = unsafe { Producer::new(region.ring_base(2), cap, Handoff::Futex, None) };
        NotifySender {
            tx: std::sync::Mutex::new(tx),
            _region: region,
        }
    }
}

impl crate::Notify for NotifySender {
    /// Sends one notification frame and wakes the client's notifier.
    fn notify(&self, frame: &[u8]) -> Result<(), TransportError> {
        let mut tx = self
            .tx
            .lock()
            .map_err(|_| TransportError::Corrupt("poisoned"))?;
        tx.write_parts(&[&(frame.len() as u64).to_le_bytes(), frame])?;
        tx.flush();
        Ok(())
    }
}

/// The client's end of the notification ring.
pub struct NotifyReceiver {
    rx: Consumer,
    _region: Arc<Region>,
}

impl NotifyReceiver {
    pub fn new(region: Arc<Region>, alive: Option<Liveness>) -> Self {
        let cap = region.layout().notify;
        // SAFETY: `ring_base(2)` maps the notify ring's header and `cap`
        // bytes of the region's validated layout, kept mapped by `_region`;
        // this is the ring's one consumer (the server holds its one producer).
        let rx = unsafe { Consumer::new(region.ring_base(2), cap, Handoff::Futex, alive) };
        NotifyReceiver {
            rx,
            _region: region,
        }
    }

    pub fn recv(&mut self, buf: &mut Vec<u8>) -> Result<(), TransportError> {
        let rx = &mut self.rx;
        read_frame(1 << 20, buf, |b| rx.read_exact(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Layout {
        Layout {
            request: 4096,
            reply: 8192,
            notify: 4096,
        }
    }

    #[test]
    fn frames_cross_both_ways_and_stream_past_capacity() {
        let region = Region::create(small()).expect("region");
        let peer = Region::open(region.fd().try_clone().expect("dup"), small()).expect("open");
        let mut client = ShmChannel::new(peer, Side::Client, Handoff::Futex, None);
        let mut server = ShmChannel::new(region, Side::Server, Handoff::Spin { polls: 100 }, None);
        let t = std::thread::spawn(move || {
            let mut buf = Vec::new();
            for _ in 0..3 {
                server.recv(&mut buf).expect("recv");
                let sum: u64 = buf.iter().map(|&b| b as u64).sum();
                server.send(&sum.to_le_bytes()).expect("send");
                server.flush().expect("flush");
            }
        });
        let mut buf = Vec::new();
        // 100 KB frames through a 4 KB ring: must stream, not deadlock.
        for n in [1usize, 5000, 100_000] {
            let frame: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            client.send(&frame).expect("send");
            client.flush().expect("flush");
            client.recv(&mut buf).expect("recv");
            let want: u64 = frame.iter().map(|&b| b as u64).sum();
            assert_eq!(buf, want.to_le_bytes());
        }
        t.join().expect("server thread");
    }

    #[test]
    fn layout_rejects_bad_sizes() {
        assert!(Layout {
            request: 1000,
            reply: 4096,
            notify: 4096
        }
        .total()
        .is_err());
        assert!(Region::open(
            Region::create(small())
                .expect("r")
                .fd()
                .try_clone()
                .expect("dup"),
            Layout {
                request: 1 << 20,
                ..small()
            }
        )
        .is_err());
    }

    #[test]
    fn oversized_frame_is_refused() {
        let region = Region::create(small()).expect("region");
        let mut client = ShmChannel::new(region.clone(), Side::Client, Handoff::Futex, None);
        let mut server = ShmChannel::new(region, Side::Server, Handoff::Futex, None);
        server.set_max_frame(10);
        client.send(&[0u8; 11]).expect("send");
        client.flush().expect("flush");
        let mut buf = Vec::new();
        assert!(matches!(
            server.recv(&mut buf),
            Err(TransportError::FrameTooLarge { len: 11, .. })
        ));
    }
}
