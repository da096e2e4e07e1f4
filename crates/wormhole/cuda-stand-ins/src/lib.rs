//! Wormhole's stand-ins for NVIDIA's CUDA libraries, from one table.
//!
//! A stand-in is a shared library with NVIDIA's soname and symbol versions
//! that a program loads in place of NVIDIA's: `libcudart.so.13` holds the
//! CUDA client (`wormhole-cudart`), the others (`libcublas.so.13`,
//! `libcurand.so.10`, …) forward each call to it (`wormhole-cuda-forward`).
//! A shared library has one soname, so each is a package of its own, in
//! the folder of its package name beside this crate's `src`; all of its
//! files but its manifest are shared (`stand-in/build.rs`,
//! `stand-in/lib.rs`), and what differs is its row of [`STAND_INS`].
//!
//! Adding a CUDA major or a library is one row there (and, for a library
//! not yet described, one entry of [`Library`] naming its description),
//! then `scripts/cuda-stand-ins.sh`, which writes the manifests; this
//! crate's tests fail while a manifest differs from its row.

use std::fmt::Write;
use std::path::PathBuf;

/// What a stand-in holds.
#[derive(Debug)]
pub enum Role {
    /// The CUDA runtime: the client itself (`wormhole-cudart`), exported
    /// under NVIDIA's names.
    Runtime,
    /// A library whose every function jumps to the client in a libcudart
    /// stand-in.
    Forwarding {
        /// Its table's id: a constant of `wormhole_cuda_api::forward`.
        table: &'static str,
        /// The module of `wormhole_cuda_forward` with its answers when no
        /// client can be found.
        fallbacks: &'static str,
    },
}

/// One NVIDIA library Wormhole stands in for, whatever its major.
#[derive(Debug)]
pub struct Library {
    /// Its name in the package's (`wormhole-NAME-MAJOR`).
    pub name: &'static str,
    /// Its soname without the major (`libcublas.so`).
    pub soname: &'static str,
    /// Its description's file name in `wormhole-cuda-api`, and the text.
    pub api: (&'static str, &'static str),
    pub role: Role,
    /// The package's one-line description. In it and in `doc`, `{soname}`,
    /// `{cuda}` (the CUDA majors it goes with), `{runtimes}` (the libcudart
    /// sonames it looks for its client in) and `{file}` (the file cargo
    /// builds) are filled in.
    pub summary: &'static str,
    /// The crate's documentation: how to use the library.
    pub doc: &'static str,
}

/// One stand-in: a library at one soname major.
#[derive(Debug)]
pub struct StandIn {
    pub library: &'static Library,
    /// The soname's major (`libcusolver.so.11`: 11).
    pub major: u32,
    /// The CUDA majors whose runtime it goes with, the one to look for
    /// first first.
    pub cuda: &'static [u32],
}

pub const CUDART: Library = Library {
    name: "cudart",
    soname: "libcudart.so",
    api: ("cuda.api", wormhole_cuda_api::DESCRIPTION),
    role: Role::Runtime,
    summary: "Wormhole's stand-in for {soname}: the CUDA runtime client with NVIDIA's soname and symbol versions",
    doc: "{soname}, forwarded: link or load this library under that name
(`ln -s {file} {soname}`) ahead of NVIDIA's on the library path, and
programs built with {cuda}'s shared runtime run through a Wormhole server.
All the logic is in `wormhole-cudart`; this crate adds the exports and
says which version it is (see `wormhole-cuda-stand-ins`).",
};

pub const CUBLAS: Library = Library {
    name: "cublas",
    soname: "libcublas.so",
    api: ("cublas.api", wormhole_cuda_api::BLAS_DESCRIPTION),
    role: Role::Forwarding {
        table: "BLAS",
        fallbacks: "blas",
    },
    summary: "Wormhole's stand-in for {soname}: NVIDIA's soname and symbol versions, every call forwarded to the one CUDA client in the libcudart stand-in",
    doc: "{soname}, forwarded: put it (as `{soname}`) ahead of NVIDIA's on the
library path next to Wormhole's {runtimes}. Every function jumps to the
CUDA client in that library (see `wormhole-cuda-forward`), so cuBLAS
calls share its connection, handles and device allocations.",
};

