//! Tenants, their objects and a device's ledger driven together, against a
//! model of every object's contents: the unit tests and the fuzz target
//! (`fuzz/residency`, target `residency`) run random commands, sizes,
//! frees, maps, direct writes, busy and silent tenants, kills and the
//! passing of time through it, and it panics on the first broken rule:
//!
//! * a command sees every object it uses with its latest contents (no
//!   write lost by an eviction without a save, no stale restore);
//! * an object in use or mapped is never evicted; a resident object is
//!   never restored;
//! * the device's budget is never exceeded, and the ledger's count of each
//!   tenant's bytes is the tenant's own;
//! * a dead tenant's share comes back at once, and every request for room
//!   is answered (granted or refused) once time passes.
//!
//! Messages go through [`proto`](crate::proto)'s encoding both ways, so
//! the codec is exercised too.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::ledger::{Ledger, LedgerConfig, Outbox, TenantId};
use crate::objects::{Backing, Key, Objects, Plan};
use crate::proto::{FromTenant, ToTenant};
use crate::{Access, Policy};

/// One step of a simulation.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// A new tenant process.
    Join,
    /// Tenant `t` (an index among the live ones) creates an object.
    Create { t: u8, size: u16, zeroed: bool },
    /// Tenant `t` frees its `o`-th object.
    Free { t: u8, o: u8 },
    /// Tenant `t` runs a command on up to three of its objects; `writes`
    /// says which it changes.
    Use {
        t: u8,
        objs: [u8; 3],
        n: u8,
        writes: u8,
    },
    /// Tenant `t` maps (`on`) or unmaps its `o`-th object.
    Map { t: u8, o: u8, on: bool },
    /// The client writes into a mapped or published object directly.
    Direct { t: u8, o: u8 },
    /// Tenant `t` has work in flight (answers `Busy`) or not.
    Busy { t: u8, on: bool },
    /// Tenant `t` stops answering altogether, or starts again.
    Silent { t: u8, on: bool },
    /// Tenant `t`'s process dies (kill -9).
    Kill { t: u8 },
    /// Time passes (milliseconds).
    Tick { ms: u16 },
}

impl Op {
    /// Reads one op from `b` (None when it runs out).
    pub fn read(b: &mut &[u8]) -> Option<Op> {
        let mut byte = || -> Option<u8> {
            let (&x, rest) = b.split_first()?;
            *b = rest;
            Some(x)
        };
        let kind = byte()?;
        let t = byte()?;
        let a = byte()?;
        let c = byte()?;
        Some(match kind % 10 {
            0 => Op::Join,
            1 => Op::Create {
                t,
                size: u16::from_le_bytes([a, c]) % 1200 + 1,
                zeroed: kind & 0x80 != 0,
            },
            2 => Op::Free { t, o: a },
            3 => Op::Use {
                t,
                objs: [a, c, kind >> 4],
                n: kind >> 6,
                writes: c,
            },
            4 => Op::Map {
                t,
                o: a,
                on: c & 1 == 1,
            },
            5 => Op::Direct { t, o: a },
            6 => Op::Busy { t, on: a & 1 == 1 },
            7 => Op::Silent { t, on: a % 8 == 0 },
            8 => Op::Kill { t },
            _ => Op::Tick {
                ms: u16::from_le_bytes([a, c]) % 3000,
            },
        })
    }
}

/// An object's contents, as versions: 0 is zeros, each write adds one.
#[derive(Debug, Clone, Copy)]
struct Contents {
    latest: u64,
    device: Option<u64>,
    store: Option<u64>,
    maps: u32,
}

/// What a tenant's serving thread is blocked on.
#[derive(Debug)]
enum Pending {
    Alloc {
        seq: u32,
        key: Key,
        size: u64,
        zeroed: bool,
    },
    Switch {
        seq: u32,
        uses: Vec<(Key, Access)>,
    },
    Restore {
        seq: u32,
        plan: Plan,
        uses: Vec<(Key, Access)>,
        round: usize,
    },
}

