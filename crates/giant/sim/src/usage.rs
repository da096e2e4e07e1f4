//! Usage model: what a task uses when the trace has no usage row for that moment.
//!
//! The real excerpt's usage covers only the first 5-minute window (600 s to 900 s). For
//! the rest, each task's usage is its request scaled by a ratio drawn from the empirical
//! distribution of `usage / request` seen in the real rows (one draw per task, keyed by a
//! hash of job, task index and seed, so runs are deterministic). Given real rows for a
//! window, the simulator uses them instead; outputs say how much task-time was modelled.

use giant_trace::synth::mix64;
use giant_trace::{TaskEvent, TaskUsage};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// Usage/request ratios are clamped here: above it (under 1 % of the real rows, from a
/// handful of tasks of the first jobs) single tasks would fill a machine on their own.
pub const MAX_CPU_RATIO: f32 = 2.0;

/// Clamp of the per-window burst factor.
pub const MAX_BURST: f32 = 4.0;

/// Quantiles kept per distribution.
const QUANTILES: usize = 1001;

/// Quantiles kept per distribution of the built-in model ([`UsageModel::excerpt`]).
pub const EXCERPT_QUANTILES: usize = 101;

/// Fewest usage rows matched to a task's request from which [`UsageModel::fit_or_excerpt`]
/// fits a model. The excerpt's rows give 9,996; a usage file from another time than the
/// events matches a few dozen (parts 1-3 with the excerpt's usage: 29 to 68), all from the
/// few tasks that live through both, and a model fitted on them once cut modelled CPU 40x.
pub const MIN_FIT_ROWS: usize = 1_000;

/// Empirical distributions used to model usage.
#[derive(Debug, Clone, Serialize)]
pub struct UsageModel {
    /// `cpu_rate / cpu_request`.
    pub cpu_ratio: Vec<f32>,
    /// `canonical memory / memory_request`.
    pub mem_ratio: Vec<f32>,
    /// `max_cpu_rate / cpu_rate` (peak over mean).
    pub peak_ratio: Vec<f32>,
    /// Memory accesses per instruction.
    pub mai: Vec<f32>,
    /// `sampled_cpu / cpu_rate`: a random 1-s sample over the 5-min mean, i.e. how far a
    /// task's CPU strays from its mean; drawn per task and window to vary modelled usage.
    pub burst_ratio: Vec<f32>,
    /// Mean of `burst_ratio`.
    pub burst_mean: f32,
    /// Rows the distributions were built from (0 = built-in defaults).
    pub samples: usize,
    /// Where the distributions come from, for the outputs.
    pub origin: String,
    /// Built into the simulator rather than fitted on the trace's own rows.
    pub builtin: bool,
}

impl Default for UsageModel {
    /// Used when no real usage row can be matched: fixed ratios, documented in docs/giant.md.
    fn default() -> Self {
        Self {
            cpu_ratio: vec![0.5],
            mem_ratio: vec![0.6],
            peak_ratio: vec![2.0],
            mai: vec![0.01],
            burst_ratio: vec![1.0],
            burst_mean: 1.0,
            samples: 0,
            origin: "fixed ratios (CPU = request x 0.5)".into(),
            builtin: true,
        }
    }
}

fn quantiles(mut v: Vec<f32>) -> Vec<f32> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return Vec::new();
    }
    v.sort_by(|a, b| a.total_cmp(b));
    (0..QUANTILES)
        .map(|i| v[i * (v.len() - 1) / (QUANTILES - 1)])
        .collect()
}

impl UsageModel {
    /// Builds the distributions from usage rows joined to the requests in `events`.
    pub fn fit(events: &[TaskEvent], usage: &[TaskUsage]) -> Self {
        let mut req: FxHashMap<(u64, u32), (f32, f32)> = FxHashMap::default();
        for e in events {
            if let (Some(c), Some(m)) = (e.cpu_request, e.memory_request) {
                if c > 0.0 && m > 0.0 {
                    req.insert((e.job_id, e.task_index), (c, m));
                }
            }
        }
        let (mut cpu, mut mem, mut peak, mut mai, mut burst) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for u in usage {
            if let Some(&(c, m)) = req.get(&(u.job_id, u.task_index)) {
                if let Some(r) = u.cpu_rate {
                    cpu.push((r / c).min(MAX_CPU_RATIO));
                    if let Some(p) = u.max_cpu_rate {
                        if r > 0.0 {
                            peak.push((p / r).clamp(1.0, 50.0));
                        }
                    }
                }
                if let Some(r) = u.canonical_memory {
                    mem.push((r / m).min(MAX_CPU_RATIO));
                }
            }
            if let (Some(r), Some(sc)) = (u.cpu_rate, u.sampled_cpu) {
                if r > 0.0 {
                    burst.push((sc / r).min(MAX_BURST));
                }
            }
            if let Some(a) = u.mai {
                mai.push(a);
            }
        }
        let samples = cpu.len();
        let d = Self::default();
        let or = |q: Vec<f32>, d: Vec<f32>| if q.is_empty() { d } else { q };
        Self {
            cpu_ratio: or(quantiles(cpu), d.cpu_ratio),
            mem_ratio: or(quantiles(mem), d.mem_ratio),
            peak_ratio: or(quantiles(peak), d.peak_ratio),
            mai: or(quantiles(mai), d.mai),
            burst_ratio: or(quantiles(burst), d.burst_ratio),
            burst_mean: 0.0,
            samples,
            origin: format!("fitted on {samples} usage rows matched to this trace's requests"),
            builtin: false,
        }
        .with_burst_mean()
    }

