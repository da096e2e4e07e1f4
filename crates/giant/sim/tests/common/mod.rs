//! Helpers shared by the simulator's integration tests.

use std::io::Write;
use std::path::{Path, PathBuf};

use giant_sim::Config;

/// The real trace excerpt, or `None` (saying SKIP) when ../shared/data is absent.
pub fn real_dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../../shared/data/google-clusterdata-2011-2");
    if d.is_dir() {
        Some(d)
    } else {
        eprintln!("SKIP: real trace excerpt not found at {}", d.display());
        None
    }
}

/// Writes `text` gzipped to `path`, as the trace's parts are.
pub fn write_gz(path: &Path, text: &str) {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text.as_bytes()).unwrap();
    std::fs::write(path, gz.finish().unwrap()).unwrap();
}

/// One machine in a cell of its own, every job kept, rebalancing and sampling each minute.
pub fn one_machine() -> Config {
    Config {
        machines: 1,
        cell_size: 1,
        job_sample: Some(1.0),
        interval_s: 60,
        sample_interval_s: 60,
        ..Config::default()
    }
}

/// A command that runs the `giant-sim` binary under test.
pub fn sim_cli() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_giant-sim"))
}

/// Runs `cmd`, which must succeed (else its stderr is shown).
pub fn output_ok(cmd: &mut std::process::Command) -> std::process::Output {
    let st = cmd.output().unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    st
}
