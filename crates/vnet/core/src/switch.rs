//! The switch: endpoints (interfaces, links, bridges) around the routing table, with
//! anti-spoofing, learning and counters. The daemon calls [`Switch::forward`] once per
//! received frame (or coalesced run) and gets back where to send it.

use crate::frame::{EthHeader, MacAddr};
use crate::route::{Endpoint, Hit, MacMatch, Route, RouteId, RouteSpec, RouteTable, SourceMatch};
use crate::CoreError;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What kind of endpoint, with what the switch needs to know about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndpointKind {
    /// A TAP device of one guest NIC; frames from it must carry `mac` as source.
    Interface {
        /// The guest NIC's MAC.
        mac: MacAddr,
    },
    /// A remote peer reached over VXLAN.
    Link {
        /// The virtual network identifier used on this link.
        vni: u32,
    },
    /// A host NIC carrying raw frames to peers on the same LAN.
    Bridge,
}

/// Per-endpoint counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct EndpointCounters {
    /// Frames received from the endpoint.
    pub rx_frames: u64,
    /// Bytes received from the endpoint.
    pub rx_bytes: u64,
    /// Frames sent to the endpoint.
    pub tx_frames: u64,
    /// Bytes sent to the endpoint.
    pub tx_bytes: u64,
    /// Frames dropped because their source MAC was not the interface's.
    pub drop_spoofed: u64,
    /// Frames dropped because no route matched.
    pub drop_no_route: u64,
    /// Frames dropped as malformed.
    pub drop_malformed: u64,
    /// Frames that could not be sent (I/O error).
    pub tx_errors: u64,
}

/// An endpoint as the switch knows it.
#[derive(Clone, Debug)]
pub struct EndpointInfo {
    /// Its id.
    pub id: Endpoint,
    /// Its unique name.
    pub name: String,
    /// Its kind.
    pub kind: EndpointKind,
    /// Its traffic.
    pub counters: EndpointCounters,
}

/// Why a frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Source MAC is not the interface's.
    Spoofed,
    /// No rule matched (or only the ingress endpoint did).
    NoRoute,
    /// The ingress endpoint is unknown (removed meanwhile).
    UnknownSource,
}

/// Where a frame goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send a copy to each endpoint.
    Forward(Arc<[Endpoint]>),
    /// Drop it (already counted).
    Drop(DropReason),
}

/// Where a frame goes and why (see [`Switch::decision`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The winning rules.
    pub routes: Arc<[RouteId]>,
    /// Where the frame is sent (never where it came from).
    pub dests: Arc<[Endpoint]>,
}

/// Most MAC addresses learning mode keeps.
pub const LEARN_MAX: usize = 4096;

/// Endpoints, routes and counters. Clone it to stage a batch of changes atomically.
#[derive(Clone, Debug, Default)]
pub struct Switch {
    endpoints: BTreeMap<Endpoint, EndpointInfo>,
    names: HashMap<String, Endpoint>,
    next_ep: u32,
    table: RouteTable,
    learning: bool,
    learned: HashMap<MacAddr, (Endpoint, RouteId)>,
}

impl Switch {
    /// An empty switch.
    pub fn new() -> Switch {
        Switch::default()
    }

    /// Registers an endpoint under a unique name.
    pub fn add_endpoint(&mut self, name: &str, kind: EndpointKind) -> Result<Endpoint, CoreError> {
        if self.names.contains_key(name) {
            return Err(CoreError::Exists {
                kind: "endpoint",
                name: name.to_string(),
            });
        }
        self.next_ep += 1;
        let id = Endpoint(self.next_ep);
        self.names.insert(name.to_string(), id);
        self.table
            .set_link(id, matches!(kind, EndpointKind::Link { .. }));
        let info = EndpointInfo {
            id,
            name: name.to_string(),
            kind,
            counters: EndpointCounters::default(),
        };
        self.endpoints.insert(id, info);
        Ok(id)
    }

