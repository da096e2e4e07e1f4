//! VXLAN encapsulation (RFC 7348): an 8-byte header in front of the inner Ethernet frame,
//! carried in UDP (port 4789 by default), so a Linux kernel VXLAN device interoperates.

use crate::{need, CoreError};

/// Length of the VXLAN header.
pub const VXLAN_HLEN: usize = 8;
/// IANA-assigned VXLAN UDP port.
pub const VXLAN_PORT: u16 = 4789;
/// The "I" flag: the VNI field is valid.
const FLAG_I: u8 = 0x08;
/// Largest VNI (24 bits).
pub const VNI_MAX: u32 = 0x00ff_ffff;

/// Writes the VXLAN header for `vni` into `out[..8]`.
pub fn encode(vni: u32, out: &mut [u8; VXLAN_HLEN]) {
    let v = (vni & VNI_MAX).to_be_bytes();
    *out = [FLAG_I, 0, 0, 0, v[1], v[2], v[3], 0];
}

/// Returns the header for `vni` as an array.
pub fn header(vni: u32) -> [u8; VXLAN_HLEN] {
    let mut h = [0u8; VXLAN_HLEN];
    encode(vni, &mut h);
    h
}

/// Parses a VXLAN datagram: returns the VNI and the inner frame.
///
/// Reserved bits are ignored on receipt as RFC 7348 asks; the I flag must be set, and the
/// inner frame must at least hold an Ethernet header.
pub fn decode(datagram: &[u8]) -> Result<(u32, &[u8]), CoreError> {
    need(
        datagram,
        VXLAN_HLEN + crate::frame::ETH_HLEN,
        "vxlan datagram",
    )?;
    if datagram[0] & FLAG_I == 0 {
        return Err(CoreError::Malformed {
            what: "vxlan header",
            why: "I flag clear",
        });
    }
    let vni = u32::from_be_bytes([0, datagram[4], datagram[5], datagram[6]]);
    Ok((vni, &datagram[VXLAN_HLEN..]))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut d = header(0x123456).to_vec();
        d.extend_from_slice(&[0u8; 14]);
        let (vni, inner) = decode(&d).unwrap();
        assert_eq!(vni, 0x123456);
        assert_eq!(inner.len(), 14);
        assert!(decode(&d[..21]).is_err());
        d[0] = 0;
        assert!(decode(&d).is_err());
    }

    #[test]
    fn matches_kernel_layout() {
        // Bytes a Linux vxlan device emits for VNI 42.
        assert_eq!(header(42), [0x08, 0, 0, 0, 0, 0, 42, 0]);
    }
}
