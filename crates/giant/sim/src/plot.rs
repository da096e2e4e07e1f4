//! PNG figures (plotters, bitmap backend, embedded DejaVu Sans so no system fonts are needed).

use std::path::Path;
use std::sync::Once;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::metrics::Summary;
use crate::SimError;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

fn register_font() {
    REGISTER.call_once(|| {
        // The embedded font is a valid TTF; if registration failed, text would be missing
        // and drawing returns an error we report, so ignoring the result here is safe.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
type Chart<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A metric to plot: its title and how to read it from a run.
pub type Metric<'a> = (&'a str, fn(&Summary) -> f64);

fn perr(path: &Path) -> impl Fn(String) -> SimError + '_ {
    move |msg| SimError::Plot {
        path: path.to_path_buf(),
        msg,
    }
}

macro_rules! tryp {
    ($e:expr, $path:expr) => {
        $e.map_err(|e| perr($path)(e.to_string()))?
    };
}

/// Short label of a policy for crowded axes.
pub fn short(policy: &str) -> &str {
    match policy {
        "fine-cpu-request" => "f-cpureq",
        "fine-cpu-usage" => "f-cpu",
        "fine-mem-usage" => "f-mem",
        "fine-reverse-cpu-usage" => "f-revcpu",
        "fine-cache-misses" => "f-cache",
        "budget-best-fit" => "ours",
        p => p,
    }
}

fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 10] = [
        RGBColor(0x44, 0x44, 0x44),
        RGBColor(0xd6, 0x27, 0x28),
        RGBColor(0x1f, 0x77, 0xb4),
        RGBColor(0xff, 0x7f, 0x0e),
        RGBColor(0x2c, 0xa0, 0x2c),
        RGBColor(0x94, 0x67, 0xbd),
        RGBColor(0x8c, 0x56, 0x4b),
        RGBColor(0xe3, 0x77, 0xc2),
        RGBColor(0x17, 0xbe, 0xcf),
        RGBColor(0xbc, 0xbd, 0x22),
    ];
    C[i % C.len()]
}

/// Draws the legend box of a chart's labelled series.
fn legend<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    path: &Path,
    position: SeriesLabelPosition,
    font_size: u32,
) -> Result<(), SimError> {
    tryp!(
        chart
            .configure_series_labels()
            .position(position)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", font_size))
            .draw(),
        path
    );
    Ok(())
}

/// The legend mark of a line series drawn in `c`.
fn line_key(c: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
}

/// The tick label at `x` on an axis with one bar per label at 0, 1, 2...: the bar's
/// label on a bar, nothing between bars.
fn bar_label(labels: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < labels.len() {
        labels[i as usize].clone()
    } else {
        String::new()
    }
}

fn bars(
    area: &Area<'_>,
    path: &Path,
    title: &str,
    labels: &[String],
    values: &[f64],
    ylabel: &str,
) -> Result<(), SimError> {
    let max = values.iter().cloned().fold(0.0, f64::max);
    let min = values.iter().cloned().fold(0.0, f64::min);
    let top = if max > 0.0 { max * 1.15 } else { 1.0 };
    let bottom = if min < 0.0 { min * 1.15 } else { 0.0 };
    let n = labels.len();
    let mut chart = tryp!(
        ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(8)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), bottom..top),
        path
    );
    let lab = labels.to_vec();
    tryp!(
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| bar_label(&lab, *x))
            .y_desc(ylabel)
            .label_style(("sans-serif", 12))
            .draw(),
        path
    );
    tryp!(
        chart.draw_series(values.iter().enumerate().map(|(i, &v)| {
            let x = i as f64;
            Rectangle::new([(x - 0.35, 0.0), (x + 0.35, v)], color(i).filled())
        })),
        path
    );
    Ok(())
}

/// The usage label every figure carries (modelled usage must never pass for measured).
fn usage_note(runs: &[Summary]) -> String {
    match runs.first() {
        Some(r) => format!("CPU usage: {} (see docs/giant.md)", r.usage_source),
        None => String::new(),
    }
}

/// Splits off a strip at the bottom of `area` and writes the usage note there.
fn noted<'a>(area: &Area<'a>, path: &Path, runs: &[Summary]) -> Result<Area<'a>, SimError> {
    let h = area.dim_in_pixel().1;
    let (body, foot) = area.split_vertically(h.saturating_sub(24));
    tryp!(
        foot.draw_text(
            &usage_note(runs),
            &("sans-serif", 14).into_font().color(&RGBColor(90, 90, 90)),
            (10, 4)
        ),
        path
    );
    Ok(body)
}

