//! Parts from mid-trace: the input report, the warm start, usage that overlaps nothing or
//! half, and the verdict. Handmade files shaped like a later part (first event at
//! 50,712 s, orphans of every event type), and real rows shifted to look like one
//! (skipped, saying so, when ../shared/data is absent).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::io::BufRead;
use std::path::{Path, PathBuf};

use common::{one_machine, output_ok, real_dir, sim_cli, write_gz};
use giant_sim::driver::LoadOptions;
use giant_sim::warm::StartMode;
use giant_sim::{verdict, Config, PolicyKind, Summary, Trace};
use giant_trace::OnError;

/// Trace time of the official part 00010's first event.
const T: u64 = 50_712_000_000;
const S: u64 = 1_000_000;

/// A directory holding `events` as part 00010 and, if given, `usage`.
fn part_dir(events: &str, usage: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_gz(
        &dir.path().join("task_events-part-00010-of-00500.csv.gz"),
        events,
    );
    if let Some(u) = usage {
        write_gz(&dir.path().join("task_usage-part-00010-of-00500.csv.gz"), u);
    }
    dir
}

fn ev(t: u64, job: u64, index: u32, kind: u8) -> String {
    format!("{t},,{job},{index},,{kind},u,0,0,0.02,0.01,0,0\n")
}

fn usage_row(start: u64, job: u64, index: u32, cpu: f64) -> String {
    format!(
        "{start},{},{job},{index},5,{cpu},0.01,0.01,0,0,0.01,0,0,{cpu},0,1,0.01,1,0,{cpu}\n",
        start + 300 * S
    )
}

/// A later part: first event at 50,712 s, one task first seen by each event type other
/// than SUBMIT (jobs 10-17), and three tasks submitted in the part (jobs 1 and 2).
fn late_part() -> String {
    let mut rows = vec![
        ev(T, 1, 0, 0),
        ev(T + S, 1, 0, 1),
        ev(T + 10 * S, 15, 0, 7),  // UPDATE_PENDING: was waiting
        ev(T + 10 * S, 16, 0, 8),  // UPDATE_RUNNING: was running
        ev(T + 20 * S, 15, 0, 1),  // ... and is scheduled now
        ev(T + 50 * S, 17, 0, 1),  // SCHEDULE: was waiting, starts now
        ev(T + 100 * S, 10, 0, 2), // EVICT
        ev(T + 200 * S, 11, 0, 3), // FAIL
        ev(T + 300 * S, 12, 0, 4), // FINISH
        ev(T + 400 * S, 13, 0, 5), // KILL
        ev(T + 500 * S, 14, 0, 6), // LOST
        ev(T + 600 * S, 1, 1, 0),
        ev(T + 800 * S, 1, 0, 4),
        ev(T + 900 * S, 17, 0, 4),
        ev(T + 1000 * S, 15, 0, 4),
        ev(T + 1200 * S, 16, 0, 4),
        ev(T + 1800 * S, 2, 0, 0),
    ];
    rows.sort_by_key(|r| r.split(',').next().unwrap().parse::<u64>().unwrap());
    rows.concat()
}

fn load(dir: &Path, start: StartMode, history: Vec<PathBuf>) -> Trace {
    Trace::load_with(dir, OnError::Fail, &LoadOptions { start, history }).unwrap()
}

fn has(warnings: &[String], text: &str) -> bool {
    warnings.iter().any(|w| w.contains(text))
}

