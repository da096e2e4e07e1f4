//! Synthetic clusterdata-2011-2 traces in the official schema, for benchmarks.
//!
//! The generator streams one 300-second usage window at a time into caller buffers, so a
//! full-scale trace (12.5k machines, 29 days, about 1.3 billion usage rows and 120
//! million task events) can be produced and consumed without being stored. Rows come out
//! in time order, as in the real files. The workload model is deliberately simple and
//! documented in `docs/giant.md`: a standing population of long-running tasks plus a
//! Poisson stream of jobs (1 task with probability 0.7, else 2..=50), task lifetimes a
//! mix of exponentials (80 % mean 1,000 s, 20 % mean 20,000 s), requests drawn from the
//! discrete sizes common in the real trace, usage = request × a per-task factor.

use std::io::Write;

/// Deterministic SplitMix64 generator (small, fast, good enough for workload models).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// Seeds the generator.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }
    /// Uniform in [0, 1).
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform in `0..n` (n > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
    /// Exponential with the given mean.
    #[inline]
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.next_f64()).ln()
    }
}

/// Stateless 64-bit mixer (SplitMix64 finaliser); a keyed hash for deterministic draws.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Parameters of a synthetic trace. Rates scale with `machines`.
#[derive(Debug, Clone)]
pub struct SynthConfig {
    /// Machines in the cell (the real trace: about 12.5k).
    pub machines: u32,
    /// Length of the trace in seconds (the real trace: 29 days).
    pub duration_s: u64,
    /// Seed of every random draw.
    pub seed: u64,
    /// Long-running tasks present at the start, per machine.
    pub initial_tasks_per_machine: f64,
    /// New tasks per second per machine.
    pub task_arrivals_per_machine_s: f64,
}

impl SynthConfig {
    /// The full trace's scale: 12,500 machines for 29 days.
    pub fn full_scale(seed: u64) -> Self {
        Self {
            machines: 12_500,
            duration_s: 29 * 86_400,
            seed,
            initial_tasks_per_machine: 6.0,
            task_arrivals_per_machine_s: 16.0 / 12_500.0,
        }
    }
}

/// Length of one usage window (as in the real trace).
pub const WINDOW_S: u64 = 300;
const US: u64 = 1_000_000;

#[derive(Debug, Clone)]
struct Task {
    job: u64,
    index: u32,
    machine: u64,
    start_us: u64,
    end_us: u64,
    end_kind: u8,
    user: u16,
    class: u8,
    prio: u8,
    cpu: f32,
    mem: f32,
    factor: f32,
}

/// Streams a synthetic trace window by window.
pub struct SynthTrace {
    cfg: SynthConfig,
    rng: SplitMix64,
    window: u64,
    windows: u64,
    active: Vec<Task>,
    arrivals: Vec<Task>,
    next_arrival_us: u64,
    next_job: u64,
    users: Vec<[u8; 44]>,
    pending: Vec<(u64, u8, usize)>,
}

const CPU_SIZES: [f32; 8] = [
    0.00625, 0.0125, 0.01874, 0.025, 0.03125, 0.0625, 0.125, 0.25,
];
const MEM_SIZES: [f32; 8] = [
    0.0025, 0.005, 0.0102, 0.0159, 0.0318, 0.0636, 0.0795, 0.1272,
];

impl SynthTrace {
    /// Starts a trace; rows at time 0 describe the tasks running before it.
    pub fn new(cfg: SynthConfig) -> Self {
        let mut rng = SplitMix64::new(cfg.seed);
        const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let users = (0..512)
            .map(|_| {
                let mut u = [b'='; 44];
                for b in u.iter_mut().take(43) {
                    *b = B64[rng.below(64) as usize];
                }
                u
            })
            .collect();
        let windows = cfg.duration_s.div_ceil(WINDOW_S);
        let mut t = Self {
            rng,
            window: 0,
            windows,
            active: Vec::new(),
            arrivals: Vec::new(),
            next_arrival_us: 0,
            next_job: 1_000_000,
            users,
            pending: Vec::new(),
            cfg,
        };
        let initial = (t.cfg.initial_tasks_per_machine * f64::from(t.cfg.machines)) as u64;
        let mut made = 0;
        while made < initial {
            let n = t.job_size().min((initial - made) as u32);
            t.new_job(0, n, true);
            made += u64::from(n);
        }
        t.active = std::mem::take(&mut t.arrivals);
        t.next_arrival_us = t.arrival_gap();
        t
    }

    fn job_size(&mut self) -> u32 {
        if self.rng.next_f64() < 0.7 {
            1
        } else {
            2 + self.rng.below(49) as u32
        }
    }

