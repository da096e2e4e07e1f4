//! The routing table, with VNET/P's match semantics and a precisely invalidated cache.
//!
//! A rule matches a frame on its source MAC, its destination MAC (each `any`, `not-X` or an
//! exact address) and on where the frame came from (any endpoint, or a named one). Among the
//! rules that match, only those of the highest *rank* forward the frame, and all of them do
//! (that is how a broadcast route fans out). Rank follows VNET/P: per MAC field an exact
//! address scores 2, `not-X` 1 and `any` 0; the rank is twice the sum of both fields plus one
//! when the rule names its source, so a rule's source only breaks ties between otherwise
//! equal rules.
//!
//! Lookups are cached per (source endpoint, source MAC, destination MAC). When a rule is
//! added, only cache entries it matches with a rank at least that of the cached result are
//! dropped; when a rule is removed, only entries whose result contains it. Every other entry
//! stays valid, which the unit tests check against a full recomputation.

use crate::frame::MacAddr;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Identifies an interface, link or bridge (assigned by [`crate::switch::Switch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint(pub u32);

/// Identifies a route; never reused while the table lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteId(pub u64);

/// Match on one MAC address field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MacMatch {
    /// Every address.
    Any,
    /// Every address except this one.
    Not(MacAddr),
    /// Exactly this address.
    Exact(MacAddr),
}

impl MacMatch {
    fn matches(&self, m: MacAddr) -> bool {
        match self {
            MacMatch::Any => true,
            MacMatch::Not(x) => *x != m,
            MacMatch::Exact(x) => *x == m,
        }
    }

    fn class(&self) -> u8 {
        match self {
            MacMatch::Any => 0,
            MacMatch::Not(_) => 1,
            MacMatch::Exact(_) => 2,
        }
    }
}

/// Match on where a frame entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceMatch {
    /// From any endpoint.
    Any,
    /// Only from this endpoint.
    Is(Endpoint),
}

/// What a rule says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteSpec {
    /// Optional unique name.
    pub name: Option<String>,
    /// Source MAC match.
    pub src: MacMatch,
    /// Destination MAC match.
    pub dst: MacMatch,
    /// Ingress endpoint match.
    pub source: SourceMatch,
    /// Where matching frames go.
    pub dest: Endpoint,
}

impl RouteSpec {
    /// The rank of this rule for the frame, or `None` when it does not match.
    pub fn rank(&self, source: Endpoint, src: MacAddr, dst: MacAddr) -> Option<u8> {
        let src_ok = match self.source {
            SourceMatch::Any => true,
            SourceMatch::Is(e) => e == source,
        };
        (src_ok && self.src.matches(src) && self.dst.matches(dst)).then(|| {
            2 * (self.src.class() + self.dst.class()) + u8::from(self.source != SourceMatch::Any)
        })
    }

    /// True when the rule refers to `e` as source or destination.
    pub fn mentions(&self, e: Endpoint) -> bool {
        self.dest == e || self.source == SourceMatch::Is(e)
    }
}

/// Per-route counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouteCounters {
    /// Frames the route forwarded (a TSO frame counts once per wire segment).
    pub frames: u64,
    /// Bytes of those frames.
    pub bytes: u64,
}

/// A rule in the table.
#[derive(Clone, Debug)]
pub struct Route {
    /// Its id.
    pub id: RouteId,
    /// What it matches and where it sends.
    pub spec: RouteSpec,
    /// True when learning mode made it.
    pub learned: bool,
    /// Traffic it forwarded.
    pub counters: RouteCounters,
}

/// Result of a lookup: the tied top-ranked rules and their destinations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hit {
    /// Rank of the winning rules (`None`: no rule matched).
    pub rank: Option<u8>,
    /// The winning rules.
    pub routes: Arc<[RouteId]>,
    /// Their distinct destinations, in rule order.
    pub dests: Arc<[Endpoint]>,
}

type CacheKey = (Endpoint, MacAddr, MacAddr);

/// Cache statistics, to show (and test) that invalidation is precise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that scanned the table.
    pub misses: u64,
    /// Entries dropped because a rule change affected them.
    pub invalidated: u64,
    /// Entries currently cached.
    pub entries: u64,
}

/// Upper bound on cached entries; beyond it the cache starts over (a capacity bound, not
/// an invalidation).
const CACHE_MAX: usize = 65_536;

/// The routing table.
#[derive(Clone, Debug, Default)]
pub struct RouteTable {
    routes: Vec<Route>,
    next_id: u64,
    cache: HashMap<CacheKey, Hit>,
    stats: CacheStats,
    /// Endpoints that are links (see [`RouteTable::matches`]).
    links: HashSet<Endpoint>,
    /// Rules added or removed so far (see [`RouteTable::changes`]).
    changes: u64,
}

impl RouteTable {
    /// An empty table.
    pub fn new() -> RouteTable {
        RouteTable::default()
    }

    /// Says whether `e` is a link. Frames that came in over a link are sent on over
    /// another link only by a rule that names their link as its source: a rule for any
    /// source does not relay between links. In a full mesh (every host linked to every
    /// other, each sending broadcasts to all its links) such relays would send every
    /// broadcast round the mesh for ever. Kernel VXLAN never forwards from the tunnel back
    /// into it either. A host that must relay says so with `from`. Endpoint ids are never
    /// reused and are marked before any rule names them, so no cached result changes.
    pub fn set_link(&mut self, e: Endpoint, is_link: bool) {
        if is_link {
            self.links.insert(e);
        } else {
            self.links.remove(&e);
        }
    }

    /// The rank of `spec` for a frame from `source`, with the relay rule of
    /// [`RouteTable::set_link`]; `None` when it does not apply.
    fn matches(
        &self,
        spec: &RouteSpec,
        source: Endpoint,
        src: MacAddr,
        dst: MacAddr,
    ) -> Option<u8> {
        if spec.source == SourceMatch::Any
            && self.links.contains(&source)
            && self.links.contains(&spec.dest)
        {
            return None;
        }
        spec.rank(source, src, dst)
    }

    /// Adds a rule and returns its id; drops exactly the cache entries it may change.
    pub fn add(&mut self, spec: RouteSpec) -> RouteId {
        self.insert(spec, false)
    }

    /// Adds a rule, marking whether learning made it.
    pub fn insert(&mut self, spec: RouteSpec, learned: bool) -> RouteId {
        self.next_id += 1;
        let id = RouteId(self.next_id);
        let before = self.cache.len();
        let mut cache = std::mem::take(&mut self.cache);
        cache.retain(
            |&(source, src, dst), hit| match self.matches(&spec, source, src, dst) {
                Some(r) => hit.rank.is_some_and(|top| r < top),
                None => true,
            },
        );
        self.cache = cache;
        self.stats.invalidated += (before - self.cache.len()) as u64;
        self.routes.push(Route {
            id,
            spec,
            learned,
            counters: RouteCounters::default(),
        });
        self.changes += 1;
        id
    }

    /// Removes a rule; drops exactly the cache entries whose result contained it.
    pub fn remove(&mut self, id: RouteId) -> Option<Route> {
        let pos = self.pos(id)?;
        let before = self.cache.len();
        self.cache.retain(|_, hit| !hit.routes.contains(&id));
        self.stats.invalidated += (before - self.cache.len()) as u64;
        self.changes += 1;
        Some(self.routes.remove(pos))
    }

    /// How many rules were added or removed so far: a copy of a decision taken when this
    /// was `n` (such as the kernel fast path's) may be stale once it is not.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The rule with this name.
    pub fn by_name(&self, name: &str) -> Option<&Route> {
        self.routes
            .iter()
            .find(|r| r.spec.name.as_deref() == Some(name))
    }

    /// Index of a rule: ids grow with insertion and removal keeps order, so `routes` is
    /// sorted by id.
    fn pos(&self, id: RouteId) -> Option<usize> {
        self.routes.binary_search_by_key(&id, |r| r.id).ok()
    }

    /// The rule with this id.
    pub fn get(&self, id: RouteId) -> Option<&Route> {
        self.pos(id).map(|p| &self.routes[p])
    }

    /// All rules in insertion order.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// Cache statistics.
    pub fn cache_stats(&self) -> CacheStats {
        CacheStats {
            entries: self.cache.len() as u64,
            ..self.stats
        }
    }

    /// Looks a frame up, from the cache when possible.
    pub fn lookup(&mut self, source: Endpoint, src: MacAddr, dst: MacAddr) -> Hit {
        let key = (source, src, dst);
        if let Some(hit) = self.cache.get(&key) {
            self.stats.hits += 1;
            return hit.clone();
        }
        self.stats.misses += 1;
        let hit = self.compute(source, src, dst);
        if self.cache.len() >= CACHE_MAX {
            self.cache.clear();
        }
        self.cache.insert(key, hit.clone());
        hit
    }

    /// Scans the whole table (what the cache must always agree with).
    pub fn compute(&self, source: Endpoint, src: MacAddr, dst: MacAddr) -> Hit {
        let mut top = None;
        let mut routes = Vec::new();
        let mut dests: Vec<Endpoint> = Vec::new();
        for r in &self.routes {
            let Some(rank) = self.matches(&r.spec, source, src, dst) else {
                continue;
            };
            if !matches!(top, Some(t) if rank <= t) {
                top = Some(rank);
                routes.clear();
                dests.clear();
            }
            if top == Some(rank) {
                routes.push(r.id);
                if !dests.contains(&r.spec.dest) {
                    dests.push(r.spec.dest);
                }
            }
        }
        Hit {
            rank: top,
            routes: routes.into(),
            dests: dests.into(),
        }
    }

    /// Adds traffic to the counters of the given routes.
    pub fn count(&mut self, ids: &[RouteId], frames: u64, bytes: u64) {
        for id in ids {
            if let Some(p) = self.pos(*id) {
                let c = &mut self.routes[p].counters;
                c.frames += frames;
                c.bytes += bytes;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn mac(i: u8) -> MacAddr {
        MacAddr([2, 0, 0, 0, 0, i])
    }

    fn spec(src: MacMatch, dst: MacMatch, source: SourceMatch, dest: u32) -> RouteSpec {
        RouteSpec {
            name: None,
            src,
            dst,
            source,
            dest: Endpoint(dest),
        }
    }

    #[test]
    fn exact_beats_not_beats_any_and_ties_fan_out() {
        let mut t = RouteTable::new();
        t.add(spec(MacMatch::Any, MacMatch::Any, SourceMatch::Any, 10));
        t.add(spec(MacMatch::Any, MacMatch::Any, SourceMatch::Any, 11));
        let e = Endpoint(1);
        assert_eq!(
            t.lookup(e, mac(1), mac(2)).dests.as_ref(),
            &[Endpoint(10), Endpoint(11)]
        );
        // Each route added is more specific for mac(2) than those before it.
        for (dst, dest) in [(MacMatch::Not(mac(3)), 12), (MacMatch::Exact(mac(2)), 13)] {
            t.add(spec(MacMatch::Any, dst, SourceMatch::Any, dest));
            assert_eq!(
                t.lookup(e, mac(1), mac(2)).dests.as_ref(),
                &[Endpoint(dest)]
            );
            // Neither matches mac(3): it still fans out to both catch-alls.
            assert_eq!(t.lookup(e, mac(1), mac(3)).dests.len(), 2);
        }
        // The source endpoint is really matched.
        t.add(spec(
            MacMatch::Any,
            MacMatch::Exact(mac(2)),
            SourceMatch::Is(Endpoint(5)),
            14,
        ));
        assert_eq!(
            t.lookup(Endpoint(5), mac(1), mac(2)).dests.as_ref(),
            &[Endpoint(14)]
        );
        assert_eq!(t.lookup(e, mac(1), mac(2)).dests.as_ref(), &[Endpoint(13)]);
        let empty = RouteTable::new().compute(e, mac(1), mac(2));
        assert!(empty.rank.is_none() && empty.dests.is_empty());
    }

    /// A small deterministic generator (no dependency needed for a test).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    #[test]
    fn cache_agrees_with_scan_and_invalidation_is_precise() {
        let mut rng = Lcg(42);
        let mut t = RouteTable::new();
        // Some sources and destinations are links, so that rules which would relay
        // between links (and so do not match) are part of the mix.
        for e in [1, 2, 10, 11, 12] {
            t.set_link(Endpoint(e), true);
        }
        let mut ids = Vec::new();
        let field = |rng: &mut Lcg| match rng.next(3) {
            0 => MacMatch::Any,
            1 => MacMatch::Not(mac(rng.next(4) as u8)),
            _ => MacMatch::Exact(mac(rng.next(4) as u8)),
        };
        for step in 0..400 {
            // Warm the cache on every key.
            for s in 0..3 {
                for a in 0..4 {
                    for b in 0..4 {
                        let got = t.lookup(Endpoint(s), mac(a), mac(b));
                        assert_eq!(got, t.compute(Endpoint(s), mac(a), mac(b)), "step {step}");
                    }
                }
            }
            let before = t.cache_stats().invalidated;
            if ids.is_empty() || rng.next(3) != 0 {
                let source = if rng.next(2) == 0 {
                    SourceMatch::Any
                } else {
                    SourceMatch::Is(Endpoint(rng.next(3) as u32))
                };
                let (src, dst) = (field(&mut rng), field(&mut rng));
                ids.push(t.add(spec(src, dst, source, rng.next(5) as u32 + 10)));
            } else {
                let i = rng.next(ids.len() as u64) as usize;
                t.remove(ids.swap_remove(i));
            }
            // Precision: never more than the 48 cached keys, and usually fewer.
            assert!(t.cache_stats().invalidated - before <= 48);
        }
        let s = t.cache_stats();
        assert!(s.hits > 0 && s.invalidated < 400 * 48 / 2, "{s:?}");
    }

    #[test]
    fn removing_a_losing_rule_keeps_the_cache() {
        let mut t = RouteTable::new();
        let loser = t.add(spec(MacMatch::Any, MacMatch::Any, SourceMatch::Any, 1));
        t.add(spec(
            MacMatch::Any,
            MacMatch::Exact(mac(2)),
            SourceMatch::Any,
            2,
        ));
        t.lookup(Endpoint(0), mac(1), mac(2));
        t.remove(loser);
        assert_eq!(t.cache_stats().invalidated, 0);
        t.lookup(Endpoint(0), mac(1), mac(2));
        assert_eq!(t.cache_stats().hits, 1);
    }
}