    /// [`fit`](Self::fit) when at least [`MIN_FIT_ROWS`] usage rows match a task's
    /// request, else the built-in [`excerpt`](Self::excerpt) model, whose `origin` then
    /// says how many rows matched.
    pub fn fit_or_excerpt(events: &[TaskEvent], usage: &[TaskUsage]) -> Self {
        let fitted = Self::fit(events, usage);
        if fitted.samples >= MIN_FIT_ROWS {
            return fitted;
        }
        let mut m = Self::excerpt();
        if !usage.is_empty() {
            m.origin = format!(
                "{}: the usage given matched {} rows to this trace's requests (a fit needs {MIN_FIT_ROWS})",
                m.origin, fitted.samples
            );
        }
        m
    }

    /// The model fitted on the real excerpt (task_events parts 0-3 with the first 10,000
    /// rows of task_usage part 0: Google clusterdata-2011-2, CC-BY 4.0), kept as
    /// [`EXCERPT_QUANTILES`] quantiles per distribution: modelled usage for traces whose
    /// own usage rows cannot be matched (`tests/sim.rs` checks it against the excerpt).
    pub fn excerpt() -> Self {
        use crate::usage_excerpt as x;
        Self {
            cpu_ratio: x::CPU_RATIO.to_vec(),
            mem_ratio: x::MEM_RATIO.to_vec(),
            peak_ratio: x::PEAK_RATIO.to_vec(),
            mai: x::MAI.to_vec(),
            burst_ratio: x::BURST_RATIO.to_vec(),
            burst_mean: 0.0,
            samples: x::SAMPLES,
            origin: format!(
                "built in: fitted on the excerpt's {} usage rows (task_usage part 0, 600-900 s)",
                x::SAMPLES
            ),
            builtin: true,
        }
        .with_burst_mean()
    }

    /// The same distributions kept as `n` quantiles each (`n` >= 2); `origin` unchanged.
    pub fn downsampled(&self, n: usize) -> Self {
        let pick = |q: &[f32]| -> Vec<f32> {
            if q.len() <= 1 {
                return q.to_vec();
            }
            (0..n).map(|i| q[i * (q.len() - 1) / (n - 1)]).collect()
        };
        Self {
            cpu_ratio: pick(&self.cpu_ratio),
            mem_ratio: pick(&self.mem_ratio),
            peak_ratio: pick(&self.peak_ratio),
            mai: pick(&self.mai),
            burst_ratio: pick(&self.burst_ratio),
            burst_mean: 0.0,
            samples: self.samples,
            origin: self.origin.clone(),
            builtin: self.builtin,
        }
        .with_burst_mean()
    }

    /// Where the distributions come from.
    pub fn describe(&self) -> String {
        self.origin.clone()
    }

    fn with_burst_mean(mut self) -> Self {
        self.burst_mean =
            self.burst_ratio.iter().sum::<f32>() / self.burst_ratio.len().max(1) as f32;
        self
    }

    fn draw(q: &[f32], key: u64) -> f32 {
        if q.is_empty() {
            return 0.0;
        }
        q[((u128::from(key) * q.len() as u128) >> 64) as usize]
    }

    /// Modelled (cpu, memory, peak cpu, cache-miss proxy) of a task; deterministic per task.
    pub fn model(&self, seed: u64, job: u64, index: u32, cpu_req: f32, mem_req: f32) -> Modelled {
        self.model_keyed(seed, task_key(job, index), cpu_req, mem_req)
    }

    /// [`model`](Self::model) with the task's [`task_key`] computed once by the caller.
    #[inline]
    pub fn model_keyed(&self, seed: u64, key: u64, cpu_req: f32, mem_req: f32) -> Modelled {
        let k = mix64(seed ^ key);
        let cpu = cpu_req * Self::draw(&self.cpu_ratio, mix64(k ^ 1));
        let mem = mem_req * Self::draw(&self.mem_ratio, mix64(k ^ 2));
        let peak = (cpu * Self::draw(&self.peak_ratio, mix64(k ^ 3))).min(1.0);
        let mai = Self::draw(&self.mai, mix64(k ^ 4));
        Modelled {
            cpu,
            mem,
            peak,
            mai,
        }
    }
}

impl UsageModel {
    /// Multiplier of a task's modelled CPU in usage window `window` (deterministic).
    pub fn burst(&self, seed: u64, job: u64, index: u32, window: u64) -> f32 {
        self.burst_keyed(seed ^ task_key(job, index), window_key(window))
    }

    /// [`burst`](Self::burst) from `seed ^ task_key(job, index)` and [`window_key`], so a
    /// pass over every task hashes the window once and each task once per run.
    #[inline]
    pub fn burst_keyed(&self, seeded_task: u64, window: u64) -> f32 {
        let k = mix64(seeded_task ^ window);
        // Normalised to mean 1 and blended half-and-half with 1: a 1-s sample is far
        // spikier than the 5-min means we model.
        let mean = self.burst_mean;
        if mean <= 0.0 {
            return 1.0;
        }
        0.5 + 0.5 * Self::draw(&self.burst_ratio, k) / mean
    }
}

/// Per-task hash behind [`UsageModel::model`] and [`UsageModel::burst`].
#[inline]
pub fn task_key(job: u64, index: u32) -> u64 {
    mix64(job ^ (u64::from(index) << 40))
}

/// Per-window hash behind [`UsageModel::burst`].
#[inline]
pub fn window_key(window: u64) -> u64 {
    mix64(window.wrapping_add(0x5bd1))
}

/// A task's modelled usage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Modelled {
    /// Mean CPU rate.
    pub cpu: f32,
    /// Memory usage.
    pub mem: f32,
    /// Peak CPU rate.
    pub peak: f32,
    /// Memory accesses per instruction.
    pub mai: f32,
}
