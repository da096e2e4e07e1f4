//! Arbitrary bytes as /proc/stat, a status file, a cpulist and a cpumask: errors, never panics.
#![no_main]

use giant_rebalance::procfs::{parse_status, parse_steal};
use giant_rebalance::CpuSet;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse_steal(&text);
    let _ = parse_status(&text);
    if let Ok(s) = CpuSet::parse_list(&text) {
        assert_eq!(CpuSet::parse_list(&s.to_list()), Ok(s.clone()));
        assert_eq!(CpuSet::parse_mask(&s.to_mask()).ok(), if s.is_empty() { Some(CpuSet::default()) } else { Some(s) });
    }
    if let Ok(s) = CpuSet::parse_mask(&text) {
        assert_eq!(CpuSet::parse_list(&s.to_list()), Ok(s));
    }
});
