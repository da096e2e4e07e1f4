//! The side-by-side runner: starts one Wormhole server per handoff mode,
//! then runs every configuration in rotating order, round after round
//! (ABAB), so that the shared machine's noise falls on all of them alike.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::procstat::{children, cpu_times, CpuTimes};
use crate::stats::{combine, median, Summary};
use crate::{marshal::MarshalResult, proc};

/// What to run and how much.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Where wormhole-server, wormhole-run and wh-bench are.
    pub bin_dir: PathBuf,
    /// The compiled whbench C program.
    pub whbench: PathBuf,
    pub rounds: usize,
    /// Rounds of the (short, noisy) call-heavy and bulk workloads.
    pub work_rounds: usize,
    pub null_iters: usize,
    pub ping_iters: usize,
    pub launches: usize,
    pub finish_every: usize,
    pub bulk_mib: usize,
    pub bulk_reps: usize,
    pub idle_secs: f64,
    /// clpeak's test flags; empty: no clpeak.
    pub clpeak_args: Vec<String>,
    pub clpeak_rounds: usize,
    pub clpeak_timeout: Duration,
    /// Time for all measurements: a section starts no new round once its
    /// share is spent (its first round always runs), and clpeak gets what
    /// is left.
    pub budget: Duration,
}

/// Where a client finds the OpenCL implementation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
pub enum Target {
    Native,
    /// A Wormhole server in this handoff mode, over shared memory.
    Shm(String),
    /// The futex server's TCP listener.
    Tcp,
    /// The futex server with every call forwarded synchronously
    /// (WORMHOLE_SYNC=1): what batching saves.
    ShmSync,
}

impl Target {
    pub fn label(&self) -> String {
        match self {
            Target::Native => "native".into(),
            Target::Shm(m) => format!("shm+{m}"),
            Target::Tcp => "tcp".into(),
            Target::ShmSync => "shm+futex, WORMHOLE_SYNC=1".into(),
        }
    }
}

/// The server whose bulk transfers stream through the channel (buffers
/// not shared with the client), beside the default futex server.
const STREAMED: &str = "futex-streamed";