pub const CUBLASLT: Library = Library {
    name: "cublaslt",
    soname: "libcublasLt.so",
    api: ("cublaslt.api", wormhole_cuda_api::LT_DESCRIPTION),
    role: Role::Forwarding {
        table: "LT",
        fallbacks: "lt",
    },
    summary: "Wormhole's stand-in for {soname}: the entry points PyTorch imports, forwarded to the client in the libcudart stand-in (descriptors kept there, matmuls sent to the server)",
    doc: "{soname}: put it ahead of NVIDIA's on the library path (or preload
it) next to Wormhole's {runtimes}. Each entry point jumps to the client
in the libcudart stand-in, which keeps the descriptors and sends matmuls
to the server (see `cublaslt.api`); NVIDIA's library, in a client without
the device, would crash on its first matmul.",
};

pub const CURAND: Library = Library {
    name: "curand",
    soname: "libcurand.so",
    api: ("curand.api", wormhole_cuda_api::RAND_DESCRIPTION),
    role: Role::Forwarding {
        table: "RAND",
        fallbacks: "rand",
    },
    summary: "Wormhole's stand-in for {soname} ({cuda}): NVIDIA's soname and symbol versions, every call forwarded to the one CUDA client in the libcudart stand-in",
    doc: "{soname}, forwarded: put it ahead of NVIDIA's on the library path next
to Wormhole's {runtimes} (one soname serves several CUDA majors, so the
client is looked for in whichever is loaded, in that order; see
`wormhole-cuda-forward`). cuRAND calls share that library's connection,
handles and device allocations.",
};

pub const CUSOLVER: Library = Library {
    name: "cusolver",
    soname: "libcusolver.so",
    api: ("cusolver.api", wormhole_cuda_api::SOLVER_DESCRIPTION),
    role: Role::Forwarding {
        table: "SOLVER",
        fallbacks: "solver",
    },
    summary: "Wormhole's stand-in for {soname} ({cuda}): NVIDIA's soname and symbol versions, the dense factorisations and solves forwarded to the one CUDA client in the libcudart stand-in",
    doc: "{soname} ({cuda}), forwarded: put it ahead of NVIDIA's on the library
path next to Wormhole's {runtimes}. Every function jumps to the CUDA
client in that library (see `wormhole-cuda-forward`), so cuSOLVER calls
share its connection, handles, streams and device allocations.",
};

pub const DRIVER: Library = Library {
    name: "cuda-driver",
    soname: "libcuda.so",
    api: ("driver.api", wormhole_cuda_api::DRIVER_DESCRIPTION),
    role: Role::Forwarding {
        table: "DRIVER",
        fallbacks: "driver",
    },
    summary: "Wormhole's stand-in for {soname} on a client without the NVIDIA driver: the few driver calls a framework makes itself, forwarded to the one CUDA client in the libcudart stand-in",
    doc: "{soname} for a client without the NVIDIA driver: put it on the library
path next to Wormhole's {runtimes}. It answers the few driver calls a
framework makes itself (PyTorch: a device's primary context state, the
current context) from the libcudart stand-in's one client (see
`driver.api` and `wormhole-cudart`'s `driver` module); every other driver
function is missing. Where the machine has NVIDIA's driver, use that
instead: this library does not forward the driver API.",
};

/// Every stand-in Wormhole builds. cuSOLVER's soname major is its own (11
/// beside CUDA 12); cuRAND's and the driver's serve both CUDA majors.
/// (One row a line, as a table reads.)
#[rustfmt::skip]
pub const STAND_INS: &[StandIn] = &[
    StandIn { library: &CUDART, major: 12, cuda: &[12] },
    StandIn { library: &CUDART, major: 13, cuda: &[13] },
    StandIn { library: &CUBLAS, major: 12, cuda: &[12] },
    StandIn { library: &CUBLAS, major: 13, cuda: &[13] },
    StandIn { library: &CUBLASLT, major: 13, cuda: &[13] },
    StandIn { library: &CURAND, major: 10, cuda: &[13, 12] },
    StandIn { library: &CUSOLVER, major: 11, cuda: &[12] },
    StandIn { library: &CUSOLVER, major: 12, cuda: &[13] },
    StandIn { library: &DRIVER, major: 1, cuda: &[13, 12] },
];

/// The row of package `package`.
pub fn find(package: &str) -> Option<&'static StandIn> {
    STAND_INS.iter().find(|s| s.package() == package)
}