#[derive(Debug)]
struct Tenant {
    objs: Objects,
    contents: BTreeMap<Key, Contents>,
    pending: Option<Pending>,
    /// What the waiting command holds (wanted).
    held: Vec<Key>,
    is_last: bool,
    busy: bool,
    silent: bool,
    seq: u32,
}

/// The simulation.
pub struct Sim {
    policy: Policy,
    ledger: Ledger,
    tenants: BTreeMap<TenantId, Tenant>,
    next_tenant: TenantId,
    next_key: Key,
    now: u64,
    inbox: VecDeque<(TenantId, Vec<u8>)>,
    /// Counts, for tests to see that the interesting paths ran.
    pub stats: SimStats,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SimStats {
    pub grants: u64,
    pub refusals: u64,
    pub evictions: u64,
    pub clean_evictions: u64,
    pub restores: u64,
    pub kills: u64,
    pub commands: u64,
    /// Commands that gave up after their objects kept being evicted.
    pub gave_up: u64,
}

const MS: u64 = 1_000_000;

impl Sim {
    pub fn new(budget: u64, policy: Policy) -> Sim {
        Sim {
            policy,
            ledger: Ledger::new(LedgerConfig {
                budget,
                oversubscribe: true,
                policy,
                tenant_cap: 0,
                answer_timeout_ns: 500 * MS,
                busy_backoff_ns: 5 * MS,
                need_timeout_ns: 4000 * MS,
            }),
            tenants: BTreeMap::new(),
            next_tenant: 1,
            next_key: 1,
            now: 0,
            inbox: VecDeque::new(),
            stats: SimStats::default(),
        }
    }

    fn tenant_id(&self, i: u8) -> Option<TenantId> {
        let n = self.tenants.len();
        (n > 0).then(|| *self.tenants.keys().nth(i as usize % n).unwrap_or(&0))
    }

    /// The `o`-th object of tenant `t`.
    fn key(&self, t: TenantId, o: u8) -> Option<Key> {
        let ten = self.tenants.get(&t)?;
        let n = ten.contents.len();
        (n > 0).then(|| ten.contents.keys().nth(o as usize % n).copied())?
    }

    /// Sends a tenant's message through the codec to the ledger.
    fn send(&mut self, t: TenantId, m: FromTenant) {
        let m = FromTenant::decode(&m.encode()).expect("a tenant's message decodes");
        let mut out = Outbox::new();
        self.ledger.handle(t, m, self.now, &mut out);
        self.post(out);
    }

    fn post(&mut self, out: Outbox) {
        for (t, m) in out {
            self.inbox.push_back((t, m.encode()));
        }
    }

    fn seq(&mut self, t: TenantId) -> u32 {
        let ten = self.tenants.get_mut(&t).expect("live tenant");
        ten.seq = ten.seq.wrapping_add(1);
        ten.seq
    }

