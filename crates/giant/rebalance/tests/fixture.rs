//! Fixture-tree tests: every policy branch, every failure mode, restore on exit.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use giant_rebalance::{
    Actuator, CpuSet, Decision, Op, Options, Policy, Rebalancer, Recorder, SystemActuator,
    TreeActuator,
};

const EIO: i32 = 5;
const EPERM: i32 = 1;
const EINVAL: i32 = 22;

/// A guest with `nodes` nodes of 2 CPUs each, 3 user threads, 1 kernel thread, IRQs
/// 0 and 1 (settable), 5 (EIO), 9 (EPERM), 12 (no affinity file) and two workqueue masks.
struct Fixture {
    dir: tempfile::TempDir,
    nodes: u32,
}

impl Fixture {
    fn new(nodes: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let f = Self { dir, nodes };
        let all = format!("0-{}", nodes * 2 - 1);
        for n in 0..nodes {
            f.write(
                &format!("sys/devices/system/node/node{n}/cpulist"),
                &format!("{}-{}\n", 2 * n, 2 * n + 1),
            );
        }
        f.write("sys/devices/system/node/possible", "0-3\n");
        f.set_steal(&vec![0; nodes as usize]);
        for (pid, tid, kthread) in [
            (1, 1, false),
            (2, 2, true),
            (100, 100, false),
            (100, 101, false),
        ] {
            let k = if kthread {
                "Kthread:\t1\n"
            } else {
                "Kthread:\t0\n"
            };
            f.write(
                &format!("proc/{pid}/task/{tid}/status"),
                &format!("Name:\tt{tid}\n{k}Cpus_allowed:\tff\nCpus_allowed_list:\t{all}\n"),
            );
        }
        for irq in [0, 1, 5, 9] {
            f.write(
                &format!("proc/irq/{irq}/smp_affinity_list"),
                &format!("{all}\n"),
            );
        }
        fs::create_dir_all(f.path("proc/irq/12")).unwrap();
        f.write("sys/devices/virtual/workqueue/cpumask", "ff\n");
        f.write("sys/devices/virtual/workqueue/writeback/cpumask", "ff\n");
        f.write(
            ".refuse",
            "proc/irq/5/smp_affinity_list EIO\nproc/irq/9/smp_affinity_list EPERM\n",
        );
        f
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap()
    }

    /// Writes /proc/stat with the given cumulative steal per node (split over its CPUs).
    fn set_steal(&self, per_node: &[u64]) {
        let mut s = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
        for n in 0..self.nodes {
            let v = per_node[n as usize];
            for c in 0..2 {
                let share = if c == 0 { v / 2 } else { v - v / 2 };
                s += &format!("cpu{} 10 0 5 1000 0 0 0 {share} 0 0\n", 2 * n + c);
            }
        }
        s += "intr 0\nctxt 0\n";
        self.write("proc/stat", &s);
    }

    fn snapshot(&self) -> Vec<String> {
        [
            "proc/1/task/1/status",
            "proc/2/task/2/status",
            "proc/100/task/100/status",
            "proc/100/task/101/status",
            "proc/irq/0/smp_affinity_list",
            "proc/irq/1/smp_affinity_list",
            "proc/irq/5/smp_affinity_list",
            "proc/irq/9/smp_affinity_list",
            "sys/devices/virtual/workqueue/cpumask",
            "sys/devices/virtual/workqueue/writeback/cpumask",
        ]
        .iter()
        .map(|p| self.read(p))
        .collect()
    }

    fn rebalancer(&self, policy: Policy, dry_run: bool) -> Rebalancer<Recorder<TreeActuator>> {
        let opts = Options {
            root: self.root().to_path_buf(),
            policy,
            threshold: 50,
            dry_run,
        };
        let act = TreeActuator::new(self.root()).with_refusals_from_tree();
        Rebalancer::new(opts, Recorder::new(act)).unwrap()
    }

    /// A rebalancer past its warm-up step, with `steal` the per-node steal time since.
    fn warmed(
        &self,
        policy: Policy,
        dry_run: bool,
        steal: &[u64],
    ) -> Rebalancer<Recorder<TreeActuator>> {
        let mut r = self.rebalancer(policy, dry_run);
        r.step().unwrap();
        self.set_steal(steal);
        r
    }
}