impl StandIn {
    /// `wormhole-cublas-12`: the package, and its folder.
    pub fn package(&self) -> String {
        format!("wormhole-{}-{}", self.library.name, self.major)
    }

    /// `wormhole_cublas12`: the library target (built as
    /// `libwormhole_cublas12.so`).
    pub fn lib_name(&self) -> String {
        format!(
            "wormhole_{}{}",
            self.library.name.replace('-', "_"),
            self.major
        )
    }

    /// `libcublas.so.12`.
    pub fn soname(&self) -> String {
        format!("{}.{}", self.library.soname, self.major)
    }

    /// The libcudart sonames whose client a forwarding stand-in uses,
    /// preferred first.
    pub fn runtimes(&self) -> Vec<String> {
        self.cuda
            .iter()
            .map(|m| format!("{}.{m}", CUDART.soname))
            .collect()
    }

    /// Fills a template of [`Library`] in.
    fn fill(&self, template: &str) -> String {
        let mut majors: Vec<u32> = self.cuda.to_vec();
        majors.sort_unstable();
        let majors: Vec<String> = majors.iter().map(u32::to_string).collect();
        let runtimes = match self.cuda {
            [one] => format!("{}.{one}", CUDART.soname),
            [first, rest @ ..] => {
                let rest: Vec<String> = rest.iter().map(|m| format!(".{m}")).collect();
                format!("{}.{first} or {}", CUDART.soname, rest.join(" or "))
            }
            [] => String::new(),
        };
        template
            .replace("{soname}", &self.soname())
            .replace("{cuda}", &format!("CUDA {}", majors.join(" and ")))
            .replace("{runtimes}", &runtimes)
            .replace("{file}", &format!("lib{}.so", self.lib_name()))
    }

    /// The crate's documentation.
    pub fn about(&self) -> String {
        self.fill(self.library.doc)
    }

    /// The crate's body, after its exports: the marker that tells a server
    /// it is not NVIDIA's library, and for a runtime the major it reports,
    /// for the others the way to the client's table.
    pub fn body(&self) -> String {
        match self.library.role {
            Role::Runtime => format!(
                "include!(concat!(env!(\"OUT_DIR\"), \"/exports.rs\"));\n\
                 wormhole_cudart::stand_in!({});\n",
                self.major
            ),
            Role::Forwarding { table, fallbacks } => format!(
                "use wormhole_cuda_forward::{fallbacks}::*;\n\
                 wormhole_cuda_forward::stand_in!(wormhole_cuda_api::forward::{table}, &{:?}, {});\n",
                self.runtimes(),
                self.major
            ),
        }
    }

    /// The package's manifest (`<package>/Cargo.toml`).
    pub fn manifest(&self) -> String {
        let mut o = String::new();
        o.push_str(
            "# Written by scripts/cuda-stand-ins.sh from this package's row of the table\n\
             # in crates/wormhole/cuda-stand-ins/src/lib.rs: change the table, not this file.\n",
        );
        let _ = write!(
            o,
            "[package]\nname = \"{}\"\ndescription = \"{}\"\n\
             version.workspace = true\nedition.workspace = true\nlicense.workspace = true\n\
             build = \"../stand-in/build.rs\"\n\n\
             [lib]\nname = \"{}\"\npath = \"../stand-in/lib.rs\"\ncrate-type = [\"cdylib\"]\n\n\
             [dependencies]\n",
            self.package(),
            self.fill(self.library.summary),
            self.lib_name(),
        );
        match self.library.role {
            Role::Runtime => o.push_str("wormhole-cudart = { path = \"../../cudart\" }\n"),
            Role::Forwarding { .. } => o.push_str(
                "wormhole-cuda-forward = { path = \"../../cuda-forward\" }\n\
                 wormhole-cuda-api = { path = \"../../cuda-api\" }\n",
            ),
        }
        o.push_str(
            "\n[build-dependencies]\nwormhole-cuda-stand-ins = { path = \"..\" }\n\n\
             [lints]\nworkspace = true\n",
        );
        o
    }
}

