//! The reading end of a ring: every record header and every `tail` the
//! peer could have forged is checked before use, payload bytes are only
//! copied out, and space is given back in batches.

use std::sync::atomic::{fence, Ordering};
use std::time::Duration;

use super::handoff::{sleep_on, Handoff, Liveness};
use super::layout::{record_size, Raw, MARK, REC_HDR};
use crate::futex;
use crate::TransportError;

/// Reads of at least this many bytes (one bulk transfer) are copied out
/// of the ring with stores that bypass the cache (see
/// [`crate::copy::copy_bulk_uncached`]): it is the size from which a native copy does so
/// too (glibc's threshold is three quarters of the last-level cache, a few
/// MiB to a few tens of MiB).
pub(super) const UNCACHED_READS: usize = 16 << 20;

/// The reading end of a ring.
pub struct Consumer {
    pub(super) raw: Raw,
    /// Where the current record starts (or the next, between records).
    pub(super) tail: u64,
    /// The `tail` the producer has been told.
    published: u64,
    /// The next payload byte to read, how many the record has left, and
    /// where the next record starts.
    pos: u64,
    pub(super) left: u64,
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
pub(super) const MIN_SPIN: u32 = 64;

/// The next spin budget after a wait that spun `budget` polls: doubled (up
/// to `max`) when the data came while spinning, halved (down to
/// [`MIN_SPIN`]) when it did not and the thread had to sleep. Waits that
/// outlast the spin, such as a `clFinish` on a long batch, so stop burning a
/// CPU the device's own threads need, while short round trips keep the
/// whole spin.
pub(super) fn adapt_spin(budget: u32, max: u32, arrived: bool) -> u32 {
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
        // SAFETY: this function's contract is `Raw::new`'s: `base` maps
        // HEADER_BYTES + cap page-aligned bytes that outlive this end, and
        // `cap` is a power of two of at least 64.
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
