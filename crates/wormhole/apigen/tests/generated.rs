//! Snapshots of everything generated from each `.api` file, checked in
//! under `tests/snapshots/`, so that a change to the generators (or to a
//! description) shows its whole effect on the generated code in review.
//!
//! A difference fails this test and prints it. If it is the change you
//! meant, accept it with
//! `INSTA_UPDATE=always cargo test -p wormhole-apigen --test generated`
//! (or `cargo insta review`) and commit the snapshots with the change.

use wormhole_apigen::{
    gen_client, gen_common, gen_exports, gen_forward_table, gen_forwarders, gen_server, parse,
};

/// What a build generates from one description.
#[derive(Clone, Copy)]
enum Part {
    /// Ids and shared predicates (`wormhole-opencl-api`, `wormhole-cuda-api`).
    Common,
    /// The client's stubs (`wormhole-opencl-icd`, `wormhole-cudart`).
    Client,
    /// The server's decoders and dispatch (`wormhole-server`).
    Server,
    /// The table the libcudart stand-in exports for a library's stand-in.
    ForwardTable,
    /// A library stand-in's forwarders and exports (its soname written as
    /// `SONAME`).
    Forwarders,
    /// The libcudart stand-in's exports (soname `SONAME`).
    Exports,
}

const OPENCL: &str = include_str!("../../opencl-api/opencl.api");
const CUDA: &str = include_str!("../../cuda-api/cuda.api");
const CUBLAS: &str = include_str!("../../cuda-api/cublas.api");
const CUBLASLT: &str = include_str!("../../cuda-api/cublaslt.api");
const CURAND: &str = include_str!("../../cuda-api/curand.api");
const CUSOLVER: &str = include_str!("../../cuda-api/cusolver.api");
const DRIVER: &str = include_str!("../../cuda-api/driver.api");

use Part::*;

/// What the builds generate for a library the CUDA runtime stand-in forwards to.
const FORWARDED: &[Part] = &[Common, Client, Server, ForwardTable, Forwarders];

/// Each description, and what the builds generate from it.
const DESCRIPTIONS: &[(&str, &str, &[Part])] = &[
    ("opencl", OPENCL, &[Common, Client, Server]),
    ("cuda", CUDA, &[Common, Client, Server, Exports]),
    ("cublas", CUBLAS, FORWARDED),
    ("cublaslt", CUBLASLT, FORWARDED),
    ("curand", CURAND, FORWARDED),
    ("cusolver", CUSOLVER, FORWARDED),
    (
        "driver",
        DRIVER,
        &[Common, Client, ForwardTable, Forwarders],
    ),
];

fn generate(name: &str, src: &str, part: Part) -> (String, String) {
    let api = parse(src).unwrap_or_else(|e| panic!("{name}.api: {e}"));
    match part {
        Common => (format!("{name}.common"), gen_common(&api)),
        Client => (format!("{name}.client"), gen_client(&api)),
        Server => (format!("{name}.server"), gen_server(&api)),
        ForwardTable => (format!("{name}.forward_table"), gen_forward_table(&api)),
        Forwarders => (format!("{name}.forwarders"), gen_forwarders(&api, "SONAME")),
        Exports => (
            format!("{name}.exports"),
            gen_exports(&api, "wormhole_cudart", "SONAME"),
        ),
    }
}

#[test]
fn generated_code_matches_the_snapshots() {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| {
        for &(name, src, parts) in DESCRIPTIONS {
            for &part in parts {
                let (snapshot, code) = generate(name, src, part);
                insta::assert_snapshot!(snapshot, code);
            }
        }
    });
}
