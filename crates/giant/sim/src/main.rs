//! `giant-sim`: run, sweep and plot GiantVM rebalancing policies over Google's 2011 trace.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use giant_sim::driver::{census_of, feed, LoadOptions};
use giant_sim::input::{run_warnings, InputReport};
use giant_sim::model::Simulation;
use giant_sim::usage::UsageModel;
use giant_sim::warm::{self, StartMode};
use giant_sim::{output, plot, verdict, Config, PolicyKind, Summary, Trace};
use giant_trace::synth::{SynthConfig, SynthTrace};
use giant_trace::{Chain, OnError, RowSource, TaskEvent, TaskUsage, TraceError, TraceReader};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser)]
#[command(
    name = "giant-sim",
    version,
    about = "Trace-driven simulator of GiantVM cluster rebalancing"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run policies once over a trace directory and write summaries (+ intervals).
    Run(RunArgs),
    /// Sweep one parameter (machines or overcommit) for some policies, in parallel.
    Sweep(SweepArgs),
    /// Run the published experiments and draw every figure into --img.
    Figures(FigArgs),
    /// Stream gzip files through parser and simulator in one pass (one core); print rows/s.
    Stream(StreamArgs),
    /// Generate a synthetic trace in memory and stream it through parser and simulator.
    SynthBench(SynthArgs),
}

#[derive(Args, Clone)]
struct TraceArgs {
    /// Directory with task_events-*.csv.gz and task_usage-*.csv.gz (official names).
    #[arg(long, default_value = "../shared/data/google-clusterdata-2011-2")]
    trace: PathBuf,
    /// Skip and count malformed lines instead of stopping at the first one.
    #[arg(long)]
    skip_bad: bool,
    #[command(flatten)]
    start: StartArgs,
}

#[derive(Args, Clone)]
struct StartArgs {
    /// How runs start: auto (warm when the events begin after 900 s or over 1% of their
    /// tasks are first seen mid-life), warm (rebuild the tasks present at the first
    /// event), or cold (empty cluster).
    #[arg(long, default_value = "auto")]
    start: StartMode,
    /// Earlier task_events parts, in time order, read only to rebuild the tasks present
    /// when the trace begins (implies a warm start unless --start cold).
    #[arg(long, num_args = 1..)]
    history: Vec<PathBuf>,
}

#[derive(Args, Clone)]
struct ModelArgs {
    /// Machines in the cluster.
    #[arg(long, default_value_t = Config::default().machines)]
    machines: u32,
    /// Machines per cell (NUMA nodes of one GiantVM).
    #[arg(long, default_value_t = Config::default().cell_size)]
    cell_size: u32,
    /// CPU capacity per machine (normalised).
    #[arg(long, default_value_t = Config::default().cpu_capacity)]
    cpu_capacity: f64,
    /// Overcommit ratio for admission by CPU request.
    #[arg(long, default_value_t = Config::default().overcommit)]
    overcommit: f64,
    /// Warning threshold (fraction of capacity) that triggers rebalancing.
    #[arg(long, default_value_t = Config::default().warning_threshold)]
    threshold: f64,
    /// Rebalancing interval, seconds.
    #[arg(long, default_value_t = Config::default().interval_s)]
    interval: u64,
    /// Rebalancing interval while tasks arrive, seconds.
    #[arg(long, default_value_t = Config::default().arrival_interval_s)]
    arrival_interval: u64,
    /// Metrics sampling interval, seconds.
    #[arg(long, default_value_t = Config::default().sample_interval_s)]
    sample_interval: u64,
    /// Highest priority that may be migrated.
    #[arg(long, default_value_t = Config::default().migratable_max_priority)]
    max_priority: u8,
    /// Highest peak CPU that may be migrated.
    #[arg(long, default_value_t = Config::default().migratable_max_peak_cpu)]
    max_peak_cpu: f64,
    /// Fraction of jobs kept (default machines / 12583).
    #[arg(long)]
    job_sample: Option<f64>,
    /// GiB that memory 1.0 stands for.
    #[arg(long, default_value_t = Config::default().memory_unit_gib)]
    memory_unit_gib: f64,
    /// Network budget of budget-best-fit, Mbit/s.
    #[arg(long, default_value_t = Config::default().network_budget_mbit_s)]
    budget_mbit: f64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop at this trace time (seconds).
    #[arg(long)]
    end: Option<u64>,
}

