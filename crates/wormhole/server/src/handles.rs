//! A tenant's handle table, for both backends: the ids a client knows its
//! objects by, each with the object's kind and the library's raw handle,
//! and the reverse map from (kind, raw handle) to id.
//!
//! Ids are the client's choice and so are never trusted: a lookup answers
//! only for an id this table holds *and* of the kind the call declares, a
//! new id must lie in the client's range and be unused, and the table holds
//! at most a bounded number of entries. Each backend keeps its own policy
//! on top (OpenCL's reference counts and server-assigned aliases, CUDA's
//! special streams) in the entry's `extra`.
//!
//! The decoders both backends' generated code calls for a handle argument
//! (`lookup`, `required`, `optional`, `new_slot`) live here too, so that
//! what a forged or NULL id gets is decided once for both APIs.

use std::ffi::c_void;
use std::hash::Hash;
use std::ops::RangeInclusive;

use rustc_hash::FxHashMap;
use wormhole_wire::Decoder;

/// A backend's kinds of handle, with the codes its API answers with.
pub trait HandleKind: Copy + Eq + Hash {
    /// The code for a malformed request or an id that may not be new
    /// (`CL_INVALID_VALUE`, `cudaErrorInvalidValue`).
    const BAD_REQUEST: i32;
    /// The code for an id that is not one of this tenant's objects of this
    /// kind.
    fn invalid(self) -> i32;
    /// Ids that name no object of the table but stand for themselves as
    /// handles of this kind (CUDA's special streams); NULL (0) always does.
    fn stands_for_itself(self, _id: u64) -> bool {
        false
    }
}

/// The slot a call writes a new handle into, for the id the client chose.
pub struct NewSlot {
    id: Option<u64>,
    raw: *mut c_void,
}

impl NewSlot {
    /// The id the new object will have, if the client asked for one.
    pub fn id(&self) -> Option<u64> {
        self.id
    }

    /// What the library wrote into the slot.
    pub fn raw(&self) -> *mut c_void {
        self.raw
    }

    /// The object the library made, if the client asked for one.
    pub fn made(&self) -> Option<*mut c_void> {
        (self.id.is_some() && !self.raw.is_null()).then_some(self.raw)
    }

    /// Where the library writes the handle: NULL where the client passed
    /// no slot, so that the call sees what the application passed.
    pub fn ptr(&mut self) -> *mut *mut c_void {
        if self.id.is_some() {
            &mut self.raw
        } else {
            std::ptr::null_mut()
        }
    }

    /// The new object's id and handle, once the call that fills the slot
    /// reported `succeeded`.
    pub fn committed(&self, succeeded: bool) -> Option<(u64, *mut c_void)> {
        self.id.filter(|_| succeeded).map(|id| (id, self.raw))
    }
}

/// One object the client holds an id for.
pub struct Entry<K, E> {
    pub kind: K,
    /// The library's handle, as an address (tables are `Send`).
    pub raw: usize,
    /// What the backend keeps per object (reference counts, charges).
    pub extra: E,
}

/// Ids to objects, checked by kind; see the module's comment.
pub struct HandleTable<K, E = ()> {
    // FxHash, not SipHash: a lookup is on every call's path. Ids are the
    // client's choice, so a hostile client can make its own lookups collide;
    // the table is its own process's, so that slows only itself.
    entries: FxHashMap<u64, Entry<K, E>>,
    reverse: FxHashMap<(K, usize), u64>,
    /// Ids a client may choose for a new object.
    client_ids: RangeInclusive<u64>,
    /// Entries at most; a new id past it is refused.
    max_entries: usize,
}

