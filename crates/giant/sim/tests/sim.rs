//! Simulator tests on handmade rows, on a synthetic trace, and on the real excerpt
//! (skipped, saying so, when ../shared/data is absent).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{one_machine, output_ok, real_dir, sim_cli, write_gz};
use giant_sim::driver::feed;
use giant_sim::model::Simulation;
use giant_sim::policy::SortKey;
use giant_sim::usage::{UsageModel, EXCERPT_QUANTILES};
use giant_sim::{Config, PolicyKind, SimError, Trace};
use giant_trace::synth::{write_files, SynthConfig};
use giant_trace::{IterSource, OnError, TaskEvent, TaskUsage, TraceReader};

fn rows<T: giant_trace::Record>(text: &str) -> Vec<T> {
    TraceReader::<_, T>::new(text.as_bytes(), "inline", OnError::Fail)
        .map(|r| r.unwrap())
        .collect()
}

fn run_rows(cfg: Config, policy: PolicyKind, events: &str, usage: &str) -> giant_sim::Summary {
    let mut sim = Simulation::new(cfg, policy, UsageModel::default()).unwrap();
    let ev: Vec<TaskEvent> = rows(events);
    let us: Vec<TaskUsage> = rows(usage);
    let ok = |e: &TaskEvent| Ok::<_, ()>(*e);
    let oku = |u: &TaskUsage| Ok::<_, ()>(*u);
    let end = feed(
        &mut sim,
        &mut IterSource(ev.iter().map(ok)),
        &mut IterSource(us.iter().map(oku)),
        None,
    )
    .unwrap();
    sim.finish(Some(end))
}

#[test]
fn admission_queues_and_releases_in_order() {
    // Capacity 0.5, overcommit 1: two tasks of 0.3 cannot run together.
    let ev = "\
600000000,,1,0,,0,u,0,0,0.3,0.01,0,0
600000000,,1,1,,0,u,0,0,0.3,0.01,0,0
600000000,,1,2,,0,u,0,0,0.1,0.01,0,0
1200000000,,1,0,,4,u,0,0,0.3,0.01,0,0
1800000000,,1,1,,4,u,0,0,0.3,0.01,0,0
1800000000,,1,2,,4,u,0,0,0.1,0.01,0,0
";
    let s = run_rows(one_machine(), PolicyKind::None, ev, "");
    assert_eq!(s.tasks_submitted, 3);
    assert_eq!(s.tasks_finished, 3);
    // Task 1 waited 600 s for task 0; task 2 waited behind task 1 (FIFO queue): 600 s too.
    assert!((s.mean_wait_s - 400.0).abs() < 1e-6, "{}", s.mean_wait_s);
    assert!(
        (s.mean_duration_s - 1000.0).abs() < 1e-6,
        "{}",
        s.mean_duration_s
    );
    assert_eq!(s.orphan_events, 0);
    assert!(s.intervals.iter().any(|i| i.pending == 2));
}

#[test]
fn real_usage_rows_override_the_model_and_contention_stretches_duration() {
    // One task; a usage row says it uses 1.0 CPU (twice the capacity) for 300 s.
    let ev = "600000000,,7,0,,0,u,0,0,0.1,0.01,0,0\n1500000000,,7,0,,4,u,0,0,0.1,0.01,0,0\n";
    let us = "600000000,900000000,7,0,5,1.0,0.02,0.02,0,0,0.02,0,0,1.0,0,1,0.01,1,0,1.0\n";
    let s = run_rows(one_machine(), PolicyKind::None, ev, us);
    assert_eq!(s.usage_rows_used, 1);
    // 300 s at 2x contention + 600 s modelled (uncontended): 1200 s stretched, 900 s real.
    assert!((s.mean_duration_s - 900.0).abs() < 1e-6);
    assert!(
        (s.mean_stretched_duration_s - 1200.0).abs() < 1e-3,
        "{}",
        s.mean_stretched_duration_s
    );
    assert!(
        s.real_usage_fraction > 0.3 && s.real_usage_fraction < 0.4,
        "{}",
        s.real_usage_fraction
    );
    assert!(s.usage_source.starts_with("mixed"), "{}", s.usage_source);
    assert!(s.intervals[0].overcommitted > 0.99);
}

