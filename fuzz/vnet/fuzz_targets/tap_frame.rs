//! Transmit path: a virtio-net header and frame as read from a TAP. Segmentation and
//! checksum completion must never panic, and segments must carry the payload in order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vnet_core::frame::EthHeader;
use vnet_core::gso;
use vnet_core::vnethdr::{VnetHdr, VNET_HDR_LEN};

fuzz_target!(|data: &[u8]| {
    let Ok(vh) = VnetHdr::parse(data) else { return };
    let mut frame = data[VNET_HDR_LEN..].to_vec();
    let _ = EthHeader::parse(&frame);
    if vh.is_gso() {
        let mut segs = Vec::new();
        if gso::segment(&frame, &vh, &mut segs).is_ok() {
            let mut next = None;
            for s in &segs {
                if let Some(n) = next {
                    assert_eq!(s.payload.start, n);
                }
                assert!(s.payload.end <= frame.len());
                next = Some(s.payload.end);
            }
        }
    } else {
        let _ = gso::complete_csum(&mut frame, &vh);
    }
});
