//! Turns [`Results`] into the markdown report (tables, acceptance verdicts)
//! and PNG charts.

use std::fmt::Write as _;
use std::path::Path;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use crate::runner::{CallHeavyRun, Results};
use crate::stats::median;

/// The acceptance goals of the issue.
pub const GOAL_FUTEX_VS_RAW: f64 = 1.3;
pub const GOAL_SPIN_VS_RAW: f64 = 1.5;
pub const GOAL_TCP_OVER_SHM: f64 = 3.0;
pub const GOAL_CALLHEAVY: f64 = 1.10;
pub const GOAL_CPU: f64 = 1.10;
pub const GOAL_BULK: f64 = 0.8;
/// "Uses none": less than this fraction of one CPU while idle.
pub const GOAL_IDLE_CPU: f64 = 0.001;

fn us(ns: f64) -> String {
    if ns.is_finite() {
        if ns < 1000.0 {
            format!("{:.3}", ns / 1000.0)
        } else {
            format!("{:.2}", ns / 1000.0)
        }
    } else {
        "–".into()
    }
}

fn ratio(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}×")
    } else {
        "–".into()
    }
}

fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "**met**",
        Some(false) => "**missed**",
        None => "not measured",
    }
}

/// Median of the per-round medians of a null-call or raw configuration.
pub(crate) fn rtt(r: &Results, label: &str) -> f64 {
    r.rtt_of(label).map_or(f64::NAN, |s| s.median_ns)
}

pub(crate) fn mean(r: &Results, label: &str) -> f64 {
    r.rtt_of(label).map_or(f64::NAN, |s| s.mean_ns)
}

fn p99(r: &Results, label: &str) -> f64 {
    r.rtt_of(label).map_or(f64::NAN, |s| s.p99_ns)
}

/// Medians over rounds of the call-heavy figures of one target.
#[derive(Debug, Clone, Copy, Default)]
pub struct Heavy {
    pub wall_s: f64,
    pub client_user_s: f64,
    pub client_sys_s: f64,
    pub server_user_s: f64,
    pub server_sys_s: f64,
    pub server_run_s: f64,
    pub cpu_s: f64,
    pub idle_frac: f64,
    pub idle_listener_frac: f64,
}

pub fn heavy(runs: &[CallHeavyRun]) -> Heavy {
    let m = |f: fn(&CallHeavyRun) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    Heavy {
        wall_s: m(|r| r.wall_s),
        client_user_s: m(|r| r.client_user_s),
        client_sys_s: m(|r| r.client_sys_s),
        server_user_s: m(|r| r.server_user_s),
        server_sys_s: m(|r| r.server_sys_s),
        server_run_s: m(|r| r.server_run_s),
        // Client CPU from getrusage plus the server's scheduler-counted CPU
        // (finer than /proc's 10 ms ticks).
        cpu_s: m(|r| r.client_user_s + r.client_sys_s + r.server_run_s),
        idle_frac: m(|r| {
            if r.idle_secs > 0.0 {
                r.idle_server_run_s / r.idle_secs
            } else {
                0.0
            }
        }),
        idle_listener_frac: m(|r| {
            if r.idle_secs > 0.0 {
                r.idle_listener_run_s / r.idle_secs
            } else {
                0.0
            }
        }),
    }
}

pub(crate) fn bulk(r: &Results, label: &str) -> (f64, f64) {
    let v = r.bulk.get(label).cloned().unwrap_or_default();
    (
        median(&v.iter().map(|x| x.0).collect::<Vec<_>>()),
        median(&v.iter().map(|x| x.1).collect::<Vec<_>>()),
    )
}

/// Time per forwarded null call split into its parts, in ns.
#[derive(Debug, Clone, Copy)]
pub struct Breakdown {
    pub total: f64,
    pub execution: f64,
    pub marshalling: f64,
    pub notification: f64,
    /// Of the remainder: the rings' own cost (ShmChannel minus raw ping-pong).
    pub ring: f64,
    pub remainder: f64,
}

