//! Server configuration: a TOML file, overridden by command-line flags.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("reading {path}: {err}")]
    Read { path: PathBuf, err: std::io::Error },
    #[error("parsing {path}: {err}")]
    Parse { path: PathBuf, err: toml::de::Error },
    #[error("invalid setting: {0}")]
    Invalid(String),
}

/// How a tenant's server thread waits for the next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HandoffMode {
    /// Sleep on a futex: no CPU while idle (the default).
    #[default]
    Futex,
    /// Spin for a bounded number of polls, then sleep on the futex.
    Spin,
    /// Futex, with the tenant's thread following the caller onto its CPU.
    SameCore,
}

/// Who publishes the reply of a blocking wait over shared memory: the
/// library's worker from the completion callback (`on`), or the tenant's
/// thread once the wait returns (`off`); `auto`: the worker where idle
/// CPUs halt at once (`halting.rs` says why).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HeldReplies {
    #[default]
    Auto,
    On,
    Off,
}

/// Everything the server can be told.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Unix socket on which clients connect.
    pub socket: PathBuf,
    /// Who may connect to it: the socket file's mode (octal, in a string:
    /// "0660"; connecting needs write permission) and group. By default
    /// only the server's user.
    #[serde(deserialize_with = "mode")]
    pub socket_mode: u32,
    pub socket_group: Option<String>,
    /// Optional TCP address (host:port) for clients on other hosts.
    pub tcp: Option<String>,
    /// A file holding a secret that TCP clients must prove they know
    /// (their `WORMHOLE_TOKEN_FILE`); without it any client that can reach
    /// the port is served.
    pub tcp_token_file: Option<PathBuf>,
    /// Seconds after which a TCP client that went silent (its host down,
    /// the network cut) is given up and its tenant ends, freeing what it
    /// held; 0 keeps the kernel's defaults (no keepalive).
    pub tcp_dead_peer: u64,
    pub handoff: HandoffMode,
    /// Most polls before sleeping, in spin mode (the budget adapts below it).
    pub spin_polls: u32,
    pub held_replies: HeldReplies,
    /// Export only platforms whose name contains one of these (all if empty).
    pub platforms: Vec<String>,
    /// Largest buffer one request may make the server allocate, in bytes.
    pub max_alloc: u64,
    /// Shared-memory ring sizes, in bytes (powers of two).
    pub request_ring: usize,
    pub reply_ring: usize,
    /// Export OpenCL (the platforms above).
    pub opencl: bool,
    /// Export the CUDA runtime API.
    pub cuda: bool,
    /// The libcudart to forward to (default: the loader's libcudart.so.13,
    /// then .12). Absent or unloadable, CUDA calls answer as a machine
    /// without the driver does.
    pub cuda_runtime: Option<PathBuf>,
    /// Bytes of address space each tenant shares with its client for the
    /// buffers of CPU devices, so that their transfers are one copy as
    /// natively (memory is used only as buffers fill it); 0 turns it off.
    pub shared_buffers: u64,
    /// Most clients served at once (one tenant process each); more are
    /// told the server is full and let go. 0: no limit.
    pub max_tenants: usize,
    /// Most bytes of memory objects (OpenCL buffers and images, CUDA
    /// allocations) and program sources and binaries one tenant may hold
    /// at once; devices are described to it as no larger. "device" (the
    /// default): the largest global memory of the devices it exports; an
    /// integer, or a size such as "2 GiB"; 0: no limit.
    #[serde(deserialize_with = "tenant_memory")]
    pub tenant_memory: TenantMemory,
    /// Confine each tenant (namespaces, its own uid when the server is
    /// root, a root of its own, seccomp, Landlock, cgroup limits; see
    /// docs/wormhole-security.md). Off: tenants are only non-dumpable.
    pub confine: bool,
    /// Uids for tenants when the server runs as root, "FIRST-LAST" (one
    /// each; default 1879048192-1879113727).
    pub tenant_uids: Option<String>,
    /// Paths tenants may read besides the system's (/usr, /etc, /opt,
    /// ...): drivers or libraries installed elsewhere. The directories of
    /// LD_LIBRARY_PATH, OCL_ICD_VENDORS and cuda_runtime are added.
    pub tenant_paths: Vec<PathBuf>,
    /// Memory all of one tenant's processes may use (a cgroup's limit, else
    /// RLIMIT_DATA): a size, or 0 for none. Default: tenant_memory plus 2
    /// GiB when that is a size, else three quarters of the host's memory.
    #[serde(deserialize_with = "opt_size")]
    pub tenant_process_memory: Option<u64>,
    /// Most threads and processes one tenant may have (0: no limit).
    pub tenant_tasks: u64,
    /// Let one client user's tenants share compiled kernels (a directory
    /// per user under kernel_cache_dir); off, each tenant compiles alone.
    pub shared_kernel_cache: bool,
    /// Where those caches live (default /var/cache/wormhole/kernels for
    /// root, else $XDG_CACHE_HOME/wormhole/kernels).
    pub kernel_cache_dir: Option<PathBuf>,
    /// Delay storing (docs/delay-storing.md): the memory one device lends
    /// all tenants together, in bytes or a size (0: the device's own, as its
    /// library reports it). Set, or with `oversubscribe`, the listener keeps
    /// a ledger of it; otherwise tenants are not counted against each other.
    #[serde(deserialize_with = "size")]
    pub device_memory: u64,
    /// Whether tenants may together hold more than `device_memory`: idle
    /// tenants' objects are then evicted to a host store and restored when
    /// used (`residency`). Off, a creation past it fails as out of memory.
    pub oversubscribe: bool,
    /// How objects move once tenants want more than the device holds.
    pub residency: ResidencyMode,
    /// Whose memory the ledger counts: OpenCL's device (buffers and
    /// images) or CUDA's (allocations, each a range of the device's
    /// address space whose memory can go and come back). One ledger per
    /// server: a server per device.
    pub residency_api: ResidencyApi,
    /// Where evicted objects go: a directory on local disk (a file per
    /// tenant, opened by the listener, unlinked from the start); none: a
    /// memory file of the tenant's (which keeps the device's budget, not
    /// the host's RAM).
    pub store_dir: Option<PathBuf>,
    /// Most bytes one tenant may keep in its store (0: its memory quota,
    /// all it can hold).
    #[serde(deserialize_with = "size")]
    pub store_size: u64,
}

