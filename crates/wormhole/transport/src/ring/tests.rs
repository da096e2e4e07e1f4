//! The ring's in-process tests: both ends in one process, a thread for
//! each side where they must run at once (what `scripts/miri.sh` runs
//! under Miri).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::consumer::{adapt_spin, MIN_SPIN, UNCACHED_READS};
use super::harness::Page;
use super::layout::MARK;
use super::producer::EARLY_WAKE_RECORDS;
use super::*;
use crate::TransportError;

#[test]
fn spin_budget_shrinks_on_long_waits_and_recovers_on_short_ones() {
    let max = 20_000;
    let mut b = max;
    for _ in 0..20 {
        b = adapt_spin(b, max, false);
    }
    assert_eq!(b, MIN_SPIN, "long waits leave only the floor");
    let mut steps = 0;
    while b < max {
        b = adapt_spin(b, max, true);
        steps += 1;
    }
    assert_eq!(b, max, "never above the configured spin");
    assert!(
        steps <= 9,
        "short waits win the spin back quickly ({steps})"
    );
    assert_eq!(adapt_spin(0, 0, false), 0, "no spin configured, none done");
    assert_eq!(
        adapt_spin(10, 10, false),
        10,
        "a spin below the floor is kept"
    );
}

/// A ring of one data page, and a producer and consumer on it.
fn ring(handoff: Handoff) -> (Vec<Page>, Producer, Consumer) {
    let mut mem: Vec<Page> = (0..2).map(|_| Page([0; 4096])).collect();
    let base = mem.as_mut_ptr() as *mut u8;
    // SAFETY: two pages, page aligned, kept alive by the caller for as
    // long as the ends (the Vec's heap block does not move).
    let (p, c) = unsafe {
        (
            Producer::new(base, 4096, handoff, None),
            Consumer::new(base, 4096, handoff, None),
        )
    };
    (mem, p, c)
}

/// Bytes whose every word is a valid-looking record header: if the
/// consumer ever took stale payload for a header, the stream would
/// garble or the test would fail on a length.
fn header_lookalikes(n: usize, seed: u64) -> Vec<u8> {
    (0..n)
        .map(|i| ((MARK | (1 + (i as u64 + seed) % 300)) >> ((i % 8) * 8)) as u8)
        .collect()
}

/// A long batch wakes a sleeping consumer before its flush, once per
/// `EARLY_WAKE_RECORDS` records; same-core never does (the consumer
/// would run on the producer's CPU and only preempt it).
#[test]
#[cfg_attr(miri, ignore = "Miri has no sched_getcpu")]
fn a_long_batch_wakes_a_sleeping_consumer_early() {
    for (handoff, wakes) in [
        (Handoff::Futex, true),
        (Handoff::Spin { polls: 10 }, true),
        (Handoff::SameCore, false),
    ] {
        let (_mem, mut p, _c) = ring(handoff);
        let raw = p.raw;
        let h = raw.hdr();
        // What a consumer leaves behind when it goes to sleep.
        h.consumer_waiting.store(1, Ordering::SeqCst);
        let seq0 = h.data_seq.load(Ordering::SeqCst);
        for i in 1..=EARLY_WAKE_RECORDS + 8 {
            p.write_frame(&[7u8; 8]).expect("write");
            let woken = h.data_seq.load(Ordering::SeqCst).wrapping_sub(seq0);
            let want = if wakes { i / EARLY_WAKE_RECORDS } else { 0 };
            assert_eq!(woken, want, "{handoff:?}, after {i} records");
        }
        p.flush();
        let after = h.data_seq.load(Ordering::SeqCst).wrapping_sub(seq0);
        assert_eq!(
            after,
            if wakes { 2 } else { 1 },
            "{handoff:?}: the flush wakes"
        );
    }
}

