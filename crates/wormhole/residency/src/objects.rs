//! One tenant's memory objects on one device: which are resident, which
//! changed since their last save, which may not move now, and in what order
//! they go when room is needed.
//!
//! The paper's per-VM "last core" is, per object, [`Obj::valid`]: the
//! device copy is still the object's. It is reset (the paper's -1) by an
//! eviction, the only thing that takes a device copy away. An object is
//! saved only when it is evicted and dirty; a clean one is freed without a
//! copy, because its backing (the host store's copy, or zeros for an object
//! never written) is still right. An object is restored only when a command
//! uses it and it is not valid.

use rustc_hash::FxHashMap;

use thiserror::Error;

use crate::{Access, Counters, Policy};

/// An object's key: the caller's handle for it (the library's pointer).
pub type Key = u64;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ObjectsError {
    #[error("object {0:#x} is already known")]
    Duplicate(Key),
    #[error("object {0:#x} is not known")]
    Unknown(Key),
    #[error("object {0:#x} was evicted dirty without a save: its contents would be lost")]
    LostWrite(Key),
}

/// Where an object's contents are when its device copy is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// Nowhere but the device: it must be saved before it is evicted.
    None,
    /// Zeros: an object created without contents and not written since.
    Zero,
    /// The host store's copy, from the last save.
    Stored,
}

/// One memory object.
#[derive(Debug, Clone)]
pub struct Obj {
    pub size: u64,
    /// Whether its device copy may be taken away at all (objects whose
    /// storage the server does not control are counted, never evicted).
    pub evictable: bool,
    /// The device copy is there (the paper's "last core" is this one).
    pub valid: bool,
    /// The device copy changed since the backing was made.
    pub dirty: bool,
    pub backing: Backing,
    /// Live mappings: the client may touch it any time, so it stays.
    pub pins: u32,
    /// Commands waiting for room that use it: it stays unless its tenant
    /// has nothing else to give ([`Objects::victims_forced`]).
    pub wanted: u32,
    last_use: u64,
    /// The switch epoch of its last use (see [`Objects::switch_in`]).
    epoch: u64,
}

impl Obj {
    /// Whether an eviction under `policy` must copy it out first.
    pub fn needs_save(&self, policy: Policy) -> bool {
        policy == Policy::Eager || self.dirty || self.backing == Backing::None
    }
}

/// What a command's use of objects needs before it runs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Objects to restore (not valid), in order.
    pub restore: Vec<Key>,
    /// Their bytes: room the device must make first.
    pub bytes: u64,
    /// Objects the plan holds (wanted), to let go of with
    /// [`Objects::unpin`] once the command holds them.
    pub pinned: Vec<Key>,
}

/// An object chosen for eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Victim {
    pub key: Key,
    pub size: u64,
    /// Copy it out before freeing it.
    pub save: bool,
}

/// What removing an object gives back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    /// Bytes that were resident (to give back to the device's ledger).
    pub resident: u64,
    /// Whether the store held a copy (to free there).
    pub stored: bool,
}

/// One tenant's objects on one device.
#[derive(Debug)]
pub struct Objects {
    policy: Policy,
    // FxHash: keys are the library's pointers, not a client's choice, and
    // a lookup is on every command's path.
    objs: FxHashMap<Key, Obj>,
    clock: u64,
    epoch: u64,
    resident: u64,
    pub counters: Counters,
}

