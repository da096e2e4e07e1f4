//! Copies of bulk data between shared memory and an application's buffers.
//!
//! glibc's `memcpy` copies mid-sized and large blocks with `rep movsb` on CPUs
//! that advertise fast string moves (ERMS/FSRM). On AMD EPYC (measured on the
//! benchmark machine, glibc 2.36) that instruction runs at a quarter of its
//! speed when the destination lies a few bytes *after* the source modulo a
//! page (`(dst - src) % 4096` in 1..=63): 1.3-2.2 GB/s against 8-9 GB/s for
//! any other distance (`docs/benchmarks-wormhole.md`). That distance is not
//! ours to choose: the application's buffer is usually `malloc`'s, 16 bytes
//! past a page, and device buffers start on a page, so every read of a buffer
//! hit it. Copies above glibc's non-temporal threshold (192 MiB there) take
//! another path, which is as slow for distances up to a few hundred bytes
//! (3.3-4.9 GB/s against 10-12.6 from 512 bytes on). A plain vector loop
//! has neither hazard, so we use one in those cases, with non-temporal
//! stores from 16 MiB on: the destination will not stay in cache anyway, and
//! skipping the read-for-ownership of every line measured 1.2x faster than
//! the plain loop there. Every other copy is left to `memcpy`, which is as
//! fast as anything we could write.
//!
//! Intel CPUs have no such hazard (Xeon, glibc 2.36: 11.4-12.7 GB/s at every
//! distance), and there the loop is the slower copy (8 GB/s against 12 for a
//! 256 MiB write into the arena), so it is taken only on AMD's cores.

/// Below this, the distance makes no measurable difference (glibc uses
/// vector moves for small blocks anyway).
const MIN_LOOP: usize = 4096;

/// From this size on, stores bypass the cache.
const MIN_STREAM: usize = 16 << 20;

/// How far `dst` lies after `src`, modulo a page.
fn forward_distance(dst: *const u8, src: *const u8) -> usize {
    (dst as usize).wrapping_sub(src as usize) % 4096
}

/// Copies `len` bytes from `src` to `dst`.
///
/// # Safety
/// As for [`std::ptr::copy_nonoverlapping`]: `src` is readable and `dst`
/// writable for `len` bytes, and the two do not overlap.
#[inline]
pub unsafe fn copy_bulk(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: `src` readable and `dst` writable for `len` bytes, apart: this
    // function's contract, which is also all that `copy_avoiding` asks.
    unsafe { copy_avoiding(distance_hazard(), dst, src, len) }
}

/// Whether this CPU's `rep movsb` slows down at short forward distances:
/// AMD's Zen cores (and Hygon's, which are Zen), by their CPUID vendor.
#[cfg(all(target_arch = "x86_64", not(miri)))]
fn distance_hazard() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not asked yet; 1: no; 2: yes. A race only asks twice.
    static KNOWN: AtomicU8 = AtomicU8::new(0);
    match KNOWN.load(Ordering::Relaxed) {
        0 => {
            let v = std::arch::x86_64::__cpuid(0);
            let mut vendor = [0u8; 12];
            vendor[..4].copy_from_slice(&v.ebx.to_le_bytes());
            vendor[4..8].copy_from_slice(&v.edx.to_le_bytes());
            vendor[8..].copy_from_slice(&v.ecx.to_le_bytes());
            let amd = &vendor == b"AuthenticAMD" || &vendor == b"HygonGenuine";
            KNOWN.store(if amd { 2 } else { 1 }, Ordering::Relaxed);
            amd
        }
        k => k == 2,
    }
}

/// Elsewhere, and under Miri (which runs no CPUID), the plain copy.
#[cfg(any(not(target_arch = "x86_64"), miri))]
fn distance_hazard() -> bool {
    false
}