    /// Removes an endpoint (by name or id) and every route that names it (as source or
    /// destination).
    pub fn remove_endpoint(&mut self, name_or_id: &str) -> Result<EndpointInfo, CoreError> {
        let id = self.endpoint_id(name_or_id)?;
        let doomed: Vec<RouteId> = self
            .table
            .routes()
            .iter()
            .filter(|r| r.spec.mentions(id))
            .map(|r| r.id)
            .collect();
        for r in doomed {
            self.table.remove(r);
        }
        self.learned.retain(|_, (e, _)| *e != id);
        let info = self
            .endpoints
            .remove(&id)
            .ok_or_else(|| CoreError::NotFound {
                kind: "endpoint",
                name: name_or_id.to_string(),
            })?;
        self.names.remove(&info.name);
        self.table.set_link(id, false);
        Ok(info)
    }

    /// The id of an endpoint given by name, or by its decimal id.
    pub fn endpoint_id(&self, name_or_id: &str) -> Result<Endpoint, CoreError> {
        if let Some(e) = self.names.get(name_or_id) {
            return Ok(*e);
        }
        name_or_id
            .parse::<u32>()
            .ok()
            .map(Endpoint)
            .filter(|e| self.endpoints.contains_key(e))
            .ok_or_else(|| CoreError::NotFound {
                kind: "endpoint",
                name: name_or_id.to_string(),
            })
    }

    /// An endpoint by id.
    pub fn endpoint(&self, id: Endpoint) -> Option<&EndpointInfo> {
        self.endpoints.get(&id)
    }

    /// All endpoints in id order.
    pub fn endpoints(&self) -> impl Iterator<Item = &EndpointInfo> {
        self.endpoints.values()
    }

    /// Adds a route (its endpoints must exist and its name must be free).
    pub fn add_route(&mut self, spec: RouteSpec) -> Result<RouteId, CoreError> {
        let exists = |e: Endpoint| self.endpoints.contains_key(&e);
        if !exists(spec.dest) {
            return Err(CoreError::NotFound {
                kind: "endpoint",
                name: format!("#{}", spec.dest.0),
            });
        }
        if let SourceMatch::Is(e) = spec.source {
            if !exists(e) {
                return Err(CoreError::NotFound {
                    kind: "endpoint",
                    name: format!("#{}", e.0),
                });
            }
        }
        if let Some(n) = &spec.name {
            if self.table.by_name(n).is_some() {
                return Err(CoreError::Exists {
                    kind: "route",
                    name: n.clone(),
                });
            }
        }
        Ok(self.table.add(spec))
    }

    /// Removes a route by name or by numeric id.
    pub fn remove_route(&mut self, name_or_id: &str) -> Result<Route, CoreError> {
        let id = self.route_id(name_or_id)?;
        self.learned.retain(|_, (_, r)| *r != id);
        self.table.remove(id).ok_or_else(|| CoreError::NotFound {
            kind: "route",
            name: name_or_id.to_string(),
        })
    }

    /// Resolves a route name, or a decimal id.
    pub fn route_id(&self, name_or_id: &str) -> Result<RouteId, CoreError> {
        if let Some(r) = self.table.by_name(name_or_id) {
            return Ok(r.id);
        }
        name_or_id
            .parse::<u64>()
            .ok()
            .map(RouteId)
            .filter(|id| self.table.get(*id).is_some())
            .ok_or_else(|| CoreError::NotFound {
                kind: "route",
                name: name_or_id.to_string(),
            })
    }

    /// The routing table (read-only).
    pub fn table(&self) -> &RouteTable {
        &self.table
    }

    /// Turns learning mode on or off. Turning it off forgets learned routes.
    pub fn set_learning(&mut self, on: bool) {
        self.learning = on;
        if !on {
            for (_, (_, r)) in std::mem::take(&mut self.learned) {
                self.table.remove(r);
            }
        }
    }