#[test]
#[cfg_attr(miri, ignore = "thousands of laps: hours under Miri")]
fn records_stream_across_many_laps_in_order() {
    for handoff in [Handoff::Futex, Handoff::Spin { polls: 1000 }] {
        let (mem, mut p, mut c) = ring(handoff);
        let sizes: Vec<usize> = (0..3000).map(|i| (i * 37) % 1500).collect();
        let expect: Vec<u8> = sizes
            .iter()
            .enumerate()
            .flat_map(|(i, &n)| header_lookalikes(n, i as u64))
            .collect();
        let total = expect.len();
        let writer = std::thread::spawn(move || {
            for (i, &n) in sizes.iter().enumerate() {
                let v = header_lookalikes(n, i as u64);
                let (a, b) = v.split_at(n / 3);
                p.write_parts(&[a, b]).expect("write");
                if i % 7 == 0 {
                    p.flush();
                }
            }
            p.flush();
        });
        let mut got = vec![0u8; total];
        let mut at = 0;
        let mut step = 1;
        while at < total {
            let n = step.min(total - at);
            c.read_exact(&mut got[at..at + n]).expect("read");
            at += n;
            step = step * 7 % 1999 + 1;
        }
        writer.join().expect("writer");
        assert!(got == expect, "stream garbled ({handoff:?})");
        assert!(c.tail > 16 * 4096, "the ring wrapped many times");
        drop(mem);
    }
}

/// A bulk transfer (past [`UNCACHED_READS`]) is copied out with
/// streaming stores: the bytes must
/// still arrive whole and in order, at a destination that is not
/// aligned, across many laps of a ring whose records are large enough
/// for the streaming loop.
#[test]
#[cfg_attr(miri, ignore = "megabytes copied byte by byte: hours under Miri")]
fn a_bulk_transfer_arrives_whole_at_an_unaligned_destination() {
    const CAP: usize = 1 << 20;
    let mut mem: Vec<Page> = (0..CAP / 4096 + 1).map(|_| Page([0; 4096])).collect();
    let base = mem.as_mut_ptr() as *mut u8;
    // SAFETY: CAP + one header page, page aligned, alive until the end
    // of the test, after both ends are gone.
    let (mut p, mut c) = unsafe {
        (
            Producer::new(base, CAP, Handoff::Futex, None),
            Consumer::new(base, CAP, Handoff::Futex, None),
        )
    };
    let n = UNCACHED_READS + 12_345;
    let data: Vec<u8> = (0..n).map(|i| (i * 31 + i / 4099) as u8).collect();
    let sent = data.clone();
    let writer = std::thread::spawn(move || {
        // A small frame first, so the bulk bytes start mid-ring.
        p.write_frame(&[1, 2, 3]).expect("frame");
        p.write_all(&sent).expect("bulk");
        p.flush();
    });
    let mut frame = Vec::new();
    c.read_frame(64, &mut frame, |_, _| Ok(())).expect("frame");
    assert_eq!(frame, [1, 2, 3]);
    let mut got = vec![0u8; n + 3];
    c.read_exact(&mut got[3..]).expect("bulk");
    writer.join().expect("writer");
    assert!(got[3..] == data[..], "bulk bytes garbled");
    assert!(c.tail as usize > 16 * CAP, "the ring wrapped many times");
    drop(c);
    drop(mem);
}

#[test]
#[cfg_attr(miri, ignore = "thousands of laps: hours under Miri")]
fn frames_behind_their_length_stream_across_many_laps() {
    let (mem, mut p, mut c) = ring(Handoff::Futex);
    // Up to 1,500 bytes: small frames take the one-record path, large
    // ones (beyond a record's 512) the general one.
    let sizes: Vec<usize> = (0..3000).map(|i| (i * 53) % 1500).collect();
    let frame = |i: usize, n: usize| header_lookalikes(n, i as u64);
    let expect: Vec<u8> = sizes
        .iter()
        .enumerate()
        .flat_map(|(i, &n)| {
            let mut v = (n as u64).to_le_bytes().to_vec();
            v.extend(frame(i, n));
            v
        })
        .collect();
    let writer = std::thread::spawn(move || {
        for (i, &n) in sizes.iter().enumerate() {
            p.write_frame(&frame(i, n)).expect("write");
            if i % 5 == 0 {
                p.flush();
            }
        }
        p.flush();
    });
    let mut got = vec![0u8; expect.len()];
    c.read_exact(&mut got).expect("read");
    writer.join().expect("writer");
    assert!(got == expect, "stream garbled");
    assert!(c.tail > 16 * 4096, "the ring wrapped many times");
    drop(mem);
}