pub fn breakdown(r: &Results, mode: &str) -> Option<Breakdown> {
    let m = r.marshal?;
    let timer = median(&r.timer.iter().map(|s| s.median_ns).collect::<Vec<_>>());
    let timer = if timer.is_finite() { timer } else { 0.0 };
    let total = rtt(r, &format!("call: shm+{mode}")) - timer;
    let raw = match mode {
        "futex" => rtt(r, "raw: futex"),
        "spin" => rtt(r, "raw: spin"),
        "same-core" => rtt(r, "raw: futex same-core"),
        _ => f64::NAN,
    };
    // The raw ping-pongs are timed in Rust (Instant), without the C timer.
    let chan = rtt(r, &format!("raw: shm channel {mode}"));
    if !total.is_finite() || !raw.is_finite() {
        return None;
    }
    let remainder = total - m.native_ns - m.marshal_ns - raw;
    Some(Breakdown {
        total,
        execution: m.native_ns,
        marshalling: m.marshal_ns,
        notification: raw,
        ring: if chan.is_finite() {
            chan - raw
        } else {
            f64::NAN
        },
        remainder,
    })
}

/// The markdown report.
pub fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        "Measured {} on `{}`: `nproc` = {}, CPU: {}, Linux {}, cpuidle: {}, commit `{}`.",
        r.date,
        r.machine,
        r.nproc,
        r.cpu_model,
        r.kernel,
        if r.idle.is_empty() {
            "not recorded"
        } else {
            &r.idle
        },
        r.git_rev
    );
    let _ = writeln!(
        w,
        "{} rounds of the round-trip section and {} of the workloads, configurations interleaved in rotating order (ABAB); figures are medians over rounds (of each round's own median / p99). Total run time {:.0} s. Same-core mode: {}.\n",
        r.rounds,
        r.config.get("work_rounds").map_or("?", |s| s.as_str()),
        r.total_s,
        if r.same_core { "measured" } else { "not available in this wormhole-server (skipped)" }
    );

    section_round_trips(w, r);
    section_acceptance(w, r);
    section_breakdown(w, r);
    section_cpu_use(w, r);
    section_bulk(w, r);
    section_clpeak(w, r);
    if !r.errors.is_empty() {
        let _ = writeln!(w, "\n### Notes and failed steps\n");
        for e in &r.errors {
            let _ = writeln!(w, "- {}", e.replace('\n', " "));
        }
    }
    let _ = writeln!(
        w,
        "\nCharts: `rtt.png`, `breakdown.png`, `cpu.png`, `ratios.png` beside this file."
    );
    s
}

/// a. The null-call round trip: raw primitives and every mode.
fn section_round_trips(w: &mut String, r: &Results) {
    let _ = writeln!(w, "### a. Null-call round trip\n");
    let _ = writeln!(w, "`clGetEventInfo(CL_EVENT_COMMAND_EXECUTION_STATUS)` on a completed event, timed per call in a C program (`whbench nullcall`); raw primitives are two processes ping-ponging 30-byte messages (`wh-bench pingpong`). The C timer itself costs {} µs per sample (included in every call row).\n", us(median(&r.timer.iter().map(|s| s.median_ns).collect::<Vec<_>>())));
    let _ = writeln!(
        w,
        "| configuration | median µs | mean µs | p99 µs | compared with (medians) |"
    );
    let _ = writeln!(w, "| --- | ---: | ---: | ---: | --- |");
    let rows: [(&str, &str, &str); 12] = [
        ("call: native", "native (PoCL, no forwarding)", ""),
        ("raw: futex", "raw futex ping-pong", ""),
        ("call: shm+futex", "Wormhole shm + futex", "raw: futex"),
        ("raw: spin", "raw spin ping-pong", ""),
        ("call: shm+spin", "Wormhole shm + spin", "raw: spin"),
        (
            "raw: futex same-core",
            "raw futex ping-pong, both on CPU 0",
            "",
        ),
        (
            "call: shm+same-core",
            "Wormhole shm + same-core",
            "raw: futex same-core",
        ),
        ("raw: tcp", "raw TCP loopback ping-pong", ""),
        ("call: tcp", "Wormhole TCP loopback", "raw: tcp"),
        (
            "raw: shm channel futex",
            "ShmChannel alone (rings, futex)",
            "raw: futex",
        ),
        (
            "raw: shm channel spin",
            "ShmChannel alone (rings, spin)",
            "raw: spin",
        ),
        (
            "raw: shm channel same-core",
            "ShmChannel alone (rings, same-core)",
            "raw: futex same-core",
        ),
    ];
    for (key, name, vs) in rows {
        if r.rtt_of(key).is_none() {
            continue;
        }
        let cmp = if vs.is_empty() {
            String::new()
        } else {
            format!(
                "{} of {}",
                ratio(rtt(r, key) / rtt(r, vs)),
                vs.trim_start_matches("raw: ")
            )
        };
        let _ = writeln!(
            w,
            "| {name} | {} | {} | {} | {cmp} |",
            us(rtt(r, key)),
            us(mean(r, key)),
            us(p99(r, key))
        );
    }
    let di: Vec<String> = ["native", "shm+futex", "shm+spin", "shm+same-core", "tcp"]
        .iter()
        .filter_map(|t| {
            r.rtt_of(&format!("call(device_info): {t}"))
                .map(|x| format!("{t} {} µs", us(x.median_ns)))
        })
        .collect();
    let _ = writeln!(
        w,
        "\n`clGetDeviceInfo(CL_DEVICE_TYPE)` (a server-override call), medians: {}.\n",
        di.join(", ")
    );
}

