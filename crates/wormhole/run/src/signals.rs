//! What `wormhole-run` does with the signals meant for the command it
//! runs: it stays alive until the command ends, so that it can stop the
//! server it started and remove its files, and it passes on the signals
//! sent to it alone.

use std::sync::atomic::{AtomicI32, Ordering};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

/// The command's process id once it runs; 0 before.
static COMMAND: AtomicI32 = AtomicI32::new(0);
/// A signal to pass on that came before the command's id was known.
static EARLY: AtomicI32 = AtomicI32::new(0);

/// Signals a terminal sends to its whole foreground group (Ctrl-C, Ctrl-\):
/// the command gets them itself, so we only outlive them.
const FROM_TERMINAL: [Signal; 2] = [Signal::SIGINT, Signal::SIGQUIT];
/// Signals usually sent to us alone (`kill`, a supervisor, a terminal that
/// closed): passed on to the command, whose end we then wait for.
const PASSED_ON: [Signal; 2] = [Signal::SIGTERM, Signal::SIGHUP];

extern "C" fn outlive(_: libc::c_int) {}

/// Passes `sig` on to the command. Before its id is known the signal waits
/// in `EARLY`; the handler and `command_started` both take it from there,
/// and whichever finds it sends it, so it is sent once and never lost.
extern "C" fn pass_on(sig: libc::c_int) {
    EARLY.store(sig, Ordering::SeqCst);
    send_early(COMMAND.load(Ordering::SeqCst));
}

fn send_early(pid: i32) {
    if pid <= 0 {
        return;
    }
    let sig = EARLY.swap(0, Ordering::SeqCst);
    if sig != 0 {
        // SAFETY: kill is async-signal-safe and takes no pointers; `pid`
        // is our child's.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Installs `handler` for `sig`, unless `sig` is ignored (as a background
/// job's SIGINT is): then it stays ignored, for us and, across exec, for
/// the command. Caught signals are reset to their defaults at exec, so the
/// command sees them as it would without us.
fn catch(sig: Signal, handler: extern "C" fn(libc::c_int)) {
    let action = SigAction::new(
        SigHandler::Handler(handler),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: both handlers are async-signal-safe: they read and write
    // atomics and call kill.
    if let Ok(old) = unsafe { sigaction(sig, &action) } {
        if old.handler() == SigHandler::SigIgn {
            // SAFETY: puts back the disposition we found.
            let _ = unsafe { sigaction(sig, &old) };
        }
    }
}

/// Takes over the signals above; call before starting the command.
pub fn take_over() {
    for sig in FROM_TERMINAL {
        catch(sig, outlive);
    }
    for sig in PASSED_ON {
        catch(sig, pass_on);
    }
}

/// Records the command's process id, and passes on a signal that came
/// before it was known.
pub fn command_started(pid: u32) {
    let pid = i32::try_from(pid).unwrap_or(0);
    COMMAND.store(pid, Ordering::SeqCst);
    send_early(pid);
}

/// Forgets the command once it has been waited for: its id may be reused.
pub fn command_ended() {
    COMMAND.store(0, Ordering::SeqCst);
}
