//! Delay storing: a device's memory shared by more tenants than it holds.
//!
//! The method (Wu Ruiyang et al., on MIPS virtualization) skips a world
//! switch's context save and restore when nothing else used the hardware
//! in between: each core remembers the VM it last ran and each VM the core
//! it last ran on; when both agree at entry, nothing is restored, and a
//! VM's context is saved only when another VM takes its core. Here the
//! expensive context is a tenant's device memory, and this crate holds the
//! state that decides what moves, with no I/O, so that it is unit-tested
//! and fuzzed directly:
//!
//! * [`objects::Objects`]: one tenant's memory objects, each valid (its
//!   device copy is there) or not, dirty (changed since its last save) or
//!   not, pinned (in use by the current call, or mapped) or not, with the
//!   least recently used first in line for eviction;
//! * [`ledger::Ledger`]: one device's budget across tenants: who holds
//!   how much, which tenant ran last, whom to ask for room when a tenant
//!   needs more, and when to give up on an answer;
//! * [`proto`]: the messages between a tenant and the ledger's holder (the
//!   listener), with a bounded decoder: a tenant may be subverted and send
//!   anything;
//! * [`sim`]: tenants, objects and a ledger driven together against a model
//!   of every object's contents (unit tests and the fuzz target use it).
//!
//! Two policies share this code: [`Policy::Delay`] (save only what changed,
//! only when another tenant needs the room; restore only what was taken)
//! and [`Policy::Eager`] (the baseline: at each switch, save every object of
//! the previous tenant and restore every object of the next).

pub mod ledger;
pub mod objects;
pub mod proto;
pub mod sim;

/// How a device's memory is shared once tenants want more than it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Delay storing: nothing moves at a switch; an idle tenant's least
    /// recently used objects are evicted when another needs the room
    /// (saved only if changed since their last save), and restored only
    /// when used again.
    #[default]
    Delay,
    /// The naive baseline: at each switch the previous tenant's objects are
    /// all saved and freed, and the next tenant's all restored.
    Eager,
}

/// How a command uses a memory object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read only: the device copy stays as clean as it was.
    Read,
    /// May change it (a kernel argument that is not read-only, a write,
    /// fill or copy into it, a map for writing).
    Write,
}

/// What residency did, for one tenant or summed over a device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Objects copied out before their device copy was freed.
    pub saves: u64,
    /// Objects freed without a copy: clean since their last save.
    pub skipped_saves: u64,
    /// Objects copied back because they had been evicted.
    pub restores: u64,
    /// First uses after a switch that found the object still resident.
    pub skipped_restores: u64,
    pub bytes_saved: u64,
    pub bytes_restored: u64,
    /// Time spent saving and restoring, in nanoseconds (the caller's clock).
    pub save_ns: u64,
    pub restore_ns: u64,
    /// Switches: uses of the device by a tenant after another used it.
    pub switches: u64,
}

impl Counters {
    /// Bytes moved between the device and the host store, both ways.
    pub fn bytes_moved(&self) -> u64 {
        self.bytes_saved.saturating_add(self.bytes_restored)
    }

    /// Adds `o` into `self` (saturating).
    pub fn add(&mut self, o: &Counters) {
        let f = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        f(&mut self.saves, o.saves);
        f(&mut self.skipped_saves, o.skipped_saves);
        f(&mut self.restores, o.restores);
        f(&mut self.skipped_restores, o.skipped_restores);
        f(&mut self.bytes_saved, o.bytes_saved);
        f(&mut self.bytes_restored, o.bytes_restored);
        f(&mut self.save_ns, o.save_ns);
        f(&mut self.restore_ns, o.restore_ns);
        f(&mut self.switches, o.switches);
    }
}

impl std::fmt::Display for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "saves {} (skipped clean {}), restores {} (skipped resident {}), \
             bytes saved {} restored {}, save {} us, restore {} us, switches {}",
            self.saves,
            self.skipped_saves,
            self.restores,
            self.skipped_restores,
            self.bytes_saved,
            self.bytes_restored,
            self.save_ns / 1000,
            self.restore_ns / 1000,
            self.switches
        )
    }
}
