//! Feeding rows to simulations: loading a trace directory, merged replay, parallel sweeps.

use std::path::{Path, PathBuf};

use giant_trace::census::{Census, UsageSurvey};
use giant_trace::{
    read_all, table_files, Chain, IterSource, OnError, Record, RowSource, TaskEvent, TaskUsage,
    TraceError, TraceReader,
};
use rayon::prelude::*;

use crate::input::InputReport;
use crate::metrics::Summary;
use crate::model::Simulation;
use crate::policy::PolicyKind;
use crate::usage::UsageModel;
use crate::warm::{self, StartMode, StartPlan};
use crate::{verdict, Config, SimError};

/// How a trace is loaded: its start, and earlier parts for a warm start.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Cold, warm, or decided from the events (the default).
    pub start: StartMode,
    /// Earlier task_events parts, in time order, read only to rebuild the set of tasks
    /// present when the trace's events begin (not simulated, not kept in memory).
    pub history: Vec<PathBuf>,
}

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
    /// Usage model fitted on the real usage rows (or the built-in one when they match
    /// too few of the events' tasks).
    pub model: UsageModel,
    /// Files read.
    pub files: Vec<PathBuf>,
    /// How runs start (cold, or the warm start's running set).
    pub start: StartPlan,
    /// What was given, said before and after every run.
    pub input: InputReport,
}

/// A census of task_events files read one after the other (rows not kept).
pub fn census_of(files: &[PathBuf], on_error: OnError) -> Result<Census, TraceError> {
    let mut c = Census::new();
    let mut src = Chain::new(files.len(), |i| {
        TraceReader::<_, TaskEvent>::open(&files[i], on_error)
    });
    let mut slot = None;
    loop {
        src.next_into(&mut slot)?;
        match &slot {
            Some(e) => c.event(e),
            None => return Ok(c),
        }
    }
}

impl Trace {
    /// Reads every task_events and task_usage part in `dir`; the start is decided from
    /// the events (see [`LoadOptions`]).
    pub fn load(dir: &Path, on_error: OnError) -> Result<Self, SimError> {
        Self::load_with(dir, on_error, &LoadOptions::default())
    }

    /// [`load`](Self::load) with a start mode and earlier parts.
    pub fn load_with(dir: &Path, on_error: OnError, opts: &LoadOptions) -> Result<Self, SimError> {
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
        let mut census = Census::new();
        for e in &ev.rows {
            census.event(e);
        }
        let history = if opts.history.is_empty() {
            None
        } else {
            let h = census_of(&opts.history, on_error)?;
            if let (Some(hl), Some(first)) = (h.last_us(), census.first_us()) {
                if hl > first {
                    return Err(SimError::Config(format!(
                        "the earlier parts (--history) end at {:.0} s, after the events begin ({:.0} s): give parts from before the trace",
                        hl as f64 / 1e6,
                        first as f64 / 1e6
                    )));
                }
            }
            Some(h)
        };
        let start = warm::plan(opts.start, &census, history.as_ref());
        let survey = UsageSurvey::of(&census, &us.rows);
        let model = UsageModel::fit_or_excerpt(&ev.rows, &us.rows);
        let input = InputReport::new(&census, history.as_ref(), Some(&survey), &start, &model);
        Ok(Self {
            dir: dir.to_path_buf(),
            skipped: ev.skipped + us.skipped,
            events: ev.rows,
            usage: us.rows,
            model,
            files: ev_files
                .into_iter()
                .chain(us_files)
                .chain(opts.history.iter().cloned())
                .collect(),
            start,
            input,
        })
    }

    /// Rows in both tables.
    pub fn rows(&self) -> u64 {
        (self.events.len() + self.usage.len()) as u64
    }

    /// One run of one policy over the whole trace, judged on its own ([`verdict`]).
    pub fn run(&self, cfg: &Config, policy: PolicyKind) -> Result<Summary, SimError> {
        let mut s = self.run_unjudged(cfg, policy)?;
        verdict::judge_one(&mut s);
        Ok(s)
    }

    fn run_unjudged(&self, cfg: &Config, policy: PolicyKind) -> Result<Summary, SimError> {
        let mut sim = Simulation::new(cfg.clone(), policy, self.model.clone())?;
        if let Some(w) = &self.start.warm {
            sim.warm_start(w);
        }
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
        let mut s = sim.finish(Some(end));
        self.input.annotate(&mut s);
        Ok(s)
    }

    /// Runs every (config, policy) pair in parallel; results in input order, runs of
    /// the same configuration judged together ([`verdict::judge`]).
    /// `tick` is called after each run (for a progress bar).
    pub fn sweep(
        &self,
        runs: &[(Config, PolicyKind)],
        tick: &(dyn Fn() + Sync),
    ) -> Result<Vec<Summary>, SimError> {
        let mut out = runs
            .par_iter()
            .map(|(c, p)| {
                let r = self.run_unjudged(c, *p);
                tick();
                r
            })
            .collect::<Result<Vec<_>, _>>()?;
        let keys: Vec<&Config> = runs.iter().map(|(c, _)| c).collect();
        verdict::judge(&mut out, &keys);
        Ok(out)
    }
}

/// Replays two time-ordered row streams into `sim`, merged by time (events first on
/// ties, so a task exists before its usage row). Stops after `end_us` if given.
/// The clock starts at the first event (if it has not started); usage rows that end by
/// the clock's start are skipped and counted (no task can be known yet, and they would
/// start the clock early).
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
    if let Some(e) = &he {
        sim.begin_at(e.time);
    }
    // Rows that end by the clock's start name no task the run can know.
    let before = sim.clock_start().unwrap_or(0);
    // Rows further than MAX_GAP_US past every row before them are skipped: simulating
    // the gap would tick for ages (a time of 2^63 µs is 10^11 ticks).
    let horizon = |t: u64| t.saturating_add(MAX_GAP_US);
    let mut reach = sim.clock_start().map_or(u64::MAX, horizon);
    // Whether a row at `t` is near enough to simulate; if so, it moves the horizon.
    let mut within_reach = |t: u64| {
        if t > reach {
            return false;
        }
        last = t;
        reach = horizon(t);
        true
    };
    loop {
        match (&he, &hu) {
            (None, None) => break,
            (Some(e), u) if u.as_ref().is_none_or(|u| e.time <= u.start_time) => {
                if e.time > limit {
                    break;
                }
                if within_reach(e.time) {
                    sim.event(e);
                } else {
                    sim.skip_far_ahead();
                }
                events.next_into(&mut he)?;
            }
            (_, Some(u)) => {
                if u.start_time > limit {
                    break;
                }
                if u.end_time <= before {
                    sim.usage_before_events(u);
                } else if within_reach(u.start_time) {
                    sim.usage(u);
                } else {
                    sim.skip_far_ahead();
                }
                usage.next_into(&mut hu)?;
            }
            // (Some, None) always matches the event arm.
            (Some(_), None) => break,
        }
    }
    Ok(end_us.unwrap_or(last))
}

/// The longest stretch of trace time without a row that a run simulates (40 days: the
/// real trace is 29 days long).
pub const MAX_GAP_US: u64 = 40 * 86_400 * 1_000_000;