/// How a device's memory is shared once tenants want more than it holds
/// (`oversubscribe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ResidencyMode {
    /// Delay storing: an idle tenant's objects are saved only when another
    /// needs the room, and only if changed since their last save; they are
    /// restored only when used again.
    #[default]
    Delay,
    /// The baseline: at each switch, every object of the previous tenant is
    /// saved and freed, and every object of the next restored.
    Eager,
    /// Nothing moves: the device's memory is a hard limit.
    Off,
}

/// The API whose device memory delay storing shares (`residency_api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ResidencyApi {
    #[default]
    Opencl,
    Cuda,
}

/// Parses a size: bytes, or a number with a unit ("512M", "2 GiB"; units
/// are powers of 1024, as memory sizes are).
pub fn parse_size(s: &str) -> Result<u64, String> {
    parse_size::Config::new()
        .with_binary()
        .parse_size(s)
        .map_err(|e| format!("{s:?} is not a size ({e})"))
}

/// How much memory one tenant may hold (`tenant_memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TenantMemory {
    /// As much as the largest device the tenant exports has.
    #[default]
    Device,
    /// At most this many bytes; 0: no limit.
    Bytes(u64),
}

impl std::fmt::Display for TenantMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TenantMemory::Device => f.write_str("device"),
            TenantMemory::Bytes(n) => write!(f, "{n}"),
        }
    }
}

/// Parses `tenant_memory`: "device", or a size as [`parse_size`] reads it.
pub fn parse_tenant_memory(s: &str) -> Result<TenantMemory, String> {
    if s.trim().eq_ignore_ascii_case("device") {
        return Ok(TenantMemory::Device);
    }
    parse_size(s)
        .map(TenantMemory::Bytes)
        .map_err(|e| format!("{e}, nor \"device\""))
}

/// Parses a file mode written in octal ("0660", "660", "0o660").
pub fn parse_mode(s: &str) -> Result<u32, String> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|&m| m <= 0o777)
        .ok_or_else(|| format!("{s:?} is not a file mode (octal digits, at most 0777)"))
}

fn mode<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    // A string, not a TOML integer: 660 would silently be decimal.
    parse_mode(&String::deserialize(d)?).map_err(serde::de::Error::custom)
}

fn size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    opt_size(d).map(|s| s.unwrap_or(0))
}

/// A size as TOML writes it: a number of bytes, or text (`"4 GiB"`).
#[derive(Deserialize)]
#[serde(untagged)]
enum Size {
    Bytes(u64),
    Text(String),
}

fn opt_size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Size::deserialize(d)? {
        Size::Bytes(n) => Ok(Some(n)),
        Size::Text(s) => parse_size(&s).map(Some).map_err(serde::de::Error::custom),
    }
}

