//! Thin, documented wrappers over the Linux system calls the data plane needs: TAP devices
//! with virtio-net headers and offloads, interface ioctls, UDP GSO/GRO with
//! `sendmmsg`/`recvmmsg`, and AF_PACKET sockets. Every `unsafe` block is here.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::marker::PhantomData;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const IFF_TAP: i16 = 0x0002;
const IFF_NO_PI: i16 = 0x1000;
const IFF_VNET_HDR: i16 = 0x4000;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;
const SOL_UDP: libc::c_int = 17;
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// Most segments one UDP GSO send may carry (`UDP_MAX_SEGMENTS` in older kernels).
pub const UDP_MAX_SEGMENTS: usize = 64;

/// `struct ifreq`: a 16-byte name and a 24-byte union (we use flags, mtu and hwaddr).
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: [u8; 24],
}

impl IfReq {
    fn new(name: &str) -> io::Result<IfReq> {
        let b = name.as_bytes();
        if b.is_empty() || b.len() >= libc::IFNAMSIZ || b.contains(&0) || b.contains(&b'/') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad interface name {name:?}"),
            ));
        }
        let mut r = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: [0; 24],
        };
        r.name[..b.len()].copy_from_slice(b);
        Ok(r)
    }
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Sets socket option `opt` at `level` to the value `v`, passed by address with its size.
fn set_opt<T>(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live `T`, readable for the `size_of::<T>()` bytes passed as its
    // length; the kernel only reads them and refuses a length the option does not take.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Binds the socket to `addr`, a `sockaddr_*` of the socket's family.
fn bind_to<T>(fd: RawFd, addr: &T) -> io::Result<()> {
    // SAFETY: `addr` is a live `T`, readable for the `size_of::<T>()` bytes passed as its
    // length; the kernel only reads them and refuses an address of another family or size.
    cvt(unsafe {
        libc::bind(
            fd,
            (addr as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Runs an interface ioctl on a throwaway datagram socket.
fn if_ioctl(req: libc::c_ulong, ifr: &mut IfReq) -> io::Result<()> {
    // SAFETY: socket() has no memory-safety preconditions; the result is checked.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd is a fresh descriptor we own; OwnedFd closes it exactly once.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `ifr` is a valid, writable `struct ifreq` (40 bytes) for the whole call, which
    // is what every SIOC[GS]IF* request used here reads or writes.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), req as _, ifr as *mut IfReq) })?;
    Ok(())
}

/// Reads an interface's MAC address.
pub fn get_mac(name: &str) -> io::Result<[u8; 6]> {
    let mut r = IfReq::new(name)?;
    if_ioctl(libc::SIOCGIFHWADDR, &mut r)?;
    let mut m = [0u8; 6];
    m.copy_from_slice(&r.data[2..8]);
    Ok(m)
}

/// Sets an interface's MAC address.
pub fn set_mac(name: &str, mac: [u8; 6]) -> io::Result<()> {
    let mut r = IfReq::new(name)?;
    r.data[..2].copy_from_slice(&1u16.to_ne_bytes()); // ARPHRD_ETHER
    r.data[2..8].copy_from_slice(&mac);
    if_ioctl(libc::SIOCSIFHWADDR, &mut r)
}

/// Sets an interface's MTU.
pub fn set_mtu(name: &str, mtu: u32) -> io::Result<()> {
    let mut r = IfReq::new(name)?;
    r.data[..4].copy_from_slice(&(mtu as i32).to_ne_bytes());
    if_ioctl(libc::SIOCSIFMTU, &mut r)
}

/// Brings an interface up.
pub fn set_up(name: &str) -> io::Result<()> {
    let mut r = IfReq::new(name)?;
    if_ioctl(libc::SIOCGIFFLAGS, &mut r)?;
    let flags = i16::from_ne_bytes([r.data[0], r.data[1]]) | libc::IFF_UP as i16;
    r.data[..2].copy_from_slice(&flags.to_ne_bytes());
    if_ioctl(libc::SIOCSIFFLAGS, &mut r)
}

/// The index of a network interface.
pub fn if_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i)
    }
}

/// Opens (creating if needed) a TAP device with virtio-net headers and TCP offloads, so
/// the kernel passes 64 KiB TSO frames with partial checksums. Non-blocking.
pub fn open_tap(name: &str) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")?;
    let mut r = IfReq::new(name)?;
    r.data[..2].copy_from_slice(&(IFF_TAP | IFF_NO_PI | IFF_VNET_HDR).to_ne_bytes());
    // SAFETY: TUNSETIFF reads and writes a `struct ifreq`, which `r` is, valid for the call.
    cvt(unsafe { libc::ioctl(f.as_raw_fd(), TUNSETIFF as _, &mut r as *mut IfReq) })?;
    let offloads = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
    // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned int of flags).
    cvt(unsafe { libc::ioctl(f.as_raw_fd(), TUNSETOFFLOAD as _, offloads as libc::c_ulong) })?;
    Ok(f)
}

/// A non-blocking eventfd, used to wake the worker.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd has no memory-safety preconditions; the result is checked.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
    // SAFETY: fd is a fresh descriptor owned only here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Signals an eventfd (best effort: a full counter already means "signalled").
pub fn notify_eventfd(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64, as eventfd requires.
    let _ = unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Clears an eventfd.
pub fn drain_eventfd(fd: RawFd) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64, as eventfd requires.
    let _ = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

/// Puts the calling thread under SCHED_FIFO at `prio` (1..=99).
pub fn set_fifo(prio: u8) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: libc::c_int::from(prio),
    };
    // SAFETY: pid 0 means the calling thread; `param` is a valid sched_param.
    cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) })?;
    Ok(())
}

