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