    /// Runs one op and every message it leads to, then checks the rules.
    pub fn step(&mut self, op: Op) {
        match op {
            Op::Join => {
                if self.tenants.len() < 8 {
                    let t = self.next_tenant;
                    self.next_tenant += 1;
                    self.ledger.join(t);
                    self.tenants.insert(
                        t,
                        Tenant {
                            objs: Objects::new(self.policy),
                            contents: BTreeMap::new(),
                            pending: None,
                            held: Vec::new(),
                            is_last: false,
                            busy: false,
                            silent: false,
                            seq: 0,
                        },
                    );
                    self.send(
                        t,
                        FromTenant::Hello {
                            device_mem: 1 << 40,
                        },
                    );
                }
            }
            Op::Create { t, size, zeroed } => {
                if let Some(t) = self.idle_tenant(t) {
                    let key = self.next_key;
                    self.next_key += 1;
                    let seq = self.seq(t);
                    let size = u64::from(size);
                    self.pending(t).replace(Pending::Alloc {
                        seq,
                        key,
                        size,
                        zeroed,
                    });
                    self.send(
                        t,
                        FromTenant::Need {
                            seq,
                            bytes: size,
                            restore: false,
                            retry: false,
                        },
                    );
                }
            }
            Op::Free { t, o } => {
                if let Some((t, k)) = self.idle_tenant(t).and_then(|t| Some((t, self.key(t, o)?))) {
                    let ten = self.tenants.get_mut(&t).expect("live");
                    if ten.contents.get(&k).is_some_and(|c| c.maps == 0) {
                        ten.contents.remove(&k);
                        let r = ten.objs.remove(k).expect("known object");
                        if r.resident > 0 {
                            self.send(t, FromTenant::Release { bytes: r.resident });
                        }
                    }
                }
            }
            Op::Use { t, objs, n, writes } => {
                if let Some(t) = self.idle_tenant(t) {
                    let mut uses: Vec<(Key, Access)> = Vec::new();
                    for (i, &o) in objs.iter().take(usize::from(n) + 1).enumerate() {
                        if let Some(k) = self.key(t, o) {
                            let a = if writes & (1 << i) != 0 {
                                Access::Write
                            } else {
                                Access::Read
                            };
                            uses.push((k, a));
                        }
                    }
                    self.command(t, uses);
                }
            }
            Op::Map { t, o, on } => {
                if let Some((t, k)) = self.idle_tenant(t).and_then(|t| Some((t, self.key(t, o)?))) {
                    if on {
                        // A map is a command on the object (made resident)
                        // that then holds it.
                        self.command(t, vec![(k, Access::Write)]);
                        let ten = self.tenants.get_mut(&t).expect("live");
                        if ten.pending.is_none() && ten.objs.is_valid(k) {
                            let c = ten.contents.get_mut(&k).expect("known");
                            c.maps += 1;
                            ten.objs.set_pins(k, c.maps);
                        }
                    } else {
                        let ten = self.tenants.get_mut(&t).expect("live");
                        let c = ten.contents.get_mut(&k).expect("known");
                        c.maps = c.maps.saturating_sub(1);
                        ten.objs.set_pins(k, c.maps);
                    }
                }
            }
            Op::Direct { t, o } => {
                if let Some((t, k)) = self.tenant_id(t).and_then(|t| Some((t, self.key(t, o)?))) {
                    let ten = self.tenants.get_mut(&t).expect("live");
                    let c = ten.contents.get_mut(&k).expect("known");
                    if c.maps > 0 {
                        assert!(ten.objs.is_valid(k), "a mapped object was evicted");
                    }
                    // Only a resident object can be written in place (the
                    // client finds an evicted one withdrawn).
                    if ten.objs.is_valid(k) {
                        c.latest += 1;
                        c.device = Some(c.latest);
                        ten.objs.mark_dirty(k);
                    }
                }
            }
            Op::Busy { t, on } => {
                if let Some(t) = self.tenant_id(t) {
                    self.tenants.get_mut(&t).expect("live").busy = on;
                }
            }
            Op::Silent { t, on } => {
                if let Some(t) = self.tenant_id(t) {
                    self.tenants.get_mut(&t).expect("live").silent = on;
                }
            }
            Op::Kill { t } => {
                if let Some(t) = self.tenant_id(t) {
                    self.tenants.remove(&t);
                    let mut out = Outbox::new();
                    self.ledger.leave(t, self.now, &mut out);
                    // With `check`'s sum over live tenants: its share came
                    // back at once (what was waiting may have taken it).
                    assert_eq!(self.ledger.resident(t), None);
                    self.stats.kills += 1;
                    self.post(out);
                }
            }
            Op::Tick { ms } => {
                let to = self.now + u64::from(ms) * MS;
                self.advance(to);
            }
        }
        self.deliver();
        self.check();
    }

    /// Moves time to `to`, ticking the ledger at each of its deadlines.
    fn advance(&mut self, to: u64) {
        for _ in 0..10_000 {
            match self.ledger.next_deadline() {
                Some(d) if d <= to => {
                    self.now = self.now.max(d);
                    let mut out = Outbox::new();
                    self.ledger.tick(self.now, &mut out);
                    self.post(out);
                    self.deliver();
                }
                _ => break,
            }
        }
        self.now = self.now.max(to);
        let mut out = Outbox::new();
        self.ledger.tick(self.now, &mut out);
        self.post(out);
    }