impl ModelArgs {
    fn config(&self) -> Config {
        Config {
            machines: self.machines,
            cell_size: self.cell_size,
            cpu_capacity: self.cpu_capacity,
            overcommit: self.overcommit,
            warning_threshold: self.threshold,
            interval_s: self.interval,
            arrival_interval_s: self.arrival_interval,
            sample_interval_s: self.sample_interval,
            migratable_max_priority: self.max_priority,
            migratable_max_peak_cpu: self.max_peak_cpu,
            job_sample: self.job_sample,
            memory_unit_gib: self.memory_unit_gib,
            network_budget_mbit_s: self.budget_mbit,
            seed: self.seed,
            end_s: self.end,
        }
    }
}

/// Which policies `run` and `sweep` run, and where their summaries go.
#[derive(Args)]
struct RunsArgs {
    /// Policies (comma separated) or "all".
    #[arg(long, default_value = "all")]
    policy: String,
    /// Output directory.
    #[arg(long, default_value = "bench/out/giant")]
    out: PathBuf,
    /// JSON instead of CSV.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    runs: RunsArgs,
}

#[derive(Args)]
struct SweepArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    model: ModelArgs,
    /// Parameter to sweep: machines, overcommit, threshold, seed or budget (Mbit/s).
    #[arg(long)]
    param: String,
    /// Values (comma separated).
    #[arg(long)]
    values: String,
    #[command(flatten)]
    runs: RunsArgs,
}

#[derive(Args)]
struct FigArgs {
    #[command(flatten)]
    trace: TraceArgs,
    #[command(flatten)]
    model: ModelArgs,
    /// Where the PNG figures go.
    #[arg(long, default_value = "docs/img/giant")]
    img: PathBuf,
    /// Where the CSV data behind them goes.
    #[arg(long, default_value = "docs/data/giant")]
    data: PathBuf,
}

#[derive(Args)]
struct StreamArgs {
    /// task_events files, in time order.
    #[arg(long, num_args = 1.., required = true)]
    events: Vec<PathBuf>,
    /// task_usage files, in time order.
    #[arg(long, num_args = 0..)]
    usage: Vec<PathBuf>,
    #[command(flatten)]
    model: ModelArgs,
    /// Policy.
    #[arg(long, default_value = "budget-best-fit")]
    policy: String,
    /// Skip and count malformed lines.
    #[arg(long)]
    skip_bad: bool,
    /// Skip rows of jobs outside the job sample after reading only their job ID.
    #[arg(long)]
    filter_jobs: bool,
    #[command(flatten)]
    start: StartArgs,
}

#[derive(Args)]
struct SynthArgs {
    /// Machines of the synthetic cell (12500 = full scale).
    #[arg(long, default_value_t = 12_500)]
    trace_machines: u32,
    /// Hours of trace (696 = 29 days).
    #[arg(long, default_value_t = 696)]
    hours: u64,
    #[command(flatten)]
    model: ModelArgs,
    /// Policy.
    #[arg(long, default_value = "budget-best-fit")]
    policy: String,
    /// Only parse the rows (every field), to split the time between parser and simulator.
    #[arg(long)]
    parse_only: bool,
    /// Also write the summary and its intervals as JSON into this directory
    /// (`synth.json`), e.g. to check that two builds give identical results.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn policies(list: &str) -> Result<Vec<PolicyKind>> {
    if list == "all" {
        return Ok(PolicyKind::ALL.to_vec());
    }
    list.split(',')
        .map(|n| {
            PolicyKind::from_name(n.trim()).with_context(|| {
                let names: Vec<&str> = PolicyKind::ALL.iter().map(|p| p.name()).collect();
                format!("unknown policy {n:?}; known: {}", names.join(", "))
            })
        })
        .collect()
}

