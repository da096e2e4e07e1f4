// The source every stand-in shares. Its documentation and body are
// written by the build script from the package's row of the table in
// `wormhole-cuda-stand-ins` (src/lib.rs): a libcudart stand-in exports the
// client in `wormhole-cudart`; the others forward to it
// (`wormhole-cuda-forward`).
#![doc = include_str!(concat!(env!("OUT_DIR"), "/about.md"))]

include!(concat!(env!("OUT_DIR"), "/stand_in.rs"));