    fn idle_tenant(&self, i: u8) -> Option<TenantId> {
        let t = self.tenant_id(i)?;
        self.tenants[&t].pending.is_none().then_some(t)
    }

    fn pending(&mut self, t: TenantId) -> &mut Option<Pending> {
        &mut self.tenants.get_mut(&t).expect("live").pending
    }

    /// A command on `uses`: a switch first if another tenant used the
    /// device since, then room for what must be restored.
    fn command(&mut self, t: TenantId, uses: Vec<(Key, Access)>) {
        if !self.tenants[&t].is_last && self.policy == Policy::Delay {
            // As the server does: only the order of use changes, so the
            // tenant goes on without an answer.
            let ten = self.tenants.get_mut(&t).expect("live");
            ten.is_last = true;
            ten.objs.switch_in();
            self.send(t, FromTenant::Active { seq: 0 });
            self.plan(t, uses, true);
            return;
        }
        if !self.tenants[&t].is_last {
            let seq = self.seq(t);
            self.pending(t).replace(Pending::Switch { seq, uses });
            self.send(t, FromTenant::Active { seq });
            return;
        }
        self.plan(t, uses, false);
    }

    /// As the server does: the command's objects are held (wanted) while
    /// the tenant waits for room, unless it is asked and has nothing else
    /// to give; what was taken so comes back in another round.
    fn plan(&mut self, t: TenantId, uses: Vec<(Key, Access)>, switched: bool) {
        let eager = self.policy == Policy::Eager && switched;
        let ten = self.tenants.get_mut(&t).expect("live");
        let held = ten.objs.plan(&uses, eager).pinned;
        ten.held = held;
        self.plan_round(t, uses, eager, 0);
    }

    fn plan_round(&mut self, t: TenantId, uses: Vec<(Key, Access)>, eager: bool, round: usize) {
        let ten = self.tenants.get_mut(&t).expect("live");
        let plan = ten.objs.missing(&uses, eager && round == 0);
        if plan.bytes == 0 || round >= 8 {
            for k in std::mem::take(&mut ten.held) {
                ten.objs.unpin(k);
            }
            if plan.bytes == 0 {
                self.run(t, &uses);
            } else {
                self.stats.gave_up += 1;
            }
            return;
        }
        let seq = self.seq(t);
        let bytes = plan.bytes;
        self.pending(t).replace(Pending::Restore {
            seq,
            plan,
            uses,
            round,
        });
        self.send(
            t,
            FromTenant::Need {
                seq,
                bytes,
                restore: true,
                retry: round > 0,
            },
        );
    }

    /// Restores what the plan needs (room granted) and is still out, gives
    /// back the room of what needs none, then runs the command, or asks
    /// again for what was evicted meanwhile.
    fn restore_and_run(&mut self, t: TenantId, plan: Plan, uses: Vec<(Key, Access)>, round: usize) {
        let ten = self.tenants.get_mut(&t).expect("live");
        let mut back = 0;
        for &k in &plan.restore {
            let c = ten.contents.get_mut(&k).expect("known");
            let o = ten.objs.get(k).expect("known");
            if o.valid {
                continue;
            }
            back += o.size;
            let back = match o.backing {
                Backing::Zero => 0,
                Backing::Stored => c.store.expect("a stored backing has a copy"),
                Backing::None => panic!("an evicted object without a backing"),
            };
            assert_eq!(back, c.latest, "restored contents are the latest");
            c.device = Some(back);
            ten.objs.restored(k, 1).expect("known");
            self.stats.restores += 1;
        }
        if plan.bytes > back {
            self.send(
                t,
                FromTenant::Release {
                    bytes: plan.bytes - back,
                },
            );
        }
        self.plan_round(t, uses, false, round + 1);
    }

