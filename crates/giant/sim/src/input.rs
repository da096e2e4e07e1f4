//! What the simulator was given, said before and after a run: the events' and usage's
//! time ranges, the tasks first seen mid-life and what was done with them, how far the
//! usage rows match the events, where modelled usage comes from, and warnings.

use giant_trace::census::{Census, UsageSurvey};
use serde::Serialize;

use crate::metrics::{OrphanCounts, Summary};
use crate::usage::UsageModel;
use crate::warm::{StartPlan, AUTO_LATE_START_US, AUTO_MID_LIFE_SHARE};

/// Below this share of the events' time range, the report says how little the usage
/// covers (the rest of the task-time is modelled).
pub const PARTIAL_OVERLAP: f64 = 0.9;

/// Below this share of usage rows naming the events' tasks (or above it, of rows that
/// met no task in a run), the report warns.
pub const LITTLE_OVERLAP: f64 = 0.5;

/// A gap longer than this between earlier parts and the events is warned about.
pub const HISTORY_GAP_US: u64 = 300_000_000;

const US: f64 = 1e6;

/// The task_events side.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct EventsReport {
    /// Rows.
    pub rows: u64,
    /// First and last event time, seconds.
    pub time_s: Option<(f64, f64)>,
    /// Distinct tasks named.
    pub tasks: u64,
    /// Tasks whose first event is not a SUBMIT, by that event's type.
    pub first_seen_mid_life: OrphanCounts,
    /// Events naming a task not submitted before them, by type.
    pub orphan_events: OrphanCounts,
}

impl EventsReport {
    /// From a census.
    pub fn of(c: &Census) -> Self {
        Self {
            rows: c.rows(),
            time_s: c
                .first_us()
                .zip(c.last_us())
                .map(|(f, l)| (f as f64 / US, l as f64 / US)),
            tasks: c.tasks().len() as u64,
            first_seen_mid_life: OrphanCounts::from_codes(&c.first_types()),
            orphan_events: OrphanCounts::from_codes(&c.orphan_events()),
        }
    }
}

/// The task_usage side, against the events.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UsageReport {
    /// Whether the usage rows were surveyed (`stream` reads them once, in the run).
    pub surveyed: bool,
    /// Rows.
    pub rows: u64,
    /// Earliest start and latest end, seconds.
    pub time_s: Option<(f64, f64)>,
    /// Share of the events' time range the usage's range covers.
    pub time_overlap: f64,
    /// Rows whose window overlaps the events' time range.
    pub rows_in_events_range: u64,
    /// Rows naming a task the events name.
    pub rows_naming_event_tasks: u64,
    /// Rows naming a job the events name.
    pub rows_naming_event_jobs: u64,
}

/// Everything the simulator knows about its input before a run.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct InputReport {
    /// The task events simulated.
    pub events: EventsReport,
    /// Earlier parts read only for the running set (`--history`).
    pub history: Option<EventsReport>,
    /// The usage rows given.
    pub usage: UsageReport,
    /// "cold" or the warm start's source.
    pub start: String,
    /// Why.
    pub start_reason: String,
    /// Whole trace, all jobs: tasks taken from earlier parts as alive at the start.
    pub warm_from_history: u64,
    /// Tasks taken as running or pending since the start from their first event.
    pub warm_from_own_events: u64,
    /// Tasks first seen by a SCHEDULE (submitted then in a warm start, else ignored).
    pub scheduled_first: u64,
    /// Where modelled usage comes from.
    pub usage_model: String,
    /// Warnings about the input.
    pub warnings: Vec<String>,
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

impl InputReport {
    /// Builds the report and its warnings.
    pub fn new(
        events: &Census,
        history: Option<&Census>,
        survey: Option<&UsageSurvey>,
        plan: &StartPlan,
        model: &UsageModel,
    ) -> Self {
        let ev = EventsReport::of(events);
        let surveyed = survey.is_some();
        let survey = survey.copied().unwrap_or_default();
        let usage = UsageReport {
            surveyed,
            rows: survey.rows,
            time_s: survey
                .first_us
                .zip(survey.last_us)
                .map(|(f, l)| (f as f64 / US, l as f64 / US)),
            time_overlap: survey.time_overlap(events),
            rows_in_events_range: survey.in_range,
            rows_naming_event_tasks: survey.naming_tasks,
            rows_naming_event_jobs: survey.naming_jobs,
        };
        let mut r = Self {
            events: ev,
            history: history.map(EventsReport::of),
            usage,
            start: plan.label().to_string(),
            start_reason: plan.reason.clone(),
            warm_from_history: plan.from_history,
            warm_from_own_events: plan.from_own_events,
            scheduled_first: plan.scheduled_first,
            usage_model: model.describe(),
            warnings: Vec::new(),
        };
        r.warnings = r.find_warnings(events, history, plan, model);
        r
    }

