//! The raw ping-pongs between two real processes: each primitive completes
//! its round trips and reports a sane summary (no speed is asserted).

use std::process::Command;

mod common;

fn pingpong(prim: &str) -> serde_json::Value {
    common::result_json(
        Command::new(env!("CARGO_BIN_EXE_wh-bench")).args([
            "pingpong", "--prim", prim, "--iters", "300", "--warmup", "20",
        ]),
        prim,
    )
}

#[test]
fn every_primitive_round_trips() {
    for prim in [
        "futex",
        "spin",
        "tcp",
        "chan-futex",
        "chan-spin",
        "chan-same-core",
    ] {
        let s = pingpong(prim);
        assert_eq!(s["n"], 300, "{prim}");
        let med = s["median_ns"].as_f64().expect("median");
        let p99 = s["p99_ns"].as_f64().expect("p99");
        assert!(med > 0.0 && p99 >= med, "{prim}: {s}");
    }
}

#[test]
fn bad_child_arguments_fail_cleanly() {
    let out = Command::new(env!("CARGO_BIN_EXE_wh-bench"))
        .args(["pingpong-child", "word", "0", "999", "5", "-"])
        .output()
        .expect("run wh-bench");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("fd not open"));
}
