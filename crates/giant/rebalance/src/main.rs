//! `giant-rebalance`: run the GiantVM guest rebalancer (see the library docs).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use giant_rebalance::{Actuator, Options, Policy, Rebalancer, SystemActuator, TreeActuator};

#[derive(Clone, Copy, ValueEnum)]
enum PolicyArg {
    /// Everything to the least-stolen node (published).
    Coarse,
    /// Spread over the two least-stolen nodes.
    Fine,
}

#[derive(Parser)]
#[command(
    name = "giant-rebalance",
    version,
    about = "Pin guest work to the NUMA node with the least steal time"
)]
struct Cli {
    /// Root of the /proc and /sys tree (a fixture directory for testing).
    #[arg(long, default_value = "/")]
    root: PathBuf,
    /// Rebalancing policy.
    #[arg(long, value_enum, default_value = "coarse")]
    policy: PolicyArg,
    /// Steal ticks per interval on the active node that trigger a move.
    #[arg(long, default_value_t = 50)]
    threshold: u64,
    /// Seconds between observations (0.01 to 86400).
    #[arg(long, default_value_t = 2.0, value_parser = interval_secs)]
    interval: f64,
    /// Print decisions, change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Stop after this many observations (default: run until SIGINT/SIGTERM).
    #[arg(long)]
    iterations: Option<u64>,
}

fn run<A: Actuator>(cli: &Cli, act: A, stop: &AtomicBool) -> Result<()> {
    let opts = Options {
        root: cli.root.clone(),
        policy: match cli.policy {
            PolicyArg::Coarse => Policy::Coarse,
            PolicyArg::Fine => Policy::Fine,
        },
        threshold: cli.threshold,
        dry_run: cli.dry_run,
    };
    let mut r = Rebalancer::new(opts, act).context("reading the NUMA layout")?;
    if r.single_node() {
        println!(
            "giant-rebalance: {} NUMA node(s) with CPUs under {}: nothing to rebalance",
            r.nodes().len(),
            cli.root.display()
        );
        return Ok(());
    }
    let layout: Vec<String> = r
        .nodes()
        .iter()
        .map(|n| format!("node{}={}", n.id, n.cpus))
        .collect();
    println!("giant-rebalance: {}", layout.join(" "));
    // In range (see `interval_secs`), so the conversion cannot fail.
    let interval = Duration::from_secs_f64(cli.interval);
    let mut n = 0u64;
    let mut result = Ok(());
    while !stop.load(Ordering::SeqCst) {
        match r.step() {
            Ok(step) => println!(
                "decision: {:?} deltas {:?} done {:?}",
                step.decision, step.deltas, step.counts
            ),
            Err(e) => {
                result = Err(e).context("observing steal");
                break;
            }
        }
        n += 1;
        if cli.iterations.is_some_and(|max| n >= max) {
            break;
        }
        let until = Instant::now() + interval;
        while Instant::now() < until && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20).min(interval));
        }
    }
    let c = r.restore();
    println!("restored original affinities: {c:?}");
    result
}

fn main() -> Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("installing signal handler")?;
    }
    if cli.root == std::path::Path::new("/") {
        run(&cli, SystemActuator, &stop)
    } else {
        run(
            &cli,
            TreeActuator::new(&cli.root).with_refusals_from_tree(),
            &stop,
        )
    }
}

/// An observation interval: a number of seconds from 0.01 to a day. Not
/// infinite or NaN, which the duration it becomes cannot hold.
fn interval_secs(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.01..=86_400.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{s} is not between 0.01 and 86400 seconds"))
    }
}
