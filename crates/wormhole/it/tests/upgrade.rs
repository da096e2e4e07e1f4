//! Replacing the server's binary under a running server (a rebuild, a
//! package upgrade) must not stop it from serving new clients: tenants
//! start from the binary the server was started from.

use wormhole_it::{compile, run, Artifacts, Route, Server, TempDir};

#[test]
fn new_clients_are_served_after_the_binary_is_replaced() {
    let a = Artifacts::get().expect("artifacts");
    let dir = TempDir::new("upgrade").expect("scratch");
    let bin = compile("fork", dir.path()).expect("compile");
    let copy = wormhole_it::Artifacts {
        server: dir.path().join("wormhole-server"),
        icd: a.icd.clone(),
        run: a.run.clone(),
    };
    std::fs::copy(&a.server, &copy.server).expect("copying the server");
    let server = Server::start(&copy, dir.path()).expect("server");
    let before = run(&bin, Route::Wormhole, Some(&server), dir.path()).expect("run");
    assert!(before.ok(), "before:\n{}\n{}", before.stdout, before.stderr);
    // As an installer does: a new file under the same name.
    std::fs::remove_file(&copy.server).expect("removing the binary");
    std::fs::write(&copy.server, b"#!/bin/false\n").expect("replacing the binary");
    let after = run(&bin, Route::Wormhole, Some(&server), dir.path()).expect("run");
    assert!(
        after.ok(),
        "after the binary was replaced:\n{}\n{}\nserver log:\n{}",
        after.stdout,
        after.stderr,
        server.log_text()
    );
    assert_eq!(before.stdout, after.stdout);
}
