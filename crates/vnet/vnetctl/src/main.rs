//! `vnetctl`: command-line client for the vnetd control socket.
//!
//! Every change is sent as one atomic batch; `batch FILE` sends a JSON array of ops (or
//! `-` for stdin) so that several changes apply together.

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::path::PathBuf;
use vnet_api::{call, BridgeDef, InterfaceDef, LinkDef, Op, Request, Response, RouteDef, State};

/// Control a running vnetd.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Control socket of the daemon.
    #[arg(short, long, default_value = "/run/vnetd.sock")]
    socket: PathBuf,
    /// Print raw JSON responses.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Add a TAP interface.
    AddInterface {
        /// Endpoint name.
        name: String,
        /// NIC MAC (default: the TAP's).
        #[arg(long)]
        mac: Option<String>,
        /// TAP device name (default: NAME).
        #[arg(long)]
        tap: Option<String>,
        /// TAP MTU (default 1450).
        #[arg(long)]
        mtu: Option<u32>,
    },
    /// Add a VXLAN link to a remote vnetd or kernel VXLAN endpoint.
    AddLink {
        /// Endpoint name.
        name: String,
        /// Remote IP or IP:PORT.
        #[arg(long)]
        remote: String,
        /// VXLAN network identifier.
        #[arg(long)]
        vni: u32,
    },
    /// Add a direct bridge on a host NIC.
    AddBridge {
        /// Endpoint name.
        name: String,
        /// Host NIC.
        #[arg(long)]
        device: String,
    },
    /// Delete an interface, link or bridge (with its routes).
    Delete {
        /// Endpoint name or id.
        name: String,
    },
    /// Add a route.
    AddRoute {
        /// Source MAC: any, not-MAC or MAC.
        #[arg(long, default_value = "any")]
        src: String,
        /// Destination MAC: any, not-MAC or MAC.
        #[arg(long, default_value = "any")]
        dst: String,
        /// Ingress endpoint (default any).
        #[arg(long)]
        from: Option<String>,
        /// Destination endpoint.
        #[arg(long)]
        to: String,
        /// Route name.
        #[arg(long)]
        name: Option<String>,
    },
    /// Delete a route by name or id.
    DelRoute {
        /// Name or id.
        route: String,
    },
    /// Turn learning mode on or off.
    Learning {
        /// on or off.
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
    /// Apply a JSON array of ops atomically (FILE or - for stdin).
    Batch {
        /// The file.
        file: String,
    },
    /// Show endpoints, routes and counters.
    Show,
}

/// A line of the endpoint table: its header and its rows share these columns.
macro_rules! endpoint_line {
    ($o:expr, $($col:expr),+ $(,)?) => {
        writeln!(
            $o,
            "{:<4} {:<12} {:<10} {:<40} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7}",
            $($col),+
        )
    };
}

/// A line of the route table: its header and its rows share these columns.
macro_rules! route_line {
    ($o:expr, $($col:expr),+ $(,)?) => {
        writeln!(
            $o,
            "{:<4} {:<12} {:<22} {:<22} {:<10} {:<10} {:>10} {:>12}",
            $($col),+
        )
    };
}

/// Renders the state as tables.
fn render_state(s: &State) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "learning: {}", if s.learning { "on" } else { "off" });
    let _ = endpoint_line!(
        o,
        "id",
        "name",
        "kind",
        "detail",
        "rx_frames",
        "rx_bytes",
        "tx_frames",
        "tx_bytes",
        "spoofed",
        "noroute"
    );
    for e in &s.endpoints {
        let c = &e.counters;
        let _ = endpoint_line!(
            o,
            e.id,
            e.name,
            e.kind,
            e.detail,
            c.rx_frames,
            c.rx_bytes,
            c.tx_frames,
            c.tx_bytes,
            c.drop_spoofed,
            c.drop_no_route
        );
    }
    let _ = writeln!(o);
    let _ = route_line!(o, "id", "name", "src", "dst", "from", "to", "frames", "bytes");
    for r in &s.routes {
        let name = r.name.clone().unwrap_or_else(|| {
            if r.learned {
                "(learned)".into()
            } else {
                "-".into()
            }
        });
        let _ = route_line!(o, r.id, name, r.src, r.dst, r.from, r.to, r.frames, r.bytes);
    }
    let g = &s.global;
    let _ = writeln!(
        o,
        "\nmalformed {} unknown-peer {} cache: hits {} misses {} invalidated {} entries {}",
        g.malformed,
        g.unknown_peer,
        g.cache_hits,
        g.cache_misses,
        g.cache_invalidated,
        g.cache_entries
    );
    let _ = writeln!(
        o,
        "rx: datagrams {} vxlan packets {} coalesced frames {}; tx: tso frames {} udp messages {}",
        g.rx_datagrams, g.rx_packets, g.rx_coalesced_frames, g.tx_tso_frames, g.tx_messages
    );
    if g.fast_path {
        let _ = writeln!(o, "kernel fast path: on, {} flows", g.offloaded_flows);
    } else {
        let _ = writeln!(o, "kernel fast path: off");
    }
    o
}

/// Writes to stdout; a closed pipe (`vnetctl show | head`) is not an error.
fn out(text: &str) -> anyhow::Result<()> {
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let op = match args.cmd {
        Cmd::Show => None,
        Cmd::AddInterface {
            name,
            mac,
            tap,
            mtu,
        } => Some(vec![Op::AddInterface(InterfaceDef {
            name,
            mac,
            tap,
            mtu,
        })]),
        Cmd::AddLink { name, remote, vni } => {
            Some(vec![Op::AddLink(LinkDef { name, remote, vni })])
        }
        Cmd::AddBridge { name, device } => Some(vec![Op::AddBridge(BridgeDef { name, device })]),
        Cmd::Delete { name } => Some(vec![Op::Delete { name }]),
        Cmd::AddRoute {
            src,
            dst,
            from,
            to,
            name,
        } => Some(vec![Op::AddRoute(RouteDef {
            name,
            src,
            dst,
            from,
            to,
        })]),
        Cmd::DelRoute { route } => Some(vec![Op::DelRoute { route }]),
        Cmd::Learning { state } => Some(vec![Op::SetLearning { on: state == "on" }]),
        Cmd::Batch { file } => {
            let mut text = String::new();
            if file == "-" {
                std::io::stdin().read_to_string(&mut text)?;
            } else {
                text = std::fs::read_to_string(&file).with_context(|| format!("reading {file}"))?;
            }
            Some(
                serde_json::from_str::<Vec<Op>>(&text)
                    .with_context(|| format!("parsing ops in {file}"))?,
            )
        }
    };
    let req = match op {
        Some(ops) => Request::Apply { ops },
        None => Request::Show,
    };
    let resp: Response = call(&args.socket, &req)?;
    if args.json {
        out(&(serde_json::to_string_pretty(&resp)? + "\n"))?;
    } else if let Some(s) = &resp.state {
        out(&render_state(s))?;
    } else if resp.ok && !resp.route_ids.is_empty() {
        let ids: Vec<String> = resp.route_ids.iter().map(u64::to_string).collect();
        out(&format!("route ids: {}\n", ids.join(" ")))?;
    }
    if !resp.ok {
        bail!("{}", resp.error.unwrap_or_else(|| "request failed".into()));
    }
    Ok(())
}