    /// Whether learning mode is on.
    pub fn learning(&self) -> bool {
        self.learning
    }

    /// Decides where a frame (or a run of `frames` wire frames totalling `bytes`) that
    /// entered at `source` goes, and counts it.
    pub fn forward(
        &mut self,
        source: Endpoint,
        eth: &EthHeader,
        frames: u64,
        bytes: u64,
    ) -> Verdict {
        let Some(info) = self.endpoints.get_mut(&source) else {
            return Verdict::Drop(DropReason::UnknownSource);
        };
        info.counters.rx_frames += frames;
        info.counters.rx_bytes += bytes;
        if let EndpointKind::Interface { mac } = info.kind {
            if eth.src != mac {
                info.counters.drop_spoofed += frames;
                return Verdict::Drop(DropReason::Spoofed);
            }
        }
        if self.learning {
            self.learn(source, eth.src);
        }
        let hit = self.table.lookup(source, eth.src, eth.dst);
        let dests = split_horizon(&hit, source);
        if dests.is_empty() {
            if let Some(info) = self.endpoints.get_mut(&source) {
                info.counters.drop_no_route += frames;
            }
            return Verdict::Drop(DropReason::NoRoute);
        }
        self.table.count(&hit.routes, frames, bytes);
        Verdict::Forward(dests)
    }

    /// Bumped by every change of the rules (learning included): a copy of a decision
    /// taken at another version may be stale.
    pub fn version(&self) -> u64 {
        self.table.changes()
    }

    /// Where `forward` would send a frame from `source` with these addresses, and by which
    /// rules, without counting it, learning from it or touching the cache; `None` when it
    /// would drop it. The kernel fast path copies such decisions and checks them again
    /// after every change of the table.
    pub fn decision(&self, source: Endpoint, src: MacAddr, dst: MacAddr) -> Option<Decision> {
        match self.endpoints.get(&source)?.kind {
            EndpointKind::Interface { mac } if mac != src => return None,
            _ => {}
        }
        let hit = self.table.compute(source, src, dst);
        let dests = split_horizon(&hit, source);
        (!dests.is_empty()).then_some(Decision {
            routes: hit.routes,
            dests,
        })
    }

    /// Counts traffic that the kernel fast path forwarded by a copy of `decision`'s
    /// answer: received at `source`, by `routes`, sent to `dest`.
    pub fn count_offloaded(
        &mut self,
        source: Endpoint,
        routes: &[RouteId],
        dest: Endpoint,
        frames: u64,
        bytes: u64,
    ) {
        if let Some(i) = self.endpoints.get_mut(&source) {
            i.counters.rx_frames += frames;
            i.counters.rx_bytes += bytes;
        }
        self.table.count(routes, frames, bytes);
        self.count_tx(dest, frames, bytes, true);
    }

    /// Records that `mac` lives behind `source`, replacing a stale learned route. At most
    /// [`LEARN_MAX`] addresses are learned, so a flood of forged source MACs cannot grow the
    /// table without bound. A local interface's MAC is never learned behind anything but
    /// that interface: a frame from a link or a bridged LAN that claims it would otherwise
    /// draw the guest's traffic away (or a copy of it) to whoever sent it.
    fn learn(&mut self, source: Endpoint, mac: MacAddr) {
        if self.learned.get(&mac).is_some_and(|(e, _)| *e == source) {
            return;
        }
        let owner = self
            .endpoints
            .values()
            .find(|i| matches!(i.kind, EndpointKind::Interface { mac: m } if m == mac));
        if owner.is_some_and(|i| i.id != source) {
            return;
        }
        match self.learned.get(&mac) {
            Some((_, old)) => {
                let old = *old;
                self.table.remove(old);
            }
            None if self.learned.len() >= LEARN_MAX => return,
            None => {}
        }
        let spec = RouteSpec {
            name: None,
            src: MacMatch::Any,
            dst: MacMatch::Exact(mac),
            source: SourceMatch::Any,
            dest: source,
        };
        let id = self.table.insert(spec, true);
        self.learned.insert(mac, (source, id));
    }