fn root<'a>(path: &'a Path, w: u32, h: u32) -> Result<Area<'a>, SimError> {
    register_font();
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|err| SimError::Output {
            path: d.to_path_buf(),
            err,
        })?;
    }
    let area = BitMapBackend::new(path, (w, h)).into_drawing_area();
    tryp!(area.fill(&WHITE), path);
    Ok(area)
}

/// Policy comparison: Gini, mean CPU, overcommitted machines and network, one bar per policy.
pub fn policy_comparison(path: &Path, runs: &[Summary], note: &str) -> Result<(), SimError> {
    let area = root(path, 1800, 900)?;
    let (head, body) = area.split_vertically(30);
    tryp!(head.titled(note, ("sans-serif", 16)), path);
    let panels = body.split_evenly((2, 3));
    let labels: Vec<String> = runs.iter().map(|r| short(&r.policy).to_string()).collect();
    let base = runs
        .iter()
        .find(|r| r.policy == "none")
        .map_or(0.0, |r| r.gini);
    let values: [(&str, &str, Vec<f64>); 6] = [
        (
            "Gini of per-machine CPU",
            "Gini",
            runs.iter().map(|r| r.gini).collect(),
        ),
        (
            "Gini reduction vs none (higher = better)",
            "Gini(none) - Gini",
            runs.iter().map(|r| base - r.gini).collect(),
        ),
        (
            "Balance per GB migrated",
            "Gini reduction / GB",
            runs.iter().map(|r| r.balance_per_gb(base)).collect(),
        ),
        (
            "Mean CPU utilisation",
            "usage / capacity",
            runs.iter().map(|r| r.mean_cpu).collect(),
        ),
        (
            "Machines over capacity",
            "fraction",
            runs.iter().map(|r| r.overcommitted).collect(),
        ),
        (
            "Migration traffic (whole cluster)",
            "Mbit/s",
            runs.iter().map(|r| r.migration_mbit_s).collect(),
        ),
    ];
    for (p, (t, y, v)) in panels.iter().zip(values) {
        bars(p, path, t, &labels, &v, y)?;
    }
    tryp!(area.present(), path);
    Ok(())
}

/// Lines over trace time (hours) for each run, with `f` giving the y value of a sample.
/// The y axis for values `ys`: up to a little above the greatest, and from 0 or, when
/// they all sit far above 0 (Gini, whose differences are small), from just below the least.
fn y_range(ys: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (least, greatest) = ys.fold((f64::INFINITY, 0.0_f64), |(lo, hi), y| {
        (lo.min(y), hi.max(y))
    });
    let ymax = if greatest > 0.0 { greatest * 1.05 } else { 1.0 };
    let ymin = if least.is_finite() && least > 0.5 * ymax {
        least * 0.97
    } else {
        0.0
    };
    ymin..ymax
}

/// Axes over `xs` × `ys` on `area` under `caption` (text, size), the mesh labelled
/// with the x description and, if given, the y one, in text of `label_px`.
fn axes<'a, 'b>(
    area: &'a Area<'b>,
    path: &Path,
    (caption, caption_px): (&str, u32),
    (xs, ys): (std::ops::Range<f64>, std::ops::Range<f64>),
    (x_desc, y_desc): (&str, Option<&str>),
    label_px: u32,
) -> Result<Chart<'a, 'b>, SimError> {
    let mut chart = tryp!(
        ChartBuilder::on(area)
            .caption(caption, ("sans-serif", caption_px))
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(xs, ys),
        path
    );
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x_desc).label_style(("sans-serif", label_px));
    if let Some(y) = y_desc {
        mesh.y_desc(y);
    }
    tryp!(mesh.draw(), path);
    Ok(chart)
}

pub fn over_time(
    path: &Path,
    runs: &[Summary],
    title: &str,
    ylabel: &str,
    f: fn(&crate::metrics::Interval) -> f64,
) -> Result<(), SimError> {
    let whole = root(path, 1200, 700)?;
    let area = noted(&whole, path, runs)?;
    let xmax = runs
        .iter()
        .flat_map(|r| r.intervals.last())
        .map(|i| i.time_s / 3600.0)
        .fold(0.1, f64::max);
    let ys = y_range(runs.iter().flat_map(|r| r.intervals.iter().map(f)));
    let mut chart = axes(
        &area,
        path,
        (title, 22),
        (0f64..xmax, ys),
        ("trace time (hours)", Some(ylabel)),
        14,
    )?;
    for (i, r) in runs.iter().enumerate() {
        let c = color(i);
        let s = tryp!(
            chart.draw_series(LineSeries::new(
                r.intervals.iter().map(|iv| (iv.time_s / 3600.0, f(iv))),
                c.stroke_width(2),
            )),
            path
        );
        s.label(short(&r.policy).to_string()).legend(line_key(c));
    }
    legend(&mut chart, path, SeriesLabelPosition::UpperLeft, 14)?;
    tryp!(whole.present(), path);
    Ok(())
}