#[test]
fn a_late_part_with_orphans_of_every_type_is_reported_and_warm_started() {
    let dir = part_dir(&late_part(), None);
    let t = load(dir.path(), StartMode::Auto, Vec::new());
    let r = &t.input;
    assert_eq!(r.events.rows, 17);
    assert_eq!(r.events.time_s, Some((50_712.0, 50_712.0 + 1800.0)));
    assert_eq!(r.events.tasks, 11);
    // One task first seen by each type but SUBMIT.
    let first: Vec<u64> = r
        .events
        .first_seen_mid_life
        .pairs()
        .iter()
        .map(|p| p.1)
        .collect();
    assert_eq!(first, vec![1; 8]);
    // Every event of jobs 10-17 names a task never submitted.
    let orphans: Vec<u64> = r.events.orphan_events.pairs().iter().map(|p| p.1).collect();
    assert_eq!(orphans, vec![2, 1, 1, 4, 1, 1, 1, 1]);
    assert_eq!(t.start.label(), "warm: own events");
    assert!(r.start_reason.contains("auto"), "{}", r.start_reason);
    assert_eq!((r.warm_from_own_events, r.scheduled_first), (7, 1));
    assert!(has(
        &r.warnings,
        "warm start from the part's own events only"
    ));
    assert!(has(&r.warnings, "no task_usage rows"));
    let text = r.to_string();
    assert!(text.contains("SCHEDULE 1, EVICT 1, FAIL 1, FINISH 1, KILL 1, LOST 1, UPDATE_PENDING 1, UPDATE_RUNNING 1"), "{text}");

    let warm = t.run(&one_machine(), PolicyKind::None).unwrap();
    assert_eq!(warm.start, "warm: own events");
    assert_eq!(
        (warm.warm_running, warm.warm_pending, warm.warm_scheduled),
        (6, 1, 1)
    );
    assert_eq!(warm.orphans_by_type.total(), 0, "{}", warm.orphans_by_type);
    assert_eq!(warm.tasks_submitted, 11);
    // Every task but (1, 1) and (2, 0) ends while running; only (1, 0) was submitted
    // in the part, so only its 800 s enter the duration means.
    assert_eq!((warm.tasks_finished, warm.tasks_timed), (9, 1));
    assert!(
        (warm.mean_duration_s - 800.0).abs() < 1e-6,
        "{}",
        warm.mean_duration_s
    );
    // The clock starts at the part's first event, not at 600 s.
    assert!((warm.intervals[0].time_s - (50_712.0 + 60.0)).abs() < 1e-9);
    assert!((warm.simulated_s - 1800.0).abs() < 1e-9);
    // The 7 warm tasks (the pending one fits, so it starts), (1, 0) and (17, 0).
    assert_eq!(warm.intervals[0].running, 9);

    let cold_trace = load(dir.path(), StartMode::Cold, Vec::new());
    assert_eq!(cold_trace.start.label(), "cold");
    assert!(has(
        &cold_trace.input.warnings,
        "cold start on events that begin mid-trace"
    ));
    let cold = cold_trace.run(&one_machine(), PolicyKind::None).unwrap();
    assert_eq!(cold.start, "cold");
    assert_eq!(
        (cold.warm_running, cold.warm_pending, cold.warm_scheduled),
        (0, 0, 0)
    );
    let left: Vec<u64> = cold.orphans_by_type.pairs().iter().map(|p| p.1).collect();
    assert_eq!(left, vec![2, 1, 1, 4, 1, 1, 1, 1]);
    assert_eq!(cold.orphan_events, 10, "end and update orphans, as before");
    assert!(has(&cold.warnings, "12 events named tasks this run never saw submitted (SCHEDULE 2, EVICT 1, FAIL 1, FINISH 4, KILL 1, LOST 1, UPDATE_PENDING 1, UPDATE_RUNNING 1): ignored"));
    assert_eq!(cold.intervals[0].running, 1);
    assert!(cold.mean_running < warm.mean_running / 2.0);
}

