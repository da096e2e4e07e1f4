//! Memory a tenant shares with its client for device buffers.
//!
//! On a device that computes in host memory (a CPU device such as PoCL's),
//! a buffer whose storage lies in memory the client also maps needs no copy
//! through the channel at all: a transfer is one `memcpy` by the client, as
//! it is natively. The arena is one sparse memfd, sealed against resizing
//! (the peer holds the file too), mapped once on each side; the server
//! carves buffers out of it and punches the pages of freed ones back.
//!
//! Nothing the server relies on lives in the arena: the client may write any
//! byte of it at any time and can only damage its own buffers' contents.
//!
//! Its first [`DIRECTORY_LEN`] bytes are a directory the server writes and
//! the client reads: where each buffer the client created lies, so that it
//! can move a small buffer's bytes itself when its queue has nothing to run
//! (a round trip saved per transfer). The server acts on one word there
//! only: a slot's "written" word, which the client sets when it writes a
//! buffer in place; under delay storing (`wormhole-server`'s residency) it
//! makes the server save that buffer before evicting it. A client that
//! does not set it loses only its own writes; one that always sets it
//! costs only itself saves.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

use nix::sys::mman::MapFlags;

use crate::shm::{check_file_len, sealed_memfd, SharedMap};
use crate::TransportError;

/// A shared mapping of the arena's file.
pub struct Arena {
    map: SharedMap,
}

impl Arena {
    /// A fresh arena of `len` bytes (server side). Pages cost memory only
    /// once touched.
    pub fn create(len: usize) -> Result<Arc<Self>, TransportError> {
        Self::map(sealed_memfd(c"wormhole-buffers", len)?, len)
    }

    /// Maps an arena received from the server, after checking the file is
    /// as long as announced (client side).
    pub fn open(fd: OwnedFd, len: usize) -> Result<Arc<Self>, TransportError> {
        check_file_len(&fd, len)?;
        Self::map(fd, len)
    }

    fn map(fd: OwnedFd, len: usize) -> Result<Arc<Self>, TransportError> {
        Ok(Arc::new(Arena {
            map: SharedMap::new(fd, len, MapFlags::MAP_NORESERVE)?,
        }))
    }

    /// The file to pass to the peer.
    pub fn fd(&self) -> &OwnedFd {
        self.map.fd()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The address of byte `off`, if `len` bytes from there lie inside.
    pub fn ptr_at(&self, off: u64, len: usize) -> Option<*mut u8> {
        let off = usize::try_from(off).ok()?;
        if off.checked_add(len)? > self.len() {
            return None;
        }
        // SAFETY: in bounds of the mapping, checked above.
        Some(unsafe { self.map.base().add(off) })
    }

    /// Where `[p, p + len)` lies in the arena, if it lies wholly inside.
    pub fn offset_of(&self, p: *const u8, len: usize) -> Option<u64> {
        let off = (p as usize).checked_sub(self.map.base() as usize)?;
        (off.checked_add(len)? <= self.len()).then_some(off as u64)
    }

    /// Gives the pages of `[off, off + len)` back to the system; they read
    /// as zeros afterwards.
    pub fn discard(&self, off: u64, len: u64) -> Result<(), TransportError> {
        let (o, l) = (
            libc::off_t::try_from(off).map_err(|_| TransportError::BadLayout)?,
            libc::off_t::try_from(len).map_err(|_| TransportError::BadLayout)?,
        );
        nix::fcntl::fallocate(
            self.map.fd().as_raw_fd(),
            nix::fcntl::FallocateFlags::FALLOC_FL_PUNCH_HOLE
                | nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
            o,
            l,
        )?;
        Ok(())
    }
}

/// Bytes at the start of the arena that hold the directory of buffers;
/// pieces for buffers are carved from the rest.
pub const DIRECTORY_LEN: u64 = 64 * 1024;
/// One directory entry: a buffer's id, where its bytes lie, and whether the
/// client wrote them in place.
const SLOT: usize = 32;
const SLOTS: u64 = DIRECTORY_LEN / SLOT as u64;

impl Arena {
    /// The directory slot for buffer `id` (ids are the client's, dense, so
    /// a direct-mapped table spreads them): its id, offset, length and
    /// written words.
    fn slot(&self, id: u64) -> Option<[&AtomicU64; 4]> {
        if (self.len() as u64) < DIRECTORY_LEN {
            return None;
        }
        let at = (id % SLOTS) as usize * SLOT;
        // SAFETY: `at + SLOT` <= DIRECTORY_LEN <= len: inside the mapping,
        // which is page-aligned, so every word is 8-byte aligned. AtomicU64
        // has u64's layout; both processes touch these words only through
        // atomics (a client that does otherwise garbles its own answers).
        let word = |i: usize| unsafe { &*(self.map.base().add(at + 8 * i) as *const AtomicU64) };
        Some([word(0), word(1), word(2), word(3)])
    }

