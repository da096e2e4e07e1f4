//! Warm start: the tasks already pending or running when the events begin.
//!
//! An official part from mid-trace (part 1 starts at 5,611 s, part 10 at 50,712 s) names
//! tens of thousands of tasks whose SUBMIT came in an earlier part. Replayed cold, the
//! cluster starts empty, those tasks' events are orphans, and the run compares policies
//! on a nearly idle cluster. A warm start rebuilds the set of tasks present at the
//! events' first time from two sources:
//!
//! * **earlier parts** (`history`), when given: every task alive (pending or running)
//!   after their last event, with its latest request;
//! * **the part's own events**: a task whose first event ends it (EVICT, FAIL, FINISH,
//!   KILL, LOST) or updates it while running is taken as running since the part's start,
//!   one first updated while pending as pending, both with the request of that event; one
//!   first seen being scheduled (SCHEDULE) was waiting before the part and is submitted at
//!   its SCHEDULE.
//!
//! Assumptions (docs/giant.md): the model places warm tasks like any submitted task
//! (random machine, FIFO admission by request), running ones before pending ones; their
//! durations are censored (their real start is unknown) and left out of the duration
//! means; and from its own events a part reveals only the tasks that end or change during
//! it: a task that runs through the whole part without an event stays unknown (on the
//! excerpt's parts 1-3 the own events find 5-12 % of the tasks a replay from the trace's
//! start has running). Earlier parts, replayed from part 0, give the complete set.

use giant_trace::census::{Census, Seen, TaskSeen};
use giant_trace::{EventType, TRACE_START_US};
use serde::Serialize;

use crate::SimError;

/// A first event after this (µs) means the events start mid-trace: the official trace
/// begins at 600 s with rows at time 0 for the tasks already running, so a part that
/// starts after the first 5-minute window cannot start from an empty cluster.
pub const AUTO_LATE_START_US: u64 = TRACE_START_US + 300_000_000;

/// Above this share of tasks first seen mid-life (not by a SUBMIT), auto mode warm-starts.
/// From the trace's start the share is 0 (part 0: 0 of 190,926 tasks).
pub const AUTO_MID_LIFE_SHARE: f64 = 0.01;

/// How the run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StartMode {
    /// Warm when the events start mid-trace or many tasks are first seen mid-life.
    #[default]
    Auto,
    /// Always rebuild the running set.
    Warm,
    /// Start from an empty cluster (the published runs, from the trace's start).
    Cold,
}

impl std::str::FromStr for StartMode {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "warm" => Ok(Self::Warm),
            "cold" => Ok(Self::Cold),
            _ => Err(SimError::Config(format!(
                "unknown start mode {s:?} (auto, warm, cold)"
            ))),
        }
    }
}

/// One task present at the start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WarmTask {
    /// Job identifier.
    pub job: u64,
    /// Task index.
    pub index: u32,
    /// Running (else pending).
    pub running: bool,
    /// CPU request (0 when no event carried one).
    pub cpu_request: f32,
    /// Memory request (0 when no event carried one).
    pub memory_request: f32,
    /// Priority.
    pub priority: u8,
}

/// The running set a warm start begins with.
#[derive(Debug, Clone, PartialEq)]
pub struct WarmStart {
    /// Trace time of the start (the events' first time), µs.
    pub at_us: u64,
    /// Tasks present then: running ones first, then pending ones.
    pub tasks: Vec<WarmTask>,
    /// What the run's outputs call this start.
    pub label: String,
}

/// What a trace's start was decided to be, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct StartPlan {
    /// The warm start, or `None` for a cold one.
    pub warm: Option<WarmStart>,
    /// Why (for the report): the mode asked for and what decided it.
    pub reason: String,
    /// Tasks of the whole trace (all jobs) taken from earlier parts, own events, and
    /// submitted at their first SCHEDULE.
    pub from_history: u64,
    /// Tasks taken as running or pending from the part's own events.
    pub from_own_events: u64,
    /// Tasks first seen by a SCHEDULE and not alive in the earlier parts (submitted at
    /// that SCHEDULE, in a warm start).
    pub scheduled_first: u64,
}