/// Parameter sweep: one line per policy for each metric, x = `x(summary)`.
pub fn sweep(
    path: &Path,
    runs: &[Summary],
    xlabel: &str,
    x: fn(&Summary) -> f64,
    metrics: &[Metric<'_>],
) -> Result<(), SimError> {
    let cols = metrics.len().min(2);
    let rows = metrics.len().div_ceil(2);
    let whole = root(path, 700 * cols as u32, 500 * rows as u32 + 24)?;
    let area = noted(&whole, path, runs)?;
    let panels = area.split_evenly((rows, cols));
    let mut policies: Vec<&str> = Vec::new();
    for r in runs {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let xmin = runs.iter().map(x).fold(f64::INFINITY, f64::min);
    let xmax = runs.iter().map(x).fold(f64::NEG_INFINITY, f64::max);
    let (xmin, xmax) = if xmin < xmax {
        (xmin, xmax)
    } else {
        (xmin - 1.0, xmin + 1.0)
    };
    for (panel, (name, f)) in panels.iter().zip(metrics) {
        let ys = y_range(runs.iter().map(f));
        let mut chart = axes(
            panel,
            path,
            (name, 20),
            (xmin..xmax, ys),
            (xlabel, None),
            13,
        )?;
        for (i, p) in policies.iter().enumerate() {
            let c = color(i);
            let mut pts: Vec<(f64, f64)> = runs
                .iter()
                .filter(|r| r.policy == *p)
                .map(|r| (x(r), f(r)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let s = tryp!(
                chart.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2))),
                path
            );
            s.label(short(p).to_string()).legend(line_key(c));
            tryp!(
                chart.draw_series(pts.into_iter().map(|pt| Circle::new(pt, 3, c.filled()))),
                path
            );
        }
        legend(&mut chart, path, SeriesLabelPosition::UpperRight, 12)?;
    }
    tryp!(whole.present(), path);
    Ok(())
}

/// How many moves went to the least-loaded and to the second least-loaded machine.
pub fn first_second(path: &Path, runs: &[Summary]) -> Result<(), SimError> {
    let whole = root(path, 1200, 600)?;
    let area = noted(&whole, path, runs)?;
    let runs: Vec<&Summary> = runs
        .iter()
        .filter(|r| r.to_first + r.to_second > 0)
        .collect();
    let n = runs.len().max(1);
    let ymax = runs
        .iter()
        .map(|r| r.to_first.max(r.to_second) as f64)
        .fold(0.0, f64::max);
    let ymax = if ymax > 0.0 { ymax * 1.15 } else { 1.0 };
    let labels: Vec<String> = runs.iter().map(|r| short(&r.policy).to_string()).collect();
    let mut chart = tryp!(
        ChartBuilder::on(&area)
            .caption(
                "Destinations: least-loaded (left) vs second least-loaded (right)",
                ("sans-serif", 20)
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..ymax),
        path
    );
    tryp!(
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| bar_label(&labels, *x))
            .y_desc("tasks moved")
            .label_style(("sans-serif", 13))
            .draw(),
        path
    );
    // Two bars per run: least-loaded left of the tick, second least-loaded right of it.
    // (legend, colour, left and right edge from the tick, moves counted)
    type Side = (&'static str, RGBColor, f64, f64, fn(&Summary) -> u64);
    let sides: [Side; 2] = [
        ("least-loaded", color(2), -0.38, -0.02, |r| r.to_first),
        ("second least-loaded", color(3), 0.02, 0.38, |r| r.to_second),
    ];
    for (name, c, left, right, moved) in sides {
        tryp!(
            chart.draw_series(runs.iter().enumerate().map(|(i, r)| {
                let x = i as f64;
                Rectangle::new([(x + left, 0.0), (x + right, moved(r) as f64)], c.filled())
            })),
            path
        )
        .label(name)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], c.filled()));
    }
    legend(&mut chart, path, SeriesLabelPosition::UpperRight, 14)?;
    tryp!(whole.present(), path);
    Ok(())
}
