//! A tenant's host store: where its evicted objects' bytes wait. One file:
//! a memory file of its own by default, or a file the listener opened
//! (unlinked, `O_TMPFILE`) in `store_dir` and passed down, so that a
//! confined tenant opens no path. Either way only the tenant holds it, so
//! when the tenant ends, however it ends, the file and its space go too.
//! The file is sparse: space is used as objects are saved, and given back
//! (punched) as they are freed.

use std::fs::File;
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use range_alloc::RangeAllocator;
use rustc_hash::FxHashMap;

use super::ResidencyError;
use wormhole_residency::objects::Key;

/// Pieces are whole pages, so that a freed one gives its space back.
const PAGE: u64 = 4096;
/// The most a copy through host memory holds at once (device memory that
/// the process cannot read: a GPU's).
pub(super) const BOUNCE: u64 = 8 << 20;

pub(super) struct Store {
    file: File,
    size: u64,
    free: RangeAllocator<u64>,
    /// Each saved object's piece.
    pieces: FxHashMap<Key, Range<u64>>,
}

impl Store {
    /// A store of `size` bytes in `fd` (the listener's file), or else in a
    /// memory file of our own.
    pub(super) fn open(fd: Option<OwnedFd>, size: u64) -> Result<Store, ResidencyError> {
        let size = size.max(PAGE) / PAGE * PAGE;
        let fd = match fd {
            Some(fd) => fd,
            None => nix::sys::memfd::memfd_create(
                c"wormhole-store",
                nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
            )?,
        };
        let file = File::from(fd);
        file.set_len(size)?;
        Ok(Store {
            file,
            size,
            free: RangeAllocator::new(0..size),
            pieces: FxHashMap::default(),
        })
    }

    pub(super) fn size(&self) -> u64 {
        self.size
    }

    /// Bytes of pieces given out.
    pub(super) fn used(&self) -> u64 {
        self.pieces.values().map(|r| r.end - r.start).sum()
    }

    /// Copies `len` bytes at `src` into `key`'s piece (given one first).
    ///
    /// # Safety
    /// `src` points to `len` readable bytes (another process may write them
    /// meanwhile: the copy is then torn, which residency's callers allow
    /// for, but never out of bounds).
    pub(super) unsafe fn save(
        &mut self,
        key: Key,
        src: *const u8,
        len: u64,
    ) -> Result<(), ResidencyError> {
        let piece = self.piece(key, len)?;
        // SAFETY: `src` points to `len` readable bytes (this function's
        // contract: `local.rs` gives the buffer's bytes in the arena, bounded
        // by `ptr_at`), all `pwrite_all` reads; the piece holds at least `len`
        // bytes.
        unsafe { pwrite_all(&self.file, src, len, piece.start) }
    }

    /// `key`'s piece for `len` bytes: its own if big enough, else a new one.
    fn piece(&mut self, key: Key, len: u64) -> Result<Range<u64>, ResidencyError> {
        let need = len.div_ceil(PAGE).max(1) * PAGE;
        match self.pieces.get(&key) {
            Some(r) if r.end - r.start >= need => Ok(r.clone()),
            _ => {
                self.free_piece(key);
                let r = self
                    .free
                    .allocate_range(need)
                    .map_err(|_| ResidencyError::StoreFull(self.size))?;
                self.pieces.insert(key, r.clone());
                Ok(r)
            }
        }
    }

    /// Saves `len` bytes that are not in this process's memory (a GPU's):
    /// `fill(offset, chunk)` copies each chunk into a bounce buffer of
    /// [`BOUNCE`] bytes at most, which is then written at its place.
    pub(super) fn save_with(
        &mut self,
        key: Key,
        len: u64,
        mut fill: impl FnMut(u64, &mut [u8]) -> Result<(), ResidencyError>,
    ) -> Result<(), ResidencyError> {
        let piece = self.piece(key, len)?;
        bounced(len, |at, buf| {
            fill(at, buf)?;
            // SAFETY: `buf` holds its length; the piece holds `len` bytes.
            unsafe { pwrite_all(&self.file, buf.as_ptr(), buf.len() as u64, piece.start + at) }
        })
    }

    /// Loads `key`'s saved `len` bytes a chunk at a time into a bounce
    /// buffer, which `take(offset, chunk)` copies where they belong.
    pub(super) fn load_with(
        &self,
        key: Key,
        len: u64,
        mut take: impl FnMut(u64, &[u8]) -> Result<(), ResidencyError>,
    ) -> Result<(), ResidencyError> {
        let start = self.saved(key, len)?;
        bounced(len, |at, buf| {
            // SAFETY: `buf` holds its length, writable.
            unsafe { pread_exact(&self.file, buf.as_mut_ptr(), buf.len() as u64, start + at)? };
            take(at, buf)
        })
    }

    /// Where `key`'s saved `len` bytes start in the file.
    fn saved(&self, key: Key, len: u64) -> Result<u64, ResidencyError> {
        match self.pieces.get(&key) {
            Some(piece) if piece.end - piece.start >= len => Ok(piece.start),
            _ => Err(ResidencyError::NoBacking(key)),
        }
    }

    /// Copies `key`'s saved bytes to `dst`.
    ///
    /// # Safety
    /// `dst` points to `len` writable bytes.
    pub(super) unsafe fn load(
        &self,
        key: Key,
        dst: *mut u8,
        len: u64,
    ) -> Result<(), ResidencyError> {
        let start = self.saved(key, len)?;
        // SAFETY: `dst` points to `len` writable bytes (this function's
        // contract: `local.rs` gives the buffer's bytes in the arena, bounded
        // by `ptr_at`), all `pread_exact` writes; the piece holds at least
        // `len` bytes (checked above).
        unsafe { pread_exact(&self.file, dst, len, start) }
    }