/// Gives the CPU to any other runnable task on it.
pub fn sched_yield() {
    // SAFETY: sched_yield has no arguments and no memory-safety preconditions.
    unsafe { libc::sched_yield() };
}

/// A level-triggered epoll instance. Level-triggered on purpose: with edge triggers every
/// wake-up would have to end in a read that fails with `EAGAIN`, one more system call per
/// packet on the latency path; here the worker stops reading when a batch comes back short
/// and asks epoll again (without sleeping while it is busy).
pub struct Epoll(OwnedFd);

impl Epoll {
    /// A new epoll instance.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 has no memory-safety preconditions; the result is checked.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: fd is a fresh descriptor owned only here.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Watches `fd` for input, reporting it with `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        cvt(unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(())
    }

    /// Waits up to `timeout` (zero: just look) and returns the tokens of ready descriptors
    /// in `events[..n]`; a signal counts as a timeout.
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout: Duration) -> io::Result<usize> {
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `events` is a valid, writable array of `events.len()` epoll_event structures.
        let n = unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                events.as_mut_ptr(),
                events.len().min(i32::MAX as usize) as libc::c_int,
                ms,
            )
        };
        match cvt(n) {
            Ok(n) => Ok(n as usize),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// `read(2)` into `buf`.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
    cvt_size(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) })
}

fn iov(b: &[u8]) -> libc::iovec {
    // The kernel only reads through these iovecs (writev/sendmsg), so the const-to-mut cast
    // never leads to a write.
    libc::iovec {
        iov_base: b.as_ptr() as *mut libc::c_void,
        iov_len: b.len(),
    }
}

/// `writev(2)` of the given slices as one packet, building the iovec array in `iovs`
/// (reused across calls, so the per-packet path does not allocate).
pub fn writev<'a>(
    fd: RawFd,
    iovs: &mut Vec<libc::iovec>,
    parts: impl IntoIterator<Item = &'a [u8]>,
) -> io::Result<usize> {
    iovs.clear();
    iovs.extend(parts.into_iter().map(iov));
    // SAFETY: every iovec points into a slice borrowed (lifetime 'a) for the duration of the
    // call; the kernel only reads through them.
    cvt_size(unsafe { libc::writev(fd, iovs.as_ptr(), iovs.len() as libc::c_int) })
}