/// Usage rows are matched to tasks by predicting "the task after the previous row's
/// task, as last window": a slot whose task ended, or that a new task reuses, must not
/// take the rows of the task it held before.
#[test]
fn usage_rows_never_go_to_an_ended_or_reused_slot() {
    let usage = |t: u64, job: u64, index: u32| {
        format!(
            "{t},{},{job},{index},5,0.05,0.02,0.02,0,0,0.02,0,0,0.1,0,1,0.01,1,0,0.05\n",
            t + 300_000_000
        )
    };
    let submit_ab = "600000000,,1,0,,0,u,0,0,0.1,0.01,0,0\n600000000,,1,1,,0,u,0,0,0.1,0.01,0,0\n";
    let end_b = "700000000,,1,1,,4,u,0,0,0.1,0.01,0,0\n";
    // Window 1: rows for A then B (B follows A). B ends. Window 2: rows for A, B again.
    let rows = [
        usage(600_000_000, 1, 0),
        usage(600_000_000, 1, 1),
        usage(900_000_000, 1, 0),
        usage(900_000_000, 1, 1),
    ]
    .concat();
    let s = run_rows(
        one_machine(),
        PolicyKind::None,
        &format!("{submit_ab}{end_b}"),
        &rows,
    );
    assert_eq!(
        s.usage_rows_used, 3,
        "the ended task's row in window 2 is ignored"
    );
    // Same, but a new task C (job 2) takes B's slot before window 2; its row follows A's.
    let submit_c = "700000001,,2,0,,0,u,0,0,0.1,0.01,0,0\n";
    let rows2 = [rows.clone(), usage(900_000_000, 2, 0)].concat();
    let s2 = run_rows(
        one_machine(),
        PolicyKind::None,
        &format!("{submit_ab}{end_b}{submit_c}"),
        &rows2,
    );
    assert_eq!(s2.tasks_submitted, 3);
    assert_eq!(s2.usage_rows_used, 4, "B's row ignored, C's row used");
}

#[test]
fn malformed_rows_name_file_and_line_or_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let good = "600000000,,1,0,,0,u,0,0,0.1,0.01,0,0\n";
    let path = dir.path().join("task_events-part-00000-of-00001.csv.gz");
    write_gz(
        &path,
        &format!("{good}{good}600000000,,1,x,,0,u,0,0,0.1,0.01,0,0\n{good}"),
    );
    let err = match Trace::load(dir.path(), OnError::Fail) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("malformed line accepted"),
    };
    assert!(
        err.contains("task_events-part-00000-of-00001.csv.gz:3:") && err.contains("column 4"),
        "{err}"
    );
    let t = Trace::load(dir.path(), OnError::Skip).unwrap();
    assert_eq!((t.events.len(), t.skipped), (3, 1));
    // A truncated gzip is an error with the file name, not a panic.
    let data = std::fs::read(&path).unwrap();
    std::fs::write(&path, &data[..data.len() / 2]).unwrap();
    let err = Trace::load(dir.path(), OnError::Skip)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("task_events-part-00000-of-00001.csv.gz"),
        "{err}"
    );
    // An empty directory says what is missing.
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        Trace::load(empty.path(), OnError::Fail),
        Err(SimError::NoTrace(_))
    ));
}

fn synthetic_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let cfg = SynthConfig {
        machines: 150,
        duration_s: 3 * 3600,
        ..SynthConfig::full_scale(3)
    };
    let mut ev =
        std::fs::File::create(dir.path().join("task_events-part-00000-of-00001.csv")).unwrap();
    let mut us =
        std::fs::File::create(dir.path().join("task_usage-part-00000-of-00001.csv")).unwrap();
    write_files(cfg, &mut ev, &mut us).unwrap();
    dir
}

