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

use std::hash::Hash;
use std::ops::RangeInclusive;

use rustc_hash::FxHashMap;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    enum Kind {
        Queue,
        Event,
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
}
