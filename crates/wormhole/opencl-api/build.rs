fn main() {
    println!("cargo:rerun-if-changed=opencl.api");
    let src = std::fs::read_to_string("opencl.api").expect("opencl.api is part of the crate");
    let api = match wormhole_apigen::parse(&src) {
        Ok(api) => api,
        Err(e) => panic!("opencl.api: {e}"),
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("common_gen.rs"), wormhole_apigen::gen_common(&api)).expect("write");
}