#[test]
fn usage_that_overlaps_nothing_is_reported_and_changes_nothing() {
    let events = late_part();
    // The excerpt's usage window (600-900 s), naming the part's own tasks: a usage file
    // from the trace's start handed over with a later part.
    let early: String = (10..18).map(|j| usage_row(600 * S, j, 0, 0.001)).collect();
    let alone = load(part_dir(&events, None).path(), StartMode::Auto, Vec::new());
    let mixed = load(
        part_dir(&events, Some(&early)).path(),
        StartMode::Auto,
        Vec::new(),
    );
    let u = &mixed.input.usage;
    assert_eq!((u.rows, u.time_s), (8, Some((600.0, 900.0))));
    assert_eq!(
        (
            u.time_overlap,
            u.rows_in_events_range,
            u.rows_naming_event_tasks
        ),
        (0.0, 0, 8)
    );
    assert!(has(
        &mixed.input.warnings,
        "overlap none of the events' time range"
    ));
    assert!(
        mixed.model.builtin,
        "8 matched rows must not refit the model"
    );
    assert!(has(&mixed.input.warnings, "the usage given matched 8 rows"));
    let cfg = one_machine();
    let a = alone.run(&cfg, PolicyKind::None).unwrap();
    let b = mixed.run(&cfg, PolicyKind::None).unwrap();
    assert_eq!(b.usage_rows_before_events, 8);
    assert!(has(
        &b.warnings,
        "8 usage rows (sampled jobs) start before the first event"
    ));
    assert_eq!(b.usage_source, "modelled");
    // Before, such rows refitted the model and started the clock at 600 s: mean CPU
    // fell 40 to 900-fold. Now the simulation is the same as without them.
    assert_eq!(a.intervals, b.intervals);
    assert_eq!((a.mean_cpu, a.gini), (b.mean_cpu, b.gini));
}

#[test]
fn usage_that_overlaps_half_is_measured_there_and_reported() {
    // Usage windows over the first 900 s of the part's 1,800 s, for (1, 0) and (16, 0).
    let half: String = (0..3)
        .flat_map(|w| {
            [
                usage_row(T + w * 300 * S, 1, 0, 0.05),
                usage_row(T + w * 300 * S, 16, 0, 0.05),
            ]
        })
        .collect();
    let t = load(
        part_dir(&late_part(), Some(&half)).path(),
        StartMode::Auto,
        Vec::new(),
    );
    let u = &t.input.usage;
    assert!((u.time_overlap - 0.5).abs() < 1e-9, "{}", u.time_overlap);
    assert_eq!(
        (u.rows, u.rows_in_events_range, u.rows_naming_event_tasks),
        (6, 6, 6)
    );
    assert!(has(
        &t.input.warnings,
        "overlap only 50.0% of the events' time range"
    ));
    let s = t.run(&one_machine(), PolicyKind::None).unwrap();
    assert_eq!((s.usage_rows_used, s.usage_rows_before_events), (6, 0));
    // Measured: 2 tasks x 900 s of roughly 8 tasks x 1,000 s of task-time.
    assert!(
        s.real_usage_fraction > 0.1 && s.real_usage_fraction < 0.5,
        "{}",
        s.real_usage_fraction
    );
    assert!(s.usage_source.starts_with("mixed"), "{}", s.usage_source);
}

