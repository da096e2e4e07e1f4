//! Rebalancing policies: pure functions from a cell's loads to a list of moves.
//!
//! The simulator calls a policy once per overloaded machine per rebalancing tick, with
//! the projected loads of its cell and the migratable tasks of that machine; the policy
//! returns moves and never touches simulator state, so policies are easy to test and
//! to add.

use serde::Serialize;

/// A task that may be migrated, as a policy sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Opaque handle passed back in [`Move`].
    pub task: u32,
    /// Current CPU usage (normalised).
    pub cpu_use: f64,
    /// CPU request.
    pub cpu_request: f64,
    /// Memory usage (normalised).
    pub mem_use: f64,
    /// Bytes that migrating it would move.
    pub bytes: f64,
    /// Cache-miss proxy: memory accesses per instruction times CPU usage.
    pub cache_misses: f64,
}

/// One planned migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    /// Task handle from the candidate.
    pub task: u32,
    /// Index (within the cell) of the destination.
    pub to: usize,
    /// 0 when the destination was the least-loaded machine of the cell, 1 when second.
    pub rank: u8,
}

/// What a policy sees for one overloaded machine.
#[derive(Debug)]
pub struct CellView<'a> {
    /// CPU usage of each machine of the cell (projected with moves already planned).
    pub loads: &'a mut [f64],
    /// CPU capacity of each machine.
    pub capacity: f64,
    /// Usage above `threshold * capacity` is overload.
    pub threshold: f64,
    /// Index of the overloaded machine within the cell.
    pub source: usize,
    /// Its migratable tasks, in arrival order.
    pub candidates: &'a mut Vec<Candidate>,
    /// Bytes this policy may still move in this tick (`f64::INFINITY` = no budget).
    pub budget_bytes: &'a mut f64,
}

impl CellView<'_> {
    fn limit(&self) -> f64 {
        self.threshold * self.capacity
    }

    /// Other machines of the cell sorted by load, least loaded first.
    fn ranked_targets(&self) -> Vec<usize> {
        let mut t: Vec<usize> = (0..self.loads.len())
            .filter(|&i| i != self.source)
            .collect();
        t.sort_by(|&a, &b| self.loads[a].total_cmp(&self.loads[b]).then(a.cmp(&b)));
        t
    }

    fn apply(&mut self, c: &Candidate, to: usize, rank: u8, out: &mut Vec<Move>) {
        self.loads[self.source] -= c.cpu_use;
        self.loads[to] += c.cpu_use;
        *self.budget_bytes -= c.bytes;
        out.push(Move {
            task: c.task,
            to,
            rank,
        });
    }
}

/// Order in which the fine-grained policy considers candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SortKey {
    /// As they arrived on the machine.
    Arrival,
    /// Largest CPU request first.
    CpuRequest,
    /// Largest CPU usage first.
    CpuUsage,
    /// Largest memory usage first.
    MemUsage,
    /// Smallest CPU usage first.
    ReverseCpuUsage,
    /// Most cache misses first.
    CacheMisses,
}

/// The policies: the eight published ones and ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PolicyKind {
    /// No rebalancing (the baseline of the published comparison).
    None,
    /// Coarse-grained: everything migratable goes to the least-loaded machine of the cell,
    /// like the guest script pinning all work to the least-stolen node.
    Coarse,
    /// Fine-grained: tasks move one by one to the less loaded of the two least-loaded
    /// machines until the source is below the threshold.
    Fine(SortKey),
    /// Ours: relieve the overload with the fewest bytes. A single task that covers the
    /// whole excess with the smallest footprint if there is one, else tasks by CPU per
    /// byte; each to the least-loaded machine that stays under the threshold (no
    /// ping-pong); never more than the network budget per tick.
    BudgetBestFit,
}

impl PolicyKind {
    /// Every policy, in report order: the eight published, then ours.
    pub const ALL: [PolicyKind; 9] = [
        PolicyKind::None,
        PolicyKind::Coarse,
        PolicyKind::Fine(SortKey::Arrival),
        PolicyKind::Fine(SortKey::CpuRequest),
        PolicyKind::Fine(SortKey::CpuUsage),
        PolicyKind::Fine(SortKey::MemUsage),
        PolicyKind::Fine(SortKey::ReverseCpuUsage),
        PolicyKind::Fine(SortKey::CacheMisses),
        PolicyKind::BudgetBestFit,
    ];

