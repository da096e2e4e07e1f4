//! Versioned ELF exports for a stand-in library (`global_asm!`
//! trampolines), and the linker version script that defines their version.

use std::fmt::Write;

use super::{exported, impl_module, ptsz_stream};
use crate::{Api, Func};

/// ELF exports for a library that stands in for another: for every
/// function the client implements, a trampoline (in `global_asm!`) that
/// jumps to the Rust function under `path` (`PATH::gen::NAME`, or
/// `PATH::manual::NAME` for hand-written ones) and carries the symbol
/// version `node` (e.g. `libcudart.so.13`), as the real library's do, so
/// programs linked against the real library bind to ours.
///
/// The trampoline is a plain jump (`jmp` on x86-64, `b` on AArch64; other
/// architectures get no exports), so the callee sees the caller's
/// arguments untouched. A version script defining `node` (see
/// [`gen_version_script`]) must be passed to the linker.
pub fn gen_exports(api: &Api, path: &str, node: &str) -> String {
    exports_to(api, node, |f, variant| match variant {
        Some(sfx) if ptsz_stream(f).is_some() => format!("{path}::gen::{}{sfx}", f.name),
        _ => format!("{path}::{}::{}", client_module(f), f.name),
    })
}

/// The client crate's public module that implements a function: its
/// generated stubs, or the hand-written ones (`manual`).
fn client_module(f: &Func) -> &'static str {
    match impl_module(f) {
        "overrides" => "manual",
        generated => generated,
    }
}

/// Versioned trampolines for every exported function, jumping to `target`.
/// `target(f, None)` is where f's export jumps; `target(f, Some(suffix))`
/// where its per-thread variant's does (see `Attrs::per_thread`).
pub(super) fn exports_to(
    api: &Api,
    node: &str,
    target: impl Fn(&Func, Option<&str>) -> String,
) -> String {
    // (architecture, the assembler's type prefix, the jump instruction)
    let arches = [("x86_64", '@', "jmp"), ("aarch64", '%', "b")];
    let mut o = String::new();
    for (arch, t, jump) in arches {
        let mut lines = vec![format!(
            ".pushsection .text.wormhole_exports,\"ax\",{t}progbits"
        )];
        let mut syms = Vec::new();
        let variants =
            exported(api).filter_map(|f| f.attrs.per_thread.map(|v| (f, Some(v.suffix()))));
        let all = exported(api).map(|f| (f, None)).chain(variants);
        for (i, (f, sfx)) in all.enumerate() {
            let name = format!("{}{}", f.name, sfx.unwrap_or(""));
            let local = format!("wormhole_x_{name}");
            lines.push(format!(".globl {local}"));
            lines.push(format!(".type {local},{t}function"));
            lines.push(format!("{local}: {jump} {{f{i}}}"));
            lines.push(format!(".symver {local}, {name}@@{node}"));
            syms.push(format!("f{i} = sym {}", target(f, sfx)));
        }
        lines.push(".popsection".into());
        let _ = writeln!(
            o,
            "#[cfg(target_arch = \"{arch}\")]\nstd::arch::global_asm!("
        );
        for l in lines {
            let _ = writeln!(o, "    {l:?},");
        }
        for s in syms {
            let _ = writeln!(o, "    {s},");
        }
        o.push_str(");\n");
    }
    o
}

/// The linker version script that defines the version `node`.
pub fn gen_version_script(node: &str) -> String {
    format!("{node} {{\n}};\n")
}
