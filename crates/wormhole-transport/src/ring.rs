//! A single-producer, single-consumer byte ring in shared memory.
//!
//! Positions are free-running `u64` counters; the index into the data area is
//! the position modulo the (power-of-two) capacity. The producer publishes by
//! storing `head`; the consumer frees space by storing `tail`. A sleeping side
//! announces itself in a `*_waiting` word and sleeps on a futex sequence word,
//! so the other side issues a wake-up system call only when someone sleeps.
//!
//! The producer wakes the consumer only on [`Producer::flush`] (or when it must
//! wait for space, or when a large frame is streaming), which is what lets
//! asynchronous calls pile up in the ring until a synchronisation point.
//!
//! The peer is untrusted: it can write any value into the header at any time.
//! Positions read from the peer are validated on every use, and payload bytes
//! are only ever copied out, never interpreted in place.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::futex;
use crate::TransportError;

/// How a side waits for the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Handoff {
    /// Sleep on a futex at once: no CPU while waiting (the default).
    #[default]
    Futex,
    /// Spin for up to this many polls of the ring, then sleep on the futex.
    Spin { polls: u32 },
    /// Futex, and the server's thread follows the caller onto its CPU, so
    /// that the handler runs where the waiting caller sleeps (warm caches,
    /// no cross-core wake-up).
    SameCore,
}

/// The shared header of one ring; it lives at the start of a page.
#[repr(C, align(64))]
pub struct RingHeader {
    head: AtomicU64,
    _pad0: [u8; 56],
    tail: AtomicU64,
    _pad1: [u8; 56],
    data_seq: AtomicU32,
    consumer_waiting: AtomicU32,
    _pad2: [u8; 56],
    space_seq: AtomicU32,
    producer_waiting: AtomicU32,
    _pad3: [u8; 56],
    /// The CPU the producer last ran on (same-core handoff), plus one; 0 if
    /// never published.
    producer_cpu: AtomicU32,
    _pad4: [u8; 60],
}

/// Bytes reserved for a [`RingHeader`] in a region.
pub const HEADER_BYTES: usize = 4096;
const _: () = assert!(std::mem::size_of::<RingHeader>() <= HEADER_BYTES);

/// Where a ring lives. Both ends are built from the same raw parts.
#[derive(Clone, Copy)]
struct Raw {
    hdr: *const RingHeader,
    data: *mut u8,
    cap: u64,
}

// SAFETY: the pointers refer to a shared mapping that outlives every ring end
// (the owner keeps the mapping alive), and all header access is atomic.
unsafe impl Send for Raw {}

impl Raw {
    /// # Safety
    /// `base` must point to `HEADER_BYTES + cap` bytes of memory, aligned to a
    /// page, that stay mapped for as long as any end built from it lives.
    /// `cap` must be a power of two.
    unsafe fn new(base: *mut u8, cap: usize) -> Self {
        debug_assert!(cap.is_power_of_two());
        Raw {
            hdr: base as *const RingHeader,
            // SAFETY: the caller guarantees HEADER_BYTES + cap bytes.
            data: unsafe { base.add(HEADER_BYTES) },
            cap: cap as u64,
        }
    }

    fn hdr(&self) -> &RingHeader {
        // SAFETY: see `new`; the header is only accessed through atomics.
        unsafe { &*self.hdr }
    }

    /// Bytes readable between our tail and the peer's head, validated.
    fn filled(&self, head: u64, tail: u64) -> Result<u64, TransportError> {
        let n = head.wrapping_sub(tail);
        if n > self.cap {
            return Err(TransportError::Corrupt("ring positions out of range"));
        }
        Ok(n)
    }

