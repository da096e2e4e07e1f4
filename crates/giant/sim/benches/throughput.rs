//! End-to-end throughput of the trace pipeline, stage by stage, measured side by side in
//! one run on one thread. Run: `cargo bench -p giant-sim --bench throughput` (or
//! bench/giant/run.sh). Reads the real excerpt from ../shared/data (skips if absent).
#![allow(clippy::unwrap_used)] // a benchmark that cannot read its input should stop loudly

use std::hint::black_box;
use std::io::Read;
use std::path::PathBuf;
use std::time::Instant;

use giant_sim::driver::feed;
use giant_sim::model::Simulation;
use giant_sim::usage::UsageModel;
use giant_sim::{Config, PolicyKind};
use giant_trace::{Chain, OnError, TaskEvent, TaskUsage, TraceReader};

const REPS: usize = 7;

/// Best and median of REPS runs, in CPU seconds of this thread (the machine is shared:
/// wall time would measure the neighbours; wall time is printed alongside).
fn time<F: FnMut() -> u64>(mut f: F) -> (f64, f64, u64) {
    let mut v = Vec::new();
    let mut out = 0;
    let wall = Instant::now();
    for _ in 0..REPS {
        let t = giant_sim::thread_cpu_seconds();
        out = black_box(f());
        v.push(giant_sim::thread_cpu_seconds() - t);
    }
    let wall = wall.elapsed().as_secs_f64() / REPS as f64;
    v.sort_by(|a, b| a.total_cmp(b));
    eprintln!("  (mean wall {wall:.4}s per rep)");
    (v[0], v[REPS / 2], out)
}

fn gz_payload(data: &[u8]) -> &[u8] {
    // RFC 1952 header: skip optional fields to reach the raw deflate stream.
    let flg = data[3];
    let mut i = 10;
    if flg & 4 != 0 {
        let xlen = u16::from_le_bytes([data[i], data[i + 1]]) as usize;
        i += 2 + xlen;
    }
    for bit in [8u8, 16] {
        if flg & bit != 0 {
            while data[i] != 0 {
                i += 1;
            }
            i += 1;
        }
    }
    if flg & 2 != 0 {
        i += 2;
    }
    &data[i..data.len() - 8]
}

fn main() {
    // The repository root's sibling shared/ (crate dir is <root>/crates/giant/sim).
    let default = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../../shared/data/google-clusterdata-2011-2"
    );
    let dir = PathBuf::from(std::env::var("GIANT_TRACE_DIR").unwrap_or_else(|_| default.into()));
    if !dir.is_dir() {
        println!("SKIP: trace excerpt not found (set GIANT_TRACE_DIR)");
        return;
    }
    let read_all = |table: &str| -> Vec<Vec<u8>> {
        let files = giant_trace::table_files(&dir, table).unwrap();
        files.iter().map(|p| std::fs::read(p).unwrap()).collect()
    };
    let ev_gz = read_all("task_events");
    let us_gz = read_all("task_usage");
    let all_gz: Vec<&Vec<u8>> = ev_gz.iter().chain(&us_gz).collect();
    let gz_bytes: usize = all_gz.iter().map(|d| d.len()).sum();
    let gunzip = |d: &[u8]| gunzip_whole(d);
    let ev_raw: Vec<Vec<u8>> = ev_gz.iter().map(|d| gunzip(d)).collect();
    let us_raw: Vec<Vec<u8>> = us_gz.iter().map(|d| gunzip(d)).collect();
    let raw_bytes: usize = ev_raw.iter().chain(&us_raw).map(|d| d.len()).sum();
    let rows: u64 = ev_raw.iter().chain(&us_raw).map(|d| memchr_count(d)).sum();
    println!("input: {} files, {} rows, {:.1} MB gzip, {:.1} MB CSV (files in memory; no disk I/O timed)", all_gz.len(), rows, gz_bytes as f64 / 1e6, raw_bytes as f64 / 1e6);
    println!(
        "{:<52} {:>9} {:>9} {:>11} {:>9}",
        "stage (one thread)", "best cpu s", "median cpu", "M rows/s", "MB/s"
    );
    let report = |name: &str, (best, med, _): (f64, f64, u64), bytes: usize| {
        println!(
            "{name:<52} {best:>9.4} {med:>9.4} {:>11.2} {:>9.0}",
            rows as f64 / best / 1e6,
            bytes as f64 / best / 1e6
        );
        best
    };

    let t_flate = report(
        "gunzip: flate2 (zlib-rs backend), streaming",
        time(|| flate2_streaming(&all_gz)),
        raw_bytes,
    );
    let t_miniz = report(
        "gunzip: miniz_oxide, whole buffer",
        time(|| {
            all_gz
                .iter()
                .map(|d| {
                    miniz_oxide::inflate::decompress_to_vec(gz_payload(d))
                        .unwrap()
                        .len() as u64
                })
                .sum()
        }),
        raw_bytes,
    );
    let t_libdeflate = report(
        "gunzip: libdeflate, whole buffer",
        time(|| all_gz.iter().map(|d| gunzip(d).len() as u64).sum()),
        raw_bytes,
    );
    let t_csv = report(
        "split: csv crate ByteRecord (no number parsing)",
        time(|| csv_split(ev_raw.iter().chain(&us_raw))),
        raw_bytes,
    );
    let t_parse = report(
        "parse: giant-trace typed rows (all fields)",
        time(|| typed_parse(&ev_raw, &us_raw)),
        raw_bytes,
    );
    let sim = |ev: &[Vec<u8>], us: &[Vec<u8>]| simulate(ev, us, |d| d, false);
    let t_ps = report(
        "parse + simulate (fine policy, 800 machines)",
        time(|| sim(&ev_raw, &us_raw)),
        raw_bytes,
    );
    let t_e2e = report(
        "end to end: libdeflate whole-file + parse + simulate",
        time(|| {
            let ev: Vec<Vec<u8>> = ev_gz.iter().map(|d| gunzip(d)).collect();
            let us: Vec<Vec<u8>> = us_gz.iter().map(|d| gunzip(d)).collect();
            sim(&ev, &us)
        }),
        raw_bytes,
    );
    let t_e2e_flate = report(
        "END TO END: flate2/zlib-rs streaming + parse + simulate",
        time(|| simulate(&ev_gz, &us_gz, flate2::read::MultiGzDecoder::new, false)),
        raw_bytes,
    );
    let t_e2e_filter = report(
        "END TO END, job filter: flate2 + parse sampled jobs + sim",
        time(|| simulate(&ev_gz, &us_gz, flate2::read::MultiGzDecoder::new, true)),
        raw_bytes,
    );
    println!();
    println!("ratios (best of {REPS}): libdeflate/flate2 gunzip speed {:.2}x, libdeflate/miniz_oxide {:.2}x", t_flate / t_libdeflate, t_miniz / t_libdeflate);
    println!(
        "ratios: giant-trace typed parse vs csv ByteRecord split-only speed {:.2}x",
        t_csv / t_parse
    );
    println!(
        "ratios: end-to-end flate2 vs libdeflate {:.2}x",
        t_e2e / t_e2e_flate
    );
    println!(
        "share of end-to-end time: gunzip {:.0}%, parse {:.0}%, simulate {:.0}%",
        100.0 * t_flate / t_e2e_flate,
        100.0 * t_parse / t_e2e_flate,
        100.0 * (t_ps - t_parse).max(0.0) / t_e2e_flate
    );
    for (name, t) in [("full_parse", t_e2e_flate), ("job_filter", t_e2e_filter)] {
        let r = rows as f64 / t;
        println!(
            "RESULT end_to_end_{name}_rows_per_cpu_s={r:.0} target=5000000 {}",
            if r >= 5e6 { "PASS" } else { "BELOW" }
        );
    }
}