fn load(t: &TraceArgs) -> Result<Trace> {
    if !t.trace.is_dir() {
        bail!(
            "trace directory {} not found (pass --trace DIR)",
            t.trace.display()
        );
    }
    let on_error = if t.skip_bad {
        OnError::Skip
    } else {
        OnError::Fail
    };
    let started = Instant::now();
    let opts = LoadOptions {
        start: t.start.start,
        history: t.start.history.clone(),
    };
    let trace = Trace::load_with(&t.trace, on_error, &opts)?;
    eprintln!(
        "read {} task_events + {} task_usage rows from {} files in {:.2}s{}",
        trace.events.len(),
        trace.usage.len(),
        trace.files.len(),
        started.elapsed().as_secs_f64(),
        if trace.skipped > 0 {
            format!(", skipped {} malformed lines", trace.skipped)
        } else {
            String::new()
        }
    );
    eprint!("{}", trace.input);
    Ok(trace)
}

fn bar(n: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(n);
    if let Ok(style) = ProgressStyle::with_template(&format!(
        "{{bar:40}} {{pos}}/{{len}} {what} [{{elapsed_precise}}, eta {{eta}}]"
    )) {
        pb.set_style(style);
    }
    pb
}

fn sweep_runs(trace: &Trace, runs: &[(Config, PolicyKind)]) -> Result<Vec<Summary>> {
    let pb = bar(runs.len() as u64, "runs");
    let out = trace.sweep(runs, &|| pb.inc(1))?;
    pb.finish_and_clear();
    Ok(out)
}

fn print_row(name: &str, r: &Summary) {
    println!(
        "{:<24} {:>5} {:>5.2} {:>8.4} {:>8.4} {:>8.4} {:>9} {:>9.3} {:>8.3} {:>8.0}",
        name,
        r.machines,
        r.overcommit,
        r.mean_cpu,
        r.gini,
        r.overcommitted,
        r.migrations,
        r.migration_gb,
        r.migration_mbit_s,
        r.mean_stretched_duration_s
    );
}

/// The numbers of the table, without the policy's name.
fn same_numbers(a: &Summary, b: &Summary) -> bool {
    (
        a.machines,
        a.overcommit,
        a.seed,
        a.mean_cpu,
        a.gini,
        a.overcommitted,
    ) == (
        b.machines,
        b.overcommit,
        b.seed,
        b.mean_cpu,
        b.gini,
        b.overcommitted,
    ) && (a.migrations, a.migration_gb, a.mean_stretched_duration_s)
        == (b.migrations, b.migration_gb, b.mean_stretched_duration_s)
}

/// The table, one row per run; a block of runs (same cluster) whose numbers are all equal
/// is one row, said to be so. Then usage, the start, and the verdict of each block.
fn print_table(runs: &[Summary]) {
    println!(
        "{:<24} {:>5} {:>5} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8} {:>8}",
        "policy", "mach", "oc", "meanCPU", "gini", "over", "migr", "GB", "Mbit/s", "dur_s"
    );
    let mut verdicts: Vec<String> = Vec::new();
    for block in runs
        .chunk_by(|a, b| (a.machines, a.overcommit, a.seed) == (b.machines, b.overcommit, b.seed))
    {
        if block.len() > 1 && block.iter().all(|r| same_numbers(r, &block[0])) {
            print_row(&format!("(all {} identical)", block.len()), &block[0]);
        } else {
            for r in block {
                print_row(&r.policy, r);
            }
        }
        let r = &block[0];
        if !r.comparable {
            verdicts.push(format!(
                "comparison: NONE on this input ({} machines, overcommit {}): {}; mean CPU {:.4}, {:.0} tasks running, overload at {} of {} ticks",
                r.machines, r.overcommit, r.verdict, r.mean_cpu, r.mean_running, r.overload_ticks, r.ticks
            ));
        }
    }
    let Some(r) = runs.first() else { return };
    println!("usage: {}", r.usage_source);
    if r.start == "cold" {
        println!(
            "start: cold; measured usage {:.1}% of task-time",
            100.0 * r.real_usage_fraction
        );
    } else {
        println!(
            "start: {}: {} tasks taken as running and {} as pending at the start, {} submitted at their SCHEDULE (sampled jobs, placed through admission); measured usage {:.1}% of task-time",
            r.start,
            r.warm_running,
            r.warm_pending,
            r.warm_scheduled,
            100.0 * r.real_usage_fraction
        );
    }
    if verdicts.is_empty() {
        println!("comparison: {}", r.verdict);
    }
    for v in verdicts {
        println!("{v}");
    }
    let mut seen: Vec<&String> = Vec::new();
    for w in runs.iter().flat_map(|r| &r.warnings) {
        if !seen.contains(&w) {
            seen.push(w);
            println!("WARNING: {w}");
        }
    }
}

