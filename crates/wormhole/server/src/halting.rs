//! Whether this machine's idle CPUs halt at once, which decides who should
//! publish a blocking wait's reply (`opencl::finish`, `held_replies`).
//!
//! A reply the library's worker publishes from its completion callback
//! saves one thread hop: the worker wakes the client itself instead of
//! waking the tenant's thread to do it. That pays where a hop is dear: in
//! a virtual machine whose idle vCPUs halt at once (the haltpoll cpuidle
//! driver with `guest_halt_poll_ns` = 0), every wake-up of a sleeping
//! thread is a halted vCPU's exit and entry, 30-80 us. Where idle CPUs poll
//! first, a wake-up is a few microseconds, and the hop saved costs more
//! than it saves: the worker goes on with the library's own bookkeeping
//! after its callback, so the client it woke waits for a CPU, while the
//! tenant's thread sleeps right after its wake-up and hands its CPU over
//! (docs/benchmarks.md, issue 32: a marker's wait 38 against 59 us under
//! load; the client's scheduling delay 3.5 against 10.7 us on average).

const HALT_POLL_NS: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
const CPUIDLE_DRIVER: &str = "/sys/devices/system/cpu/cpuidle/current_driver";

/// Whether idle CPUs halt without polling first, from the cpuidle driver
/// in use and haltpoll's setting (as the files read, when they could be).
pub fn halts_at_once(driver: Option<&str>, halt_poll_ns: Option<&str>) -> bool {
    driver.map(str::trim) == Some("haltpoll")
        && halt_poll_ns.and_then(|v| v.trim().parse::<u64>().ok()) == Some(0)
}

/// [`halts_at_once`] for this machine.
pub fn idle_cpus_halt_at_once() -> bool {
    let read = |p| std::fs::read_to_string(p).ok();
    halts_at_once(
        read(CPUIDLE_DRIVER).as_deref(),
        read(HALT_POLL_NS).as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use super::halts_at_once;

    #[test]
    fn only_a_haltpoll_guest_that_polls_not_at_all_halts_at_once() {
        assert!(halts_at_once(Some("haltpoll\n"), Some("0\n")));
        assert!(!halts_at_once(Some("haltpoll\n"), Some("200000\n")));
        assert!(!halts_at_once(Some("intel_idle\n"), Some("0\n")));
        assert!(!halts_at_once(Some("haltpoll"), None));
        assert!(!halts_at_once(None, Some("0")));
        assert!(!halts_at_once(Some("haltpoll"), Some("junk")));
    }
}