/// A socket address in the C layout.
pub struct RawAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl RawAddr {
    /// Converts a Rust socket address.
    pub fn new(a: &SocketAddr) -> RawAddr {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
        let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
        let len = match a {
            SocketAddr::V4(v4) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(v4.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
                unsafe {
                    std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin)
                };
                size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(v6) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: v6.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: v6.scope_id(),
                };
                // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
                unsafe {
                    std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6)
                };
                size_of::<libc::sockaddr_in6>()
            }
        };
        RawAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }

    /// Converts back (None for families other than IPv4/IPv6).
    pub fn to_std(&self) -> Option<SocketAddr> {
        match i32::from(self.storage.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in; storage is aligned.
                let sin: &libc::sockaddr_in =
                    unsafe { &*(&self.storage as *const libc::sockaddr_storage).cast() };
                let ip = std::net::Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                Some(SocketAddr::from((ip, u16::from_be(sin.sin_port))))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6; storage is aligned.
                let s6: &libc::sockaddr_in6 =
                    unsafe { &*(&self.storage as *const libc::sockaddr_storage).cast() };
                let ip = std::net::Ipv6Addr::from(s6.sin6_addr.s6_addr);
                Some(SocketAddr::from((ip, u16::from_be(s6.sin6_port))))
            }
            _ => None,
        }
    }
}

/// Enables UDP GRO on a socket (kernel ≥ 5.0); returns false when unsupported.
pub fn enable_udp_gro(s: &UdpSocket) -> bool {
    set_opt(s.as_raw_fd(), SOL_UDP, UDP_GRO, &(1 as libc::c_int)).is_ok()
}

/// Sets a socket buffer size option (best effort: `SO_*BUFFORCE` needs CAP_NET_ADMIN).
pub fn set_buf(fd: RawFd, force_opt: libc::c_int, opt: libc::c_int, bytes: libc::c_int) {
    for o in [force_opt, opt] {
        if set_opt(fd, libc::SOL_SOCKET, o, &bytes).is_ok() {
            return;
        }
    }
}

/// Control-message space for one `int`/`u16` value (CMSG_SPACE(sizeof(int))).
const CMSG_INT_SPACE: usize = 24;

/// Reusable storage for [`SendBatch`]: kept by the worker so that building a `sendmmsg`
/// call allocates nothing once the vectors have grown to their working size.
#[derive(Default)]
pub struct SendBufs {
    iovs: Vec<libc::iovec>,
    /// Per message: index of its first iovec and its UDP GSO segment size.
    msgs: Vec<(usize, Option<u16>)>,
    cmsgs: Vec<[u64; CMSG_INT_SPACE / 8]>,
    hdrs: Vec<libc::mmsghdr>,
}

impl SendBufs {
    /// Starts an empty batch of datagrams whose payloads borrow data for `'a`.
    pub fn batch<'a>(&mut self) -> SendBatch<'_, 'a> {
        self.iovs.clear();
        self.msgs.clear();
        SendBatch {
            bufs: self,
            _data: PhantomData,
        }
    }
}

/// Datagrams to one destination, sent with one `sendmmsg`. The lifetime `'a` ties the
/// payload slices to the batch, so the raw pointers stored in the iovecs stay valid until
/// [`SendBatch::send`] has returned.
pub struct SendBatch<'s, 'a> {
    bufs: &'s mut SendBufs,
    _data: PhantomData<&'a [u8]>,
}

