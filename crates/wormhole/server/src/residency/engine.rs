//! What a tenant's residency does the same way for OpenCL (`local.rs`) and
//! for CUDA (`cuda.rs`): the serve lock, the link to the ledger, the
//! paper's "this tenant used the device last" flag, asking the ledger with
//! the serve lock let go, the switch at the start of a slow path, the
//! rounds that bring evicted objects back, the residency thread's loop and
//! its turn to evict. What differs (how an object's bytes move, which
//! objects a command uses, when the tenant is idle) stays with each API.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wormhole_residency::objects::{Key, Objects, Plan, Victim};
use wormhole_residency::proto::{FromTenant, ToTenant, MAX_MESSAGE};
use wormhole_residency::{Access, Counters, Policy};

use super::link::{Answer, Link};
use super::serve_lock::ServeLock;
use super::store::Store;
use super::{ResidencyError, STORE_FD};
use crate::config::{Config, ResidencyMode};

/// How long the residency thread waits for the serving thread to finish
/// its call before it answers `Busy`.
const LOCK_WAIT: Duration = Duration::from_millis(20);
/// How long a command keeps asking for room for its objects (others may
/// evict some while it waits; retries go ahead of first requests) before
/// it fails: the ledger's own wait for room. A count of rounds ran out
/// under heavy sharing while room was still coming (seven clients in a
/// 12 MiB budget, one run in two in CI).
const RETRY_FOR: Duration = Duration::from_secs(30);

/// One round of bringing objects back: what it restored, what failed,
/// what is still missing (others may have evicted some meanwhile).
pub(super) struct Round {
    pub back: u64,
    pub failed: Option<ResidencyError>,
    pub next: Plan,
}

/// The policy the configuration names (`off` moves nothing, so the
/// ledger's bookkeeping is delay storing's).
pub(super) fn policy(config: &Config) -> Policy {
    match config.residency {
        ResidencyMode::Eager => Policy::Eager,
        ResidencyMode::Delay | ResidencyMode::Off => Policy::Delay,
    }
}

/// A tenant's store: the file the listener passed (fd 6, with
/// `store_dir`) or a memory file, of `store_size` bytes or else `cap`.
pub(super) fn open_store(config: &Config, cap: u64) -> Result<Store, ResidencyError> {
    let size = match config.store_size {
        0 => cap,
        s => s,
    };
    let fd = config
        .store_dir
        .as_ref()
        .and_then(|_| super::store::inherited(STORE_FD));
    Store::open(fd, size)
}

