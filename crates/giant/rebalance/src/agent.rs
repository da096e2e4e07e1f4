//! The rebalancer: observe steal per node, decide, pin, and restore on exit.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use log::{info, warn};
use nix::errno::Errno;

use crate::actuator::Actuator;
use crate::cpuset::CpuSet;
use crate::decide::{Decider, Decision, Policy};
use crate::procfs::{self, Node};
use crate::RebalanceError;

/// What happened to each kind of object in one apply or restore.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Threads whose affinity was set.
    pub threads_set: u64,
    /// Threads that refused (EINVAL: kernel threads bound to a CPU).
    pub threads_unmovable: u64,
    /// Threads we may not touch (EPERM).
    pub threads_denied: u64,
    /// Threads that exited before we got to them.
    pub threads_gone: u64,
    /// IRQs whose affinity was set.
    pub irqs_set: u64,
    /// IRQs that refused (EIO, EPERM, EINVAL).
    pub irqs_refused: u64,
    /// Workqueue cpumasks set.
    pub workqueues_set: u64,
    /// Workqueue masks that refused.
    pub workqueues_refused: u64,
    /// Control files that do not exist.
    pub missing: u64,
    /// Any other error (logged).
    pub other_errors: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.threads_set += o.threads_set;
        self.threads_unmovable += o.threads_unmovable;
        self.threads_denied += o.threads_denied;
        self.threads_gone += o.threads_gone;
        self.irqs_set += o.irqs_set;
        self.irqs_refused += o.irqs_refused;
        self.workqueues_set += o.workqueues_set;
        self.workqueues_refused += o.workqueues_refused;
        self.missing += o.missing;
        self.other_errors += o.other_errors;
    }
}

/// Result of one [`Rebalancer::step`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The decision.
    pub decision: Decision,
    /// Steal delta per node (same order as [`Rebalancer::nodes`]).
    pub deltas: Vec<u64>,
    /// What was done (all zero when staying or in dry-run).
    pub counts: Counts,
}

/// Options of a rebalancer.
#[derive(Debug, Clone)]
pub struct Options {
    /// Root of /proc and /sys (`/` on a live system).
    pub root: PathBuf,
    /// Coarse or fine.
    pub policy: Policy,
    /// Steal ticks per interval that trigger a move (published: 50).
    pub threshold: u64,
    /// Decide and log, change nothing.
    pub dry_run: bool,
}

/// Guest-side rebalancer over an [`Actuator`].
pub struct Rebalancer<A> {
    opts: Options,
    nodes: Vec<Node>,
    decider: Decider,
    act: A,
    orig_threads: BTreeMap<(u32, u32), CpuSet>,
    orig_files: BTreeMap<PathBuf, String>,
    totals: Counts,
}

enum Kind {
    Thread,
    Irq,
    Workqueue,
}

fn classify(c: &mut Counts, kind: Kind, r: &io::Result<()>, what: &str) {
    let errno = r
        .as_ref()
        .err()
        .and_then(|e| e.raw_os_error())
        .map(Errno::from_raw);
    match (kind, r, errno) {
        (Kind::Thread, Ok(()), _) => c.threads_set += 1,
        (Kind::Irq, Ok(()), _) => c.irqs_set += 1,
        (Kind::Workqueue, Ok(()), _) => c.workqueues_set += 1,
        (_, Err(_), Some(Errno::ENOENT)) => c.missing += 1,
        (Kind::Thread, Err(_), Some(Errno::EINVAL)) => c.threads_unmovable += 1,
        (Kind::Thread, Err(_), Some(Errno::EPERM)) => c.threads_denied += 1,
        (Kind::Thread, Err(_), Some(Errno::ESRCH)) => c.threads_gone += 1,
        (Kind::Irq, Err(_), Some(Errno::EIO | Errno::EPERM | Errno::EINVAL)) => c.irqs_refused += 1,
        (Kind::Workqueue, Err(_), Some(Errno::EIO | Errno::EPERM | Errno::EINVAL)) => {
            c.workqueues_refused += 1
        }
        (_, Err(e), _) => {
            warn!("{what}: {e}");
            c.other_errors += 1;
        }
    }
}

impl<A: Actuator> Rebalancer<A> {
    /// Reads the node layout under `opts.root`.
    pub fn new(opts: Options, act: A) -> Result<Self, RebalanceError> {
        let nodes = procfs::read_nodes(&opts.root)?;
        Ok(Self {
            decider: Decider::new(opts.policy, opts.threshold),
            opts,
            nodes,
            act,
            orig_threads: BTreeMap::new(),
            orig_files: BTreeMap::new(),
            totals: Counts::default(),
        })
    }

    /// NUMA nodes with CPUs (under GiantVM: the hosts).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// True when there is nothing to rebalance between.
    pub fn single_node(&self) -> bool {
        self.nodes.len() < 2
    }

    /// The actuator (tests read its record).
    pub fn actuator(&self) -> &A {
        &self.act
    }

    /// Everything done so far.
    pub fn totals(&self) -> &Counts {
        &self.totals
    }

