//! Code generators, one module per thing generated. Each returns Rust
//! source text for `include!`: what both sides share (`common`), the
//! client's stubs (`client`), the server's decoders and dispatch
//! (`server`), the stand-in libraries' versioned ELF exports (`exports`)
//! and the tables and forwarders that pass a library's calls on to the
//! client in another one (`forwarding`).

use crate::{kind_variant, Api, Func, Size, Ty};

mod client;
mod common;
mod exports;
mod forwarding;
mod server;
#[cfg(test)]
mod tests;

pub use client::gen_client;
pub use common::gen_common;
pub use exports::{gen_exports, gen_version_script};
pub use forwarding::{fingerprint, gen_forward_table, gen_forwarders};
pub use server::gen_server;

const ALLOW: &str = "#[allow(non_snake_case, unused_variables, unused_mut, unused_unsafe, clippy::too_many_arguments, clippy::needless_late_init, clippy::let_and_return, clippy::unnecessary_cast, clippy::redundant_closure_call, clippy::let_unit_value)]";

fn c_params(f: &Func) -> String {
    f.args
        .iter()
        .map(|a| format!("{}: {}", a.name, a.ty.ctype()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A status the description names in its `api` block, or, where it names
/// none, a compile error in the generated code that says which to add.
fn named<'a>(status: &'a Option<String>, setting: &str) -> std::borrow::Cow<'a, str> {
    match status {
        Some(name) => name.into(),
        None => format!("compile_error!(\"the api block names no `{setting}` status\")").into(),
    }
}

fn kind(k: &str) -> String {
    format!("Kind::{}", kind_variant(k))
}

fn size_expr(prefix: &str, s: &Size) -> String {
    if s.is_const() {
        return format!("({}u64).saturating_mul({})", s.arg, s.mult);
    }
    format!("({prefix}{} as u64).saturating_mul({})", s.arg, s.mult)
}

fn errcode_arg(f: &Func) -> Option<&str> {
    f.args
        .iter()
        .find(|a| a.ty == Ty::Errcode)
        .map(|a| a.name.as_str())
}

/// Where the client implements a function: generated, or by hand.
fn impl_module(f: &Func) -> &'static str {
    if f.attrs.client_override || f.attrs.manual || f.attrs.client_only {
        "overrides"
    } else {
        "gen"
    }
}

/// The stream argument of a `ptsz` function, which its `_ptsz` variant
/// maps (None for one without a stream argument: its variant is itself).
fn ptsz_stream(f: &Func) -> Option<&str> {
    if f.attrs.per_thread != Some(crate::PerThread::Ptsz) {
        return None;
    }
    f.args
        .iter()
        .find(|a| matches!(a.name.as_str(), "stream" | "hStream") && a.ty.ctype() == "*mut c_void")
        .map(|a| a.name.as_str())
}

/// The functions a stand-in library exports, in description order: all
/// of them. An `unsupported` one answers the API's unsupported status
/// without being forwarded, which a program (or a framework whose loader
/// binds every symbol at once, as Python's does) can survive where a
/// missing symbol stops it.
fn exported(api: &Api) -> impl Iterator<Item = &Func> {
    api.funcs.iter()
}
