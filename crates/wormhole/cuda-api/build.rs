fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for (file, gen) in [
        ("cuda.api", "common_gen.rs"),
        ("cublas.api", "blas_common_gen.rs"),
        ("curand.api", "rand_common_gen.rs"),
        ("driver.api", "driver_common_gen.rs"),
        ("cublaslt.api", "lt_common_gen.rs"),
        ("cusolver.api", "solver_common_gen.rs"),
    ] {
        println!("cargo:rerun-if-changed={file}");
        let src = std::fs::read_to_string(file).expect("the descriptions are part of the crate");
        let api = match wormhole_apigen::parse(&src) {
            Ok(api) => api,
            Err(e) => panic!("{file}: {e}"),
        };
        std::fs::write(out.join(gen), wormhole_apigen::gen_common(&api)).expect("write");
    }
}