    /// Server: buffer `id` lies at `[off, off + len)`. A later buffer whose
    /// id maps to the same slot replaces it. Returns the buffer it replaced
    /// (another id) if the client had written that one in place since the
    /// server last asked ([`Arena::withdraw_written`]).
    pub fn publish(&self, id: u64, off: u64, len: u64) -> Option<u64> {
        let [sid, soff, slen, written] = self.slot(id)?;
        // A seqlock of one writer: the id is cleared before the location
        // changes and set after, so a reader that saw the id twice saw the
        // location written between.
        let old = sid.swap(0, Ordering::SeqCst);
        // The same buffer published again keeps its mark.
        let was_written = old != id && written.swap(0, Ordering::SeqCst) != 0;
        fence(Ordering::Release);
        soff.store(off, Ordering::Relaxed);
        slen.store(len, Ordering::Relaxed);
        sid.store(id, Ordering::Release);
        (was_written && old != 0).then_some(old)
    }

    /// Server: buffer `id` is gone (its slot is cleared if it still holds it).
    pub fn withdraw(&self, id: u64) {
        if let Some([sid, _, _, _]) = self.slot(id) {
            let _ = sid.compare_exchange(id, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Server: withdraws buffer `id` (if its slot still holds it) so that
    /// the client stops moving its bytes in place, and says whether the
    /// client wrote it in place since it was published. A copy that the
    /// client started before sees the withdrawal when it checks
    /// ([`Arena::still`]) and is done again through the server.
    pub fn withdraw_written(&self, id: u64) -> bool {
        let Some([sid, _, _, written]) = self.slot(id) else {
            return false;
        };
        if sid
            .compare_exchange(id, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return false;
        }
        written.swap(0, Ordering::SeqCst) != 0
    }

    /// Client: about to write buffer `id` in place.
    pub fn mark_written(&self, id: u64) {
        if let Some([_, _, _, written]) = self.slot(id) {
            written.store(1, Ordering::SeqCst);
        }
    }

    /// Client: after a copy in place into or out of `id`'s bytes at `off`,
    /// whether the buffer still held its place throughout (else the server
    /// withdrew it meanwhile, to evict it, and the copy must be done again
    /// through the server).
    pub fn still(&self, id: u64, off: u64) -> bool {
        let Some([sid, soff, _, written]) = self.slot(id) else {
            return false;
        };
        // A second mark after the copy, so that a server that sees the
        // mark sees the bytes too; then the id, after both.
        if written.load(Ordering::Relaxed) != 0 {
            written.store(1, Ordering::SeqCst);
        }
        fence(Ordering::SeqCst);
        sid.load(Ordering::SeqCst) == id && soff.load(Ordering::SeqCst) == off
    }

    /// Client: where buffer `id` lies, as the server published it, if it
    /// did and the place is inside the arena, past the directory.
    pub fn lookup(&self, id: u64) -> Option<(u64, u64)> {
        let [sid, soff, slen, _] = self.slot(id)?;
        if id == 0 || sid.load(Ordering::Acquire) != id {
            return None;
        }
        let (off, len) = (soff.load(Ordering::Relaxed), slen.load(Ordering::Relaxed));
        fence(Ordering::Acquire);
        if sid.load(Ordering::Relaxed) != id || off < DIRECTORY_LEN {
            return None;
        }
        self.ptr_at(off, usize::try_from(len).ok()?)?;
        Some((off, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_see_the_same_bytes_and_discard_zeroes() {
        let a = Arena::create(1 << 20).expect("create");
        let dup = a.fd().try_clone().expect("dup");
        let b = Arena::open(dup, 1 << 20).expect("open");
        let p = a.ptr_at(8192, 4).expect("in range");
        // SAFETY: 4 bytes inside the mapping.
        unsafe { std::ptr::copy_nonoverlapping([1u8, 2, 3, 4].as_ptr(), p, 4) };
        let q = b.ptr_at(8192, 4).expect("in range");
        // SAFETY: 4 bytes inside the other mapping of the same file.
        let got = unsafe { std::slice::from_raw_parts(q, 4) }.to_vec();
        assert_eq!(got, [1, 2, 3, 4]);
        assert_eq!(a.offset_of(p, 4), Some(8192));
        a.discard(8192, 4096).expect("punch");
        // SAFETY: `q` is still byte 8192 of `b`'s live mapping; a punched
        // hole reads as zeroes, it does not unmap.
        assert_eq!(unsafe { *q }, 0);
    }

    #[test]
    fn the_directory_says_where_a_buffer_lies_until_withdrawn_or_replaced() {
        let a = Arena::create(1 << 20).expect("create");
        let dup = a.fd().try_clone().expect("dup");
        let b = Arena::open(dup, 1 << 20).expect("open");
        assert_eq!(b.lookup(7), None);
        a.publish(7, DIRECTORY_LEN + 128, 1000);
        assert_eq!(b.lookup(7), Some((DIRECTORY_LEN + 128, 1000)));
        // Another id in the same slot replaces it.
        a.publish(7 + SLOTS, DIRECTORY_LEN + 8192, 10);
        assert_eq!(b.lookup(7), None);
        assert_eq!(b.lookup(7 + SLOTS), Some((DIRECTORY_LEN + 8192, 10)));
        a.withdraw(7);
        assert_eq!(b.lookup(7 + SLOTS), Some((DIRECTORY_LEN + 8192, 10)));
        a.withdraw(7 + SLOTS);
        assert_eq!(b.lookup(7 + SLOTS), None);
        // A place inside the directory or past the end is not believed.
        a.publish(9, 0, 10);
        assert_eq!(b.lookup(9), None);
        a.publish(9, (1 << 20) - 4, 10);
        assert_eq!(b.lookup(9), None);
        assert_eq!(b.lookup(0), None);
    }

    #[test]
    fn writes_in_place_are_seen_by_a_withdrawal_and_a_withdrawal_by_the_writer() {
        let a = Arena::create(1 << 20).expect("create");
        let dup = a.fd().try_clone().expect("dup");
        let b = Arena::open(dup, 1 << 20).expect("open");
        let off = DIRECTORY_LEN + 128;
        assert_eq!(a.publish(5, off, 100), None);
        assert!(!a.withdraw_written(5), "nothing written");
        assert_eq!(a.publish(5, off, 100), None);
        b.mark_written(5);
        assert!(b.still(5, off), "nothing withdrew it");
        assert!(a.withdraw_written(5), "the server sees the write");
        assert!(!b.still(5, off), "the writer sees the withdrawal");
        assert!(!a.withdraw_written(5), "asked once");
        // A buffer written in place, then replaced in its slot: the
        // replacement says whose writes it took over.
        a.publish(5, off, 100);
        b.mark_written(5);
        assert_eq!(a.publish(5 + SLOTS, off + 4096, 100), Some(5));
        assert!(!a.withdraw_written(5), "no longer in the slot");
        assert_eq!(a.publish(5 + SLOTS, off + 4096, 100), None);
    }

    #[test]
    fn refuses_ranges_outside_and_a_short_file() {
        let a = Arena::create(1 << 16).expect("create");
        assert!(a.ptr_at(1 << 16, 1).is_none());
        assert!(a.ptr_at(u64::MAX, 1).is_none());
        assert!(a.offset_of(std::ptr::null(), 1).is_none());
        let dup = a.fd().try_clone().expect("dup");
        assert!(Arena::open(dup, 1 << 17).is_err());
        // The seals hold: the client cannot shrink the file under us.
        assert!(nix::unistd::ftruncate(a.fd(), 0).is_err());
    }
}
