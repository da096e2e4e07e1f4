//! Arbitrary bytes as task_events and task_usage rows (skip mode), through the census,
//! the usage survey, the start decision (every mode, with and without earlier parts),
//! the input report and a small simulation of every policy: no panic, no hang, and the
//! counts add up. Times are folded into three days (a row 40 days past the others is
//! skipped by the driver, tested in tests/sim.rs; folding keeps runs short here).
#![no_main]

use giant_sim::driver::feed;
use giant_sim::input::InputReport;
use giant_sim::model::Simulation;
use giant_sim::usage::UsageModel;
use giant_sim::warm::{plan, StartMode};
use giant_sim::{verdict, Config, PolicyKind};
use giant_trace::census::{Census, UsageSurvey};
use giant_trace::{IterSource, OnError, TaskEvent, TaskUsage, TraceReader};
use libfuzzer_sys::fuzz_target;

const SPAN_US: u64 = 3 * 86_400 * 1_000_000;
const MAX_ROWS: usize = 64;

fuzz_target!(|data: &[u8]| {
    let cut = data.iter().position(|&b| b == b'|').unwrap_or(data.len());
    let (ev_bytes, us_bytes) = (&data[..cut], data.get(cut + 1..).unwrap_or(&[]));
    let mut events: Vec<TaskEvent> =
        TraceReader::<_, TaskEvent>::new(ev_bytes, "fuzz", OnError::Skip)
            .map_while(Result::ok)
            .take(MAX_ROWS)
            .collect();
    let mut usage: Vec<TaskUsage> =
        TraceReader::<_, TaskUsage>::new(us_bytes, "fuzz", OnError::Skip)
            .map_while(Result::ok)
            .take(MAX_ROWS)
            .collect();
    for e in &mut events {
        e.time %= SPAN_US;
    }
    for u in &mut usage {
        u.start_time %= SPAN_US;
        u.end_time %= SPAN_US;
    }
    // The first half of the events (by time) is the history of the second.
    events.sort_by_key(|e| e.time);
    usage.sort_by_key(|u| u.start_time);
    let (hist_rows, part_rows) = events.split_at(events.len() / 2);
    let mut census = Census::new();
    for e in part_rows {
        census.event(e);
    }
    let mut history = Census::new();
    for e in hist_rows {
        history.event(e);
    }
    let first_types: u64 = census.first_types().iter().sum();
    assert_eq!(first_types, census.tasks().len() as u64);
    assert!(census.orphan_events().iter().sum::<u64>() <= census.rows());
    let survey = UsageSurvey::of(&census, &usage);
    let overlap = survey.time_overlap(&census);
    assert!((0.0..=1.0).contains(&overlap), "{overlap}");
    assert!(survey.in_range <= survey.rows && survey.naming_tasks <= survey.naming_jobs);
    let model = UsageModel::fit_or_excerpt(part_rows, &usage);
    let cfg = Config {
        machines: 8,
        cell_size: 4,
        job_sample: Some(1.0),
        interval_s: 300,
        arrival_interval_s: 300,
        ..Config::default()
    };
    for (mode, hist) in [
        (StartMode::Auto, None),
        (StartMode::Warm, None),
        (StartMode::Cold, None),
        (StartMode::Auto, Some(&history)),
    ] {
        let p = plan(mode, &census, hist);
        let report = InputReport::new(&census, hist, Some(&survey), &p, &model);
        let _ = report.to_string();
        let mut runs = Vec::new();
        for policy in PolicyKind::ALL {
            let Ok(mut sim) = Simulation::new(cfg.clone(), policy, model.clone()) else {
                return;
            };
            if let Some(w) = &p.warm {
                sim.warm_start(w);
            }
            let ok = |e: &TaskEvent| Ok::<_, ()>(*e);
            let oku = |u: &TaskUsage| Ok::<_, ()>(*u);
            let Ok(end) = feed(
                &mut sim,
                &mut IterSource(part_rows.iter().map(ok)),
                &mut IterSource(usage.iter().map(oku)),
                None,
            ) else {
                return;
            };
            let mut s = sim.finish(Some(end));
            report.annotate(&mut s);
            assert_eq!(s.to_first + s.to_second, s.migrations);
            let warm = p.warm.as_ref().map_or(0, |w| w.tasks.len() as u64);
            assert!(s.warm_running + s.warm_pending <= warm);
            assert!(s.tasks_timed <= s.tasks_finished);
            assert!((0.0..=1.0).contains(&s.real_usage_fraction));
            assert!(s.mean_cpu.is_finite() && s.mean_cpu >= 0.0);
            assert!(s.overload_ticks <= s.ticks);
            runs.push(s);
        }
        let keys = vec![(); runs.len()];
        verdict::judge(&mut runs, &keys);
        for s in &runs {
            assert_eq!(s.comparable, s.verdict == verdict::OK);
        }
        let _ = giant_sim::output::summaries_csv(&runs);
    }
});