impl Objects {
    pub fn new(policy: Policy) -> Self {
        Objects {
            policy,
            objs: FxHashMap::default(),
            clock: 0,
            epoch: 0,
            resident: 0,
            counters: Counters::default(),
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Bytes whose device copy is there.
    pub fn resident(&self) -> u64 {
        self.resident
    }

    pub fn len(&self) -> usize {
        self.objs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objs.is_empty()
    }

    pub fn get(&self, key: Key) -> Option<&Obj> {
        self.objs.get(&key)
    }

    /// Whether `key` is known and its device copy there.
    #[inline]
    pub fn is_valid(&self, key: Key) -> bool {
        self.objs.get(&key).is_some_and(|o| o.valid)
    }

    /// A new object, resident (its room was granted before). `zeroed`: its
    /// contents are all zeros (made without initial data), so it needs no
    /// save until written.
    pub fn insert(
        &mut self,
        key: Key,
        size: u64,
        evictable: bool,
        zeroed: bool,
    ) -> Result<(), ObjectsError> {
        if self.objs.contains_key(&key) {
            return Err(ObjectsError::Duplicate(key));
        }
        self.clock += 1;
        self.objs.insert(
            key,
            Obj {
                size,
                evictable,
                valid: true,
                dirty: !zeroed,
                backing: if zeroed { Backing::Zero } else { Backing::None },
                pins: 0,
                wanted: 0,
                last_use: self.clock,
                epoch: self.epoch,
            },
        );
        self.resident = self.resident.saturating_add(size);
        Ok(())
    }

    /// Forgets an object (the library destroyed it).
    pub fn remove(&mut self, key: Key) -> Option<Removed> {
        let o = self.objs.remove(&key)?;
        let resident = if o.valid { o.size } else { 0 };
        self.resident = self.resident.saturating_sub(resident);
        Some(Removed {
            resident,
            stored: o.backing == Backing::Stored,
        })
    }

    /// The tenant runs on the device after another did: first uses from
    /// now on count as skipped restores when the object is still there.
    pub fn switch_in(&mut self) {
        self.epoch += 1;
        self.counters.switches += 1;
    }

    /// What a command using `uses` needs: the objects among them that are
    /// not resident (with `all`, an eager switch-in: every object of the
    /// tenant that is not). Known used objects are pinned until
    /// [`Objects::unpin`], so that making room for the others cannot evict
    /// them, unless their tenant has nothing else to give
    /// ([`Objects::victims_forced`]). Unknown keys (objects not tracked
    /// here) are left out.
    pub fn plan(&mut self, uses: &[(Key, Access)], all: bool) -> Plan {
        let mut p = Plan::default();
        for &(k, _) in uses {
            if let Some(o) = self.objs.get_mut(&k) {
                o.wanted = o.wanted.saturating_add(1);
                p.pinned.push(k);
                if !o.valid && !p.restore.contains(&k) {
                    p.restore.push(k);
                    p.bytes = p.bytes.saturating_add(o.size);
                }
            }
        }
        if all {
            let mut rest: Vec<(u64, Key, u64)> = self
                .objs
                .iter()
                .filter(|(k, o)| !o.valid && !p.restore.contains(k))
                .map(|(&k, o)| (o.last_use, k, o.size))
                .collect();
            // Most recently used first: what the tenant will touch next.
            rest.sort_unstable_by(|a, b| b.cmp(a));
            for (_, k, size) in rest {
                p.restore.push(k);
                p.bytes = p.bytes.saturating_add(size);
            }
        }
        p
    }

    /// What a command using `uses` needs restored (as [`Objects::plan`]),
    /// pinning nothing: for a caller that lets its objects be evicted while
    /// it waits for room, and checks again once it has it.
    pub fn missing(&self, uses: &[(Key, Access)], all: bool) -> Plan {
        let mut p = Plan::default();
        let add = |k: Key, o: &Obj, p: &mut Plan| {
            if !o.valid && !p.restore.contains(&k) {
                p.restore.push(k);
                p.bytes = p.bytes.saturating_add(o.size);
            }
        };
        for &(k, _) in uses {
            if let Some(o) = self.objs.get(&k) {
                add(k, o, &mut p);
            }
        }
        if all {
            let mut rest: Vec<(u64, Key)> = self
                .objs
                .iter()
                .filter(|(k, o)| !o.valid && !p.restore.contains(k))
                .map(|(&k, o)| (o.last_use, k))
                .collect();
            rest.sort_unstable_by(|a, b| b.cmp(a));
            for (_, k) in rest {
                if let Some(o) = self.objs.get(&k) {
                    add(k, o, &mut p);
                }
            }
        }
        p
    }

    /// `key`'s device copy is back (copied from its backing), taking
    /// `ns` nanoseconds. The backing stays right: the object is clean.
    pub fn restored(&mut self, key: Key, ns: u64) -> Result<(), ObjectsError> {
        let o = self.objs.get_mut(&key).ok_or(ObjectsError::Unknown(key))?;
        if o.valid {
            return Ok(());
        }
        o.valid = true;
        o.dirty = false;
        o.epoch = self.epoch;
        // About to be used: not the first to go again.
        self.clock += 1;
        o.last_use = self.clock;
        self.resident = self.resident.saturating_add(o.size);
        self.counters.restores += 1;
        self.counters.bytes_restored = self.counters.bytes_restored.saturating_add(o.size);
        self.counters.restore_ns = self.counters.restore_ns.saturating_add(ns);
        Ok(())
    }

    /// A command uses `key` (resident by now): it becomes the most
    /// recently used, and dirty if the command may change it. The first use
    /// after a switch that finds it resident is a skipped restore.
    #[inline]
    pub fn touch(&mut self, key: Key, access: Access) {
        self.clock += 1;
        let (clock, epoch) = (self.clock, self.epoch);
        if let Some(o) = self.objs.get_mut(&key) {
            o.last_use = clock;
            if access == Access::Write && o.valid {
                o.dirty = true;
            }
            if o.epoch != epoch {
                o.epoch = epoch;
                if o.valid {
                    self.counters.skipped_restores += 1;
                }
            }
        }
    }

    /// The fast path of a command: if every object it uses is resident,
    /// touches them all (as [`Objects::touch`]) and returns true. Returns
    /// false at the first one that is not (those before it are touched,
    /// which only moves them up the LRU order and marks what the command
    /// will write as dirty a moment early).
    /// Keys not known here (objects residency does not track) are skipped.
    #[inline]
    pub fn touch_resident(&mut self, uses: &[(Key, Access)]) -> bool {
        for &(k, a) in uses {
            let Some(o) = self.objs.get_mut(&k) else {
                continue;
            };
            if !o.valid {
                return false;
            }
            self.clock += 1;
            o.last_use = self.clock;
            if a == Access::Write {
                o.dirty = true;
            }
            if o.epoch != self.epoch {
                o.epoch = self.epoch;
                self.counters.skipped_restores += 1;
            }
        }
        true
    }

    /// Ends a [`Objects::plan`]'s hold on `key`.
    pub fn unpin(&mut self, key: Key) {
        if let Some(o) = self.objs.get_mut(&key) {
            o.wanted = o.wanted.saturating_sub(1);
        }
    }

    /// Sets `key`'s pins (its live mappings, counted by the caller).
    pub fn set_pins(&mut self, key: Key, pins: u32) {
        if let Some(o) = self.objs.get_mut(&key) {
            o.pins = pins;
        }
    }

    /// `key` changed where no command showed it (the client wrote into it
    /// directly). Only a device copy can change.
    pub fn mark_dirty(&mut self, key: Key) {
        if let Some(o) = self.objs.get_mut(&key) {
            if o.valid {
                o.dirty = true;
            }
        }
    }

    /// Objects to evict for at least `want` bytes (`u64::MAX`: all that
    /// may go), least recently used first: resident, evictable, unpinned.
    pub fn victims(&self, want: u64) -> Vec<Victim> {
        self.choose(want, |o| o.wanted == 0)
    }

    /// As [`Objects::victims`], objects that a command waiting for room
    /// wants included: for a tenant that waits and has nothing else to
    /// give. Holding them while the room they would make is what another
    /// tenant's request waits for would be a deadlock; the waiting command
    /// asks for them again once it has room.
    pub fn victims_forced(&self, want: u64) -> Vec<Victim> {
        self.choose(want, |_| true)
    }

    fn choose(&self, want: u64, may: impl Fn(&Obj) -> bool) -> Vec<Victim> {
        let mut c: Vec<(&Key, &Obj)> = self
            .objs
            .iter()
            .filter(|(_, o)| o.valid && o.evictable && o.pins == 0 && may(o))
            .collect();
        c.sort_unstable_by_key(|(k, o)| (o.last_use, **k));
        let mut got = 0u64;
        let mut v = Vec::new();
        for (&key, o) in c {
            if got >= want {
                break;
            }
            got = got.saturating_add(o.size);
            v.push(Victim {
                key,
                size: o.size,
                save: o.needs_save(self.policy),
            });
        }
        v
    }

    /// `key`'s device copy is gone: copied out first (`saved`) or, being
    /// clean, without a copy. `ns`: the time it took.
    pub fn evicted(&mut self, key: Key, saved: bool, ns: u64) -> Result<(), ObjectsError> {
        let o = self.objs.get_mut(&key).ok_or(ObjectsError::Unknown(key))?;
        if !o.valid {
            return Ok(());
        }
        if saved {
            o.backing = Backing::Stored;
            o.dirty = false;
            self.counters.saves += 1;
            self.counters.bytes_saved = self.counters.bytes_saved.saturating_add(o.size);
            self.counters.save_ns = self.counters.save_ns.saturating_add(ns);
        } else if o.dirty || o.backing == Backing::None {
            return Err(ObjectsError::LostWrite(key));
        } else {
            self.counters.skipped_saves += 1;
        }
        o.valid = false;
        self.resident = self.resident.saturating_sub(o.size);
        Ok(())
    }

    /// Resident objects whose store copy could be dropped (least recently
    /// used first), to make store space: each then needs a save again.
    pub fn stored_and_resident(&self) -> Vec<Key> {
        let mut v: Vec<(u64, Key)> = self
            .objs
            .iter()
            .filter(|(_, o)| o.valid && o.backing == Backing::Stored)
            .map(|(&k, o)| (o.last_use, k))
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, k)| k).collect()
    }

