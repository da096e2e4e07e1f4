//! The decision rule, without I/O: per-node steal totals in, a decision out.

/// Where work goes when the active node is stolen from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Published: everything to the single node with the least steal.
    Coarse,
    /// Spread over the two nodes with the least steal.
    Fine,
}

/// What to do after one observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// First observation: no deltas yet.
    Warmup,
    /// The active nodes' steal is under the threshold.
    Stay {
        /// Largest steal delta among the active nodes.
        active_steal: u64,
    },
    /// Over the threshold, but the least-stolen nodes are the active ones already.
    NoBetterNode {
        /// Largest steal delta among the active nodes.
        active_steal: u64,
    },
    /// Pin all work to these node indices (in the order work is spread over them).
    Pin {
        /// Indices into the node list, least stolen first.
        targets: Vec<usize>,
        /// Largest steal delta among the previously active nodes.
        active_steal: u64,
    },
}

/// Keeps the previous totals and the active nodes between observations.
#[derive(Debug, Clone)]
pub struct Decider {
    policy: Policy,
    threshold: u64,
    prev: Option<Vec<u64>>,
    active: Option<Vec<usize>>,
    last_deltas: Vec<u64>,
}

impl Decider {
    /// `threshold` is in USER_HZ ticks per interval (published: 50 per 2 s).
    pub fn new(policy: Policy, threshold: u64) -> Self {
        Self {
            policy,
            threshold,
            prev: None,
            active: None,
            last_deltas: Vec::new(),
        }
    }

    /// Node indices work is pinned to (`None` = not pinned yet: all nodes).
    pub fn active(&self) -> Option<&[usize]> {
        self.active.as_deref()
    }

    /// Steal deltas of the last observation, per node.
    pub fn last_deltas(&self) -> &[u64] {
        &self.last_deltas
    }

    /// Takes cumulative steal ticks per node; decides.
    pub fn observe(&mut self, totals: &[u64]) -> Decision {
        let Some(prev) = self
            .prev
            .replace(totals.to_vec())
            .filter(|p| p.len() == totals.len())
        else {
            self.last_deltas = vec![0; totals.len()];
            return Decision::Warmup;
        };
        // Counters only grow; a smaller value (CPU hot-unplug, wrap) counts as no steal.
        let deltas: Vec<u64> = totals
            .iter()
            .zip(&prev)
            .map(|(c, p)| c.saturating_sub(*p))
            .collect();
        self.last_deltas.clone_from(&deltas);
        let all: Vec<usize> = (0..deltas.len()).collect();
        let active = self.active.clone().unwrap_or(all);
        let active_steal = active.iter().map(|&i| deltas[i]).max().unwrap_or(0);
        if active_steal < self.threshold {
            return Decision::Stay { active_steal };
        }
        let mut ranked: Vec<usize> = (0..deltas.len()).collect();
        ranked.sort_by_key(|&i| (deltas[i], i));
        let want = match self.policy {
            Policy::Coarse => 1,
            Policy::Fine => 2,
        };
        let targets: Vec<usize> = ranked.into_iter().take(want).collect();
        let mut a = active.clone();
        let mut t = targets.clone();
        a.sort_unstable();
        t.sort_unstable();
        if a == t {
            return Decision::NoBetterNode { active_steal };
        }
        self.active = Some(targets.clone());
        Decision::Pin {
            targets,
            active_steal,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn coarse_pins_to_least_stolen_then_holds() {
        let mut d = Decider::new(Policy::Coarse, 50);
        let pin = |node: usize, active_steal| Decision::Pin {
            targets: vec![node],
            active_steal,
        };
        let steps = [
            ([0, 0, 0, 0], Decision::Warmup),
            ([10, 20, 5, 0], Decision::Stay { active_steal: 20 }),
            ([100, 30, 8, 70], pin(2, 90)),
            // Node 2 is active now; steal elsewhere does not matter.
            ([500, 500, 20, 500], Decision::Stay { active_steal: 12 }),
            // Node 2 stolen from, node 1 quiet: move there.
            ([600, 501, 100, 600], pin(1, 80)),
            // Everyone stolen, node 1 still least: nothing better.
            (
                [700, 560, 200, 700],
                Decision::NoBetterNode { active_steal: 59 },
            ),
        ];
        for (steal, want) in steps {
            assert_eq!(d.observe(&steal), want, "steal {steal:?}");
        }
    }

    #[test]
    fn fine_picks_two_and_threshold_is_inclusive() {
        let mut d = Decider::new(Policy::Fine, 50);
        d.observe(&[0, 0, 0, 0]);
        assert_eq!(
            d.observe(&[50, 10, 0, 30]),
            Decision::Pin {
                targets: vec![2, 1],
                active_steal: 50
            }
        );
        assert_eq!(d.active(), Some(&[2usize, 1][..]));
        assert_eq!(d.last_deltas(), &[50, 10, 0, 30]);
    }

    #[test]
    fn counter_going_back_is_no_steal_and_node_change_rewarms() {
        let mut d = Decider::new(Policy::Coarse, 50);
        d.observe(&[100, 100]);
        assert_eq!(d.observe(&[0, 0]), Decision::Stay { active_steal: 0 });
        assert_eq!(d.observe(&[0, 0, 0]), Decision::Warmup);
    }
}