/// Copies `len` bytes from `src` to `dst` with stores that bypass the
/// cache: for a destination that is one piece of a transfer too large to
/// stay cached. A transfer through a ring arrives in pieces of at most a
/// quarter of it, which `memcpy` copies with ordinary stores, so every line
/// of the destination is first read from memory and later written back: a
/// third more memory traffic than the single non-temporal copy a native
/// transfer of that size makes, and on a machine whose memory bandwidth
/// bounds the copy, a third less speed. Ends with a store fence, so the
/// bytes are ordered before whatever the caller publishes next.
///
/// # Safety
/// As for [`copy_bulk`].
#[inline]
pub unsafe fn copy_bulk_uncached(dst: *mut u8, src: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    if len >= MIN_LOOP {
        // SAFETY: this function's caller gives `copy_bulk`'s guarantees
        // (readable `src`, writable `dst`, `len` bytes each, apart), which
        // are all `stream_copy` asks; it aligns `dst` itself.
        unsafe { stream_copy(dst, src, len) };
        return;
    }
    // SAFETY: `src` readable and `dst` writable for `len` bytes, apart (this
    // function's contract): all that `copy_bulk` asks.
    unsafe { copy_bulk(dst, src, len) };
}

/// [`copy_bulk`], with the distance workaround on or off (`hazard`).
///
/// # Safety
/// As for [`copy_bulk`].
#[inline]
unsafe fn copy_avoiding(hazard: bool, dst: *mut u8, src: *const u8, len: usize) {
    #[cfg(not(target_arch = "x86_64"))]
    let _ = hazard;
    // Small copies, most of a ring's, leave at the first test.
    #[cfg(target_arch = "x86_64")]
    if hazard && len >= MIN_LOOP {
        let d = forward_distance(dst, src);
        if len >= MIN_STREAM && (1..512).contains(&d) {
            // SAFETY: `src` readable, `dst` writable for `len` bytes and
            // apart (this function's contract) is all `stream_copy` asks.
            unsafe { stream_copy(dst, src, len) };
            return;
        }
        if (1..64).contains(&d) {
            // SAFETY: `sse2_copy` asks only readable `src` and writable `dst`
            // for `len` bytes, apart (this function's contract), no alignment.
            unsafe { sse2_copy(dst, src, len) };
            return;
        }
    }
    // SAFETY: `copy_nonoverlapping`'s conditions are this function's contract:
    // `len` readable bytes at `src`, `len` writable at `dst`, not overlapping.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
}

/// [`copy_bulk`] between slices of equal length.
///
/// # Panics
/// If the lengths differ (a bug in the caller, as with `copy_from_slice`).
pub fn copy_bulk_slice(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_bulk_slice: lengths differ");
    // SAFETY: two distinct borrows (one is `&mut`), each `len` bytes long.
    unsafe { copy_bulk(dst.as_mut_ptr(), src.as_ptr(), src.len()) }
}

/// 64 bytes per step with unaligned 16-byte loads and stores (SSE2 is part of
/// x86_64, so no feature check), then `memcpy` for the tail.
///
/// # Safety
/// As for [`copy_bulk`].
#[cfg(target_arch = "x86_64")]
unsafe fn sse2_copy(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: both buffers hold `len` bytes and do not overlap (this
    // function's contract); `copy_blocks` returns `i <= len`, so the tail
    // `i..len` lies inside both; unaligned 16-byte stores need no alignment.
    unsafe {
        let i = copy_blocks::<false>(dst, src, 0, len);
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
    }
}

/// Like [`sse2_copy`], with non-temporal stores to a 64-byte aligned
/// destination, and a store fence at the end so that the bytes are ordered
/// before whatever the caller publishes next (non-temporal stores are not).
///
/// # Safety
/// As for [`copy_bulk`].
#[cfg(target_arch = "x86_64")]
unsafe fn stream_copy(dst: *mut u8, src: *const u8, len: usize) {
    let head = dst.align_offset(64).min(len);
    // SAFETY: `head <= len`: inside both buffers; from `head` on, `dst` is
    // 64-byte aligned, as `copy_blocks::<true>` requires; a fence has no
    // memory operands; the tail lies inside both buffers.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        let i = copy_blocks::<true>(dst, src, head, len);
        std::arch::x86_64::_mm_sfence();
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
    }
}

