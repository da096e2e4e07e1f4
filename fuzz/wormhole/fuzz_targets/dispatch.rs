//! The server's request path: arbitrary bytes as request frames, decoded
//! and dispatched by a real tenant on the real OpenCL platform, seeded with
//! a context, queue, buffers, image, sampler, programs, kernels (one taking
//! every kind of argument, one from a binary without argument information)
//! and event so that valid ids exist. Even first byte: raw frames; odd:
//! mutated template frames (see `wormhole_server::harness`).
#![no_main]

use std::cell::RefCell;
use std::time::{Duration, Instant};

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
            // Launches of every local size the fuzzer tries are compiled and
            // kept by PoCL, in the user's cache by default: there they would
            // grow the seeded program's binary past what the harness's
            // template for it asks (its unit test then fails) and fill the
            // cache. A cache of the fuzzer's own, unless one is named. Set
            // before the first OpenCL call, while this is the only thread.
            if std::env::var_os("POCL_CACHE_DIR").is_none() {
                std::env::set_var(
                    "POCL_CACHE_DIR",
                    std::env::temp_dir().join("wormhole-fuzz-pocl-cache"),
                );
            }
            Harness::new().expect("an OpenCL platform (install pocl-opencl-icd)")
        });
        // State carries from run to run only through the library, so a
        // crash may need the inputs before it: WORMHOLE_FUZZ_TRACE=FILE
        // records every input, one hex line each, for replaying in order.
        if let Some(path) = std::env::var_os("WORMHOLE_FUZZ_TRACE") {
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
                let _ = writeln!(f, "{hex}");
            }
        }
        let before = h.seed_refcounts();
        fuzz_one(h, data);
        // A run must leave the seeded objects as it found them. A count
        // below the start means a reference was dropped twice (a use after
        // free to come); one above may be a command that is still retiring
        // (the library drops its references asynchronously), so it gets a
        // moment to settle.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let now = h.seed_refcounts();
            assert!(
                now.iter().zip(&before).all(|(n, b)| n >= b),
                "a seed lost a reference: {before:?} -> {now:?}"
            );
            if now == before {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "a seed leaked a reference: {before:?} -> {now:?}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    });
});
