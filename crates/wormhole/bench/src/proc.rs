//! Running benchmark processes with a hard time bound, and the line protocol
//! of `whbench` (READY / RESULT / HOLD).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ProcError {
    #[error("starting {cmd}: {err}")]
    Spawn { cmd: String, err: std::io::Error },
    #[error("{cmd} took longer than {secs} s and was killed")]
    Timeout {
        cmd: String,
        secs: u64,
        /// What it printed before it was killed.
        stdout: String,
    },
    #[error("{cmd} failed ({status}): {stderr}")]
    Failed {
        cmd: String,
        status: String,
        stderr: String,
    },
    #[error("{cmd} printed no RESULT line")]
    NoResult { cmd: String },
    #[error("{cmd}: bad RESULT: {err}")]
    BadJson { cmd: String, err: serde_json::Error },
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// What a run printed and how long it took.
#[derive(Debug, Clone)]
pub struct Output {
    pub result: Option<serde_json::Value>,
    pub stdout: String,
    pub wall_s: f64,
}

/// A human-readable form of a command, for errors and logs.
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Kills a process group when its deadline passes, unless disarmed first.
struct Watchdog {
    done: Arc<AtomicBool>,
    fired: Arc<AtomicBool>,
}

impl Watchdog {
    fn arm(pgid: i32, limit: Duration) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let fired = Arc::new(AtomicBool::new(false));
        let (d, f) = (done.clone(), fired.clone());
        std::thread::spawn(move || {
            let end = Instant::now() + limit;
            while Instant::now() < end {
                if d.load(Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if !d.load(Ordering::Acquire) {
                f.store(true, Ordering::Release);
                // The group is the one we created for this run alone.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pgid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        });
        Watchdog { done, fired }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
    }
}

/// Runs `cmd` in its own process group (so a timeout kills its children
/// too), answering the `whbench` handshake: `on_line` is called for each
/// line of output and returns whether to send a go-ahead line to stdin.
pub fn run(
    mut cmd: Command,
    limit: Duration,
    mut on_line: impl FnMut(&str) -> bool,
) -> Result<Output, ProcError> {
    let name = describe(&cmd);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|err| ProcError::Spawn {
        cmd: name.clone(),
        err,
    })?;
    let dog = Watchdog::arm(child.id() as i32, limit);
    let mut stdin = child.stdin.take();
    let stderr = child.stderr.take();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut e) = stderr {
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
        }
        s
    });
    let mut stdout = String::new();
    let mut result = None;
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let line = line?;
            if let Some(json) = line.strip_prefix("RESULT ") {
                result = Some(
                    serde_json::from_str(json).map_err(|err| ProcError::BadJson {
                        cmd: name.clone(),
                        err,
                    })?,
                );
            }
            if on_line(&line) {
                if let Some(i) = stdin.as_mut() {
                    let _ = i.write_all(b"go\n");
                    let _ = i.flush();
                }
            }
            stdout.push_str(&line);
            stdout.push('\n');
        }
    }
    drop(stdin);
    let status = child.wait()?;
    let wall_s = start.elapsed().as_secs_f64();
    let fired = dog.fired.load(Ordering::Acquire);
    drop(dog);
    let stderr = err_reader.join().unwrap_or_default();
    if fired {
        return Err(ProcError::Timeout {
            cmd: name,
            secs: limit.as_secs(),
            stdout,
        });
    }
    if !status.success() {
        let tail: String = stderr
            .chars()
            .rev()
            .take(600)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(ProcError::Failed {
            cmd: name,
            status: status.to_string(),
            stderr: tail,
        });
    }
    Ok(Output {
        result,
        stdout,
        wall_s,
    })
}

/// Runs `cmd` to completion and returns its RESULT.
pub fn run_result(cmd: Command, limit: Duration) -> Result<serde_json::Value, ProcError> {
    let name = describe(&cmd);
    run(cmd, limit, |_| false)?
        .result
        .ok_or(ProcError::NoResult { cmd: name })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_timeout_and_failure() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo hi; echo 'RESULT {\"a\":1}'"]);
        assert_eq!(run_result(c, Duration::from_secs(10)).expect("ok")["a"], 1);
        let mut c = Command::new("sh");
        c.args(["-c", "sleep 30"]);
        let t = Instant::now();
        assert!(matches!(
            run_result(c, Duration::from_millis(300)),
            Err(ProcError::Timeout { .. })
        ));
        assert!(t.elapsed() < Duration::from_secs(10));
        let mut c = Command::new("sh");
        c.args(["-c", "echo oops >&2; exit 3"]);
        assert!(matches!(
            run_result(c, Duration::from_secs(10)),
            Err(ProcError::Failed { .. })
        ));
    }

    #[test]
    fn handshake_lines_get_answers() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo READY; read x; echo 'RESULT {\"got\":\"'$x'\"}'"]);
        let out = run(c, Duration::from_secs(10), |l| l == "READY").expect("ok");
        assert_eq!(out.result.expect("result")["got"], "go");
    }
}
