//! Feeding rows to simulations: loading a trace directory, merged replay, parallel sweeps.

use std::path::{Path, PathBuf};

use giant_trace::{
    read_all, table_files, IterSource, OnError, Record, RowSource, TaskEvent, TaskUsage,
};
use rayon::prelude::*;

use crate::metrics::Summary;
use crate::model::Simulation;
use crate::policy::PolicyKind;
use crate::usage::UsageModel;
use crate::{Config, SimError};

/// A trace held in memory, shared read-only by parallel runs.
pub struct Trace {
    /// Directory it came from.
    pub dir: PathBuf,
    /// task_events rows, time order.
    pub events: Vec<TaskEvent>,
    /// task_usage rows, time order.
    pub usage: Vec<TaskUsage>,
    /// Malformed lines skipped (skip mode only).
    pub skipped: u64,
    /// Usage model fitted on the real usage rows.
    pub model: UsageModel,
    /// Files read.
    pub files: Vec<PathBuf>,
}

impl Trace {
    /// Reads every task_events and task_usage part in `dir`.
    pub fn load(dir: &Path, on_error: OnError) -> Result<Self, SimError> {
        let ev_files = table_files(dir, TaskEvent::TABLE)?;
        let us_files = table_files(dir, TaskUsage::TABLE)?;
        if ev_files.is_empty() {
            return Err(SimError::NoTrace(dir.to_path_buf()));
        }
        // The two tables are independent files: read them on two threads.
        let (ev, us) = rayon::join(
            || read_all::<TaskEvent>(&ev_files, on_error),
            || read_all::<TaskUsage>(&us_files, on_error),
        );
        let (ev, us) = (ev?, us?);
        let model = UsageModel::fit(&ev.rows, &us.rows);
        Ok(Self {
            dir: dir.to_path_buf(),
            skipped: ev.skipped + us.skipped,
            events: ev.rows,
            usage: us.rows,
            model,
            files: ev_files.into_iter().chain(us_files).collect(),
        })
    }

    /// Rows in both tables.
    pub fn rows(&self) -> u64 {
        (self.events.len() + self.usage.len()) as u64
    }

    /// One run of one policy over the whole trace.
    pub fn run(&self, cfg: &Config, policy: PolicyKind) -> Result<Summary, SimError> {
        let mut sim = Simulation::new(cfg.clone(), policy, self.model.clone())?;
        let ok = |r: &TaskEvent| -> Result<TaskEvent, std::convert::Infallible> { Ok(*r) };
        let oku = |r: &TaskUsage| -> Result<TaskUsage, std::convert::Infallible> { Ok(*r) };
        let end = match feed(
            &mut sim,
            &mut IterSource(self.events.iter().map(ok)),
            &mut IterSource(self.usage.iter().map(oku)),
            cfg.end_s.map(|s| s * 1_000_000),
        ) {
            Ok(end) => end,
            Err(never) => match never {},
        };
        Ok(sim.finish(Some(end)))
    }

    /// Runs every (config, policy) pair in parallel; results in input order.
    /// `tick` is called after each run (for a progress bar).
    pub fn sweep(
        &self,
        runs: &[(Config, PolicyKind)],
        tick: &(dyn Fn() + Sync),
    ) -> Result<Vec<Summary>, SimError> {
        runs.par_iter()
            .map(|(c, p)| {
                let r = self.run(c, *p);
                tick();
                r
            })
            .collect()
    }
}

/// Replays two time-ordered row streams into `sim`, merged by time (events first on
/// ties, so a task exists before its usage row). Stops after `end_us` if given.
/// Returns the time of the last row fed (or `end_us`).
pub fn feed<E, U, X>(
    sim: &mut Simulation,
    events: &mut E,
    usage: &mut U,
    end_us: Option<u64>,
) -> Result<u64, X>
where
    E: RowSource<Row = TaskEvent, Error = X>,
    U: RowSource<Row = TaskUsage, Error = X>,
{
    let limit = end_us.unwrap_or(u64::MAX);
    let mut last = 0;
    // The current row of each table stays in place: sources write the next row into it.
    let (mut he, mut hu) = (None, None);
    events.next_into(&mut he)?;
    usage.next_into(&mut hu)?;
    loop {
        match (&he, &hu) {
            (None, None) => break,
            (Some(e), u) if u.as_ref().is_none_or(|u| e.time <= u.start_time) => {
                if e.time > limit {
                    break;
                }
                last = e.time;
                sim.event(e);
                events.next_into(&mut he)?;
            }
            (_, Some(u)) => {
                if u.start_time > limit {
                    break;
                }
                last = u.start_time;
                sim.usage(u);
                usage.next_into(&mut hu)?;
            }
            // (Some, None) always matches the event arm.
            (Some(_), None) => break,
        }
    }
    Ok(end_us.unwrap_or(last))
}