impl StartPlan {
    /// "cold" or the warm start's label.
    pub fn label(&self) -> &str {
        self.warm.as_ref().map_or("cold", |w| w.label.as_str())
    }
}

/// Decides how a run over `events` starts; `history` is a census of earlier parts.
pub fn plan(mode: StartMode, events: &Census, history: Option<&Census>) -> StartPlan {
    let named = events.tasks().len() as u64;
    let mid = events.seen_first_mid_life();
    let share = if named == 0 {
        0.0
    } else {
        mid as f64 / named as f64
    };
    let alive_before = |t: &TaskSeen| -> bool {
        history.is_some_and(|h| {
            h.task(t.job, t.index)
                .is_some_and(|s| s.state != Seen::Ended)
        })
    };
    let scheduled_first = events
        .tasks()
        .iter()
        .filter(|t| t.first == EventType::Schedule && !alive_before(t))
        .count() as u64;
    let Some(first) = events.first_us() else {
        return StartPlan {
            warm: None,
            reason: "cold: no task events".into(),
            from_history: 0,
            from_own_events: 0,
            scheduled_first: 0,
        };
    };
    let late = first > AUTO_LATE_START_US;
    let facts = format!(
        "first event at {:.0} s, {mid} of {named} tasks ({:.1}%) first seen mid-life",
        first as f64 / 1e6,
        100.0 * share
    );
    let (warm, reason) = match mode {
        StartMode::Cold => (false, format!("cold (--start cold; {facts})")),
        StartMode::Warm => (true, format!("warm (--start warm; {facts})")),
        StartMode::Auto if history.is_some() => {
            (true, format!("warm (auto: earlier parts given; {facts})"))
        }
        StartMode::Auto if late || share > AUTO_MID_LIFE_SHARE => (
            true,
            format!(
                "warm (auto: {facts}; warm when the first event is after {} s or over {}% of tasks are first seen mid-life)",
                AUTO_LATE_START_US / 1_000_000,
                100.0 * AUTO_MID_LIFE_SHARE
            ),
        ),
        StartMode::Auto => (false, format!("cold (auto: {facts})")),
    };
    if !warm {
        return StartPlan {
            warm: None,
            reason,
            from_history: 0,
            from_own_events: 0,
            scheduled_first,
        };
    }
    let (mut running, mut pending) = (Vec::new(), Vec::new());
    let mut from_history = 0;
    if let Some(h) = history {
        for t in h.alive() {
            from_history += 1;
            let task = WarmTask {
                job: t.job,
                index: t.index,
                running: t.state == Seen::Running,
                cpu_request: t.request.0.unwrap_or(0.0).max(0.0),
                memory_request: t.request.1.unwrap_or(0.0).max(0.0),
                priority: t.priority,
            };
            if task.running {
                running.push(task);
            } else {
                pending.push(task);
            }
        }
    }
    let mut from_own_events = 0;
    for t in events.tasks() {
        let was_running = match t.first {
            EventType::Submit | EventType::Schedule => continue,
            EventType::UpdatePending => false,
            _ => true,
        };
        if alive_before(t) {
            continue;
        }
        from_own_events += 1;
        let task = WarmTask {
            job: t.job,
            index: t.index,
            running: was_running,
            cpu_request: t.first_request.0.unwrap_or(0.0).max(0.0),
            memory_request: t.first_request.1.unwrap_or(0.0).max(0.0),
            priority: t.priority,
        };
        if was_running {
            running.push(task);
        } else {
            pending.push(task);
        }
    }
    running.extend(pending);
    let label = if history.is_some() {
        "warm: earlier parts + own events"
    } else {
        "warm: own events"
    };
    StartPlan {
        warm: Some(WarmStart {
            at_us: first,
            tasks: running,
            label: label.into(),
        }),
        reason,
        from_history,
        from_own_events,
        scheduled_first,
    }
}
