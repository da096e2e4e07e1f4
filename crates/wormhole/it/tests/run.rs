//! `wormhole-run --start-server`: whatever ends the command, or ends
//! `wormhole-run` itself, the server it started goes too, and nothing of
//! it stays behind; signals meant for the command reach it.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use wormhole_it::{children, eventually, Artifacts, TempDir};

/// `wormhole-run --start-server` running a shell that says "ready", then
/// waits, and on SIGTERM or SIGINT says which and exits 3 or 4. In its own
/// process group, which the drop kills whole (bounded cleanup whatever the
/// test finds).
struct Wrapped {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
    tmp: TempDir,
}

impl Wrapped {
    fn start(tag: &str) -> Wrapped {
        let a = Artifacts::get().expect("artifacts");
        let tmp = TempDir::new(tag).expect("scratch");
        let script = "trap 'echo got TERM; exit 3' TERM; trap 'echo got INT; exit 4' INT; \
                      echo ready; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done";
        let mut cmd = Command::new(&a.run);
        cmd.args(["--start-server", "--", "sh", "-c", script])
            .env_remove("WORMHOLE_SERVER")
            // The private server's socket and the ICD folder go here.
            .env("TMPDIR", tmp.path())
            // No system server answers at the default socket here.
            .env("XDG_RUNTIME_DIR", tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0);
        // As a terminal's foreground job: SIGINT and SIGQUIT at their
        // defaults. A suite run as a background job (`cmd &` in a script)
        // inherits them ignored, and a shell cannot trap a signal ignored
        // when it started.
        // SAFETY: between fork and exec this calls only sigaction, which is
        // async-signal-safe, with a zeroed action (SIG_DFL) it owns.
        unsafe {
            cmd.pre_exec(|| {
                for sig in [libc::SIGINT, libc::SIGQUIT] {
                    let mut dfl: libc::sigaction = std::mem::zeroed();
                    dfl.sa_sigaction = libc::SIG_DFL;
                    if libc::sigaction(sig, &dfl, std::ptr::null_mut()) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("wormhole-run");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("the command's first line");
        assert_eq!(line.trim(), "ready");
        Wrapped { child, out, tmp }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The server `wormhole-run` started: its child that is not the shell.
    fn server(&self) -> i32 {
        children(self.child.id())
            .into_iter()
            .filter_map(|p| i32::try_from(p).ok())
            .find(|&p| comm(p) == "wormhole-server")
            .expect("the started server")
    }

    fn next_line(&mut self) -> String {
        let mut line = String::new();
        let _ = self.out.read_line(&mut line);
        line.trim().to_string()
    }

    /// Waits (bounded) for `wormhole-run` to end; its exit status.
    fn exit(&mut self) -> Option<std::process::ExitStatus> {
        let mut st = None;
        eventually(Duration::from_secs(10), || {
            st = self.child.try_wait().ok().flatten();
            st.is_some()
        });
        st
    }

    /// What it left in its temporary folder.
    fn leftovers(&self) -> Vec<String> {
        std::fs::read_dir(self.tmp.path())
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("wormhole-run-"))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Wrapped {
    fn drop(&mut self) {
        // SAFETY: kill takes no pointers; the group is the one we made.
        unsafe { libc::kill(-self.pid(), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Whether `pid` runs (a zombie has ended).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// Sends `sig` to `wormhole-run` (or, as a terminal does, to its whole
/// group), then checks that the command got it and ended as it chose
/// (`code`), and that the server and the files went after it.
fn a_signal_ends_the_command_then_the_server(sig: i32, to_group: bool, said: &str, code: i32) {
    let mut w = Wrapped::start(&format!("run-{sig}"));
    let server = w.server();
    let target = if to_group { -w.pid() } else { w.pid() };
    // SAFETY: kill takes no pointers.
    unsafe { libc::kill(target, sig) };
    assert_eq!(w.next_line(), said, "the command did not get the signal");
    let st = w.exit().expect("wormhole-run ended");
    assert_eq!(
        st.code(),
        Some(code),
        "not the command's own status: {st:?}"
    );
    assert!(
        eventually(Duration::from_secs(5), || !running(server)),
        "the server outlived wormhole-run"
    );
    assert!(w.leftovers().is_empty(), "left behind: {:?}", w.leftovers());
}

#[test]
fn a_termination_sent_to_wormhole_run_reaches_the_command_and_ends_the_server() {
    a_signal_ends_the_command_then_the_server(libc::SIGTERM, false, "got TERM", 3);
}

#[test]
fn ctrl_c_ends_the_command_first_and_then_the_server() {
    a_signal_ends_the_command_then_the_server(libc::SIGINT, true, "got INT", 4);
}

#[test]
fn a_killed_wormhole_run_takes_its_server_down() {
    let w = Wrapped::start("run-kill");
    let server = w.server();
    // SAFETY: kill takes no pointers.
    unsafe { libc::kill(w.pid(), libc::SIGKILL) };
    assert!(
        eventually(Duration::from_secs(5), || !running(server)),
        "the server outlived a killed wormhole-run"
    );
}

/// Its files (the ICD file, the private server's socket) are in a directory
/// of its own, mode 0700 with a name nobody can guess, so that no other user
/// can put an ICD file or a socket of theirs where the command will look.
#[test]
fn its_files_are_in_a_private_directory() {
    let a = Artifacts::get().expect("artifacts");
    let tmp = TempDir::new("run-private").expect("scratch");
    let out = Command::new(&a.run)
        .args(["--start-server", "--", "sh", "-c"])
        .arg(r#"stat -c %a "$OCL_ICD_VENDORS"; echo "$OCL_ICD_VENDORS"; echo "$WORMHOLE_SERVER""#)
        .env_remove("WORMHOLE_SERVER")
        .env("TMPDIR", tmp.path())
        .env("XDG_RUNTIME_DIR", tmp.path())
        .output()
        .expect("wormhole-run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(out.status.success(), "{stdout}");
    let [mode, dir, server] = lines[..] else {
        panic!("{stdout}");
    };
    assert_eq!(mode, "700", "the ICD directory's mode");
    assert!(dir.starts_with(&tmp.path().display().to_string()), "{dir}");
    assert!(
        server.starts_with(dir),
        "the private server's socket {server} is outside {dir}"
    );
}