/// The build script of every stand-in (`stand-in/build.rs`): from the
/// package's row, the exports (apigen's, versioned with the soname), the
/// soname itself, the crate's documentation (`OUT_DIR/about.md`) and body
/// (`OUT_DIR/stand_in.rs`).
///
/// # Panics
/// When the package has no row, on a description that does not parse or an
/// unwritable `OUT_DIR`: this is for build scripts, where a panic is the
/// error report.
pub fn build_script() {
    let package = std::env::var("CARGO_PKG_NAME").expect("cargo sets CARGO_PKG_NAME");
    let Some(stand_in) = find(&package) else {
        panic!("{package} has no row in wormhole-cuda-stand-ins' STAND_INS");
    };
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("about.md"), stand_in.about()).expect("write about.md");
    std::fs::write(out.join("stand_in.rs"), stand_in.body()).expect("write stand_in.rs");
    let (file, description) = stand_in.library.api;
    let soname = stand_in.soname();
    match stand_in.library.role {
        Role::Runtime => {
            // Never unloaded: the exit report (WORMHOLE_LOG) is registered
            // with atexit, and the connection's state must outlive any
            // dlclose.
            println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
            wormhole_apigen::build_client_stand_in(file, description, "wormhole_cudart", &soname);
        }
        Role::Forwarding { .. } => {
            wormhole_apigen::build_forwarding_stand_in(file, description, &soname)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::path::Path;

    const WRITE: &str = "WORMHOLE_WRITE_STAND_INS";

    /// Each row's manifest is the one checked in, and every stand-in
    /// folder has a row. With `WORMHOLE_WRITE_STAND_INS=1` (what
    /// scripts/cuda-stand-ins.sh sets) the manifests are written instead.
    #[test]
    fn manifests_follow_the_table() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let write = std::env::var_os(WRITE).is_some();
        let mut stale = Vec::new();
        for s in STAND_INS {
            let path = here.join(s.package()).join("Cargo.toml");
            let want = s.manifest();
            if std::fs::read_to_string(&path).ok().as_deref() == Some(want.as_str()) {
                continue;
            }
            if write {
                std::fs::create_dir_all(here.join(s.package())).expect("create the folder");
                std::fs::write(&path, want).expect("write the manifest");
            } else {
                stale.push(s.package());
            }
        }
        assert!(
            stale.is_empty(),
            "{stale:?}: the manifest differs from the table; run scripts/cuda-stand-ins.sh"
        );
        let rows: HashSet<String> = STAND_INS.iter().map(StandIn::package).collect();
        for entry in std::fs::read_dir(here).expect("read the crate's folder") {
            let name = entry.expect("a folder entry").file_name();
            let name = name.to_string_lossy();
            if name.starts_with("wormhole-") {
                assert!(
                    rows.contains(name.as_ref()),
                    "{name} has no row in STAND_INS: add one, or remove the folder"
                );
            }
        }
    }

    #[test]
    fn names_are_unique_and_templates_filled() {
        let mut seen = HashSet::new();
        for s in STAND_INS {
            assert!(seen.insert(s.package()), "{} twice", s.package());
            assert!(seen.insert(s.soname()), "{} twice", s.soname());
            assert!(!s.cuda.is_empty(), "{}: no CUDA major", s.package());
            for text in [s.about(), s.manifest(), s.body()] {
                assert!(!text.contains("{soname}") && !text.contains("{cuda}"));
                assert!(!text.contains("{runtimes}") && !text.contains("{file}"));
            }
            // The summary is a TOML basic string.
            assert!(!s.library.summary.contains(['"', '\\', '\n']));
        }
    }

    #[test]
    fn rows_say_what_the_libraries_are_called() {
        let solver = find("wormhole-cusolver-11").expect("a row");
        assert_eq!(solver.soname(), "libcusolver.so.11");
        assert_eq!(solver.lib_name(), "wormhole_cusolver11");
        assert_eq!(solver.runtimes(), ["libcudart.so.12"]);
        let driver = find("wormhole-cuda-driver-1").expect("a row");
        assert_eq!(driver.lib_name(), "wormhole_cuda_driver1");
        assert!(driver.about().contains("libcudart.so.13 or .12"));
        assert!(driver
            .body()
            .contains("[\"libcudart.so.13\", \"libcudart.so.12\"], 1)"));
        let lt = find("wormhole-cublaslt-13").expect("a row");
        assert_eq!(lt.soname(), "libcublasLt.so.13");
        let runtime = find("wormhole-cudart-12").expect("a row");
        assert!(runtime
            .about()
            .contains("`ln -s libwormhole_cudart12.so libcudart.so.12`"));
        assert!(runtime.body().contains("stand_in!(12)"));
    }
}