fn cmd_run(a: RunArgs) -> Result<()> {
    let trace = load(&a.trace)?;
    let cfg = a.model.config();
    let runs: Vec<_> = policies(&a.runs.policy)?
        .into_iter()
        .map(|p| (cfg.clone(), p))
        .collect();
    let res = sweep_runs(&trace, &runs)?;
    print_table(&res);
    output::write_runs(&a.runs.out, "runs", &res, a.runs.json, true)?;
    eprintln!("wrote {}", a.runs.out.display());
    Ok(())
}

fn parse_values(s: &str) -> Result<Vec<f64>> {
    s.split(',')
        .map(|v| {
            v.trim()
                .parse::<f64>()
                .with_context(|| format!("bad value {v:?}"))
        })
        .collect()
}

fn with_param(cfg: &Config, param: &str, v: f64) -> Result<Config> {
    let mut c = cfg.clone();
    match param {
        "machines" => c.machines = v as u32,
        "overcommit" => c.overcommit = v,
        "threshold" => c.warning_threshold = v,
        "seed" => c.seed = v as u64,
        "budget" => c.network_budget_mbit_s = v,
        _ => bail!(
            "unknown sweep parameter {param:?} (machines, overcommit, threshold, seed, budget)"
        ),
    }
    Ok(c)
}

fn cmd_sweep(a: SweepArgs) -> Result<()> {
    let trace = load(&a.trace)?;
    let base = a.model.config();
    let mut runs = Vec::new();
    for v in parse_values(&a.values)? {
        let c = with_param(&base, &a.param, v)?;
        for p in policies(&a.runs.policy)? {
            runs.push((c.clone(), p));
        }
    }
    let res = sweep_runs(&trace, &runs)?;
    print_table(&res);
    output::write_runs(
        &a.runs.out,
        &format!("sweep-{}", a.param),
        &res,
        a.runs.json,
        false,
    )?;
    Ok(())
}

fn cmd_figures(a: FigArgs) -> Result<()> {
    let trace = load(&a.trace)?;
    let base = a.model.config();
    let all = PolicyKind::ALL.to_vec();
    let mut runs: Vec<(Config, PolicyKind)> = all.iter().map(|p| (base.clone(), *p)).collect();
    let sizes = [700.0, 750.0, 800.0, 850.0, 900.0];
    let ocs = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4];
    // Same workload (the default cluster's job sample) on fewer or more machines.
    let fixed = Config {
        job_sample: Some(base.sample_fraction()),
        ..base.clone()
    };
    for s in sizes {
        for p in &all {
            runs.push((with_param(&fixed, "machines", s)?, *p));
        }
    }
    for o in ocs {
        for p in &all {
            runs.push((with_param(&base, "overcommit", o)?, *p));
        }
    }
    let started = Instant::now();
    let res = sweep_runs(&trace, &runs)?;
    eprintln!(
        "{} runs in {:.1}s",
        res.len(),
        started.elapsed().as_secs_f64()
    );
    let n = all.len();
    let main = &res[..n];
    let size_runs = &res[n..n + sizes.len() * n];
    let oc_runs = &res[n + sizes.len() * n..];
    print_table(main);
    output::write_runs(&a.data, "policies", main, false, true)?;
    output::write_runs(&a.data, "sweep-machines", size_runs, false, false)?;
    output::write_runs(&a.data, "sweep-overcommit", oc_runs, false, false)?;
    let note = format!(
        "{} machines, overcommit {}, seed {}, {:.1} h of trace; usage {}",
        base.machines,
        base.overcommit,
        base.seed,
        main[0].simulated_s / 3600.0,
        main[0].usage_source
    );
    plot::policy_comparison(&a.img.join("policies.png"), main, &note)?;
    plot::over_time(
        &a.img.join("network-over-time.png"),
        main,
        "Accumulated migration volume (GB)",
        "GB",
        |i| i.cumulative_bytes / 1e9,
    )?;
    plot::over_time(
        &a.img.join("gini-over-time.png"),
        main,
        "Gini of per-machine CPU",
        "Gini",
        |i| i.gini,
    )?;
    let gini: plot::Metric<'_> = ("Gini of per-machine CPU", |r| r.gini);
    let mean_cpu: plot::Metric<'_> = ("Mean CPU utilisation", |r| r.mean_cpu);
    let over: plot::Metric<'_> = ("Machines over capacity (fraction)", |r| r.overcommitted);
    let traffic: plot::Metric<'_> = ("Migration traffic (Mbit/s)", |r| r.migration_mbit_s);
    plot::sweep(
        &a.img.join("sweep-machines.png"),
        size_runs,
        "machines",
        |r| f64::from(r.machines),
        &[gini, over, traffic],
    )?;
    // Overcommit changes how full machines get, so that sweep shows it too.
    plot::sweep(
        &a.img.join("sweep-overcommit.png"),
        oc_runs,
        "overcommit ratio",
        |r| r.overcommit,
        &[gini, mean_cpu, over, traffic],
    )?;
    plot::first_second(&a.img.join("first-second.png"), main)?;
    eprintln!(
        "figures in {}, data in {}",
        a.img.display(),
        a.data.display()
    );
    Ok(())
}

