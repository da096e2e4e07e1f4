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
    /// Per-interval samples.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Interval>,
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