/// Stage: streams every gzip file through flate2; returns the bytes out.
fn flate2_streaming(all_gz: &[&Vec<u8>]) -> u64 {
    let mut n = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    for d in all_gz {
        let mut r = flate2::read::MultiGzDecoder::new(&d[..]);
        loop {
            let k = r.read(&mut buf).unwrap();
            if k == 0 {
                break;
            }
            n += k as u64;
        }
    }
    n
}

/// Stage: splits every CSV buffer into fields with the csv crate, parsing no numbers;
/// returns the fields seen.
fn csv_split<'a>(raw: impl Iterator<Item = &'a Vec<u8>>) -> u64 {
    let mut n = 0u64;
    for d in raw {
        let mut r = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(&d[..]);
        let mut rec = csv::ByteRecord::new();
        while r.read_byte_record(&mut rec).unwrap() {
            n += rec.len() as u64;
        }
    }
    n
}

/// Stage: parses every row of both tables into typed records; returns a value that
/// depends on each of them, so that none is optimised away.
fn typed_parse(ev_raw: &[Vec<u8>], us_raw: &[Vec<u8>]) -> u64 {
    let mut n = 0u64;
    for d in ev_raw {
        for r in TraceReader::<_, TaskEvent>::new(&d[..], "ev", OnError::Fail) {
            n += r.unwrap().time & 1;
        }
    }
    for d in us_raw {
        for r in TraceReader::<_, TaskUsage>::new(&d[..], "us", OnError::Fail) {
            n += r.unwrap().start_time & 1;
        }
    }
    n
}

/// Streams the event and usage parts, each opened by `open`, through the fine policy on
/// the default config; with `filter`, the readers keep only the sampled jobs. Returns the
/// rows simulated.
fn simulate<'a, R: Read>(
    ev: &'a [Vec<u8>],
    us: &'a [Vec<u8>],
    open: impl Fn(&'a [u8]) -> R,
    filter: bool,
) -> u64 {
    let cfg = Config::default();
    let mut s = Simulation::new(
        cfg.clone(),
        PolicyKind::Fine(giant_sim::policy::SortKey::Arrival),
        UsageModel::default(),
    )
    .unwrap();
    let mut e = Chain::new(ev.len(), |i| {
        let r = TraceReader::<_, TaskEvent>::new(open(&ev[i][..]), "ev", OnError::Fail);
        Ok(if filter {
            r.with_job_filter(giant_sim::model::job_filter(&cfg))
        } else {
            r
        })
    });
    let mut u = Chain::new(us.len(), |i| {
        let r = TraceReader::<_, TaskUsage>::new(open(&us[i][..]), "us", OnError::Fail);
        Ok(if filter {
            r.with_job_filter(giant_sim::model::job_filter(&cfg))
        } else {
            r
        })
    });
    let end = feed(&mut s, &mut e, &mut u, None).unwrap();
    s.finish(Some(end)).rows
}

/// One-shot libdeflate decompression of a single-member gzip buffer (size from the trailer).
fn gunzip_whole(data: &[u8]) -> Vec<u8> {
    let n = data.len();
    let size = u32::from_le_bytes([data[n - 4], data[n - 3], data[n - 2], data[n - 1]]) as usize;
    let mut out = vec![0u8; size];
    let got = libdeflater::Decompressor::new()
        .gzip_decompress(data, &mut out)
        .unwrap();
    out.truncate(got);
    out
}

fn memchr_count(d: &[u8]) -> u64 {
    d.iter().filter(|&&b| b == b'\n').count() as u64
}
