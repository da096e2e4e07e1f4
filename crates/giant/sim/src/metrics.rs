//! Metrics: per-interval samples and the run summary.

use serde::Serialize;

/// Gini coefficient of non-negative values (0 = perfectly even, →1 = all on one).
/// Sorts `values` in place.
pub fn gini(values: &mut [f64]) -> f64 {
    let n = values.len();
    if n == 0 {
        return 0.0;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let total: f64 = values.iter().sum();
    if total <= 0.0 {
        return 0.0;
    }
    let weighted: f64 = values
        .iter()
        .enumerate()
        .map(|(i, v)| (i as f64 + 1.0) * v)
        .sum();
    let n = n as f64;
    (2.0 * weighted) / (n * total) - (n + 1.0) / n
}

/// One metrics sample (every `sample_interval_s`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Interval {
    /// Trace time, seconds.
    pub time_s: f64,
    /// Mean over machines of CPU usage / capacity.
    pub mean_cpu: f64,
    /// Gini coefficient of per-machine CPU usage.
    pub gini: f64,
    /// Fraction of machines whose usage exceeds capacity.
    pub overcommitted: f64,
    /// Mean over machines of max(0, usage / capacity - 1).
    pub mean_excess: f64,
    /// Running tasks.
    pub running: u64,
    /// Tasks waiting in pending queues.
    pub pending: u64,
    /// Migrations in this interval.
    pub migrations: u64,
    /// Bytes migrated in this interval.
    pub bytes: f64,
    /// Bytes migrated since the start.
    pub cumulative_bytes: f64,
    /// Moves whose destination was the least-loaded machine of the cell.
    pub to_first: u64,
    /// Moves whose destination was the second least-loaded.
    pub to_second: u64,
}

/// Overall results of one run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// Policy name.
    pub policy: String,
    /// Cluster size.
    pub machines: u32,
    /// Overcommit ratio.
    pub overcommit: f64,
    /// Seed.
    pub seed: u64,
    /// Simulated trace time, seconds.
    pub simulated_s: f64,
    /// Rows fed in (both tables).
    pub rows: u64,
    /// Task events of sampled jobs.
    pub events_used: u64,
    /// Usage rows applied to a known task.
    pub usage_rows_used: u64,
    /// End or update events for tasks never submitted in the run.
    pub orphan_events: u64,
    /// Tasks submitted.
    pub tasks_submitted: u64,
    /// Tasks that ended while running.
    pub tasks_finished: u64,
    /// Time-mean of mean CPU utilisation.
    pub mean_cpu: f64,
    /// Time-mean of the Gini coefficient of per-machine CPU.
    pub gini: f64,
    /// Time-mean fraction of machines over capacity.
    pub overcommitted: f64,
    /// Time-mean excess over capacity.
    pub mean_excess: f64,
    /// Time-mean number of pending tasks.
    pub mean_pending: f64,
    /// Mean submit-to-end time of finished tasks, seconds.
    pub mean_duration_s: f64,
    /// Mean time in a pending queue.
    pub mean_wait_s: f64,
    /// Mean duration with run time stretched by CPU contention (usage / capacity > 1).
    pub mean_stretched_duration_s: f64,
    /// Migrations.
    pub migrations: u64,
    /// Bytes migrated, GB (10^9).
    pub migration_gb: f64,
    /// Mean migration traffic over the run, Mbit/s (whole cluster).
    pub migration_mbit_s: f64,
    /// Highest traffic of one sample interval, Mbit/s.
    pub peak_interval_mbit_s: f64,
    /// Moves to the least-loaded machine of the cell.
    pub to_first: u64,
    /// Moves to the second least-loaded.
    pub to_second: u64,
    /// Share of task run time covered by real usage rows.
    pub real_usage_fraction: f64,
    /// "real", "modelled", or "mixed: X% of task-time modelled".
    pub usage_source: String,
    /// How the run started: "cold", or the warm start's source.
    pub start: String,
    /// Tasks put on the cluster as running at a warm start (sampled jobs).
    pub warm_running: u64,
    /// Tasks put on the cluster as pending at a warm start.
    pub warm_pending: u64,
    /// Unknown tasks submitted at their SCHEDULE (warm start only).
    pub warm_scheduled: u64,
    /// Finished tasks whose durations enter the means (warm-start tasks are censored).
    pub tasks_timed: u64,
    /// Events naming a task the run did not know, by type, left ignored.
    pub orphans_by_type: OrphanCounts,
    /// Usage rows (sampled jobs) naming no pending or running task.
    pub usage_rows_ignored: u64,
    /// Usage rows (sampled jobs) from before the events' first time, skipped.
    pub usage_rows_before_events: u64,
    /// Rows (both tables) skipped for coming more than 40 days after every row before.
    pub rows_far_ahead: u64,
    /// What modelled usage is drawn from (fitted on this trace's rows, or built in).
    pub usage_model: String,
    /// Time-mean number of running tasks.
    pub mean_running: f64,
    /// Rebalancing ticks.
    pub ticks: u64,
    /// Ticks at which some machine was over the warning threshold (any policy).
    pub overload_ticks: u64,
    /// Time of the first and last task event, seconds.
    pub events_s: Option<(f64, f64)>,
    /// Time range of the usage rows given, seconds.
    pub usage_s: Option<(f64, f64)>,
    /// Whether the input supports a comparison of policies (see [`crate::verdict`]).
    pub comparable: bool,
    /// "ok", or why the policies cannot be compared on this input.
    pub verdict: String,
    /// Warnings about the input and the run.
    pub warnings: Vec<String>,
    /// Per-interval samples.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Interval>,
}

