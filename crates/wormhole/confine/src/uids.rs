//! The uids a root listener gives its tenants: one each, taken from a
//! configured range, and given back when the tenant has been reaped.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use crate::ConfineError;

/// An inclusive range of uids (and the gids of the same numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UidRange {
    pub first: u32,
    pub last: u32,
}

impl UidRange {
    /// 65,536 ids high in the 32-bit space, above what distributions hand
    /// out to users, containers' subordinate ranges (100000 + 65536 n) for
    /// the first thousands, and systemd's dynamic users.
    pub const DEFAULT: UidRange = UidRange {
        first: 0x7000_0000,
        last: 0x7000_ffff,
    };

    pub fn len(&self) -> u32 {
        self.last - self.first + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }
}

impl FromStr for UidRange {
    type Err = ConfineError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ConfineError::BadRange(s.to_string());
        let (a, b) = s.split_once('-').ok_or_else(bad)?;
        let first: u32 = a.trim().parse().map_err(|_| bad())?;
        let last: u32 = b.trim().parse().map_err(|_| bad())?;
        // 0 is root and u32::MAX is (uid_t)-1, "no change" to the kernel.
        if first == 0 || last < first || last == u32::MAX {
            return Err(bad());
        }
        Ok(UidRange { first, last })
    }
}

impl std::fmt::Display for UidRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// Which uid serves whom, shared by the pool and its leases.
#[derive(Debug, Default)]
struct Taken {
    /// uid -> (the client user it serves, if any; tenants holding it).
    uids: BTreeMap<u32, (Option<u32>, u32)>,
    /// client user -> uid.
    by_client: HashMap<u32, u32>,
}

/// The uids in use.
#[derive(Debug)]
pub(crate) struct UidPool {
    range: UidRange,
    taken: Arc<Mutex<Taken>>,
}

/// One tenant's hold on a uid, given back when dropped.
#[derive(Debug)]
pub(crate) struct UidLease {
    pub uid: u32,
    taken: Arc<Mutex<Taken>>,
}

impl UidPool {
    pub fn new(range: UidRange) -> Self {
        UidPool {
            range,
            taken: Default::default(),
        }
    }

    /// The group every tenant is in: the range's first number.
    pub fn group(&self) -> u32 {
        self.range.first
    }

    /// A uid for a tenant of `client` (a user on this host, or None: a
    /// client from another host, which gets a uid of its own). One user's
    /// tenants share a uid, as that user's processes do: they are one
    /// party, their compiled kernels one cache, and PoCL keeps its cache
    /// readable by its owner only. Another party's tenant never has it
    /// while one of theirs lives: the lowest free uid is taken, and a uid
    /// is free only when its last tenant is reaped.
    pub fn take(&self, client: Option<u32>) -> Result<UidLease, ConfineError> {
        let mut t = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        let uid = match client.and_then(|c| t.by_client.get(&c).copied()) {
            Some(uid) => uid,
            None => {
                let free = (self.range.first..=self.range.last).find(|u| !t.uids.contains_key(u));
                let uid = free.ok_or(ConfineError::NoUid(self.range.len()))?;
                t.uids.insert(uid, (client, 0));
                if let Some(c) = client {
                    t.by_client.insert(c, uid);
                }
                uid
            }
        };
        if let Some(e) = t.uids.get_mut(&uid) {
            e.1 += 1;
        }
        Ok(UidLease {
            uid,
            taken: self.taken.clone(),
        })
    }
}

impl Drop for UidLease {
    fn drop(&mut self) {
        let mut t = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        let gone = match t.uids.get_mut(&self.uid) {
            Some(e) => {
                e.1 -= 1;
                (e.1 == 0).then_some(e.0)
            }
            None => None,
        };
        if let Some(client) = gone {
            t.uids.remove(&self.uid);
            if let Some(c) = client {
                t.by_client.remove(&c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_and_refuse_root_and_minus_one() {
        let r: UidRange = "1000-1002".parse().expect("range");
        assert_eq!((r.first, r.last, r.len()), (1000, 1002, 3));
        for bad in ["0-10", "10-9", "x-1", "5", "1-4294967295", ""] {
            assert!(bad.parse::<UidRange>().is_err(), "{bad}");
        }
        assert_eq!(UidRange::DEFAULT.to_string(), "1879048192-1879113727");
    }

    #[test]
    fn a_uid_serves_one_party_and_comes_back_when_its_last_tenant_ends() {
        let pool = UidPool::new("500-501".parse().expect("range"));
        let a = pool.take(Some(1000)).expect("user 1000");
        let a2 = pool.take(Some(1000)).expect("user 1000 again");
        let b = pool.take(None).expect("a remote client");
        assert_eq!((a.uid, a2.uid, b.uid), (500, 500, 501));
        assert!(matches!(pool.take(Some(7)), Err(ConfineError::NoUid(2))));
        assert!(matches!(pool.take(None), Err(ConfineError::NoUid(2))));
        drop(a);
        assert!(pool.take(Some(7)).is_err(), "user 1000 still has a tenant");
        drop(a2);
        let c = pool.take(Some(7)).expect("free again");
        assert_eq!(c.uid, 500);
        assert!(pool.take(Some(1000)).is_err(), "500 is user 7's now");
    }
}
