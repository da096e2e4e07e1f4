//! User-space TCP segmentation (the software half of TSO).
//!
//! A TAP with `TUN_F_TSO4|TUN_F_TSO6` hands us TCP frames of up to 64 KiB. VXLAN on a
//! 1500-byte underlay cannot carry them, and a kernel VXLAN peer expects ordinary MTU-sized
//! inner frames, so we cut them here into frames that each carry `gso_size` payload bytes
//! with fixed-up IP lengths, IP ids, TCP sequence numbers, flags and full checksums. The
//! payload is never copied: a [`Segment`] names a header (built here) and a payload range
//! of the original frame, so the daemon can hand both to `sendmsg` as an iovec.

use crate::frame::{EthHeader, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use crate::vnethdr::{VnetHdr, F_NEEDS_CSUM, GSO_TCPV4, GSO_TCPV6};
use crate::{csum, need, CoreError};
use std::ops::Range;

/// Largest header we build: Ethernet with two VLAN tags, IPv4 with options, TCP with options.
pub const MAX_HDR: usize = 22 + 60 + 60;
/// TCP flags that may appear only on the last segment.
const FIN_PSH: u8 = 0x01 | 0x08;
/// TCP CWR flag, only on the first segment.
const CWR: u8 = 0x80;

/// Layer-3/4 layout of a TCP frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpLayout {
    /// Offset of the IP header.
    pub l3: usize,
    /// Offset of the TCP header.
    pub l4: usize,
    /// Offset of the TCP payload (total header length).
    pub payload: usize,
    /// True for IPv6.
    pub v6: bool,
    /// Length of the frame as the IP header declares it (frames may carry padding).
    pub end: usize,
}

/// Finds the IP and TCP headers of an Ethernet frame carrying TCP over IPv4 or IPv6
/// (without IPv6 extension headers or IPv4 fragmentation).
pub fn tcp_layout(frame: &[u8]) -> Result<TcpLayout, CoreError> {
    const WHAT: &str = "tcp frame";
    let eth = EthHeader::parse(frame)?;
    let l3 = eth.l3_offset;
    let (l4, v6, end) = match eth.ethertype {
        ETHERTYPE_IPV4 => {
            need(frame, l3 + 20, "ipv4 header")?;
            let ihl = usize::from(frame[l3] & 0x0f) * 4;
            if frame[l3] >> 4 != 4 || ihl < 20 {
                return Err(CoreError::Malformed {
                    what: "ipv4 header",
                    why: "bad version/ihl",
                });
            }
            if frame[l3 + 9] != 6 {
                return Err(CoreError::Malformed {
                    what: WHAT,
                    why: "not tcp",
                });
            }
            if u16::from_be_bytes([frame[l3 + 6], frame[l3 + 7]]) & 0x3fff != 0 {
                return Err(CoreError::Malformed {
                    what: WHAT,
                    why: "ipv4 fragment",
                });
            }
            let tot = usize::from(u16::from_be_bytes([frame[l3 + 2], frame[l3 + 3]]));
            (l3 + ihl, false, l3 + tot)
        }
        ETHERTYPE_IPV6 => {
            need(frame, l3 + 40, "ipv6 header")?;
            if frame[l3 + 6] != 6 {
                return Err(CoreError::Malformed {
                    what: WHAT,
                    why: "not tcp (or ipv6 extension header)",
                });
            }
            let plen = usize::from(u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]));
            (l3 + 40, true, l3 + 40 + plen)
        }
        _ => {
            return Err(CoreError::Malformed {
                what: WHAT,
                why: "not ip",
            })
        }
    };
    need(frame, l4 + 20, "tcp header")?;
    let doff = usize::from(frame[l4 + 12] >> 4) * 4;
    if doff < 20 {
        return Err(CoreError::Malformed {
            what: "tcp header",
            why: "data offset below 5",
        });
    }
    let payload = l4 + doff;
    if end < payload || end > frame.len() {
        return Err(CoreError::Malformed {
            what: WHAT,
            why: "ip length disagrees with frame",
        });
    }
    if payload > MAX_HDR {
        return Err(CoreError::Malformed {
            what: WHAT,
            why: "headers too long",
        });
    }
    Ok(TcpLayout {
        l3,
        l4,
        payload,
        v6,
        end,
    })
}

/// Pseudo-header sum of the TCP segment described by `lay` with `l4_len` TCP bytes.
pub(crate) fn tcp_pseudo(frame_hdr: &[u8], lay: &TcpLayout, l4_len: usize) -> u64 {
    let (src, dst) = if lay.v6 {
        (
            &frame_hdr[lay.l3 + 8..lay.l3 + 24],
            &frame_hdr[lay.l3 + 24..lay.l3 + 40],
        )
    } else {
        (
            &frame_hdr[lay.l3 + 12..lay.l3 + 16],
            &frame_hdr[lay.l3 + 16..lay.l3 + 20],
        )
    };
    csum::pseudo(src, dst, 6, l4_len as u32)
}