    /// Copies `dst.len()` bytes from ring position `pos`.
    fn copy_out(&self, pos: u64, dst: &mut [u8]) {
        let idx = (pos % self.cap) as usize;
        let first = dst.len().min(self.cap as usize - idx);
        // SAFETY: idx + first <= cap and the rest wraps to the start of the
        // data area; dst is private memory. The peer may write concurrently
        // only if it breaks the protocol, and then it only garbles its own
        // bytes, which are treated as untrusted data.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data.add(idx), dst.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(
                self.data,
                dst.as_mut_ptr().add(first),
                dst.len() - first,
            );
        }
    }

    fn copy_in(&self, pos: u64, src: &[u8]) {
        let idx = (pos % self.cap) as usize;
        let first = src.len().min(self.cap as usize - idx);
        // SAFETY: as in `copy_out`, with the roles of the buffers swapped.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.data.add(idx), first);
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), self.data, src.len() - first);
        }
    }
}

/// Checks, while a side waits, whether the peer is still there.
pub type Liveness = Box<dyn Fn() -> bool + Send + Sync>;

/// How long a waiter sleeps before it checks the peer's liveness.
const LIVENESS_PERIOD: Duration = Duration::from_millis(200);

fn sleep_on(
    seq: &AtomicU32,
    waiting: &AtomicU32,
    ready: impl Fn() -> bool,
    alive: Option<&Liveness>,
) -> Result<(), TransportError> {
    loop {
        let s = seq.load(Ordering::Acquire);
        waiting.store(1, Ordering::SeqCst);
        if ready() {
            waiting.store(0, Ordering::Relaxed);
            return Ok(());
        }
        let r = futex::wait(seq, s, alive.map(|_| LIVENESS_PERIOD));
        waiting.store(0, Ordering::Relaxed);
        if ready() {
            return Ok(());
        }
        if r == futex::Wait::TimedOut {
            if let Some(alive) = alive {
                if !alive() {
                    return Err(TransportError::PeerGone);
                }
            }
        }
    }
}

/// The writing end of a ring.
pub struct Producer {
    raw: Raw,
    head: u64,
    since_wake: u64,
    handoff: Handoff,
    alive: Option<Liveness>,
}

impl Producer {
    /// # Safety
    /// As for the ring's memory in [`crate::shm`]: `base` must map
    /// `HEADER_BYTES + cap` bytes that outlive the producer, `cap` a power of
    /// two, and at most one producer may exist per ring.
    pub(crate) unsafe fn new(
        base: *mut u8,
        cap: usize,
        handoff: Handoff,
        alive: Option<Liveness>,
    ) -> Self {
        // SAFETY: forwarded from the caller.
        let raw = unsafe { Raw::new(base, cap) };
        let head = raw.hdr().head.load(Ordering::Acquire);
        Producer {
            raw,
            head,
            since_wake: 0,
            handoff,
            alive,
        }
    }

    /// Writes all of `src`, waiting for space as needed; does not wake the
    /// consumer unless it has to.
    pub fn write_all(&mut self, mut src: &[u8]) -> Result<(), TransportError> {
        while !src.is_empty() {
            let tail = self.raw.hdr().tail.load(Ordering::Acquire);
            let free = self.raw.cap - self.raw.filled(self.head, tail)?;
            if free == 0 {
                self.flush();
                self.wait_space()?;
                continue;
            }
            let n = (free as usize).min(src.len());
            self.raw.copy_in(self.head, &src[..n]);
            self.head += n as u64;
            self.raw.hdr().head.store(self.head, Ordering::Release);
            src = &src[n..];
            self.since_wake += n as u64;
            // A large frame streams: let the consumer start on it early.
            if self.since_wake >= self.raw.cap / 4 {
                self.flush();
            }
        }
        Ok(())
    }

    /// Wakes the consumer if it sleeps.
    pub fn flush(&mut self) {
        self.since_wake = 0;
        let h = self.raw.hdr();
        if self.handoff == Handoff::SameCore {
            // SAFETY: sched_getcpu has no preconditions.
            let cpu = unsafe { libc::sched_getcpu() };
            if cpu >= 0 {
                h.producer_cpu.store(cpu as u32 + 1, Ordering::Relaxed);
            }
        }
        fence(Ordering::SeqCst);
        if h.consumer_waiting.load(Ordering::SeqCst) != 0 {
            h.data_seq.fetch_add(1, Ordering::SeqCst);
            futex::wake(&h.data_seq, 1);
        }
    }