/// Event counts by type (SUBMIT aside, which is never an orphan).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct OrphanCounts {
    /// SCHEDULE.
    pub schedule: u64,
    /// EVICT.
    pub evict: u64,
    /// FAIL.
    pub fail: u64,
    /// FINISH.
    pub finish: u64,
    /// KILL.
    pub kill: u64,
    /// LOST.
    pub lost: u64,
    /// UPDATE_PENDING.
    pub update_pending: u64,
    /// UPDATE_RUNNING.
    pub update_running: u64,
}

impl OrphanCounts {
    /// From counts indexed by event code (0 = SUBMIT, ignored).
    pub fn from_codes(c: &[u64; giant_trace::census::EVENT_TYPES]) -> Self {
        Self {
            schedule: c[1],
            evict: c[2],
            fail: c[3],
            finish: c[4],
            kill: c[5],
            lost: c[6],
            update_pending: c[7],
            update_running: c[8],
        }
    }

    /// Sum over types.
    pub fn total(&self) -> u64 {
        self.pairs().iter().map(|(_, n)| n).sum()
    }

    /// (name, count) in code order.
    pub fn pairs(&self) -> [(&'static str, u64); 8] {
        [
            ("SCHEDULE", self.schedule),
            ("EVICT", self.evict),
            ("FAIL", self.fail),
            ("FINISH", self.finish),
            ("KILL", self.kill),
            ("LOST", self.lost),
            ("UPDATE_PENDING", self.update_pending),
            ("UPDATE_RUNNING", self.update_running),
        ]
    }
}

impl std::fmt::Display for OrphanCounts {
    /// `SCHEDULE 464, EVICT 2,310, ...` (types with a count only), or `none`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        for (name, n) in self.pairs() {
            if n > 0 {
                write!(f, "{}{name} {n}", if first { "" } else { ", " })?;
                first = false;
            }
        }
        if first {
            write!(f, "none")?;
        }
        Ok(())
    }
}

impl Summary {
    /// Gini reduction against a baseline per GB migrated ("balance per byte").
    pub fn balance_per_gb(&self, baseline_gini: f64) -> f64 {
        if self.migration_gb <= 0.0 {
            0.0
        } else {
            (baseline_gini - self.gini) / self.migration_gb
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn gini_extremes() {
        assert_eq!(gini(&mut [1.0, 1.0, 1.0, 1.0]), 0.0);
        assert!((gini(&mut [0.0, 0.0, 0.0, 4.0]) - 0.75).abs() < 1e-12);
        assert!((gini(&mut [1.0, 3.0]) - 0.25).abs() < 1e-12);
        assert_eq!(gini(&mut []), 0.0);
        assert_eq!(gini(&mut [0.0, 0.0]), 0.0);
    }
}
