//! User-space receive coalescing (the software half of GRO).
//!
//! A VXLAN peer sends MTU-sized inner frames; with `UDP_GRO` the kernel hands us dozens of
//! them per `recvmsg`. Writing each to the TAP would cost a system call and a trip through
//! the stack per 1.4 KB. Instead, consecutive in-order segments of one TCP flow are merged
//! into one TSO frame: a rewritten header plus the payloads, written with one `writev` and a
//! virtio-net header that tells the kernel it is a GSO frame with a partial checksum.
//!
//! The merge rules are those of Linux TCP GRO, kept strict: same Ethernet, IP and TCP
//! headers except for lengths, ids, sequence numbers and checksums; contiguous sequence
//! numbers; every segment but the last exactly as long as the first; only ACK (and PSH on the
//! last segment) set. Anything else is passed through unmerged.

use crate::csum;
use crate::gso::{fix_ipv4_csum, set_ip_len, tcp_layout, tcp_pseudo, TcpLayout};
use crate::vnethdr::{VnetHdr, F_NEEDS_CSUM, GSO_TCPV4, GSO_TCPV6};

const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
/// Largest IP payload a merged frame may carry.
const MAX_MERGED: usize = 65_535 - 60 - 60;

/// A run of consecutive input frames `start..start + count`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// Index of the first frame.
    pub start: usize,
    /// Number of frames.
    pub count: usize,
    /// For `count > 1`: the merged header (payloads follow from each frame at `hdr_len`).
    pub merged: Option<Merged>,
}

/// Header of a coalesced TSO frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    /// Virtio-net header to write before the frame.
    pub vnet: VnetHdr,
    /// Ethernet + IP + TCP header with lengths and IP checksum fixed and the TCP checksum
    /// field holding the pseudo-header sum (as `F_NEEDS_CSUM` requires).
    pub header: Vec<u8>,
    /// Payload range `[hdr_len, end)` of each merged frame, in order.
    pub payloads: Vec<(usize, usize)>,
}

/// What makes a segment mergeable, taken from one frame.
struct Seg {
    lay: TcpLayout,
    seq: u32,
    flags: u8,
    len: usize,
}

fn seg(frame: &[u8]) -> Option<Seg> {
    let lay = tcp_layout(frame).ok()?;
    if !lay.v6 && lay.l4 - lay.l3 != 20 {
        return None;
    }
    let flags = frame[lay.l4 + 13];
    if flags & !(ACK | PSH) != 0 || flags & ACK == 0 {
        return None;
    }
    let len = lay.end - lay.payload;
    if len == 0 {
        return None;
    }
    let s = lay.l4 + 4;
    let seq = u32::from_be_bytes([frame[s], frame[s + 1], frame[s + 2], frame[s + 3]]);
    Some(Seg {
        lay,
        seq,
        flags,
        len,
    })
}

/// True when `b`'s header equals `a`'s apart from the fields segmentation changes.
fn same_flow(a: &[u8], b: &[u8], lay: &TcpLayout) -> bool {
    let (l3, l4) = (lay.l3, lay.l4);
    if a[..l3] != b[..l3] {
        return false;
    }
    let ip_same = if lay.v6 {
        a[l3..l3 + 4] == b[l3..l3 + 4] && a[l3 + 6..l4] == b[l3 + 6..l4]
    } else {
        a[l3] == b[l3]
            && a[l3 + 1] == b[l3 + 1]
            && a[l3 + 6..l3 + 10] == b[l3 + 6..l3 + 10]
            && a[l3 + 12..l4] == b[l3 + 12..l4]
    };
    // TCP: ports; ack, data offset and window; options. Not seq, flags or checksum.
    ip_same
        && a[l4..l4 + 4] == b[l4..l4 + 4]
        && a[l4 + 8..l4 + 13] == b[l4 + 8..l4 + 13]
        && a[l4 + 14..l4 + 16] == b[l4 + 14..l4 + 16]
        && a[l4 + 18..lay.payload] == b[l4 + 18..lay.payload]
}

/// True when the TCP checksum of the segment verifies.
fn csum_ok(frame: &[u8], lay: &TcpLayout) -> bool {
    let acc = tcp_pseudo(frame, lay, lay.end - lay.l4);
    csum::fold(csum::add(acc, &frame[lay.l4..lay.end])) == 0xffff
}

/// Splits `frames` into runs; runs of more than one frame come with a merged header.
///
/// A merged frame is marked partial-checksum, so the kernel will not check it again. Frame
/// `i` is therefore checksum-verified before it joins a run when `verify[i]` is true (or
/// missing); a frame that fails stays single, and the kernel checks and drops it. The
/// caller passes `false` only for frames an outer UDP checksum already protected.
pub fn coalesce(frames: &[&[u8]], verify: &[bool], out: &mut Vec<Run>) {
    out.clear();
    let mut i = 0;
    while i < frames.len() {
        let count = run_len(frames, i, verify);
        let merged = (count > 1).then(|| merge(&frames[i..i + count]));
        out.push(Run {
            start: i,
            count,
            merged: merged.flatten(),
        });
        i += count;
    }
}

