//! Order statistics over latency samples. Medians and high percentiles, not
//! means, because the machine is shared and its noise is one-sided.

use serde::{Deserialize, Serialize};

/// Summary of one run's samples, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: u64,
    pub median_ns: f64,
    pub p99_ns: f64,
    pub mean_ns: f64,
    pub min_ns: f64,
}

/// The value below which a fraction `q` of the sorted samples lie
/// (nearest rank); 0 for no samples.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Times `batch` calls of `f`, `batches` times, after one untimed batch to
/// warm up; returns the median time per call in ns.
pub fn per_call<E>(
    batches: usize,
    batch: usize,
    mut f: impl FnMut() -> Result<(), E>,
) -> Result<f64, E> {
    for _ in 0..batch {
        f()?;
    }
    let mut v = Vec::with_capacity(batches);
    for _ in 0..batches {
        let t = std::time::Instant::now();
        for _ in 0..batch {
            f()?;
        }
        v.push(t.elapsed().as_nanos() as f64 / batch as f64);
    }
    Ok(median(&v))
}

/// Median of any values (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Summarises samples (any order).
pub fn summarize(samples: &[f64]) -> Summary {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Summary {
        n: n as u64,
        median_ns: median(&v),
        p99_ns: percentile(&v, 0.99),
        mean_ns: if n == 0 {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / n as f64
        },
        min_ns: v.first().copied().unwrap_or(f64::NAN),
    }
}

/// Combines the summaries of repeated runs: the median of each statistic, so
/// one disturbed run cannot move the result.
pub fn combine(runs: &[Summary]) -> Summary {
    let pick = |f: fn(&Summary) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
    Summary {
        n: runs.iter().map(|r| r.n).sum(),
        median_ns: pick(|r| r.median_ns),
        p99_ns: pick(|r| r.p99_ns),
        mean_ns: pick(|r| r.mean_ns),
        min_ns: runs.iter().map(|r| r.min_ns).fold(f64::NAN, f64::min),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_series() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = summarize(&v);
        assert_eq!(s.median_ns, 50.5);
        assert_eq!(s.p99_ns, 99.0);
        assert_eq!(s.min_ns, 1.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn combine_takes_medians() {
        let a = summarize(&[1.0, 2.0, 3.0]);
        let b = summarize(&[10.0, 20.0, 30.0]);
        let c = summarize(&[4.0, 5.0, 6.0]);
        let m = combine(&[a, b, c]);
        assert_eq!(m.median_ns, 5.0);
        assert_eq!(m.min_ns, 1.0);
        assert_eq!(m.n, 9);
    }
}