    fn find_warnings(
        &self,
        events: &Census,
        history: Option<&Census>,
        plan: &StartPlan,
        model: &UsageModel,
    ) -> Vec<String> {
        let mut w = Vec::new();
        let mid = events.seen_first_mid_life();
        let named = events.tasks().len() as u64;
        let late = events.first_us().is_some_and(|f| f > AUTO_LATE_START_US);
        if plan.warm.is_none() && (late || pct(mid, named) > 100.0 * AUTO_MID_LIFE_SHARE) {
            w.push(format!(
                "cold start on events that begin mid-trace: the cluster starts empty and the {} events of the {mid} tasks first seen mid-life change nothing (run without --start cold to warm-start)",
                self.events.orphan_events.total()
            ));
        }
        if plan.warm.is_some() && history.is_none() && mid > 0 {
            w.push(format!(
                "warm start from the part's own events only: {} tasks taken as present at its start, but a task that runs through the part without an event stays unknown (on the excerpt's parts 1-3 that is 88-95% of the running set); give the earlier parts (--history, from part 0) for the complete set",
                plan.from_own_events
            ));
        }
        if let (Some(h), Some(first)) = (history, events.first_us()) {
            if let Some(hl) = h.last_us() {
                if first > hl + HISTORY_GAP_US {
                    w.push(format!(
                        "the earlier parts end at {:.0} s, {:.0} s before the events begin: tasks that ended in between are taken as still present",
                        hl as f64 / US,
                        (first - hl) as f64 / US
                    ));
                }
            }
        }
        let u = &self.usage;
        if !u.surveyed {
            // Said after the run, from the rows the run met.
        } else if u.rows == 0 {
            w.push(format!(
                "no task_usage rows: all usage is modelled ({})",
                model.describe()
            ));
        } else {
            let (uf, ul) = u.time_s.unwrap_or_default();
            let (ef, el) = self.events.time_s.unwrap_or_default();
            if u.time_overlap <= 0.0 {
                w.push(format!(
                    "the usage rows ({uf:.0}-{ul:.0} s) overlap none of the events' time range ({ef:.0}-{el:.0} s): they measure no simulated task-time"
                ));
            } else if u.time_overlap < PARTIAL_OVERLAP {
                w.push(format!(
                    "the usage rows ({uf:.0}-{ul:.0} s) overlap only {:.1}% of the events' time range ({ef:.0}-{el:.0} s): the rest of the task-time is modelled",
                    100.0 * u.time_overlap
                ));
            }
            let named_share = pct(u.rows_naming_event_tasks, u.rows);
            if named_share < 100.0 * LITTLE_OVERLAP {
                w.push(format!(
                    "only {named_share:.1}% of the usage rows name a task of the events ({:.1}% a job)",
                    pct(u.rows_naming_event_jobs, u.rows)
                ));
            }
            if model.builtin {
                w.push(format!("usage model: {}", model.describe()));
            }
        }
        w
    }

    /// Copies the trace-level facts and warnings into a run's summary, and adds the
    /// run's own (orphans left, usage rows that found no task).
    pub fn annotate(&self, s: &mut Summary) {
        s.events_s = self.events.time_s;
        s.usage_s = self.usage.time_s;
        s.warnings = self.warnings.clone();
        run_warnings(s);
    }
}

/// Warnings that a run's own counts raise (also for runs without an [`InputReport`]).
pub fn run_warnings(s: &mut Summary) {
    let left = s.orphans_by_type.total();
    if left > 0 {
        s.warnings.push(format!(
            "{left} events named tasks this run never saw submitted ({}): ignored",
            s.orphans_by_type
        ));
    }
    if s.usage_rows_before_events > 0 {
        s.warnings.push(format!(
            "{} usage rows (sampled jobs) start before the first event and were skipped",
            s.usage_rows_before_events
        ));
    }
    if s.rows_far_ahead > 0 {
        s.warnings.push(format!(
            "{} rows were skipped for coming more than 40 days after every row before them",
            s.rows_far_ahead
        ));
    }
    let seen = s.usage_rows_used + s.usage_rows_ignored;
    if seen > 0 && pct(s.usage_rows_ignored, seen) > 100.0 * (1.0 - LITTLE_OVERLAP) {
        s.warnings.push(format!(
            "{} of {seen} usage rows (sampled jobs) named no pending or running task",
            s.usage_rows_ignored
        ));
    }
}

impl std::fmt::Display for InputReport {
    /// The report printed before a run.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = &self.events;
        let range = |r: Option<(f64, f64)>| {
            r.map_or("none".to_string(), |(a, b)| format!("{a:.0}-{b:.0} s"))
        };
        writeln!(
            f,
            "input: task_events {} rows, trace time {}, {} tasks",
            e.rows,
            range(e.time_s),
            e.tasks
        )?;
        writeln!(
            f,
            "  tasks first seen mid-life (not by SUBMIT): {} ({:.1}%): {}",
            e.first_seen_mid_life.total(),
            pct(e.first_seen_mid_life.total(), e.tasks),
            e.first_seen_mid_life
        )?;
        writeln!(
            f,
            "  events naming a task never submitted: {}",
            e.orphan_events
        )?;
        if let Some(h) = &self.history {
            writeln!(
                f,
                "  earlier parts: {} rows, trace time {}, {} tasks alive at their end",
                h.rows,
                range(h.time_s),
                self.warm_from_history
            )?;
        }
        writeln!(f, "  start: {}", self.start_reason)?;
        if self.start == "cold" {
            if e.first_seen_mid_life.total() > 0 {
                writeln!(f, "  their events are ignored (cold start)")?;
            }
        } else {
            writeln!(
                f,
                "  warm start: {} tasks from earlier parts, {} from their first event (running if it ends or updates them while running, pending if updated while pending), {} first seen by SCHEDULE submitted then; durations of these tasks are censored",
                self.warm_from_history, self.warm_from_own_events, self.scheduled_first
            )?;
        }
        let u = &self.usage;
        if !u.surveyed {
            writeln!(
                f,
                "input: task_usage not surveyed before the run (stream reads it once)"
            )?;
        } else {
            writeln!(
            f,
            "input: task_usage {} rows, trace time {}; {:.1}% of the events' time range, {:.1}% of rows name a task of the events",
            u.rows,
            range(u.time_s),
            100.0 * u.time_overlap,
            pct(u.rows_naming_event_tasks, u.rows)
        )?;
        }
        writeln!(f, "  usage model: {}", self.usage_model)?;
        for w in &self.warnings {
            writeln!(f, "WARNING: {w}")?;
        }
        Ok(())
    }
}
