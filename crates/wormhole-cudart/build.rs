fn main() {
    let api = match wormhole_apigen::parse(wormhole_cuda_api::DESCRIPTION) {
        Ok(api) => api,
        Err(e) => panic!("cuda.api: {e}"),
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("client_gen.rs"), wormhole_apigen::gen_client(&api)).expect("write");
}