#[test]
fn deterministic_per_seed_and_consistent_accounting() {
    let dir = synthetic_dir();
    let t = Trace::load(dir.path(), OnError::Fail).unwrap();
    // The synthetic usage never takes a machine over the default threshold (0.8): at it,
    // no policy would move anything and the accounting below would check nothing.
    let cfg = Config {
        machines: 100,
        job_sample: Some(0.5),
        warning_threshold: 0.4,
        ..Config::default()
    };
    for p in PolicyKind::ALL {
        let a = t.run(&cfg, p).unwrap();
        assert_eq!(a.verdict, "ok", "{}", p.name());
        let b = t.run(&cfg, p).unwrap();
        assert_eq!(a, b, "{}", p.name());
        assert_eq!(a.to_first + a.to_second, a.migrations, "{}", p.name());
        assert!(a.gini >= 0.0 && a.gini < 1.0);
        // The synthetic trace has usage rows for every window (boundaries aside).
        assert!(a.real_usage_fraction > 0.99, "{}", a.usage_source);
        if p == PolicyKind::None {
            assert_eq!(a.migrations, 0);
        } else {
            assert!(a.migrations > 0, "{}", p.name());
        }
        if p == PolicyKind::Coarse {
            assert_eq!(a.to_second, 0, "coarse only uses the least-loaded node");
        }
    }
    let other = t
        .run(
            &Config {
                seed: 2,
                ..cfg.clone()
            },
            PolicyKind::None,
        )
        .unwrap();
    assert_ne!(other, t.run(&cfg, PolicyKind::None).unwrap());
    // The parallel sweep gives the same results as sequential runs.
    let runs: Vec<_> = PolicyKind::ALL.iter().map(|p| (cfg.clone(), *p)).collect();
    let par = t.sweep(&runs, &|| {}).unwrap();
    for (r, (c, p)) in par.iter().zip(&runs) {
        assert_eq!(*r, t.run(c, *p).unwrap());
    }
}

#[test]
fn real_excerpt_reproducible_and_labelled_modelled() {
    let Some(dir) = real_dir() else { return };
    assert!(
        dir.join("NOTICE.md").is_file(),
        "CC-BY notice must travel with the data"
    );
    let t = Trace::load(&dir, OnError::Fail).unwrap();
    assert_eq!(t.events.len(), 803_964);
    assert_eq!(t.usage.len(), 10_000);
    assert!(t.model.samples > 9_000);
    assert!(!t.model.builtin, "{}", t.model.origin);
    // The built-in model (for usage files that match too little) is this fit, kept as
    // 101 quantiles: regenerate src/usage_excerpt.rs if this fails.
    let fit = UsageModel::fit(&t.events, &t.usage).downsampled(EXCERPT_QUANTILES);
    let builtin = UsageModel::excerpt();
    assert_eq!(
        (
            &fit.cpu_ratio,
            &fit.mem_ratio,
            &fit.peak_ratio,
            &fit.mai,
            &fit.burst_ratio
        ),
        (
            &builtin.cpu_ratio,
            &builtin.mem_ratio,
            &builtin.peak_ratio,
            &builtin.mai,
            &builtin.burst_ratio
        )
    );
    assert_eq!(
        (fit.samples, fit.burst_mean),
        (builtin.samples, builtin.burst_mean)
    );
    let cfg = Config::default();
    let a = t.run(&cfg, PolicyKind::Fine(SortKey::CpuUsage)).unwrap();
    let b = t.run(&cfg, PolicyKind::Fine(SortKey::CpuUsage)).unwrap();
    assert_eq!(a, b);
    assert!(a.usage_source.contains("modelled"), "{}", a.usage_source);
    assert!(a.migrations > 0);
    let none = t.run(&cfg, PolicyKind::None).unwrap();
    assert_eq!(none.migrations, 0);
    let ours = t.run(&cfg, PolicyKind::BudgetBestFit).unwrap();
    // Ours never exceeds its network budget.
    assert!(
        ours.migration_mbit_s <= cfg.network_budget_mbit_s + 1e-9,
        "{}",
        ours.migration_mbit_s
    );
}