    fn arrival_gap(&mut self) -> u64 {
        let tasks_per_s = self.cfg.task_arrivals_per_machine_s * f64::from(self.cfg.machines);
        // Mean job size is 0.7 + 0.3 * 26 = 8.5 tasks.
        let jobs_per_s = (tasks_per_s / 8.5).max(1e-9);
        (self.rng.exp(1.0 / jobs_per_s) * US as f64) as u64 + 1
    }

    fn new_job(&mut self, at_us: u64, n: u32, lifelong: bool) {
        let job = self.next_job;
        self.next_job += 1 + self.rng.below(5);
        let user = self.rng.below(self.users.len() as u64) as u16;
        let prio = [0u8, 0, 1, 2, 2, 4, 9, 9, 10, 11][self.rng.below(10) as usize];
        let class = self.rng.below(4) as u8;
        let cpu = CPU_SIZES[self.rng.below(8) as usize];
        let mem = MEM_SIZES[self.rng.below(8) as usize];
        for index in 0..n {
            let end_us = if lifelong {
                crate::TIME_AFTER_TRACE
            } else {
                let mean = if self.rng.next_f64() < 0.8 {
                    1_000.0
                } else {
                    20_000.0
                };
                at_us + (self.rng.exp(mean) * US as f64) as u64 + US
            };
            let r = self.rng.next_f64();
            let end_kind = if r < 0.8 {
                4
            } else if r < 0.9 {
                5
            } else {
                3
            };
            let factor = (0.05 + 0.9 * self.rng.next_f64() * self.rng.next_f64()) as f32;
            self.arrivals.push(Task {
                job,
                index,
                machine: 1 + self.rng.below(u64::from(self.cfg.machines)),
                start_us: at_us,
                end_us,
                end_kind,
                user,
                class,
                prio,
                cpu,
                mem,
                factor,
            });
        }
    }

    /// Number of 300-s windows in the trace.
    pub fn windows(&self) -> u64 {
        self.windows
    }

    /// Tasks currently running.
    pub fn active_tasks(&self) -> usize {
        self.active.len()
    }

    /// Appends the next window's task_events and task_usage rows; `false` when done.
    pub fn next_window(&mut self, events: &mut Vec<u8>, usage: &mut Vec<u8>) -> bool {
        if self.window >= self.windows {
            return false;
        }
        if self.window == 0 {
            for i in 0..self.active.len() {
                let t = self.active[i].clone();
                self.write_event(events, &t, 0, 0);
                self.write_event(events, &t, 0, 1);
            }
        }
        let w0 = crate::TRACE_START_US + self.window * WINDOW_S * US;
        let w1 = w0 + WINDOW_S * US;
        // New jobs in this window.
        self.arrivals.clear();
        if self.next_arrival_us < w0 {
            self.next_arrival_us = w0;
        }
        while self.next_arrival_us < w1 {
            let n = self.job_size();
            let at = self.next_arrival_us;
            self.new_job(at, n, false);
            let gap = self.arrival_gap();
            self.next_arrival_us += gap;
        }
        // Events: arrivals (submit + schedule) and ends, sorted by time.
        let base = self.active.len();
        self.active.append(&mut self.arrivals);
        self.pending.clear();
        for (i, t) in self.active.iter().enumerate() {
            if i >= base {
                self.pending.push((t.start_us, 0, i));
                self.pending.push((t.start_us + 1, 1, i));
            }
            if t.end_us < w1 {
                self.pending
                    .push((t.end_us.max(t.start_us + 2), t.end_kind, i));
            }
        }
        self.pending.sort_unstable();
        let pending = std::mem::take(&mut self.pending);
        for &(time, kind, i) in &pending {
            let t = self.active[i].clone();
            self.write_event(events, &t, time, kind);
        }
        self.pending = pending;
        // Usage rows: tasks alive at the window start first, then arrivals in order.
        for t in &self.active[..base] {
            write_usage(usage, t, w0, t.end_us.min(w1));
        }
        for t in &self.active[base..] {
            write_usage(usage, t, t.start_us, t.end_us.min(w1));
        }
        self.active.retain(|t| t.end_us >= w1);
        self.window += 1;
        true
    }

    fn write_event(&self, out: &mut Vec<u8>, t: &Task, time: u64, kind: u8) {
        put_u64(out, time);
        out.extend_from_slice(b",,");
        put_task_id(out, t);
        if kind != 0 {
            put_u64(out, t.machine);
        }
        out.push(b',');
        put_u64(out, u64::from(kind));
        out.push(b',');
        out.extend_from_slice(&self.users[usize::from(t.user)]);
        out.push(b',');
        put_u64(out, u64::from(t.class));
        out.push(b',');
        put_u64(out, u64::from(t.prio));
        out.push(b',');
        put_frac(out, t.cpu);
        out.push(b',');
        put_frac(out, t.mem);
        out.extend_from_slice(b",0.0003862,0\n");
    }
}