    /// Drops `key`'s store copy (only a resident object's: an evicted one
    /// has no other). Returns whether there was one to drop.
    pub fn drop_backing(&mut self, key: Key) -> bool {
        match self.objs.get_mut(&key) {
            Some(o) if o.valid && o.backing == Backing::Stored => {
                o.backing = Backing::None;
                o.dirty = true;
                true
            }
            _ => false,
        }
    }

    /// Every key, for the caller's own checks and cleanup.
    pub fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.objs.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_object_is_evicted_without_a_copy_and_a_dirty_one_with_one() {
        let mut o = Objects::new(Policy::Delay);
        o.insert(1, 100, true, true).expect("insert");
        o.insert(2, 50, true, false).expect("insert");
        assert_eq!(o.resident(), 150);
        let v = o.victims(u64::MAX);
        assert_eq!(
            v,
            vec![
                Victim {
                    key: 1,
                    size: 100,
                    save: false
                },
                Victim {
                    key: 2,
                    size: 50,
                    save: true
                }
            ],
            "zeroed: no save; made with data: saved; oldest first"
        );
        assert_eq!(o.evicted(2, false, 0), Err(ObjectsError::LostWrite(2)));
        o.evicted(1, false, 0).expect("clean");
        o.evicted(2, true, 7).expect("saved");
        assert_eq!(o.resident(), 0);
        assert_eq!(
            (
                o.counters.saves,
                o.counters.skipped_saves,
                o.counters.bytes_saved
            ),
            (1, 1, 50)
        );
        // Back, then evicted again untouched: no second save.
        let p = o.plan(&[(2, Access::Read)], false);
        assert_eq!((p.restore.clone(), p.bytes), (vec![2], 50));
        o.restored(2, 3).expect("restore");
        o.touch(2, Access::Read);
        o.unpin(2);
        assert!(!o.victims(1)[0].save, "read only since its save");
        o.touch(2, Access::Write);
        assert!(o.victims(1)[0].save, "written since");
    }