impl<K: Copy + Eq + Hash, E> HandleTable<K, E> {
    pub fn new(client_ids: RangeInclusive<u64>, max_entries: usize) -> Self {
        HandleTable {
            entries: FxHashMap::default(),
            reverse: FxHashMap::default(),
            client_ids,
            max_entries,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry for `id` if it is of `kind`; `None` for an unknown id or
    /// another kind alike, so that a forged id learns nothing.
    pub fn get(&self, id: u64, kind: K) -> Option<&Entry<K, E>> {
        self.entries.get(&id).filter(|entry| entry.kind == kind)
    }

    /// The raw handle for `id` if it is of `kind`.
    #[inline]
    pub fn raw(&self, id: u64, kind: K) -> Option<usize> {
        self.get(id, kind).map(|entry| entry.raw)
    }

    /// The entry for `id`, whatever its kind (for the backend's own
    /// bookkeeping once the call's checks passed).
    pub fn get_mut(&mut self, id: u64) -> Option<&mut Entry<K, E>> {
        self.entries.get_mut(&id)
    }

    /// Whether a client may name a new object `id`: in its range, unused,
    /// and the table not full.
    pub fn is_fresh(&self, id: u64) -> bool {
        self.client_ids.contains(&id)
            && !self.entries.contains_key(&id)
            && self.entries.len() < self.max_entries
    }

    /// The id this table knows `raw` of `kind` by.
    pub fn id_of(&self, kind: K, raw: usize) -> Option<u64> {
        self.reverse.get(&(kind, raw)).copied()
    }

    /// The raw handles of every object of `kind`.
    pub fn raws_of(&self, kind: K) -> Vec<usize> {
        self.entries
            .values()
            .filter(|e| e.kind == kind)
            .map(|e| e.raw)
            .collect()
    }

    /// Records an object under `id` (replacing what the id named).
    pub fn insert(&mut self, id: u64, kind: K, raw: usize, extra: E) {
        if let Some(old) = self.entries.insert(id, Entry { kind, raw, extra }) {
            self.forget_reverse(id, old.kind, old.raw);
        }
        self.reverse.insert((kind, raw), id);
    }

    /// Forgets `id`; its entry, if it had one.
    pub fn remove(&mut self, id: u64) -> Option<Entry<K, E>> {
        let entry = self.entries.remove(&id)?;
        self.forget_reverse(id, entry.kind, entry.raw);
        Some(entry)
    }

    /// Empties the table, yielding every entry.
    pub fn drain(&mut self) -> impl Iterator<Item = Entry<K, E>> + '_ {
        self.reverse.clear();
        self.entries.drain().map(|(_, entry)| entry)
    }

    /// The reverse map names the latest id recorded for a handle; an older
    /// id's removal leaves it.
    fn forget_reverse(&mut self, id: u64, kind: K, raw: usize) {
        if self.reverse.get(&(kind, raw)) == Some(&id) {
            self.reverse.remove(&(kind, raw));
        }
    }
}

impl<K: HandleKind, E> HandleTable<K, E> {
    /// The handle `id` names as one of `kind`: NULL for 0, the id itself
    /// for one that stands for itself, else the table's object if it is
    /// of `kind`; anything else is the kind's invalid-handle code.
    pub fn lookup(&self, id: u64, kind: K) -> Result<*mut c_void, i32> {
        if id == 0 || kind.stands_for_itself(id) {
            return Ok(id as usize as *mut c_void);
        }
        self.raw(id, kind)
            .map(|raw| raw as *mut c_void)
            .ok_or(kind.invalid())
    }

    /// A handle the API requires and its id: NULL (0) is refused here, as
    /// the API would, rather than handed to a library that may not check.
    pub fn required(&self, d: &mut Decoder<'_>, kind: K) -> Result<(*mut c_void, u64), i32> {
        let id = d.u64().map_err(|_| K::BAD_REQUEST)?;
        if id == 0 {
            return Err(kind.invalid());
        }
        Ok((self.lookup(id, kind)?, id))
    }

    /// A handle the API lets be NULL.
    pub fn optional(&self, d: &mut Decoder<'_>, kind: K) -> Result<*mut c_void, i32> {
        let id = d.u64().map_err(|_| K::BAD_REQUEST)?;
        self.lookup(id, kind)
    }

    /// A client-chosen id for an object about to be created: it must be
    /// fresh (see [`HandleTable::is_fresh`]).
    pub fn new_id(&self, d: &mut Decoder<'_>) -> Result<u64, i32> {
        let id = d.u64().map_err(|_| K::BAD_REQUEST)?;
        if !self.is_fresh(id) {
            return Err(K::BAD_REQUEST);
        }
        Ok(id)
    }