#[test]
fn earlier_parts_give_the_running_set_and_must_come_first() {
    let dir = tempfile::tempdir().unwrap();
    // History: tasks (20, 0) and (21, 0) submitted and scheduled, (22, 0) submitted,
    // (23, 0) submitted then finished, all before the part.
    let hist = [
        ev(T - 1000 * S, 20, 0, 0),
        ev(T - 999 * S, 20, 0, 1),
        ev(T - 900 * S, 21, 0, 0),
        ev(T - 899 * S, 21, 0, 1),
        ev(T - 800 * S, 22, 0, 0),
        ev(T - 700 * S, 23, 0, 0),
        ev(T - 600 * S, 23, 0, 4),
        ev(T - 10 * S, 15, 0, 0),
    ]
    .concat();
    let hist_path = dir.path().join("task_events-part-00009-of-00500.csv.gz");
    write_gz(&hist_path, &hist);
    let part = part_dir(&format!("{}{}", ev(T, 20, 0, 4), late_part()), None);
    let t = load(part.path(), StartMode::Auto, vec![hist_path.clone()]);
    assert_eq!(t.start.label(), "warm: earlier parts + own events");
    // Alive after the history: 20, 21 (running), 22 and 15 (pending). Own events add
    // the part's orphans except 15 (known from the history).
    assert_eq!(
        (t.input.warm_from_history, t.input.warm_from_own_events),
        (4, 6)
    );
    assert!(t.input.history.is_some());
    let s = t.run(&one_machine(), PolicyKind::None).unwrap();
    assert_eq!((s.warm_running, s.warm_pending), (2 + 6, 2));
    assert_eq!(s.orphans_by_type.total(), 0, "{}", s.orphans_by_type);
    // Cold ignores the history, and says so.
    let cold = load(part.path(), StartMode::Cold, vec![hist_path.clone()]);
    assert_eq!(cold.start.label(), "cold");
    // History that ends after the part begins is refused with a clear error.
    let late_hist = dir.path().join("late.csv.gz");
    write_gz(&late_hist, &ev(T + 5 * S, 30, 0, 0));
    let err = Trace::load_with(
        part.path(),
        OnError::Fail,
        &LoadOptions {
            start: StartMode::Auto,
            history: vec![late_hist],
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("--history") && err.contains("after the events begin"),
        "{err}"
    );
}

/// A sweep of `policies` over `t` with `cfg`, judged together.
fn sweep(t: &Trace, cfg: &Config, policies: &[PolicyKind]) -> Vec<Summary> {
    let runs: Vec<_> = policies.iter().map(|p| (cfg.clone(), *p)).collect();
    t.sweep(&runs, &|| {}).unwrap()
}

#[test]
fn verdicts_idle_no_overload_no_migration_and_ok() {
    let policies = [
        PolicyKind::None,
        PolicyKind::Fine(giant_sim::policy::SortKey::Arrival),
    ];
    // Two tasks on a cell of two machines (capacity 0.5, threshold 0.4), using `cpu`
    // each (peak = `cpu`), from 600 s to 3,000 s. Placement is seeded. Requests are
    // small: a sample at a window's end sees the model (request x a ratio), not the row.
    let case = |cpu: f64, prio: u8, seed: u64| {
        let row =
            |t: u64, job: u64, kind: u8| format!("{t},,{job},0,,{kind},u,0,{prio},0.02,0.01,0,0\n");
        let events = [
            row(600 * S, 1, 0),
            row(600 * S, 2, 0),
            row(3000 * S, 1, 4),
            row(3000 * S, 2, 4),
        ]
        .concat();
        let usage: String = (0..8)
            .flat_map(|w| {
                [
                    usage_row((600 + 300 * w) * S, 1, 0, cpu),
                    usage_row((600 + 300 * w) * S, 2, 0, cpu),
                ]
            })
            .collect();
        let t = load(
            part_dir(&events, Some(&usage)).path(),
            StartMode::Auto,
            Vec::new(),
        );
        let cfg = Config {
            machines: 2,
            cell_size: 2,
            seed,
            ..one_machine()
        };
        sweep(&t, &cfg, &policies)
    };
    // Nearly idle whatever the placement.
    let idle = case(0.01, 0, 1);
    assert!(idle
        .iter()
        .all(|r| r.verdict == verdict::IDLE && !r.comparable));
    // 0.22 each: over the threshold only when the seed puts both on one machine.
    let runs: Vec<(u64, Vec<Summary>)> = (1..=16).map(|seed| (seed, case(0.22, 0, seed))).collect();
    let (together, apart): (Vec<_>, Vec<_>) =
        runs.iter().partition(|(_, r)| r[0].overload_ticks > 0);
    assert!(
        !together.is_empty() && !apart.is_empty(),
        "16 seeds, all one way"
    );
    for (seed, r) in &apart {
        assert!(
            r.iter().all(|r| r.verdict == verdict::NO_OVERLOAD),
            "seed {seed}"
        );
    }
    for (seed, r) in &together {
        // `fine` moves one task to the idle machine: a comparison.
        assert!(r[1].migrations > 0, "seed {seed}");
        assert!(
            r.iter().all(|r| r.verdict == verdict::OK && r.comparable),
            "seed {seed}"
        );
        // The same with production priority: overloaded, but nothing may move.
        let stuck = case(0.22, 9, *seed);
        assert!(stuck[0].overload_ticks > 0 && stuck[1].migrations == 0);
        assert!(
            stuck.iter().all(|r| r.verdict == verdict::NO_MIGRATION),
            "seed {seed}"
        );
    }
}

/// Rewrites the time columns (the first one of task_events, the first two of
/// task_usage) of gzip CSV lines, keeping up to `keep` lines whose first time is in
/// `range`, shifted by `shift` µs: real rows made to look like a part from another time.
/// The rest of each line is unchanged.
fn shifted(src: &Path, range: std::ops::Range<u64>, shift: i64, keep: usize) -> String {
    let times = if src.to_string_lossy().contains("task_usage") {
        2
    } else {
        1
    };
    let f = std::fs::File::open(src).unwrap();
    let r = std::io::BufReader::new(flate2::read::GzDecoder::new(f));
    let mut out = String::new();
    let mut n = 0;
    for line in r.lines() {
        let line = line.unwrap();
        let mut fields = line.splitn(times + 1, ',');
        let ts: Vec<u64> = (0..times)
            .map(|_| fields.next().unwrap().parse().unwrap())
            .collect();
        if !range.contains(&ts[0]) {
            continue;
        }
        for t in ts {
            out.push_str(&format!("{},", t.checked_add_signed(shift).unwrap()));
        }
        out.push_str(fields.next().unwrap());
        out.push('\n');
        n += 1;
        if n == keep {
            break;
        }
    }
    out
}

fn first_time(src: &Path) -> u64 {
    let text = shifted(src, 0..u64::MAX, 0, 1);
    text.split(',').next().unwrap().parse().unwrap()
}

#[test]
fn a_real_later_part_moved_to_part_10_times_with_usage_that_matches_nothing() {
    let Some(real) = real_dir() else { return };
    let part1 = real.join("task_events-part-00001-of-00500.csv.gz");
    let usage = real.join("task_usage-part-00000-of-00500.first-10000-rows.csv.gz");
    // Part 1 (a real part from mid-trace, first event at 5,612 s) moved to begin where
    // part 10 begins, and the excerpt's usage (600-900 s) beside it: the case.
    let shift = (T - first_time(&part1)) as i64;
    let events = shifted(&part1, 0..u64::MAX, shift, usize::MAX);
    let early = shifted(&usage, 0..u64::MAX, 0, usize::MAX);
    let cfg = Config::default();
    let pols = [
        PolicyKind::None,
        PolicyKind::Fine(giant_sim::policy::SortKey::Arrival),
    ];

    let alone = load(part_dir(&events, None).path(), StartMode::Auto, Vec::new());
    let r = &alone.input;
    assert_eq!(r.events.time_s.unwrap().0, 50_712.0);
    let mid = &r.events.first_seen_mid_life;
    // The real part names tasks first seen by each of these types.
    assert!(
        mid.evict > 0 && mid.fail > 0 && mid.finish > 0 && mid.kill > 0 && mid.schedule > 0,
        "{mid}"
    );
    assert_eq!(alone.start.label(), "warm: own events");
    assert_eq!(r.warm_from_own_events + r.scheduled_first, mid.total());
    let a = sweep(&alone, &cfg, &pols);
    let cold = sweep(
        &load(part_dir(&events, None).path(), StartMode::Cold, Vec::new()),
        &cfg,
        &pols,
    );
    assert!(a[0].warm_running > 0 && a[0].mean_running > cold[0].mean_running);
    // Cold leaves the orphans; warm takes nearly all of them.
    assert!(cold[0].orphans_by_type.total() > 0);
    assert!(a[0].orphans_by_type.total() * 10 < cold[0].orphans_by_type.total());
    assert!(has(
        &cold[0].warnings,
        "cold start on events that begin mid-trace"
    ));

    let mixed = load(
        part_dir(&events, Some(&early)).path(),
        StartMode::Auto,
        Vec::new(),
    );
    assert!(has(
        &mixed.input.warnings,
        "overlap none of the events' time range"
    ));
    assert!(has(
        &mixed.input.warnings,
        "of the usage rows name a task of the events"
    ));
    assert!(mixed.model.builtin, "{}", mixed.model.origin);
    let b = sweep(&mixed, &cfg, &pols);
    // The usage changes nothing (it used to cut mean CPU 40-fold), and says so.
    assert_eq!(a[0].intervals, b[0].intervals);
    assert_eq!(
        (a[1].mean_cpu, a[1].migrations),
        (b[1].mean_cpu, b[1].migrations)
    );
    assert!(b[0].usage_rows_before_events > 0 && b[0].usage_rows_used == 0);
    // Every run says whether it is a comparison; own events alone leave this part idle.
    for s in a.iter().chain(&b).chain(&cold) {
        assert_eq!(s.comparable, s.verdict == verdict::OK);
        assert!(!s.verdict.is_empty());
    }
}

#[test]
fn real_rows_cut_from_mid_trace_with_usage_over_half_of_their_time() {
    let Some(real) = real_dir() else { return };
    let part0 = real.join("task_events-part-00000-of-00500.csv.gz");
    let usage = real.join("task_usage-part-00000-of-00500.first-10000-rows.csv.gz");
    // Part 0's rows from 600 s to 1,200 s moved to 50,712 s (tasks submitted at time 0
    // now appear first ending, being evicted, killed or failing), and the excerpt's usage
    // moved with them: it covers their first 300 s of 600.
    let shift = (T - 600 * S) as i64;
    let events = shifted(&part0, 600 * S..1200 * S, shift, usize::MAX);
    let half = shifted(&usage, 0..u64::MAX, shift, usize::MAX);
    let t = load(
        part_dir(&events, Some(&half)).path(),
        StartMode::Auto,
        Vec::new(),
    );
    assert_eq!(t.start.label(), "warm: own events");
    let u = &t.input.usage;
    assert!((u.time_overlap - 0.5).abs() < 0.01, "{}", u.time_overlap);
    assert_eq!(u.rows_in_events_range, u.rows);
    assert!(has(
        &t.input.warnings,
        "overlap only 50.1% of the events' time range"
    ));
    // The excerpt's first 10,000 usage rows are of a few long-running jobs' tasks, which
    // no event from 600 s to 1,200 s names: neither the events nor a warm start from them
    // know these tasks, and the report says so before and after the run.
    assert!(u.rows_naming_event_tasks * 100 < u.rows, "{u:?}");
    assert!(has(
        &t.input.warnings,
        "of the usage rows name a task of the events"
    ));
    assert!(t.model.builtin, "{}", t.model.origin);
    let cfg = Config {
        job_sample: Some(1.0),
        ..Config::default()
    };
    let s = t.run(&cfg, PolicyKind::None).unwrap();
    assert!(s.warm_running > 0);
    assert!(
        s.usage_rows_ignored * 100 > 99 * u.rows,
        "{}",
        s.usage_rows_ignored
    );
    assert!(has(
        &s.warnings,
        "usage rows (sampled jobs) named no pending or running task"
    ));
    assert!(s.real_usage_fraction < 0.01, "{}", s.usage_source);
}

/// The acceptance: on every official task_events part of the excerpt, alone or
/// with a usage file that does not match it, runs compare policies on a live cluster or
/// say why they cannot; with the earlier parts as history, a part from mid-trace gives
/// a live cluster.
#[test]
fn every_real_part_is_compared_on_a_live_cluster_or_says_why_not() {
    let Some(real) = real_dir() else { return };
    let parts = giant_trace::table_files(&real, "task_events").unwrap();
    let usage = real.join("task_usage-part-00000-of-00500.first-10000-rows.csv.gz");
    assert!(parts.len() >= 2, "{parts:?}");
    let cfg = Config::default();
    let pols = [
        PolicyKind::None,
        PolicyKind::Fine(giant_sim::policy::SortKey::Arrival),
    ];
    let link = |files: &[&Path]| {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            std::os::unix::fs::symlink(f, dir.path().join(f.file_name().unwrap())).unwrap();
        }
        dir
    };
    let check = |runs: &[Summary]| {
        for s in runs {
            assert_eq!(s.comparable, s.verdict == verdict::OK, "{}", s.verdict);
            if s.comparable {
                assert!(s.mean_cpu >= verdict::IDLE_MEAN_CPU);
                assert!(runs.iter().any(|r| r.migrations > 0));
            } else {
                assert!(
                    [verdict::IDLE, verdict::NO_OVERLOAD, verdict::NO_MIGRATION]
                        .contains(&s.verdict.as_str()),
                    "{}",
                    s.verdict
                );
            }
        }
    };
    for (i, part) in parts.iter().enumerate() {
        let alone = load(link(&[part]).path(), StartMode::Auto, Vec::new());
        let with_usage = load(link(&[part, &usage]).path(), StartMode::Auto, Vec::new());
        let mid_trace = alone.input.events.time_s.unwrap().0 > 900.0;
        assert_eq!(alone.start.warm.is_some(), mid_trace, "{}", part.display());
        let a = sweep(&alone, &cfg, &pols);
        let b = sweep(&with_usage, &cfg, &pols);
        check(&a);
        check(&b);
        if mid_trace {
            // The excerpt's usage (600-900 s) matches nothing here and changes nothing.
            assert!(has(&with_usage.input.warnings, "overlap none"));
            assert_eq!(a[0].intervals, b[0].intervals, "{}", part.display());
            // With the parts before it, the part starts on a live cluster.
            let history: Vec<PathBuf> = parts[..i].to_vec();
            let h = sweep(
                &load(link(&[part]).path(), StartMode::Auto, history),
                &cfg,
                &pols,
            );
            assert!(
                h.iter().all(|r| r.comparable),
                "{}: {}",
                part.display(),
                h[0].verdict
            );
            assert!(h[0].warm_running > 5 * a[0].warm_running);
        }
    }
}

