fn main() {
    let api = match wormhole_apigen::parse(wormhole_opencl_api::DESCRIPTION) {
        Ok(api) => api,
        Err(e) => panic!("opencl.api: {e}"),
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("server_gen.rs"), wormhole_apigen::gen_server(&api)).expect("write");
    for (name, src, gen) in [
        (
            "cuda.api",
            wormhole_cuda_api::DESCRIPTION,
            "cuda_server_gen.rs",
        ),
        (
            "cublas.api",
            wormhole_cuda_api::BLAS_DESCRIPTION,
            "blas_server_gen.rs",
        ),
        (
            "curand.api",
            wormhole_cuda_api::RAND_DESCRIPTION,
            "rand_server_gen.rs",
        ),
        (
            "cublaslt.api",
            wormhole_cuda_api::LT_DESCRIPTION,
            "lt_server_gen.rs",
        ),
        (
            "cusolver.api",
            wormhole_cuda_api::SOLVER_DESCRIPTION,
            "solver_server_gen.rs",
        ),
    ] {
        let api = match wormhole_apigen::parse(src) {
            Ok(api) => api,
            Err(e) => panic!("{name}: {e}"),
        };
        std::fs::write(out.join(gen), wormhole_apigen::gen_server(&api)).expect("write");
    }
    println!("cargo:rustc-link-lib=OpenCL");
}
