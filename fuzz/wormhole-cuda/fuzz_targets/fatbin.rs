//! Fat binaries, cubins and PTX come from clients: parsing one must never
//! panic or read out of bounds, and what it accepts must be self-consistent.
#![no_main]
use libfuzzer_sys::fuzz_target;
use wormhole_cuda_api::fatbin;
use wormhole_cuda_api::launch;

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = fatbin::entries(data) {
        for e in &entries {
            assert!(e.payload.end <= data.len());
        }
    }
    let _ = fatbin::cubin_kernels(data);
    if let Ok(kernels) = fatbin::ptx_kernels(data) {
        for k in &kernels {
            let buf = vec![0u8; k.param_bytes()];
            launch::unpack(k, &buf).expect("a PTX kernel's layout fits its block");
        }
    }
    if let Ok(kernels) = fatbin::kernels(data) {
        for k in &kernels {
            let buf = vec![0u8; k.param_bytes()];
            let offs = launch::unpack(k, &buf).expect("a kernel's own layout fits its block");
            assert_eq!(offs.len(), k.params.len());
        }
    }
});
