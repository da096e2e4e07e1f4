//! A ring's consumer over memory a hostile producer filled, without a
//! peer: what the fuzzer drives.

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
