//! A single-producer, single-consumer ring of records in shared memory.
//!
//! Positions are free-running `u64` byte counters; the index into the data
//! area is the position modulo the (power-of-two) capacity. Each record is an
//! 8-byte header word (a mark and the payload length) followed by the
//! payload, padded so that the next record starts on a cache line. The
//! producer copies the payload, zeroes the
//! header word where the *next* record will start, and only then publishes
//! the record by storing its header (release). So the consumer learns that
//! data has arrived by polling the header word in front of it, which shares
//! a cache line with a small record's payload (records start on a line): a
//! small call crosses between CPUs as one cache line, as a raw ping-pong
//! does, with no separate head counter to fetch. The consumer gives space
//! back by storing `tail`, not after every record but when a quarter of the
//! ring is waiting to be given back or before it waits for data, so the
//! store and its fence stay off a call's critical path; the producer reads
//! `tail` only when its cached copy says the ring is too full (and it can
//! only wait for space when the ring is full, which makes the consumer give
//! space back before it runs dry).
//!
//! A sleeping side announces itself in a `*_waiting` word and sleeps on a
//! futex sequence word, so the other side issues a wake-up system call only
//! when someone sleeps. The producer wakes the consumer only on
//! [`Producer::flush`] (or when it must wait for space, or when a large frame
//! is streaming), which is what lets asynchronous calls pile up in the ring
//! until a synchronisation point.
//!
//! The peer is untrusted: it can write any value anywhere in the ring at any
//! time. Record headers and the peer's `tail` are validated on every use,
//! and payload bytes are only ever copied out, never interpreted in place.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::copy::{copy_bulk, copy_bulk_uncached};
use crate::futex;
use crate::TransportError;

/// How a side waits for the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Handoff {
    /// Sleep on a futex at once: no CPU while waiting (the default).
    #[default]
    Futex,
    /// Spin for up to this many polls of the ring, then sleep on the futex.
    /// Each consumer adapts its own budget below this: halved after a wait
    /// that outlasted it, doubled after one that ended while spinning.
    Spin { polls: u32 },
    /// Futex, and the server's thread follows the caller onto its CPU, so
    /// that the handler runs where the waiting caller sleeps (warm caches,
    /// no cross-core wake-up).
    SameCore,
}

/// The shared header of one ring; it lives at the start of a page. Each
/// word another CPU writes has a cache line of its own.
#[repr(C, align(64))]
pub struct RingHeader {
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

/// The high half of every record header: a zeroed word (no record yet) can
/// never pass for one, and a stray value rarely does.
const MARK: u64 = 0x5748_5243 << 32; // "WHRC"
/// Bytes of a record header.
const REC_HDR: u64 = 8;

/// The header word of a record of `len` payload bytes, for tools that write
/// a ring by hand (tests that play a hostile client).
pub fn record_header(len: u32) -> u64 {
    MARK | len as u64
}

/// Where the futex word a producer bumps to wake the consumer lies in a
/// ring's header page (for the same tools).
pub const DATA_SEQ_OFFSET: usize = std::mem::offset_of!(RingHeader, data_seq);

/// Records start on a cache line: a call of up to 56 bytes (with its
/// length prefix) is one line, header included, and costs one transfer.
const REC_ALIGN: u64 = 64;

/// Ring bytes a record of `len` payload bytes occupies.
fn record_size(len: u64) -> u64 {
    (REC_HDR + len).div_ceil(REC_ALIGN) * REC_ALIGN
}

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
    /// `cap` must be a power of two of at least 64.
    unsafe fn new(base: *mut u8, cap: usize) -> Self {
        debug_assert!(cap.is_power_of_two() && cap >= 64);
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

    /// The record header word at position `pos` (a multiple of 8).
    #[inline]
    fn word(&self, pos: u64) -> &AtomicU64 {
        debug_assert!(pos & 7 == 0);
        let idx = (pos & (self.cap - 1)) as usize;
        // SAFETY: idx + 8 <= cap because idx and cap are multiples of 8; the
        // data area starts a page into the mapping, so the word is aligned.
        // Header words are accessed atomically by both ends; the peer can
        // only garble its own records, which are validated when read.
        unsafe { &*(self.data.add(idx) as *const AtomicU64) }
    }

    /// Stores `v`, little-endian, as the payload word at `pos` (a multiple
    /// of 8); the record's header, stored after it with release ordering,
    /// publishes it.
    #[inline]
    fn put_word(&self, pos: u64, v: u64) {
        debug_assert!(pos & 7 == 0);
        let idx = (pos & (self.cap - 1)) as usize;
        // SAFETY: in bounds and aligned as in `word`; the consumer reads
        // these bytes only after the header's release store.
        unsafe { (self.data.add(idx) as *mut u64).write(v.to_le()) };
    }

    /// Copies `dst.len()` bytes from ring position `pos`, bypassing the
    /// cache when `uncached`.
    #[inline]
    fn copy_out(&self, pos: u64, dst: &mut [u8], uncached: bool) {
        let copy = if uncached {
            copy_bulk_uncached
        } else {
            copy_bulk
        };
        // SAFETY: `dst` is writable for its length; both copies have
        // `copy_bulk`'s contract.
        unsafe { self.copy_out_with(copy, pos, dst.as_mut_ptr(), dst.len()) };
    }

    /// Replaces `buf`'s contents with `len` bytes from ring position `pos`
    /// (`len` at most the capacity), without zeroing them first.
    #[inline]
    fn copy_out_to_vec(&self, pos: u64, len: usize, buf: &mut Vec<u8>) {
        buf.clear();
        buf.reserve(len);
        // SAFETY: after `reserve`, `buf` has room for `len` bytes, which the
        // copy writes in full before `set_len` makes them part of it.
        unsafe {
            self.copy_out_raw(pos, buf.as_mut_ptr(), len);
            buf.set_len(len);
        }
    }

    /// Copies `len` bytes (at most the capacity) from ring position `pos`
    /// to `dst`.
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes and private to this side.
    #[inline]
    unsafe fn copy_out_raw(&self, pos: u64, dst: *mut u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.copy_out_with(copy_bulk, pos, dst, len) }
    }

