//! Writes a synthetic clusterdata-2011-2 trace (task_events and task_usage, gzip CSV).

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;

use flate2::write::GzEncoder;
use giant_trace::synth::{write_files, SynthConfig};

const USAGE: &str = "usage: giant-tracegen OUT_DIR [MACHINES] [HOURS] [SEED]\n\
  Writes task_events-part-00000-of-00001.csv.gz and task_usage-part-00000-of-00001.csv.gz.\n\
  Defaults: 12500 machines, 696 hours (29 days, the full trace's scale), seed 1.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() || args.iter().any(|a| a == "-h" || a == "--help") {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let num = |i: usize, d: u64| -> Result<u64, String> {
        args.get(i).map_or(Ok(d), |s| {
            s.parse().map_err(|_| format!("not a number: {s}"))
        })
    };
    let run = || -> Result<(u64, u64), String> {
        let dir = PathBuf::from(&args[0]);
        let machines = u32::try_from(num(1, 12_500)?).map_err(|e| e.to_string())?;
        let hours = num(2, 29 * 24)?;
        let seed = num(3, 1)?;
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let open = |name: &str| -> Result<GzEncoder<BufWriter<File>>, String> {
            let p = dir.join(name);
            let f = File::create(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            Ok(GzEncoder::new(
                BufWriter::new(f),
                flate2::Compression::fast(),
            ))
        };
        let mut ev = open("task_events-part-00000-of-00001.csv.gz")?;
        let mut us = open("task_usage-part-00000-of-00001.csv.gz")?;
        let cfg = SynthConfig {
            machines,
            duration_s: hours * 3600,
            ..SynthConfig::full_scale(seed)
        };
        let n = write_files(cfg, &mut ev, &mut us).map_err(|e| e.to_string())?;
        ev.finish().map_err(|e| e.to_string())?;
        us.finish().map_err(|e| e.to_string())?;
        Ok(n)
    };
    match run() {
        Ok((e, u)) => {
            println!("wrote {e} task_events rows and {u} task_usage rows");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("giant-tracegen: {e}");
            ExitCode::FAILURE
        }
    }
}
