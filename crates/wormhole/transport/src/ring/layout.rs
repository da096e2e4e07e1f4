//! The shared region: the header page each side's waiting words live in,
//! the record header words, and `Raw`, the bounds-checked access to the
//! data area both ends are built on.

use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::copy::{copy_bulk, copy_bulk_uncached};

/// The shared header of one ring; it lives at the start of a page. Each
/// word another CPU writes has a cache line of its own.
#[repr(C, align(64))]
pub struct RingHeader {
    pub(super) tail: AtomicU64,
    _pad1: [u8; 56],
    pub(super) data_seq: AtomicU32,
    pub(super) consumer_waiting: AtomicU32,
    _pad2: [u8; 56],
    pub(super) space_seq: AtomicU32,
    pub(super) producer_waiting: AtomicU32,
    _pad3: [u8; 56],
    /// The CPU the producer last ran on (same-core handoff), plus one; 0 if
    /// never published.
    pub(super) producer_cpu: AtomicU32,
    _pad4: [u8; 60],
}

/// Bytes reserved for a [`RingHeader`] in a region.
pub const HEADER_BYTES: usize = 4096;
const _: () = assert!(std::mem::size_of::<RingHeader>() <= HEADER_BYTES);

/// The high half of every record header: a zeroed word (no record yet) can
/// never pass for one, and a stray value rarely does.
pub(super) const MARK: u64 = 0x5748_5243 << 32; // "WHRC"
/// Bytes of a record header.
pub(super) const REC_HDR: u64 = 8;

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
pub(super) const REC_ALIGN: u64 = 64;

/// Ring bytes a record of `len` payload bytes occupies.
pub(super) fn record_size(len: u64) -> u64 {
    (REC_HDR + len).div_ceil(REC_ALIGN) * REC_ALIGN
}

/// Where a ring lives. Both ends are built from the same raw parts.
#[derive(Clone, Copy)]
pub(super) struct Raw {
    hdr: *const RingHeader,
    data: *mut u8,
    pub(super) cap: u64,
}

// SAFETY: the pointers refer to a shared mapping that outlives every ring end
// (the owner keeps the mapping alive), and all header access is atomic.
unsafe impl Send for Raw {}

impl Raw {
    /// # Safety
    /// `base` must point to `HEADER_BYTES + cap` bytes of memory, aligned to a
    /// page, that stay mapped for as long as any end built from it lives.
    /// `cap` must be a power of two of at least 64.
    pub(super) unsafe fn new(base: *mut u8, cap: usize) -> Self {
        debug_assert!(cap.is_power_of_two() && cap >= 64);
        Raw {
            hdr: base as *const RingHeader,
            // SAFETY: by this function's contract `base` maps HEADER_BYTES +
            // cap bytes, so `base + HEADER_BYTES` is inside the same mapping.
            data: unsafe { base.add(HEADER_BYTES) },
            cap: cap as u64,
        }
    }

    pub(super) fn hdr(&self) -> &RingHeader {
        // SAFETY: `hdr` is the start of a mapping that `Raw::new`'s contract
        // keeps alive while this `Raw` is, page aligned (enough for the
        // header's 64) and at least HEADER_BYTES long (>= the header's size,
        // asserted at compile time); every field is an atomic or padding, so
        // a shared reference is sound while the peer writes.
        unsafe { &*self.hdr }
    }

    /// The record header word at position `pos` (a multiple of 8).
    #[inline]
    pub(super) fn word(&self, pos: u64) -> &AtomicU64 {
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
    pub(super) fn put_word(&self, pos: u64, v: u64) {
        debug_assert!(pos & 7 == 0);
        let idx = (pos & (self.cap - 1)) as usize;
        // SAFETY: idx + 8 <= cap because idx and cap are multiples of 8, and
        // the data area starts a page into the mapping, so the u64 is in
        // bounds and aligned; the consumer reads these bytes only after the
        // header's release store.
        unsafe { (self.data.add(idx) as *mut u64).write(v.to_le()) };
    }

    /// Copies `dst.len()` bytes from ring position `pos`, bypassing the
    /// cache when `uncached`.
    #[inline]
    pub(super) fn copy_out(&self, pos: u64, dst: &mut [u8], uncached: bool) {
        let copy = if uncached {
            copy_bulk_uncached
        } else {
            copy_bulk
        };
        // SAFETY: `dst` is a live `&mut` slice, so writable for its length
        // and private to this side; callers copy at most what is left of a
        // record the consumer checked fits in the ring, so at most the
        // capacity; both copy functions have `copy_bulk`'s contract.
        unsafe { self.copy_out_with(copy, pos, dst.as_mut_ptr(), dst.len()) };
    }

    /// Replaces `buf`'s contents with `len` bytes from ring position `pos`
    /// (`len` at most the capacity), without zeroing them first.
    #[inline]
    pub(super) fn copy_out_to_vec(&self, pos: u64, len: usize, buf: &mut Vec<u8>) {
        buf.clear();
        buf.reserve(len);
        // SAFETY: after `reserve`, `buf` has room for `len` bytes, private to
        // this side, which the copy writes in full before `set_len` makes
        // them part of it; `len` is at most the capacity (this function's
        // documented limit: the caller copies a record's checked payload).
        unsafe {
            self.copy_out_raw(pos, buf.as_mut_ptr(), len);
            buf.set_len(len);
        }
    }

    /// Copies `len` bytes (at most the capacity) from ring position `pos`
    /// to `dst`.
    ///
    /// # Safety
    /// `dst` is writable for `len` bytes and private to this side, and `len`
    /// is at most the capacity.
    #[inline]
    pub(super) unsafe fn copy_out_raw(&self, pos: u64, dst: *mut u8, len: usize) {
        // SAFETY: `dst` is writable for `len` bytes and private to this side
        // and `len` is at most the capacity (this function's contract), which
        // is what `copy_out_with` needs; `copy_bulk` is the copy its contract
        // names.
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
    pub(super) fn copy_in(&self, pos: u64, src: &[u8]) {
        let idx = (pos & (self.cap - 1)) as usize;
        let first = src.len().min(self.cap as usize - idx);
        // SAFETY: idx + first <= cap, and the rest (callers write at most cap
        // bytes) wraps to the start of the data area; `src` is a live slice,
        // readable for its length. The bytes are the producer's until their
        // record's header is stored (release), so the consumer does not read
        // them concurrently unless it breaks the protocol, which garbles only
        // what it reads, never our memory.
        unsafe {
            copy_bulk(self.data.add(idx), src.as_ptr(), first);
            if first < src.len() {
                copy_bulk(self.data, src.as_ptr().add(first), src.len() - first);
            }
        }
    }
}