type FilterMaker<'a> = &'a dyn Fn() -> Option<giant_trace::JobFilter>;

/// The parts of one table, opened one after the other.
fn open_all<'a, T: giant_trace::Record + 'static>(
    files: &'a [PathBuf],
    on_error: OnError,
    filter: FilterMaker<'a>,
) -> impl RowSource<Row = T, Error = TraceError> + 'a {
    Chain::new(files.len(), move |i| {
        let r = TraceReader::<_, T>::open(&files[i], on_error)?;
        Ok(match filter() {
            Some(f) => r.with_job_filter(f),
            None => r,
        })
    })
}

fn cmd_stream(a: StreamArgs) -> Result<()> {
    let policy =
        PolicyKind::from_name(&a.policy).with_context(|| format!("unknown policy {}", a.policy))?;
    let on_error = if a.skip_bad {
        OnError::Skip
    } else {
        OnError::Fail
    };
    let cfg = a.model.config();
    let mut sim = Simulation::new(cfg.clone(), policy, UsageModel::default())?;
    let mut report = None;
    if a.start.start != StartMode::Cold || !a.start.history.is_empty() {
        // A pass over the events (outside the timed stream) decides the start.
        let census = census_of(&a.events, on_error)?;
        let history = if a.start.history.is_empty() {
            None
        } else {
            Some(census_of(&a.start.history, on_error)?)
        };
        let plan = warm::plan(a.start.start, &census, history.as_ref());
        if let Some(w) = &plan.warm {
            sim.warm_start(w);
        }
        let r = InputReport::new(
            &census,
            history.as_ref(),
            None,
            &plan,
            &UsageModel::default(),
        );
        eprint!("{r}");
        report = Some(r);
    }
    // Rows seen by the filter (all rows with a readable job ID) when --filter-jobs is on.
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let make = || -> Option<giant_trace::JobFilter> {
        if !a.filter_jobs {
            return None;
        }
        let keep = giant_sim::model::job_filter(&cfg);
        let seen = std::sync::Arc::clone(&seen);
        Some(Box::new(move |job| {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            keep(job)
        }))
    };
    let started = Instant::now();
    let cpu0 = giant_sim::thread_cpu_seconds();
    let mk_ev = || make();
    let mk_us = || make();
    let end = feed(
        &mut sim,
        &mut open_all::<TaskEvent>(&a.events, on_error, &mk_ev),
        &mut open_all::<TaskUsage>(&a.usage, on_error, &mk_us),
        cfg.end_s.map(|s| s * 1_000_000),
    )?;
    let mut s = sim.finish(Some(end));
    let secs = started.elapsed().as_secs_f64();
    let cpu = giant_sim::thread_cpu_seconds() - cpu0;
    match &report {
        Some(r) => r.annotate(&mut s),
        None => run_warnings(&mut s),
    }
    verdict::judge_one(&mut s);
    print_table(std::slice::from_ref(&s));
    let rows = if a.filter_jobs {
        seen.load(std::sync::atomic::Ordering::Relaxed)
    } else {
        s.rows
    };
    println!(
        "rows {rows} in {secs:.3}s wall / {cpu:.3}s CPU: {:.2} M rows per CPU-second (one thread: gzip + parse + simulate{})",
        rows as f64 / cpu.max(1e-9) / 1e6,
        if a.filter_jobs { ", rows of unsampled jobs skipped after their job ID" } else { "" }
    );
    Ok(())
}

