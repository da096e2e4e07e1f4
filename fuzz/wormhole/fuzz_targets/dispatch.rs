//! The server's request path: arbitrary bytes as request frames, decoded
//! and dispatched by a real tenant on the real OpenCL platform, seeded with
//! a context, queue, buffers, image, sampler, program, kernel and event so
//! that valid ids exist. Even first byte: raw frames; odd: mutated valid
//! frames (see `wormhole_server::harness`).
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use wormhole_server::harness::{fuzz_one, Harness};

thread_local! {
    static HARNESS: RefCell<Option<Harness>> = const { RefCell::new(None) };
}

fuzz_target!(|data: &[u8]| {
    HARNESS.with(|cell| {
        let mut slot = cell.borrow_mut();
        // The fuzzer is useless without a platform: fail loudly at start.
        let h = slot.get_or_insert_with(|| {
            Harness::new().expect("an OpenCL platform (install pocl-opencl-icd)")
        });
        fuzz_one(h, data);
    });
});
