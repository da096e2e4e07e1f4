//! The hand-written CUDA requests decode untrusted bytes: never a panic,
//! and what decodes re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use wormhole_cuda_api::wire::{Launch, Memcpy, SymbolCopy};
use wormhole_wire::{Decoder, Encoder};

fuzz_target!(|data: &[u8]| {
    let mut d = Decoder::new(data);
    if let Ok(m) = Memcpy::decode(&mut d) {
        let mut e = Encoder::new();
        m.encode(&mut e);
        assert_eq!(e.as_slice(), &data[..d.position()]);
    }
    let mut d = Decoder::new(data);
    if let Ok(c) = SymbolCopy::decode(&mut d) {
        let mut e = Encoder::new();
        c.encode(&mut e);
        assert_eq!(e.as_slice(), &data[..d.position()]);
    }
    let mut d = Decoder::new(data);
    if let Ok(l) = Launch::decode(&mut d) {
        let mut e = Encoder::new();
        l.encode(&mut e);
        assert_eq!(e.as_slice(), &data[..d.position()]);
    }
});
