//! Each OpenCL test program, natively and through Wormhole: both must
//! succeed and print the same results and error codes.

use wormhole_it::native_vs_wormhole;

/// Runs a program and reports how many lines were compared; returns both
/// runs' output.
fn check(name: &str) -> (wormhole_it::RunOutput, wormhole_it::RunOutput) {
    let (native, remote) = native_vs_wormhole(name);
    let n = native.compared_lines().len();
    assert!(n > 5, "{name}: only {n} lines of output");
    assert!(
        remote.stdout.contains("~platform: Wormhole: "),
        "{name}: the remoted run did not use the Wormhole platform:\n{}",
        remote.stdout
    );
    eprintln!("{name}: {n} lines identical natively and through Wormhole");
    (native, remote)
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
    let (native, remote) = check("platform");
    // The device's global memory as each run saw it: through Wormhole no
    // more than natively (the tenant's memory limit may cap what PoCL
    // reports: seen on a CI machine with cgroup v2), and not nothing.
    let gmem = |o: &wormhole_it::RunOutput| -> u64 {
        o.stdout
            .lines()
            .find_map(|l| l.strip_prefix("~global mem "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no global memory line in:\n{}", o.stdout))
    };
    let (n, r) = (gmem(&native), gmem(&remote));
    assert!(
        r > 0 && r <= n,
        "global memory {r} through Wormhole, {n} natively"
    );
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
