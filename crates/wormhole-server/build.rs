fn main() {
    let api = match wormhole_apigen::parse(wormhole_opencl_api::DESCRIPTION) {
        Ok(api) => api,
        Err(e) => panic!("opencl.api: {e}"),
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("server_gen.rs"), wormhole_apigen::gen_server(&api)).expect("write");
    let cuda = match wormhole_apigen::parse(wormhole_cuda_api::DESCRIPTION) {
        Ok(api) => api,
        Err(e) => panic!("cuda.api: {e}"),
    };
    std::fs::write(
        out.join("cuda_server_gen.rs"),
        wormhole_apigen::gen_server(&cuda),
    )
    .expect("write");
    println!("cargo:rustc-link-lib=OpenCL");
}