    /// [`Raw::copy_out_raw`] with `copy` doing the copying.
    ///
    /// # Safety
    /// As for [`Raw::copy_out_raw`], and `copy` has [`copy_bulk`]'s contract.
    #[inline(always)]
    unsafe fn copy_out_with(
        &self,
        copy: unsafe fn(*mut u8, *const u8, usize),
        pos: u64,
        dst: *mut u8,
        len: usize,
    ) {
        let idx = (pos & (self.cap - 1)) as usize;
        let first = len.min(self.cap as usize - idx);
        // SAFETY: idx + first <= cap and the rest wraps to the start of the
        // data area (callers copy at most cap bytes); dst is the caller's.
        // The peer may write concurrently only if it breaks the protocol, and
        // then it only garbles its own bytes, which are treated as untrusted
        // data.
        unsafe {
            copy(dst, self.data.add(idx), first);
            if first < len {
                copy(dst.add(first), self.data, len - first);
            }
        }
    }

    #[inline]
    fn copy_in(&self, pos: u64, src: &[u8]) {
        let idx = (pos & (self.cap - 1)) as usize;
        let first = src.len().min(self.cap as usize - idx);
        // SAFETY: as in `copy_out`, with the roles of the buffers swapped.
        unsafe {
            copy_bulk(self.data.add(idx), src.as_ptr(), first);
            if first < src.len() {
                copy_bulk(self.data, src.as_ptr().add(first), src.len() - first);
            }
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

/// Wakes a ring's consumer if it sleeps, after what was published.
fn wake_consumer(h: &RingHeader) {
    fence(Ordering::SeqCst);
    if h.consumer_waiting.load(Ordering::SeqCst) != 0 {
        h.data_seq.fetch_add(1, Ordering::SeqCst);
        futex::wake(&h.data_seq, 1);
    }
}

/// A record [`Producer::write_frame_held`] wrote and left for another
/// thread to publish: a reply that the event it waits for completes,
/// from the library's thread, one thread hop sooner than the producer's
/// own thread could. The writer's stores must happen before `publish`
/// (hand the record over through a lock or another release/acquire pair).
pub struct HeldRecord {
    raw: Raw,
    at: u64,
    header: u64,
}

impl HeldRecord {
    /// The held frame's length.
    pub fn frame_len(&self) -> u64 {
        // The record holds the frame's length word, then the frame.
        (self.header & 0xffff_ffff).saturating_sub(8)
    }

    /// Overwrites frame bytes from `offset` on (an answer learnt while it
    /// was held); a patch beyond the frame's end is ignored.
    pub fn patch(&mut self, offset: u64, bytes: &[u8]) {
        if offset.saturating_add(bytes.len() as u64) <= self.frame_len() {
            self.raw.copy_in(self.at + REC_HDR + 8 + offset, bytes);
        }
    }

    /// Makes the record visible and wakes the consumer if it sleeps.
    pub fn publish(self) {
        self.raw.word(self.at).store(self.header, Ordering::Release);
        wake_consumer(self.raw.hdr());
    }
}

/// Records after which a producer wakes a sleeping consumer without
/// waiting for a flush. A batch of deferred calls (two records per kernel
/// launch) longer than this is started on while it is still being written;
/// a short one still costs one wake-up, at its synchronisation point. Once
/// awake, the consumer usually stays busy to the end of the batch (running
/// a call costs it more than writing one costs us), and waking an awake
/// consumer is a fence and a load, not a system call.
const EARLY_WAKE_RECORDS: u32 = 32;

/// The writing end of a ring.
pub struct Producer {
    raw: Raw,
    /// Where the next record's header goes; always zero in the ring.
    head: u64,
    /// The consumer's `tail` as last read: the producer looks again only
    /// when this says the ring is too full.
    tail: u64,
    /// The largest payload of one record: a large write is cut into
    /// records so that the consumer can start on the first while the
    /// producer writes the next.
    max_record: u64,
    /// A header slot already zeroed ahead of need (see `write_parts`).
    prezeroed: Option<u64>,
    /// Bytes and records published since the consumer was last woken.
    since_wake: u64,
    records_since_wake: u32,
    handoff: Handoff,
    alive: Option<Liveness>,
}

impl Producer {
    /// # Safety
    /// As for the ring's memory in [`crate::shm`]: `base` must map
    /// `HEADER_BYTES + cap` bytes that outlive the producer, `cap` a power of
    /// two of at least 64, and at most one producer may exist per ring.
    pub(crate) unsafe fn new(
        base: *mut u8,
        cap: usize,
        handoff: Handoff,
        alive: Option<Liveness>,
    ) -> Self {
        // SAFETY: forwarded from the caller.
        let raw = unsafe { Raw::new(base, cap) };
        let tail = raw.hdr().tail.load(Ordering::Acquire);
        Producer {
            raw,
            head: tail,
            tail,
            max_record: raw.cap / 8,
            prezeroed: None,
            since_wake: 0,
            records_since_wake: 0,
            handoff,
            alive,
        }
    }

    /// Writes all of `src`, waiting for space as needed; does not wake the
    /// consumer unless it has to.
    pub fn write_all(&mut self, src: &[u8]) -> Result<(), TransportError> {
        self.write_parts(&[src])
    }

    /// Writes the concatenation of `parts`: as one record when it fits (a
    /// call and its length prefix cross as one), else as several.
    pub fn write_parts(&mut self, parts: &[&[u8]]) -> Result<(), TransportError> {
        let mut total: u64 = parts.iter().map(|p| p.len() as u64).sum();
        let (mut part, mut off) = (0usize, 0usize);
        while total > 0 {
            let len = total.min(self.max_record);
            self.reserve(record_size(len) + REC_HDR)?;
            let mut pos = self.head + REC_HDR;
            let mut left = len as usize;
            while left > 0 {
                let p = parts.get(part).map_or(&[][..], |p| &p[off..]);
                let n = p.len().min(left);
                self.raw.copy_in(pos, &p[..n]);
                pos += n as u64;
                left -= n;
                off += n;
                if off == parts.get(part).map_or(0, |p| p.len()) {
                    part += 1;
                    off = 0;
                }
            }
            self.publish_record(len);
            total -= len;
        }
        Ok(())
    }

    /// Writes a frame behind its length (a little-endian u64): one record,
    /// what a call is. Same as `write_parts` with the two, without its
    /// general loop.
    pub fn write_frame(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        let len = frame.len() as u64 + 8;
        if len > self.max_record {
            return self.write_parts(&[&(frame.len() as u64).to_le_bytes(), frame]);
        }
        self.put_frame(frame, len)?;
        self.publish_record(len);
        Ok(())
    }

    /// Writes `frame` behind its length into the record at `head` (`len`
    /// payload bytes, at most a record's), waiting for room; publishes
    /// nothing.
    #[inline]
    fn put_frame(&mut self, frame: &[u8], len: u64) -> Result<(), TransportError> {
        let need = record_size(len) + REC_HDR;
        // The common case checked here, inline; `reserve` looks again and
        // waits when the ring is full.
        if self.free(self.tail)? < need {
            self.reserve(need)?;
        }
        let pos = self.head + REC_HDR;
        // The prefix is one aligned word (records start on cache lines):
        // stored as such, not copied byte by byte.
        self.raw.put_word(pos, frame.len() as u64);
        self.raw.copy_in(pos + 8, frame);
        Ok(())
    }

    /// Ends the record of `len` payload bytes written at `head`: the next
    /// header reads as empty, and `head` moves past the record. Returns
    /// where it starts, for the header store that publishes it.
    #[inline]
    fn close_record(&mut self, len: u64) -> u64 {
        let at = self.head;
        let next = at + record_size(len);
        // The next header must read as empty before this one is seen.
        // Zeroing it needs its line, which the consumer read a lap ago,
        // and stores become visible in order: done here, it would delay
        // the record. So `publish_record` does it one record early, off the
        // critical path, and it is done here only when that guess missed.
        if self.prezeroed != Some(next) {
            self.raw.word(next).store(0, Ordering::Relaxed);
        }
        self.head = next;
        at
    }

    /// Writes a frame as [`Producer::write_frame`] does, but leaves its
    /// record unpublished: the consumer sees it only once the returned
    /// [`HeldRecord`] is published, from any thread. Until then nothing more
    /// may be written to this ring (the records behind it would wait for it
    /// unseen). `None` when the frame is more than one record; nothing is
    /// written then.
    pub fn write_frame_held(&mut self, frame: &[u8]) -> Result<Option<HeldRecord>, TransportError> {
        let len = frame.len() as u64 + 8;
        if len > self.max_record {
            return Ok(None);
        }
        self.put_frame(frame, len)?;
        let at = self.close_record(len);
        self.prezeroed = None;
        Ok(Some(HeldRecord {
            raw: self.raw,
            at,
            header: record_header(len as u32),
        }))
    }

    /// Publishes the record of `len` payload bytes just written at `head`.
    #[inline]
    fn publish_record(&mut self, len: u64) {
        let at = self.close_record(len);
        let next = self.head;
        // len <= max_record, a fraction of a ring of at most 4 GiB.
        self.raw
            .word(at)
            .store(record_header(len as u32), Ordering::Release);
        // Where the next record ends if it is small: zero it now, while
        // the peer works, if that space is free.
        let ahead = next + REC_ALIGN;
        self.prezeroed = None;
        if ahead + REC_HDR - self.tail <= self.raw.cap {
            self.raw.word(ahead).store(0, Ordering::Relaxed);
            self.prezeroed = Some(ahead);
        }
        self.since_wake += len;
        self.records_since_wake += 1;
        // A large frame streams, and a long batch of calls is worked on
        // while we write the rest of it: either way the consumer is woken
        // early, so that its wake-up overlaps our writing instead of
        // following it. Not in same-core mode, where it would run on our
        // CPU and only preempt us.
        if self.since_wake >= self.raw.cap / 4
            || (self.records_since_wake == EARLY_WAKE_RECORDS && self.handoff != Handoff::SameCore)
        {
            self.flush();
        }
    }

    /// Free bytes according to a `tail` read from the peer, validated.
    #[inline]
    fn free(&self, tail: u64) -> Result<u64, TransportError> {
        let used = self.head.wrapping_sub(tail);
        if used > self.raw.cap || tail & 7 != 0 {
            return Err(TransportError::Corrupt("ring tail out of range"));
        }
        Ok(self.raw.cap - used)
    }

    /// Waits until `need` bytes from `head` are free.
    fn reserve(&mut self, need: u64) -> Result<(), TransportError> {
        loop {
            if self.free(self.tail)? >= need {
                return Ok(());
            }
            let tail = self.raw.hdr().tail.load(Ordering::Acquire);
            if tail != self.tail {
                self.free(tail)?;
                self.tail = tail;
                continue;
            }
            self.flush();
            self.wait_space(need)?;
        }
    }

    /// Wakes the consumer if it sleeps.
    pub fn flush(&mut self) {
        self.since_wake = 0;
        self.records_since_wake = 0;
        let h = self.raw.hdr();
        if self.handoff == Handoff::SameCore {
            // SAFETY: sched_getcpu has no preconditions.
            let cpu = unsafe { libc::sched_getcpu() };
            if cpu >= 0 {
                h.producer_cpu.store(cpu as u32 + 1, Ordering::Relaxed);
            }
        }
        wake_consumer(h);
    }

    fn wait_space(&mut self, need: u64) -> Result<(), TransportError> {
        let raw = self.raw;
        let head = self.head;
        // Also ready when the tail is out of range, for `reserve` to report.
        let ready = move || {
            let used = head.wrapping_sub(raw.hdr().tail.load(Ordering::SeqCst));
            used > raw.cap || raw.cap - used >= need
        };
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

/// Reads of at least this many bytes (one bulk transfer) are copied out
/// of the ring with stores that bypass the cache (see
/// [`copy_bulk_uncached`]): it is the size from which a native copy does so
/// too (glibc's threshold is three quarters of the last-level cache, a few
/// MiB to a few tens of MiB).
const UNCACHED_READS: usize = 16 << 20;

/// The reading end of a ring.
pub struct Consumer {
    raw: Raw,
    /// Where the current record starts (or the next, between records).
    tail: u64,
    /// The `tail` the producer has been told.
    published: u64,
    /// The next payload byte to read, how many the record has left, and
    /// where the next record starts.
    pos: u64,
    left: u64,
    next: u64,
    handoff: Handoff,
    alive: Option<Liveness>,
    /// Same-core handoff: keeps this thread on the producer's CPU.
    follower: crate::pin::Follower,
    /// Same-core handoff, the caller's end: hold this CPU while asleep.
    hold_cpu: bool,
    /// Polls the next wait may spin (spin handoff), adapted to how waits
    /// have been ending.
    spin_budget: u32,
}

/// The fewest polls an adaptive spin keeps: enough to notice that waits
/// have become short again, a few microseconds at most.
const MIN_SPIN: u32 = 64;

/// The next spin budget after a wait that spun `budget` polls: doubled (up
/// to `max`) when the data came while spinning, halved (down to
/// [`MIN_SPIN`]) when it did not and the thread had to sleep. Waits that
/// outlast the spin, such as a `clFinish` on a long batch, so stop burning a
/// CPU the device's own threads need, while short round trips keep the
/// whole spin.
fn adapt_spin(budget: u32, max: u32, arrived: bool) -> u32 {
    let floor = MIN_SPIN.min(max);
    if arrived {
        budget.saturating_mul(2).clamp(floor, max)
    } else {
        (budget / 2).clamp(floor, max)
    }
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
            published: tail,
            pos: tail,
            left: 0,
            next: tail,
            handoff,
            alive,
            follower: crate::pin::Follower::default(),
            hold_cpu: false,
            spin_budget: match handoff {
                Handoff::Spin { polls } => polls,
                _ => 0,
            },
        }
    }

    /// Fills `dst` completely, waiting for the producer as needed.
    pub fn read_exact(&mut self, mut dst: &mut [u8]) -> Result<(), TransportError> {
        // A destination this large would not stay in cache anyway.
        let uncached = dst.len() >= UNCACHED_READS;
        loop {
            let n = self.read_some(dst, uncached)?;
            dst = &mut dst[n..];
            if dst.is_empty() {
                return Ok(());
            }
            self.wait_data()?;
        }
    }

    /// Reads one frame that [`Producer::write_frame`] wrote (its length,
    /// then its bytes) into `buf`, waiting as needed, refusing a length
    /// above `max`. A frame that is one record, as every call is, is read
    /// in one pass; any other goes through `fallback`, which reads the
    /// same bytes with [`Consumer::read_exact`].
    pub fn read_frame(
        &mut self,
        max: u64,
        buf: &mut Vec<u8>,
        fallback: impl FnOnce(&mut Self, &mut Vec<u8>) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        while self.left == 0 && !self.next_record()? {
            self.wait_data()?;
        }
        if self.pos & 7 != 0 || self.left < 8 {
            return fallback(self, buf);
        }
        // The prefix is one aligned word, as `write_frame` stores it.
        let n = u64::from_le(self.raw.word(self.pos).load(Ordering::Relaxed));
        if n > max {
            return Err(TransportError::FrameTooLarge { len: n, max });
        }
        if self.left != n + 8 {
            return fallback(self, buf);
        }
        // n <= max, and a record is a fraction of the ring: it fits.
        self.raw.copy_out_to_vec(self.pos + 8, n as usize, buf);
        self.pos += self.left;
        self.left = 0;
        self.release();
        Ok(())
    }

    /// Copies into `dst` what has arrived, up to its length, without
    /// waiting; returns the number of bytes copied.
    pub fn try_read(&mut self, dst: &mut [u8]) -> Result<usize, TransportError> {
        self.read_some(dst, false)
    }

    fn read_some(&mut self, dst: &mut [u8], uncached: bool) -> Result<usize, TransportError> {
        let mut done = 0;
        while done < dst.len() {
            if self.left == 0 && !self.next_record()? {
                break;
            }
            let n = self.left.min((dst.len() - done) as u64) as usize;
            self.raw
                .copy_out(self.pos, &mut dst[done..done + n], uncached);
            self.pos += n as u64;
            self.left -= n as u64;
            done += n;
            if self.left == 0 {
                self.release();
            }
        }
        Ok(done)
    }

    /// Opens the record at `tail`, if one has been published.
    fn next_record(&mut self) -> Result<bool, TransportError> {
        let w = self.raw.word(self.tail).load(Ordering::Acquire);
        if w == 0 {
            return Ok(false);
        }
        let len = w & 0xffff_ffff;
        // The record and the next header must fit in the ring.
        if w & !0xffff_ffff != MARK || len == 0 || record_size(len) + REC_HDR > self.raw.cap {
            return Err(TransportError::Corrupt("bad record header"));
        }
        self.pos = self.tail + REC_HDR;
        self.left = len;
        self.next = self.tail + record_size(len);
        Ok(true)
    }

    /// Finishes a record: its space is given back now if a quarter of the
    /// ring is waiting to be, else before the next wait.
    fn release(&mut self) {
        self.tail = self.next;
        if self.tail - self.published >= self.raw.cap / 4 {
            self.publish();
        }
    }

    /// Tells the producer how far we have read, and wakes it if it waits
    /// for space.
    fn publish(&mut self) {
        if self.published == self.tail {
            return;
        }
        self.published = self.tail;
        let h = self.raw.hdr();
        h.tail.store(self.tail, Ordering::Release);
        fence(Ordering::SeqCst);
        if h.producer_waiting.load(Ordering::SeqCst) != 0 {
            h.space_seq.fetch_add(1, Ordering::SeqCst);
            futex::wake(&h.space_seq, 1);
        }
    }

    /// Waits at most `timeout` for a record to arrive; returns whether one
    /// is there. No spin and no same-core move: for a waiter that has
    /// something else to check now and then.
    pub fn wait_data_for(&mut self, timeout: Duration) -> Result<bool, TransportError> {
        if self.left > 0 {
            return Ok(true);
        }
        self.publish();
        let raw = self.raw;
        let tail = self.tail;
        let ready = || raw.word(tail).load(Ordering::Acquire) != 0;
        let h = raw.hdr();
        let s = h.data_seq.load(Ordering::Acquire);
        h.consumer_waiting.store(1, Ordering::SeqCst);
        if !ready() {
            futex::wait(&h.data_seq, s, Some(timeout));
        }
        h.consumer_waiting.store(0, Ordering::Relaxed);
        Ok(ready())
    }

    fn wait_data(&mut self) -> Result<(), TransportError> {
        // The producer may be waiting for the space we hold.
        self.publish();
        let raw = self.raw;
        let tail = self.tail;
        let ready = move || raw.word(tail).load(Ordering::Acquire) != 0;
        if let Handoff::Spin { polls } = self.handoff {
            let budget = self.spin_budget;
            for _ in 0..budget {
                if ready() {
                    if budget < polls {
                        self.spin_budget = adapt_spin(budget, polls, true);
                    }
                    return Ok(());
                }
                std::hint::spin_loop();
            }
            self.spin_budget = adapt_spin(budget, polls, false);
        }
        let h = raw.hdr();
        if self.hold_cpu && !ready() {
            let alive = self.alive.as_ref();
            crate::pin::hold_cpu_while(|| {
                sleep_on(&h.data_seq, &h.consumer_waiting, ready, alive)
            })?;
        } else {
            sleep_on(&h.data_seq, &h.consumer_waiting, ready, self.alive.as_ref())?;
        }
        if self.handoff == Handoff::SameCore {
            self.follow_producer();
        }
        Ok(())
    }

    /// Same-core handoff, the caller's end: sleep on the CPU this thread
    /// runs on, so that the answer wakes it there.
    pub(crate) fn hold_cpu_while_waiting(&mut self) {
        self.hold_cpu = true;
    }

    /// Moves this thread onto the CPU the producer published, if it moved.
    fn follow_producer(&mut self) {
        let cpu = self.raw.hdr().producer_cpu.load(Ordering::Relaxed);
        self.follower.follow(cpu);
    }
}

/// A ring's consumer over memory a hostile producer filled, without a
/// peer: what the fuzzer drives.
pub mod harness {
    use super::{Consumer, Handoff, HEADER_BYTES};
    use crate::TransportError;
    use std::sync::atomic::Ordering;

    /// A page of ring memory, page-aligned as a mapping would be.
    #[repr(C, align(4096))]
    pub(super) struct Page(pub(super) [u8; 4096]);

    /// Data bytes of the harness's ring.
    pub const CAP: usize = 4096;

    /// Lays `image` over a ring's data area and reads it with `reads`
    /// (the sizes of successive non-blocking reads; 0 reads a frame whose
    /// length prefix and bytes are one record); returns what was read.
    pub fn read_image(image: &[u8], reads: &[u16]) -> Result<Vec<u8>, TransportError> {
        let mut mem = vec![Page([0; 4096]), Page([0; 4096])];
        const _: () = assert!(HEADER_BYTES == 4096);
        let n = image.len().min(CAP);
        mem[1].0[..n].copy_from_slice(&image[..n]);
        let base = mem.as_mut_ptr() as *mut u8;
        // SAFETY: `mem` is HEADER_BYTES + CAP bytes, page aligned, and
        // outlives the consumer, the only end built on it.
        let mut c = unsafe { Consumer::new(base, CAP, Handoff::Futex, None) };
        let mut out = Vec::new();
        for &r in reads {
            if r == 0 {
                // A frame through `read_frame`, if a record is there to
                // read it from: the harness never waits.
                if c.left == 0 && c.raw.word(c.tail).load(Ordering::Acquire) == 0 {
                    continue;
                }
                let mut f = Vec::new();
                c.read_frame(CAP as u64, &mut f, |_, _| Ok(()))?;
                out.extend_from_slice(&f);
                continue;
            }
            let mut buf = vec![0u8; r as usize];
            let got = c.try_read(&mut buf)?;
            out.extend_from_slice(&buf[..got]);
        }
        drop(c);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::harness::Page;
    use super::*;

    #[test]
    fn spin_budget_shrinks_on_long_waits_and_recovers_on_short_ones() {
        let max = 20_000;
        let mut b = max;
        for _ in 0..20 {
            b = adapt_spin(b, max, false);
        }
        assert_eq!(b, MIN_SPIN, "long waits leave only the floor");
        let mut steps = 0;
        while b < max {
            b = adapt_spin(b, max, true);
            steps += 1;
        }
        assert_eq!(b, max, "never above the configured spin");
        assert!(
            steps <= 9,
            "short waits win the spin back quickly ({steps})"
        );
        assert_eq!(adapt_spin(0, 0, false), 0, "no spin configured, none done");
        assert_eq!(
            adapt_spin(10, 10, false),
            10,
            "a spin below the floor is kept"
        );
    }

    /// A ring of one data page, and a producer and consumer on it.
    fn ring(handoff: Handoff) -> (Vec<Page>, Producer, Consumer) {
        let mut mem: Vec<Page> = (0..2).map(|_| Page([0; 4096])).collect();
        let base = mem.as_mut_ptr() as *mut u8;
        // SAFETY: two pages, page aligned, kept alive by the caller for as
        // long as the ends (the Vec's heap block does not move).
        let (p, c) = unsafe {
            (
                Producer::new(base, 4096, handoff, None),
                Consumer::new(base, 4096, handoff, None),
            )
        };
        (mem, p, c)
    }

    /// Bytes whose every word is a valid-looking record header: if the
    /// consumer ever took stale payload for a header, the stream would
    /// garble or the test would fail on a length.
    fn header_lookalikes(n: usize, seed: u64) -> Vec<u8> {
        (0..n)
            .map(|i| ((MARK | (1 + (i as u64 + seed) % 300)) >> ((i % 8) * 8)) as u8)
            .collect()
    }

    /// A long batch wakes a sleeping consumer before its flush, once per
    /// `EARLY_WAKE_RECORDS` records; same-core never does (the consumer
    /// would run on the producer's CPU and only preempt it).
    #[test]
    #[cfg_attr(miri, ignore = "Miri has no sched_getcpu")]
    fn a_long_batch_wakes_a_sleeping_consumer_early() {
        for (handoff, wakes) in [
            (Handoff::Futex, true),
            (Handoff::Spin { polls: 10 }, true),
            (Handoff::SameCore, false),
        ] {
            let (_mem, mut p, _c) = ring(handoff);
            let raw = p.raw;
            let h = raw.hdr();
            // What a consumer leaves behind when it goes to sleep.
            h.consumer_waiting.store(1, Ordering::SeqCst);
            let seq0 = h.data_seq.load(Ordering::SeqCst);
            for i in 1..=EARLY_WAKE_RECORDS + 8 {
                p.write_frame(&[7u8; 8]).expect("write");
                let woken = h.data_seq.load(Ordering::SeqCst).wrapping_sub(seq0);
                let want = if wakes { i / EARLY_WAKE_RECORDS } else { 0 };
                assert_eq!(woken, want, "{handoff:?}, after {i} records");
            }
            p.flush();
            let after = h.data_seq.load(Ordering::SeqCst).wrapping_sub(seq0);
            assert_eq!(
                after,
                if wakes { 2 } else { 1 },
                "{handoff:?}: the flush wakes"
            );
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "thousands of laps: hours under Miri")]
    fn records_stream_across_many_laps_in_order() {
        for handoff in [Handoff::Futex, Handoff::Spin { polls: 1000 }] {
            let (mem, mut p, mut c) = ring(handoff);
            let sizes: Vec<usize> = (0..3000).map(|i| (i * 37) % 1500).collect();
            let expect: Vec<u8> = sizes
                .iter()
                .enumerate()
                .flat_map(|(i, &n)| header_lookalikes(n, i as u64))
                .collect();
            let total = expect.len();
            let writer = std::thread::spawn(move || {
                for (i, &n) in sizes.iter().enumerate() {
                    let v = header_lookalikes(n, i as u64);
                    let (a, b) = v.split_at(n / 3);
                    p.write_parts(&[a, b]).expect("write");
                    if i % 7 == 0 {
                        p.flush();
                    }
                }
                p.flush();
            });
            let mut got = vec![0u8; total];
            let mut at = 0;
            let mut step = 1;
            while at < total {
                let n = step.min(total - at);
                c.read_exact(&mut got[at..at + n]).expect("read");
                at += n;
                step = step * 7 % 1999 + 1;
            }
            writer.join().expect("writer");
            assert!(got == expect, "stream garbled ({handoff:?})");
            assert!(c.tail > 16 * 4096, "the ring wrapped many times");
            drop(mem);
        }
    }

    /// A bulk transfer (past [`UNCACHED_READS`]) is copied out with
    /// streaming stores: the bytes must
    /// still arrive whole and in order, at a destination that is not
    /// aligned, across many laps of a ring whose records are large enough
    /// for the streaming loop.
    #[test]
    #[cfg_attr(miri, ignore = "megabytes copied byte by byte: hours under Miri")]
    fn a_bulk_transfer_arrives_whole_at_an_unaligned_destination() {
        const CAP: usize = 1 << 20;
        let mut mem: Vec<Page> = (0..CAP / 4096 + 1).map(|_| Page([0; 4096])).collect();
        let base = mem.as_mut_ptr() as *mut u8;
        // SAFETY: CAP + one header page, page aligned, alive until the end
        // of the test, after both ends are gone.
        let (mut p, mut c) = unsafe {
            (
                Producer::new(base, CAP, Handoff::Futex, None),
                Consumer::new(base, CAP, Handoff::Futex, None),
            )
        };
        let n = UNCACHED_READS + 12_345;
        let data: Vec<u8> = (0..n).map(|i| (i * 31 + i / 4099) as u8).collect();
        let sent = data.clone();
        let writer = std::thread::spawn(move || {
            // A small frame first, so the bulk bytes start mid-ring.
            p.write_frame(&[1, 2, 3]).expect("frame");
            p.write_all(&sent).expect("bulk");
            p.flush();
        });
        let mut frame = Vec::new();
        c.read_frame(64, &mut frame, |_, _| Ok(())).expect("frame");
        assert_eq!(frame, [1, 2, 3]);
        let mut got = vec![0u8; n + 3];
        c.read_exact(&mut got[3..]).expect("bulk");
        writer.join().expect("writer");
        assert!(got[3..] == data[..], "bulk bytes garbled");
        assert!(c.tail as usize > 16 * CAP, "the ring wrapped many times");
        drop(c);
        drop(mem);
    }

    #[test]
    #[cfg_attr(miri, ignore = "thousands of laps: hours under Miri")]
    fn frames_behind_their_length_stream_across_many_laps() {
        let (mem, mut p, mut c) = ring(Handoff::Futex);
        // Up to 1,500 bytes: small frames take the one-record path, large
        // ones (beyond a record's 512) the general one.
        let sizes: Vec<usize> = (0..3000).map(|i| (i * 53) % 1500).collect();
        let frame = |i: usize, n: usize| header_lookalikes(n, i as u64);
        let expect: Vec<u8> = sizes
            .iter()
            .enumerate()
            .flat_map(|(i, &n)| {
                let mut v = (n as u64).to_le_bytes().to_vec();
                v.extend(frame(i, n));
                v
            })
            .collect();
        let writer = std::thread::spawn(move || {
            for (i, &n) in sizes.iter().enumerate() {
                p.write_frame(&frame(i, n)).expect("write");
                if i % 5 == 0 {
                    p.flush();
                }
            }
            p.flush();
        });
        let mut got = vec![0u8; expect.len()];
        c.read_exact(&mut got).expect("read");
        writer.join().expect("writer");
        assert!(got == expect, "stream garbled");
        assert!(c.tail > 16 * 4096, "the ring wrapped many times");
        drop(mem);
    }

    #[test]
    fn a_held_record_is_seen_only_once_another_thread_publishes_it() {
        let (mem, mut p, mut c) = ring(Handoff::Futex);
        let mut buf = Vec::new();
        // Many laps, so that held records wrap around the ring's end too.
        for i in 0..400u32 {
            let held = p
                .write_frame_held(&i.to_le_bytes())
                .expect("write")
                .expect("one record");
            assert!(
                !c.wait_data_for(Duration::from_micros(50)).expect("wait"),
                "record {i} seen before it was published"
            );
            // Published by another thread, as the library's thread does;
            // the join orders the writer's stores before it.
            let mut held = held;
            held.patch(0, &(i + 1).to_le_bytes());
            held.patch(2, &[0; 8]);
            std::thread::spawn(move || held.publish())
                .join()
                .expect("publisher");
            assert!(c.wait_data_for(Duration::from_secs(5)).expect("wait"));
            c.read_frame(64, &mut buf, |_, _| panic!("one record"))
                .expect("read");
            assert_eq!(buf, (i + 1).to_le_bytes(), "record {i}, patched");
            // An ordinary frame right behind it arrives in order.
            p.write_frame(b"next").expect("write");
            p.flush();
            c.read_frame(64, &mut buf, |_, _| panic!("one record"))
                .expect("read");
            assert_eq!(buf, b"next");
        }
        assert!(c.tail > 4 * 4096, "the ring wrapped");
        assert!(
            p.write_frame_held(&[0u8; 4096]).expect("write").is_none(),
            "a frame of several records cannot be held"
        );
        drop(mem);
    }

    #[test]
    fn a_frame_in_one_record_is_read_whole_and_a_forged_length_is_not() {
        // One record: header, the frame's length, the frame.
        let image = |prefix: u64, frame: &[u8]| {
            let mut v = record_header(8 + frame.len() as u32).to_le_bytes().to_vec();
            v.extend(prefix.to_le_bytes());
            v.extend(frame);
            v
        };
        let ok = harness::read_image(&image(5, b"hello"), &[0]).expect("a frame");
        assert_eq!(ok, b"hello");
        // A length that does not match the record: left to the general path
        // (which the harness does not run), nothing read.
        let short = harness::read_image(&image(4, b"hello"), &[0]).expect("no frame");
        assert!(short.is_empty());
        assert!(matches!(
            harness::read_image(&image(1 << 40, b"hello"), &[0]),
            Err(TransportError::FrameTooLarge { .. })
        ));
    }

    #[test]
    fn a_forged_record_header_is_refused() {
        for word in [MARK, 0x1234_5678_0000_0010, MARK | 4096, MARK | 0xffff_ffff] {
            let img = word.to_le_bytes();
            let r = harness::read_image(&img, &[8]);
            assert!(
                matches!(r, Err(TransportError::Corrupt(_))),
                "{word:#x} was accepted"
            );
        }
        // A well-formed record is read, and nothing past it.
        let mut img = (MARK | 3).to_le_bytes().to_vec();
        img.extend_from_slice(b"abc");
        assert_eq!(
            harness::read_image(&img, &[2, 5, 5]).expect("read"),
            b"abc".to_vec()
        );
    }

    #[test]
    fn a_forged_tail_is_refused() {
        let (mem, mut p, _c) = ring(Handoff::Futex);
        p.write_all(&[1u8; 3000]).expect("nearly fills the ring");
        // The consumer claims to have read more than was written; the
        // producer looks at the claim when its cached tail leaves too
        // little room for the next write.
        p.raw.hdr().tail.store(1 << 40, Ordering::Release);
        assert!(matches!(
            p.write_all(&[2u8; 1000]),
            Err(TransportError::Corrupt(_))
        ));
        drop(mem);
    }
}
