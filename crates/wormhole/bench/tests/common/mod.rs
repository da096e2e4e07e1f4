//! What the wh-bench tests share: running the binary and reading its
//! result.

use std::process::Command;

/// Runs `cmd` (a wh-bench command), asserts that it succeeded, and returns
/// the JSON of its `RESULT ` line; `what` names the run in failures.
pub fn result_json(cmd: &mut Command, what: &str) -> serde_json::Value {
    let out = cmd.output().expect("run wh-bench");
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let json = text
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("{what}: no RESULT line in {text}"));
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{what}: {e}: {json}"))
}
