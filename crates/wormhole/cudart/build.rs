fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for (name, src, prefix) in [
        ("cuda.api", wormhole_cuda_api::DESCRIPTION, ""),
        ("cublas.api", wormhole_cuda_api::BLAS_DESCRIPTION, "blas_"),
        ("curand.api", wormhole_cuda_api::RAND_DESCRIPTION, "rand_"),
        (
            "driver.api",
            wormhole_cuda_api::DRIVER_DESCRIPTION,
            "driver_",
        ),
        ("cublaslt.api", wormhole_cuda_api::LT_DESCRIPTION, "lt_"),
        (
            "cusolver.api",
            wormhole_cuda_api::SOLVER_DESCRIPTION,
            "solver_",
        ),
    ] {
        let api = match wormhole_apigen::parse(src) {
            Ok(api) => api,
            Err(e) => panic!("{name}: {e}"),
        };
        let client = out.join(format!("{prefix}client_gen.rs"));
        std::fs::write(client, wormhole_apigen::gen_client(&api)).expect("write");
        if !prefix.is_empty() {
            let table = out.join(format!("{prefix}forward_gen.rs"));
            std::fs::write(table, wormhole_apigen::gen_forward_table(&api)).expect("write");
        }
    }
}
