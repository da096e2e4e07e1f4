//! `wormhole-run -- COMMAND...`: run an unmodified OpenCL program with
//! Wormhole's platforms as its only platforms.
//!
//! It writes an ICD file for `libwormhole_opencl.so` into a private
//! directory and points the loaders at it (`OCL_ICD_VENDORS` for ocl-icd,
//! `OCL_ICD_FILENAMES` for the Khronos loader), points the client at the
//! server, and optionally starts a server for the command's lifetime.

mod signals;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use wormhole_transport::client::Target;
use wormhole_transport::default_socket_path;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Run a command with Wormhole's OpenCL client",
    trailing_var_arg = true
)]
struct Cli {
    /// Server to use: a socket path, unix:PATH or tcp:HOST:PORT
    /// (default: $WORMHOLE_SERVER, else the default socket).
    #[arg(long)]
    server: Option<String>,
    /// Start a local server for the command's lifetime if none answers.
    #[arg(long)]
    start_server: bool,
    /// Extra arguments for a server started with --start-server.
    #[arg(long = "server-arg", allow_hyphen_values = true)]
    server_args: Vec<String>,
    /// The client library (default: next to this program).
    #[arg(long)]
    icd: Option<PathBuf>,
    /// Keep other OpenCL platforms visible beside Wormhole's.
    #[arg(long)]
    keep_native: bool,
    /// The command to run.
    #[arg(required = true)]
    command: Vec<String>,
}

fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating wormhole-run")?;
    let dir = exe.parent().context("wormhole-run has no directory")?;
    Ok(dir.join(name))
}

/// Warns when nothing can be listening where the program will look: it
/// would see no Wormhole platform, which programs report in their own,
/// often puzzling, words. Only a look at the socket file: connecting would
/// start a tenant in the server.
fn warn_if_no_server(server: &str) {
    use std::os::unix::fs::FileTypeExt;
    if let Target::Unix(path) = Target::parse(server) {
        let is_socket = std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_socket());
        if !is_socket {
            eprintln!(
                "wormhole-run: no Wormhole server at {} (start wormhole-server, or pass --start-server); \
                 the program will see no Wormhole platform",
                path.display()
            );
        }
    }
}

/// Kills the server we started, whatever happens to the command.
struct ServerGuard(std::process::Child, PathBuf);

impl Drop for ServerGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.1);
    }
}

fn start_server(socket: &Path, args: &[String]) -> anyhow::Result<ServerGuard> {
    let bin = sibling("wormhole-server")?;
    let mut cmd = Command::new(&bin);
    cmd.arg("--quiet")
        .arg("--socket")
        .arg(socket)
        .args(args)
        .stdout(Stdio::null())
        // Out of the terminal's foreground group: Ctrl-C is for the
        // command, which may still call the server while it winds down;
        // the server is stopped once the command has ended.
        .process_group(0);
    // SAFETY: prctl is async-signal-safe and touches only this child; it
    // runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            // If we are killed outright, the server goes too.
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)?;
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let guard = ServerGuard(child, socket.to_path_buf());
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        if Instant::now() > deadline {
            bail!("the server did not start listening on {}", socket.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(guard)
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let icd = match cli.icd {
        Some(p) => p,
        None => sibling("libwormhole_opencl.so")?,
    };
    if !icd.exists() {
        bail!(
            "client library {} not found (build it or pass --icd)",
            icd.display()
        );
    }
    let icd = icd.canonicalize()?;
    let server = cli
        .server
        .or_else(|| std::env::var("WORMHOLE_SERVER").ok())
        .filter(|s| !s.is_empty());
    // Our files (the ICD file, a private server's socket) go in a directory
    // of our own, made with a random name and mode 0700: a name in /tmp that
    // others can guess could be theirs first, and an ICD file they control
    // loads their code into the command. Declared first, dropped (removed)
    // last, after the server.
    let private = tempfile::Builder::new()
        .prefix("wormhole-run-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .context("making a private directory")?;
    let mut _guard = None;
    let server = match server {
        Some(s) => s,
        None => {
            let sock = default_socket_path();
            // Someone else's socket at the default path is not a server for
            // us (the client refuses it too).
            let foreign = wormhole_transport::foreign_default_socket(&sock).is_some();
            if cli.start_server
                && (foreign || std::os::unix::net::UnixStream::connect(&sock).is_err())
            {
                let socket = private.path().join("server.sock");
                _guard = Some(start_server(&socket, &cli.server_args)?);
                socket.display().to_string()
            } else {
                sock.display().to_string()
            }
        }
    };
    if _guard.is_none() {
        warn_if_no_server(&server);
    }
    let vendors = private.path();
    std::fs::write(vendors.join("wormhole.icd"), format!("{}\n", icd.display()))?;
    let mut vendor_dirs = vendors.display().to_string();
    let mut filenames = icd.display().to_string();
    if cli.keep_native {
        vendor_dirs = format!("{vendor_dirs}:/etc/OpenCL/vendors");
        if let Ok(old) = std::env::var("OCL_ICD_FILENAMES") {
            filenames = format!("{filenames}:{old}");
        }
    }
    // Outlive the signals that end the command, so as to clean up after
    // it; pass on those sent to us alone.
    signals::take_over();
    let status = Command::new(&cli.command[0])
        .args(&cli.command[1..])
        .env("OCL_ICD_VENDORS", &vendor_dirs)
        .env("OCL_ICD_FILENAMES", &filenames)
        .env("WORMHOLE_SERVER", &server)
        .spawn()
        .and_then(|mut child| {
            signals::command_started(child.id());
            let st = child.wait();
            signals::command_ended();
            st
        });
    match status {
        Ok(s) => Ok(ExitCode::from(exit_code(s))),
        Err(e) => {
            // As `env` and shells do: 127 when there is no such program,
            // 126 when it cannot be run, so scripts can tell these apart
            // from the program's own failures.
            eprintln!("wormhole-run: {}: {e}", cli.command[0]);
            Ok(ExitCode::from(match e.kind() {
                std::io::ErrorKind::NotFound => 127,
                _ => 126,
            }))
        }
    }
}

/// The exit status a shell would report for the command: its own code, or
/// 128 plus the signal that killed it.
fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(sig)) => (128 + sig) as u8,
        (None, None) => 128,
    }
}
