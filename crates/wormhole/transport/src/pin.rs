//! Same-core handoff. The tenant's thread follows its caller onto the CPU
//! the caller last ran on ([`Follower`]), so the handler runs where the
//! caller sleeps; and the caller holds its CPU while it sleeps
//! ([`hold_cpu_while`]), so the reply wakes it there rather than on an idle
//! CPU, which the scheduler prefers and which costs an inter-processor
//! interrupt (and, on a virtual machine, waking a halted vCPU).
//!
//! CPU affinity is inherited. Threads the accelerator library starts from
//! the pinned thread (PoCL starts its device workers while it answers the
//! first call) would all be confined to that one CPU, and the device would
//! compute on one CPU of the machine. So the follower also gives every
//! thread that inherited one of its pins the CPUs the process had before it,
//! at its first waits and then at most every [`SWEEP_EVERY`].

use std::time::{Duration, Instant};

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::{gettid, Pid};

/// How often, at most, threads are checked for an inherited pin once the
/// first [`EAGER_SWEEPS`] waits are past. A check costs a directory read
/// and a system call per thread; new threads are rare after start-up.
pub const SWEEP_EVERY: Duration = Duration::from_millis(50);

/// Waits after which threads are checked regardless of time: libraries
/// start their threads during the first calls.
const EAGER_SWEEPS: u32 = 16;

/// Pins the calling thread to the CPU its peer reports, and undoes the pin
/// in threads that inherit it.
#[derive(Default)]
pub struct Follower {
    /// The CPUs the process could use before the first pin.
    original: Option<CpuSet>,
    /// The CPU this thread is pinned to, plus one; 0 when not pinned.
    pinned: u32,
    /// Every CPU this thread has been pinned to: a thread confined to
    /// exactly one of them inherited it.
    used: Vec<usize>,
    eager: u32,
    next_sweep: Option<Instant>,
}

impl Follower {
    /// Moves this thread onto `cpu_plus_one - 1` if it is not there yet,
    /// then checks other threads for inherited pins when one is due. The
    /// value comes from the peer: any CPU number is harmless, and an
    /// impossible one only makes the affinity call fail.
    pub fn follow(&mut self, cpu_plus_one: u32) {
        if cpu_plus_one != 0
            && cpu_plus_one != self.pinned
            && cpu_plus_one as usize <= CpuSet::count()
        {
            self.pin(cpu_plus_one as usize - 1);
        }
        if self.pinned != 0 && self.sweep_due() {
            self.sweep();
        }
    }

    fn pin(&mut self, cpu: usize) {
        if self.original.is_none() {
            match sched_getaffinity(Pid::from_raw(0)) {
                Ok(set) => self.original = Some(set),
                // Without the original set no pin could be undone.
                Err(_) => return,
            }
        }
        let mut set = CpuSet::new();
        if set.set(cpu).is_ok() && sched_setaffinity(Pid::from_raw(0), &set).is_ok() {
            self.pinned = cpu as u32 + 1;
            if !self.used.contains(&cpu) {
                self.used.push(cpu);
            }
        }
    }

    fn sweep_due(&mut self) -> bool {
        if self.eager < EAGER_SWEEPS {
            self.eager += 1;
            return true;
        }
        let now = Instant::now();
        match self.next_sweep {
            Some(t) if now < t => false,
            _ => {
                self.next_sweep = Some(now + SWEEP_EVERY);
                true
            }
        }
    }

    /// Gives the original CPUs back to every other thread of the process
    /// that is confined to exactly one CPU this thread was pinned to.
    /// Threads may exit meanwhile: failures are skipped.
    fn sweep(&self) {
        let Some(original) = self.original else {
            return;
        };
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return;
        };
        let me = gettid();
        let inherited: Vec<CpuSet> = self
            .used
            .iter()
            .filter_map(|&c| {
                let mut s = CpuSet::new();
                s.set(c).ok().map(|_| s)
            })
            .collect();
        for entry in dir.flatten() {
            let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let tid = Pid::from_raw(tid);
            if tid == me {
                continue;
            }
            if let Ok(set) = sched_getaffinity(tid) {
                if inherited.contains(&set) {
                    let _ = sched_setaffinity(tid, &original);
                }
            }
        }
    }
}

/// Runs `wait` (a sleep until the peer answers) with the calling thread
/// confined to the CPU it is on, then gives the thread back the CPUs it
/// had. The application's thread is only held while it is blocked in our
/// call: it creates no thread meanwhile, so nothing inherits the pin, and
/// the application finds its affinity as it left it. If the affinity
/// cannot be read or set, `wait` runs as it is.
pub fn hold_cpu_while<T>(wait: impl FnOnce() -> T) -> T {
    let me = Pid::from_raw(0);
    let held = match (sched_getaffinity(me), nix::sched::sched_getcpu()) {
        (Ok(own), Ok(cpu)) => {
            let mut only = CpuSet::new();
            (only.set(cpu).is_ok() && only != own && sched_setaffinity(me, &only).is_ok())
                .then_some(own)
        }
        _ => None,
    };
    let r = wait();
    if let Some(own) = held {
        let _ = sched_setaffinity(me, &own);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn affinity_of(tid: Pid) -> CpuSet {
        sched_getaffinity(tid).expect("sched_getaffinity")
    }

    #[test]
    fn a_held_cpu_is_given_back() {
        let before = affinity_of(Pid::from_raw(0));
        let during = hold_cpu_while(|| affinity_of(Pid::from_raw(0)));
        let after = affinity_of(Pid::from_raw(0));
        assert_eq!(after, before, "the thread's CPUs are restored");
        let n = |s: &CpuSet| {
            (0..CpuSet::count())
                .filter(|&c| s.is_set(c).unwrap_or(false))
                .count()
        };
        if n(&before) > 1 {
            assert_eq!(n(&during), 1, "one CPU while waiting");
        }
    }

    /// A thread started by a pinned follower gets the process's CPUs back,
    /// while the follower stays pinned. Needs two CPUs to mean anything.
    #[test]
    fn threads_started_while_pinned_get_their_cpus_back() {
        let all = affinity_of(Pid::from_raw(0));
        let cpus: Vec<usize> = (0..CpuSet::count())
            .filter(|&c| all.is_set(c).unwrap_or(false))
            .collect();
        if cpus.len() < 2 {
            eprintln!("one CPU: nothing to check");
            return;
        }
        let target = cpus[1];
        std::thread::spawn(move || {
            let mut f = Follower::default();
            f.follow(target as u32 + 1);
            let mut only = CpuSet::new();
            only.set(target).expect("cpu");
            assert_eq!(
                affinity_of(Pid::from_raw(0)),
                only,
                "the follower is pinned"
            );
            // A thread started now inherits the pin, as a library's would.
            let (tx, rx) = std::sync::mpsc::channel();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            let child = std::thread::spawn(move || {
                tx.send(gettid()).expect("send tid");
                let _ = done_rx.recv_timeout(Duration::from_secs(10));
            });
            let tid = rx.recv_timeout(Duration::from_secs(10)).expect("child tid");
            assert_eq!(affinity_of(tid), only, "the child inherited the pin");
            f.follow(target as u32 + 1);
            assert_eq!(
                affinity_of(tid),
                all,
                "the sweep gave the child its CPUs back"
            );
            assert_eq!(
                affinity_of(Pid::from_raw(0)),
                only,
                "the follower stays pinned"
            );
            done_tx.send(()).expect("release child");
            child.join().expect("child");
        })
        .join()
        .expect("follower thread");
    }
}