/// A server we started; killed on drop.
struct Server {
    child: Child,
    socket: PathBuf,
    tcp: Option<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

impl Server {
    fn start(bin_dir: &Path, mode: &str, tcp: bool) -> anyhow::Result<Server> {
        let socket =
            std::env::temp_dir().join(format!("wh-bench-{}-{mode}.sock", std::process::id()));
        let tcp = if tcp {
            Some(format!("127.0.0.1:{}", free_port()?))
        } else {
            None
        };
        let mut cmd = Command::new(bin_dir.join("wormhole-server"));
        // STREAMED: futex, with buffers in the tenant's memory only, so
        // that transfers stream through the channel.
        let handoff = if mode == STREAMED { "futex" } else { mode };
        cmd.arg("--quiet")
            .arg("--socket")
            .arg(&socket)
            .arg("--handoff")
            .arg(handoff);
        if mode == STREAMED {
            cmd.arg("--no-shared-buffers");
        }
        if let Some(t) = &tcp {
            cmd.arg("--tcp").arg(t);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", proc::describe(&cmd)))?;
        let mut s = Server { child, socket, tcp };
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::os::unix::net::UnixStream::connect(&s.socket).is_err() {
            if let Some(st) = s.child.try_wait()? {
                bail!("wormhole-server --handoff {mode} exited: {st}");
            }
            if Instant::now() > deadline {
                bail!("wormhole-server --handoff {mode} did not start listening");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(s)
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

/// Whether this wormhole-server knows `--handoff same-core`.
pub fn has_same_core(bin_dir: &Path) -> bool {
    Command::new(bin_dir.join("wormhole-server"))
        .arg("--help")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("same-core"))
        .unwrap_or(false)
}

/// The PoCL ICD file, for native runs.
pub fn pocl_icd() -> anyhow::Result<PathBuf> {
    let dir = Path::new("/etc/OpenCL/vendors");
    for e in std::fs::read_dir(dir)
        .context("no /etc/OpenCL/vendors")?
        .flatten()
    {
        if e.file_name().to_string_lossy().contains("pocl") {
            return Ok(e.path());
        }
    }
    bail!("no PoCL ICD in /etc/OpenCL/vendors (apt-get install pocl-opencl-icd)")
}

/// One CPU-utilisation run of the call-heavy workload.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CallHeavyRun {
    pub wall_s: f64,
    pub client_user_s: f64,
    pub client_sys_s: f64,
    pub server_user_s: f64,
    pub server_sys_s: f64,
    /// Server CPU time (scheduler's count) during the timed loop.
    pub server_run_s: f64,
    /// Tenant CPU time while its client was connected but idle.
    pub idle_server_run_s: f64,
    /// Listener process CPU time during the same idle period.
    pub idle_listener_run_s: f64,
    pub idle_secs: f64,
}

/// One clpeak run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ClpeakRun {
    pub wall_s: f64,
    /// "section / metric" -> value, as clpeak prints it.
    pub metrics: BTreeMap<String, f64>,
    pub error: Option<String>,
}

/// Everything one `run` measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Results {
    pub date: String,
    pub machine: String,
    pub nproc: usize,
    pub cpu_model: String,
    pub kernel: String,
    pub git_rev: String,
    /// The cpuidle driver and, in a KVM guest, how long an idle vCPU polls
    /// before it halts: on a VM that halts at once, every wake-up of an idle
    /// CPU is an interrupt to a halted vCPU, which dominates hand-offs.
    #[serde(default)]
    pub idle: String,
    pub same_core: bool,
    pub rounds: usize,
    /// Label -> per-round summaries: forwarded calls ("call: ...") and raw
    /// primitives ("raw: ...").
    pub rtt: BTreeMap<String, Vec<Summary>>,
    pub timer: Vec<Summary>,
    pub marshal: Option<MarshalResult>,
    pub callheavy: BTreeMap<String, Vec<CallHeavyRun>>,
    /// Label -> (write GB/s, read GB/s) medians per round.
    pub bulk: BTreeMap<String, Vec<(f64, f64)>>,
    pub clpeak: BTreeMap<String, Vec<ClpeakRun>>,
    pub clpeak_args: Vec<String>,
    pub errors: Vec<String>,
    pub total_s: f64,
    pub config: BTreeMap<String, String>,
}

impl Results {
    pub fn rtt_of(&self, label: &str) -> Option<Summary> {
        self.rtt
            .get(label)
            .filter(|v| !v.is_empty())
            .map(|v| combine(v))
    }
}

struct Ctx<'a> {
    opts: &'a Opts,
    start: Instant,
    pocl: PathBuf,
    servers: BTreeMap<String, Server>,
}

impl Ctx<'_> {
    fn client(&self, target: &Target, prog: &Path, args: &[String]) -> anyhow::Result<Command> {
        let mut cmd;
        match target {
            Target::Native => {
                cmd = Command::new(prog);
                cmd.env("OCL_ICD_VENDORS", &self.pocl)
                    .env_remove("OCL_ICD_FILENAMES");
            }
            Target::Shm(_) | Target::ShmSync => {
                let mode = match target {
                    Target::Shm(m) => m.as_str(),
                    _ => "futex",
                };
                let s = self
                    .servers
                    .get(mode)
                    .with_context(|| format!("no {mode} server"))?;
                cmd = Command::new(self.opts.bin_dir.join("wormhole-run"));
                cmd.arg("--server")
                    .arg(format!("unix:{}", s.socket.display()))
                    .arg("--")
                    .arg(prog);
            }
            Target::Tcp => {
                let s = self.servers.get("futex").context("no futex server")?;
                let addr = s.tcp.as_ref().context("no TCP listener")?;
                cmd = Command::new(self.opts.bin_dir.join("wormhole-run"));
                cmd.arg("--server")
                    .arg(format!("tcp:{addr}"))
                    .arg("--")
                    .arg(prog);
            }
        }
        cmd.args(args).env_remove("WORMHOLE_SYNC");
        if *target == Target::ShmSync {
            cmd.env("WORMHOLE_SYNC", "1");
        }
        Ok(cmd)
    }

    /// Whether `share` of the time budget is spent.
    fn spent(&self, share: f64) -> bool {
        self.start.elapsed() > self.opts.budget.mul_f64(share)
    }

    fn left(&self) -> Duration {
        self.opts.budget.saturating_sub(self.start.elapsed())
    }