    fn run(&mut self, t: TenantId, uses: &[(Key, Access)]) {
        let ten = self.tenants.get_mut(&t).expect("live");
        for &(k, a) in uses {
            let c = ten.contents.get_mut(&k).expect("known");
            assert!(ten.objs.is_valid(k), "a command's object is resident");
            assert_eq!(
                c.device,
                Some(c.latest),
                "a command sees the latest contents"
            );
            ten.objs.touch(k, a);
            if a == Access::Write {
                c.latest += 1;
                c.device = Some(c.latest);
            }
        }
        self.stats.commands += 1;
    }

    /// Delivers the ledger's messages until none are left.
    fn deliver(&mut self) {
        for _ in 0..100_000 {
            let Some((t, bytes)) = self.inbox.pop_front() else {
                return;
            };
            let m = ToTenant::decode(&bytes).expect("the ledger's message decodes");
            if self.tenants.contains_key(&t) {
                self.receive(t, m);
            }
        }
        panic!("messages kept coming");
    }

    fn receive(&mut self, t: TenantId, m: ToTenant) {
        match m {
            ToTenant::Grant { seq } | ToTenant::Refuse { seq } => {
                let granted = matches!(m, ToTenant::Grant { .. });
                if granted {
                    self.stats.grants += 1;
                } else {
                    self.stats.refusals += 1;
                }
                match self.pending(t).take() {
                    Some(Pending::Alloc {
                        seq: s,
                        key,
                        size,
                        zeroed,
                    }) if s == seq => {
                        if granted {
                            let ten = self.tenants.get_mut(&t).expect("live");
                            ten.objs.insert(key, size, true, zeroed).expect("fresh key");
                            let v = u64::from(!zeroed);
                            ten.contents.insert(
                                key,
                                Contents {
                                    latest: v,
                                    device: Some(v),
                                    store: None,
                                    maps: 0,
                                },
                            );
                        }
                    }
                    Some(Pending::Restore {
                        seq: s,
                        plan,
                        uses,
                        round,
                    }) if s == seq => {
                        if granted {
                            self.restore_and_run(t, plan, uses, round);
                        } else {
                            let ten = self.tenants.get_mut(&t).expect("live");
                            for k in std::mem::take(&mut ten.held) {
                                ten.objs.unpin(k);
                            }
                        }
                    }
                    other => panic!("an answer to nothing asked: {m:?} with {other:?}"),
                }
            }
            ToTenant::Switched { seq } => match self.pending(t).take() {
                Some(Pending::Switch { seq: s, uses }) if s == seq => {
                    let ten = self.tenants.get_mut(&t).expect("live");
                    ten.is_last = true;
                    ten.objs.switch_in();
                    self.plan(t, uses, true);
                }
                other => panic!("a switch not asked for: {other:?}"),
            },
            ToTenant::Displaced => {
                self.tenants.get_mut(&t).expect("live").is_last = false;
            }
            ToTenant::Evict { seq, bytes, force } => {
                let ten = self.tenants.get_mut(&t).expect("live");
                if ten.silent {
                    return;
                }
                if ten.busy {
                    self.send(t, FromTenant::Busy { seq });
                    return;
                }
                let (mut freed, mut saved) = (0u64, 0u64);
                let mut victims = ten.objs.victims(bytes);
                if victims.is_empty()
                    && force
                    && matches!(ten.pending, Some(Pending::Restore { .. }))
                {
                    victims = ten.objs.victims_forced(bytes);
                }
                for v in victims {
                    let c = ten.contents.get_mut(&v.key).expect("known");
                    assert_eq!(c.maps, 0, "a mapped object is never evicted");
                    let device = c.device.take().expect("a victim is resident");
                    assert_eq!(device, c.latest);
                    if v.save {
                        c.store = Some(device);
                        saved += v.size;
                    } else {
                        self.stats.clean_evictions += 1;
                    }
                    ten.objs
                        .evicted(v.key, v.save, 1)
                        .expect("eviction keeps every write");
                    freed += v.size;
                    self.stats.evictions += 1;
                }
                ten.is_last = false;
                self.send(t, FromTenant::Evicted { seq, freed, saved });
                let c = self.tenants[&t].objs.counters;
                self.send(t, FromTenant::Stats(c));
            }
        }
    }

