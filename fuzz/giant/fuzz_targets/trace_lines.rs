//! Arbitrary bytes as task_events and task_usage files, in both error modes: must return
//! rows or errors, never panic or hang; numbers that parse must agree with std.
#![no_main]

use giant_trace::{num, OnError, TaskEvent, TaskUsage, TraceReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for mode in [OnError::Fail, OnError::Skip] {
        for r in TraceReader::<_, TaskEvent>::new(data, "fuzz", mode) {
            if r.is_err() {
                break;
            }
        }
        for r in TraceReader::<_, TaskUsage>::new(data, "fuzz", mode) {
            if r.is_err() {
                break;
            }
        }
    }
    if let Ok(v) = num::parse_f64(data) {
        let s = std::str::from_utf8(data).expect("a parsed float is ASCII");
        let want: f64 = s.parse().expect("std accepts what we accept");
        assert!(v == want || (v.is_nan() && want.is_nan()), "{s}: {v} vs {want}");
    }
    if let Ok(v) = num::parse_u64(data) {
        let s = std::str::from_utf8(data).expect("digits are ASCII");
        assert_eq!(Ok(v), s.parse::<u64>());
    }
});
