//! The writing end of a ring: records copied in, published by their
//! header word, the consumer woken on a flush, when a batch grows long or
//! when the producer must wait for space.

use std::sync::atomic::Ordering;

use super::handoff::{sleep_on, wake_consumer, Handoff, Liveness};
use super::layout::{record_header, record_size, Raw, REC_ALIGN, REC_HDR};
use crate::TransportError;

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
pub(super) const EARLY_WAKE_RECORDS: u32 = 32;

/// The writing end of a ring.
pub struct Producer {
    pub(super) raw: Raw,
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
        // SAFETY: this function's contract is `Raw::new`'s: `base` maps
        // HEADER_BYTES + cap page-aligned bytes that outlive this end, and
        // `cap` is a power of two of at least 64.
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
