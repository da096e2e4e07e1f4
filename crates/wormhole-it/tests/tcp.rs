//! The same programs through Wormhole's TCP transport (no shared memory).
//! `events` is left out: event and destructor callbacks need the shared
//! memory transport, and over TCP they fail with CL_INVALID_OPERATION, by
//! design (see docs/wormhole-opencl.md).

#[test]
fn tcp_matches_native() {
    wormhole_it::native_vs_wormhole_tcp(&[
        "buffers", "images", "kernels", "programs", "errors", "platform",
    ]);
}

/// Over TCP, an event callback cannot be delivered: Wormhole says so with
/// CL_INVALID_OPERATION (-59) rather than never calling it.
#[test]
fn tcp_event_callbacks_are_refused_honestly() {
    let out = wormhole_it::wormhole_tcp_only("events");
    assert!(
        !out.ok(),
        "events unexpectedly passed over TCP:\n{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("clSetEventCallback") && out.stderr.contains("failed: -59"),
        "expected clSetEventCallback to fail with CL_INVALID_OPERATION:\n{}",
        out.stderr
    );
    // What came before the callback ran.
    assert!(out.stdout.contains("chain: ok") && out.stdout.contains("profiling 1: "));
}
