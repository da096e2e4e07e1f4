//! Wormhole's API description language and its code generators.
//!
//! An accelerator API is described once (see `crates/wormhole/opencl-api/
//! opencl.api` for the grammar). From that one description this crate
//! generates, as Rust source for `build.rs` scripts:
//!
//! * [`gen_common`]: function ids and the handle-bearing info parameters,
//!   shared by both sides;
//! * [`gen_client`]: `extern "C"` stubs that marshal a call into a frame and
//!   unmarshal the reply, plus the ICD dispatch table;
//! * [`gen_server`]: a decoder per function that validates every argument,
//!   calls the real library and encodes the outputs, plus the `dispatch`
//!   switch and the `extern "C"` declarations of the real library.
//!
//! The generated code calls a small runtime on each side (`Call`/`Reply` on
//! the client, `Tenant` on the server) and, for arguments marked `custom`,
//! hand-written modules named after the custom kind.

mod generate;
mod parse;

pub use generate::{
    fingerprint, gen_client, gen_common, gen_exports, gen_forward_table, gen_forwarders,
    gen_server, gen_version_script,
};
pub use parse::parse;

use thiserror::Error;

/// A parse error, with the line it was found on.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("line {line}: {msg}")]
pub struct ParseError {
    pub line: usize,
    pub msg: String,
}

/// A described API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Api {
    pub funcs: Vec<Func>,
    pub dispatch: Vec<Slot>,
    /// The API's own settings (`api { ... }`); OpenCL's when absent.
    pub settings: Settings,
}

/// What differs between described APIs: their handle kinds, status names,
/// function-id range and how the server reaches the real library. The
/// defaults are OpenCL's, so a description without an `api { }` block
/// generates exactly what it did before the block existed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Handle kinds, in id order.
    pub kinds: Vec<String>,
    /// The status constant for success, as the generated code names it.
    pub success: String,
    /// The status a function not forwarded (or refused) returns.
    pub unsupported: String,
    /// A list of handles longer or shorter than its count says (needed
    /// only by descriptions with handle lists).
    pub invalid_value: Option<String>,
    /// A fault in an `event_wait_list` (needed only by descriptions with
    /// one).
    pub invalid_wait_list: Option<String>,
    /// The id of the first function: APIs one server exports side by side
    /// need disjoint ranges.
    pub first_id: u32,
    /// The server opens the real library at run time (`load dlopen`), so it
    /// builds and runs where the library is missing, rather than linking it.
    pub dlopen: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            kinds: KINDS.iter().map(|k| k.to_string()).collect(),
            success: "CL_SUCCESS".into(),
            unsupported: "CL_INVALID_OPERATION".into(),
            invalid_value: Some("CL_INVALID_VALUE".into()),
            invalid_wait_list: Some("CL_INVALID_EVENT_WAIT_LIST".into()),
            first_id: 0,
            dlopen: false,
        }
    }
}