/// The acceptance table, and why each goal missed.
fn section_acceptance(w: &mut String, r: &Results) {
    let futex = rtt(r, "call: shm+futex") / rtt(r, "raw: futex");
    // Where some wake-ups land on the waker's CPU and others on a halted
    // one, both sides are bimodal and their medians jump between modes from
    // run to run; the mean, the cost per call, is steadier. Shown beside.
    let futex_mean = mean(r, "call: shm+futex") / mean(r, "raw: futex");
    let spin = rtt(r, "call: shm+spin") / rtt(r, "raw: spin");
    let tcp_f = rtt(r, "call: tcp") / rtt(r, "call: shm+futex");
    let tcp_s = rtt(r, "call: tcp") / rtt(r, "call: shm+spin");
    let native_h = r.callheavy.get("native").map(|v| heavy(v));
    let fin = |x: f64| if x.is_finite() { Some(x) } else { None };
    let _ = writeln!(w, "### Acceptance\n");
    let _ = writeln!(w, "| goal | measured | verdict |");
    let _ = writeln!(w, "| --- | --- | --- |");
    let _ = writeln!(
        w,
        "| null call shm+futex ≤ {GOAL_FUTEX_VS_RAW}× raw futex ping-pong | {} (means: {}) | {} |",
        ratio(futex),
        ratio(futex_mean),
        verdict(fin(futex).map(|x| x <= GOAL_FUTEX_VS_RAW))
    );
    let _ = writeln!(
        w,
        "| null call shm+spin ≤ {GOAL_SPIN_VS_RAW}× raw spin ping-pong | {} | {} |",
        ratio(spin),
        verdict(fin(spin).map(|x| x <= GOAL_SPIN_VS_RAW))
    );
    let _ = writeln!(
        w,
        "| TCP ≥ {GOAL_TCP_OVER_SHM}× slower than shm+futex / shm+spin | {} / {} | {} / {} |",
        ratio(tcp_f),
        ratio(tcp_s),
        verdict(fin(tcp_f).map(|x| x >= GOAL_TCP_OVER_SHM)),
        verdict(fin(tcp_s).map(|x| x >= GOAL_TCP_OVER_SHM))
    );
    for mode in ["shm+futex", "shm+spin", "shm+same-core"] {
        let (Some(n), Some(h)) = (native_h, r.callheavy.get(mode).map(|v| heavy(v))) else {
            continue;
        };
        let wr = h.wall_s / n.wall_s;
        let cr = h.cpu_s / n.cpu_s;
        let _ = writeln!(w, "| call-heavy wall ≤ {GOAL_CALLHEAVY}× native ({mode}) | {} ({:.3} s vs {:.3} s) | {} |", ratio(wr), h.wall_s, n.wall_s, verdict(fin(wr).map(|x| x <= GOAL_CALLHEAVY)));
        let _ = writeln!(w, "| call-heavy client+server CPU ≤ {GOAL_CPU}× native ({mode}) | {} ({:.3} s vs {:.3} s) | {} |", ratio(cr), h.cpu_s, n.cpu_s, verdict(fin(cr).map(|x| x <= GOAL_CPU)));
        let _ = writeln!(
            w,
            "| idle server uses no CPU ({mode}) | tenant {:.3}% of a CPU, listener {:.3}% | {} |",
            h.idle_frac * 100.0,
            h.idle_listener_frac * 100.0,
            verdict(Some(
                h.idle_frac < GOAL_IDLE_CPU && h.idle_listener_frac < GOAL_IDLE_CPU
            ))
        );
    }
    let (nw, nr) = bulk(r, "native");
    for mode in ["shm+futex", "shm+spin", "shm+futex-streamed"] {
        let (bw, br) = bulk(r, mode);
        if !bw.is_finite() {
            continue;
        }
        let _ = writeln!(w, "| bulk {} MiB ≥ {GOAL_BULK}× native bandwidth ({mode}) | write {} ({bw:.2} vs {nw:.2} GB/s), read {} ({br:.2} vs {nr:.2} GB/s) | {} |", r.config.get("bulk_mib").map_or("?", |s| s.as_str()), ratio(bw / nw), ratio(br / nr), verdict(Some(bw / nw >= GOAL_BULK && br / nr >= GOAL_BULK)));
    }

    let _ = writeln!(w, "\n{}", crate::misses::markdown(r));
}