    /// Counts a frame as malformed at `source`.
    pub fn count_malformed(&mut self, source: Endpoint, frames: u64) {
        if let Some(i) = self.endpoints.get_mut(&source) {
            i.counters.drop_malformed += frames;
        }
    }

    /// Counts frames sent to `dest` (or failed, with `ok == false`).
    pub fn count_tx(&mut self, dest: Endpoint, frames: u64, bytes: u64, ok: bool) {
        if let Some(i) = self.endpoints.get_mut(&dest) {
            if ok {
                i.counters.tx_frames += frames;
                i.counters.tx_bytes += bytes;
            } else {
                i.counters.tx_errors += frames;
            }
        }
    }
}

/// A hit's destinations less the frame's own source: a frame is never sent back where it
/// came from, where it would loop.
fn split_horizon(hit: &Hit, source: Endpoint) -> Arc<[Endpoint]> {
    if hit.dests.contains(&source) {
        hit.dests.iter().copied().filter(|d| *d != source).collect()
    } else {
        hit.dests.clone()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn eth(src: MacAddr, dst: MacAddr) -> EthHeader {
        EthHeader {
            src,
            dst,
            ethertype: 0x0800,
            l3_offset: 14,
        }
    }

    #[test]
    fn spoofed_frames_are_dropped_and_counted() {
        let mut s = Switch::new();
        let a_mac: MacAddr = "02:00:00:00:00:0a".parse().unwrap();
        let a = s
            .add_endpoint("a", EndpointKind::Interface { mac: a_mac })
            .unwrap();
        let l = s.add_endpoint("l", EndpointKind::Link { vni: 1 }).unwrap();
        s.add_route(RouteSpec {
            name: Some("all".into()),
            src: MacMatch::Any,
            dst: MacMatch::Any,
            source: SourceMatch::Any,
            dest: l,
        })
        .unwrap();
        let other: MacAddr = "02:00:00:00:00:0b".parse().unwrap();
        assert_eq!(
            s.forward(a, &eth(other, MacAddr::BROADCAST), 1, 60),
            Verdict::Drop(DropReason::Spoofed)
        );
        assert_eq!(
            s.forward(a, &eth(a_mac, MacAddr::BROADCAST), 1, 60),
            Verdict::Forward(vec![l].into())
        );
        // Split horizon: the link's frame matches the route back to the link, and is dropped.
        assert_eq!(
            s.forward(l, &eth(other, a_mac), 1, 60),
            Verdict::Drop(DropReason::NoRoute)
        );
        let c = s.endpoint(a).unwrap().counters;
        assert_eq!((c.rx_frames, c.drop_spoofed), (2, 1));
        assert_eq!(s.table().routes()[0].counters.frames, 1);
        assert!(s.add_endpoint("a", EndpointKind::Bridge).is_err());
        assert_eq!(s.route_id("all").unwrap(), s.route_id("1").unwrap());
    }

    /// A full mesh: three hosts' worth of links, broadcasts to every link. A broadcast
    /// from the local interface fans out to both links; one that came in over a link goes
    /// only to the interface (a relay to the other link would loop it round the mesh);
    /// a rule that names the incoming link as its source does relay, and the others
    /// are unchanged. Also from a link the next-ranked rules apply when the top ones
    /// would relay.
    #[test]
    fn rules_for_any_source_do_not_relay_between_links() {
        let mut s = Switch::new();
        let me: MacAddr = "02:00:00:00:00:01".parse().unwrap();
        let other: MacAddr = "02:00:00:00:00:02".parse().unwrap();
        let bcast = MacAddr([0xff; 6]);
        let vif = s
            .add_endpoint("vif", EndpointKind::Interface { mac: me })
            .unwrap();
        let h2 = s.add_endpoint("h2", EndpointKind::Link { vni: 7 }).unwrap();
        let h3 = s.add_endpoint("h3", EndpointKind::Link { vni: 7 }).unwrap();
        let rule = |name: &str, dst: MacMatch, source: SourceMatch, dest: Endpoint| RouteSpec {
            name: Some(name.into()),
            src: MacMatch::Any,
            dst,
            source,
            dest,
        };
        for (n, d) in [("b-vif", vif), ("b-h2", h2), ("b-h3", h3)] {
            s.add_route(rule(n, MacMatch::Exact(bcast), SourceMatch::Any, d))
                .unwrap();
        }
        let fan = |s: &mut Switch, from: Endpoint, src: MacAddr| match s.forward(
            from,
            &eth(src, bcast),
            1,
            60,
        ) {
            Verdict::Forward(d) => d.to_vec(),
            Verdict::Drop(r) => panic!("dropped: {r:?}"),
        };
        assert_eq!(fan(&mut s, vif, me), vec![h2, h3]);
        assert_eq!(fan(&mut s, h2, other), vec![vif]);
        assert_eq!(fan(&mut s, h3, other), vec![vif]);
        // Cached results agree with a full scan.
        assert_eq!(fan(&mut s, h2, other), vec![vif]);
        // Relaying on purpose: a rule from h2.
        s.add_route(rule(
            "relay",
            MacMatch::Exact(bcast),
            SourceMatch::Is(h2),
            h3,
        ))
        .unwrap();
        assert_eq!(fan(&mut s, h2, other), vec![h3]);
        assert_eq!(fan(&mut s, h3, other), vec![vif]);
        // A unicast rule for any source to a link is passed over from a link, and the
        // catch-all below it (to the interface) applies.
        s.add_route(rule("to-h3", MacMatch::Exact(other), SourceMatch::Any, h3))
            .unwrap();
        s.add_route(rule("rest", MacMatch::Any, SourceMatch::Any, vif))
            .unwrap();
        assert_eq!(
            s.forward(h2, &eth(me, other), 1, 60),
            Verdict::Forward(vec![vif].into())
        );
        assert_eq!(
            s.forward(vif, &eth(me, other), 1, 60),
            Verdict::Forward(vec![h3].into())
        );
    }

    /// Learning never moves a local guest's MAC away from its interface: frames from a
    /// link that claim it are forwarded as usual but teach nothing.
    #[test]
    fn learning_keeps_a_local_guests_mac_on_its_interface() {
        let mut s = Switch::new();
        let me: MacAddr = "02:00:00:00:00:01".parse().unwrap();
        let peer: MacAddr = "02:00:00:00:00:02".parse().unwrap();
        let vif = s
            .add_endpoint("vif", EndpointKind::Interface { mac: me })
            .unwrap();
        let l = s.add_endpoint("l", EndpointKind::Link { vni: 1 }).unwrap();
        s.set_learning(true);
        let to = |s: &mut Switch, from: Endpoint, src: MacAddr, dst: MacAddr| {
            s.forward(from, &eth(src, dst), 1, 60)
        };
        // Before the guest spoke, and after: a frame from the link claiming its MAC
        // teaches nothing.
        assert_eq!(to(&mut s, l, me, peer), Verdict::Drop(DropReason::NoRoute));
        assert!(!s.learned.contains_key(&me));
        to(&mut s, vif, me, peer);
        to(&mut s, l, peer, me);
        assert_eq!(s.learned.get(&me).map(|(e, _)| *e), Some(vif));
        assert_eq!(s.learned.get(&peer).map(|(e, _)| *e), Some(l));
        to(&mut s, l, me, peer);
        assert_eq!(s.learned.get(&me).map(|(e, _)| *e), Some(vif));
        assert_eq!(to(&mut s, l, peer, me), Verdict::Forward(vec![vif].into()));
    }

    #[test]
    fn removing_an_endpoint_removes_its_routes_and_learning_follows_moves() {
        let mut s = Switch::new();
        // Bridges: learned routes (from any source) do not relay between links.
        let l1 = s.add_endpoint("l1", EndpointKind::Bridge).unwrap();
        let l2 = s.add_endpoint("l2", EndpointKind::Bridge).unwrap();
        s.set_learning(true);
        let m: MacAddr = "02:00:00:00:00:0c".parse().unwrap();
        let n: MacAddr = "02:00:00:00:00:0d".parse().unwrap();
        assert_eq!(
            s.forward(l1, &eth(m, n), 1, 60),
            Verdict::Drop(DropReason::NoRoute)
        );
        assert_eq!(
            s.forward(l2, &eth(n, m), 1, 60),
            Verdict::Forward(vec![l1].into())
        );
        // m moves behind l2: the learned route follows.
        s.forward(l2, &eth(m, n), 1, 60);
        assert_eq!(
            s.forward(l1, &eth(n, m), 1, 60),
            Verdict::Forward(vec![l2].into())
        );
        // Learning is bounded.
        for i in 0..LEARN_MAX as u32 + 10 {
            let b = i.to_be_bytes();
            s.forward(l1, &eth(MacAddr([2, 1, b[0], b[1], b[2], b[3]]), n), 1, 60);
        }
        assert_eq!(s.learned.len(), LEARN_MAX);
        assert!(s.remove_endpoint("99").is_err());
        s.remove_endpoint(&l2.0.to_string()).unwrap();
        assert!(s.endpoint_id("l2").is_err());
        assert!(s.table().routes().iter().all(|r| !r.spec.mentions(l2)));
        s.set_learning(false);
        assert!(s.table().routes().is_empty());
    }

    /// `decision` (what the kernel fast path copies) answers as `forward` does, on random
    /// tables of interfaces and links with every kind of rule, spoofed frames included,
    /// and `version` moves with every rule change.
    #[test]
    fn decision_agrees_with_forward() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let macs: Vec<MacAddr> = (0..5u8)
            .map(|i| MacAddr([2, 0, 0, 0, 0, i]))
            .chain([MacAddr::BROADCAST])
            .collect();
        for _ in 0..20 {
            let mut s = Switch::new();
            let mut eps = Vec::new();
            for (i, &mac) in macs.iter().take(4).enumerate() {
                let kind = if i < 2 {
                    EndpointKind::Interface { mac }
                } else {
                    EndpointKind::Link { vni: 7 }
                };
                eps.push(s.add_endpoint(&format!("e{i}"), kind).unwrap());
            }
            for _ in 0..12 {
                let m = |v: u64, mac: MacAddr| match v {
                    0 => MacMatch::Any,
                    1 => MacMatch::Not(mac),
                    _ => MacMatch::Exact(mac),
                };
                let spec = RouteSpec {
                    name: None,
                    src: m(next(3), macs[next(6) as usize]),
                    dst: m(next(3), macs[next(6) as usize]),
                    source: if next(2) == 0 {
                        SourceMatch::Any
                    } else {
                        SourceMatch::Is(eps[next(4) as usize])
                    },
                    dest: eps[next(4) as usize],
                };
                let v = s.version();
                s.add_route(spec).unwrap();
                assert_ne!(s.version(), v);
            }
            for &from in &eps {
                for &src in &macs {
                    for &dst in &macs {
                        let d = s.decision(from, src, dst);
                        let f = s.forward(from, &eth(src, dst), 1, 60);
                        match (d, f) {
                            (Some(d), Verdict::Forward(fd)) => {
                                assert_eq!(d.dests, fd);
                                assert!(!d.routes.is_empty());
                            }
                            (None, Verdict::Drop(_)) => {}
                            (d, f) => panic!("decision {d:?} but forward {f:?}"),
                        }
                    }
                }
            }
        }
    }
}
