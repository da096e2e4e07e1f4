//! What a stream of task events says about the cluster before anything is simulated:
//! its time range, the tasks it names, which of them appear first with an event other
//! than SUBMIT (tasks that were already there when the events begin: an official part
//! from mid-trace names tens of thousands), and which are alive at its end. A
//! [`UsageSurvey`] says how far task_usage rows match those events in time and tasks.
//!
//! Both are plain functions of the rows, so the simulator can report on its input and
//! rebuild a running set (a warm start) from the same pass.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::{EventType, TaskEvent, TaskUsage};

/// Number of event types (codes 0..=8); arrays indexed by `EventType as usize`.
pub const EVENT_TYPES: usize = 9;

/// A task's state after the events seen so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Submitted or updated while pending, not (re)scheduled since.
    Pending,
    /// Scheduled or updated while running, not ended since.
    Running,
    /// Its last event ended it (evict, fail, finish, kill, lost).
    Ended,
}

/// What the events say about one task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskSeen {
    /// Job identifier.
    pub job: u64,
    /// Task index within its job.
    pub index: u32,
    /// Type of the first event naming it.
    pub first: EventType,
    /// Time of that event, µs.
    pub first_us: u64,
    /// Whether a SUBMIT for it has been seen.
    pub submitted: bool,
    /// State after its last event.
    pub state: Seen,
    /// CPU and memory request of the first event that carried them.
    pub first_request: (Option<f32>, Option<f32>),
    /// The latest CPU and memory request seen (updates included).
    pub request: (Option<f32>, Option<f32>),
    /// Priority of its latest event.
    pub priority: u8,
}

impl TaskSeen {
    /// The task was there before the events began: its first event is not a SUBMIT.
    pub fn seen_first_mid_life(&self) -> bool {
        self.first != EventType::Submit
    }
}

/// Counts over a stream of task events (see the module documentation).
#[derive(Debug, Default, Clone)]
pub struct Census {
    rows: u64,
    first_us: Option<u64>,
    last_us: Option<u64>,
    /// Tasks in order of first appearance (deterministic reports and warm starts).
    tasks: Vec<TaskSeen>,
    index: FxHashMap<(u64, u32), u32>,
    jobs: FxHashSet<u64>,
    first_types: [u64; EVENT_TYPES],
    orphan_events: [u64; EVENT_TYPES],
}

impl Census {
    /// An empty census.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one event (in time order).
    pub fn event(&mut self, e: &TaskEvent) {
        self.rows += 1;
        self.first_us = Some(self.first_us.map_or(e.time, |t| t.min(e.time)));
        self.last_us = Some(self.last_us.map_or(e.time, |t| t.max(e.time)));
        let key = (e.job_id, e.task_index);
        let id = match self.index.get(&key) {
            Some(&id) => id as usize,
            None => {
                let id = self.tasks.len();
                self.index.insert(key, id as u32);
                self.jobs.insert(e.job_id);
                self.first_types[e.event_type as usize] += 1;
                self.tasks.push(TaskSeen {
                    job: e.job_id,
                    index: e.task_index,
                    first: e.event_type,
                    first_us: e.time,
                    submitted: false,
                    state: Seen::Pending,
                    first_request: (None, None),
                    request: (None, None),
                    priority: e.priority,
                });
                id
            }
        };
        let t = &mut self.tasks[id];
        if e.event_type == EventType::Submit {
            t.submitted = true;
        } else if !t.submitted {
            self.orphan_events[e.event_type as usize] += 1;
        }
        t.state = match e.event_type {
            EventType::Submit | EventType::UpdatePending => Seen::Pending,
            EventType::Schedule | EventType::UpdateRunning => Seen::Running,
            _ => Seen::Ended,
        };
        t.priority = e.priority;
        if t.first_request.0.is_none() {
            t.first_request.0 = e.cpu_request;
        }
        if t.first_request.1.is_none() {
            t.first_request.1 = e.memory_request;
        }
        if e.cpu_request.is_some() {
            t.request.0 = e.cpu_request;
        }
        if e.memory_request.is_some() {
            t.request.1 = e.memory_request;
        }
    }

