//! Both ways of answering a blocking wait over shared memory, whichever
//! `held_replies = auto` picks on this machine: published by the library's
//! worker (`on`) and by the tenant's thread (`off`), each matching native.

use wormhole_it::native_vs_wormhole_server_args;

const PROGRAMS: &[&str] = &["waits", "events", "event_ends", "gated"];

#[test]
fn replies_published_by_the_librarys_worker_match_native() {
    native_vs_wormhole_server_args(PROGRAMS, &["--held-replies", "on"]);
}

#[test]
fn replies_published_by_the_tenants_thread_match_native() {
    native_vs_wormhole_server_args(PROGRAMS, &["--held-replies", "off"]);
}