    /// Short stable name used on the command line and in outputs.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::None => "none",
            PolicyKind::Coarse => "coarse",
            PolicyKind::Fine(SortKey::Arrival) => "fine",
            PolicyKind::Fine(SortKey::CpuRequest) => "fine-cpu-request",
            PolicyKind::Fine(SortKey::CpuUsage) => "fine-cpu-usage",
            PolicyKind::Fine(SortKey::MemUsage) => "fine-mem-usage",
            PolicyKind::Fine(SortKey::ReverseCpuUsage) => "fine-reverse-cpu-usage",
            PolicyKind::Fine(SortKey::CacheMisses) => "fine-cache-misses",
            PolicyKind::BudgetBestFit => "budget-best-fit",
        }
    }

    /// Looks a policy up by [`name`](Self::name).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether this policy spends a network budget.
    pub fn uses_budget(self) -> bool {
        matches!(self, PolicyKind::BudgetBestFit)
    }

    /// Plans moves for the overloaded machine `view.source`, appending them to `out`.
    pub fn plan(self, view: &mut CellView<'_>, out: &mut Vec<Move>) {
        match self {
            PolicyKind::None => {}
            PolicyKind::Coarse => coarse(view, out),
            PolicyKind::Fine(key) => fine(view, key, out),
            PolicyKind::BudgetBestFit => budget_best_fit(view, out),
        }
    }
}

fn coarse(view: &mut CellView<'_>, out: &mut Vec<Move>) {
    let Some(&to) = view.ranked_targets().first() else {
        return;
    };
    if view.loads[to] >= view.loads[view.source] {
        return;
    }
    let cands = std::mem::take(view.candidates);
    for c in &cands {
        view.apply(c, to, 0, out);
    }
    *view.candidates = cands;
}

fn sort_candidates(c: &mut [Candidate], key: SortKey) {
    let desc = |f: fn(&Candidate) -> f64| move |a: &Candidate, b: &Candidate| f(b).total_cmp(&f(a));
    match key {
        SortKey::Arrival => {}
        SortKey::CpuRequest => c.sort_by(desc(|c| c.cpu_request)),
        SortKey::CpuUsage => c.sort_by(desc(|c| c.cpu_use)),
        SortKey::MemUsage => c.sort_by(desc(|c| c.mem_use)),
        SortKey::ReverseCpuUsage => c.sort_by(|a, b| a.cpu_use.total_cmp(&b.cpu_use)),
        SortKey::CacheMisses => c.sort_by(desc(|c| c.cache_misses)),
    }
}

fn fine(view: &mut CellView<'_>, key: SortKey, out: &mut Vec<Move>) {
    let targets = view.ranked_targets();
    let targets: Vec<usize> = targets.into_iter().take(2).collect();
    if targets.is_empty() {
        return;
    }
    let mut cands = std::mem::take(view.candidates);
    sort_candidates(&mut cands, key);
    for c in &cands {
        if view.loads[view.source] <= view.limit() {
            break;
        }
        let (rank, to) = targets
            .iter()
            .enumerate()
            .min_by(|a, b| view.loads[*a.1].total_cmp(&view.loads[*b.1]))
            .map(|(r, &t)| (r as u8, t))
            .unwrap_or((0, targets[0]));
        // Moving must not make the destination busier than the source becomes.
        if view.loads[to] + c.cpu_use > view.loads[view.source] - c.cpu_use {
            continue;
        }
        view.apply(c, to, rank, out);
    }
    *view.candidates = cands;
}

