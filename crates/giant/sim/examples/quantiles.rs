//! Prints the fitted usage-model quantiles of a trace directory.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "../shared/data/google-clusterdata-2011-2".into());
    let t = giant_sim::Trace::load(std::path::Path::new(&dir), giant_trace::OnError::Fail)?;
    let m = &t.model;
    println!("samples {}", m.samples);
    for (name, q) in [
        ("cpu/req", &m.cpu_ratio),
        ("mem/req", &m.mem_ratio),
        ("peak/cpu", &m.peak_ratio),
        ("mai", &m.mai),
        ("burst", &m.burst_ratio),
    ] {
        let at = |p: f64| q[((q.len() - 1) as f64 * p) as usize];
        println!(
            "{name:10} p10 {:.4} p50 {:.4} p90 {:.4} p99 {:.4} p999 {:.4} max {:.4}",
            at(0.1),
            at(0.5),
            at(0.9),
            at(0.99),
            at(0.999),
            at(1.0)
        );
    }
    let n = t
        .events
        .iter()
        .filter(|e| e.event_type == giant_trace::EventType::Submit)
        .count();
    let prod = t
        .events
        .iter()
        .filter(|e| e.event_type == giant_trace::EventType::Submit && e.priority >= 9)
        .count();
    println!("submits {n}, priority>=9 {prod}");
    Ok(())
}
