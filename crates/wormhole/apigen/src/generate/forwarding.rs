//! Libraries forwarded through the libcudart stand-in: the client side's
//! table of implementations, the stand-in's forwarders that index it, and
//! the fingerprint both are checked by.

use std::fmt::Write;

use super::exports::exports_to;
use super::{c_params, exported, impl_module};
use crate::{Api, Ret};

/// A fingerprint of the exported functions' names and C signatures: the
/// forwarding table ([`gen_forward_table`]) and the forwarders that index
/// it ([`gen_forwarders`]) are built from the same description only when
/// their fingerprints agree.
pub fn fingerprint(api: &Api) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in exported(api) {
        let sig = format!("{}({})->{};", f.name, c_params(f), f.ret.ctype());
        for b in sig.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The constants both sides of a forwarded library check each other by: the
/// description's fingerprint and the table's length.
fn table_constants(api: &Api) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "/// The description's fingerprint (wormhole_apigen::fingerprint).\npub const FINGERPRINT: u64 = {:#x};",
        fingerprint(api)
    );
    let n = exported(api).count();
    let _ = writeln!(
        o,
        "/// The number of exported functions.\npub const FORWARD_LEN: usize = {n};"
    );
    o
}

/// The client side of a library forwarded through another one: the
/// addresses of the client's implementations of every exported function,
/// in description order (`forward_table()`), with the description's
/// [`fingerprint`]. The including module must have the generated stubs
/// (from [`gen_client`]) and `overrides` in scope.
pub fn gen_forward_table(api: &Api) -> String {
    let mut o = table_constants(api);
    o.push_str("/// The client's implementation of each exported function, in description order.\n/// A table, one line a function, so it stays one function.\n#[allow(clippy::too_many_lines)]\npub fn forward_table() -> [usize; FORWARD_LEN] {\n    [\n");
    for f in exported(api) {
        let m = impl_module(f);
        let e = if m == "gen" {
            f.name.clone()
        } else {
            format!("overrides::{}", f.name)
        };
        let _ = writeln!(o, "        {e} as *const () as usize,");
    }
    o.push_str("    ]\n}\n");
    o
}

/// A stand-in library that forwards every call to the client runtime in
/// another library (see [`gen_forward_table`]): one `extern "C"` function
/// per exported function that calls entry `i` of the table the including
/// module's `table(i)` returns, or answers `fallback_status()` (for a
/// function returning a status) or `fallback_NAME()` (a `custom NAME`
/// return) when there is none; plus the versioned ELF exports (`node`).
pub fn gen_forwarders(api: &Api, node: &str) -> String {
    let mut o = table_constants(api);
    o.push_str("\n/// One forwarder per exported function.\n#[allow(non_snake_case, unused_imports, clippy::too_many_arguments, clippy::missing_safety_doc, clippy::unused_unit)]\npub mod fwd {\n    use std::ffi::{c_char, c_void};\n    use super::*;\n\n");
    for (i, f) in exported(api).enumerate() {
        let types: Vec<String> = f.args.iter().map(|a| a.ty.ctype()).collect();
        let names: Vec<&str> = f.args.iter().map(|a| a.name.as_str()).collect();
        let ret = f.ret.ctype();
        let fallback = match &f.ret {
            Ret::Status => "fallback_status()".to_string(),
            Ret::Custom { ctype, .. } if ctype == "void" => "()".to_string(),
            Ret::Custom { name, .. } => format!("fallback_{name}()"),
            Ret::New(_) => "std::ptr::null_mut()".to_string(),
        };
        let _ = writeln!(
            o,
            "    pub unsafe extern \"C\" fn {name}({params}) -> {ret} {{\n        match table({i}) {{\n            // SAFETY: entry {i} of a table with this description's fingerprint is the\n            // client's implementation of {name}, whose C signature this is.\n            Some(p) => unsafe {{ std::mem::transmute::<usize, unsafe extern \"C\" fn({types}) -> {ret}>(p)({args}) }},\n            None => {fallback},\n        }}\n    }}\n",
            name = f.name,
            params = c_params(f),
            types = types.join(", "),
            args = names.join(", "),
        );
    }
    o.push_str("}\n\n");
    o.push_str(&exports_to(api, node, |f, _| format!("fwd::{}", f.name)));
    o
}