/// The task's `job_id,task_index,` columns, which both tables share.
fn put_task_id(out: &mut Vec<u8>, t: &Task) {
    put_u64(out, t.job);
    out.push(b',');
    put_u64(out, u64::from(t.index));
    out.push(b',');
}

fn write_usage(out: &mut Vec<u8>, t: &Task, start: u64, end: u64) {
    put_u64(out, start);
    out.push(b',');
    put_u64(out, end);
    out.push(b',');
    put_task_id(out, t);
    put_u64(out, t.machine);
    let cpu = t.cpu * t.factor;
    let mem = t.mem * (0.5 + 0.5 * t.factor);
    for v in [
        cpu,
        mem,
        mem * 1.1,
        0.0011,
        0.0015,
        mem * 1.05,
        0.00003,
        0.00018,
        (cpu * 3.0).min(1.0),
        0.00035,
        2.445,
        0.0072,
        0.0,
    ] {
        out.push(b',');
        put_frac(out, v);
    }
    out.extend_from_slice(b",1,");
    put_frac(out, cpu * 1.2);
    out.push(b'\n');
}

/// Writes an unsigned integer in decimal.
#[inline]
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Writes a non-negative float with up to 5 decimals, trailing zeros trimmed.
#[inline]
pub fn put_frac(out: &mut Vec<u8>, v: f32) {
    let scaled = (f64::from(v.max(0.0)) * 100_000.0).round() as u64;
    put_u64(out, scaled / 100_000);
    let mut frac = scaled % 100_000;
    if frac == 0 {
        return;
    }
    let mut digits = 5;
    while frac.is_multiple_of(10) {
        frac /= 10;
        digits -= 1;
    }
    out.push(b'.');
    let s = out.len();
    put_u64(out, frac);
    let written = out.len() - s;
    for _ in written..digits {
        out.insert(s, b'0');
    }
}

/// Writes a whole synthetic trace as two files (plain or, with `gzip`, compressed).
pub fn write_files(
    cfg: SynthConfig,
    events: &mut dyn Write,
    usage: &mut dyn Write,
) -> std::io::Result<(u64, u64)> {
    let mut t = SynthTrace::new(cfg);
    let (mut eb, mut ub) = (Vec::new(), Vec::new());
    let (mut ne, mut nu) = (0u64, 0u64);
    while t.next_window(&mut eb, &mut ub) {
        ne += memchr::memchr_iter(b'\n', &eb).count() as u64;
        nu += memchr::memchr_iter(b'\n', &ub).count() as u64;
        events.write_all(&eb)?;
        usage.write_all(&ub)?;
        eb.clear();
        ub.clear();
    }
    Ok((ne, nu))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{OnError, Record, TaskEvent, TaskUsage, TraceReader};

    #[test]
    fn frac_format() {
        let mut o = Vec::new();
        for v in [0.0f32, 0.5, 0.00625, 0.0102, 2.445, 1.0, 0.00003] {
            o.clear();
            put_frac(&mut o, v);
            let s = std::str::from_utf8(&o).unwrap();
            let back: f32 = s.parse().unwrap();
            assert!((back - v).abs() < 1e-5, "{v} -> {s}");
        }
    }

    #[test]
    fn synthetic_rows_parse_and_are_time_ordered() {
        let cfg = SynthConfig {
            machines: 100,
            duration_s: 3 * 3600,
            seed: 7,
            ..SynthConfig::full_scale(7)
        };
        let (mut ev, mut us) = (Vec::new(), Vec::new());
        let (ne, nu) = write_files(cfg, &mut ev, &mut us).unwrap();
        assert!(ne > 1000 && nu > 10_000, "{ne} {nu}");
        let mut last = 0;
        for r in TraceReader::<_, TaskEvent>::new(&ev[..], "ev", OnError::Fail) {
            let r = r.unwrap();
            assert!(r.time() >= last);
            last = r.time();
        }
        let mut last = 0;
        let mut n = 0;
        for r in TraceReader::<_, TaskUsage>::new(&us[..], "us", OnError::Fail) {
            let r = r.unwrap();
            assert!(r.time() >= last);
            assert!(r.end_time > r.start_time);
            last = r.time();
            n += 1;
        }
        assert_eq!(n, nu);
        // Same seed, same bytes.
        let (mut ev2, mut us2) = (Vec::new(), Vec::new());
        write_files(
            SynthConfig {
                machines: 100,
                duration_s: 3 * 3600,
                ..SynthConfig::full_scale(7)
            },
            &mut ev2,
            &mut us2,
        )
        .unwrap();
        assert!(ev == ev2 && us == us2);
    }
}
