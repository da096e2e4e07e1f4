//! CSV and JSON outputs. Every table carries the `usage_source` column so modelled
//! usage is labelled wherever numbers travel.

use std::fmt::Write as _;
use std::path::Path;

use crate::metrics::Summary;
use crate::SimError;

fn write(path: &Path, text: &str) -> Result<(), SimError> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir).map_err(|err| SimError::Output {
                path: dir.to_path_buf(),
                err,
            })?;
        }
    }
    std::fs::write(path, text).map_err(|err| SimError::Output {
        path: path.to_path_buf(),
        err,
    })
}

/// Header of [`summaries_csv`]. Columns after `usage_source` were added later (the
/// earlier ones keep their places): how the run started, what it made of its input, and
/// whether the input supports a comparison.
pub const SUMMARY_HEADER: &str = "policy,machines,overcommit,seed,simulated_s,mean_cpu,gini,overcommitted,mean_excess,mean_pending,tasks_finished,mean_duration_s,mean_wait_s,mean_stretched_duration_s,migrations,migration_gb,migration_mbit_s,peak_interval_mbit_s,to_first,to_second,balance_per_gb,usage_source,\
start,warm_running,warm_pending,warm_scheduled,tasks_timed,orphan_events,orphans_by_type,usage_rows_used,usage_rows_ignored,usage_rows_before_events,rows_far_ahead,real_usage_fraction,usage_model,events_first_s,events_last_s,usage_first_s,usage_last_s,mean_running,ticks,overload_ticks,comparable,verdict,warnings";

/// A CSV field in quotes (inner quotes doubled).
fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

fn range_cols(r: Option<(f64, f64)>) -> String {
    r.map_or(",".into(), |(a, b)| format!("{a:.0},{b:.0}"))
}

/// One row per run. `balance_per_gb` is against the `none` run with the same machines
/// and overcommit, when present.
pub fn summaries_csv(runs: &[Summary]) -> String {
    let mut s = String::from(SUMMARY_HEADER);
    s.push('\n');
    for r in runs {
        let base = runs
            .iter()
            .find(|b| {
                b.policy == "none"
                    && b.machines == r.machines
                    && b.overcommit == r.overcommit
                    && b.seed == r.seed
            })
            .map_or(r.gini, |b| b.gini);
        let _ = writeln!(
            s,
            "{},{},{},{},{:.0},{:.6},{:.6},{:.6},{:.6},{:.2},{},{:.1},{:.1},{:.1},{},{:.4},{:.4},{:.4},{},{},{:.4e},\"{}\"",
            r.policy, r.machines, r.overcommit, r.seed, r.simulated_s, r.mean_cpu, r.gini, r.overcommitted,
            r.mean_excess, r.mean_pending, r.tasks_finished, r.mean_duration_s, r.mean_wait_s,
            r.mean_stretched_duration_s, r.migrations, r.migration_gb, r.migration_mbit_s,
            r.peak_interval_mbit_s, r.to_first, r.to_second, r.balance_per_gb(base), r.usage_source
        );
        // Continues the line above.
        s.pop();
        let _ = writeln!(
            s,
            ",{},{},{},{},{},{},{},{},{},{},{},{:.6},{},{},{},{:.1},{},{},{},{},{}",
            quoted(&r.start),
            r.warm_running,
            r.warm_pending,
            r.warm_scheduled,
            r.tasks_timed,
            r.orphan_events,
            quoted(&r.orphans_by_type.to_string()),
            r.usage_rows_used,
            r.usage_rows_ignored,
            r.usage_rows_before_events,
            r.rows_far_ahead,
            r.real_usage_fraction,
            quoted(&r.usage_model),
            range_cols(r.events_s),
            range_cols(r.usage_s),
            r.mean_running,
            r.ticks,
            r.overload_ticks,
            r.comparable,
            quoted(&r.verdict),
            quoted(&r.warnings.join("; "))
        );
    }
    s
}

/// Per-interval samples of every run, long format.
pub fn intervals_csv(runs: &[Summary]) -> String {
    let mut s = String::from("policy,machines,overcommit,time_s,mean_cpu,gini,overcommitted,mean_excess,running,pending,migrations,bytes,cumulative_bytes,to_first,to_second,usage_source\n");
    for r in runs {
        for i in &r.intervals {
            let _ = writeln!(
                s,
                "{},{},{},{:.0},{:.6},{:.6},{:.6},{:.6},{},{},{},{:.0},{:.0},{},{},\"{}\"",
                r.policy,
                r.machines,
                r.overcommit,
                i.time_s,
                i.mean_cpu,
                i.gini,
                i.overcommitted,
                i.mean_excess,
                i.running,
                i.pending,
                i.migrations,
                i.bytes,
                i.cumulative_bytes,
                i.to_first,
                i.to_second,
                r.usage_source
            );
        }
    }
    s
}

/// Writes the run summaries (and, if `intervals`, the samples) as CSV or JSON.
pub fn write_runs(
    dir: &Path,
    stem: &str,
    runs: &[Summary],
    json: bool,
    intervals: bool,
) -> Result<(), SimError> {
    if json {
        let v: Vec<Summary> = runs
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if !intervals {
                    r.intervals.clear();
                }
                r
            })
            .collect();
        let text = serde_json::to_string_pretty(&v).map_err(|e| SimError::Output {
            path: dir.join(format!("{stem}.json")),
            err: std::io::Error::other(e),
        })?;
        write(&dir.join(format!("{stem}.json")), &text)
    } else {
        write(&dir.join(format!("{stem}.csv")), &summaries_csv(runs))?;
        if intervals {
            write(
                &dir.join(format!("{stem}-intervals.csv")),
                &intervals_csv(runs),
            )?;
        }
        Ok(())
    }
}