/// One round over `plan` in the state `st` (whose objects `objs` gives):
/// each object still not resident comes back by `restore`, until one
/// fails; then what is still missing of `list`.
pub(super) fn restore_round<S>(
    st: &mut S,
    objs: fn(&S) -> &Objects,
    list: &[(Key, Access)],
    plan: &Plan,
    mut restore: impl FnMut(&mut S, Key) -> Result<(), ResidencyError>,
) -> Round {
    let mut back = 0u64;
    let mut failed = None;
    for &k in &plan.restore {
        let Some(size) = objs(st).get(k).filter(|o| !o.valid).map(|o| o.size) else {
            continue;
        };
        match restore(st, k) {
            Ok(()) => back += size,
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let next = objs(st).missing(list, false);
    Round { back, failed, next }
}

/// Why a command's objects could not all be brought back.
pub(super) enum Short {
    /// The ledger refused the room (these bytes).
    NoRoom(u64),
    /// Copying one back failed.
    Failed(ResidencyError),
    /// They kept being evicted while the command waited, past the limit.
    KeptEvicted,
}

pub(super) struct Engine {
    pub policy: Policy,
    pub serve: ServeLock,
    pub link: Link,
    /// The device's last tenant is this one, as far as it knows (the
    /// paper's per-core "last VM" check, kept on the tenant's side: set by
    /// its own switch, cleared when the ledger says another used the
    /// device).
    is_last: AtomicBool,
    /// The serving thread waits for the ledger (see [`Engine::ask`]).
    waiting: AtomicBool,
}

impl Engine {
    pub(super) fn new(policy: Policy, link: Link) -> Engine {
        Engine {
            policy,
            serve: ServeLock::new(),
            link,
            is_last: AtomicBool::new(false),
            waiting: AtomicBool::new(false),
        }
    }

    #[inline]
    pub(super) fn is_last(&self) -> bool {
        self.is_last.load(Ordering::Acquire)
    }

    pub(super) fn waiting(&self) -> bool {
        self.waiting.load(Ordering::Acquire)
    }

    /// Asks the ledger with the serve lock let go, so that this tenant's
    /// own idle objects can be evicted to make the room asked for.
    pub(super) fn ask(&self, make: impl FnOnce(u32) -> FromTenant) -> Answer {
        let held = self.serve.pause();
        self.waiting.store(true, Ordering::Release);
        let a = self.link.ask(make);
        self.waiting.store(false, Ordering::Release);
        self.serve.resume(held);
        a
    }

    /// At the start of a slow path: if another tenant used the device
    /// since, tells the ledger this one runs now (eager: and waits while
    /// the previous tenant saves everything, the baseline's rule). Returns
    /// whether it switched.
    pub(super) fn switch_in(&self) -> bool {
        if self.is_last() {
            return false;
        }
        if self.policy == Policy::Eager {
            if self.ask(|seq| FromTenant::Active { seq }) == Answer::Dead {
                self.is_last.store(true, Ordering::Release);
            }
        } else {
            // Only the ledger's order of use changes: no answer.
            self.is_last.store(true, Ordering::Release);
            self.link.send(&FromTenant::Active { seq: 0 });
        }
        true
    }

    /// Brings back what `first` names: room from the ledger, then `round`
    /// copies back (with the serve lock held again) and says what is still
    /// missing, until nothing is. Each round waits on the ledger for its
    /// grant, which paces it. Returns whether anything came back.
    pub(super) fn bring_back(
        &self,
        first: Plan,
        mut round: impl FnMut(&Plan) -> Round,
    ) -> Result<bool, Short> {
        let mut plan = first;
        let mut restored = false;
        let deadline = Instant::now() + RETRY_FOR;
        for n in 0u64.. {
            if plan.bytes == 0 {
                return Ok(restored);
            }
            if n > 0 && Instant::now() >= deadline {
                break;
            }
            let bytes = plan.bytes;
            let a = self.ask(|seq| FromTenant::Need {
                seq,
                bytes,
                restore: true,
                retry: n > 0,
            });
            if a == Answer::No {
                return Err(Short::NoRoom(bytes));
            }
            let r = round(&plan);
            if bytes > r.back && a == Answer::Yes {
                self.link.send(&FromTenant::Release {
                    bytes: bytes - r.back,
                });
            }
            if let Some(e) = r.failed {
                return Err(Short::Failed(e));
            }
            restored = true;
            plan = r.next;
        }
        if plan.bytes == 0 {
            Ok(restored)
        } else {
            Err(Short::KeptEvicted)
        }
    }

    /// The residency thread: answers, displacements, and requests to
    /// evict, which `on_evict` serves.
    pub(super) fn read_loop(&self, on_evict: impl Fn(u32, u64, bool)) {
        let mut buf = [0u8; MAX_MESSAGE + 1];
        while let Some(n) = self.link.recv(&mut buf) {
            match ToTenant::decode(&buf[..n]) {
                Ok(ToTenant::Grant { seq }) => self.link.deliver(seq, true),
                Ok(ToTenant::Refuse { seq }) => self.link.deliver(seq, false),
                Ok(ToTenant::Switched { seq }) => {
                    self.is_last.store(true, Ordering::Release);
                    self.link.deliver(seq, true);
                }
                Ok(ToTenant::Displaced) => self.is_last.store(false, Ordering::Release),
                Ok(ToTenant::Evict { seq, bytes, force }) => on_evict(seq, bytes, force),
                Err(e) => log::warn!("residency: a bad message from the listener: {e}"),
            }
        }
        self.link.die();
    }

    /// The residency thread's turn to evict: with the serve lock (the
    /// tenant between calls; else `Busy`), `work` evicts and gives the
    /// answer, which is sent before the lock is let go: the serving
    /// thread's next request for room must reach the ledger after the bytes
    /// this freed. `None` when the tenant was busy.
    pub(super) fn evict_turn(
        &self,
        seq: u32,
        work: impl FnOnce() -> FromTenant,
    ) -> Option<FromTenant> {
        if !self.serve.try_lock_for(LOCK_WAIT) {
            self.link.send(&FromTenant::Busy { seq });
            return None;
        }
        let answer = work();
        self.link.send(&answer);
        // SAFETY: this thread took the lock above (try_lock_for succeeded).
        unsafe { self.serve.unlock_evictor() };
        Some(answer)
    }

    /// What to evict for at least `bytes` (all for `u64::MAX`): idle
    /// objects, least recently used first; a waiting command's own too
    /// when the ledger insists (`force`) and nothing else is left (see
    /// [`Objects::victims_forced`]).
    pub(super) fn victims(&self, objs: &Objects, bytes: u64, force: bool) -> Vec<Victim> {
        let v = objs.victims(bytes);
        if v.is_empty() && force && self.waiting() {
            objs.victims_forced(bytes)
        } else {
            v
        }
    }

    /// Evicts `victims` with `evict` (which says whether it saved) and
    /// tells the ledger what that freed.
    pub(super) fn evicted(
        seq: u32,
        victims: Vec<Victim>,
        mut evict: impl FnMut(&Victim) -> Result<bool, ResidencyError>,
    ) -> FromTenant {
        let (mut freed, mut saved) = (0u64, 0u64);
        for v in victims {
            match evict(&v) {
                Ok(s) => {
                    freed += v.size;
                    if s {
                        saved += v.size;
                    }
                }
                Err(e) => log::warn!("residency: evicting: {e}"),
            }
        }
        FromTenant::Evicted { seq, freed, saved }
    }

    /// After an eviction turn that evicted: the tenant's counters to the
    /// ledger, for its report.
    pub(super) fn stats_after(
        &self,
        answer: Option<FromTenant>,
        counters: impl FnOnce() -> Counters,
    ) {
        if matches!(answer, Some(FromTenant::Evicted { .. })) {
            self.link.send(&FromTenant::Stats(counters()));
        }
    }

    /// One line for the tenant's report: `what` names the API and its
    /// objects ("residency (CUDA, delay): 3 slabs, ...").
    pub(super) fn summary(&self, api: &str, noun: &str, objs: &Objects, store: &Store) -> String {
        let policy = match self.policy {
            Policy::Delay => "delay",
            Policy::Eager => "eager",
        };
        format!(
            "residency ({api}{policy}): {} {noun}, {} bytes resident, store {} of {} bytes; {}{}",
            objs.len(),
            objs.resident(),
            store.used(),
            store.size(),
            objs.counters,
            if self.link.is_dead() {
                "; no ledger (the listener is gone)"
            } else {
                ""
            }
        )
    }
}
