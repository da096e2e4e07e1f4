//! The cluster model: tasks, machines, cells, admission, usage and migrations.
//!
//! Time is trace time in microseconds and only advances with the rows fed in, so a run
//! is a pure function of (config, policy, rows): deterministic for a given seed.

use std::collections::VecDeque;

use giant_trace::synth::{mix64, SplitMix64};
use giant_trace::{EventType, TaskEvent, TaskUsage, TRACE_START_US};
use rustc_hash::FxHashMap;

use crate::metrics::{gini, Interval, OrphanCounts, Summary};
use crate::policy::{Candidate, CellView, Move, PolicyKind};
use crate::usage::{task_key, window_key, Modelled, UsageModel};
use crate::warm::WarmStart;
use crate::{Config, SimError};

const US: u64 = 1_000_000;
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    Running,
    /// The slot is on the free list (its task ended).
    Free,
}

#[derive(Debug, Clone)]
struct Task {
    job: u64,
    index: u32,
    state: State,
    machine: u32,
    pos: u32,
    priority: u8,
    cpu_req: f32,
    mem_req: f32,
    /// [`task_key`] of (job, index): hashed once, used by the model every window.
    key: u64,
    /// The model's values for the current requests (recomputed when they change), so
    /// going back to the model when real usage runs out costs no hashing.
    mdl: Modelled,
    /// The task whose usage row followed this one's last time: usage rows come in the
    /// same order window after window, so this predicts the next row's task without a
    /// hash lookup (checked against the row's job and index; a miss falls back to it).
    succ: u32,
    /// Modelled mean CPU (before the per-window burst factor).
    base_cpu: f32,
    mem: f32,
    peak: f32,
    mai: f32,
    /// Real usage is valid until this time; after it, modelled values apply.
    real_until: u64,
    submit_us: u64,
    start_us: u64,
    /// Machine stretch integral when the task joined its current machine.
    stretch_mark: f64,
    /// Stretch accumulated on previous machines (seconds of contended run time).
    stretch_acc: f64,
    /// Present when the run began (warm start) or first seen being scheduled: its real
    /// submit and start are unknown, so its duration is left out of the means.
    censored: bool,
}

#[derive(Debug, Default, Clone)]
struct Machine {
    tasks: Vec<u32>,
    pending: VecDeque<u32>,
    req: f64,
    cpu: f64,
    /// ∫ max(1, cpu / capacity) dt, seconds; tasks' slowdown is read from its increments.
    stretch: f64,
    stretch_at: u64,
}

/// Hints the CPU to start loading `r`'s cache line (no effect on results).
#[inline(always)]
fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint: it never faults and reads nothing into the
        // program; the pointer comes from a live reference anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((r as *const T).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// The job sampling of `cfg` as a row filter for [`giant_trace::TraceReader::with_job_filter`].
pub fn job_filter(cfg: &Config) -> giant_trace::JobFilter {
    let (below, seed) = (sample_threshold(cfg), cfg.seed);
    Box::new(move |job| sampled(below, seed, job))
}

fn sample_threshold(cfg: &Config) -> u64 {
    let frac = cfg.sample_fraction();
    if frac >= 1.0 {
        u64::MAX
    } else {
        (frac * u64::MAX as f64) as u64
    }
}

#[inline]
fn sampled(below: u64, seed: u64, job: u64) -> bool {
    below == u64::MAX || mix64(job ^ seed.rotate_left(17)) < below
}

/// One simulation run of one policy.
pub struct Simulation {
    cfg: Config,
    policy: PolicyKind,
    model: UsageModel,
    rng: SplitMix64,
    sample_below: u64,
    tasks: Vec<Task>,
    /// CPU usage of each task slot, apart from `tasks` so the per-window sums over
    /// machines read 4 bytes per task from a compact array instead of a whole task.
    cpus: Vec<f32>,
    /// Slot of the task of the last usage row matched (start of the `succ` chain).
    last_usage: u32,
    free: Vec<u32>,
    index: FxHashMap<(u64, u32), u32>,
    machines: Vec<Machine>,
    now: u64,
    started: bool,
    next_tick: u64,
    last_tick: u64,
    next_sample: u64,
    arrived_since_tick: bool,
    /// Warm start: a SCHEDULE for an unknown task submits it (it waited before the events).
    warm: bool,
    start_label: String,
    // Interval accumulators.
    iv_migrations: u64,
    iv_bytes: f64,
    iv_rank: [u64; 2],
    // Totals.
    tot: Totals,
    intervals: Vec<Interval>,
    scratch_cands: Vec<Candidate>,
    scratch_moves: Vec<Move>,
    scratch_loads: Vec<f64>,
}

