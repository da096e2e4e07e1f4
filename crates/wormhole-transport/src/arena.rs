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
//! (a round trip saved per transfer). The server never acts on what it
//! finds there.

use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

use nix::sys::mman::{munmap, MapFlags};

use crate::shm::{check_file_len, map_shared, sealed_memfd};
use crate::TransportError;

/// A shared mapping of the arena's file.
pub struct Arena {
    base: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory for buffer contents; the
// struct hands out raw pointers only, whose use is the caller's to justify.
unsafe impl Send for Arena {}
// SAFETY: as above; no method mutates the struct.
unsafe impl Sync for Arena {}

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
        let base = map_shared(&fd, len, MapFlags::MAP_NORESERVE)?;
        Ok(Arc::new(Arena { base, len, fd }))
    }

    /// The file to pass to the peer.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of byte `off`, if `len` bytes from there lie inside.
    pub fn ptr_at(&self, off: u64, len: usize) -> Option<*mut u8> {
        let off = usize::try_from(off).ok()?;
        if off.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: in bounds of the mapping, checked above.
        Some(unsafe { self.base.as_ptr().add(off) })
    }

    /// Where `[p, p + len)` lies in the arena, if it lies wholly inside.
    pub fn offset_of(&self, p: *const u8, len: usize) -> Option<u64> {
        let off = (p as usize).checked_sub(self.base.as_ptr() as usize)?;
        (off.checked_add(len)? <= self.len).then_some(off as u64)
    }

    /// Gives the pages of `[off, off + len)` back to the system; they read
    /// as zeros afterwards.
    pub fn discard(&self, off: u64, len: u64) -> Result<(), TransportError> {
        let (o, l) = (
            libc::off_t::try_from(off).map_err(|_| TransportError::BadLayout)?,
            libc::off_t::try_from(len).map_err(|_| TransportError::BadLayout)?,
        );
        nix::fcntl::fallocate(
            self.fd.as_raw_fd(),
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
/// One directory entry: a buffer's id, then where its bytes lie.
const SLOT: usize = 32;
const SLOTS: u64 = DIRECTORY_LEN / SLOT as u64;

impl Arena {
    /// The directory slot for buffer `id` (ids are the client's, dense, so
    /// a direct-mapped table spreads them): its id, offset and length words.
    fn slot(&self, id: u64) -> Option<[&AtomicU64; 3]> {
        if (self.len as u64) < DIRECTORY_LEN {
            return None;
        }
        let at = (id % SLOTS) as usize * SLOT;
        // SAFETY: `at + SLOT` <= DIRECTORY_LEN <= len: inside the mapping,
        // which is page-aligned, so every word is 8-byte aligned. AtomicU64
        // has u64's layout; both processes touch these words only through
        // atomics (a client that does otherwise garbles its own answers).
        let word = |i: usize| unsafe { &*(self.base.as_ptr().add(at + 8 * i) as *const AtomicU64) };
        Some([word(0), word(1), word(2)])
    }

    /// Server: buffer `id` lies at `[off, off + len)`. A later buffer whose
    /// id maps to the same slot replaces it.
    pub fn publish(&self, id: u64, off: u64, len: u64) {
        let Some([sid, soff, slen]) = self.slot(id) else {
            return;
        };
        // A seqlock of one writer: the id is cleared before the location
        // changes and set after, so a reader that saw the id twice saw the
        // location written between.
        sid.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        soff.store(off, Ordering::Relaxed);
        slen.store(len, Ordering::Relaxed);
        sid.store(id, Ordering::Release);
    }

    /// Server: buffer `id` is gone (its slot is cleared if it still holds it).
    pub fn withdraw(&self, id: u64) {
        if let Some([sid, _, _]) = self.slot(id) {
            let _ = sid.compare_exchange(id, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Client: where buffer `id` lies, as the server published it, if it
    /// did and the place is inside the arena, past the directory.
    pub fn lookup(&self, id: u64) -> Option<(u64, u64)> {
        let [sid, soff, slen] = self.slot(id)?;
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

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: our own mapping, of exactly this length; nothing borrowed
        // from it outlives the Arena (callers hold the Arc while they use it).
        unsafe {
            let _ = munmap(self.base.cast(), self.len);
        }
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
        // SAFETY: as above.
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