fn run_len(frames: &[&[u8]], i: usize, verify: &[bool]) -> usize {
    let must = |k: usize| verify.get(k).copied().unwrap_or(true);
    let head = frames[i];
    let Some(h) = seg(head) else { return 1 };
    if h.flags & PSH != 0 || (must(i) && !csum_ok(head, &h.lay)) {
        return 1;
    }
    let mut n = 1;
    let mut next_seq = h.seq.wrapping_add(h.len as u32);
    let mut total = h.len;
    while let Some(f) = frames.get(i + n) {
        let Some(s) = seg(f) else { break };
        if s.lay
            != (TcpLayout {
                end: s.lay.end,
                ..h.lay
            })
            || s.seq != next_seq
            || s.len > h.len
            || total + s.len > MAX_MERGED
            || !same_flow(head, f, &h.lay)
            || (must(i + n) && !csum_ok(f, &s.lay))
        {
            break;
        }
        n += 1;
        total += s.len;
        next_seq = next_seq.wrapping_add(s.len as u32);
        if s.len < h.len || s.flags & PSH != 0 {
            break;
        }
    }
    n
}

fn merge(frames: &[&[u8]]) -> Option<Merged> {
    let head = frames[0];
    let lay = tcp_layout(head).ok()?;
    let hl = lay.payload;
    let mut payloads = Vec::with_capacity(frames.len());
    let mut total = 0;
    let mut psh = 0;
    for f in frames {
        let l = tcp_layout(f).ok()?;
        payloads.push((l.payload, l.end));
        total += l.end - l.payload;
        psh |= f[l.l4 + 13] & PSH;
    }
    let mut header = head[..hl].to_vec();
    let tcp_len = hl - lay.l4 + total;
    set_ip_len(&mut header, &lay, tcp_len);
    if !lay.v6 {
        fix_ipv4_csum(&mut header, lay.l3, lay.l4);
    }
    header[lay.l4 + 13] |= psh;
    let ps = csum::fold(tcp_pseudo(&header, &lay, tcp_len));
    header[lay.l4 + 16..lay.l4 + 18].copy_from_slice(&ps.to_be_bytes());
    let vnet = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: if lay.v6 { GSO_TCPV6 } else { GSO_TCPV4 },
        hdr_len: hl as u16,
        gso_size: (lay.end - lay.payload) as u16,
        csum_start: lay.l4 as u16,
        csum_offset: 16,
    };
    Some(Merged {
        vnet,
        header,
        payloads,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::gso::segment;
    use crate::gso::tests::{checksums_ok, tcp4_frame};

    fn cut(payload: &[u8], mss: u16) -> Vec<Vec<u8>> {
        let big = tcp4_frame(77, 0x18, payload);
        let vh = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: mss,
            ..Default::default()
        };
        let mut segs = Vec::new();
        segment(&big, &vh, &mut segs).unwrap();
        segs.iter()
            .map(|s| {
                let mut f = s.header().to_vec();
                f.extend_from_slice(&big[s.payload.clone()]);
                f
            })
            .collect()
    }

    #[test]
    fn segment_then_coalesce_is_identity() {
        let payload: Vec<u8> = (0..9000u32).map(|i| (i * 13) as u8).collect();
        let frames = cut(&payload, 1448);
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let mut runs = Vec::new();
        coalesce(&refs, &[], &mut runs);
        assert_eq!(runs.len(), 1);
        let m = runs[0].merged.as_ref().unwrap();
        assert_eq!(m.vnet.gso_size, 1448);
        let mut whole = m.header.clone();
        for (f, (a, b)) in refs.iter().zip(&m.payloads) {
            whole.extend_from_slice(&f[*a..*b]);
        }
        // With the checksum finished, the merged frame equals the original TSO frame.
        crate::gso::complete_csum(&mut whole, &m.vnet).unwrap();
        assert!(checksums_ok(&whole));
        assert_eq!(whole[66..], payload[..]);
        assert_eq!(whole[47] & PSH, PSH);
    }

    #[test]
    fn gaps_bad_checksums_and_other_flows_break_runs() {
        let payload = vec![7u8; 6000];
        let mut frames = cut(&payload, 1000);
        frames.remove(2); // gap after frame 1
        frames[3][60] ^= 0xff; // corrupt payload of (new) frame 3... header byte in options
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let mut runs = Vec::new();
        coalesce(&refs, &[], &mut runs);
        let counts: Vec<usize> = runs.iter().map(|r| r.count).collect();
        assert_eq!(counts.iter().sum::<usize>(), frames.len());
        assert_eq!(counts[0], 2);
        assert!(runs.iter().all(|r| r.count == 1 || r.merged.is_some()));
        let junk: [&[u8]; 2] = [&[0u8; 3], &[1u8; 70]];
        coalesce(&junk, &[false, false], &mut runs);
        assert_eq!(runs.len(), 2);
    }
}
