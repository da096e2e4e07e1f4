//! The shared-memory ring's consumer over memory a hostile producer wrote:
//! record headers anywhere, any lengths, reads of any size and whole frames.
//! It must return bytes or an error, never panic or read outside the ring.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wormhole_transport::ring::harness::{read_image, CAP};

fuzz_target!(|data: &[u8]| {
    // The first 32 bytes choose the reads (16 sizes); the rest is the ring.
    let (sizes, image) = data.split_at(data.len().min(32));
    let reads: Vec<u16> = sizes
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], *c.get(1).unwrap_or(&0)]) % (2 * CAP as u16))
        .collect();
    if let Ok(out) = read_image(image, &reads) {
        // A read of 0 is a whole frame (`read_frame`), at most a ring's worth.
        let asked: usize = reads
            .iter()
            .map(|&r| if r == 0 { CAP } else { r as usize })
            .sum();
        // Records may repeat as the reads wrap around the ring: the bound
        // is what was asked for.
        assert!(out.len() <= asked);
    }
});