impl<'a> SendBatch<'_, 'a> {
    /// Starts a new datagram; with `Some(size)` the kernel cuts its payload into datagrams of
    /// `size` bytes (UDP GSO).
    pub fn message(&mut self, gso: Option<u16>) {
        self.bufs.msgs.push((self.bufs.iovs.len(), gso));
    }

    /// Appends `part` to the current datagram's payload.
    pub fn part(&mut self, part: &'a [u8]) {
        self.bufs.iovs.push(iov(part));
    }

    /// Number of datagrams started (a UDP GSO message counts once).
    pub fn messages(&self) -> usize {
        self.bufs.msgs.len()
    }

    /// Sends every datagram to `dest` (retrying until all are sent).
    pub fn send(self, fd: RawFd, dest: &SocketAddr) -> io::Result<()> {
        let b = self.bufs;
        let addr = RawAddr::new(dest);
        let n = b.msgs.len();
        b.cmsgs.clear();
        b.cmsgs.resize(n, [0u64; CMSG_INT_SPACE / 8]);
        b.hdrs.clear();
        // SAFETY: mmsghdr is plain old data; all-zero is a valid value that we then fill in.
        b.hdrs.resize_with(n, || unsafe { zeroed() });
        for i in 0..n {
            let (first, gso) = b.msgs[i];
            let end = b.msgs.get(i + 1).map_or(b.iovs.len(), |m| m.0);
            let h = &mut b.hdrs[i].msg_hdr;
            h.msg_name = (&addr.storage as *const libc::sockaddr_storage
                as *mut libc::sockaddr_storage)
                .cast();
            h.msg_namelen = addr.len;
            h.msg_iov = b.iovs[first..end].as_ptr() as *mut libc::iovec;
            h.msg_iovlen = (end - first) as _;
            if let Some(size) = gso {
                h.msg_control = b.cmsgs[i].as_mut_ptr().cast();
                h.msg_controllen = CMSG_INT_SPACE as _;
                // SAFETY: msg_control points at CMSG_INT_SPACE zeroed, 8-aligned bytes owned
                // by `b.cmsgs`, enough for one cmsghdr carrying a u16; CMSG_FIRSTHDR and
                // CMSG_DATA stay inside that buffer.
                unsafe {
                    let c = libc::CMSG_FIRSTHDR(h);
                    (*c).cmsg_level = SOL_UDP;
                    (*c).cmsg_type = UDP_SEGMENT;
                    (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
                    std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), size);
                    h.msg_controllen = libc::CMSG_SPACE(size_of::<u16>() as u32) as _;
                }
            }
        }
        let mut done = 0;
        while done < n {
            // SAFETY: hdrs[done..] are initialised mmsghdrs whose pointers (address, iovecs in
            // `b.iovs`, control buffers in `b.cmsgs`, payload slices borrowed for 'a) all
            // outlive this call; none of those vectors is resized after the headers were built.
            let r = unsafe { libc::sendmmsg(fd, b.hdrs[done..].as_mut_ptr(), (n - done) as _, 0) };
            match cvt(r) {
                Ok(k) => done += k as usize,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait_writable(fd)?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

fn wait_writable(fd: RawFd) -> io::Result<()> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, nfds = 1.
    cvt(unsafe { libc::poll(&mut p, 1, 100) })?;
    Ok(())
}

/// Receive buffers for `recvmmsg` with UDP GRO.
pub struct RecvBatch {
    bufs: Vec<Vec<u8>>,
    addrs: Vec<RawAddr>,
    iovs: Vec<libc::iovec>,
    cmsgs: Vec<[u64; 8]>,
    hdrs: Vec<libc::mmsghdr>,
}

/// One received datagram (possibly a GRO train of `seg_size`-byte datagrams).
pub struct Datagram<'a> {
    /// The bytes.
    pub data: &'a [u8],
    /// Sender.
    pub from: Option<SocketAddr>,
    /// Size of each coalesced datagram (the last may be shorter); `data.len()` without GRO.
    pub seg_size: usize,
}

impl RecvBatch {
    /// `n` buffers of `size` bytes each.
    pub fn new(n: usize, size: usize) -> RecvBatch {
        RecvBatch {
            bufs: (0..n).map(|_| vec![0u8; size]).collect(),
            addrs: (0..n)
                .map(|_| RawAddr::new(&SocketAddr::from(([0, 0, 0, 0], 0))))
                .collect(),
            iovs: Vec::with_capacity(n),
            cmsgs: vec![[0u64; 8]; n],
            // SAFETY: mmsghdr is plain old data; zero is valid and is filled in before use.
            hdrs: (0..n).map(|_| unsafe { zeroed() }).collect(),
        }
    }

    /// How many datagrams one `recv` can return.
    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }

    /// Receives up to the batch size without blocking; returns how many arrived.
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        self.iovs.clear();
        for b in &mut self.bufs {
            self.iovs.push(libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            });
        }
        for i in 0..self.bufs.len() {
            let h = &mut self.hdrs[i];
            h.msg_len = 0;
            h.msg_hdr.msg_name = (&mut self.addrs[i].storage as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as _;
            h.msg_hdr.msg_iov = &mut self.iovs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = self.cmsgs[i].as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = size_of::<[u64; 8]>() as _;
            h.msg_hdr.msg_flags = 0;
        }
        // SAFETY: every header points at buffers owned by `self` (names, one iovec each over a
        // live Vec, control space) that stay alive and unaliased during the call.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as _,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let n = cvt(n)? as usize;
        for i in 0..n {
            self.addrs[i].len = self.hdrs[i].msg_hdr.msg_namelen;
        }
        Ok(n)
    }

    /// The `i`-th datagram of the last `recv`.
    pub fn get(&self, i: usize) -> Datagram<'_> {
        let h = &self.hdrs[i];
        let len = (h.msg_len as usize).min(self.bufs[i].len());
        let mut seg_size = len;
        let mh = &h.msg_hdr;
        // SAFETY: the kernel filled msg_control/msg_controllen; CMSG_FIRSTHDR/CMSG_NXTHDR walk
        // only within msg_controllen bytes of our control buffer, and we read the int only
        // when the header says it is a UDP_GRO message of sufficient length.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(mh);
            while !c.is_null() {
                if (*c).cmsg_level == SOL_UDP
                    && (*c).cmsg_type == UDP_GRO
                    && (*c).cmsg_len as usize
                        >= libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize
                {
                    let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                    if v > 0 {
                        seg_size = v as usize;
                    }
                }
                c = libc::CMSG_NXTHDR(mh, c);
            }
        }
        Datagram {
            data: &self.bufs[i][..len],
            from: self.addrs[i].to_std(),
            seg_size: seg_size.max(1),
        }
    }
}

