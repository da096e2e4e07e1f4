//! Arbitrary bytes as task_events and task_usage files, in both error modes: must return
//! rows or errors, never panic or hang; numbers that parse must agree with std; the
//! fast line parsers must give exactly what the checked ones give.
#![no_main]

use giant_trace::{num, OnError, Record, TaskEvent, TaskUsage, TraceReader};
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
    // The fast line parsers agree with the checked ones on every line, rows and errors.
    for line in data.split(|&b| b == b'\n') {
        assert_eq!(TaskEvent::parse_line(line), TaskEvent::parse_line_checked(line));
        assert_eq!(TaskUsage::parse_line(line), TaskUsage::parse_line_checked(line));
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