#[derive(Debug, Default, Clone)]
struct Totals {
    rows: u64,
    events_used: u64,
    orphan_events: u64,
    /// Events naming a task the run does not know (and left so), by event code.
    orphans: [u64; giant_trace::census::EVENT_TYPES],
    usage_used: u64,
    usage_ignored: u64,
    usage_before: u64,
    far_ahead: u64,
    submitted: u64,
    finished: u64,
    /// Finished tasks whose duration is known (not censored).
    timed: u64,
    warm_running: u64,
    warm_pending: u64,
    warm_scheduled: u64,
    ticks: u64,
    overload_ticks: u64,
    duration_s: f64,
    stretched_s: f64,
    wait_s: f64,
    run_s: f64,
    real_task_s: f64,
    migrations: u64,
    bytes: f64,
    rank: [u64; 2],
    first_us: Option<u64>,
}

impl Simulation {
    /// Creates a run; `model` supplies usage where the trace has none.
    pub fn new(cfg: Config, policy: PolicyKind, model: UsageModel) -> Result<Self, SimError> {
        cfg.validate()?;
        let frac = cfg.sample_fraction();
        let sample_below = if frac >= 1.0 {
            u64::MAX
        } else {
            (frac * u64::MAX as f64) as u64
        };
        let n = cfg.machines as usize;
        Ok(Self {
            rng: SplitMix64::new(cfg.seed),
            sample_below,
            machines: vec![Machine::default(); n],
            policy,
            model,
            tasks: Vec::new(),
            cpus: Vec::new(),
            last_usage: NONE,
            free: Vec::new(),
            index: FxHashMap::default(),
            now: 0,
            started: false,
            next_tick: 0,
            last_tick: 0,
            next_sample: 0,
            arrived_since_tick: false,
            warm: false,
            start_label: "cold".into(),
            iv_migrations: 0,
            iv_bytes: 0.0,
            iv_rank: [0; 2],
            tot: Totals::default(),
            intervals: Vec::new(),
            scratch_cands: Vec::new(),
            scratch_moves: Vec::new(),
            scratch_loads: Vec::new(),
            cfg,
        })
    }

    /// The policy this run simulates.
    pub fn policy(&self) -> PolicyKind {
        self.policy
    }

    #[inline]
    fn sampled(&self, job: u64) -> bool {
        self.sample_below == u64::MAX
            || mix64(job ^ self.cfg.seed.rotate_left(17)) < self.sample_below
    }

    fn start_clock(&mut self, t: u64) {
        if !self.started {
            self.started = true;
            let t0 = t.max(TRACE_START_US);
            self.now = t0;
            self.next_tick = t0 + self.cfg.interval_s * US;
            self.last_tick = t0;
            self.next_sample = t0 + self.cfg.sample_interval_s * US;
            self.tot.first_us = Some(t0);
            for m in &mut self.machines {
                m.stretch_at = t0;
            }
        }
    }

    /// Runs ticks and samples due before `t`, then moves the clock to `t`.
    fn advance(&mut self, t: u64) {
        self.start_clock(t);
        let t = t.max(self.now);
        loop {
            let next = self.next_tick.min(self.next_sample);
            if next > t {
                break;
            }
            self.now = next;
            if self.next_tick == next {
                self.rebalance();
                let gap = if self.arrived_since_tick {
                    self.cfg.arrival_interval_s
                } else {
                    self.cfg.interval_s
                };
                self.arrived_since_tick = false;
                self.last_tick = next;
                self.next_tick = next + gap * US;
            }
            if self.next_sample == next {
                self.vary_modelled();
                self.sample();
                self.next_sample = next + self.cfg.sample_interval_s * US;
            }
        }
        self.now = t;
    }