    /// The rules that hold between steps.
    fn check(&self) {
        let budget = self.ledger.budget();
        assert!(self.ledger.used() <= budget, "budget exceeded");
        let mut sum = 0u64;
        for (&t, ten) in &self.tenants {
            let r = self
                .ledger
                .resident(t)
                .expect("the ledger knows a live tenant");
            sum += r;
            // A restore's room is granted before the objects are back, and
            // an allocation's before the object exists.
            let granted_ahead = 0;
            assert_eq!(
                r,
                ten.objs.resident() + granted_ahead,
                "the ledger's count is the tenant's"
            );
            for (&k, c) in &ten.contents {
                let o = ten.objs.get(k).expect("known");
                if o.valid {
                    assert_eq!(c.device, Some(c.latest), "resident contents are the latest");
                } else {
                    let back = match o.backing {
                        Backing::Zero => Some(0),
                        Backing::Stored => c.store,
                        Backing::None => None,
                    };
                    assert_eq!(back, Some(c.latest), "an evicted object's backing is right");
                }
            }
        }
        assert_eq!(self.ledger.used(), sum, "the device's count is the sum");
    }

    /// Ends the run: every tenant idle and answering, time passes until no
    /// request waits; then each tenant frees everything and the device is
    /// empty.
    pub fn finish(&mut self) {
        for ten in self.tenants.values_mut() {
            ten.busy = false;
            ten.silent = false;
        }
        let mut to = self.now;
        for _ in 0..1000 {
            if self.tenants.values().all(|t| t.pending.is_none()) {
                break;
            }
            to += 100 * MS;
            self.advance(to);
            self.deliver();
            self.check();
        }
        assert!(
            self.tenants.values().all(|t| t.pending.is_none()),
            "every request is answered once time passes"
        );
        assert_eq!(self.ledger.waiting(), 0);
        let ids: Vec<TenantId> = self.tenants.keys().copied().collect();
        for t in ids {
            let keys: Vec<Key> = self.tenants[&t].contents.keys().copied().collect();
            for k in keys {
                let ten = self.tenants.get_mut(&t).expect("live");
                ten.contents.remove(&k);
                let r = ten.objs.remove(k).expect("known");
                if r.resident > 0 {
                    self.send(t, FromTenant::Release { bytes: r.resident });
                }
            }
        }
        self.deliver();
        assert_eq!(self.ledger.used(), 0, "nothing left on the device");
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Every live tenant's objects, for tests.
    pub fn objects(&self) -> HashMap<TenantId, &Objects> {
        self.tenants.iter().map(|(&t, x)| (t, &x.objs)).collect()
    }
}

/// Runs a whole simulation from fuzz bytes: the first byte picks the
/// policy and the budget.
pub fn run_bytes(mut b: &[u8]) {
    let Some((&head, rest)) = b.split_first() else {
        return;
    };
    b = rest;
    let policy = if head & 1 == 0 {
        Policy::Delay
    } else {
        Policy::Eager
    };
    let budget = 1000 + u64::from(head >> 1) * 40;
    let mut sim = Sim::new(budget, policy);
    sim.step(Op::Join);
    sim.step(Op::Join);
    let mut n = 0;
    while let Some(op) = Op::read(&mut b) {
        sim.step(op);
        n += 1;
        if n > 4096 {
            break;
        }
    }
    sim.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift64*), so failures repeat.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    #[test]
    fn random_runs_keep_every_rule_under_both_policies() {
        let mut total = SimStats::default();
        for seed in 1..=200u64 {
            let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let mut b = r.bytes(1 + 4 * 400);
            // Mostly commands and creations, so that the budget is tight.
            for op in b[1..].chunks_mut(4) {
                op[0] = match op[0] % 16 {
                    0..=4 => 3,
                    5..=8 => 1,
                    9 => 2,
                    10 => 4,
                    11 => 5,
                    12 => 6,
                    13 => 9,
                    14 => 7,
                    _ => {
                        if op[1] % 8 == 0 {
                            8
                        } else {
                            0
                        }
                    }
                } | (op[0] & 0xf0);
            }
            let policy = if seed % 2 == 0 {
                Policy::Delay
            } else {
                Policy::Eager
            };
            b[0] = (b[0] & !1) | u8::from(policy == Policy::Eager);
            let mut sim = Sim::new(1000 + u64::from(b[0] >> 1) * 40, policy);
            sim.step(Op::Join);
            sim.step(Op::Join);
            let mut rest = &b[1..];
            while let Some(op) = Op::read(&mut rest) {
                sim.step(op);
            }
            let s = sim.stats;
            total.evictions += s.evictions;
            total.clean_evictions += s.clean_evictions;
            total.restores += s.restores;
            total.refusals += s.refusals;
            total.kills += s.kills;
            total.commands += s.commands;
            sim.finish();
        }
        // The runs must have reached the paths they are meant to check.
        assert!(total.evictions > 1000, "{total:?}");
        assert!(total.clean_evictions > 100, "{total:?}");
        assert!(total.restores > 1000, "{total:?}");
        assert!(total.kills > 10, "{total:?}");
        assert!(total.commands > 10_000, "{total:?}");
    }