    fn wait_space(&mut self) -> Result<(), TransportError> {
        let raw = self.raw;
        let head = self.head;
        let ready = move || raw.hdr().tail.load(Ordering::SeqCst) != head.wrapping_sub(raw.cap);
        if let Handoff::Spin { polls } = self.handoff {
            for _ in 0..polls {
                if ready() {
                    return Ok(());
                }
                std::hint::spin_loop();
            }
        }
        let h = raw.hdr();
        sleep_on(
            &h.space_seq,
            &h.producer_waiting,
            ready,
            self.alive.as_ref(),
        )
    }
}

/// The reading end of a ring.
pub struct Consumer {
    raw: Raw,
    tail: u64,
    handoff: Handoff,
    alive: Option<Liveness>,
    /// The CPU this thread is pinned to (same-core handoff), plus one.
    pinned: u32,
}

impl Consumer {
    /// # Safety
    /// As for [`Producer::new`], with at most one consumer per ring.
    pub(crate) unsafe fn new(
        base: *mut u8,
        cap: usize,
        handoff: Handoff,
        alive: Option<Liveness>,
    ) -> Self {
        // SAFETY: forwarded from the caller.
        let raw = unsafe { Raw::new(base, cap) };
        let tail = raw.hdr().tail.load(Ordering::Acquire);
        Consumer {
            raw,
            tail,
            handoff,
            alive,
            pinned: 0,
        }
    }

    /// Fills `dst` completely, waiting for the producer as needed.
    pub fn read_exact(&mut self, mut dst: &mut [u8]) -> Result<(), TransportError> {
        while !dst.is_empty() {
            let head = self.raw.hdr().head.load(Ordering::Acquire);
            let avail = self.raw.filled(head, self.tail)?;
            if avail == 0 {
                self.wait_data()?;
                continue;
            }
            let n = (avail as usize).min(dst.len());
            let (now, rest) = dst.split_at_mut(n);
            self.raw.copy_out(self.tail, now);
            self.tail += n as u64;
            dst = rest;
            let h = self.raw.hdr();
            h.tail.store(self.tail, Ordering::Release);
            fence(Ordering::SeqCst);
            if h.producer_waiting.load(Ordering::SeqCst) != 0 {
                h.space_seq.fetch_add(1, Ordering::SeqCst);
                futex::wake(&h.space_seq, 1);
            }
        }
        Ok(())
    }

    fn wait_data(&mut self) -> Result<(), TransportError> {
        let raw = self.raw;
        let tail = self.tail;
        let ready = move || raw.hdr().head.load(Ordering::SeqCst) != tail;
        if let Handoff::Spin { polls } = self.handoff {
            for _ in 0..polls {
                if ready() {
                    return Ok(());
                }
                std::hint::spin_loop();
            }
        }
        let h = raw.hdr();
        sleep_on(&h.data_seq, &h.consumer_waiting, ready, self.alive.as_ref())?;
        if self.handoff == Handoff::SameCore {
            self.follow_producer();
        }
        Ok(())
    }

    /// Moves this thread onto the CPU the producer published, if it moved.
    /// The value is the peer's to write: any CPU number is harmless, and an
    /// impossible one only makes the affinity call fail.
    fn follow_producer(&mut self) {
        let cpu = self.raw.hdr().producer_cpu.load(Ordering::Relaxed);
        if cpu == 0 || cpu == self.pinned || cpu > libc::CPU_SETSIZE as u32 {
            return;
        }
        let mut set = nix::sched::CpuSet::new();
        if set.set(cpu as usize - 1).is_ok()
            && nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).is_ok()
        {
            self.pinned = cpu;
        }
    }
}
