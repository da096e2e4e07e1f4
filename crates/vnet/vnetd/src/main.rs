//! `vnetd`: the vnet overlay daemon. Parses arguments and the TOML start-up config, opens the
//! UDP underlay socket, applies the config as one batch and serves the control socket.

mod control;
mod dataplane;
mod fastpath;
mod sys;

use anyhow::{bail, Context};
use clap::Parser;
use serde::Deserialize;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use vnet_api::{BridgeDef, InterfaceDef, LinkDef, Op, RouteDef};

/// vnet overlay daemon: TAP interfaces, VXLAN links and direct bridges with VNET/P routing.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// TOML start-up configuration.
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// Control socket path (overrides the config).
    #[arg(short, long)]
    socket: Option<PathBuf>,
    /// UDP address to listen on for VXLAN (overrides the config; default 0.0.0.0:4789).
    #[arg(short, long)]
    listen: Option<String>,
    /// Verify inner TCP checksums before coalescing even when an outer UDP checksum
    /// already covered them.
    #[arg(long)]
    verify_all: bool,
    /// Busy-poll window in microseconds after work (0: always sleep). Bounded: skipped
    /// during bulk traffic and on a contended CPU; ignored with --rt-priority.
    #[arg(long)]
    spin_us: Option<u64>,
    /// Run the data-plane worker under SCHED_FIFO at this priority (1-99), so that it is
    /// scheduled as promptly as the kernel's own packet processing under CPU contention.
    #[arg(long)]
    rt_priority: Option<u8>,
    /// The kernel fast path: tc eBPF programs forward established flows between TAPs and
    /// IPv4 links with copies of the switch's decisions (needs CAP_BPF and CAP_NET_ADMIN).
    /// `auto` (the default) uses it where the kernel allows and says why not otherwise.
    #[arg(long, value_enum)]
    offload: Option<Offload>,
}

/// Whether to use the kernel fast path.
#[derive(clap::ValueEnum, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Offload {
    /// Where the kernel allows; otherwise forward in user space (and log why).
    #[default]
    Auto,
    /// Always; vnetd does not start without it.
    On,
    /// Never: every frame crosses user space.
    Off,
}

/// Default busy-poll window after work, in microseconds.
const DEFAULT_SPIN_US: u64 = 0;

/// The start-up configuration file.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct Config {
    listen: Option<String>,
    socket: Option<PathBuf>,
    #[serde(default)]
    learning: bool,
    #[serde(default)]
    verify_all: bool,
    spin_us: Option<u64>,
    rt_priority: Option<u8>,
    offload: Option<Offload>,
    #[serde(default)]
    interface: Vec<InterfaceDef>,
    #[serde(default)]
    link: Vec<LinkDef>,
    #[serde(default)]
    bridge: Vec<BridgeDef>,
    #[serde(default)]
    route: Vec<RouteDef>,
}

fn main() -> anyhow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let args = Args::parse();
    let cfg: Config = match &args.config {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            toml::from_str(&text).with_context(|| format!("parsing {}", p.display()))?
        }
        None => Config::default(),
    };
    let listen = args
        .listen
        .clone()
        .or(cfg.listen.clone())
        .unwrap_or_else(|| "0.0.0.0:4789".into());
    let listen = control::parse_remote(&listen).map_err(|e| anyhow::anyhow!("listen: {e}"))?;
    let socket = args
        .socket
        .clone()
        .or(cfg.socket.clone())
        .unwrap_or_else(|| "/run/vnetd.sock".into());
    // A socket file left by a daemon that died is replaced; one a live daemon answers on is
    // not taken from it (it would go on forwarding with no way to control it). Checked
    // before anything is created, so that this is the error reported.
    if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
        bail!(
            "another vnetd listens on {}: give this one its own socket (-s)",
            socket.display()
        );
    }

    let udp = std::net::UdpSocket::bind(listen).with_context(|| format!("binding UDP {listen}"))?;
    udp.set_nonblocking(true)?;
    if !sys::enable_udp_gro(&udp) {
        log::warn!("UDP GRO unavailable: receiving datagram by datagram");
    }
    let fd = udp.as_raw_fd();
    sys::set_buf(fd, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, 8 << 20);
    sys::set_buf(fd, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, 8 << 20);

    let rt = args.rt_priority.or(cfg.rt_priority);
    let mut spin_us = args.spin_us.or(cfg.spin_us).unwrap_or(DEFAULT_SPIN_US);
    if rt.is_some() && spin_us > 0 {
        // A SCHED_FIFO thread's sched_yield only yields to other real-time threads, so a
        // spinning real-time worker would keep ordinary tasks (the applications) off its CPU.
        log::warn!("--spin-us is ignored with --rt-priority");
        spin_us = 0;
    }
    let fast = match args.offload.or(cfg.offload).unwrap_or_default() {
        Offload::Off => None,
        Offload::On => {
            Some(fastpath::FastPath::new(listen).context("the kernel fast path (--offload on)")?)
        }
        Offload::Auto => match fastpath::FastPath::new(listen) {
            Ok(f) => Some(f),
            Err(e) => {
                log::warn!("no kernel fast path, forwarding in user space: {e}");
                None
            }
        },
    };
    let sh = Arc::new(dataplane::Shared {
        tables: Mutex::new(dataplane::Tables::default()),
        udp,
        malformed: AtomicU64::new(0),
        unknown_peer: AtomicU64::new(0),
        stats: dataplane::Stats::default(),
        verify_all: args.verify_all || cfg.verify_all,
        gso_ok: AtomicBool::new(true),
        stop: AtomicBool::new(false),
        generation: AtomicU64::new(0),
        wake: sys::eventfd().context("eventfd")?,
        spin: std::time::Duration::from_micros(spin_us),
        fast,
    });

    let mut ops: Vec<Op> = Vec::new();
    ops.extend(cfg.interface.into_iter().map(Op::AddInterface));
    ops.extend(cfg.bridge.into_iter().map(Op::AddBridge));
    ops.extend(cfg.link.into_iter().map(Op::AddLink));
    ops.push(Op::SetLearning { on: cfg.learning });
    ops.extend(cfg.route.into_iter().map(Op::AddRoute));
    let r = control::apply(&sh, &ops);
    if !r.ok {
        bail!("config: {}", r.error.unwrap_or_default());
    }

    let _ = std::fs::remove_file(&socket);
    // The control socket rewires tenants' networks: only its owner may connect, whatever
    // umask the daemon was started with. Set through the umask, so that it is never open
    // to others, not even between bind and a chmod; no other thread runs yet.
    // SAFETY: umask has no preconditions; it is put back right after.
    let old_mask = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(&socket);
    // SAFETY: umask takes no pointer and cannot fail; this puts back the mask saved above.
    unsafe { libc::umask(old_mask) };
    let listener = bound.with_context(|| format!("binding control socket {}", socket.display()))?;
    let worker_sh = sh.clone();
    std::thread::Builder::new()
        .name("vnet-worker".into())
        .spawn(move || {
            if let Some(p) = rt {
                if let Err(e) = sys::set_fifo(p) {
                    log::warn!("cannot use SCHED_FIFO priority {p}: {e}");
                }
            }
            dataplane::worker(worker_sh)
        })?;
    log::info!(
        "vnetd listening on udp {listen}, control {}",
        socket.display()
    );
    control::serve(sh, listener);
    Ok(())
}