fn budget_best_fit(view: &mut CellView<'_>, out: &mut Vec<Move>) {
    let mut cands = std::mem::take(view.candidates);
    // Most CPU relief per byte first.
    cands.sort_by(|a, b| (b.cpu_use / b.bytes.max(1.0)).total_cmp(&(a.cpu_use / a.bytes.max(1.0))));
    let ranked = view.ranked_targets();
    let limit = view.limit();
    // The least-loaded machine that stays under the threshold and below the source.
    let fit = |view: &CellView<'_>, c: &Candidate| -> Option<(usize, u8)> {
        ranked
            .iter()
            .enumerate()
            .filter(|(_, &t)| {
                view.loads[t] + c.cpu_use <= limit
                    && view.loads[t] + c.cpu_use < view.loads[view.source] - c.cpu_use
            })
            .min_by(|a, b| view.loads[*a.1].total_cmp(&view.loads[*b.1]))
            .map(|(r, &t)| (t, r.min(1) as u8))
    };
    let excess = view.loads[view.source] - limit;
    // One task that covers the whole excess, smallest footprint first.
    let single = cands
        .iter()
        .filter(|c| c.cpu_use >= excess && c.bytes <= *view.budget_bytes && fit(view, c).is_some())
        .min_by(|a, b| a.bytes.total_cmp(&b.bytes))
        .copied();
    if let Some(c) = single {
        if let Some((to, rank)) = fit(view, &c) {
            view.apply(&c, to, rank, out);
        }
    } else {
        for c in &cands {
            if view.loads[view.source] <= limit {
                break;
            }
            if c.bytes > *view.budget_bytes {
                continue;
            }
            if let Some((to, rank)) = fit(view, c) {
                view.apply(c, to, rank, out);
            }
        }
    }
    *view.candidates = cands;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cand(task: u32, cpu: f64, bytes: f64) -> Candidate {
        Candidate {
            task,
            cpu_use: cpu,
            cpu_request: cpu * 2.0,
            mem_use: bytes / 1e9,
            bytes,
            cache_misses: cpu * 0.01,
        }
    }

    fn run(p: PolicyKind, loads: &mut [f64], cands: Vec<Candidate>, budget: f64) -> Vec<Move> {
        let mut cands = cands;
        let mut budget = budget;
        let mut v = CellView {
            loads,
            capacity: 1.0,
            threshold: 0.8,
            source: 0,
            candidates: &mut cands,
            budget_bytes: &mut budget,
        };
        let mut out = Vec::new();
        p.plan(&mut v, &mut out);
        out
    }

    #[test]
    fn names_round_trip() {
        for p in PolicyKind::ALL {
            assert_eq!(PolicyKind::from_name(p.name()), Some(p));
        }
        assert_eq!(PolicyKind::from_name("nope"), None);
    }

    #[test]
    fn coarse_moves_everything_to_least_loaded() {
        let mut loads = [1.2, 0.5, 0.2, 0.6];
        let m = run(
            PolicyKind::Coarse,
            &mut loads,
            vec![cand(1, 0.1, 1e9), cand(2, 0.2, 1e9)],
            f64::INFINITY,
        );
        assert_eq!(m.len(), 2);
        assert!(m.iter().all(|m| m.to == 2 && m.rank == 0));
        assert!((loads[0] - 0.9).abs() < 1e-9 && (loads[2] - 0.5).abs() < 1e-9);
    }

    #[test]
    fn fine_spreads_over_two_and_stops_at_threshold() {
        let mut loads = [1.3, 0.5, 0.2, 0.6];
        let c = (1..=10).map(|i| cand(i, 0.1, 1e9)).collect();
        let m = run(
            PolicyKind::Fine(SortKey::Arrival),
            &mut loads,
            c,
            f64::INFINITY,
        );
        assert_eq!(m.len(), 5, "{m:?}");
        assert!(m.iter().all(|m| m.to == 1 || m.to == 2));
        assert!(m.iter().any(|m| m.rank == 1));
        assert!(loads[0] <= 0.8 + 1e-9);
        assert!(loads[3] == 0.6);
    }

    #[test]
    fn fine_sorted_by_cpu_moves_big_first() {
        let mut loads = [1.0, 0.1, 0.1, 0.1];
        let c = vec![cand(1, 0.05, 1e9), cand(2, 0.3, 1e9), cand(3, 0.1, 1e9)];
        let m = run(
            PolicyKind::Fine(SortKey::CpuUsage),
            &mut loads,
            c.clone(),
            f64::INFINITY,
        );
        assert_eq!(m[0].task, 2);
        assert_eq!(m.len(), 1);
        let mut loads = [1.0, 0.1, 0.1, 0.1];
        let m = run(
            PolicyKind::Fine(SortKey::ReverseCpuUsage),
            &mut loads,
            c,
            f64::INFINITY,
        );
        assert_eq!(m[0].task, 1);
    }

    #[test]
    fn ours_picks_smallest_single_cover_and_respects_budget() {
        let mut loads = [0.95, 0.3, 0.7, 0.1];
        let c = vec![cand(1, 0.2, 8e9), cand(2, 0.16, 1e9), cand(3, 0.05, 1e8)];
        let m = run(
            PolicyKind::BudgetBestFit,
            &mut loads,
            c.clone(),
            f64::INFINITY,
        );
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].task, 2);
        // The least-loaded machine that stays under 0.8.
        assert_eq!(m[0].to, 3);
        let mut loads = [0.95, 0.3, 0.7, 0.1];
        let m = run(PolicyKind::BudgetBestFit, &mut loads, c, 5e8);
        assert!(m.iter().all(|m| m.task == 3), "{m:?}");
    }

    #[test]
    fn none_does_nothing() {
        let mut loads = [2.0, 0.0];
        assert!(run(
            PolicyKind::None,
            &mut loads,
            vec![cand(1, 0.5, 1.0)],
            f64::INFINITY
        )
        .is_empty());
    }
}