#[test]
fn the_cli_says_why_a_part_alone_cannot_compare() {
    let Some(real) = real_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    let part = real.join("task_events-part-00001-of-00500.csv.gz");
    std::os::unix::fs::symlink(&part, dir.path().join(part.file_name().unwrap())).unwrap();
    let out = tempfile::tempdir().unwrap();
    let st = output_ok(
        sim_cli()
            .args(["run", "--trace", dir.path().to_str().unwrap()])
            .args(["--policy", "none,fine", "--json", "--out"])
            .arg(out.path()),
    );
    let stdout = String::from_utf8_lossy(&st.stdout);
    let stderr = String::from_utf8_lossy(&st.stderr);
    // Before the run: what it was given and what it did with it.
    assert!(stderr.contains("trace time 5612-10622 s"), "{stderr}");
    assert!(
        stderr.contains("tasks first seen mid-life (not by SUBMIT): 7581"),
        "{stderr}"
    );
    assert!(stderr.contains("start: warm (auto"), "{stderr}");
    // After it: no table of identical numbers presented as a comparison.
    assert!(
        stdout.contains("comparison: NONE on this input"),
        "{stdout}"
    );
    assert!(stdout.contains("start: warm: own events"), "{stdout}");
    let json = std::fs::read_to_string(out.path().join("runs.json")).unwrap();
    assert!(
        json.contains("\"comparable\": false") && json.contains("\"verdict\": \"idle"),
        "{json}"
    );
}