    fn server_pid(&self, target: &Target) -> Option<i32> {
        match target {
            Target::Native => None,
            Target::Shm(m) => self.servers.get(m).map(Server::pid),
            Target::Tcp | Target::ShmSync => self.servers.get("futex").map(Server::pid),
        }
    }
}

fn summary_of(v: &serde_json::Value) -> anyhow::Result<Summary> {
    Ok(serde_json::from_value(v.clone())?)
}

/// Rotates and, on odd rounds, reverses `items`, so that no configuration
/// always runs first or always follows the same one.
pub fn round_order<T: Clone>(items: &[T], round: usize) -> Vec<T> {
    if items.is_empty() {
        return Vec::new();
    }
    let mut v: Vec<T> = items.to_vec();
    v.rotate_left(round % items.len());
    if round % 2 == 1 {
        v.reverse();
    }
    v
}

/// A step of the null-call section.
#[derive(Debug, Clone)]
enum RttStep {
    Call(Target),
    Raw {
        label: &'static str,
        prim: &'static str,
        pin: bool,
    },
}

fn log(msg: &str) {
    eprintln!("[wh-bench] {msg}");
}

fn rtt_round(ctx: &Ctx, res: &mut Results, steps: &[RttStep], round: usize) {
    let o = ctx.opts;
    for step in round_order(steps, round) {
        let r = (|| -> anyhow::Result<()> {
            match &step {
                RttStep::Call(t) => {
                    let cmd = ctx.client(
                        t,
                        &o.whbench,
                        &["nullcall".into(), o.null_iters.to_string()],
                    )?;
                    let v = proc::run_result(cmd, Duration::from_secs(120))?;
                    res.rtt
                        .entry(format!("call: {}", t.label()))
                        .or_default()
                        .push(summary_of(&v["event_info"])?);
                    res.rtt
                        .entry(format!("call(device_info): {}", t.label()))
                        .or_default()
                        .push(summary_of(&v["device_info"])?);
                    if *t == Target::Native {
                        res.timer.push(summary_of(&v["timer"])?);
                    }
                }
                RttStep::Raw { label, prim, pin } => {
                    let mut cmd = Command::new(o.bin_dir.join("wh-bench"));
                    cmd.args([
                        "pingpong",
                        "--prim",
                        prim,
                        "--iters",
                        &o.ping_iters.to_string(),
                    ]);
                    if *pin {
                        cmd.args(["--pin", "0"]);
                    }
                    let v = proc::run_result(cmd, Duration::from_secs(120))?;
                    res.rtt
                        .entry(format!("raw: {label}"))
                        .or_default()
                        .push(summary_of(&v)?);
                }
            }
            Ok(())
        })();
        if let Err(e) = r {
            log(&format!("null-call step {step:?} failed: {e:#}"));
            res.errors.push(format!("{step:?}: {e:#}"));
        }
    }
}

fn callheavy_once(ctx: &Ctx, t: &Target) -> anyhow::Result<CallHeavyRun> {
    let o = ctx.opts;
    let mut cmd = ctx.client(
        t,
        &o.whbench,
        &[
            "callheavy".into(),
            o.launches.to_string(),
            o.finish_every.to_string(),
        ],
    )?;
    cmd.env("WH_HANDSHAKE", "1");
    let spid = ctx.server_pid(t);
    let before: HashSet<i32> = spid
        .map(|p| children(p, "tenant").into_iter().collect())
        .unwrap_or_default();
    let mut tenant = None;
    let mut at_ready = CpuTimes::default();
    let mut at_hold = CpuTimes::default();
    let mut idle = (0.0, 0.0);
    let mut fail = None;
    let out = proc::run(cmd, Duration::from_secs(180), |line| match line {
        "READY" => {
            if let Some(sp) = spid {
                tenant = children(sp, "tenant")
                    .into_iter()
                    .filter(|p| !before.contains(p))
                    .max();
                match tenant.and_then(cpu_times) {
                    Some(c) => at_ready = c,
                    None => fail = Some("tenant process not found".to_string()),
                }
            }
            true
        }
        "HOLD" => {
            if let (Some(tp), Some(sp)) = (tenant, spid) {
                at_hold = cpu_times(tp).unwrap_or_default();
                let l0 = cpu_times(sp).unwrap_or_default();
                std::thread::sleep(Duration::from_secs_f64(o.idle_secs));
                let t1 = cpu_times(tp).unwrap_or_default();
                let l1 = cpu_times(sp).unwrap_or_default();
                idle = (t1.since(at_hold).run_s, l1.since(l0).run_s);
            }
            true
        }
        _ => false,
    })?;
    if let Some(f) = fail {
        bail!(f);
    }
    let v = out.result.context("no RESULT from callheavy")?;
    let num = |k: &str| {
        v[k].as_f64()
            .with_context(|| format!("callheavy RESULT lacks {k}"))
    };
    let srv = at_hold.since(at_ready);
    Ok(CallHeavyRun {
        wall_s: num("wall_s")?,
        client_user_s: num("user_s")?,
        client_sys_s: num("sys_s")?,
        server_user_s: srv.user_s,
        server_sys_s: srv.sys_s,
        server_run_s: srv.run_s,
        idle_server_run_s: idle.0,
        idle_listener_run_s: idle.1,
        idle_secs: if spid.is_some() { o.idle_secs } else { 0.0 },
    })
}