    /// Per-node cumulative steal from /proc/stat.
    fn node_steal(&self) -> Result<Vec<u64>, RebalanceError> {
        let per_cpu = procfs::read_steal(&self.opts.root)?;
        Ok(self
            .nodes
            .iter()
            .map(|n| n.cpus.0.iter().filter_map(|c| per_cpu.get(c)).sum())
            .collect())
    }

    /// One interval: read steal, decide, act. Logs the decision.
    pub fn step(&mut self) -> Result<Step, RebalanceError> {
        let totals = self.node_steal()?;
        let decision = self.decider.observe(&totals);
        let deltas = self.decider.last_deltas().to_vec();
        let ids: Vec<u32> = self.nodes.iter().map(|n| n.id).collect();
        let mut counts = Counts::default();
        match &decision {
            Decision::Warmup => info!("warm-up: nodes {ids:?}"),
            Decision::Stay { active_steal } => {
                info!(
                    "stay: active steal {active_steal} < {} (deltas {deltas:?})",
                    self.opts.threshold
                )
            }
            Decision::NoBetterNode { active_steal } => {
                info!(
                    "active steal {active_steal} >= {} but no less-stolen node (deltas {deltas:?})",
                    self.opts.threshold
                )
            }
            Decision::Pin {
                targets,
                active_steal,
            } => {
                let to: Vec<u32> = targets.iter().map(|&i| self.nodes[i].id).collect();
                info!(
                    "pin to node(s) {to:?}: active steal {active_steal} >= {} (deltas {deltas:?}){}",
                    self.opts.threshold,
                    if self.opts.dry_run { " [dry run]" } else { "" }
                );
                if !self.opts.dry_run {
                    let sets: Vec<CpuSet> = targets
                        .iter()
                        .map(|&i| self.nodes[i].cpus.clone())
                        .collect();
                    counts = self.apply(&sets);
                    info!("applied: {counts:?}");
                    self.totals.add(&counts);
                }
            }
        }
        Ok(Step {
            decision,
            deltas,
            counts,
        })
    }

    fn remember_file(&mut self, path: &Path) -> io::Result<()> {
        if !self.orig_files.contains_key(path) {
            let text = self.act.read_file(path)?;
            self.orig_files
                .insert(path.to_path_buf(), text.trim().to_string());
        }
        Ok(())
    }

    /// Pins threads and IRQs round-robin over `sets`, workqueues to their union.
    pub fn apply(&mut self, sets: &[CpuSet]) -> Counts {
        let mut c = Counts::default();
        if sets.is_empty() {
            return c;
        }
        let union = sets.iter().fold(CpuSet::default(), |a, s| a.union(s));
        let root = self.opts.root.clone();
        for (i, (pid, tid)) in procfs::list_threads(&root).into_iter().enumerate() {
            let target = &sets[i % sets.len()];
            if let std::collections::btree_map::Entry::Vacant(e) =
                self.orig_threads.entry((pid, tid))
            {
                match self.act.thread_affinity(pid, tid) {
                    Ok(cpus) => {
                        e.insert(cpus);
                    }
                    Err(err) => {
                        let r = Err(err);
                        classify(&mut c, Kind::Thread, &r, &format!("thread {pid}/{tid}"));
                        continue;
                    }
                }
            }
            let r = self.act.set_thread_affinity(pid, tid, target);
            classify(&mut c, Kind::Thread, &r, &format!("thread {pid}/{tid}"));
        }
        for (i, irq) in procfs::list_irqs(&root).into_iter().enumerate() {
            let path = procfs::irq_affinity_path(&root, irq);
            let r = self
                .remember_file(&path)
                .and_then(|()| self.act.write_file(&path, &sets[i % sets.len()].to_list()));
            classify(&mut c, Kind::Irq, &r, &path.display().to_string());
        }
        for path in procfs::list_workqueue_masks(&root) {
            let r = self
                .remember_file(&path)
                .and_then(|()| self.act.write_file(&path, &union.to_mask()));
            classify(&mut c, Kind::Workqueue, &r, &path.display().to_string());
        }
        c
    }

    /// Puts back every affinity changed since the start (called on SIGINT/SIGTERM).
    pub fn restore(&mut self) -> Counts {
        let mut c = Counts::default();
        for ((pid, tid), cpus) in std::mem::take(&mut self.orig_threads) {
            let r = self.act.set_thread_affinity(pid, tid, &cpus);
            classify(
                &mut c,
                Kind::Thread,
                &r,
                &format!("restore thread {pid}/{tid}"),
            );
        }
        let irq_dir = self.opts.root.join("proc/irq");
        for (path, text) in std::mem::take(&mut self.orig_files) {
            let kind = if path.starts_with(&irq_dir) {
                Kind::Irq
            } else {
                Kind::Workqueue
            };
            let r = self.act.write_file(&path, &text);
            classify(&mut c, kind, &r, &format!("restore {}", path.display()));
        }
        info!("restored: {c:?}");
        c
    }
}