/// Copies whole 64-byte blocks from offset `from` on, while one is left;
/// returns where it stopped. `STREAM`: non-temporal stores.
///
/// # Safety
/// As for [`copy_bulk`], and with `STREAM`, `dst + from` is 64-byte aligned.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn copy_blocks<const STREAM: bool>(
    dst: *mut u8,
    src: *const u8,
    from: usize,
    len: usize,
) -> usize {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_stream_si128};
    let mut i = from;
    while i + 64 <= len {
        // SAFETY: `i + 64 <= len`, so all four 16-byte blocks lie inside
        // both buffers (`len` bytes each: this function's contract); loads may be unaligned, and with
        // `STREAM` each store is 16-byte aligned (`dst + from` is 64-byte
        // aligned and steps are 64), as `_mm_stream_si128` requires.
        unsafe {
            let s = src.add(i) as *const __m128i;
            let d = dst.add(i) as *mut __m128i;
            let v = [
                _mm_loadu_si128(s),
                _mm_loadu_si128(s.add(1)),
                _mm_loadu_si128(s.add(2)),
                _mm_loadu_si128(s.add(3)),
            ];
            for (k, x) in v.into_iter().enumerate() {
                if STREAM {
                    _mm_stream_si128(d.add(k), x);
                } else {
                    _mm_storeu_si128(d.add(k), x);
                }
            }
        }
        i += 64;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`copy_bulk_slice`] with the workaround on or off.
    fn copy_with(hazard: bool, dst: &mut [u8], src: &[u8]) {
        assert_eq!(dst.len(), src.len());
        // SAFETY: two distinct borrows of equal length.
        unsafe { copy_avoiding(hazard, dst.as_mut_ptr(), src.as_ptr(), src.len()) };
    }

    /// Copies `src` into `dst` at `doff` (the rest of `dst` filled with a
    /// marker first) and checks that exactly those bytes changed, to `src`.
    #[track_caller]
    fn copy_exactly(hazard: bool, dst: &mut [u8], doff: usize, src: &[u8]) {
        let len = src.len();
        dst.fill(0xEE);
        copy_with(hazard, &mut dst[doff..doff + len], src);
        let at = format!("len {len} dst+{doff} hazard {hazard}");
        assert!(dst[doff..doff + len] == *src, "{at}: bytes differ");
        assert!(
            dst[..doff].iter().all(|&b| b == 0xEE),
            "{at}: wrote before dst"
        );
        assert!(
            dst[doff + len..].iter().all(|&b| b == 0xEE),
            "{at}: wrote past dst"
        );
    }

    #[test]
    fn the_workaround_is_taken_on_amd_only() {
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
            return;
        };
        let vendor = info
            .lines()
            .find_map(|l| l.strip_prefix("vendor_id"))
            .and_then(|v| v.split(':').nth(1))
            .map(str::trim);
        let Some(vendor) = vendor else { return };
        assert_eq!(
            distance_hazard(),
            vendor == "AuthenticAMD" || vendor == "HygonGenuine",
            "vendor {vendor}"
        );
    }

    #[test]
    fn every_distance_and_length_copies_exactly() {
        let src: Vec<u8> = (0..3 * 4096 + 200).map(|i| (i * 131 + 7) as u8).collect();
        let mut dst = vec![0u8; 4 * 4096 + 300];
        // Lengths around the loop's threshold and step; offsets that give
        // both short forward distances (the loop) and others (memcpy).
        for (len, hazard) in [0, 1, 63, 4095, 4096, 4097, 4096 + 63, 2 * 4096 + 65]
            .into_iter()
            .flat_map(|l| [(l, true), (l, false)])
        {
            for so in [0usize, 1, 16, 100] {
                for doff in [0usize, 1, 8, 16, 63, 64, 4095] {
                    copy_exactly(hazard, &mut dst, doff, &src[so..so + len]);
                }
            }
        }
    }

    #[test]
    fn streamed_copies_are_exact_at_any_alignment() {
        let len = MIN_STREAM + 4096 + 37;
        // Short forward distances (streamed) and others (memcpy).
        let src: Vec<u8> = (0..len + 64).map(|i| (i * 131 + 7) as u8).collect();
        let mut dst = vec![0u8; len + 640];
        let cases = [(0, 0), (0, 16), (16, 63), (1, 200), (0, 600), (63, 1)];
        for ((so, doff), hazard) in cases.into_iter().flat_map(|c| [(c, true), (c, false)]) {
            copy_exactly(hazard, &mut dst, doff, &src[so..so + len]);
        }
    }

    #[test]
    fn distances_are_forward_and_modulo_a_page() {
        let base = 0x10000 as *const u8;
        let at = |d: usize| (base as usize + d) as *const u8;
        assert_eq!(forward_distance(at(16), base), 16);
        assert_eq!(forward_distance(at(4096 + 1), base), 1);
        assert_eq!(forward_distance(base, base), 0);
        assert_eq!(forward_distance(base, at(16)), 4080);
    }
}
