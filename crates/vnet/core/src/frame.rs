//! MAC addresses and Ethernet header parsing.

use crate::{need, CoreError};
use std::fmt;
use std::str::FromStr;

/// Length of an Ethernet header without VLAN tags.
pub const ETH_HLEN: usize = 14;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType of an 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;

/// A 48-bit IEEE MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// True for group (multicast and broadcast) addresses.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }

    /// Reads a MAC from the first six bytes of `b` (caller checked the length).
    fn from_slice(b: &[u8]) -> MacAddr {
        let mut m = [0u8; 6];
        m.copy_from_slice(&b[..6]);
        MacAddr(m)
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for MacAddr {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || CoreError::BadMac(s.to_string());
        let mut m = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for byte in m.iter_mut() {
            let p = parts.next().ok_or_else(bad)?;
            if p.is_empty() || p.len() > 2 {
                return Err(bad());
            }
            *byte = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(MacAddr(m))
    }
}

/// The addressing part of an Ethernet frame, as the router needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthHeader {
    /// Destination MAC.
    pub dst: MacAddr,
    /// Source MAC.
    pub src: MacAddr,
    /// EtherType after any VLAN tags.
    pub ethertype: u16,
    /// Offset of the layer-3 header (14, or 18 with one VLAN tag).
    pub l3_offset: usize,
}

impl EthHeader {
    /// Parses the Ethernet header of `frame`, skipping up to two VLAN tags.
    pub fn parse(frame: &[u8]) -> Result<EthHeader, CoreError> {
        need(frame, ETH_HLEN, "ethernet header")?;
        let dst = MacAddr::from_slice(&frame[0..6]);
        let src = MacAddr::from_slice(&frame[6..12]);
        let mut off = 12;
        let mut ethertype = u16::from_be_bytes([frame[12], frame[13]]);
        let mut tags = 0;
        while ethertype == ETHERTYPE_VLAN || ethertype == 0x88a8 {
            tags += 1;
            if tags > 2 {
                return Err(CoreError::Malformed {
                    what: "ethernet header",
                    why: "more than two VLAN tags",
                });
            }
            off += 4;
            need(frame, off + 2, "vlan tag")?;
            ethertype = u16::from_be_bytes([frame[off], frame[off + 1]]);
        }
        if src.is_multicast() {
            return Err(CoreError::Malformed {
                what: "ethernet header",
                why: "multicast source MAC",
            });
        }
        Ok(EthHeader {
            dst,
            src,
            ethertype,
            l3_offset: off + 2,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn mac_round_trip() {
        let m: MacAddr = "02:aB:00:0c:dd:1".parse().unwrap();
        assert_eq!(m.to_string(), "02:ab:00:0c:dd:01");
        assert!("02:ab:00:0c:dd".parse::<MacAddr>().is_err());
        assert!("02:ab:00:0c:dd:01:02".parse::<MacAddr>().is_err());
        assert!("02:ab:00:0c:dd:xyz".parse::<MacAddr>().is_err());
        assert!(MacAddr::BROADCAST.is_multicast());
    }

    #[test]
    fn parses_plain_and_vlan_frames() {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45]);
        let h = EthHeader::parse(&f).unwrap();
        assert_eq!(h.ethertype, ETHERTYPE_IPV4);
        assert_eq!(h.l3_offset, 14);
        let mut v = f[..12].to_vec();
        v.extend_from_slice(&[0x81, 0x00, 0, 5, 0x86, 0xdd]);
        let h = EthHeader::parse(&v).unwrap();
        assert_eq!((h.ethertype, h.l3_offset), (ETHERTYPE_IPV6, 18));
        assert!(EthHeader::parse(&v[..15]).is_err());
        let mut bad = f.clone();
        bad[6] = 1;
        assert!(EthHeader::parse(&bad).is_err());
    }
}
