//! `wormhole-server`: serve the local accelerators to Wormhole clients.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use wormhole_server::config::{Config, HandoffMode, HeldReplies, ResidencyApi, ResidencyMode};
use wormhole_server::{listen, serve};

#[derive(Parser, Debug)]
#[command(version, about = "Wormhole API-forwarding server (OpenCL and CUDA)")]
struct Cli {
    /// TOML configuration file.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Unix socket to listen on.
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Who may connect to the socket: its mode, in octal (default 0600:
    /// only this user; 0660 with --socket-group: that group too).
    #[arg(long, value_name = "MODE", value_parser = wormhole_server::config::parse_mode)]
    socket_mode: Option<u32>,
    /// The socket's group.
    #[arg(long, value_name = "GROUP")]
    socket_group: Option<String>,
    /// Also listen on this TCP address (e.g. 127.0.0.1:7700).
    #[arg(long)]
    tcp: Option<String>,
    /// Serve only TCP clients that prove they know the secret in this file
    /// (mode 600; clients name theirs in WORMHOLE_TOKEN_FILE).
    #[arg(long)]
    tcp_token_file: Option<PathBuf>,
    /// Give up a TCP client that stays unreachable this many seconds
    /// (default 30; 0: the kernel's defaults, no keepalive).
    #[arg(long, value_name = "SECS")]
    tcp_dead_peer: Option<u64>,
    /// How a tenant waits for requests.
    #[arg(long, value_enum)]
    handoff: Option<HandoffMode>,
    /// Who publishes a blocking wait's reply over shared memory: the
    /// library's worker (on), the tenant's thread (off), or auto (the
    /// worker where idle CPUs halt at once).
    #[arg(long, value_enum)]
    held_replies: Option<HeldReplies>,
    /// Do not print the listening banner.
    #[arg(long, short)]
    quiet: bool,
    /// Export only platforms whose name contains this (repeatable).
    #[arg(long = "platform")]
    platforms: Vec<String>,
    /// Do not export OpenCL.
    #[arg(long)]
    no_opencl: bool,
    /// Do not export CUDA.
    #[arg(long)]
    no_cuda: bool,
    /// The libcudart to forward CUDA calls to.
    #[arg(long)]
    cuda_runtime: Option<PathBuf>,
    /// Keep CPU devices' buffers in the tenant's own memory (transfers then
    /// stream through the channel) instead of memory shared with the client.
    #[arg(long)]
    no_shared_buffers: bool,
    /// Serve at most this many clients at once (default 256; 0: no limit);
    /// more are told the server is full.
    #[arg(long, value_name = "N")]
    max_tenants: Option<usize>,
    /// Most memory one tenant may hold in buffers, images, CUDA
    /// allocations and program sources at once (e.g. 2G; units are powers
    /// of 1024; "device", the default: the largest device's; 0: no limit).
    #[arg(long, value_name = "SIZE", value_parser = wormhole_server::config::parse_tenant_memory)]
    tenant_memory: Option<wormhole_server::config::TenantMemory>,
    /// Run tenants without confinement (only non-dumpable): no namespaces,
    /// uid, seccomp, Landlock or cgroup (see docs/wormhole-security.md).
    #[arg(long)]
    no_confine: bool,
    /// Uids for tenants when the server runs as root, one each.
    #[arg(long, value_name = "FIRST-LAST")]
    tenant_uids: Option<String>,
    /// Delay storing: the memory one device lends all tenants together
    /// (e.g. 8G; 0: the device's own). Tenants are counted against it.
    #[arg(long, value_name = "SIZE", value_parser = wormhole_server::config::parse_size)]
    device_memory: Option<u64>,
    /// Let tenants together hold more than the device: idle tenants'
    /// objects are evicted to a host store and restored when used.
    #[arg(long)]
    oversubscribe: bool,
    /// How objects move when tenants want more than the device holds.
    #[arg(long, value_enum)]
    residency: Option<ResidencyMode>,
    /// Whose memory delay storing shares: OpenCL's device or CUDA's.
    #[arg(long, value_enum, value_name = "API")]
    residency_api: Option<ResidencyApi>,
    /// Keep evicted objects in a file per tenant in this directory (on
    /// local disk, say) instead of memory.
    #[arg(long, value_name = "DIR")]
    store_dir: Option<PathBuf>,
    /// Most bytes one tenant may keep in its store (0: all it can hold).
    #[arg(long, value_name = "SIZE", value_parser = wormhole_server::config::parse_size)]
    store_size: Option<u64>,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Internal: serve one tenant on file descriptor 3.
    #[command(hide = true)]
    Tenant,
    /// List the platforms this server would export, and exit.
    Platforms,
}

fn config(cli: &Cli) -> anyhow::Result<Config> {
    let mut c = match &cli.config {
        Some(p) => Config::load(p)?,
        None => Config::default(),
    };
    // A value given on the command line replaces the file's.
    macro_rules! given {
        ($($field:ident),*) => {$(
            if let Some(v) = &cli.$field {
                c.$field = v.clone();
            }
        )*};
    }
    // Likewise for a setting that is itself optional.
    macro_rules! given_optional {
        ($($field:ident),*) => {$(
            if cli.$field.is_some() {
                c.$field = cli.$field.clone();
            }
        )*};
    }
    given!(
        socket,
        socket_mode,
        tcp_dead_peer,
        handoff,
        held_replies,
        max_tenants,
        tenant_memory,
        device_memory,
        residency,
        residency_api,
        store_size
    );
    given_optional!(
        socket_group,
        tcp,
        tcp_token_file,
        cuda_runtime,
        store_dir,
        tenant_uids
    );
    if !cli.platforms.is_empty() {
        c.platforms = cli.platforms.clone();
    }
    if cli.no_opencl {
        c.opencl = false;
    }
    if cli.no_cuda {
        c.cuda = false;
    }
    if cli.no_shared_buffers {
        c.shared_buffers = 0;
    }
    if cli.oversubscribe {
        c.oversubscribe = true;
    }
    if cli.no_confine {
        c.confine = false;
    }
    c.validate()?;
    Ok(c)
}

/// A choice as its flag spells it, which the tenant's clap parses back.
fn flag_value(v: impl clap::ValueEnum) -> String {
    // Only a variant marked `#[value(skip)]` has no name; none is.
    v.to_possible_value()
        .map(|p| p.get_name().to_owned())
        .unwrap_or_default()
}

/// The flags that carry this configuration to a tenant process.
fn tenant_args(cli: &Cli) -> Vec<String> {
    let mut a = Vec::new();
    if cli.config.is_some() {
        // Opened for the tenant by the listener (see listen::CONFIG_FD): a
        // tenant of another uid may not reach the file by its path.
        a.push(format!("--config=/proc/self/fd/{}", listen::CONFIG_FD));
    }
    if let Some(d) = cli.tcp_dead_peer {
        a.push(format!("--tcp-dead-peer={d}"));
    }
    if let Some(h) = cli.handoff {
        a.push(format!("--handoff={}", flag_value(h)));
    }
    if let Some(h) = cli.held_replies {
        a.push(format!("--held-replies={}", flag_value(h)));
    }
    for p in &cli.platforms {
        a.push(format!("--platform={p}"));
    }
    if cli.no_opencl {
        a.push("--no-opencl".into());
    }
    if cli.no_cuda {
        a.push("--no-cuda".into());
    }
    if let Some(p) = &cli.cuda_runtime {
        a.push(format!("--cuda-runtime={}", p.display()));
    }
    if cli.no_shared_buffers {
        a.push("--no-shared-buffers".into());
    }
    if let Some(n) = cli.tenant_memory {
        a.push(format!("--tenant-memory={n}"));
    }
    if let Some(n) = cli.device_memory {
        a.push(format!("--device-memory={n}"));
    }
    if cli.oversubscribe {
        a.push("--oversubscribe".into());
    }
    if let Some(r) = cli.residency {
        a.push(format!("--residency={}", flag_value(r)));
    }
    if let Some(r) = cli.residency_api {
        a.push(format!("--residency-api={}", flag_value(r)));
    }
    if let Some(d) = &cli.store_dir {
        a.push(format!("--store-dir={}", d.display()));
    }
    if let Some(n) = cli.store_size {
        a.push(format!("--store-size={n}"));
    }
    if cli.no_confine {
        a.push("--no-confine".into());
    }
    a
}

fn main() -> anyhow::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::new().filter_or("WORMHOLE_LOG", "warn")).init();
    let cli = Cli::parse();
    let c = config(&cli)?;
    match cli.cmd {
        Some(Cmd::Tenant) => {
            // First, while this process has one thread and before a byte
            // of the client's is read or a driver loaded.
            let confined = wormhole_confine::enter(&wormhole_server::confinement::policy(&c));
            if confined.missing.is_empty() {
                log::debug!("tenant confined: {confined}");
            } else {
                log::info!("tenant confined: {confined}");
            }
            // Before any thread starts: reports are taken by a thread of
            // their own (the listener's block is inherited across exec).
            if let Err(e) = wormhole_server::report::block_report_signal() {
                log::warn!("no reports on SIGUSR1: {e}");
            }
            // Tenants are started through /proc/self/fd/N (see listen.rs),
            // so the kernel names them "N"; ps and top should say what
            // they are. Threads started from here on inherit the name.
            if let Err(e) = nix::sys::prctl::set_name(c"wormhole-tenant") {
                log::debug!("naming the tenant process: {e}");
            }
            // Before anything can start a child: the descriptors the
            // listener passed for residency are this process's alone.
            wormhole_server::residency::claim_fds(&c);
            // SAFETY: the listener put the connection on fd 3 for us alone.
            let fd = unsafe { OwnedFd::from_raw_fd(listen::TENANT_FD) };
            serve::run_tenant(fd, &c).context("serving tenant")?;
            Ok(())
        }
        Some(Cmd::Platforms) => {
            std::env::set_var(listen::IN_SERVER_ENV, "1");
            for p in wormhole_server::opencl::platforms(&c.platforms) {
                println!("{}", wormhole_server::opencl::platform_name(p));
            }
            Ok(())
        }
        None => {
            // Not dumpable: no process of the same uid (a tenant's kernel
            // run where confinement is partial) may trace or read it.
            if let Err(e) = nix::sys::prctl::set_dumpable(false) {
                log::warn!("making the listener non-dumpable: {e}");
            }
            // Before any thread starts, and inherited by tenants: SIGUSR1
            // asks for reports (see `report`) and must end no process.
            if let Err(e) = wormhole_server::report::block_report_signal() {
                log::warn!("no reports on SIGUSR1: {e}");
            }
            let access = listen::SocketAccess {
                mode: c.socket_mode,
                group: c.socket_group.clone(),
            };
            let unix = listen::bind_unix(&c.socket, &access)?;
            let tcp = match &c.tcp {
                Some(a) => {
                    let l =
                        std::net::TcpListener::bind(a).with_context(|| format!("binding {a}"))?;
                    let token = match &c.tcp_token_file {
                        Some(p) => Some(
                            wormhole_transport::auth::Token::from_file(p)
                                .with_context(|| format!("the TCP token in {}", p.display()))?,
                        ),
                        None => {
                            if !l.local_addr().is_ok_and(|a| a.ip().is_loopback()) {
                                log::warn!(
                                    "listening on tcp {a} without a token: anyone who can reach \
                                     it is served (see tcp_token_file)"
                                );
                            }
                            None
                        }
                    };
                    Some((l, token))
                }
                None => None,
            };
            if !cli.quiet {
                eprintln!(
                    "wormhole-server: listening on {}{}",
                    c.socket.display(),
                    c.tcp
                        .as_ref()
                        .map(|t| format!(" and tcp {t}"))
                        .unwrap_or_default()
                );
            }
            wormhole_server::residency::arbiter::install(&c)?;
            let spawner = listen::Spawner::new(
                tenant_args(&cli),
                cli.config.clone(),
                wormhole_server::confinement::policy(&c),
            )?;
            listen::run(unix, tcp, spawner, c.max_tenants)?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// Every choice a tenant is handed parses back to itself.
    fn round_trips<T: ValueEnum + PartialEq + std::fmt::Debug>() {
        for v in T::value_variants() {
            assert_eq!(T::from_str(&flag_value(v.clone()), false).as_ref(), Ok(v));
        }
    }

    #[test]
    fn choices_reach_the_tenant_as_their_flags_spell_them() {
        round_trips::<HandoffMode>();
        round_trips::<HeldReplies>();
        round_trips::<ResidencyMode>();
        round_trips::<ResidencyApi>();
        assert_eq!(flag_value(HandoffMode::SameCore), "same-core");
        assert_eq!(flag_value(ResidencyMode::Eager), "eager");
    }
}