/// Rewrites the IPv4 header checksum of the header at `l3`.
pub(crate) fn fix_ipv4_csum(hdr: &mut [u8], l3: usize, l4: usize) {
    hdr[l3 + 10] = 0;
    hdr[l3 + 11] = 0;
    let c = csum::finish(0, &hdr[l3..l4]);
    hdr[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
}

/// Sets the IP length fields of a header for `l4_len` bytes of TCP header plus payload.
pub(crate) fn set_ip_len(hdr: &mut [u8], lay: &TcpLayout, l4_len: usize) {
    if lay.v6 {
        hdr[lay.l3 + 4..lay.l3 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
    } else {
        let tot = (lay.l4 - lay.l3 + l4_len) as u16;
        hdr[lay.l3 + 2..lay.l3 + 4].copy_from_slice(&tot.to_be_bytes());
    }
}

/// One wire frame cut from a TSO frame: `header[..header_len]` followed by
/// `frame[payload]` of the original frame.
#[derive(Clone, Debug)]
pub struct Segment {
    /// Ethernet + IP + TCP header of this segment, checksums filled in.
    pub header: [u8; MAX_HDR],
    /// Valid bytes of `header`.
    pub header_len: usize,
    /// Payload bytes of the original frame that follow the header.
    pub payload: Range<usize>,
}

impl Segment {
    /// The header bytes.
    pub fn header(&self) -> &[u8] {
        &self.header[..self.header_len]
    }

    /// Length of the whole segment on the wire.
    pub fn len(&self) -> usize {
        self.header_len + self.payload.len()
    }

    /// True when the segment has neither header nor payload (never produced).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Cuts a TSO `frame` described by `vh` into segments, appending them to `out`
/// (cleared first). Returns the segment payload size used.
pub fn segment(frame: &[u8], vh: &VnetHdr, out: &mut Vec<Segment>) -> Result<usize, CoreError> {
    out.clear();
    let lay = tcp_layout(frame)?;
    match (vh.gso(), lay.v6) {
        (GSO_TCPV4, false) | (GSO_TCPV6, true) => {}
        _ => {
            return Err(CoreError::Malformed {
                what: "gso frame",
                why: "gso type does not match the packet",
            })
        }
    }
    let mss = usize::from(vh.gso_size);
    if mss == 0 {
        return Err(CoreError::Malformed {
            what: "gso frame",
            why: "gso_size is zero",
        });
    }
    let payload = &frame[lay.payload..lay.end];
    let hl = lay.payload;
    let tcp_hl = hl - lay.l4;
    let seq0 = u32::from_be_bytes([
        frame[lay.l4 + 4],
        frame[lay.l4 + 5],
        frame[lay.l4 + 6],
        frame[lay.l4 + 7],
    ]);
    let id0 = u16::from_be_bytes([frame[lay.l3 + 4], frame[lay.l3 + 5]]);
    let flags0 = frame[lay.l4 + 13];
    let nseg = payload.len().div_ceil(mss).max(1);
    out.reserve(nseg);
    for i in 0..nseg {
        let start = i * mss;
        let len = mss.min(payload.len() - start);
        let mut header = [0u8; MAX_HDR];
        let h = &mut header[..hl];
        h.copy_from_slice(&frame[..hl]);
        set_ip_len(h, &lay, tcp_hl + len);
        if !lay.v6 {
            h[lay.l3 + 4..lay.l3 + 6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            fix_ipv4_csum(h, lay.l3, lay.l4);
        }
        let seq = seq0.wrapping_add(start as u32);
        h[lay.l4 + 4..lay.l4 + 8].copy_from_slice(&seq.to_be_bytes());
        let mut flags = flags0;
        if i + 1 != nseg {
            flags &= !FIN_PSH;
        }
        if i != 0 {
            flags &= !CWR;
        }
        h[lay.l4 + 13] = flags;
        h[lay.l4 + 16] = 0;
        h[lay.l4 + 17] = 0;
        let body = &payload[start..start + len];
        let acc = tcp_pseudo(h, &lay, tcp_hl + len);
        let acc = csum::add(acc, &h[lay.l4..hl]);
        let c = csum::finish(acc, body);
        h[lay.l4 + 16..lay.l4 + 18].copy_from_slice(&c.to_be_bytes());
        out.push(Segment {
            header,
            header_len: hl,
            payload: lay.payload + start..lay.payload + start + len,
        });
    }
    Ok(mss)
}

/// Completes a partial checksum (`F_NEEDS_CSUM` without segmentation) in place, so the
/// frame can leave the host on a path without checksum offload.
pub fn complete_csum(frame: &mut [u8], vh: &VnetHdr) -> Result<(), CoreError> {
    if vh.flags & F_NEEDS_CSUM == 0 {
        return Ok(());
    }
    let start = usize::from(vh.csum_start);
    let field = start + usize::from(vh.csum_offset);
    if field + 2 > frame.len() {
        return Err(CoreError::Malformed {
            what: "virtio-net header",
            why: "checksum offset beyond frame",
        });
    }
    // The field holds the pseudo-header sum; summing over it and complementing finishes it.
    let c = csum::finish(0, &frame[start..]);
    // A zero UDP checksum means "none"; RFC 768 sends all ones instead.
    let c = if c == 0 { 0xffff } else { c };
    frame[field..field + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    /// Builds an Ethernet/IPv4/TCP frame with `payload` bytes, with a valid checksum.
    pub(crate) fn tcp4_frame(seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let tot = (20 + 32 + payload.len()) as u16;
        f.extend_from_slice(&[
            0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        f[16..18].copy_from_slice(&tot.to_be_bytes());
        f.extend_from_slice(&[0x30, 0x39, 0x14, 0x51]);
        f.extend_from_slice(&seq.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 9, 0x80, flags, 0x01, 0xf6, 0, 0, 0, 0]);
        f.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9]); // NOP NOP timestamps
        f.extend_from_slice(payload);
        fix_ipv4_csum(&mut f, 14, 34);
        let lay = tcp_layout(&f).unwrap();
        let acc = tcp_pseudo(&f, &lay, f.len() - 34);
        let c = csum::finish(acc, &f[34..]);
        f[50..52].copy_from_slice(&c.to_be_bytes());
        f
    }

    /// True when the IPv4 and TCP checksums of `f` verify.
    pub(crate) fn checksums_ok(f: &[u8]) -> bool {
        let lay = tcp_layout(f).unwrap();
        let ip_ok = lay.v6 || csum::fold(csum::add(0, &f[lay.l3..lay.l4])) == 0xffff;
        let acc = tcp_pseudo(f, &lay, lay.end - lay.l4);
        ip_ok && csum::fold(csum::add(acc, &f[lay.l4..lay.end])) == 0xffff
    }

    #[test]
    fn segments_reassemble_and_verify() {
        let payload: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let big = tcp4_frame(1000, 0x18, &payload);
        let vh = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            gso_size: 1400,
            csum_start: 34,
            csum_offset: 16,
            hdr_len: 66,
        };
        let mut segs = Vec::new();
        assert_eq!(segment(&big, &vh, &mut segs).unwrap(), 1400);
        assert_eq!(segs.len(), 4);
        let mut joined = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            let mut f = s.header().to_vec();
            f.extend_from_slice(&big[s.payload.clone()]);
            assert!(checksums_ok(&f), "segment {i}");
            let seq = u32::from_be_bytes([f[38], f[39], f[40], f[41]]);
            assert_eq!(seq, 1000 + 1400 * i as u32);
            assert_eq!(f[47] & 0x08 != 0, i == 3, "PSH only on last");
            joined.extend_from_slice(&f[66..]);
        }
        assert_eq!(joined, payload);
    }

    #[test]
    fn rejects_mismatched_gso_and_garbage() {
        let big = tcp4_frame(0, 0x10, &[0u8; 100]);
        let mut segs = Vec::new();
        let v6 = VnetHdr {
            gso_type: GSO_TCPV6,
            gso_size: 10,
            ..Default::default()
        };
        assert!(segment(&big, &v6, &mut segs).is_err());
        let zero = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 0,
            ..Default::default()
        };
        assert!(segment(&big, &zero, &mut segs).is_err());
        let v4 = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 10,
            ..Default::default()
        };
        assert!(segment(&big[..60], &v4, &mut segs).is_err());
    }

    #[test]
    fn completes_partial_checksum() {
        let good = tcp4_frame(5, 0x18, b"hello world");
        let mut partial = good.clone();
        let lay = tcp_layout(&partial).unwrap();
        let ps = csum::fold(tcp_pseudo(&partial, &lay, partial.len() - 34));
        partial[50..52].copy_from_slice(&ps.to_be_bytes());
        let vh = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 34,
            csum_offset: 16,
            ..Default::default()
        };
        complete_csum(&mut partial, &vh).unwrap();
        assert_eq!(partial, good);
        let bad = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 200,
            csum_offset: 16,
            ..Default::default()
        };
        assert!(complete_csum(&mut partial, &bad).is_err());
    }
}
