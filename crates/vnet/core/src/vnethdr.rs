//! The virtio-net header (`struct virtio_net_hdr`, 10 bytes) that a TAP opened with
//! `IFF_VNET_HDR` puts before every frame. It carries checksum and segmentation offload state,
//! which is how a 64 KiB TCP segment crosses user space in one read.

use crate::{need, CoreError};

/// Size of the header without `num_buffers`.
pub const VNET_HDR_LEN: usize = 10;
/// `flags`: the checksum at `csum_start + csum_offset` is only a pseudo-header sum.
pub const F_NEEDS_CSUM: u8 = 1;
/// `flags`: the checksum is known to be valid.
pub const F_DATA_VALID: u8 = 2;
/// `gso_type`: no segmentation.
pub const GSO_NONE: u8 = 0;
/// `gso_type`: TCP over IPv4.
pub const GSO_TCPV4: u8 = 1;
/// `gso_type`: UDP fragmentation offload (refused).
pub const GSO_UDP: u8 = 3;
/// `gso_type`: TCP over IPv6.
pub const GSO_TCPV6: u8 = 4;
/// `gso_type`: UDP segmentation (USO, refused: we do not enable it on the TAP).
pub const GSO_UDP_L4: u8 = 5;
/// `gso_type` flag: ECN (CWR) seen.
pub const GSO_ECN: u8 = 0x80;

/// Decoded virtio-net header (little-endian fields, as TAP uses on x86 and arm).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `F_NEEDS_CSUM` / `F_DATA_VALID`.
    pub flags: u8,
    /// `GSO_*`, possibly with `GSO_ECN`.
    pub gso_type: u8,
    /// Length of all headers up to the TCP payload (a hint; we recompute it).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where checksumming starts.
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Parses the first ten bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<VnetHdr, CoreError> {
        need(buf, VNET_HDR_LEN, "virtio-net header")?;
        let u = |i: usize| u16::from_le_bytes([buf[i], buf[i + 1]]);
        Ok(VnetHdr {
            flags: buf[0],
            gso_type: buf[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// Encodes the header.
    pub fn encode(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// The segmentation type without the ECN bit.
    pub fn gso(&self) -> u8 {
        self.gso_type & !GSO_ECN
    }

    /// True when the frame is a TSO super-frame that must be segmented before the wire.
    pub fn is_gso(&self) -> bool {
        self.gso() != GSO_NONE
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | GSO_ECN,
            hdr_len: 66,
            gso_size: 1398,
            csum_start: 34,
            csum_offset: 16,
        };
        let p = VnetHdr::parse(&h.encode()).unwrap();
        assert_eq!(p, h);
        assert_eq!(p.gso(), GSO_TCPV4);
        assert!(VnetHdr::parse(&[0; 9]).is_err());
    }
}