    /// Feeds one task event (rows must come in time order across both tables).
    pub fn event(&mut self, e: &TaskEvent) {
        self.tot.rows += 1;
        if !self.sampled(e.job_id) {
            return;
        }
        self.advance(e.time);
        self.tot.events_used += 1;
        let key = (e.job_id, e.task_index);
        match e.event_type {
            EventType::Submit => {
                if self.index.contains_key(&key) {
                    // Already pending or running: a duplicate submit changes nothing.
                    return;
                }
                self.submit(e, false);
            }
            EventType::Schedule => {
                if self.index.contains_key(&key) {
                    // The model places and admits tasks itself.
                } else if self.warm {
                    self.tot.warm_scheduled += 1;
                    self.submit(e, true);
                } else {
                    self.tot.orphans[e.event_type as usize] += 1;
                }
            }
            EventType::UpdatePending | EventType::UpdateRunning => {
                if let Some(&id) = self.index.get(&key) {
                    self.update_request(id, e);
                } else {
                    self.orphan(e.event_type);
                }
            }
            _ => {
                if let Some(id) = self.index.remove(&key) {
                    self.end(id);
                } else {
                    self.orphan(e.event_type);
                }
            }
        }
    }

    fn orphan(&mut self, kind: EventType) {
        self.tot.orphan_events += 1;
        self.tot.orphans[kind as usize] += 1;
    }

    /// Starts the clock at the events' first time, so that usage rows that begin
    /// earlier neither start it nor add empty samples (the driver calls it).
    pub fn begin_at(&mut self, t: u64) {
        self.start_clock(t);
    }

    /// Counts a row skipped for being far ahead of every row before it
    /// ([`crate::driver::MAX_GAP_US`]).
    pub fn skip_far_ahead(&mut self) {
        self.tot.rows += 1;
        self.tot.far_ahead += 1;
    }

    /// When the clock started (µs), if it has.
    pub fn clock_start(&self) -> Option<u64> {
        self.tot.first_us
    }

    /// Counts a usage row from before the events' first time (no task can be known).
    pub fn usage_before_events(&mut self, u: &TaskUsage) {
        self.tot.rows += 1;
        if self.sampled(u.job_id) {
            self.tot.usage_before += 1;
        }
    }

    /// Puts the tasks of a warm start on the cluster at its time (before any row),
    /// through the usual placement and admission, running ones first; from then on a
    /// SCHEDULE for an unknown task submits it. Tasks of unsampled jobs are skipped.
    pub fn warm_start(&mut self, w: &WarmStart) {
        self.warm = true;
        self.start_label.clone_from(&w.label);
        self.advance(w.at_us);
        for t in &w.tasks {
            if !self.sampled(t.job) || self.index.contains_key(&(t.job, t.index)) {
                continue;
            }
            if t.running {
                self.tot.warm_running += 1;
            } else {
                self.tot.warm_pending += 1;
            }
            let e = TaskEvent {
                time: w.at_us,
                missing_info: None,
                job_id: t.job,
                task_index: t.index,
                machine_id: None,
                event_type: EventType::Submit,
                scheduling_class: 0,
                priority: t.priority,
                cpu_request: Some(t.cpu_request),
                memory_request: Some(t.memory_request),
                disk_request: None,
                different_machines: None,
            };
            self.submit(&e, true);
        }
    }

    /// Feeds one usage row: real usage for the task over `[start, end)`.
    pub fn usage(&mut self, u: &TaskUsage) {
        self.tot.rows += 1;
        if !self.sampled(u.job_id) {
            return;
        }
        self.advance(u.start_time);
        let Some(id) = self.find_usage_task(u.job_id, u.task_index) else {
            self.tot.usage_ignored += 1;
            return;
        };
        self.tot.usage_used += 1;
        let end = u.end_time.max(u.start_time);
        let old_cpu = self.cpus[id as usize];
        let t = &mut self.tasks[id as usize];
        let cpu = u.cpu_rate.unwrap_or(old_cpu).max(0.0);
        let mem = u.canonical_memory.unwrap_or(t.mem).max(0.0);
        let peak = u.max_cpu_rate.unwrap_or(cpu).max(cpu);
        let mai = u.mai.unwrap_or(t.mai);
        t.real_until = end;
        t.mem = mem;
        t.peak = peak;
        t.mai = mai;
        if t.state == State::Running {
            // A row that began before the clock (before the events) counts from now.
            let from = u.start_time.max(self.now);
            self.tot.real_task_s += end.saturating_sub(from) as f64 / US as f64;
        }
        self.set_cpu(id, cpu);
    }