fn tenant_memory<'de, D: serde::Deserializer<'de>>(d: D) -> Result<TenantMemory, D::Error> {
    match Size::deserialize(d)? {
        Size::Bytes(n) => Ok(TenantMemory::Bytes(n)),
        Size::Text(s) => parse_tenant_memory(&s).map_err(serde::de::Error::custom),
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            socket: wormhole_transport::default_socket_path(),
            socket_mode: 0o600,
            socket_group: None,
            tcp: None,
            tcp_token_file: None,
            tcp_dead_peer: wormhole_transport::stream::DEFAULT_DEAD_PEER.as_secs(),
            handoff: HandoffMode::Futex,
            spin_polls: 20_000,
            held_replies: HeldReplies::Auto,
            platforms: Vec::new(),
            max_alloc: 4 << 30,
            request_ring: 2 << 20,
            reply_ring: 2 << 20,
            opencl: true,
            cuda: true,
            cuda_runtime: None,
            shared_buffers: 64 << 30,
            max_tenants: 256,
            tenant_memory: TenantMemory::Device,
            confine: true,
            tenant_uids: None,
            tenant_paths: Vec::new(),
            tenant_process_memory: None,
            tenant_tasks: 4096,
            shared_kernel_cache: true,
            kernel_cache_dir: None,
            device_memory: 0,
            oversubscribe: false,
            residency: ResidencyMode::Delay,
            residency_api: ResidencyApi::Opencl,
            store_dir: None,
            store_size: 0,
        }
    }
}

/// A file's text; `/proc/self/fd/N` is read through descriptor N itself
/// (from its start), which a tenant holds for a file whose path its uid
/// may not open again.
fn read_text(path: &Path) -> std::io::Result<String> {
    use std::io::{Read, Seek};
    use std::os::fd::{AsFd, OwnedFd};
    let fd = path
        .strip_prefix("/proc/self/fd")
        .ok()
        .and_then(|n| n.to_str()?.parse::<i32>().ok());
    let Some(n) = fd else {
        return std::fs::read_to_string(path);
    };
    // SAFETY: borrowed only to duplicate it; a descriptor that is not open
    // makes the duplication fail.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(n) };
    let own: OwnedFd = borrowed.as_fd().try_clone_to_owned()?;
    let mut f = std::fs::File::from(own);
    f.rewind()?;
    let mut text = String::new();
    f.read_to_string(&mut text)?;
    Ok(text)
}

