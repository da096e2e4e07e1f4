//! `wh-bench`: Wormhole's benchmark runner and its measuring tools.
//!
//! * `wh-bench run`: everything, side by side (what bench/wormhole/run.sh calls);
//! * `wh-bench pingpong --prim futex|spin|tcp|chan-futex|chan-spin`: one raw primitive;
//! * `wh-bench marshal`: the in-process marshalling cost of a forwarded call;
//! * `wh-bench report`: rewrite the markdown and charts from results.json.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use wormhole_bench::pingpong::{self, Prim};
use wormhole_bench::{marshal, report, runner, stats};
use wormhole_transport::Handoff;

/// Polls before sleeping in the spin variants: the server's default.
const SPIN_POLLS: u32 = 20_000;

#[derive(Parser, Debug)]
#[command(version, about = "Wormhole benchmarks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum PrimArg {
    Futex,
    Spin,
    Tcp,
    ChanFutex,
    ChanSpin,
    ChanSameCore,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run every benchmark side by side and write the report.
    Run {
        /// Directory with wormhole-server, wormhole-run and wh-bench.
        #[arg(long, default_value = "target/release")]
        bin_dir: PathBuf,
        /// The compiled whbench C program.
        #[arg(long)]
        whbench: PathBuf,
        /// Where results.json, results.md and the charts go.
        #[arg(long, default_value = "bench/out")]
        out: PathBuf,
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Rounds of the call-heavy and bulk workloads.
        #[arg(long, default_value_t = 5)]
        work_rounds: usize,
        #[arg(long, default_value_t = 20_000)]
        null_iters: usize,
        #[arg(long, default_value_t = 20_000)]
        ping_iters: usize,
        /// Kernel launches per call-heavy run: 100,000 take about half a
        /// second, long enough that rounds vary by ~13 % rather than ~28 %.
        #[arg(long, default_value_t = 100_000)]
        launches: usize,
        #[arg(long, default_value_t = 100)]
        finish_every: usize,
        #[arg(long, default_value_t = 256)]
        bulk_mib: usize,
        #[arg(long, default_value_t = 3)]
        bulk_reps: usize,
        /// Seconds the idle server is watched.
        #[arg(long, default_value_t = 1.0)]
        idle_secs: f64,
        /// clpeak's test flags (space-separated); "" for no clpeak.
        #[arg(
            long,
            default_value = "--kernel-latency --global-bandwidth --transfer-bandwidth"
        )]
        clpeak: String,
        #[arg(long, default_value_t = 1)]
        clpeak_rounds: usize,
        /// Limit per clpeak run, in seconds.
        #[arg(long, default_value_t = 120)]
        clpeak_timeout: u64,
        /// Seconds for all measurements (sections shorten their rounds to fit).
        #[arg(long, default_value_t = 360)]
        budget: u64,
    },
    /// Measure one raw ping-pong primitive; prints RESULT {summary}.
    Pingpong {
        #[arg(long, value_enum)]
        prim: PrimArg,
        #[arg(long, default_value_t = 20_000)]
        iters: usize,
        #[arg(long, default_value_t = 2_000)]
        warmup: usize,
        /// Pin both processes to this CPU.
        #[arg(long)]
        pin: Option<usize>,
    },
    /// Measure marshalling in process; prints RESULT {...}.
    Marshal {
        #[arg(long, default_value_t = 200)]
        batches: usize,
        #[arg(long, default_value_t = 1000)]
        batch: usize,
    },
    /// Measure delay storing's hooks per call in process; prints RESULT {...}.
    ResidencyHooks {
        #[arg(long, default_value_t = 200)]
        batches: usize,
        #[arg(long, default_value_t = 1000)]
        batch: usize,
    },
    /// Rewrite results.md and the charts from results.json.
    Report {
        #[arg(long, default_value = "bench/out")]
        out: PathBuf,
    },
    /// Internal: the answering side of a ping-pong.
    #[command(name = "pingpong-child", hide = true)]
    PingpongChild { args: Vec<String> },
}

