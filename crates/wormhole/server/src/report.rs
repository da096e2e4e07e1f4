//! Reports for operators on `SIGUSR1`: the listener logs how many tenants
//! it serves and passes the signal on to each, and each tenant logs the
//! client it serves, the calls it has run and the memory it holds against
//! its quota. Serving is not disturbed: the signal is blocked in every
//! thread and taken by a thread of its own (`sigwait`), so no call is
//! interrupted and nothing runs in a signal handler.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use nix::sys::signal::{SigSet, Signal};

use crate::quota::Quota;

/// Frames this tenant has run.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// Counts one call run by this tenant. Only the serving thread counts, so
/// a plain load and store do (no locked add on the call path).
#[inline]
pub fn count_call() {
    CALLS.store(CALLS.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

fn report_signal() -> SigSet {
    let mut s = SigSet::empty();
    s.add(Signal::SIGUSR1);
    s
}

/// Blocks `SIGUSR1` in the calling thread, and so in every thread and
/// process started from it afterwards: call it before any other thread
/// exists. A tenant inherits the block across exec, so a report asked for
/// before its reporter runs waits for it instead of ending the tenant.
pub fn block_report_signal() -> nix::Result<()> {
    report_signal().thread_block()
}

/// Starts a thread that runs `report` on each `SIGUSR1`.
fn on_report_signal(name: &str, report: impl Fn() + Send + 'static) {
    let started = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let set = report_signal();
            while set.wait().is_ok() {
                report();
            }
        });
    if let Err(e) = started {
        log::warn!("no reports on SIGUSR1: {e}");
    }
}

/// The tenant's reporter: who it serves, what it ran, what it holds.
pub fn tenant_reporter(client: String, quota: Option<Arc<Quota>>) {
    let since = Instant::now();
    on_report_signal("wh-report", move || {
        let memory = match &quota {
            Some(q) => format!("memory {} of {} bytes", q.used(), q.limit()),
            None => "memory not counted (no tenant_memory)".to_string(),
        };
        log::warn!(
            "tenant {} ({client}): {} calls in {} s, {memory}",
            wormhole_confine::host_pid(),
            CALLS.load(Ordering::Relaxed),
            since.elapsed().as_secs()
        );
        if let Some(r) = crate::residency::report_line() {
            log::warn!("tenant {}: {r}", std::process::id());
        }
    });
}

/// The listener's reporter: `tenants` gives the live tenants' process ids
/// and sends each the signal, under the lock that keeps a reaped id out.
pub fn listener_reporter(tenants: Arc<crate::listen::Tenants>) {
    on_report_signal("wh-report", move || {
        tenants.ask_for_reports();
        if let Some(a) = crate::residency::arbiter::get() {
            a.report();
        }
    });
}
