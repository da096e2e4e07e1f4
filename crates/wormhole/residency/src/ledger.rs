//! One device's ledger: its budget, what each tenant holds resident, which
//! tenant used it last, and who is asked to make room.
//!
//! The paper's per-core "last VM" is [`Ledger::last`]: the tenant that used
//! the device most recently. It is reset (the paper's -1) when that tenant
//! dies, because nothing of it is on the device any more. A tenant that is
//! not the last one says so before it uses the device (`Active`); the
//! previous one is then told it was displaced, and under the eager policy
//! it is asked to save and free everything first.
//!
//! A tenant is never evicted by the ledger: it is asked (`Evict`), and
//! evicts its own idle objects. One that has work in flight answers
//! `Busy`; one that does not answer within [`LedgerConfig::answer_timeout_ns`]
//! is taken as busy too, never as having freed anything. A tenant that
//! leaves (its process ended) gives its whole share back at once.
//!
//! The ledger believes what a tenant says about its own bytes: it keeps
//! honest tenants within the budget. A subverted tenant can lie only about
//! itself (and, on a CPU device, could allocate memory outside any ledger
//! anyway); it cannot make the ledger misbehave, take another tenant's
//! share, or stall it for longer than the answer timeout.

use std::collections::{BTreeMap, VecDeque};

use crate::proto::{FromTenant, ToTenant};
use crate::{Counters, Policy};

/// A tenant, as the ledger's holder numbers them.
pub type TenantId = u32;

/// Messages to send, in order.
pub type Outbox = Vec<(TenantId, ToTenant)>;

#[derive(Debug, Clone, Copy)]
pub struct LedgerConfig {
    /// Bytes the device lends all tenants together (0: what the first
    /// tenant's library reports).
    pub budget: u64,
    /// Whether tenants may together want more than the budget: idle ones
    /// are then asked to evict. Otherwise the budget is a hard limit, as a
    /// device's memory is (a request past it is refused).
    pub oversubscribe: bool,
    pub policy: Policy,
    /// Most one tenant may hold resident (0: the budget).
    pub tenant_cap: u64,
    /// How long an asked tenant may take to answer before it is taken as
    /// busy.
    pub answer_timeout_ns: u64,
    /// How long a tenant that was busy (or had nothing to give) is left
    /// alone before it is asked again.
    pub busy_backoff_ns: u64,
    /// How long a request for room may wait before it is refused.
    pub need_timeout_ns: u64,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            budget: 0,
            oversubscribe: false,
            policy: Policy::Delay,
            tenant_cap: 0,
            answer_timeout_ns: 2_000_000_000,
            busy_backoff_ns: 5_000_000,
            need_timeout_ns: 30_000_000_000,
        }
    }
}

/// What the ledger did, for reports and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub grants: u64,
    pub refusals: u64,
    /// `Evict` requests sent, and how they ended.
    pub asks: u64,
    pub busy: u64,
    pub timeouts: u64,
    pub bytes_granted: u64,
    /// Of `bytes_granted`: for restores.
    pub bytes_restored: u64,
    pub bytes_freed: u64,
    pub bytes_saved: u64,
    pub switches: u64,
    pub deaths: u64,
}

#[derive(Debug, Clone, Copy)]
struct Ask {
    seq: u32,
    bytes: u64,
    deadline: u64,
}

#[derive(Debug, Default)]
struct Share {
    resident: u64,
    last_active: u64,
    ask: Option<Ask>,
    skip_until: u64,
    greeted: bool,
    stats: Counters,
}

#[derive(Debug, Clone, Copy)]
struct Waiting {
    tenant: TenantId,
    seq: u32,
    bytes: u64,
    restore: bool,
    retry: bool,
    deadline: u64,
}

/// A tenant waiting, under the eager policy, for the previous one's save.
#[derive(Debug, Clone, Copy)]
struct SwitchWait {
    tenant: TenantId,
    seq: u32,
    victim: TenantId,
}