fn bulk_once(ctx: &Ctx, t: &Target) -> anyhow::Result<(f64, f64)> {
    let o = ctx.opts;
    let cmd = ctx.client(
        t,
        &o.whbench,
        &[
            "bulk".into(),
            o.bulk_mib.to_string(),
            o.bulk_reps.to_string(),
        ],
    )?;
    let v = proc::run_result(cmd, Duration::from_secs(240))?;
    let med = |k: &str| -> anyhow::Result<f64> {
        let a = v[k]
            .as_array()
            .with_context(|| format!("bulk RESULT lacks {k}"))?;
        Ok(median(
            &a.iter().filter_map(|x| x.as_f64()).collect::<Vec<_>>(),
        ))
    };
    Ok((med("write_gbps")?, med("read_gbps")?))
}

/// Parses clpeak's report: "name : value" lines, under the section header
/// (a line without a colon) that is less indented than they are.
pub fn parse_clpeak(out: &str) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    let mut section: Option<(usize, String)> = None;
    for line in out.lines() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if section.as_ref().is_some_and(|(i, _)| indent <= *i) {
            section = None;
        }
        match t.rsplit_once(':') {
            Some((name, val)) => {
                let name = name.trim();
                let val = val.split_whitespace().next().unwrap_or("");
                if let Ok(x) = val.parse::<f64>() {
                    let key = match &section {
                        Some((_, s)) => format!("{s} / {name}"),
                        None => name.to_string(),
                    };
                    m.insert(key, x);
                }
            }
            None => section = Some((indent, t.to_string())),
        }
    }
    m
}

