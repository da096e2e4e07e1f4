fn main() {
    let api = match wormhole_apigen::parse(wormhole_opencl_api::DESCRIPTION) {
        Ok(api) => api,
        Err(e) => panic!("opencl.api: {e}"),
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    // The library registers a fork handler (connection::watch_forks): it must never
    // be unmapped while the process lives, even if the ICD loader closes it.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    std::fs::write(out.join("client_gen.rs"), wormhole_apigen::gen_client(&api)).expect("write");
}