    /// The slot of a usage row's task: first the task that followed the previous row's
    /// task last time, else the index. Also prefetches the slots the next rows will
    /// probably touch, so their cache misses overlap the parsing of the rows between.
    #[inline]
    fn find_usage_task(&mut self, job: u64, index: u32) -> Option<u32> {
        let last = self.last_usage;
        let guess = if last == NONE {
            NONE
        } else {
            self.tasks[last as usize].succ
        };
        let id = match self.tasks.get(guess as usize) {
            // A live slot holding this (job, index) is the one the index maps it to.
            Some(t) if t.state != State::Free && t.job == job && t.index == index => guess,
            _ => {
                let id = *self.index.get(&(job, index))?;
                if last != NONE {
                    self.tasks[last as usize].succ = id;
                }
                id
            }
        };
        self.last_usage = id;
        let next = self.tasks[id as usize].succ;
        if let Some(n) = self.tasks.get(next as usize) {
            prefetch(&self.machines[(n.machine as usize).min(self.machines.len() - 1)]);
            if let Some(n2) = self.tasks.get(n.succ as usize) {
                prefetch(n2);
            }
        }
        Some(id)
    }

    fn submit(&mut self, e: &TaskEvent, censored: bool) {
        self.tot.submitted += 1;
        self.arrived_since_tick = true;
        let cpu_req = e.cpu_request.unwrap_or(0.0).max(0.0);
        let mem_req = e.memory_request.unwrap_or(0.0).max(0.0);
        let key = task_key(e.job_id, e.task_index);
        let m = self.model.model_keyed(self.cfg.seed, key, cpu_req, mem_req);
        let task = Task {
            job: e.job_id,
            index: e.task_index,
            state: State::Pending,
            machine: self.rng.below(u64::from(self.cfg.machines)) as u32,
            pos: NONE,
            priority: e.priority,
            cpu_req,
            mem_req,
            key,
            mdl: m,
            succ: NONE,
            base_cpu: m.cpu,
            mem: m.mem,
            peak: m.peak,
            mai: m.mai,
            real_until: 0,
            submit_us: self.now,
            start_us: 0,
            stretch_mark: 0.0,
            stretch_acc: 0.0,
            censored,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.tasks[id as usize] = task;
                self.cpus[id as usize] = m.cpu;
                id
            }
            None => {
                self.tasks.push(task);
                self.cpus.push(m.cpu);
                (self.tasks.len() - 1) as u32
            }
        };
        self.index.insert((e.job_id, e.task_index), id);
        let mi = self.tasks[id as usize].machine as usize;
        let limit = self.cfg.overcommit * self.cfg.cpu_capacity;
        let mach = &self.machines[mi];
        if mach.pending.is_empty() && mach.req + f64::from(cpu_req) <= limit + 1e-12 {
            self.start(id);
        } else {
            self.machines[mi].pending.push_back(id);
        }
    }

    /// Brings a machine's stretch integral up to now (call before its CPU sum changes).
    #[inline]
    fn integrate(&mut self, mi: usize) {
        let cap = self.cfg.cpu_capacity;
        let m = &mut self.machines[mi];
        if self.now > m.stretch_at {
            let dt = (self.now - m.stretch_at) as f64 / US as f64;
            m.stretch += dt * (m.cpu / cap).max(1.0);
            m.stretch_at = self.now;
        }
    }

    fn start(&mut self, id: u32) {
        let now = self.now;
        let t = &mut self.tasks[id as usize];
        t.state = State::Running;
        t.start_us = now;
        let mi = t.machine as usize;
        self.attach(id, mi);
    }

    fn attach(&mut self, id: u32, mi: usize) {
        self.integrate(mi);
        let m = &mut self.machines[mi];
        let t = &mut self.tasks[id as usize];
        t.machine = mi as u32;
        t.pos = m.tasks.len() as u32;
        t.stretch_mark = m.stretch;
        m.tasks.push(id);
        m.req += f64::from(t.cpu_req);
        m.cpu += f64::from(self.cpus[id as usize]);
    }

    fn detach(&mut self, id: u32) -> usize {
        let mi = self.tasks[id as usize].machine as usize;
        self.integrate(mi);
        let m = &mut self.machines[mi];
        let t = &mut self.tasks[id as usize];
        t.stretch_acc += m.stretch - t.stretch_mark;
        let pos = t.pos as usize;
        m.tasks.swap_remove(pos);
        if let Some(&moved) = m.tasks.get(pos) {
            self.tasks[moved as usize].pos = pos as u32;
        }
        let t = &self.tasks[id as usize];
        m.req -= f64::from(t.cpu_req);
        m.cpu -= f64::from(self.cpus[id as usize]);
        if m.tasks.is_empty() {
            // Drop accumulated rounding error.
            m.req = 0.0;
            m.cpu = 0.0;
        }
        mi
    }

    fn set_cpu(&mut self, id: u32, cpu: f32) {
        let t = &self.tasks[id as usize];
        if t.state == State::Running {
            let mi = t.machine as usize;
            self.integrate(mi);
            let old = self.cpus[id as usize];
            self.machines[mi].cpu += f64::from(cpu) - f64::from(old);
        }
        self.cpus[id as usize] = cpu;
    }

    fn update_request(&mut self, id: u32, e: &TaskEvent) {
        let t = &mut self.tasks[id as usize];
        let old = t.cpu_req;
        if let Some(c) = e.cpu_request {
            t.cpu_req = c.max(0.0);
        }
        if let Some(m) = e.memory_request {
            t.mem_req = m.max(0.0);
        }
        t.mdl = self
            .model
            .model_keyed(self.cfg.seed, t.key, t.cpu_req, t.mem_req);
        if t.state == State::Running {
            let delta = f64::from(t.cpu_req) - f64::from(old);
            let mi = t.machine as usize;
            self.machines[mi].req += delta;
            if delta < 0.0 {
                self.admit(mi);
            }
        }
    }

    fn end(&mut self, id: u32) {
        let state = self.tasks[id as usize].state;
        if state == State::Running {
            let mi = self.detach(id);
            let now = self.now;
            let t = &self.tasks[id as usize];
            self.tot.finished += 1;
            let run = (now - t.start_us) as f64 / US as f64;
            self.tot.run_s += run;
            if !t.censored {
                let wait = (t.start_us - t.submit_us) as f64 / US as f64;
                self.tot.timed += 1;
                self.tot.wait_s += wait;
                self.tot.duration_s += run + wait;
                self.tot.stretched_s += t.stretch_acc + wait;
            }
            self.admit(mi);
        } else {
            let mi = self.tasks[id as usize].machine as usize;
            let q = &mut self.machines[mi].pending;
            if let Some(p) = q.iter().position(|&x| x == id) {
                q.remove(p);
            }
        }
        self.tasks[id as usize].real_until = 0;
        self.tasks[id as usize].state = State::Free;
        self.free.push(id);
    }

    /// Starts pending tasks of a machine, in order, while they fit.
    fn admit(&mut self, mi: usize) {
        let limit = self.cfg.overcommit * self.cfg.cpu_capacity;
        while let Some(&id) = self.machines[mi].pending.front() {
            let req = f64::from(self.tasks[id as usize].cpu_req);
            // A task larger than the limit would block forever; run it on an empty machine.
            let fits =
                self.machines[mi].req + req <= limit + 1e-12 || self.machines[mi].tasks.is_empty();
            if !fits {
                break;
            }
            self.machines[mi].pending.pop_front();
            self.start(id);
        }
    }

    fn migratable(&self, t: &Task) -> bool {
        t.priority <= self.cfg.migratable_max_priority
            && f64::from(t.peak) <= self.cfg.migratable_max_peak_cpu
    }

    fn rebalance(&mut self) {
        let cap = self.cfg.cpu_capacity;
        let limit = self.cfg.warning_threshold * cap;
        // Counted for every policy, `none` included: a run with no overloaded tick gives
        // the policies nothing to do, and the outputs say so.
        self.tot.ticks += 1;
        if !self.machines.iter().any(|m| m.cpu > limit) {
            return;
        }
        self.tot.overload_ticks += 1;
        if self.policy == PolicyKind::None {
            return;
        }
        let cell = self.cfg.cell_size as usize;
        let bytes_per_unit = self.cfg.memory_unit_gib * (1u64 << 30) as f64;
        let tick_s = (self.now - self.last_tick) as f64 / US as f64;
        let mut budget = if self.policy.uses_budget() {
            self.cfg.network_budget_mbit_s * 1e6 / 8.0 * tick_s
        } else {
            f64::INFINITY
        };
        let n = self.machines.len();
        let mut loads = std::mem::take(&mut self.scratch_loads);
        let mut cands = std::mem::take(&mut self.scratch_cands);
        let mut moves = std::mem::take(&mut self.scratch_moves);
        for base in (0..n).step_by(cell) {
            let end = (base + cell).min(n);
            if end - base < 2 {
                continue;
            }
            if !(base..end).any(|i| self.machines[i].cpu > limit) {
                continue;
            }
            loads.clear();
            loads.extend((base..end).map(|i| self.machines[i].cpu));
            for src in 0..end - base {
                if loads[src] <= limit {
                    continue;
                }
                cands.clear();
                for &id in &self.machines[base + src].tasks {
                    let t = &self.tasks[id as usize];
                    if self.migratable(t) {
                        let cpu = self.cpus[id as usize];
                        cands.push(Candidate {
                            task: id,
                            cpu_use: f64::from(cpu),
                            cpu_request: f64::from(t.cpu_req),
                            mem_use: f64::from(t.mem),
                            bytes: f64::from(t.mem) * bytes_per_unit,
                            cache_misses: f64::from(t.mai) * f64::from(cpu),
                        });
                    }
                }
                if cands.is_empty() {
                    continue;
                }
                moves.clear();
                let mut view = CellView {
                    loads: &mut loads,
                    capacity: cap,
                    threshold: self.cfg.warning_threshold,
                    source: src,
                    candidates: &mut cands,
                    budget_bytes: &mut budget,
                };
                self.policy.plan(&mut view, &mut moves);
                for mv in &moves {
                    let bytes = f64::from(self.tasks[mv.task as usize].mem) * bytes_per_unit;
                    self.detach(mv.task);
                    self.attach(mv.task, base + mv.to);
                    self.iv_migrations += 1;
                    self.iv_bytes += bytes;
                    self.iv_rank[usize::from(mv.rank.min(1))] += 1;
                }
                if !moves.is_empty() {
                    self.admit(base + src);
                }
            }
        }
        self.scratch_loads = loads;
        self.scratch_cands = cands;
        self.scratch_moves = moves;
    }

    /// Every sample period: running tasks whose real usage row has run out go back to the
    /// model (so expiry is detected within one period, with no per-row bookkeeping), and
    /// every modelled task gets this window's burst factor.
    ///
    /// Two passes: the tasks in slot order (a sequential walk; each task's update depends
    /// on that task alone), then each machine's sum in its task-list order (the same
    /// floating-point order as summing while updating) over the compact `cpus`.
    fn vary_modelled(&mut self) {
        let wkey = window_key(self.now / (300 * US));
        let cap = self.cfg.cpu_capacity as f32;
        let now = self.now;
        let seed = self.cfg.seed;
        for (t, cpu) in self.tasks.iter_mut().zip(self.cpus.iter_mut()) {
            if t.state != State::Running {
                continue;
            }
            if t.real_until != 0 && t.real_until <= now {
                let m = t.mdl;
                t.real_until = 0;
                t.base_cpu = m.cpu;
                t.mem = m.mem;
                t.peak = m.peak;
                t.mai = m.mai;
            }
            if t.real_until == 0 {
                let b = self.model.burst_keyed(seed ^ t.key, wkey);
                *cpu = (t.base_cpu * b).min(cap);
            }
        }
        for mi in 0..self.machines.len() {
            self.integrate(mi);
            let m = &mut self.machines[mi];
            let mut sum = 0.0f64;
            for &id in &m.tasks {
                sum += f64::from(self.cpus[id as usize]);
            }
            m.cpu = sum;
        }
    }

    fn sample(&mut self) {
        let cap = self.cfg.cpu_capacity;
        let mut utils: Vec<f64> = self
            .machines
            .iter()
            .map(|m| (m.cpu / cap).max(0.0))
            .collect();
        let n = utils.len() as f64;
        let mean = utils.iter().sum::<f64>() / n;
        let over = utils.iter().filter(|&&u| u > 1.0).count() as f64 / n;
        let excess = utils.iter().map(|&u| (u - 1.0).max(0.0)).sum::<f64>() / n;
        let g = gini(&mut utils);
        let running: usize = self.machines.iter().map(|m| m.tasks.len()).sum();
        let pending: usize = self.machines.iter().map(|m| m.pending.len()).sum();
        self.tot.migrations += self.iv_migrations;
        self.tot.bytes += self.iv_bytes;
        self.tot.rank[0] += self.iv_rank[0];
        self.tot.rank[1] += self.iv_rank[1];
        self.intervals.push(Interval {
            time_s: self.now as f64 / US as f64,
            mean_cpu: mean,
            gini: g,
            overcommitted: over,
            mean_excess: excess,
            running: running as u64,
            pending: pending as u64,
            migrations: self.iv_migrations,
            bytes: self.iv_bytes,
            cumulative_bytes: self.tot.bytes,
            to_first: self.iv_rank[0],
            to_second: self.iv_rank[1],
        });
        self.iv_migrations = 0;
        self.iv_bytes = 0.0;
        self.iv_rank = [0; 2];
    }

    /// Closes the run at `end_us` (or the last row's time) and returns its metrics.
    pub fn finish(mut self, end_us: Option<u64>) -> Summary {
        let end = end_us.unwrap_or(self.now).max(self.now);
        self.advance(end);
        // Running tasks' time counts toward the modelled share.
        let mut run_open = 0.0;
        for m in &self.machines {
            for &id in &m.tasks {
                run_open += (self.now - self.tasks[id as usize].start_us) as f64 / US as f64;
            }
        }
        let first = self.tot.first_us.unwrap_or(self.now);
        let span_s = (self.now.saturating_sub(first)) as f64 / US as f64;
        let iv = &self.intervals;
        let avg = |f: fn(&Interval) -> f64| {
            if iv.is_empty() {
                0.0
            } else {
                iv.iter().map(f).sum::<f64>() / iv.len() as f64
            }
        };
        let task_s = self.tot.run_s + run_open;
        let real_frac = if task_s > 0.0 {
            (self.tot.real_task_s / task_s).min(1.0)
        } else {
            0.0
        };
        let fin = self.tot.timed.max(1) as f64;
        Summary {
            policy: self.policy.name().to_string(),
            machines: self.cfg.machines,
            overcommit: self.cfg.overcommit,
            seed: self.cfg.seed,
            simulated_s: span_s,
            rows: self.tot.rows,
            events_used: self.tot.events_used,
            usage_rows_used: self.tot.usage_used,
            orphan_events: self.tot.orphan_events,
            orphans_by_type: OrphanCounts::from_codes(&self.tot.orphans),
            tasks_submitted: self.tot.submitted,
            tasks_finished: self.tot.finished,
            mean_cpu: avg(|i| i.mean_cpu),
            gini: avg(|i| i.gini),
            overcommitted: avg(|i| i.overcommitted),
            mean_excess: avg(|i| i.mean_excess),
            mean_pending: avg(|i| i.pending as f64),
            mean_duration_s: self.tot.duration_s / fin,
            mean_wait_s: self.tot.wait_s / fin,
            mean_stretched_duration_s: self.tot.stretched_s / fin,
            migrations: self.tot.migrations,
            migration_gb: self.tot.bytes / 1e9,
            migration_mbit_s: if span_s > 0.0 {
                self.tot.bytes * 8.0 / 1e6 / span_s
            } else {
                0.0
            },
            peak_interval_mbit_s: iv
                .iter()
                .map(|i| i.bytes * 8.0 / 1e6 / self.cfg.sample_interval_s as f64)
                .fold(0.0, f64::max),
            to_first: self.tot.rank[0],
            to_second: self.tot.rank[1],
            real_usage_fraction: real_frac,
            usage_source: if real_frac >= 0.999 {
                "real".into()
            } else if real_frac <= 0.0 {
                "modelled".into()
            } else {
                format!(
                    "mixed: {:.1}% of task-time modelled",
                    100.0 * (1.0 - real_frac)
                )
            },
            start: std::mem::take(&mut self.start_label),
            warm_running: self.tot.warm_running,
            warm_pending: self.tot.warm_pending,
            warm_scheduled: self.tot.warm_scheduled,
            tasks_timed: self.tot.timed,
            usage_rows_ignored: self.tot.usage_ignored,
            usage_rows_before_events: self.tot.usage_before,
            rows_far_ahead: self.tot.far_ahead,
            usage_model: self.model.describe(),
            mean_running: avg(|i| i.running as f64),
            ticks: self.tot.ticks,
            overload_ticks: self.tot.overload_ticks,
            events_s: None,
            usage_s: None,
            comparable: true,
            verdict: String::new(),
            warnings: Vec::new(),
            intervals: std::mem::take(&mut self.intervals),
        }
    }
}