/// b. Where a forwarded null call's time goes.
fn section_breakdown(w: &mut String, r: &Results) {
    let _ = writeln!(w, "### b. Where a forwarded null call's time goes\n");
    if let Some(m) = r.marshal {
        let _ = writeln!(w, "Marshalling measured in one process (`wh-bench marshal`): the stub's encoding, the server's generated decoder + handle validation + dispatch, and the reply's decoding, minus the native call: {:.0} ns − {:.0} ns = **{:.0} ns** per call (request {} B, reply {} B). Notification is the raw ping-pong of the same handoff; execution is the native call; the remainder is everything else (ring copies and bookkeeping, ICD loader dispatch, client registry and channel locks, scheduler wake-up latency beyond the raw ping-pong). Timer overhead is subtracted.\n", m.inprocess_ns, m.native_ns, m.marshal_ns, m.request_bytes, m.reply_bytes);
    }
    let _ = writeln!(w, "| mode | total µs | execution | marshalling | notification | remainder | of which ring transport |");
    let _ = writeln!(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for mode in ["futex", "spin", "same-core"] {
        if let Some(b) = breakdown(r, mode) {
            let pct = |x: f64| format!("{} ({:.0}%)", us(x), 100.0 * x / b.total);
            let _ = writeln!(
                w,
                "| shm+{mode} | {} | {} | {} | {} | {} | {} |",
                us(b.total),
                pct(b.execution),
                pct(b.marshalling),
                pct(b.notification),
                pct(b.remainder),
                if b.ring.is_finite() {
                    pct(b.ring)
                } else {
                    "–".into()
                }
            );
        }
    }
}

/// c. CPU use of the call-heavy workload, and idle CPU.
fn section_cpu_use(w: &mut String, r: &Results) {
    let native_h = r.callheavy.get("native").map(|v| heavy(v));
    let _ = writeln!(w, "\n### c. CPU use of the call-heavy workload\n");
    let _ = writeln!(w, "{} launches (clSetKernelArg + clEnqueueNDRangeKernel of a 256-item kernel), clFinish every {}. Client CPU from getrusage (all its threads, PoCL's workers included when native); server CPU of the tenant process from /proc (user/sys in 10 ms ticks; the total from schedstat). Idle: the tenant's and the listener's CPU over {:.1} s while the client is connected and idle.\n", r.config.get("launches").map_or("?", |s| s.as_str()), r.config.get("finish_every").map_or("?", |s| s.as_str()), r.callheavy.values().flatten().map(|c| c.idle_secs).fold(0.0, f64::max));
    let _ = writeln!(w, "| target | wall s | client user s | client sys s | server user s | server sys s | client+server CPU s | CPU vs native | wall vs native | idle tenant CPU |");
    let _ = writeln!(
        w,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for (label, runs) in ordered(&r.callheavy) {
        let h = heavy(runs);
        let (cr, wr) = native_h.map_or((f64::NAN, f64::NAN), |n| {
            (h.cpu_s / n.cpu_s, h.wall_s / n.wall_s)
        });
        let idle = if label == "native" {
            "–".to_string()
        } else {
            format!("{:.3}%", h.idle_frac * 100.0)
        };
        let _ = writeln!(
            w,
            "| {label} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {idle} |",
            h.wall_s,
            h.client_user_s,
            h.client_sys_s,
            h.server_user_s,
            h.server_sys_s,
            h.cpu_s,
            ratio(cr),
            ratio(wr)
        );
    }
}

/// d. Bulk transfers.
fn section_bulk(w: &mut String, r: &Results) {
    let (nw, nr) = bulk(r, "native");
    let _ = writeln!(w, "\n### d. Bulk transfer\n");
    let _ = writeln!(w, "{} MiB written (`clEnqueueWriteBuffer` blocking + clFinish) and read back, {} repetitions per run; GB/s = 10⁹ bytes/s.\n", r.config.get("bulk_mib").map_or("?", |s| s.as_str()), r.config.get("bulk_reps").map_or("?", |s| s.as_str()));
    let _ = writeln!(
        w,
        "| target | write GB/s | read GB/s | write vs native | read vs native |"
    );
    let _ = writeln!(w, "| --- | ---: | ---: | ---: | ---: |");
    for (label, _) in ordered(&r.bulk) {
        let (bw, br) = bulk(r, label);
        let _ = writeln!(
            w,
            "| {label} | {bw:.2} | {br:.2} | {} | {} |",
            ratio(bw / nw),
            ratio(br / nr)
        );
    }
}

/// d. clpeak, native beside remoted, when it ran.
fn section_clpeak(w: &mut String, r: &Results) {
    if !r.clpeak.is_empty() {
        let _ = writeln!(
            w,
            "\n### d. clpeak (Debian's, unmodified): `clpeak {}`\n",
            r.clpeak_args.join(" ")
        );
        let nat = r.clpeak.get("native").cloned().unwrap_or_default();
        let rem = r.clpeak.get("shm+futex").cloned().unwrap_or_default();
        let mut keys: Vec<String> = nat
            .iter()
            .chain(rem.iter())
            .flat_map(|c| c.metrics.keys().cloned())
            .collect();
        keys.sort();
        keys.dedup();
        let med = |runs: &[crate::runner::ClpeakRun], k: &str| {
            median(
                &runs
                    .iter()
                    .filter_map(|c| c.metrics.get(k).copied())
                    .collect::<Vec<_>>(),
            )
        };
        let _ = writeln!(
            w,
            "| metric | native | via wormhole-run (shm+futex) | remoted / native |"
        );
        let _ = writeln!(w, "| --- | ---: | ---: | ---: |");
        for k in &keys {
            let (a, b) = (med(&nat, k), med(&rem, k));
            let _ = writeln!(w, "| {k} | {a:.2} | {b:.2} | {} |", ratio(b / a));
        }
        let wall = |runs: &[crate::runner::ClpeakRun]| {
            median(
                &runs
                    .iter()
                    .filter(|c| c.error.is_none())
                    .map(|c| c.wall_s)
                    .collect::<Vec<_>>(),
            )
        };
        let _ = writeln!(
            w,
            "| wall time of the whole run, s | {:.1} | {:.1} | {} |",
            wall(&nat),
            wall(&rem),
            ratio(wall(&rem) / wall(&nat))
        );
        for c in nat.iter().chain(rem.iter()) {
            if let Some(e) = &c.error {
                let _ = writeln!(w, "\nclpeak error: {e}");
            }
        }
    }
}

/// Native first, then the rest in name order.
fn ordered<T>(m: &std::collections::BTreeMap<String, T>) -> Vec<(&str, &T)> {
    let mut v: Vec<(&str, &T)> = m.iter().map(|(k, v)| (k.as_str(), v)).collect();
    v.sort_by_key(|(k, _)| (*k != "native", k.to_string()));
    v
}

// ---------------------------------------------------------------- charts

const COLORS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
];

/// Registers a TrueType font for the charts; false if none is installed.
pub fn register_font() -> bool {
    for p in [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
    ] {
        if let Ok(b) = std::fs::read(p) {
            let b: &'static [u8] = Box::leak(b.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, b).is_ok() {
                return true;
            }
        }
    }
    false
}