/// An AF_PACKET raw socket bound to one NIC, with virtio-net headers, promiscuous, ignoring
/// the frames it sends itself.
pub fn open_packet(device: &str) -> io::Result<OwnedFd> {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: socket() has no memory-safety preconditions; the result is checked.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            proto as libc::c_int,
        )
    })?;
    // SAFETY: fd is fresh and owned here only.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let idx = if_index(device)?;
    let one: libc::c_int = 1;
    for opt in [PACKET_VNET_HDR, PACKET_IGNORE_OUTGOING] {
        set_opt(fd, libc::SOL_PACKET, opt, &one)?;
    }
    // SAFETY: sockaddr_ll is plain old data; zero is valid.
    let mut ll: libc::sockaddr_ll = unsafe { zeroed() };
    ll.sll_family = libc::AF_PACKET as u16;
    ll.sll_protocol = proto;
    ll.sll_ifindex = idx as i32;
    bind_to(fd, &ll)?;
    // SAFETY: packet_mreq is plain old data; zero is valid.
    let mut mr: libc::packet_mreq = unsafe { zeroed() };
    mr.mr_ifindex = idx as i32;
    mr.mr_type = libc::PACKET_MR_PROMISC as u16;
    set_opt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mr)?;
    Ok(sock)
}

/// The network device that holds the IPv4 address `ip`: its name, and whether it is a
/// loopback device. `None` when no device has it.
pub fn device_with_addr(ip: std::net::Ipv4Addr) -> io::Result<Option<(String, bool)>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into a valid pointer; freed below.
    cvt(unsafe { libc::getifaddrs(&mut head) })?;
    let mut found = None;
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: a non-null ifa_addr points at a sockaddr whose family says its type.
        let family = unsafe { (*ifa.ifa_addr).sa_family };
        if family != libc::AF_INET as libc::sa_family_t {
            continue;
        }
        // SAFETY: an AF_INET address is a sockaddr_in.
        let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
        if u32::from_be(sin.sin_addr.s_addr) != u32::from(ip) {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
        let loopback = ifa.ifa_flags & libc::IFF_LOOPBACK as libc::c_uint != 0;
        found = Some((name.to_string_lossy().into_owned(), loopback));
        break;
    }
    // SAFETY: `head` came from getifaddrs and no reference into the list outlives this.
    unsafe { libc::freeifaddrs(head) };
    Ok(found)
}

/// A netlink socket that becomes readable whenever a network device of this namespace is
/// added, changed, removed or moved to another namespace (RTMGRP_LINK). Non-blocking.
pub fn link_events() -> io::Result<OwnedFd> {
    // SAFETY: socket() has no memory-safety preconditions; the result is checked.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    })?;
    // SAFETY: fd is fresh and owned here only.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_nl is plain old data; zero is valid.
    let mut sa: libc::sockaddr_nl = unsafe { zeroed() };
    sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    sa.nl_groups = libc::RTMGRP_LINK as u32;
    bind_to(fd, &sa)?;
    Ok(sock)
}

/// Reads and discards everything queued on a non-blocking socket (at most 64 reads). The
/// link events are only a cue to look again, so their content is not parsed.
pub fn drain(fd: RawFd) {
    let mut buf = [0u8; 8192];
    for _ in 0..64 {
        match read(fd, &mut buf) {
            Ok(_) => {}
            // ENOBUFS: events were lost, which the caller's fresh look covers.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
            Err(_) => break,
        }
    }
}
