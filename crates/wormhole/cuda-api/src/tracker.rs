//! The device-allocation tracker: an interval map from device addresses to
//! the allocations that contain them.
//!
//! With unified virtual addressing every device allocation has a distinct
//! address range, so the client can tell from a pointer alone whether it is
//! device memory (and which allocation), to pick a cudaMemcpyDefault
//! direction or answer cudaPointerGetAttributes without asking the server;
//! the server uses the same map to check that every address a tenant sends
//! lies inside one of that tenant's own allocations.
//!
//! Allocations never overlap, so a `BTreeMap` keyed by start address is an
//! interval tree for this purpose: the allocation containing `p` is the
//! last one starting at or before `p`, if it extends past `p`.

use std::collections::BTreeMap;

/// One allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alloc {
    pub start: u64,
    pub size: u64,
    /// The device it lives on.
    pub device: i32,
}

impl Alloc {
    /// One past the last byte (saturating; a zero-size allocation still
    /// owns its start address).
    pub fn end(&self) -> u64 {
        self.start.saturating_add(self.size.max(1))
    }
}

/// Why a range is not device memory of this tracker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("address {0:#x} is in no allocation")]
    Unknown(u64),
    #[error("range of {len} bytes at {start:#x} runs past its allocation")]
    Overrun { start: u64, len: u64 },
    #[error("allocation at {0:#x} overlaps an existing one")]
    Overlap(u64),
}

/// Device allocations by address.
#[derive(Debug, Default, Clone)]
pub struct Tracker {
    map: BTreeMap<u64, Alloc>,
}

impl Tracker {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Records an allocation; refuses one that overlaps a recorded one (a
    /// server handing out overlapping ranges is broken or lying).
    pub fn insert(&mut self, a: Alloc) -> Result<(), RangeError> {
        if let Some(prev) = self.find(a.start) {
            return Err(RangeError::Overlap(prev.start));
        }
        if let Some((_, next)) = self.map.range(a.start..).next() {
            if next.start < a.end() {
                return Err(RangeError::Overlap(next.start));
            }
        }
        self.map.insert(a.start, a);
        Ok(())
    }

    /// Forgets the allocation that starts exactly at `start`.
    pub fn remove(&mut self, start: u64) -> Option<Alloc> {
        self.map.remove(&start)
    }

    /// The allocation containing `p`.
    pub fn find(&self, p: u64) -> Option<Alloc> {
        let (_, a) = self.map.range(..=p).next_back()?;
        (p < a.end()).then_some(*a)
    }

    /// Checks that `[p, p + len)` lies inside one allocation (`len` 0: just
    /// `p`), and returns it.
    pub fn check(&self, p: u64, len: u64) -> Result<Alloc, RangeError> {
        let a = self.find(p).ok_or(RangeError::Unknown(p))?;
        match p.checked_add(len) {
            Some(end) if end <= a.start.saturating_add(a.size) || len == 0 => Ok(a),
            _ => Err(RangeError::Overrun { start: p, len }),
        }
    }

    /// Every allocation, in address order (to free them all).
    pub fn iter(&self) -> impl Iterator<Item = &Alloc> {
        self.map.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(start: u64, size: u64) -> Alloc {
        Alloc {
            start,
            size,
            device: 0,
        }
    }

    #[test]
    fn finds_the_containing_allocation() {
        let mut t = Tracker::new();
        t.insert(a(0x1000, 0x100)).expect("insert");
        t.insert(a(0x2000, 0x10)).expect("insert");
        assert_eq!(t.find(0x1000).map(|x| x.start), Some(0x1000));
        assert_eq!(t.find(0x10ff).map(|x| x.start), Some(0x1000));
        assert_eq!(t.find(0x1100), None, "one past the end");
        assert_eq!(t.find(0xfff), None);
        assert_eq!(t.find(0x2008).map(|x| x.start), Some(0x2000));
        assert_eq!(t.find(u64::MAX), None);
    }

    #[test]
    fn checks_ranges_and_refuses_overlaps() {
        let mut t = Tracker::new();
        t.insert(a(0x1000, 0x100)).expect("insert");
        assert!(t.check(0x1000, 0x100).is_ok());
        assert!(t.check(0x10f0, 0x10).is_ok());
        assert_eq!(
            t.check(0x10f0, 0x11),
            Err(RangeError::Overrun {
                start: 0x10f0,
                len: 0x11
            })
        );
        assert_eq!(
            t.check(0x10f0, u64::MAX),
            Err(RangeError::Overrun {
                start: 0x10f0,
                len: u64::MAX
            })
        );
        assert_eq!(t.check(0x3000, 1), Err(RangeError::Unknown(0x3000)));
        assert_eq!(t.insert(a(0x1080, 0x10)), Err(RangeError::Overlap(0x1000)));
        assert_eq!(t.insert(a(0xff0, 0x20)), Err(RangeError::Overlap(0x1000)));
        assert!(t.insert(a(0xf00, 0x100)).is_ok(), "adjacent is fine");
        assert_eq!(t.remove(0x1000).map(|x| x.size), Some(0x100));
        assert_eq!(t.find(0x1000), None);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn many_allocations_stay_consistent() {
        let mut t = Tracker::new();
        for i in 0..1000u64 {
            t.insert(a(i * 0x1000, 0x800 + i)).expect("disjoint");
        }
        for i in (0..1000u64).step_by(2) {
            assert!(t.remove(i * 0x1000).is_some());
        }
        for i in 0..1000u64 {
            let hit = t.find(i * 0x1000 + 0x7ff).is_some();
            assert_eq!(hit, i % 2 == 1, "allocation {i}");
        }
    }
}
