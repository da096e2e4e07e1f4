//! An event's end is answered by the client once the server said it
//! (`wormhole-opencl-icd/src/event_state.rs`): the same answers as
//! natively, and no round trip per query of a completed event.

use wormhole_it::{check_pair, native_vs_wormhole, program_and_server, run_env, Route};

/// Queries of one completed event that `event_ends.c` makes at its end.
const STATUS_QUERIES: u64 = 1000;
/// Markers it waits for, one after another, on a drained queue, and on a
/// profiling queue.
const MARKERS: u64 = 300;
const PROFILED: u64 = 5;

/// The round trips the client counted, from its `WORMHOLE_LOG` exit line
/// ("N calls forwarded, M of them round trips (f n, ...), K batched"): the
/// total and those of `func`.
fn round_trips(stderr: &str, func: &str) -> Option<(u64, u64)> {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.contains("of them round trips"))?;
    let (_, after) = line.split_once(" calls forwarded, ")?;
    let total = after.split_whitespace().next()?.parse().ok()?;
    let listed = after.split_once('(')?.1.split_once(')')?.0;
    let of_func = listed
        .split(", ")
        .find_map(|e| e.strip_prefix(func)?.strip_prefix(' '))
        .map_or(Some(0), |n| n.parse().ok())?;
    Some((total, of_func))
}

#[test]
fn ended_events_answer_as_natively_without_round_trips() {
    native_vs_wormhole("event_ends");

    let (dir, bin, server) = program_and_server("event-ends", "event_ends", &[]);
    let log = std::ffi::OsStr::new("1");
    let native = wormhole_it::run(&bin, Route::Native, None, dir.path()).expect("native run");
    let remote = run_env(
        &bin,
        Route::Wormhole,
        Some(&server),
        dir.path(),
        &[("WORMHOLE_LOG", log)],
    )
    .expect("remoted run");
    check_pair("event_ends", &native, &remote, &server.log_text());
    let (total, event_info) = round_trips(&remote.stderr, "clGetEventInfo")
        .unwrap_or_else(|| panic!("no round-trip count in:\n{}", remote.stderr));
    assert!(
        total < STATUS_QUERIES / 10,
        "{total} round trips for {STATUS_QUERIES} queries of a completed event:\n{}",
        remote.stderr
    );
    assert!(
        event_info < 20,
        "{event_info} clGetEventInfo round trips:\n{}",
        remote.stderr
    );
    // Markers on a drained queue: their waits are answered by the client
    // (those on the profiling queue are asked of the server).
    assert!(
        native.stdout.contains(&format!(
            "complete after their wait: {MARKERS} of {MARKERS}"
        )),
        "{}",
        native.stdout
    );
    let (_, waits) = round_trips(&remote.stderr, "clWaitForEvents")
        .unwrap_or_else(|| panic!("no round-trip count in:\n{}", remote.stderr));
    assert!(
        waits < PROFILED + MARKERS / 10,
        "{waits} clWaitForEvents round trips for {MARKERS} markers waited for:\n{}",
        remote.stderr
    );
}

#[test]
fn the_round_trip_count_is_read_from_the_clients_line() {
    let line = "wormhole: 50 calls forwarded, 44 of them round trips (clGetEventInfo 8, \
                clFinish 2), 6 batched";
    assert_eq!(round_trips(line, "clGetEventInfo"), Some((44, 8)));
    let without = "wormhole: 5 calls forwarded, 3 of them round trips (clFinish 3), 2 batched";
    assert_eq!(round_trips(without, "clGetEventInfo"), Some((3, 0)));
    assert_eq!(round_trips("nothing here", "clGetEventInfo"), None);
}