fn clpeak_once(ctx: &Ctx, t: &Target, limit: Duration) -> ClpeakRun {
    let o = ctx.opts;
    let Some(clpeak) = which("clpeak") else {
        return ClpeakRun {
            error: Some("clpeak not installed (apt-get install clpeak)".into()),
            ..Default::default()
        };
    };
    let run = ctx
        .client(t, &clpeak, &o.clpeak_args)
        .map_err(|e| (format!("{e:#}"), String::new()))
        .and_then(|cmd| {
            proc::run(cmd, limit, |_| false).map_err(|e| match e {
                // Keep what it measured before the time ran out.
                proc::ProcError::Timeout { ref stdout, .. } => (e.to_string(), stdout.clone()),
                e => (e.to_string(), String::new()),
            })
        });
    match run {
        Ok(out) => ClpeakRun {
            wall_s: out.wall_s,
            metrics: parse_clpeak(&out.stdout),
            error: None,
        },
        Err((e, partial)) => {
            log(&format!("clpeak on {} failed: {e}", t.label()));
            ClpeakRun {
                wall_s: f64::NAN,
                metrics: parse_clpeak(&partial),
                error: Some(e),
            }
        }
    }
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_string_lossy()
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn sh(cmd: &str) -> String {
    Command::new("sh")
        .args(["-c", cmd])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// The cpuidle driver, with `guest_halt_poll_ns` when it is haltpoll.
fn idle_policy() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let driver = read("/sys/devices/system/cpu/cpuidle/current_driver");
    let poll = read("/sys/module/haltpoll/parameters/guest_halt_poll_ns");
    match (driver.as_str(), poll.as_str()) {
        ("", _) => "unknown".into(),
        (d, "") => d.into(),
        (d, p) => format!("{d}, guest_halt_poll_ns = {p}"),
    }
}

/// Runs everything; returns the results even when some steps failed (their
/// errors are listed in `errors`).
pub fn run_all(opts: &Opts) -> anyhow::Result<Results> {
    let start = Instant::now();
    let mut res = Results {
        date: sh("date -u '+%Y-%m-%d %H:%M UTC'"),
        machine: sh("hostname"),
        nproc: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        cpu_model: sh("lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n1"),
        kernel: sh("uname -r"),
        git_rev: sh("git rev-parse --short HEAD 2>/dev/null"),
        idle: idle_policy(),
        same_core: has_same_core(&opts.bin_dir),
        rounds: opts.rounds,
        clpeak_args: opts.clpeak_args.clone(),
        ..Default::default()
    };
    for (k, v) in [
        ("null_iters", opts.null_iters),
        ("ping_iters", opts.ping_iters),
        ("launches", opts.launches),
        ("finish_every", opts.finish_every),
        ("bulk_mib", opts.bulk_mib),
        ("bulk_reps", opts.bulk_reps),
        ("work_rounds", opts.work_rounds),
    ] {
        res.config.insert(k.into(), v.to_string());
    }
    let mut modes = vec!["futex".to_string(), "spin".to_string()];
    if res.same_core {
        modes.push("same-core".into());
    } else {
        log("this wormhole-server has no --handoff same-core: skipping that mode");
    }
    let mut ctx = Ctx {
        opts,
        start,
        pocl: pocl_icd()?,
        servers: BTreeMap::new(),
    };
    for m in &modes {
        match Server::start(&opts.bin_dir, m, m == "futex") {
            Ok(s) => {
                ctx.servers.insert(m.clone(), s);
            }
            Err(e) => {
                log(&format!("server {m}: {e:#}"));
                res.errors.push(format!("server {m}: {e:#}"));
            }
        }
    }
    if !ctx.servers.contains_key("futex") {
        bail!("the futex server did not start; nothing to compare");
    }
    match Server::start(&opts.bin_dir, STREAMED, false) {
        Ok(s) => {
            ctx.servers.insert(STREAMED.into(), s);
        }
        Err(e) => res.errors.push(format!("server {STREAMED}: {e:#}")),
    }
    let remote: Vec<Target> = modes
        .iter()
        .filter(|m| ctx.servers.contains_key(*m))
        .map(|m| Target::Shm(m.clone()))
        .collect();

    // Warm-up: PoCL compiles and caches the kernel; the first tenant start
    // pays for loading libraries. Neither belongs in any timing.
    for t in [Target::Native, Target::Shm("futex".into())] {
        let cmd = ctx.client(
            &t,
            &opts.whbench,
            &["callheavy".into(), "10".into(), "5".into()],
        )?;
        proc::run_result(cmd, Duration::from_secs(180))
            .with_context(|| format!("warm-up on {}", t.label()))?;
    }

    log("a. null-call round trips and raw primitives");
    let steps = rtt_steps(&remote);
    for r in 0..opts.rounds {
        if r > 0 && ctx.spent(0.35) {
            res.errors
                .push(format!("time budget: round trips stopped after {r} rounds"));
            break;
        }
        rtt_round(&ctx, &mut res, &steps, r);
    }

    log("b. in-process marshalling cost");
    let mut cmd = Command::new(opts.bin_dir.join("wh-bench"));
    cmd.arg("marshal").env("OCL_ICD_VENDORS", &ctx.pocl);
    match proc::run_result(cmd, Duration::from_secs(120))
        .map_err(anyhow::Error::from)
        .and_then(|v| Ok(serde_json::from_value(v)?))
    {
        Ok(m) => res.marshal = Some(m),
        Err(e) => res.errors.push(format!("marshal: {e:#}")),
    }

    log("c+d. call-heavy workload (CPU) and bulk transfers");
    workloads(&ctx, &mut res, &remote);

    if !opts.clpeak_args.is_empty() {
        log(&format!("d. clpeak {}", opts.clpeak_args.join(" ")));
        let pair = [Target::Native, Target::Shm("futex".into())];
        'rounds: for r in 0..opts.clpeak_rounds {
            for (i, t) in round_order(&pair, r).into_iter().enumerate() {
                // Each side of the pair gets the same share of what is left.
                let limit = opts.clpeak_timeout.min(ctx.left() / (2 - i as u32));
                if limit < Duration::from_secs(20) {
                    res.errors
                        .push("time budget: clpeak skipped or cut short".into());
                    break 'rounds;
                }
                let c = clpeak_once(&ctx, &t, limit);
                res.clpeak.entry(t.label()).or_default().push(c);
            }
        }
    }
    drop(ctx);
    res.total_s = start.elapsed().as_secs_f64();
    Ok(res)
}

