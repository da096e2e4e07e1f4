//! A forked child must not use its parent's connection (see
//! tests/opencl/fork.c); Wormhole only, since natively the child may.

use wormhole_it::{program_and_server, run, Route};

#[test]
fn a_forked_child_is_refused_and_the_parent_goes_on() {
    let (dir, bin, server) = program_and_server("fork", "fork", &[]);
    let out = run(&bin, Route::Wormhole, Some(&server), dir.path()).expect("run");
    assert!(out.ok(), "fork.c failed:\n{}\n{}", out.stdout, out.stderr);
    let lines: Vec<&str> = out.stdout.lines().filter(|l| !l.starts_with('~')).collect();
    assert_eq!(
        lines,
        [
            "parent before: 0",
            "child: -5", // CL_OUT_OF_RESOURCES
            "parent after: 0",
            "parent kernel: 7 7 7 7",
        ],
        "stderr:\n{}",
        out.stderr
    );
}