type ChartResult = Result<(), Box<dyn std::error::Error>>;

/// Bars per category; several series are stacked. `marks` (optional) adds a
/// dot per category (p99), `hline` a dashed reference line.
#[allow(clippy::too_many_arguments)]
fn bars(
    path: &Path,
    title: &str,
    ylabel: &str,
    cats: &[String],
    series: &[(String, Vec<f64>)],
    log: bool,
    marks: Option<&[f64]>,
    hline: Option<f64>,
) -> ChartResult {
    let width = (cats.len() as u32 * 100).clamp(800, 1400);
    let root = BitMapBackend::new(path, (width, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = cats.len();
    let tops: Vec<f64> = (0..n)
        .map(|i| {
            series
                .iter()
                .map(|(_, v)| v.get(i).copied().unwrap_or(0.0).max(0.0))
                .sum::<f64>()
        })
        .collect();
    let ymax = y_top(&tops, marks, hline);
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(70)
        .y_label_area_size(70);
    let label = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) => cats.get(*i as usize).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    if n == 0 {
        return Ok(());
    }
    // A segmented range covers both ends: 0..n-1 makes n segments.
    let n32 = n as i32 - 1;
    macro_rules! draw {
        ($chart:expr, $ylo:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(n.max(1))
                .x_label_formatter(&label)
                .x_label_style(("sans-serif", 13))
                .y_desc(ylabel)
                .draw()?;
            for (si, (name, vals)) in series.iter().enumerate() {
                let color = COLORS[si % COLORS.len()];
                let mut rects = Vec::new();
                for i in 0..n {
                    let below: f64 = series[..si]
                        .iter()
                        .map(|(_, v)| v.get(i).copied().unwrap_or(0.0).max(0.0))
                        .sum();
                    let h = vals.get(i).copied().unwrap_or(0.0).max(0.0);
                    if h <= 0.0 || !h.is_finite() {
                        continue;
                    }
                    let y0 = if si == 0 { $ylo } else { below.max($ylo) };
                    let mut r = Rectangle::new(
                        [
                            (SegmentValue::Exact(i as i32), y0),
                            (SegmentValue::Exact(i as i32 + 1), below + h),
                        ],
                        color.filled(),
                    );
                    r.set_margin(0, 0, 14, 14);
                    rects.push(r);
                }
                let s = chart.draw_series(rects)?;
                if series.len() > 1 {
                    s.label(name.as_str()).legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled())
                    });
                }
            }
            if let Some(m) = marks {
                let s = chart.draw_series(
                    m.iter()
                        .enumerate()
                        .filter(|(_, v)| v.is_finite() && **v > 0.0)
                        .map(|(i, v)| {
                            Circle::new((SegmentValue::CenterOf(i as i32), *v), 5, BLACK.filled())
                        }),
                )?;
                s.label("p99")
                    .legend(|(x, y)| Circle::new((x + 5, y), 4, BLACK.filled()));
            }
            if let Some(h) = hline {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![
                        (SegmentValue::Exact(0), h),
                        (SegmentValue::Exact(n32 + 1), h),
                    ],
                    RED.stroke_width(2),
                )))?;
            }
            for (i, t) in tops.iter().enumerate() {
                if *t > 0.0 && t.is_finite() {
                    chart.draw_series(std::iter::once(Text::new(
                        format!("{:.3}", t)
                            .trim_end_matches('0')
                            .trim_end_matches('.')
                            .to_string(),
                        (SegmentValue::CenterOf(i as i32), *t),
                        ("sans-serif", 12).into_font(),
                    )))?;
                }
            }
            if series.len() > 1 || marks.is_some() {
                chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .position(SeriesLabelPosition::UpperLeft)
                    .draw()?;
            }
        }};
    }
    if log {
        let lo = log_floor(&tops);
        draw!(
            b.build_cartesian_2d((0..n32).into_segmented(), (lo..ymax * 2.0).log_scale())?,
            lo
        );
    } else {
        draw!(
            b.build_cartesian_2d((0..n32).into_segmented(), 0.0..ymax)?,
            0.0
        );
    }
    root.present()?;
    Ok(())
}