#[test]
fn a_held_record_is_seen_only_once_another_thread_publishes_it() {
    let (mem, mut p, mut c) = ring(Handoff::Futex);
    let mut buf = Vec::new();
    // Many laps, so that held records wrap around the ring's end too.
    for i in 0..400u32 {
        let held = p
            .write_frame_held(&i.to_le_bytes())
            .expect("write")
            .expect("one record");
        assert!(
            !c.wait_data_for(Duration::from_micros(50)).expect("wait"),
            "record {i} seen before it was published"
        );
        // Published by another thread, as the library's thread does;
        // the join orders the writer's stores before it.
        let mut held = held;
        held.patch(0, &(i + 1).to_le_bytes());
        held.patch(2, &[0; 8]);
        std::thread::spawn(move || held.publish())
            .join()
            .expect("publisher");
        assert!(c.wait_data_for(Duration::from_secs(5)).expect("wait"));
        c.read_frame(64, &mut buf, |_, _| panic!("one record"))
            .expect("read");
        assert_eq!(buf, (i + 1).to_le_bytes(), "record {i}, patched");
        // An ordinary frame right behind it arrives in order.
        p.write_frame(b"next").expect("write");
        p.flush();
        c.read_frame(64, &mut buf, |_, _| panic!("one record"))
            .expect("read");
        assert_eq!(buf, b"next");
    }
    assert!(c.tail > 4 * 4096, "the ring wrapped");
    assert!(
        p.write_frame_held(&[0u8; 4096]).expect("write").is_none(),
        "a frame of several records cannot be held"
    );
    drop(mem);
}

#[test]
fn a_frame_in_one_record_is_read_whole_and_a_forged_length_is_not() {
    // One record: header, the frame's length, the frame.
    let image = |prefix: u64, frame: &[u8]| {
        let mut v = record_header(8 + frame.len() as u32).to_le_bytes().to_vec();
        v.extend(prefix.to_le_bytes());
        v.extend(frame);
        v
    };
    let ok = harness::read_image(&image(5, b"hello"), &[0]).expect("a frame");
    assert_eq!(ok, b"hello");
    // A length that does not match the record: left to the general path
    // (which the harness does not run), nothing read.
    let short = harness::read_image(&image(4, b"hello"), &[0]).expect("no frame");
    assert!(short.is_empty());
    assert!(matches!(
        harness::read_image(&image(1 << 40, b"hello"), &[0]),
        Err(TransportError::FrameTooLarge { .. })
    ));
}

#[test]
fn a_forged_record_header_is_refused() {
    for word in [MARK, 0x1234_5678_0000_0010, MARK | 4096, MARK | 0xffff_ffff] {
        let img = word.to_le_bytes();
        let r = harness::read_image(&img, &[8]);
        assert!(
            matches!(r, Err(TransportError::Corrupt(_))),
            "{word:#x} was accepted"
        );
    }
    // A well-formed record is read, and nothing past it.
    let mut img = (MARK | 3).to_le_bytes().to_vec();
    img.extend_from_slice(b"abc");
    assert_eq!(
        harness::read_image(&img, &[2, 5, 5]).expect("read"),
        b"abc".to_vec()
    );
}

#[test]
fn a_forged_tail_is_refused() {
    let (mem, mut p, _c) = ring(Handoff::Futex);
    p.write_all(&[1u8; 3000]).expect("nearly fills the ring");
    // The consumer claims to have read more than was written; the
    // producer looks at the claim when its cached tail leaves too
    // little room for the next write.
    p.raw.hdr().tail.store(1 << 40, Ordering::Release);
    assert!(matches!(
        p.write_all(&[2u8; 1000]),
        Err(TransportError::Corrupt(_))
    ));
    drop(mem);
}