    /// Events taken.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Time of the earliest event, µs.
    pub fn first_us(&self) -> Option<u64> {
        self.first_us
    }

    /// Time of the latest event, µs.
    pub fn last_us(&self) -> Option<u64> {
        self.last_us
    }

    /// Every task named, in order of first appearance.
    pub fn tasks(&self) -> &[TaskSeen] {
        &self.tasks
    }

    /// The task with this job and index, if the events name it.
    pub fn task(&self, job: u64, index: u32) -> Option<&TaskSeen> {
        self.index
            .get(&(job, index))
            .map(|&id| &self.tasks[id as usize])
    }

    /// Whether the events name this job.
    pub fn has_job(&self, job: u64) -> bool {
        self.jobs.contains(&job)
    }

    /// Tasks by the type of their first event (index = event code).
    pub fn first_types(&self) -> [u64; EVENT_TYPES] {
        self.first_types
    }

    /// Tasks whose first event is not a SUBMIT.
    pub fn seen_first_mid_life(&self) -> u64 {
        self.first_types.iter().sum::<u64>() - self.first_types[EventType::Submit as usize]
    }

    /// Events naming a task not submitted before them, by type (index = event code).
    pub fn orphan_events(&self) -> [u64; EVENT_TYPES] {
        self.orphan_events
    }

    /// Tasks alive (pending or running) after the last event, in order of first appearance.
    pub fn alive(&self) -> impl Iterator<Item = &TaskSeen> {
        self.tasks.iter().filter(|t| t.state != Seen::Ended)
    }
}

/// How far task_usage rows match a [`Census`] of task events.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct UsageSurvey {
    /// Rows surveyed.
    pub rows: u64,
    /// Earliest window start, µs.
    pub first_us: Option<u64>,
    /// Latest window end, µs.
    pub last_us: Option<u64>,
    /// Rows whose window overlaps the events' time range.
    pub in_range: u64,
    /// Rows naming a task the events name.
    pub naming_tasks: u64,
    /// Rows naming a job the events name.
    pub naming_jobs: u64,
}

impl UsageSurvey {
    /// Surveys `rows` against `events`.
    pub fn of(events: &Census, rows: &[TaskUsage]) -> Self {
        let mut s = Self::default();
        for u in rows {
            s.row(events, u);
        }
        s
    }

    /// Takes one row.
    pub fn row(&mut self, events: &Census, u: &TaskUsage) {
        self.rows += 1;
        let end = u.end_time.max(u.start_time);
        self.first_us = Some(self.first_us.map_or(u.start_time, |t| t.min(u.start_time)));
        self.last_us = Some(self.last_us.map_or(end, |t| t.max(end)));
        if let (Some(f), Some(l)) = (events.first_us, events.last_us) {
            if end > f && u.start_time <= l {
                self.in_range += 1;
            }
        }
        if events.task(u.job_id, u.task_index).is_some() {
            self.naming_tasks += 1;
        }
        if events.has_job(u.job_id) {
            self.naming_jobs += 1;
        }
    }