    #[test]
    fn a_resident_object_is_never_restored_and_pins_keep_objects_in() {
        let mut o = Objects::new(Policy::Delay);
        o.insert(1, 10, true, true).expect("insert");
        o.insert(2, 10, true, true).expect("insert");
        o.insert(3, 10, false, true).expect("insert");
        let p = o.plan(&[(1, Access::Write), (9, Access::Read)], false);
        assert!(p.restore.is_empty(), "resident: nothing to restore");
        assert_eq!(p.pinned, vec![1], "unknown objects are not tracked");
        let keys: Vec<Key> = o.victims(u64::MAX).iter().map(|v| v.key).collect();
        assert_eq!(keys, vec![2], "pinned and unevictable objects stay");
        o.unpin(1);
        o.set_pins(2, 1);
        let keys: Vec<Key> = o.victims(u64::MAX).iter().map(|v| v.key).collect();
        assert_eq!(keys, vec![1], "a mapped object stays");
    }

    #[test]
    fn victims_go_least_recently_used_first_and_only_as_many_as_needed() {
        let mut o = Objects::new(Policy::Delay);
        for k in 1..=4 {
            o.insert(k, 10, true, true).expect("insert");
        }
        o.touch(1, Access::Read);
        o.touch(3, Access::Read);
        let keys: Vec<Key> = o.victims(15).iter().map(|v| v.key).collect();
        assert_eq!(keys, vec![2, 4], "two oldest cover 15 bytes");
    }

