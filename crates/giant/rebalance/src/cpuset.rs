//! CPU sets and the two text forms the kernel uses for them.

use std::collections::BTreeSet;
use std::fmt;

/// A set of CPU numbers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash, PartialOrd, Ord)]
pub struct CpuSet(pub BTreeSet<u32>);

/// Largest CPU number accepted from text (the kernel's NR_CPUS is at most 8192).
pub const MAX_CPU: u32 = 8191;

/// Text that is not a CPU list or mask.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad cpu list or mask {0:?}")]
pub struct CpuSetParseError(pub String);

impl CpuSet {
    /// Parses a list such as `0-3,8,10-11` (empty text = empty set).
    pub fn parse_list(text: &str) -> Result<Self, CpuSetParseError> {
        let bad = || CpuSetParseError(text.to_string());
        let mut set = BTreeSet::new();
        for part in text.trim().split(',').filter(|p| !p.is_empty()) {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a, b),
                None => (part, part),
            };
            let a: u32 = a.trim().parse().map_err(|_| bad())?;
            let b: u32 = b.trim().parse().map_err(|_| bad())?;
            if a > b || b > MAX_CPU {
                return Err(bad());
            }
            set.extend(a..=b);
        }
        Ok(Self(set))
    }

    /// Parses a hex mask such as `ff` or `00000000,0000000f` (groups of 32 bits).
    pub fn parse_mask(text: &str) -> Result<Self, CpuSetParseError> {
        let bad = || CpuSetParseError(text.to_string());
        let digits: String = text.trim().chars().filter(|&c| c != ',').collect();
        if digits.is_empty() || digits.len() > (MAX_CPU as usize + 1) / 4 {
            return Err(bad());
        }
        let mut set = BTreeSet::new();
        for (i, c) in digits.chars().rev().enumerate() {
            let v = c.to_digit(16).ok_or_else(bad)?;
            for bit in 0..4 {
                if v & (1 << bit) != 0 {
                    set.insert((i * 4 + bit) as u32);
                }
            }
        }
        Ok(Self(set))
    }

    /// The kernel's list form (`0-3,8`).
    pub fn to_list(&self) -> String {
        let mut out = Vec::new();
        let mut it = self.0.iter().copied().peekable();
        while let Some(start) = it.next() {
            let mut end = start;
            while it.peek() == Some(&(end + 1)) {
                end += 1;
                it.next();
            }
            out.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
        }
        out.join(",")
    }

    /// The kernel's mask form: hex, comma every 32 bits.
    pub fn to_mask(&self) -> String {
        let max = self.0.iter().next_back().copied().unwrap_or(0);
        let words = (max / 32 + 1) as usize;
        let mut w = vec![0u32; words];
        for &c in &self.0 {
            w[(c / 32) as usize] |= 1 << (c % 32);
        }
        let parts: Vec<String> = w.iter().rev().map(|x| format!("{x:08x}")).collect();
        parts.join(",")
    }

    /// True when no CPU is in the set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Union of two sets.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&other.0).copied().collect())
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list())
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn list_round_trip() {
        let s = CpuSet::parse_list("0-3,8,10-11\n").unwrap();
        assert_eq!(s.0.len(), 7);
        assert_eq!(s.to_list(), "0-3,8,10-11");
        assert!(CpuSet::parse_list("").unwrap().is_empty());
        for bad in ["3-1", "a", "1-", "0-99999", "1,,x"] {
            assert!(CpuSet::parse_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mask_round_trip() {
        let s = CpuSet::parse_mask("00000001,0000000f").unwrap();
        assert_eq!(s.to_list(), "0-3,32");
        assert_eq!(s.to_mask(), "00000001,0000000f");
        assert_eq!(CpuSet::parse_mask("ff").unwrap().to_list(), "0-7");
        assert!(CpuSet::parse_mask("xyz").is_err());
        assert!(CpuSet::parse_mask("").is_err());
    }
}
