//! Random commands, sizes, frees, maps, direct writes, busy and silent
//! tenants, kills and time, through tenants' object state and a device's
//! ledger, checked against a model of every object's contents
//! (`wormhole_residency::sim`, which panics on the first broken rule).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    wormhole_residency::sim::run_bytes(data);
});