    #[test]
    fn round_robin_among_tenants_that_fit_moves_nothing_with_delay_storing() {
        // Four tenants each holding a quarter of the budget, used in turn:
        // delay storing moves nothing once they are in, eager moves two
        // quarters at every switch.
        let mut moved = Vec::new();
        for policy in [Policy::Delay, Policy::Eager] {
            let mut sim = Sim::new(4000, policy);
            for _ in 0..4 {
                sim.step(Op::Join);
            }
            for t in 0..4u8 {
                for _ in 0..4 {
                    sim.step(Op::Create {
                        t,
                        size: 250,
                        zeroed: false,
                    });
                }
            }
            let totals = |s: &Sim| s.ledger().totals.bytes_saved + s.ledger().totals.bytes_restored;
            for round in 0..3 {
                let before = totals(&sim);
                for t in 0..4u8 {
                    sim.step(Op::Use {
                        t,
                        objs: [0, 1, 2],
                        n: 2,
                        writes: 0,
                    });
                    sim.step(Op::Use {
                        t,
                        objs: [3, 3, 3],
                        n: 0,
                        writes: 0,
                    });
                }
                if round > 0 {
                    moved.push(totals(&sim) - before);
                }
            }
            sim.finish();
        }
        assert_eq!(&moved[..2], &[0, 0], "delay storing: nothing moves");
        assert!(
            moved[2] >= 4 * 2 * 1000 - 2000 && moved[3] >= 4 * 2 * 1000 - 2000,
            "eager: two quarters a switch: {moved:?}"
        );
    }

    #[test]
    fn a_tenant_that_was_not_displaced_resumes_with_nothing_restored() {
        let mut sim = Sim::new(4000, Policy::Delay);
        sim.step(Op::Join);
        sim.step(Op::Join);
        sim.step(Op::Create {
            t: 0,
            size: 1000,
            zeroed: false,
        });
        sim.step(Op::Create {
            t: 1,
            size: 1000,
            zeroed: false,
        });
        let use0 = Op::Use {
            t: 0,
            objs: [0, 0, 0],
            n: 0,
            writes: 1,
        };
        sim.step(use0);
        // Another tenant runs in between: a switch, but nothing displaced.
        sim.step(Op::Use {
            t: 1,
            objs: [0, 0, 0],
            n: 0,
            writes: 1,
        });
        sim.step(Op::Tick { ms: 1000 });
        sim.step(use0);
        let o = sim.objects()[&1].counters;
        assert_eq!(
            (o.restores, o.skipped_restores, o.switches),
            (0, 2, 2),
            "each switch-in found the object resident"
        );
        assert_eq!(sim.ledger().totals.asks, 0, "nothing asked of anyone");
        sim.finish();
    }
}