/// A snapshot without line ends: restored files may differ from the originals only in
/// the trailing newline.
fn trimmed(snapshot: &[String]) -> Vec<String> {
    snapshot.iter().map(|s| s.trim_end().to_string()).collect()
}

fn cpus_of(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn stays_under_threshold_and_writes_nothing() {
    let f = Fixture::new(4);
    let mut r = f.rebalancer(Policy::Coarse, false);
    assert_eq!(r.step().unwrap().decision, Decision::Warmup);
    f.set_steal(&[49, 10, 0, 30]);
    let s = r.step().unwrap();
    assert_eq!(s.decision, Decision::Stay { active_steal: 49 });
    assert_eq!(s.deltas, vec![49, 10, 0, 30]);
    assert!(r.actuator().ops.is_empty());
}

#[test]
fn coarse_pins_everything_to_least_stolen_node_and_counts_failures() {
    let f = Fixture::new(4);
    let before = f.snapshot();
    let mut r = f.warmed(Policy::Coarse, false, &[120, 60, 10, 80]);
    let s = r.step().unwrap();
    assert_eq!(
        s.decision,
        Decision::Pin {
            targets: vec![2],
            active_steal: 120
        }
    );
    // Node 2 = CPUs 4-5.
    for t in [
        "proc/1/task/1/status",
        "proc/100/task/100/status",
        "proc/100/task/101/status",
    ] {
        assert_eq!(cpus_of(&f.read(t)), "4-5", "{t}");
    }
    assert_eq!(
        cpus_of(&f.read("proc/2/task/2/status")),
        "0-7",
        "kernel thread untouched"
    );
    assert_eq!(f.read("proc/irq/0/smp_affinity_list"), "4-5");
    assert_eq!(f.read("proc/irq/1/smp_affinity_list"), "4-5");
    assert_eq!(
        f.read("proc/irq/5/smp_affinity_list"),
        "0-7\n",
        "refusing IRQ untouched"
    );
    assert_eq!(f.read("sys/devices/virtual/workqueue/cpumask"), "00000030");
    assert_eq!(
        f.read("sys/devices/virtual/workqueue/writeback/cpumask"),
        "00000030"
    );
    let c = &s.counts;
    assert_eq!((c.threads_set, c.threads_unmovable), (3, 1));
    assert_eq!((c.irqs_set, c.irqs_refused, c.missing), (2, 2, 1));
    assert_eq!((c.workqueues_set, c.other_errors), (2, 0));
    // Every attempted change is in the record, with its errno.
    let ops = &r.actuator().ops;
    assert!(ops.contains(&Op::SetThread {
        pid: 2,
        tid: 2,
        cpus: "4-5".into(),
        errno: EINVAL
    }));
    let irq = |n: u32| f.path(&format!("proc/irq/{n}/smp_affinity_list"));
    assert!(ops.contains(&Op::Write {
        path: irq(5),
        text: "4-5".into(),
        errno: EIO
    }));
    assert!(ops.contains(&Op::Write {
        path: irq(9),
        text: "4-5".into(),
        errno: EPERM
    }));
    assert_eq!(
        ops.len(),
        4 + 4 + 2,
        "4 threads, 4 IRQ files, 2 workqueue masks: {ops:?}"
    );
    assert_ne!(before, f.snapshot());
}

#[test]
fn fine_spreads_over_two_least_stolen_nodes() {
    let f = Fixture::new(4);
    let mut r = f.warmed(Policy::Fine, false, &[200, 5, 100, 0]);
    let s = r.step().unwrap();
    assert_eq!(
        s.decision,
        Decision::Pin {
            targets: vec![3, 1],
            active_steal: 200
        }
    );
    // Threads round-robin in (pid, tid) order: node 3 (6-7), node 1 (2-3), ...
    assert_eq!(cpus_of(&f.read("proc/1/task/1/status")), "6-7");
    assert_eq!(cpus_of(&f.read("proc/100/task/100/status")), "6-7");
    assert_eq!(cpus_of(&f.read("proc/100/task/101/status")), "2-3");
    assert_eq!(f.read("proc/irq/0/smp_affinity_list"), "6-7");
    assert_eq!(f.read("proc/irq/1/smp_affinity_list"), "2-3");
    // Workqueues get the union of both nodes.
    assert_eq!(f.read("sys/devices/virtual/workqueue/cpumask"), "000000cc");
}

#[test]
fn no_better_node_leaves_everything() {
    let f = Fixture::new(2);
    let mut r = f.warmed(Policy::Coarse, false, &[100, 0]);
    assert!(matches!(r.step().unwrap().decision, Decision::Pin { .. }));
    let n = r.actuator().ops.len();
    // Now on node 1; it gets stolen from but node 0 is worse.
    f.set_steal(&[300, 80]);
    assert_eq!(
        r.step().unwrap().decision,
        Decision::NoBetterNode { active_steal: 80 }
    );
    assert_eq!(r.actuator().ops.len(), n);
}

#[test]
fn dry_run_decides_but_changes_nothing() {
    let f = Fixture::new(4);
    let before = f.snapshot();
    let mut r = f.warmed(Policy::Coarse, true, &[120, 60, 10, 80]);
    assert!(matches!(r.step().unwrap().decision, Decision::Pin { .. }));
    assert!(r.actuator().ops.is_empty());
    assert_eq!(before, f.snapshot());
}

#[test]
fn restore_puts_back_every_original_value() {
    let f = Fixture::new(4);
    let before = f.snapshot();
    let mut r = f.warmed(Policy::Fine, false, &[120, 60, 10, 80]);
    r.step().unwrap();
    // A second move: originals must still be the first values, not the pinned ones.
    f.set_steal(&[130, 70, 100, 180]);
    assert!(matches!(r.step().unwrap().decision, Decision::Pin { .. }));
    let c = r.restore();
    assert_eq!(c.threads_set, 3);
    assert_eq!(c.irqs_set, 2);
    assert_eq!(c.workqueues_set, 2);
    assert_eq!(trimmed(&before), trimmed(&f.snapshot()));
}

#[test]
fn vanished_thread_and_missing_files_are_counted_not_fatal() {
    let f = Fixture::new(2);
    let mut r = f.rebalancer(Policy::Coarse, false);
    r.step().unwrap();
    fs::remove_dir_all(f.path("proc/100/task/101")).unwrap();
    fs::create_dir_all(f.path("proc/100/task/102")).unwrap(); // listed, but no status file
    fs::remove_file(f.path("sys/devices/virtual/workqueue/writeback/cpumask")).unwrap();
    f.set_steal(&[100, 0]);
    let s = r.step().unwrap();
    assert_eq!(s.counts.threads_set, 2);
    assert_eq!(s.counts.missing, 2, "{:?}", s.counts); // thread 102's status and IRQ 12
    assert_eq!(s.counts.workqueues_set, 1);
}

#[test]
fn denied_thread_is_counted_and_exited_threads_are_skipped_on_restore() {
    let f = Fixture::new(2);
    f.write(
        ".refuse",
        "proc/irq/5/smp_affinity_list EIO\nproc/irq/9/smp_affinity_list EPERM\nproc/100/task/101/status EPERM\n",
    );
    let mut r = f.warmed(Policy::Coarse, false, &[100, 0]);
    let s = r.step().unwrap();
    assert_eq!(
        (s.counts.threads_set, s.counts.threads_denied),
        (2, 1),
        "{:?}",
        s.counts
    );
    assert!(r.actuator().ops.contains(&Op::SetThread {
        pid: 100,
        tid: 101,
        cpus: "2-3".into(),
        errno: EPERM
    }));
    // Thread 100 exits before the agent is stopped: restore skips it and does the rest.
    fs::remove_dir_all(f.path("proc/100/task/100")).unwrap();
    let c = r.restore();
    assert_eq!(c.missing, 1, "{c:?}");
    assert_eq!(cpus_of(&f.read("proc/1/task/1/status")), "0-3");
    assert_eq!(f.read("proc/irq/0/smp_affinity_list"), "0-3");
    assert_eq!(c.other_errors, 0);
}

#[test]
fn malformed_stat_is_an_error_not_a_panic() {
    let f = Fixture::new(2);
    let mut r = f.rebalancer(Policy::Coarse, false);
    f.write("proc/stat", "cpu0 1 2 3\n");
    let e = r.step().unwrap_err().to_string();
    assert!(
        e.contains("proc/stat") && e.contains("no steal column"),
        "{e}"
    );
    fs::remove_file(f.path("proc/stat")).unwrap();
    assert!(r.step().is_err());
    f.write("sys/devices/system/node/node0/cpulist", "zz\n");
    let opts = Options {
        root: f.root().to_path_buf(),
        policy: Policy::Coarse,
        threshold: 50,
        dry_run: false,
    };
    assert!(Rebalancer::new(opts, TreeActuator::new(f.root())).is_err());
}

#[test]
fn single_node_is_reported_and_left_alone() {
    let f = Fixture::new(1);
    let r = f.rebalancer(Policy::Coarse, false);
    assert!(r.single_node());
    let out = Command::new(env!("CARGO_BIN_EXE_giant-rebalance"))
        .args(["--root", f.root().to_str().unwrap(), "--iterations", "3"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("nothing to rebalance"), "{stdout}");
}

/// Waits (bounded) for a line containing `what` on the child's stdout.
fn wait_for(lines: &mut impl Iterator<Item = std::io::Result<String>>, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains(what) {
            return line;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what:?}");
    }
    panic!("stdout closed before {what:?}");
}

#[test]
fn binary_restores_on_sigterm() {
    for sig in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
    ] {
        let f = Fixture::new(4);
        let before = f.snapshot();
        let mut child = Command::new(env!("CARGO_BIN_EXE_giant-rebalance"))
            .args(["--root", f.root().to_str().unwrap(), "--interval", "0.05"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        wait_for(&mut lines, "Warmup");
        f.set_steal(&[500, 500, 0, 500]);
        let line = wait_for(&mut lines, "Pin");
        assert!(line.contains("targets: [2]"), "{line}");
        assert_eq!(cpus_of(&f.read("proc/1/task/1/status")), "4-5");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
        let restored = wait_for(&mut lines, "restored original affinities");
        assert!(restored.contains("threads_set: 3"), "{restored}");
        let status = child.wait().unwrap();
        assert!(status.success(), "{sig}: {status}");
        assert_eq!(trimmed(&before), trimmed(&f.snapshot()), "{sig}");
    }
}

#[test]
fn real_sched_setaffinity_on_own_thread() {
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        tx.send(nix::unistd::gettid().as_raw() as u32).unwrap();
        done_rx.recv().unwrap();
    });
    let tid = rx.recv().unwrap();
    let pid = std::process::id();
    let mut act = Recorder::new(SystemActuator);
    let original = act.thread_affinity(pid, tid).unwrap();
    assert!(!original.is_empty());
    let first = *original.0.iter().next().unwrap();
    let one: CpuSet = [first].into_iter().collect();
    act.set_thread_affinity(pid, tid, &one).unwrap();
    assert_eq!(act.thread_affinity(pid, tid).unwrap(), one);
    // The kernel refuses an empty set with EINVAL: the errno the agent counts as unmovable.
    let err = act
        .set_thread_affinity(pid, tid, &CpuSet::default())
        .unwrap_err();
    assert_eq!(err.raw_os_error(), Some(EINVAL));
    act.set_thread_affinity(pid, tid, &original).unwrap();
    assert_eq!(act.thread_affinity(pid, tid).unwrap(), original);
    assert_eq!(act.ops.len(), 3);
    done_tx.send(()).unwrap();
    h.join().unwrap();
    // A thread that no longer exists: ESRCH. `join` returns once the thread
    // has cleared its tid, which is before the kernel releases the task, so
    // for a moment the tid still answers: wait for it to go (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let err = loop {
        match act.set_thread_affinity(pid, tid, &original) {
            Err(e) => break e,
            Ok(()) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(1))
            }
            Ok(()) => panic!("thread {tid} still accepts an affinity 5 s after it was joined"),
        }
    };
    assert_eq!(err.raw_os_error(), Some(3));
}

/// An interval no duration can hold, or none at all, is refused with a
/// message before anything is read or moved (it was a panic, or silently
/// 0.01 s).
#[test]
fn binary_refuses_intervals_out_of_range() {
    let f = Fixture::new(4);
    for bad in ["inf", "NaN", "0", "1e300"] {
        let out = Command::new(env!("CARGO_BIN_EXE_giant-rebalance"))
            .args(["--root", f.root().to_str().expect("utf-8 root")])
            .args(["--interval", bad, "--iterations", "1"])
            .env("RUST_BACKTRACE", "0")
            .output()
            .expect("run giant-rebalance");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--interval {bad}: {err}");
        assert!(err.contains("between 0.01 and 86400 seconds"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