/// One entry of the ICD dispatch table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// A described function.
    Func(String),
    /// Not forwarded: what the C function returns.
    Unsupported(String, StubRet),
    /// Implemented by hand on the client only.
    Local(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StubRet {
    Int,
    /// Returns NULL; `Some(n)`: and sets `*errcode_ret`, its `n`th argument
    /// (counting from 1), to the status a function not forwarded returns.
    Ptr(Option<u8>),
    Void,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Func {
    pub name: String,
    /// Position in the description: the function id on the wire.
    pub id: u32,
    pub args: Vec<Arg>,
    pub ret: Ret,
    pub attrs: Attrs,
}

/// When a call leaves its queue with nothing to run (see [`Attrs::drains`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drains {
    /// If the queue executes its commands in order.
    InOrder,
    /// Whatever the queue's order (clFinish).
    Always,
    /// `drains=events`: a wait for the event of the last command sent, on an
    /// in-order queue, with nothing sent in between, drains that queue.
    Events,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attrs {
    pub is_async: bool,
    /// With `is_async`: wake the server now (clFlush) rather than leave the
    /// call in the ring until the next synchronisation point.
    pub wake: bool,
    /// `wake-if=EXPR`: async, and the client wakes the server when this Rust
    /// expression (a call, evaluated before the call is posted) is true.
    pub wake_if: Option<String>,
    /// Reports the failure of an earlier deferred call if its own succeeds.
    pub syncpoint: bool,
    pub retain: Option<String>,
    pub release: Option<String>,
    pub client_override: bool,
    pub server_override: bool,
    pub manual: bool,
    /// `check=name(args)`: server-side checks run after decoding and before
    /// the library is called (each an `unsafe` Rust call over the decoded
    /// `v_NAME`s returning `Result<_, i32>`), for what the library itself
    /// does not check.
    pub checks: Vec<String>,
    /// `writes=ARG`: the device memory the call may change is what these
    /// arguments point to, and nothing else (a library routine's outputs).
    /// Without it a library call may change any of the tenant's memory,
    /// as far as delay storing knows. The server's decoder tells the tenant
    /// (`t.wrote(ptr)`) after the call.
    pub writes: Vec<String>,
    pub unsupported: bool,
    /// Answered by the client alone (`client-only`): never forwarded, the
    /// client's `overrides::NAME` implements it.
    pub client_only: bool,
    /// `cached` or `cached=except(P, ...)`: an info query whose answers do
    /// not change while its object lives, except for the listed parameters.
    /// The client keeps each answer with the object and asks once.
    pub cached: Option<Vec<u32>>,
    /// `drains` / `drains=always`: once the call has succeeded synchronously,
    /// the queue it names first has run every command it was given (with
    /// `drains`, when that queue executes in order), so a clFinish right
    /// after it has nothing to wait for and is answered by the client.
    pub drains: Option<Drains>,
    /// `ptds` / `ptsz`: CUDA's runtime also exports the function as
    /// NAME_ptds or NAME_ptsz, which code built with `--default-stream
    /// per-thread` calls. A `_ptsz` variant passes a NULL stream argument
    /// on as `cudaStreamPerThread`; a `_ptds` one is the function itself.
    pub per_thread: Option<PerThread>,
}

/// A per-thread default stream variant (see [`Attrs::per_thread`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerThread {
    Ptds,
    Ptsz,
}

impl PerThread {
    pub fn suffix(self) -> &'static str {
        match self {
            PerThread::Ptds => "_ptds",
            PerThread::Ptsz => "_ptsz",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    pub name: String,
    pub ty: Ty,
    /// `server=EXPR`: what the server passes to the library instead of the
    /// client's value (a Rust expression over the decoded `v_NAME`s), for
    /// arguments whose meaning cannot cross the boundary unchanged.
    pub server: Option<String>,
    /// `shape=EXPR`: what a scalar of an async call adds to the call's shape
    /// instead of its value (a Rust expression over the client's
    /// arguments): the classes of value that fail alike.
    pub shape: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    U32,
    I32,
    U64,
    Usize,
    Bool,
    Bitfield,
    /// Passed by value as the C types `long long`, `float`, `double`
    /// (cuBLAS strides, cuRAND means and deviations).
    I64,
    F32,
    F64,
}

/// A buffer size: an argument's value times a constant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Size {
    pub arg: String,
    pub mult: u64,
}

impl Size {
    /// A size written as a number rather than an argument's name.
    pub fn is_const(&self) -> bool {
        self.arg.chars().all(|c| c.is_ascii_digit())
    }
}

/// What an info parameter's value holds, when it holds handles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InfoHandle {
    One(String),
    Array(String),
    /// Translated by hand (`custom_info` on each side).
    Custom,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ty {
    Scalar(Scalar),
    Handle {
        kind: String,
        /// Declared `KIND?`: NULL (id 0) is a valid value.
        optional: bool,
    },
    HandleArray {
        kind: String,
        count: String,
    },
    InBytes {
        size: Size,
    },
    OutBytes {
        size: Size,
    },
    OutInfo {
        size: Size,
        handles: Vec<(u32, InfoHandle)>,
    },
    OutScalar(Scalar),
    OutNew {
        kind: String,
    },
    OutHandles {
        kind: String,
        count: String,
    },
    Errcode,
    Str,
    Callback {
        kind: String,
        userdata: String,
    },
    UserData,
    Custom {
        name: String,
        ctype: String,
        deps: Vec<String>,
    },
    /// A device address (`devptr` or `devptr[SIZE]`): a pointer value the
    /// application got from the server, which the client checks against its
    /// allocation tracker and the server against the tenant's allocations
    /// (the whole `[ptr, ptr + SIZE)` range when a size is given).
    DevPtr {
        size: Option<Size>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ret {
    Status,
    New(String),
    Custom { name: String, ctype: String },
}

/// The handle kinds every API description may use, in id order.
pub const KINDS: &[&str] = &[
    "platform", "device", "context", "queue", "mem", "program", "kernel", "event", "sampler",
];

impl Scalar {
    pub fn rust(self) -> &'static str {
        match self {
            Scalar::U32 | Scalar::Bool => "u32",
            Scalar::I32 => "i32",
            Scalar::U64 | Scalar::Bitfield => "u64",
            Scalar::Usize => "usize",
            Scalar::I64 => "i64",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
        }
    }
}

impl Ty {
    /// The Rust spelling of the C type this argument has in the C API.
    pub fn ctype(&self) -> String {
        match self {
            Ty::Scalar(s) => s.rust().into(),
            Ty::Handle { .. } | Ty::Callback { .. } | Ty::UserData => "*mut c_void".into(),
            Ty::HandleArray { .. } => "*const *mut c_void".into(),
            Ty::InBytes { .. } => "*const c_void".into(),
            Ty::OutBytes { .. } | Ty::OutInfo { .. } => "*mut c_void".into(),
            Ty::OutScalar(s) => format!("*mut {}", s.rust()),
            Ty::OutNew { .. } | Ty::OutHandles { .. } => "*mut *mut c_void".into(),
            Ty::Errcode => "*mut i32".into(),
            Ty::Str => "*const c_char".into(),
            Ty::Custom { ctype, .. } => ctype.clone(),
            Ty::DevPtr { .. } => "*mut c_void".into(),
        }
    }
}

impl Ret {
    pub fn ctype(&self) -> String {
        match self {
            Ret::Status => "i32".into(),
            Ret::New(_) => "*mut c_void".into(),
            // A C function returning nothing (`custom NAME(void)`).
            Ret::Custom { ctype, .. } if ctype == "void" => "()".into(),
            Ret::Custom { ctype, .. } => ctype.clone(),
        }
    }
}

/// `platform` -> `Platform`, the name of the kind's enum variant.
pub fn kind_variant(kind: &str) -> String {
    let mut c = kind.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The build script of a stand-in library that forwards to a client
/// elsewhere (see [`gen_forwarders`]): parses `src`, writes
/// `OUT_DIR/forward.rs` (the forwarders and their exports, versioned
/// `soname` as NVIDIA's library versions its symbols) and the version
/// script, and tells cargo to link with that soname.
///
/// # Panics
/// On a description that does not parse or an unwritable `OUT_DIR`: this is
/// for build scripts, where a panic is the error report.
pub fn build_forwarding_stand_in(name: &str, src: &str, soname: &str) {
    build_stand_in(name, src, soname, "forward.rs", |api| {
        gen_forwarders(api, soname)
    });
}

/// The build script of a stand-in library that holds its client (crate
/// `client`): writes `OUT_DIR/exports.rs` (every described function under
/// its native name, versioned `soname`, see [`gen_exports`]) and the
/// version script, and links with that soname.
///
/// # Panics
/// As for [`build_forwarding_stand_in`].
pub fn build_client_stand_in(name: &str, src: &str, client: &str, soname: &str) {
    build_stand_in(name, src, soname, "exports.rs", |api| {
        gen_exports(api, client, soname)
    });
}

fn build_stand_in(
    name: &str,
    src: &str,
    soname: &str,
    file: &str,
    gen: impl FnOnce(&Api) -> String,
) {
    let api = match parse(src) {
        Ok(api) => api,
        Err(e) => panic!("{name}: {e}"),
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join(file), gen(&api)).expect("write");
    let script = out.join("version.map");
    std::fs::write(&script, gen_version_script(soname)).expect("write");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={},-soname,{soname}",
        script.display()
    );
}
