//! Whether runs can compare policies at all.
//!
//! A run over an input that leaves the cluster nearly idle, or never puts a machine over
//! the warning threshold, gives every policy the same numbers: a table of them reads
//! like a finding and is none. Runs of one configuration (all policies) are judged
//! together, and every summary says whether it is `comparable` and why not.

use crate::metrics::Summary;

/// Below this mean CPU (fraction of capacity) in every run the cluster is nearly idle.
/// The published 800-machine runs average 0.16; a mid-trace part replayed cold 0.03.
pub const IDLE_MEAN_CPU: f64 = 0.05;

/// The verdict of runs that can compare policies.
pub const OK: &str = "ok";
/// Nearly idle cluster.
pub const IDLE: &str = "idle: mean CPU under 0.05 of capacity in every run";
/// Nothing to rebalance.
pub const NO_OVERLOAD: &str =
    "no overload: no machine over the warning threshold at any rebalancing tick";
/// Overloads, but nothing moved.
pub const NO_MIGRATION: &str = "no migration: machines were overloaded but no policy moved a task";

/// The verdict of `runs` taken as one comparison.
pub fn of(runs: &[&Summary]) -> &'static str {
    if runs.iter().all(|r| r.mean_cpu < IDLE_MEAN_CPU) {
        return IDLE;
    }
    if runs.iter().all(|r| r.overload_ticks == 0) {
        return NO_OVERLOAD;
    }
    let movers: Vec<_> = runs.iter().filter(|r| r.policy != "none").collect();
    if !movers.is_empty() && movers.iter().all(|r| r.migrations == 0) {
        return NO_MIGRATION;
    }
    OK
}

/// Judges runs in groups of equal `keys` (one key per run: its configuration) and writes
/// each group's verdict into its summaries.
pub fn judge<K: PartialEq>(runs: &mut [Summary], keys: &[K]) {
    let mut verdicts = Vec::with_capacity(runs.len());
    for k in keys {
        let group: Vec<&Summary> = runs
            .iter()
            .zip(keys)
            .filter(|(_, k2)| *k2 == k)
            .map(|(r, _)| r)
            .collect();
        verdicts.push(of(&group));
    }
    for (r, v) in runs.iter_mut().zip(verdicts) {
        r.comparable = v == OK;
        r.verdict = v.to_string();
    }
}

/// Judges one run on its own.
pub fn judge_one(run: &mut Summary) {
    judge(std::slice::from_mut(run), &[()]);
}