/// The round trips timed each round: calls on every target, then the raw
/// primitives they are judged against.
fn rtt_steps(remote: &[Target]) -> Vec<RttStep> {
    let mut steps = vec![RttStep::Call(Target::Native)];
    steps.extend(remote.iter().cloned().map(RttStep::Call));
    steps.push(RttStep::Call(Target::Tcp));
    steps.extend([
        RttStep::Raw {
            label: "futex",
            prim: "futex",
            pin: false,
        },
        RttStep::Raw {
            label: "spin",
            prim: "spin",
            pin: false,
        },
        RttStep::Raw {
            label: "tcp",
            prim: "tcp",
            pin: false,
        },
        RttStep::Raw {
            label: "shm channel futex",
            prim: "chan-futex",
            pin: false,
        },
        RttStep::Raw {
            label: "shm channel spin",
            prim: "chan-spin",
            pin: false,
        },
        RttStep::Raw {
            label: "futex same-core",
            prim: "futex",
            pin: true,
        },
    ]);
    steps
}

/// c+d: the call-heavy workload and bulk transfers on every target, rounds
/// alternated, within the time budget.
fn workloads(ctx: &Ctx, res: &mut Results, remote: &[Target]) {
    let opts = ctx.opts;
    let mut work = vec![Target::Native];
    work.extend(remote.iter().cloned());
    work.push(Target::Tcp);
    work.push(Target::ShmSync);
    let streamed = Target::Shm(STREAMED.into());
    if ctx.servers.contains_key(STREAMED) {
        work.push(streamed.clone());
    }
    for r in 0..opts.work_rounds {
        if r > 0 && ctx.spent(0.7) {
            res.errors
                .push(format!("time budget: workloads stopped after {r} rounds"));
            break;
        }
        for t in round_order(&work, r) {
            // Only transfers differ there.
            if t == streamed {
                match bulk_once(ctx, &t) {
                    Ok(b) => res.bulk.entry(t.label()).or_default().push(b),
                    Err(e) => res.errors.push(format!("bulk {}: {e:#}", t.label())),
                }
                continue;
            }
            // Unbatched, the workload takes 10-50 times as long; one
            // round shows that, and more would eat the budget.
            if t == Target::ShmSync && r > 0 {
                continue;
            }
            match callheavy_once(ctx, &t) {
                Ok(c) => res.callheavy.entry(t.label()).or_default().push(c),
                Err(e) => res.errors.push(format!("callheavy {}: {e:#}", t.label())),
            }
            if t == Target::ShmSync {
                continue;
            }
            match bulk_once(ctx, &t) {
                Ok(b) => res.bulk.entry(t.label()).or_default().push(b),
                Err(e) => res.errors.push(format!("bulk {}: {e:#}", t.label())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_rotate_and_reverse() {
        let v = [1, 2, 3];
        assert_eq!(round_order(&v, 0), vec![1, 2, 3]);
        assert_eq!(round_order(&v, 1), vec![1, 3, 2]);
        assert_eq!(round_order(&v, 2), vec![3, 1, 2]);
        assert!(round_order::<u8>(&[], 3).is_empty());
    }

    #[test]
    fn parses_clpeak_output() {
        let out = "Platform: X\n  Device: Y\n    Driver version  : 3.1+debian (Linux x64)\n\n    Transfer bandwidth (GBPS)\n      enqueueWriteBuffer              : 3.51\n      enqueueReadBuffer               : 2.38\n\n    Kernel launch latency : 84.82 us\n";
        let m = parse_clpeak(out);
        assert_eq!(
            m.get("Transfer bandwidth (GBPS) / enqueueWriteBuffer"),
            Some(&3.51)
        );
        assert_eq!(m.get("Kernel launch latency"), Some(&84.82));
        assert!(!m.contains_key("Driver version"));
    }
}
