//! Compiles the kernel fast path (`bpf/fastpath.bpf.c`) with clang for the BPF target. A
//! machine without clang (or without the libbpf headers) still builds vnetd: it then has no
//! fast path, says so at start-up when one is asked for, and forwards in user space.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(vnet_no_fastpath)");
    println!("cargo::rerun-if-changed=bpf/fastpath.bpf.c");
    println!("cargo::rerun-if-env-changed=CLANG");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("fastpath.bpf.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // The kernel's UAPI headers include <asm/types.h>, which Debian keeps per architecture.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        .arg(format!("-I{multiarch}"))
        .arg("-c")
        .arg("bpf/fastpath.bpf.c")
        .arg("-o")
        .arg(&obj)
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => {
            let why = match other {
                Ok(s) => format!("{clang} failed ({s})"),
                Err(e) => format!("{clang}: {e}"),
            };
            println!(
                "cargo::warning=vnetd is built without its kernel fast path: {why} \
                 (install clang and libbpf-dev)"
            );
            println!("cargo::rustc-cfg=vnet_no_fastpath");
            std::fs::write(&obj, b"").expect("writing into OUT_DIR");
        }
    }
}