    /// Gives `key`'s piece back, its space too.
    pub(super) fn free_piece(&mut self, key: Key) {
        if let Some(r) = self.pieces.remove(&key) {
            let punched = nix::fcntl::fallocate(
                self.file.as_raw_fd(),
                nix::fcntl::FallocateFlags::FALLOC_FL_PUNCH_HOLE
                    | nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
                r.start as libc::off_t,
                (r.end - r.start) as libc::off_t,
            );
            if let Err(e) = punched {
                log::debug!("store: giving space back: {e}");
            }
            self.free.free_range(r);
        }
    }
}

/// Takes the descriptor at `fd` if it is open (the listener's store file).
pub(super) fn inherited(fd: i32) -> Option<OwnedFd> {
    // SAFETY: F_GETFD on a descriptor number only asks whether it is open.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: the listener put this descriptor here for us alone, and
    // nothing else in the process took it (claim_fds marked it).
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Runs `io(offset, chunk)` over `len` bytes a bounce buffer at a time
/// ([`BOUNCE`] bytes at most).
fn bounced(
    len: u64,
    mut io: impl FnMut(u64, &mut [u8]) -> Result<(), ResidencyError>,
) -> Result<(), ResidencyError> {
    let mut buf = vec![0u8; len.min(BOUNCE) as usize];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(BOUNCE) as usize;
        io(done, &mut buf[..n])?;
        done += n as u64;
    }
    Ok(())
}

/// # Safety
/// `src` points to `len` readable bytes.
unsafe fn pwrite_all(f: &File, src: *const u8, len: u64, at: u64) -> Result<(), ResidencyError> {
    positioned(len, at, std::io::ErrorKind::WriteZero, |done, chunk, at| {
        // SAFETY: done + chunk <= len: inside the caller's readable bytes.
        unsafe { libc::pwrite(f.as_raw_fd(), src.add(done).cast(), chunk, at) }
    })
}

/// # Safety
/// `dst` points to `len` writable bytes.
unsafe fn pread_exact(f: &File, dst: *mut u8, len: u64, at: u64) -> Result<(), ResidencyError> {
    positioned(
        len,
        at,
        std::io::ErrorKind::UnexpectedEof,
        |done, chunk, at| {
            // SAFETY: done + chunk <= len: inside the caller's writable bytes.
            unsafe { libc::pread(f.as_raw_fd(), dst.add(done).cast(), chunk, at) }
        },
    )
}

/// Moves `len` bytes at file offset `at` in chunks of at most 1 GiB:
/// `io(done, chunk, at)` reads or writes `chunk` bytes `done` bytes into
/// the caller's buffer. An interrupted call is retried; one that moves
/// nothing fails with `none`.
fn positioned(
    len: u64,
    at: u64,
    none: std::io::ErrorKind,
    mut io: impl FnMut(usize, usize, libc::off_t) -> isize,
) -> Result<(), ResidencyError> {
    let mut done = 0u64;
    while done < len {
        let chunk = (len - done).min(1 << 30) as usize;
        let n = io(done as usize, chunk, (at + done) as libc::off_t);
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e.into());
        }
        if n == 0 {
            return Err(std::io::Error::from(none).into());
        }
        done += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_and_loads_and_gives_space_back() {
        let mut s = Store::open(None, 3 * PAGE).expect("store");
        let a = vec![7u8; 5000];
        let b = vec![9u8; 4096];
        // SAFETY: pointers into live vectors of the lengths given.
        unsafe {
            s.save(1, a.as_ptr(), a.len() as u64).expect("two pages");
            s.save(2, b.as_ptr(), b.len() as u64).expect("one page");
            assert!(matches!(
                s.save(3, b.as_ptr(), 1),
                Err(ResidencyError::StoreFull(_))
            ));
            let mut back = vec![0u8; 5000];
            s.load(1, back.as_mut_ptr(), 5000).expect("load");
            assert_eq!(back, a);
            assert!(s.load(3, back.as_mut_ptr(), 1).is_err());
            // A second save of the same object reuses its piece.
            s.save(2, a.as_ptr(), 4096).expect("same piece");
            assert_eq!(s.used(), 3 * PAGE);
            s.free_piece(1);
            s.save(3, b.as_ptr(), 4096).expect("room again");
        }
        assert_eq!(s.used(), 2 * PAGE);
    }

    #[test]
    fn saves_and_loads_through_a_bounce_buffer_in_chunks() {
        let len = BOUNCE * 2 + 5;
        let mut s = Store::open(None, len + PAGE).expect("store");
        let byte = |i: u64| (i % 251) as u8;
        s.save_with(1, len, |at, chunk| {
            for (i, b) in chunk.iter_mut().enumerate() {
                *b = byte(at + i as u64);
            }
            Ok(())
        })
        .expect("save");
        let mut chunks = 0;
        s.load_with(1, len, |at, chunk| {
            chunks += 1;
            assert!(chunk
                .iter()
                .enumerate()
                .all(|(i, &b)| b == byte(at + i as u64)));
            Ok(())
        })
        .expect("load");
        assert_eq!(chunks, 3);
        assert!(s.load_with(2, 1, |_, _| Ok(())).is_err(), "never saved");
    }
}