/// The y axis' top: above every stacked bar, mark and line, with room for
/// the labels over the bars.
fn y_top(tops: &[f64], marks: Option<&[f64]>, hline: Option<f64>) -> f64 {
    let ymax = marks
        .unwrap_or_default()
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .chain(tops.iter().copied())
        .chain(hline)
        .fold(0.0f64, f64::max);
    if ymax > 0.0 {
        ymax * 1.15
    } else {
        1.0
    }
}

/// A log axis' bottom: half the smallest bar (and at most 0.5).
fn log_floor(tops: &[f64]) -> f64 {
    let lo = tops
        .iter()
        .copied()
        .filter(|x| *x > 0.0)
        .fold(f64::INFINITY, f64::min)
        .min(1.0)
        / 2.0;
    if lo.is_finite() && lo > 0.0 {
        lo
    } else {
        0.001
    }
}

/// Writes the four charts into `dir`; returns the files written.
pub fn charts(r: &Results, dir: &Path) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut written = Vec::new();
    // Round trips, µs, log scale.
    let keys = [
        ("call: native", "native"),
        ("raw: futex", "raw futex"),
        ("call: shm+futex", "shm+futex"),
        ("raw: spin", "raw spin"),
        ("call: shm+spin", "shm+spin"),
        ("raw: futex same-core", "raw same-core"),
        ("call: shm+same-core", "shm+same-core"),
        ("raw: tcp", "raw TCP"),
        ("call: tcp", "Wormhole TCP"),
    ];
    let present: Vec<(&str, &str)> = keys
        .iter()
        .copied()
        .filter(|(k, _)| r.rtt_of(k).is_some())
        .collect();
    let cats: Vec<String> = present.iter().map(|(_, n)| n.to_string()).collect();
    let med: Vec<f64> = present.iter().map(|(k, _)| rtt(r, k) / 1000.0).collect();
    let p: Vec<f64> = present.iter().map(|(k, _)| p99(r, k) / 1000.0).collect();
    bars(
        &dir.join("rtt.png"),
        "Null-call round trip (median bars, p99 dots)",
        "µs (log scale)",
        &cats,
        &[("median".into(), med)],
        true,
        Some(&p),
        None,
    )?;
    written.push("rtt.png".into());

    let modes: Vec<(String, crate::report::Breakdown)> = ["futex", "spin", "same-core"]
        .iter()
        .filter_map(|m| breakdown(r, m).map(|b| (format!("shm+{m}"), b)))
        .collect();
    if !modes.is_empty() {
        let cats: Vec<String> = modes.iter().map(|(m, _)| m.clone()).collect();
        let part =
            |f: fn(&Breakdown) -> f64| modes.iter().map(|(_, b)| f(b) / 1000.0).collect::<Vec<_>>();
        bars(
            &dir.join("breakdown.png"),
            "Forwarded null call: where the time goes",
            "µs",
            &cats,
            &[
                ("execution (native call)".into(), part(|b| b.execution)),
                ("marshalling".into(), part(|b| b.marshalling)),
                (
                    "notification (raw ping-pong)".into(),
                    part(|b| b.notification),
                ),
                ("remainder".into(), part(|b| b.remainder.max(0.0))),
            ],
            false,
            None,
            None,
        )?;
        written.push("breakdown.png".into());
    }

    let hv: Vec<(&str, Heavy)> = ordered(&r.callheavy)
        .into_iter()
        .map(|(k, v)| (k, heavy(v)))
        .collect();
    if !hv.is_empty() {
        let cats: Vec<String> = hv.iter().map(|(k, _)| k.to_string()).collect();
        let part = |f: fn(&Heavy) -> f64| hv.iter().map(|(_, h)| f(h)).collect::<Vec<_>>();
        bars(
            &dir.join("cpu.png"),
            "Call-heavy workload: CPU seconds (client + server)",
            "CPU s",
            &cats,
            &[
                ("client user".into(), part(|h| h.client_user_s)),
                ("client sys".into(), part(|h| h.client_sys_s)),
                ("server user".into(), part(|h| h.server_user_s)),
                ("server sys".into(), part(|h| h.server_sys_s)),
            ],
            false,
            None,
            None,
        )?;
        written.push("cpu.png".into());
    }

    if let Some(n) = r.callheavy.get("native").map(|v| heavy(v)) {
        let (nw, nr) = bulk(r, "native");
        let mut cats = Vec::new();
        let mut vals = Vec::new();
        for (mode, short) in [
            ("shm+futex", "futex"),
            ("shm+spin", "spin"),
            ("shm+same-core", "same-core"),
        ] {
            let Some(h) = r.callheavy.get(mode).map(|v| heavy(v)) else {
                continue;
            };
            let (bw, br) = bulk(r, mode);
            cats.extend([
                format!("wall {short}"),
                format!("CPU {short}"),
                format!("write {short}"),
                format!("read {short}"),
            ]);
            vals.extend([h.wall_s / n.wall_s, h.cpu_s / n.cpu_s, bw / nw, br / nr]);
        }
        if !cats.is_empty() {
            bars(
                &dir.join("ratios.png"),
                "Remoted / native (red line: 1.0; goals: wall, CPU ≤ 1.1; bandwidth ≥ 0.8)",
                "ratio",
                &cats,
                &[("ratio".into(), vals)],
                false,
                None,
                Some(1.0),
            )?;
            written.push("ratios.png".into());
        }
    }
    Ok(written)
}