    /// The slot for a handle a call returns through a pointer: absent, or
    /// with a fresh id.
    pub fn new_slot(&self, d: &mut Decoder<'_>) -> Result<NewSlot, i32> {
        let id = match d.bool().map_err(|_| K::BAD_REQUEST)? {
            true => Some(self.new_id(d)?),
            false => None,
        };
        Ok(NewSlot {
            id,
            raw: std::ptr::null_mut(),
        })
    }
}

/// The handle decoders a backend's tenant offers its generated code, over
/// the tenant's `HandleTable` field `$table`: written once for both
/// backends, and inherent methods so that callers need no trait in scope.
macro_rules! handle_decoders {
    ($table:ident, $kind:ty) => {
        /// Looks up a handle of `kind`; see [`HandleTable::lookup`].
        pub fn lookup(&self, id: u64, kind: $kind) -> Result<*mut c_void, i32> {
            self.$table.lookup(id, kind)
        }

        /// A handle the API requires (declared `KIND`): NULL is refused.
        pub fn handle(&mut self, d: &mut Decoder<'_>, kind: $kind) -> Result<*mut c_void, i32> {
            self.$table.required(d, kind).map(|(raw, _)| raw)
        }

        /// A handle the API lets be NULL (declared `KIND?`).
        pub fn opt_handle(&mut self, d: &mut Decoder<'_>, kind: $kind) -> Result<*mut c_void, i32> {
            self.$table.optional(d, kind)
        }

        /// For release calls: a non-NULL handle and its id.
        pub fn handle_with_id(
            &mut self,
            d: &mut Decoder<'_>,
            kind: $kind,
        ) -> Result<(*mut c_void, u64), i32> {
            self.$table.required(d, kind)
        }

        /// Reads the slot for a new handle returned through a pointer; the
        /// client's id must be fresh.
        pub fn out_new(&mut self, d: &mut Decoder<'_>) -> Result<NewSlot, i32> {
            self.$table.new_slot(d)
        }
    };
}
pub(crate) use handle_decoders;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    enum Kind {
        Queue,
        Event,
    }

    const BAD: i32 = -30;

    impl HandleKind for Kind {
        const BAD_REQUEST: i32 = BAD;

        fn invalid(self) -> i32 {
            match self {
                Kind::Queue => -36,
                Kind::Event => -58,
            }
        }

        fn stands_for_itself(self, id: u64) -> bool {
            self == Kind::Queue && id == 2
        }
    }

    fn ids(ids: &[u64]) -> Vec<u8> {
        let mut e = wormhole_wire::Encoder::new();
        for &id in ids {
            e.u64(id);
        }
        e.into_vec()
    }

    fn table() -> HandleTable<Kind, u32> {
        HandleTable::new(1..=99, 4)
    }

    #[test]
    fn forged_ids_and_wrong_kinds_find_nothing() {
        let mut handles = table();
        handles.insert(7, Kind::Queue, 0x1000, 1);
        assert_eq!(handles.raw(7, Kind::Queue), Some(0x1000));
        assert_eq!(handles.raw(7, Kind::Event), None, "wrong kind");
        for forged in [0, 6, 8, u64::MAX] {
            assert_eq!(handles.raw(forged, Kind::Queue), None, "id {forged}");
        }
        assert_eq!(handles.id_of(Kind::Queue, 0x1000), Some(7));
        assert_eq!(handles.id_of(Kind::Event, 0x1000), None, "wrong kind");
        // Another table knows nothing of this id.
        assert_eq!(table().raw(7, Kind::Queue), None);
    }

    #[test]
    fn a_released_id_is_gone_and_may_be_reused() {
        let mut handles = table();
        handles.insert(7, Kind::Event, 0x1000, 1);
        assert!(!handles.is_fresh(7), "in use");
        let gone = handles.remove(7).expect("held");
        assert_eq!((gone.kind, gone.raw, gone.extra), (Kind::Event, 0x1000, 1));
        assert!(handles.remove(7).is_none(), "removed once");
        assert_eq!(handles.raw(7, Kind::Event), None);
        assert_eq!(handles.id_of(Kind::Event, 0x1000), None);
        assert!(handles.is_empty());
        // The id, and the library's address, may name a new object.
        assert!(handles.is_fresh(7));
        handles.insert(7, Kind::Queue, 0x1000, 2);
        assert_eq!(handles.raw(7, Kind::Queue), Some(0x1000));
        assert_eq!(handles.raw(7, Kind::Event), None, "the old kind is gone");
    }

