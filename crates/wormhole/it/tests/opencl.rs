//! Each OpenCL test program, natively and through Wormhole: both must
//! succeed and print the same results and error codes.

use wormhole_it::native_vs_wormhole;

/// Runs a program and reports how many lines were compared.
fn check(name: &str) {
    let (native, remote) = native_vs_wormhole(name);
    let n = native.compared_lines().len();
    assert!(n > 5, "{name}: only {n} lines of output");
    assert!(
        remote.stdout.contains("~platform: Wormhole: "),
        "{name}: the remoted run did not use the Wormhole platform:\n{}",
        remote.stdout
    );
    eprintln!("{name}: {n} lines identical natively and through Wormhole");
}

#[test]
fn buffers() {
    check("buffers");
}

#[test]
fn images() {
    check("images");
}

#[test]
fn programs() {
    check("programs");
}

#[test]
fn kernels() {
    check("kernels");
}

#[test]
fn events() {
    check("events");
}

#[test]
fn gated() {
    check("gated");
}

#[test]
fn gated_maps() {
    check("gated_maps");
}

#[test]
fn callbacks() {
    check("callbacks");
}

#[test]
fn image_host_ptr() {
    check("image_host_ptr");
}

#[test]
fn local_answers() {
    check("local_answers");
}

#[test]
fn includes() {
    check("includes");
}

#[test]
fn errors() {
    check("errors");
}

#[test]
fn platform() {
    check("platform");
}

#[test]
fn large() {
    check("large");
}

#[test]
fn info() {
    check("info");
}

#[test]
fn waits() {
    check("waits");
}