impl Config {
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = read_text(path).map_err(|err| ConfigError::Read {
            path: path.into(),
            err,
        })?;
        let c: Config = toml::from_str(&text).map_err(|err| ConfigError::Parse {
            path: path.into(),
            err,
        })?;
        c.validate()?;
        Ok(c)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(r) = &self.tenant_uids {
            r.parse::<wormhole_confine::UidRange>()
                .map_err(|e| ConfigError::Invalid(format!("tenant_uids: {e}")))?;
        }
        for (name, v) in [
            ("request_ring", self.request_ring),
            ("reply_ring", self.reply_ring),
        ] {
            if !v.is_power_of_two() || v < 4096 {
                return Err(ConfigError::Invalid(format!(
                    "{name} must be a power of two of at least 4096, not {v}"
                )));
            }
        }
        // A tenant's word on the device's size is believed only before it
        // ran anything of its client's; a CUDA tenant would have to start
        // CUDA (a context of hundreds of MiB) at once to give it, so for
        // CUDA the budget is the configuration's.
        if self.ledger() && self.residency_api == ResidencyApi::Cuda && self.device_memory == 0 {
            return Err(ConfigError::Invalid(
                "residency_api \"cuda\" needs device_memory (the GPU's memory, less about 520 MiB for each tenant's context)"
                    .into(),
            ));
        }
        if self.oversubscribe && self.residency == ResidencyMode::Off {
            return Err(ConfigError::Invalid(
                "oversubscribe needs residency \"delay\" or \"eager\" (with \"off\" nothing could make room)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Whether the listener keeps a ledger of each device's memory.
    pub fn ledger(&self) -> bool {
        self.device_memory > 0 || self.oversubscribe
    }

    pub fn layout(&self) -> wormhole_transport::shm::Layout {
        wormhole_transport::shm::Layout {
            request: self.request_ring,
            reply: self.reply_ring,
            notify: 64 << 10,
        }
    }

    /// Whether blocking waits' replies are published by the library's
    /// worker (`held_replies`, with `auto` decided for this machine).
    pub fn hold_replies(&self) -> bool {
        match self.held_replies {
            HeldReplies::On => true,
            HeldReplies::Off => false,
            HeldReplies::Auto => crate::halting::idle_cpus_halt_at_once(),
        }
    }

    pub fn handoff(&self) -> wormhole_transport::Handoff {
        match self.handoff {
            HandoffMode::Futex => wormhole_transport::Handoff::Futex,
            HandoffMode::Spin => wormhole_transport::Handoff::Spin {
                polls: self.spin_polls,
            },
            HandoffMode::SameCore => wormhole_transport::Handoff::SameCore,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_file_and_rejects_mistakes() {
        let dir = std::env::temp_dir().join(format!("wh-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("ok.toml");
        std::fs::write(
            &p,
            "socket = \"/tmp/x.sock\"\nhandoff = \"spin\"\nplatforms = [\"Portable\"]\ncuda = false\n",
        )
        .expect("write");
        let c = Config::load(&p).expect("load");
        assert_eq!(c.handoff, HandoffMode::Spin);
        assert_eq!(c.platforms, vec!["Portable".to_string()]);
        assert!(c.opencl && !c.cuda);
        assert_eq!(c.tenant_memory, TenantMemory::Device, "the device's size");
        std::fs::write(&p, "tenant_memory = \"2 GiB\"\n").expect("write");
        assert_eq!(
            Config::load(&p).expect("load").tenant_memory,
            TenantMemory::Bytes(2 << 30)
        );
        std::fs::write(&p, "tenant_memory = 4096\n").expect("write");
        assert_eq!(
            Config::load(&p).expect("load").tenant_memory,
            TenantMemory::Bytes(4096)
        );
        std::fs::write(&p, "tenant_memory = 0\n").expect("write");
        assert_eq!(
            Config::load(&p).expect("load").tenant_memory,
            TenantMemory::Bytes(0),
            "no limit"
        );
        std::fs::write(&p, "tenant_memory = \"device\"\n").expect("write");
        assert_eq!(
            Config::load(&p).expect("load").tenant_memory,
            TenantMemory::Device
        );
        // The flag's form, which tenants are started with, reads back.
        for m in [
            TenantMemory::Device,
            TenantMemory::Bytes(0),
            TenantMemory::Bytes(10 << 20),
        ] {
            assert_eq!(parse_tenant_memory(&m.to_string()), Ok(m));
        }
        assert_eq!(
            parse_tenant_memory("10M"),
            Ok(TenantMemory::Bytes(10 << 20))
        );
        std::fs::write(&p, "tenant_memory = \"lots\"\n").expect("write");
        assert!(matches!(Config::load(&p), Err(ConfigError::Parse { .. })));
        assert_eq!(c.socket_mode, 0o600, "only the server's user by default");
        std::fs::write(&p, "socket_mode = \"0660\"\nsocket_group = \"wormhole\"\n").expect("write");
        let c = Config::load(&p).expect("load");
        assert_eq!(
            (c.socket_mode, c.socket_group.as_deref()),
            (0o660, Some("wormhole"))
        );
        std::fs::write(&p, "socket_mode = \"0o666\"\n").expect("write");
        assert_eq!(Config::load(&p).expect("load").socket_mode, 0o666);
        for bad in [
            "socket_mode = 0o660\n",
            "socket_mode = \"0990\"\n",
            "socket_mode = \"7777\"\n",
        ] {
            std::fs::write(&p, bad).expect("write");
            assert!(
                matches!(Config::load(&p), Err(ConfigError::Parse { .. })),
                "{bad}"
            );
        }
        std::fs::write(&p, "sockett = 1\n").expect("write");
        assert!(matches!(Config::load(&p), Err(ConfigError::Parse { .. })));
        std::fs::write(&p, "request_ring = 1000\n").expect("write");
        assert!(matches!(Config::load(&p), Err(ConfigError::Invalid(_))));
        assert!(!c.ledger(), "no ledger unless asked");
        std::fs::write(
            &p,
            "device_memory = \"64 MiB\"\noversubscribe = true\nresidency = \"eager\"\nstore_dir = \"/var/tmp\"\n",
        )
        .expect("write");
        let c = Config::load(&p).expect("load");
        assert_eq!(
            (c.device_memory, c.oversubscribe, c.residency),
            (64 << 20, true, ResidencyMode::Eager)
        );
        assert!(c.ledger());
        std::fs::write(&p, "oversubscribe = true\nresidency = \"off\"\n").expect("write");
        assert!(matches!(Config::load(&p), Err(ConfigError::Invalid(_))));
        std::fs::write(&p, "residency = \"lazy\"\n").expect("write");
        assert!(Config::load(&p).is_err());
        std::fs::write(&p, "residency_api = \"cuda\"\noversubscribe = true\n").expect("write");
        assert!(
            matches!(Config::load(&p), Err(ConfigError::Invalid(_))),
            "CUDA's budget must be given"
        );
        std::fs::write(&p, "residency_api = \"cuda\"\n").expect("write");
        assert_eq!(
            Config::load(&p).expect("cuda").residency_api,
            ResidencyApi::Cuda
        );
        std::fs::write(&p, "residency_api = \"vulkan\"\n").expect("write");
        assert!(matches!(Config::load(&p), Err(ConfigError::Parse { .. })));
        std::fs::remove_dir_all(&dir).ok();
    }
}
