//! The in-process marshalling measurement runs a real forwarded
//! clGetEventInfo through the server's generated dispatch on PoCL (which
//! scripts/test-wormhole-bench.sh installs) and reports consistent figures.

use std::process::Command;

mod common;

#[test]
fn marshal_round_trips_through_the_real_dispatch() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wh-bench"));
    cmd.args(["marshal", "--batches", "10", "--batch", "50"]);
    if let Some(icd) = std::fs::read_dir("/etc/OpenCL/vendors")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("pocl"))
    {
        cmd.env("OCL_ICD_VENDORS", icd);
    }
    let v = common::result_json(&mut cmd, "marshal");
    // Header 8 + id 8 + param 4 + size 8 + two flags = 30 bytes.
    assert_eq!(v["request_bytes"], 30);
    let native = v["native_ns"].as_f64().expect("native");
    let inproc = v["inprocess_ns"].as_f64().expect("inprocess");
    assert!(native > 0.0 && inproc > 0.0);
    assert!(v["marshal_ns"].as_f64().expect("marshal") >= 0.0);
}