fn write_report(res: &runner::Results, out: &std::path::Path) -> anyhow::Result<()> {
    let md = report::markdown(res);
    std::fs::write(out.join("results.md"), &md).context("writing results.md")?;
    if report::register_font() {
        match report::charts(res, out) {
            Ok(files) => eprintln!("[wh-bench] charts: {}", files.join(", ")),
            Err(e) => eprintln!("[wh-bench] charts failed: {e}"),
        }
    } else {
        eprintln!(
            "[wh-bench] no TrueType font found (apt-get install fonts-dejavu-core): no charts"
        );
    }
    println!("{md}");
    Ok(())
}

fn main() -> anyhow::Result<()> {
    // The child's arguments are positional and may look like flags to clap.
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(pingpong::CHILD_ARG) {
        return pingpong::child_main(&argv[2..]).context("ping-pong child");
    }
    match Cli::parse().cmd {
        Cmd::Run {
            bin_dir,
            whbench,
            out,
            rounds,
            work_rounds,
            null_iters,
            ping_iters,
            launches,
            finish_every,
            bulk_mib,
            bulk_reps,
            idle_secs,
            clpeak,
            clpeak_rounds,
            clpeak_timeout,
            budget,
        } => {
            std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            let opts = runner::Opts {
                bin_dir,
                whbench,
                rounds: rounds.max(1),
                work_rounds: work_rounds.max(1),
                null_iters: null_iters.max(100),
                ping_iters: ping_iters.max(100),
                launches: launches.max(1),
                finish_every: finish_every.max(1),
                bulk_mib: bulk_mib.max(1),
                bulk_reps: bulk_reps.max(1),
                idle_secs: idle_secs.clamp(0.1, 30.0),
                clpeak_args: clpeak.split_whitespace().map(String::from).collect(),
                clpeak_rounds: clpeak_rounds.max(1),
                clpeak_timeout: Duration::from_secs(clpeak_timeout.max(1)),
                budget: Duration::from_secs(budget.max(30)),
            };
            let res = runner::run_all(&opts)?;
            std::fs::write(
                out.join("results.json"),
                serde_json::to_string_pretty(&res)?,
            )
            .context("writing results.json")?;
            write_report(&res, &out)?;
        }
        Cmd::Pingpong {
            prim,
            iters,
            warmup,
            pin,
        } => {
            let p = match prim {
                PrimArg::Futex => Prim::Word { polls: 0 },
                PrimArg::Spin => Prim::Word { polls: SPIN_POLLS },
                PrimArg::Tcp => Prim::Tcp,
                PrimArg::ChanFutex => Prim::Channel(Handoff::Futex),
                PrimArg::ChanSpin => Prim::Channel(Handoff::Spin { polls: SPIN_POLLS }),
                PrimArg::ChanSameCore => Prim::Channel(Handoff::SameCore),
            };
            let v = pingpong::measure(p, iters.max(1), warmup, pin)?;
            println!("RESULT {}", serde_json::to_string(&stats::summarize(&v))?);
        }
        Cmd::Marshal { batches, batch } => {
            let r = marshal::run(batches.max(5), batch.max(1))?;
            println!("RESULT {}", serde_json::to_string(&r)?);
        }
        Cmd::ResidencyHooks { batches, batch } => {
            let r = wormhole_bench::residency_hooks::run(batches.max(5), batch.max(1))?;
            println!("RESULT {}", serde_json::to_string(&r)?);
        }
        Cmd::Report { out } => {
            let text = std::fs::read_to_string(out.join("results.json"))
                .with_context(|| format!("reading {}/results.json", out.display()))?;
            let res: runner::Results =
                serde_json::from_str(&text).context("parsing results.json")?;
            write_report(&res, &out)?;
        }
        Cmd::PingpongChild { args } => pingpong::child_main(&args)?,
    }
    Ok(())
}