    #[test]
    fn new_ids_are_bounded_by_range_and_count() {
        let mut handles = table();
        for bad in [0, 100, u64::MAX] {
            assert!(!handles.is_fresh(bad), "id {bad} is outside the range");
        }
        for id in 1..=4 {
            assert!(handles.is_fresh(id));
            handles.insert(id, Kind::Event, id as usize * 0x10, 0);
        }
        assert_eq!(handles.len(), 4);
        assert!(!handles.is_fresh(5), "the table is full");
        handles.remove(1);
        assert!(handles.is_fresh(5), "room again");
    }

    #[test]
    fn the_reverse_map_follows_the_latest_id() {
        let mut handles = table();
        handles.insert(1, Kind::Queue, 0x1000, 0);
        handles.insert(2, Kind::Queue, 0x1000, 0);
        assert_eq!(handles.id_of(Kind::Queue, 0x1000), Some(2));
        handles.remove(1);
        assert_eq!(handles.id_of(Kind::Queue, 0x1000), Some(2), "kept");
        // Replacing an id's object forgets the old handle's reverse entry.
        handles.insert(2, Kind::Queue, 0x2000, 0);
        assert_eq!(handles.id_of(Kind::Queue, 0x1000), None);
        assert_eq!(handles.id_of(Kind::Queue, 0x2000), Some(2));
        let drained: Vec<usize> = handles.drain().map(|entry| entry.raw).collect();
        assert_eq!(drained, vec![0x2000]);
        assert!(handles.is_empty());
        assert_eq!(handles.id_of(Kind::Queue, 0x2000), None);
    }

    #[test]
    fn decoders_refuse_null_forged_and_stale_ids() {
        let mut handles = table();
        handles.insert(7, Kind::Queue, 0x1000, 0);
        let wire = ids(&[7, 0, 8, 2]);
        let mut d = Decoder::new(&wire);
        assert_eq!(
            handles.required(&mut d, Kind::Queue),
            Ok((0x1000 as *mut c_void, 7))
        );
        assert_eq!(handles.required(&mut d, Kind::Queue), Err(-36), "NULL");
        assert_eq!(handles.optional(&mut d, Kind::Queue), Err(-36), "forged");
        assert_eq!(
            handles.optional(&mut d, Kind::Queue),
            Ok(2 as *mut c_void),
            "stands for itself"
        );
        assert_eq!(handles.optional(&mut d, Kind::Queue), Err(BAD), "short");
        assert_eq!(handles.lookup(0, Kind::Event), Ok(std::ptr::null_mut()));
        assert_eq!(handles.lookup(2, Kind::Event), Err(-58), "only queues");
        assert_eq!(handles.lookup(7, Kind::Event), Err(-58), "wrong kind");
    }

    #[test]
    fn a_new_slot_needs_a_fresh_id() {
        let handles = table();
        let mut e = wormhole_wire::Encoder::new();
        e.bool(false);
        e.bool(true);
        e.u64(9);
        e.bool(true);
        e.u64(100);
        let wire = e.into_vec();
        let mut d = Decoder::new(&wire);
        let mut none = handles.new_slot(&mut d).expect("absent");
        assert!(none.ptr().is_null(), "no slot, no pointer");
        assert_eq!(none.committed(true), None);
        let mut slot = handles.new_slot(&mut d).expect("fresh");
        assert_eq!(slot.id(), Some(9));
        // SAFETY: a slot with an id points `ptr()` at its own handle field.
        unsafe { *slot.ptr() = 0x3000 as *mut c_void };
        assert_eq!(slot.made(), Some(0x3000 as *mut c_void));
        assert_eq!(slot.committed(false), None, "a failed call makes nothing");
        assert_eq!(slot.committed(true), Some((9, 0x3000 as *mut c_void)));
        assert_eq!(handles.new_slot(&mut d).err(), Some(BAD), "out of range");
    }
}
