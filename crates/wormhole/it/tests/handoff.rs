//! Programs that exercise waiting (events, user events, threads, large
//! streamed transfers) under the server's other handoff modes, and with
//! buffers kept in the tenant's own memory.

#[test]
fn handoff_spin_matches_native() {
    wormhole_it::native_vs_wormhole_server_args(
        &["events", "gated", "callbacks", "large"],
        &["--handoff", "spin"],
    );
}

#[test]
fn handoff_same_core_matches_native() {
    wormhole_it::native_vs_wormhole_server_args(
        &["events", "gated", "large", "waits"],
        &["--handoff", "same-core"],
    );
}

#[test]
fn without_shared_buffers_matches_native() {
    wormhole_it::native_vs_wormhole_server_args(
        &[
            "buffers",
            "gated",
            "gated_maps",
            "callbacks",
            "image_host_ptr",
            "large",
        ],
        &["--no-shared-buffers"],
    );
}

#[test]
fn a_client_that_cannot_map_the_arena_matches_native() {
    wormhole_it::native_vs_wormhole_without_client_arena(&["buffers", "gated_maps", "large"]);
}
