//! Arbitrary bytes as task_events and task_usage files, in both error modes: must return
//! rows or errors, never panic or hang; numbers that parse must agree with std; the fast
//! line parser must return exactly the checked parser's row whenever it returns a row
//! (each line of the input, and the input as one line), and the f32 conversion must equal
//! the f64 one rounded to f32. The fast path on a buffer (first line up to its `\n`, as the
//! reader uses it) must give the fast path's row of that line alone and its length + 1.
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
    for line in data.split(|&c| c == b'\n').chain(std::iter::once(data)) {
        let checked = TaskEvent::parse_line_checked(line);
        if let Some(q) = TaskEvent::parse_line_quick(line) {
            assert_eq!(Ok(q), checked, "{line:?}");
        }
        assert_eq!(TaskEvent::parse_line(line), checked, "{line:?}");
        let checked = TaskUsage::parse_line_checked(line);
        if let Some(q) = TaskUsage::parse_line_quick(line) {
            assert_eq!(Ok(q), checked, "{line:?}");
        }
        assert_eq!(TaskUsage::parse_line(line), checked, "{line:?}");
    }
    // The fast path on the buffer at every line start, as the reader calls it.
    let mut at = 0;
    while at <= data.len() {
        let buf = &data[at..];
        let end = buf.iter().position(|&c| c == b'\n');
        let first = &buf[..end.unwrap_or(buf.len())];
        let e = TaskEvent::parse_first_line_quick(buf);
        let want = end.and(TaskEvent::parse_line_quick(first));
        assert_eq!(e, want.map(|r| (r, first.len() + 1)), "{buf:?}");
        let u = TaskUsage::parse_first_line_quick(buf);
        let want = end.and(TaskUsage::parse_line_quick(first));
        assert_eq!(u, want.map(|r| (r, first.len() + 1)), "{buf:?}");
        at += first.len() + 1;
    }
    let want = num::parse_f64_prefix(data).and_then(|(v, n)| {
        if v.is_finite() {
            Ok(((v as f32).to_bits(), n))
        } else {
            Err(num::NumError::Overflow)
        }
    });
    let got = num::parse_f32_prefix(data).map(|(v, n)| (v.to_bits(), n));
    assert_eq!(got, want, "{data:?}");
    if let Ok(v) = num::parse_f64(data) {
        let s = std::str::from_utf8(data).expect("a parsed float is ASCII");
        let want: f64 = s.parse().expect("std accepts what we accept");
        assert!(
            v == want || (v.is_nan() && want.is_nan()),
            "{s}: {v} vs {want}"
        );
    }
    if let Ok(v) = num::parse_u64(data) {
        let s = std::str::from_utf8(data).expect("digits are ASCII");
        assert_eq!(Ok(v), s.parse::<u64>());
    }
});