    /// Share of the events' time range that the usage rows' time range covers (0..=1;
    /// 0 when either is empty). Ranges, not windows: a usage file with gaps inside its
    /// range counts as covering them.
    pub fn time_overlap(&self, events: &Census) -> f64 {
        let (Some(ef), Some(el), Some(uf), Some(ul)) =
            (events.first_us, events.last_us, self.first_us, self.last_us)
        else {
            return 0.0;
        };
        let lo = ef.max(uf);
        let hi = el.min(ul);
        if el <= ef {
            // A single instant of events: covered or not.
            return if uf <= ef && ul > ef { 1.0 } else { 0.0 };
        }
        if hi <= lo {
            return 0.0;
        }
        (hi - lo) as f64 / (el - ef) as f64
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{OnError, TraceReader};

    fn events(text: &str) -> Census {
        let mut c = Census::new();
        for r in TraceReader::<_, TaskEvent>::new(text.as_bytes(), "inline", OnError::Fail) {
            c.event(&r.unwrap());
        }
        c
    }

    #[test]
    fn orphans_first_types_and_alive_set() {
        // Task 0 is submitted, scheduled and finishes; task 1 is first seen finishing
        // (an orphan), task 2 first seen updated while running, task 3 first scheduled,
        // task 4 first updated while pending, then killed.
        let c = events(
            "\
100,,1,0,,0,u,0,0,0.1,0.01,0,0
101,,1,0,5,1,u,0,0,0.1,0.01,0,0
102,,1,1,5,4,u,0,2,0.2,0.02,0,0
103,,1,2,5,8,u,0,3,0.3,0.03,0,0
104,,1,3,5,1,u,0,0,,,,
105,,1,4,,7,u,0,0,0.4,0.04,0,0
106,,1,4,,5,u,0,0,0.4,0.04,0,0
107,,1,0,5,4,u,0,0,0.1,0.01,0,0
108,,1,3,5,8,u,0,0,0.35,0.05,0,0
",
        );
        assert_eq!(
            (c.rows(), c.first_us(), c.last_us()),
            (9, Some(100), Some(108))
        );
        assert_eq!(c.tasks().len(), 5);
        assert_eq!(c.first_types(), [1, 1, 0, 0, 1, 0, 0, 1, 1]);
        assert_eq!(c.seen_first_mid_life(), 4);
        // Every event of tasks 1..=4 is an orphan: none was submitted.
        assert_eq!(c.orphan_events(), [0, 1, 0, 0, 1, 1, 0, 1, 2]);
        let alive: Vec<(u32, Seen)> = c.alive().map(|t| (t.index, t.state)).collect();
        assert_eq!(alive, vec![(2, Seen::Running), (3, Seen::Running)]);
        let t3 = c.task(1, 3).unwrap();
        // The first request is the first one carried; the latest follows the update.
        assert_eq!(t3.first_request, (Some(0.35), Some(0.05)));
        assert_eq!(t3.request, (Some(0.35), Some(0.05)));
        assert_eq!(c.task(1, 1).unwrap().priority, 2);
        assert!(c.has_job(1) && !c.has_job(2));
    }

    #[test]
    fn usage_survey_overlap_in_time_and_tasks() {
        let c = events(
            "1000000000,,1,0,,0,u,0,0,0.1,0.01,0,0\n2000000000,,1,0,,4,u,0,0,0.1,0.01,0,0\n",
        );
        let row = |s: u64, job: u64, idx: u32| {
            format!(
                "{s},{},{job},{idx},5,0.05,0.02,0.02,0,0,0.02,0,0,0.1,0,1,0.01,1,0,0.05\n",
                s + 300_000_000
            )
        };
        let parse = |t: &str| -> Vec<TaskUsage> {
            TraceReader::<_, TaskUsage>::new(t.as_bytes(), "u", OnError::Fail)
                .map(|r| r.unwrap())
                .collect()
        };
        // Before the events: overlaps nothing.
        let before = UsageSurvey::of(&c, &parse(&row(600_000_000, 1, 0)));
        assert_eq!(
            (before.in_range, before.naming_tasks, before.naming_jobs),
            (0, 1, 1)
        );
        assert_eq!(before.time_overlap(&c), 0.0);
        // Half of the events' range (1000-1500 s), one row of another job's task.
        let half = parse(&[row(1_000_000_000, 1, 0), row(1_200_000_000, 2, 0)].concat());
        let s = UsageSurvey::of(&c, &half);
        assert_eq!(
            (s.rows, s.in_range, s.naming_tasks, s.naming_jobs),
            (2, 2, 1, 1)
        );
        assert!(
            (s.time_overlap(&c) - 0.5).abs() < 1e-12,
            "{}",
            s.time_overlap(&c)
        );
        assert_eq!(UsageSurvey::of(&c, &[]).time_overlap(&c), 0.0);
    }
}