#[test]
fn cli_writes_labelled_outputs() {
    let dir = synthetic_dir();
    let out = tempfile::tempdir().unwrap();
    let st = output_ok(
        sim_cli()
            .args([
                "run",
                "--trace",
                dir.path().to_str().unwrap(),
                "--policy",
                "none,fine,budget-best-fit",
            ])
            // Every job of the 150-machine trace (the default sample, 100 / 12,583 of the
            // jobs, leaves these 100 machines idle), and a threshold the synthetic usage
            // reaches (at 0.8 no machine ever gets there): else the verdict says "no comparison".
            .args([
                "--machines",
                "100",
                "--job-sample",
                "1",
                "--threshold",
                "0.4",
            ])
            .args(["--out", out.path().to_str().unwrap()]),
    );
    let csv = std::fs::read_to_string(out.path().join("runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4);
    // The columns of earlier versions keep their places; new ones come after them.
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let old = "policy,machines,overcommit,seed,simulated_s,mean_cpu,gini,overcommitted,mean_excess,mean_pending,tasks_finished,mean_duration_s,mean_wait_s,mean_stretched_duration_s,migrations,migration_gb,migration_mbit_s,peak_interval_mbit_s,to_first,to_second,balance_per_gb,usage_source";
    assert_eq!(header[..22].join(","), old);
    for col in [
        "start",
        "orphans_by_type",
        "usage_model",
        "comparable",
        "verdict",
        "warnings",
    ] {
        assert!(header.contains(&col), "{col} missing from {header:?}");
    }
    // The synthetic trace starts at time 0 with every task submitted: a cold start on a
    // live cluster, comparable.
    let mut rdr = csv::Reader::from_reader(csv.as_bytes());
    let heads = rdr.headers().unwrap().clone();
    let col = |name: &str| heads.iter().position(|h| h == name).unwrap();
    for row in rdr.records() {
        let row = row.unwrap();
        assert_eq!(row.len(), heads.len());
        assert_eq!(&row[col("start")], "cold");
        assert_eq!(&row[col("comparable")], "true", "{}", &row[col("verdict")]);
        assert_eq!(&row[col("verdict")], "ok");
    }
    let stdout = String::from_utf8_lossy(&st.stdout);
    assert!(stdout.contains("comparison: ok"), "{stdout}");
    assert!(String::from_utf8_lossy(&st.stderr).contains("start: cold (auto: first event at 0 s"));
    let st = sim_cli()
        .args([
            "run",
            "--trace",
            dir.path().to_str().unwrap(),
            "--policy",
            "bogus",
        ])
        .output()
        .unwrap();
    assert!(!st.status.success());
    assert!(String::from_utf8_lossy(&st.stderr).contains("unknown policy"));
}

/// A row at 2^63 - 1 µs (the schema's "after the trace") or far past every row before it
/// is skipped and counted: simulating the gap would tick about 10^11 times.
#[test]
fn a_row_far_past_the_others_is_skipped_not_simulated() {
    let ev = "\
600000000,,1,0,,0,u,0,0,0.1,0.01,0,0
1200000000,,1,1,,0,u,0,0,0.1,0.01,0,0
9223372036854775807,,1,0,,4,u,0,0,0.1,0.01,0,0
";
    let us = "4611686018427387904,4611686018727387904,1,1,5,0.05,0.02,0.02,0,0,0.02,0,0,0.1,0,1,0.01,1,0,0.05\n";
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run_rows(one_machine(), PolicyKind::None, ev, us));
    });
    let mut s = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the run did not finish in 60 s");
    assert_eq!((s.rows, s.rows_far_ahead), (4, 2));
    assert!((s.simulated_s - 600.0).abs() < 1e-9, "{}", s.simulated_s);
    assert_eq!((s.tasks_submitted, s.tasks_finished), (2, 0));
    giant_sim::input::run_warnings(&mut s);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("2 rows were skipped for coming more than 40 days")),
        "{:?}",
        s.warnings
    );
}
