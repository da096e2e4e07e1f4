//! Simulation parameters, with the published values (or documented choices) as defaults.

use serde::{Deserialize, Serialize};

/// The most machines a simulation may have (80 times the trace's cell).
pub const MAX_MACHINES: u32 = 1_000_000;

/// Machines in the real trace's cell; the default job sampling keeps `machines / TRACE_MACHINES`.
pub const TRACE_MACHINES: f64 = 12_583.0;

/// Every knob of the model. Times are seconds; resources are normalised like the trace
/// (1.0 = the largest machine of the cell).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Config {
    /// Machines in the simulated cluster (published: 800; sweep 700..900).
    pub machines: u32,
    /// Machines per GiantVM cell, i.e. NUMA nodes of one aggregated VM (published: 4).
    pub cell_size: u32,
    /// CPU capacity of each machine (0.5: the most common machine class in the trace).
    pub cpu_capacity: f64,
    /// Overcommit ratio: a machine admits tasks while the sum of their CPU requests is at
    /// most `overcommit * cpu_capacity`; others wait in its pending queue (sweep 0.5..1.4).
    pub overcommit: f64,
    /// A machine whose CPU usage exceeds this fraction of capacity triggers rebalancing.
    pub warning_threshold: f64,
    /// Rebalancing interval when no task arrived since the last check.
    pub interval_s: u64,
    /// Shorter rebalancing interval used while tasks arrive.
    pub arrival_interval_s: u64,
    /// Metrics are sampled on this period.
    pub sample_interval_s: u64,
    /// Tasks with a priority above this are never migrated (9..11 are production).
    pub migratable_max_priority: u8,
    /// Tasks whose peak CPU (normalised) exceeds this are never migrated.
    pub migratable_max_peak_cpu: f64,
    /// Fraction of jobs kept (by a hash of the job ID); `None` = machines / 12,583.
    pub job_sample: Option<f64>,
    /// GiB of memory that the normalised value 1.0 stands for (bytes moved per migration
    /// are the task's memory usage times this: only pages the task touches move).
    pub memory_unit_gib: f64,
    /// Network budget of the `budget-best-fit` policy, Mbit/s over the whole cluster.
    pub network_budget_mbit_s: f64,
    /// Seed of placement and of the usage model.
    pub seed: u64,
    /// Stop at this trace time (seconds); `None` = at the last row.
    pub end_s: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            machines: 800,
            cell_size: 4,
            cpu_capacity: 0.5,
            overcommit: 1.0,
            warning_threshold: 0.8,
            interval_s: 300,
            arrival_interval_s: 60,
            sample_interval_s: 300,
            migratable_max_priority: 8,
            migratable_max_peak_cpu: 0.25,
            job_sample: None,
            memory_unit_gib: 32.0,
            network_budget_mbit_s: 5.0,
            seed: 1,
            end_s: None,
        }
    }
}

impl Config {
    /// The job sampling fraction in force.
    pub fn sample_fraction(&self) -> f64 {
        self.job_sample
            .unwrap_or(f64::from(self.machines) / TRACE_MACHINES)
            .clamp(0.0, 1.0)
    }

    /// Checks that the parameters make sense.
    pub fn validate(&self) -> Result<(), crate::SimError> {
        let bad = |what: &str| Err(crate::SimError::Config(what.to_string()));
        if self.machines == 0 {
            return bad("machines must be positive");
        }
        // The model keeps a record per machine from the start: four billion
        // machines would be an allocation the system refuses (an abort, not
        // an error). The trace's cell had 12,583.
        if self.machines > MAX_MACHINES {
            return bad(&format!("machines must be at most {MAX_MACHINES}"));
        }
        if self.cell_size == 0 {
            return bad("cell_size must be positive");
        }
        if self.cell_size > self.machines {
            return bad("cell_size must be at most machines");
        }
        if self.cpu_capacity <= 0.0 || !self.cpu_capacity.is_finite() {
            return bad("cpu_capacity must be positive");
        }
        if self.overcommit <= 0.0 || !self.overcommit.is_finite() {
            return bad("overcommit must be positive");
        }
        if self.interval_s == 0 || self.arrival_interval_s == 0 || self.sample_interval_s == 0 {
            return bad("intervals must be positive");
        }
        if let Some(s) = self.job_sample {
            if !(0.0..=1.0).contains(&s) {
                return bad("job_sample must be in 0..=1");
            }
        }
        // NaN compares false everywhere: every one of these would run, with
        // no rebalancing or no bytes counted, and report nonsense.
        if !(self.warning_threshold.is_finite() && self.warning_threshold > 0.0) {
            return bad("the warning threshold must be a positive fraction of capacity");
        }
        if !(self.migratable_max_peak_cpu.is_finite() && self.migratable_max_peak_cpu >= 0.0) {
            return bad("max_peak_cpu must be a number of at least 0");
        }
        if !(self.memory_unit_gib.is_finite() && self.memory_unit_gib > 0.0) {
            return bad("memory_unit_gib must be positive");
        }
        if !(self.network_budget_mbit_s.is_finite() && self.network_budget_mbit_s >= 0.0) {
            return bad("the network budget must be a number of Mbit/s of at least 0");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets one knob of a configuration.
    type Setter = fn(&mut Config, f64);

    #[test]
    fn nan_infinite_and_negative_knobs_are_refused() {
        assert!(Config::default().validate().is_ok());
        let cases: [(&str, Setter); 4] = [
            ("threshold", |c, v| c.warning_threshold = v),
            ("max_peak_cpu", |c, v| c.migratable_max_peak_cpu = v),
            ("memory_unit_gib", |c, v| c.memory_unit_gib = v),
            ("network budget", |c, v| c.network_budget_mbit_s = v),
        ];
        for machines in [0, MAX_MACHINES + 1, u32::MAX] {
            let c = Config {
                machines,
                ..Config::default()
            };
            assert!(c.validate().is_err(), "{machines} machines were accepted");
        }
        let c = Config {
            machines: 8,
            cell_size: 9,
            ..Config::default()
        };
        assert!(c.validate().is_err(), "a cell larger than the cluster");
        for (what, set) in cases {
            for v in [f64::NAN, f64::INFINITY, -1.0] {
                let mut c = Config::default();
                set(&mut c, v);
                assert!(c.validate().is_err(), "{what} = {v} was accepted");
            }
        }
    }
}
