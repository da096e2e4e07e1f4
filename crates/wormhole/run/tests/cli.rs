//! `wormhole-run` as a user meets it, without a device: it runs the command
//! whatever the server's state, and says so when nothing listens where the
//! program will look.

use std::os::unix::net::UnixListener;
use std::process::Command;

fn run(server: &str) -> (bool, String) {
    // Any existing file will do as the client library: `true` never loads it.
    let icd = std::env::current_exe().expect("test binary path");
    let out = Command::new(env!("CARGO_BIN_EXE_wormhole-run"))
        .args([
            "--icd",
            &icd.display().to_string(),
            "--server",
            server,
            "--",
            "true",
        ])
        .output()
        .expect("running wormhole-run");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_server_is_named_and_the_command_still_runs() {
    let (ok, stderr) = run("unix:/nonexistent-dir/wormhole.sock");
    assert!(ok, "the command's own status is the result: {stderr}");
    assert!(
        stderr.contains("no Wormhole server at /nonexistent-dir/wormhole.sock"),
        "{stderr}"
    );
}

#[test]
fn a_listening_socket_gets_no_warning() {
    let dir = std::env::temp_dir().join(format!("wormhole-run-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let sock = dir.join("s.sock");
    let _listener = UnixListener::bind(&sock).expect("bind");
    let (ok, stderr) = run(&sock.display().to_string());
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("no Wormhole server"), "{stderr}");
}

/// Runs `wormhole-run -- ARGS` against a server that is not there.
fn run_command(args: &[&str]) -> std::process::Output {
    let icd = std::env::current_exe().expect("test binary path");
    Command::new(env!("CARGO_BIN_EXE_wormhole-run"))
        .args(["--icd", &icd.display().to_string()])
        .args(["--server", "unix:/nonexistent-dir/w.sock", "--"])
        .args(args)
        .output()
        .expect("running wormhole-run")
}

/// The command's status as a shell reports it, so scripts can tell an abort
/// (134) from a segfault (139) or an ordinary failure.
#[test]
fn the_commands_exit_code_or_signal_is_passed_on() {
    let status = |script: &str| run_command(&["sh", "-c", script]).status.code();
    assert_eq!(status("exit 7"), Some(7));
    assert_eq!(status("kill -ABRT $$"), Some(134));
    assert_eq!(status("kill -SEGV $$"), Some(139));
}

/// A command that cannot be started: the shell's codes and a plain message.
#[test]
fn a_missing_or_unrunnable_command_exits_127_or_126() {
    let out = run_command(&["/nonexistent/program"]);
    assert_eq!(out.status.code(), Some(127));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("wormhole-run: /nonexistent/program: "),
        "{stderr}"
    );
    // A directory exists but cannot be executed.
    assert_eq!(run_command(&["/"]).status.code(), Some(126));
}