fn cmd_synth(a: SynthArgs) -> Result<()> {
    let policy =
        PolicyKind::from_name(&a.policy).with_context(|| format!("unknown policy {}", a.policy))?;
    let cfg = a.model.config();
    let mut sim = Simulation::new(cfg, policy, UsageModel::default())?;
    let mut gen = SynthTrace::new(SynthConfig {
        machines: a.trace_machines,
        duration_s: a.hours * 3600,
        ..SynthConfig::full_scale(a.model.seed)
    });
    let pb = bar(gen.windows(), "windows");
    let (mut ev, mut us) = (Vec::new(), Vec::new());
    let (mut gen_s, mut sim_s) = (0.0, 0.0);
    let (mut gen_cpu, mut sim_cpu) = (0.0, 0.0);
    let mut bytes = 0u64;
    let mut last = 0;
    let mut parsed = 0u64;
    loop {
        ev.clear();
        us.clear();
        let t0 = Instant::now();
        let c0 = giant_sim::thread_cpu_seconds();
        if !gen.next_window(&mut ev, &mut us) {
            break;
        }
        let t1 = Instant::now();
        let c1 = giant_sim::thread_cpu_seconds();
        bytes += (ev.len() + us.len()) as u64;
        // The window's bytes are read in place (no copy into the readers' buffers) and
        // handed back for the next window.
        let mut events = TraceReader::<_, TaskEvent>::from_vec(
            std::mem::take(&mut ev),
            Path::new("synthetic task_events"),
            OnError::Fail,
        );
        let mut usage = TraceReader::<_, TaskUsage>::from_vec(
            std::mem::take(&mut us),
            Path::new("synthetic task_usage"),
            OnError::Fail,
        );
        if a.parse_only {
            while let Some(r) = events.next_row()? {
                last = last.max(r.time);
                parsed += 1;
            }
            while let Some(r) = usage.next_row()? {
                last = last.max(r.start_time);
                parsed += 1;
            }
        } else {
            last = feed(&mut sim, &mut events, &mut usage, None)?.max(last);
        }
        (ev, us) = (events.into_vec(), usage.into_vec());
        sim_s += t1.elapsed().as_secs_f64();
        gen_s += (t1 - t0).as_secs_f64();
        sim_cpu += giant_sim::thread_cpu_seconds() - c1;
        gen_cpu += c1 - c0;
        pb.inc(1);
    }
    pb.finish_and_clear();
    if a.parse_only {
        println!(
            "synthetic {} machines x {} h: {parsed} rows, {:.2} GB of CSV; parse only {:.1}s wall / {:.1}s CPU = {:.2} M rows per CPU-second (one thread)",
            a.trace_machines,
            a.hours,
            bytes as f64 / 1e9,
            sim_s,
            sim_cpu,
            parsed as f64 / sim_cpu.max(1e-9) / 1e6
        );
        return Ok(());
    }
    let mut s = sim.finish(Some(last));
    run_warnings(&mut s);
    verdict::judge_one(&mut s);
    print_table(std::slice::from_ref(&s));
    if let Some(dir) = &a.out {
        output::write_runs(dir, "synth", std::slice::from_ref(&s), true, true)?;
    }
    println!(
        "synthetic {} machines x {} h: {} rows, {:.2} GB of CSV; generate {:.1}s wall / {:.1}s CPU; \
         parse+simulate {:.1}s wall / {:.1}s CPU = {:.2} M rows per CPU-second (one thread)",
        a.trace_machines,
        a.hours,
        s.rows,
        bytes as f64 / 1e9,
        gen_s,
        gen_cpu,
        sim_s,
        sim_cpu,
        s.rows as f64 / sim_cpu.max(1e-9) / 1e6
    );
    Ok(())
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Run(a) => cmd_run(a),
        Cmd::Sweep(a) => cmd_sweep(a),
        Cmd::Figures(a) => cmd_figures(a),
        Cmd::Stream(a) => cmd_stream(a),
        Cmd::SynthBench(a) => cmd_synth(a),
    }
}
