//! Parse-only timing on data held in memory (synthetic full-scale windows and the real
//! excerpt), best of REPS, per CPU-second of this thread. For A/B runs of two builds.
//! `HOURS=1 cargo run --release -p giant-sim --example parse_ab`
#![allow(clippy::unwrap_used)]

use std::io::Read;

use giant_trace::synth::{SynthConfig, SynthTrace};
use giant_trace::{OnError, TaskEvent, TaskUsage, TraceReader};

#[inline(never)]
fn parse(ev: &[Vec<u8>], us: &[Vec<u8>]) -> (u64, u64) {
    let (mut n, mut x) = (0u64, 0u64);
    for d in ev {
        for r in TraceReader::<_, TaskEvent>::new(&d[..], "ev", OnError::Fail) {
            let r = r.unwrap();
            x = x.wrapping_add(r.time ^ r.cpu_request.map_or(0, |c| c.to_bits() as u64));
            n += 1;
        }
    }
    for d in us {
        for r in TraceReader::<_, TaskUsage>::new(&d[..], "us", OnError::Fail) {
            let r = r.unwrap();
            x = x.wrapping_add(r.start_time ^ r.sampled_cpu.map_or(0, |c| c.to_bits() as u64));
            x = x.wrapping_add(r.cpi.map_or(0, |c| c.to_bits() as u64));
            n += 1;
        }
    }
    (n, x)
}

#[inline(never)]
fn best(reps: usize, ev: &[Vec<u8>], us: &[Vec<u8>]) -> (f64, u64, u64) {
    let mut b = f64::MAX;
    let mut out = (0, 0);
    for _ in 0..reps {
        let t = giant_sim::thread_cpu_seconds();
        out = std::hint::black_box(parse(ev, us));
        b = b.min(giant_sim::thread_cpu_seconds() - t);
    }
    (b, out.0, out.1)
}

fn main() {
    let hours: u64 = std::env::var("HOURS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let machines: u32 = std::env::var("MACHINES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12500);
    if hours > 0 {
        let mut gen = SynthTrace::new(SynthConfig {
            machines,
            duration_s: hours * 3600,
            ..SynthConfig::full_scale(1)
        });
        let (mut ev, mut us) = (Vec::new(), Vec::new());
        loop {
            let (mut e, mut u) = (Vec::new(), Vec::new());
            if !gen.next_window(&mut e, &mut u) {
                break;
            }
            ev.push(e);
            us.push(u);
        }
        let (t, n, x) = best(reps, &ev, &us);
        println!(
            "synthetic {hours} h: {n} rows, parse {:.1} ns/row = {:.2} M rows/CPU-s (check {x:x})",
            t * 1e9 / n as f64,
            n as f64 / t / 1e6
        );
    }
    let dir = "../shared/data/google-clusterdata-2011-2";
    if let Ok(ev_files) = giant_trace::table_files(dir.as_ref(), "task_events") {
        let us_files = giant_trace::table_files(dir.as_ref(), "task_usage").unwrap();
        let load = |p: &std::path::PathBuf| {
            let mut v = Vec::new();
            flate2::read::MultiGzDecoder::new(std::fs::File::open(p).unwrap())
                .read_to_end(&mut v)
                .unwrap();
            v
        };
        let ev: Vec<Vec<u8>> = ev_files.iter().map(load).collect();
        let us: Vec<Vec<u8>> = us_files.iter().map(load).collect();
        let exreps: usize = std::env::var("EXREPS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(reps * 3);
        let (t, n, x) = best(exreps, &ev, &us);
        println!(
            "excerpt: {n} rows, parse {:.1} ns/row = {:.2} M rows/CPU-s (check {x:x})",
            t * 1e9 / n as f64,
            n as f64 / t / 1e6
        );
    }
}