/// One device's ledger. Time is the caller's, in nanoseconds.
#[derive(Debug)]
pub struct Ledger {
    cfg: LedgerConfig,
    budget: u64,
    used: u64,
    last: Option<TenantId>,
    tenants: BTreeMap<TenantId, Share>,
    waiting: VecDeque<Waiting>,
    switch_waits: Vec<SwitchWait>,
    clock: u64,
    seq: u32,
    now: u64,
    pub totals: Totals,
    /// Counters of tenants that left.
    gone: Counters,
}

impl Ledger {
    pub fn new(cfg: LedgerConfig) -> Self {
        Ledger {
            budget: cfg.budget,
            cfg,
            used: 0,
            last: None,
            tenants: BTreeMap::new(),
            waiting: VecDeque::new(),
            switch_waits: Vec::new(),
            clock: 0,
            seq: 0,
            now: 0,
            totals: Totals::default(),
            gone: Counters::default(),
        }
    }

    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Bytes resident over all tenants.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// The tenant that used the device last (None: the paper's -1).
    pub fn last(&self) -> Option<TenantId> {
        self.last
    }

    pub fn resident(&self, t: TenantId) -> Option<u64> {
        self.tenants.get(&t).map(|s| s.resident)
    }

    /// Tenants served now: id, resident bytes, counters.
    pub fn shares(&self) -> impl Iterator<Item = (TenantId, u64, Counters)> + '_ {
        self.tenants.iter().map(|(&t, s)| (t, s.resident, s.stats))
    }

    /// Every tenant's counters, those that left included.
    pub fn counters(&self) -> Counters {
        let mut c = self.gone;
        for s in self.tenants.values() {
            c.add(&s.stats);
        }
        c
    }

    /// Requests waiting for room.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    fn cap(&self) -> u64 {
        match self.cfg.tenant_cap {
            0 => self.budget,
            c => c.min(self.budget),
        }
    }

    pub fn join(&mut self, t: TenantId) {
        self.tenants.entry(t).or_default();
    }

    /// A tenant left (its process ended): its share comes back at once.
    pub fn leave(&mut self, t: TenantId, now: u64, out: &mut Outbox) {
        self.now = now;
        let Some(s) = self.tenants.remove(&t) else {
            return;
        };
        self.used = self.used.saturating_sub(s.resident);
        self.gone.add(&s.stats);
        self.totals.deaths += 1;
        if self.last == Some(t) {
            self.last = None;
        }
        self.waiting.retain(|w| w.tenant != t);
        self.switch_waits.retain(|w| w.tenant != t);
        self.resolve_switch(t, out);
        self.pump(out);
    }

    /// Runs one message from tenant `t`.
    pub fn handle(&mut self, t: TenantId, msg: FromTenant, now: u64, out: &mut Outbox) {
        self.now = now;
        let Some(s) = self.tenants.get_mut(&t) else {
            return;
        };
        let first = !std::mem::replace(&mut s.greeted, true);
        match msg {
            // Believed only as a tenant's first word, sent before it ran
            // anything of its client's.
            FromTenant::Hello { device_mem } => {
                if first && self.budget == 0 {
                    self.budget = device_mem;
                }
            }
            FromTenant::Need {
                seq,
                bytes,
                restore,
                retry,
            } => self.need(t, seq, bytes, restore, retry, out),
            FromTenant::Release { bytes } => {
                self.release(t, bytes);
                self.pump(out);
            }
            FromTenant::Evicted { seq, freed, saved } => {
                self.release(t, freed);
                self.totals.bytes_freed = self.totals.bytes_freed.saturating_add(freed);
                self.totals.bytes_saved = self.totals.bytes_saved.saturating_add(saved);
                self.answered(t, seq, freed == 0, out);
            }
            FromTenant::Busy { seq } => {
                self.totals.busy += 1;
                self.answered(t, seq, true, out);
            }
            FromTenant::Active { seq } => self.active(t, seq, out),
            FromTenant::Stats(c) => s.stats = c,
        }
    }

    /// A request for room. One that retries (its command was given room
    /// once and lost some of it while it waited, to a request ahead of it)
    /// goes ahead of first requests, behind earlier retries, so that a
    /// command that waited its turn is not sent to the back of the line
    /// again and again, nor made to give by retries after its own.
    fn need(
        &mut self,
        t: TenantId,
        seq: u32,
        bytes: u64,
        restore: bool,
        retry: bool,
        out: &mut Outbox,
    ) {
        // More than a tenant may ever hold is refused at once; more than it
        // may hold beside what it holds now waits, as for the device's room
        // (its own idle objects are asked for: a tenant's count can also
        // be a moment behind, a release still on its way).
        let refuse = self.waiting.iter().any(|w| w.tenant == t)
            || (bytes > 0 && self.budget == 0)
            || bytes > self.cap();
        if refuse {
            self.refuse(t, seq, out);
        } else if self.waiting.is_empty() && self.fits(t, bytes) {
            self.grant(t, seq, bytes, restore, out);
        } else if !self.cfg.oversubscribe {
            self.refuse(t, seq, out);
        } else {
            let w = Waiting {
                tenant: t,
                seq,
                bytes,
                restore,
                retry,
                deadline: self.now.saturating_add(self.cfg.need_timeout_ns),
            };
            if retry {
                // Ahead of first requests, behind earlier retries: a retry
                // is never forced to give by one that came after it.
                let at = self
                    .waiting
                    .iter()
                    .position(|x| !x.retry)
                    .unwrap_or(self.waiting.len());
                self.waiting.insert(at, w);
            } else {
                self.waiting.push_back(w);
            }
            self.pump(out);
        }
    }

    /// Whether `bytes` more for `t` fit the device and the tenant's cap.
    fn fits(&self, t: TenantId, bytes: u64) -> bool {
        let resident = self.tenants.get(&t).map_or(0, |s| s.resident);
        self.used.saturating_add(bytes) <= self.budget
            && resident.saturating_add(bytes) <= self.cap()
    }

    fn grant(&mut self, t: TenantId, seq: u32, bytes: u64, restore: bool, out: &mut Outbox) {
        if let Some(s) = self.tenants.get_mut(&t) {
            s.resident = s.resident.saturating_add(bytes);
            self.used = self.used.saturating_add(bytes);
            self.totals.grants += 1;
            self.totals.bytes_granted = self.totals.bytes_granted.saturating_add(bytes);
            if restore {
                self.totals.bytes_restored = self.totals.bytes_restored.saturating_add(bytes);
            }
            out.push((t, ToTenant::Grant { seq }));
        }
    }

    fn refuse(&mut self, t: TenantId, seq: u32, out: &mut Outbox) {
        self.totals.refusals += 1;
        out.push((t, ToTenant::Refuse { seq }));
    }

    fn release(&mut self, t: TenantId, bytes: u64) {
        if let Some(s) = self.tenants.get_mut(&t) {
            let b = bytes.min(s.resident);
            s.resident -= b;
            self.used = self.used.saturating_sub(b);
        }
    }

    /// An `Evict` was answered (or given up on): `idle_for_now` leaves the
    /// tenant alone for a while (busy, or nothing to give).
    fn answered(&mut self, t: TenantId, seq: u32, idle_for_now: bool, out: &mut Outbox) {
        let now = self.now;
        let backoff = self.cfg.busy_backoff_ns;
        if let Some(s) = self.tenants.get_mut(&t) {
            if s.ask.is_some_and(|a| a.seq == seq) {
                s.ask = None;
                if idle_for_now {
                    s.skip_until = now.saturating_add(backoff);
                }
                self.resolve_switch(t, out);
            }
        }
        self.pump(out);
    }

    /// Tenant `t` uses the device. `seq` 0 asks for no answer (under
    /// delay storing only the order of use changes, and a tenant need not
    /// wait for that).
    fn active(&mut self, t: TenantId, seq: u32, out: &mut Outbox) {
        self.clock += 1;
        if let Some(s) = self.tenants.get_mut(&t) {
            s.last_active = self.clock;
        }
        let answer = |out: &mut Outbox| {
            if seq != 0 {
                out.push((t, ToTenant::Switched { seq }));
            }
        };
        let prev = self.last.replace(t);
        let Some(p) = prev.filter(|&p| p != t) else {
            answer(out);
            return;
        };
        self.totals.switches += 1;
        let Some(ps) = self.tenants.get(&p) else {
            answer(out);
            return;
        };
        out.push((p, ToTenant::Displaced));
        let flush = self.cfg.policy == Policy::Eager && self.cfg.oversubscribe && ps.resident > 0;
        if !flush || seq == 0 {
            answer(out);
            return;
        }
        if ps.ask.is_none() {
            self.ask(p, u64::MAX, false, out);
        }
        self.switch_waits.push(SwitchWait {
            tenant: t,
            seq,
            victim: p,
        });
    }

    fn resolve_switch(&mut self, victim: TenantId, out: &mut Outbox) {
        self.switch_waits.retain(|w| {
            if w.victim == victim {
                out.push((w.tenant, ToTenant::Switched { seq: w.seq }));
                false
            } else {
                true
            }
        });
    }

    /// Asks `t` to evict `bytes`; `force` lets it give what a command of its
    /// own waiting for room holds (never for its own request).
    fn ask(&mut self, t: TenantId, bytes: u64, force: bool, out: &mut Outbox) {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let deadline = self.now.saturating_add(self.cfg.answer_timeout_ns);
        if let Some(s) = self.tenants.get_mut(&t) {
            s.ask = Some(Ask {
                seq,
                bytes,
                deadline,
            });
            self.totals.asks += 1;
            out.push((t, ToTenant::Evict { seq, bytes, force }));
        }
    }

    /// Grants what fits, in order, and asks idle tenants for the room the
    /// first waiting request still lacks.
    fn pump(&mut self, out: &mut Outbox) {
        while let Some(&w) = self.waiting.front() {
            if self.fits(w.tenant, w.bytes) {
                self.waiting.pop_front();
                self.grant(w.tenant, w.seq, w.bytes, w.restore, out);
                continue;
            }
            let resident = self.tenants.get(&w.tenant).map_or(0, |s| s.resident);
            let over_cap = resident.saturating_add(w.bytes).saturating_sub(self.cap());
            if over_cap > 0 {
                // Over its own cap: only its own idle objects make room.
                let asked = self.tenants.get(&w.tenant).is_some_and(|s| s.ask.is_some());
                let now = self.now;
                let backing_off = self
                    .tenants
                    .get(&w.tenant)
                    .is_some_and(|s| s.skip_until > now);
                if !asked && !backing_off {
                    self.ask(w.tenant, over_cap, false, out);
                }
                return;
            }
            let short = self.used.saturating_add(w.bytes) - self.budget;
            let asked: u64 = self
                .tenants
                .values()
                .filter_map(|s| s.ask.map(|a| a.bytes.min(s.resident)))
                .fold(0u64, u64::saturating_add);
            let Some(mut short) = short.checked_sub(asked).filter(|&s| s > 0) else {
                return;
            };
            let now = self.now;
            let mut c: Vec<(u64, TenantId, u64)> = self
                .tenants
                .iter()
                .filter(|(_, s)| s.resident > 0 && s.ask.is_none() && s.skip_until <= now)
                .map(|(&t, s)| (s.last_active, t, s.resident))
                .collect();
            c.sort_unstable();
            for (_, t, resident) in c {
                if short == 0 {
                    break;
                }
                let b = short.min(resident);
                self.ask(t, b, t != w.tenant, out);
                short -= b;
            }
            return;
        }
    }

    /// Gives up on answers and requests whose time ran out, and asks again
    /// where a tenant's back-off ended.
    pub fn tick(&mut self, now: u64, out: &mut Outbox) {
        self.now = now;
        let late: Vec<TenantId> = self
            .tenants
            .iter()
            .filter(|(_, s)| s.ask.is_some_and(|a| a.deadline <= now))
            .map(|(&t, _)| t)
            .collect();
        for t in late {
            if let Some(s) = self.tenants.get_mut(&t) {
                s.ask = None;
                // Silent for that long: left alone as long again.
                s.skip_until = now.saturating_add(self.cfg.answer_timeout_ns);
                self.totals.timeouts += 1;
            }
            self.resolve_switch(t, out);
        }
        while let Some(i) = self.waiting.iter().position(|w| w.deadline <= now) {
            if let Some(w) = self.waiting.remove(i) {
                self.refuse(w.tenant, w.seq, out);
            }
        }
        self.pump(out);
    }

    /// When [`Ledger::tick`] next has something to do.
    pub fn next_deadline(&self) -> Option<u64> {
        let asks = self
            .tenants
            .values()
            .filter_map(|s| s.ask.map(|a| a.deadline));
        let waits = self.waiting.iter().map(|w| w.deadline);
        let backoffs = self
            .tenants
            .values()
            .map(|s| s.skip_until)
            .filter(|&u| u > self.now && !self.waiting.is_empty());
        asks.chain(waits).chain(backoffs).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(budget: u64, oversubscribe: bool, policy: Policy) -> Ledger {
        Ledger::new(LedgerConfig {
            budget,
            oversubscribe,
            policy,
            ..LedgerConfig::default()
        })
    }

    /// 100 bytes, oversubscribed, the Delay policy, with `tenants` joined.
    fn delay_100(tenants: &[TenantId]) -> Ledger {
        let mut l = ledger(100, true, Policy::Delay);
        for &t in tenants {
            l.join(t);
        }
        l
    }

    /// 100 bytes, oversubscribed, each tenant capped at 60.
    fn capped_at_60() -> Ledger {
        Ledger::new(LedgerConfig {
            budget: 100,
            oversubscribe: true,
            tenant_cap: 60,
            ..LedgerConfig::default()
        })
    }

    fn need(l: &mut Ledger, t: TenantId, seq: u32, bytes: u64, now: u64) -> Outbox {
        let mut out = Vec::new();
        l.handle(
            t,
            FromTenant::Need {
                seq,
                bytes,
                restore: false,
                retry: false,
            },
            now,
            &mut out,
        );
        out
    }

    /// The ledger's request that tenant `t` evict `bytes`.
    fn ask(t: TenantId, seq: u32, bytes: u64, force: bool) -> (TenantId, ToTenant) {
        (t, ToTenant::Evict { seq, bytes, force })
    }

    fn evicted(l: &mut Ledger, t: TenantId, seq: u32, freed: u64, saved: u64, now: u64) -> Outbox {
        let mut out = Vec::new();
        l.handle(t, FromTenant::Evicted { seq, freed, saved }, now, &mut out);
        out
    }

    #[test]
    fn without_oversubscription_the_budget_is_a_hard_limit() {
        let mut l = ledger(100, false, Policy::Delay);
        l.join(1);
        l.join(2);
        assert_eq!(
            need(&mut l, 1, 1, 60, 0),
            vec![(1, ToTenant::Grant { seq: 1 })]
        );
        assert_eq!(
            need(&mut l, 2, 1, 41, 0),
            vec![(2, ToTenant::Refuse { seq: 1 })]
        );
        assert_eq!(l.used(), 60);
        let mut out = Vec::new();
        l.leave(1, 0, &mut out);
        assert_eq!(l.used(), 0, "a dead tenant's share comes back at once");
        assert_eq!(
            need(&mut l, 2, 2, 100, 0),
            vec![(2, ToTenant::Grant { seq: 2 })]
        );
    }

    #[test]
    fn room_is_asked_of_the_least_recently_active_tenant_first() {
        let mut l = delay_100(&[1, 2, 3]);
        let mut out = Vec::new();
        for t in 1..=2 {
            need(&mut l, t, 1, 50, 0);
        }
        // Tenant 2 then 1 used the device: 2 is the least recent.
        l.handle(2, FromTenant::Active { seq: 5 }, 0, &mut out);
        l.handle(1, FromTenant::Active { seq: 5 }, 0, &mut out);
        out.clear();
        let out = need(&mut l, 3, 1, 30, 0);
        assert_eq!(out, vec![ask(2, 1, 30, true)]);
        let out = evicted(&mut l, 2, 1, 40, 0, 1);
        assert_eq!(out, vec![(3, ToTenant::Grant { seq: 1 })]);
        assert_eq!((l.used(), l.resident(2)), (90, Some(10)));
    }

    #[test]
    fn a_silent_tenant_is_taken_as_busy_and_the_next_one_asked() {
        let mut l = delay_100(&[1, 2, 3]);
        need(&mut l, 1, 1, 50, 0);
        need(&mut l, 2, 1, 50, 0);
        let out = need(&mut l, 3, 1, 50, 0);
        assert_eq!(out, vec![ask(1, 1, 50, true)], "oldest first (ties by id)");
        let mut out = Vec::new();
        let t = LedgerConfig::default().answer_timeout_ns;
        assert_eq!(l.next_deadline(), Some(t));
        l.tick(t, &mut out);
        assert_eq!(out, vec![ask(2, 2, 50, true)]);
        assert_eq!(l.resident(1), Some(50), "never taken as evicted");
        // The late answer still counts for what it freed.
        let out = evicted(&mut l, 1, 1, 50, 50, t + 1);
        assert_eq!(out, vec![(3, ToTenant::Grant { seq: 1 })]);
    }

    #[test]
    fn a_request_nobody_can_make_room_for_is_refused_in_time() {
        let mut l = delay_100(&[1, 2]);
        need(&mut l, 1, 1, 100, 0);
        let out = need(&mut l, 2, 1, 10, 0);
        assert_eq!(out, vec![ask(1, 1, 10, true)]);
        let mut out = Vec::new();
        l.handle(1, FromTenant::Busy { seq: 1 }, 1, &mut out);
        assert!(out.is_empty(), "left alone while backing off");
        let mut asks = 0;
        for _ in 0..100_000 {
            let Some(now) = l.next_deadline() else { break };
            out.clear();
            l.tick(now, &mut out);
            for (t, m) in out.clone() {
                if let ToTenant::Evict { seq, .. } = m {
                    asks += 1;
                    l.handle(t, FromTenant::Busy { seq }, now, &mut out);
                }
                if m == (ToTenant::Refuse { seq: 1 }) {
                    assert!(now >= LedgerConfig::default().need_timeout_ns);
                    assert!(asks > 10, "asked again after each back-off");
                    return;
                }
            }
        }
        panic!("never refused");
    }

    /// Requests are served in order: a small one behind a large one that
    /// does not fit yet waits, even if it would fit, so that a stream of
    /// small requests cannot starve a large one. (Tenants pin nothing while
    /// they wait, so waiting in line holds no room anyone needs.)
    #[test]
    fn requests_are_served_in_order() {
        let mut l = delay_100(&[1, 2, 3]);
        need(&mut l, 1, 1, 80, 0);
        let out = need(&mut l, 2, 1, 60, 0);
        assert_eq!(out, vec![ask(1, 1, 40, true)]);
        assert!(
            need(&mut l, 3, 1, 10, 0).is_empty(),
            "10 would fit, but waits"
        );
        let out = evicted(&mut l, 1, 1, 40, 0, 1);
        assert_eq!(
            out,
            vec![(2, ToTenant::Grant { seq: 1 }), ask(1, 2, 10, true)],
            "the first served, room asked for the next"
        );
        assert_eq!(l.used(), 100);
    }

    /// A command that lost objects while it waited retries at the front,
    /// and the tenant is never asked to give what its own request holds.
    #[test]
    fn a_retry_goes_first_and_a_tenant_is_not_forced_for_itself() {
        let mut l = delay_100(&[1, 2, 3]);
        need(&mut l, 1, 1, 80, 0);
        assert_eq!(need(&mut l, 2, 1, 60, 0), vec![ask(1, 1, 40, true)]);
        let mut out = Vec::new();
        let retry = FromTenant::Need {
            seq: 2,
            bytes: 10,
            restore: true,
            retry: true,
        };
        l.handle(3, retry, 0, &mut out);
        assert_eq!(
            out,
            vec![(3, ToTenant::Grant { seq: 2 }), ask(3, 2, 10, true)],
            "ahead of the 60, then asked for the rest of the 60's room"
        );
        // Tenant 3 is the first asked (the oldest, by id) for room for its
        // own request: not forced.
        let mut l = delay_100(&[3, 4]);
        need(&mut l, 3, 1, 40, 0);
        need(&mut l, 4, 1, 50, 0);
        assert_eq!(need(&mut l, 3, 2, 20, 0), vec![ask(3, 1, 10, false)]);
    }

    /// Past its cap beside what it holds, a tenant's request waits while
    /// its own idle objects make room (its count may also be a moment
    /// behind: an eviction's answer on its way).
    #[test]
    fn a_request_past_the_tenants_cap_waits_for_its_own_room() {
        let mut l = capped_at_60();
        l.join(1);
        need(&mut l, 1, 1, 50, 0);
        assert_eq!(need(&mut l, 1, 2, 20, 0), vec![ask(1, 1, 10, false)]);
        let out = evicted(&mut l, 1, 1, 10, 10, 1);
        assert_eq!(out, vec![(1, ToTenant::Grant { seq: 2 })]);
        assert_eq!(l.resident(1), Some(60));
    }

    #[test]
    fn a_tenant_may_not_hold_more_than_its_cap_nor_wait_twice() {
        let mut l = capped_at_60();
        l.join(1);
        l.join(2);
        assert_eq!(
            need(&mut l, 1, 1, 61, 0),
            vec![(1, ToTenant::Refuse { seq: 1 })]
        );
        need(&mut l, 1, 2, 60, 0);
        need(&mut l, 2, 1, 60, 0);
        assert_eq!(
            need(&mut l, 2, 2, 1, 0),
            vec![(2, ToTenant::Refuse { seq: 2 })]
        );
    }

    #[test]
    fn eager_switches_wait_for_the_previous_tenants_save_and_delay_ones_do_not() {
        for policy in [Policy::Delay, Policy::Eager] {
            let mut l = ledger(100, true, policy);
            l.join(1);
            l.join(2);
            let mut out = Vec::new();
            need(&mut l, 1, 1, 30, 0);
            l.handle(1, FromTenant::Active { seq: 1 }, 0, &mut out);
            assert_eq!(out, vec![(1, ToTenant::Switched { seq: 1 })]);
            out.clear();
            l.handle(2, FromTenant::Active { seq: 1 }, 0, &mut out);
            if policy == Policy::Delay {
                assert_eq!(
                    out,
                    vec![(1, ToTenant::Displaced), (2, ToTenant::Switched { seq: 1 })]
                );
                continue;
            }
            assert_eq!(
                out,
                vec![(1, ToTenant::Displaced), ask(1, 1, u64::MAX, false)]
            );
            out = evicted(&mut l, 1, 1, 30, 30, 0);
            assert_eq!(out, vec![(2, ToTenant::Switched { seq: 1 })]);
            assert_eq!(l.last(), Some(2));
            l.leave(2, 0, &mut out);
            assert_eq!(l.last(), None, "reset when the last tenant dies");
        }
    }

    #[test]
    fn an_active_with_seq_0_gets_no_answer_but_displaces() {
        let mut l = delay_100(&[1, 2]);
        let mut out = Vec::new();
        l.handle(1, FromTenant::Active { seq: 0 }, 0, &mut out);
        assert!(out.is_empty());
        l.handle(2, FromTenant::Active { seq: 0 }, 0, &mut out);
        assert_eq!(out, vec![(1, ToTenant::Displaced)]);
        assert_eq!(l.last(), Some(2));
    }

    #[test]
    fn only_a_first_hello_sets_an_unset_budget_and_unknown_tenants_are_ignored() {
        let mut l = ledger(0, true, Policy::Delay);
        l.join(1);
        let mut out = Vec::new();
        assert_eq!(
            need(&mut l, 1, 1, 1, 0),
            vec![(1, ToTenant::Refuse { seq: 1 })]
        );
        l.join(2);
        l.handle(2, FromTenant::Hello { device_mem: 1000 }, 0, &mut out);
        l.handle(2, FromTenant::Hello { device_mem: 1 }, 0, &mut out);
        assert_eq!(l.budget(), 1000);
        l.handle(9, FromTenant::Release { bytes: 5 }, 0, &mut out);
        assert!(out.is_empty());
    }
}
