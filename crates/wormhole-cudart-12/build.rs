//! The ELF exports: every described function under its CUDA name with the
//! symbol version libcudart.so.12, and that soname.
fn main() {
    const SONAME: &str = "libcudart.so.12";
    let api = match wormhole_apigen::parse(wormhole_cuda_api::DESCRIPTION) {
        Ok(api) => api,
        Err(e) => panic!("cuda.api: {e}"),
    };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let exports = wormhole_apigen::gen_exports(&api, "wormhole_cudart", SONAME);
    std::fs::write(out.join("exports.rs"), exports).expect("write");
    let script = out.join("version.map");
    std::fs::write(&script, wormhole_apigen::gen_version_script(SONAME)).expect("write");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={},-soname,{SONAME}",
        script.display()
    );
}
