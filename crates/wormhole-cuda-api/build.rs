fn main() {
    println!("cargo:rerun-if-changed=cuda.api");
    let src = std::fs::read_to_string("cuda.api").expect("cuda.api is part of the crate");
    let api = match wormhole_apigen::parse(&src) {
        Ok(api) => api,
        Err(e) => panic!("cuda.api: {e}"),
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("common_gen.rs"), wormhole_apigen::gen_common(&api)).expect("write");
}