    #[test]
    fn eager_saves_everything_and_restores_the_whole_set_at_a_switch() {
        let mut o = Objects::new(Policy::Eager);
        o.insert(1, 10, true, true).expect("insert");
        o.insert(2, 20, true, true).expect("insert");
        assert!(o.victims(u64::MAX).iter().all(|v| v.save));
        o.evicted(1, true, 0).expect("evict");
        o.evicted(2, true, 0).expect("evict");
        o.switch_in();
        let p = o.plan(&[(2, Access::Read)], true);
        assert_eq!(p.bytes, 30);
        assert_eq!(p.restore[0], 2, "the used object first");
    }

    #[test]
    fn first_uses_after_a_switch_that_find_objects_resident_are_skipped_restores() {
        let mut o = Objects::new(Policy::Delay);
        o.insert(1, 10, true, true).expect("insert");
        o.insert(2, 10, true, true).expect("insert");
        o.evicted(2, false, 0).expect("evict");
        o.switch_in();
        let p = o.plan(&[(1, Access::Read), (2, Access::Read)], false);
        for &k in &p.restore {
            o.restored(k, 0).expect("restore");
        }
        o.touch(1, Access::Read);
        o.touch(2, Access::Read);
        o.touch(1, Access::Read);
        assert_eq!(
            (o.counters.restores, o.counters.skipped_restores),
            (1, 1),
            "one restored, one found resident (counted once)"
        );
    }

    #[test]
    fn the_fast_path_touches_only_while_everything_is_resident() {
        let mut o = Objects::new(Policy::Delay);
        o.insert(1, 10, true, true).expect("insert");
        o.insert(2, 10, true, true).expect("insert");
        assert!(o.touch_resident(&[(1, Access::Write), (2, Access::Read)]));
        assert!(o.get(1).is_some_and(|x| x.dirty));
        o.evicted(2, false, 0).expect("clean");
        assert!(!o.touch_resident(&[(1, Access::Read), (2, Access::Write)]));
        assert!(
            !o.get(2).is_some_and(|x| x.dirty),
            "an evicted object is not dirtied"
        );
        assert!(
            o.touch_resident(&[(9, Access::Read)]),
            "unknown: not tracked, skipped"
        );
    }

    #[test]
    fn store_copies_of_resident_objects_can_be_dropped_and_then_need_a_save() {
        let mut o = Objects::new(Policy::Delay);
        o.insert(1, 10, true, false).expect("insert");
        o.evicted(1, true, 0).expect("evict");
        assert!(!o.drop_backing(1), "an evicted object's only copy stays");
        o.plan(&[(1, Access::Read)], false);
        o.restored(1, 0).expect("restore");
        o.unpin(1);
        assert_eq!(o.stored_and_resident(), vec![1]);
        assert!(o.drop_backing(1));
        assert!(o.victims(1)[0].save);
        let r = o.remove(1).expect("known");
        assert_eq!((r.resident, r.stored), (10, false));
    }
}
